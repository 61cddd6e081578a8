//! The book (`docs/src/`) and the README held to the code:
//!
//! - the configuration reference (`docs/src/configuration.md`) lists exactly
//!   the keys the config loader accepts, no more and no fewer. The loader is
//!   asked itself: a key it does not know is reported with the list of the
//!   keys it allows there, so a probe key put in each section reads that
//!   section's keys, and the sections inside it are found the same way;
//! - every relative link points to a file that exists, and every `#anchor`
//!   to a heading of that file (mdBook's anchor rule), and every page of the
//!   book is in its `SUMMARY.md`;
//! - every ```yaml block is a whole config that loads, as
//!   `switchyard check` would load it with the variables it names set.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_json::{Map, Value};
use switchyard::config::load_str;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `.md` files under `dir`, sorted.
fn markdown_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            markdown_under(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(p);
        }
    }
}

fn book_dir() -> PathBuf {
    repo().join("docs/src")
}

/// The book's pages and the README, with their text.
fn pages() -> Vec<(PathBuf, String)> {
    let mut files = vec![repo().join("README.md")];
    markdown_under(&book_dir(), &mut files);
    files
        .into_iter()
        .map(|p| {
            let text = read(&p);
            (p, text)
        })
        .collect()
}

/// The lines outside fenced code blocks, with their 1-based numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
        } else if !inside {
            out.push((i + 1, line));
        }
    }
    out
}

/// The targets of the inline links `[text](target)` outside code, with
/// their line numbers. A code span may go on over a line break (not over
/// a paragraph's end); a `](` inside one is not a link.
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut in_code = false;
    for (line_no, line) in prose(text) {
        if line.trim().is_empty() {
            in_code = false;
            continue;
        }
        let mut visible = String::new();
        for (i, part) in line.split('`').enumerate() {
            if i > 0 {
                in_code = !in_code;
            }
            visible.push_str(if in_code { " " } else { part });
        }
        let mut rest = visible.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push((line_no, after[..end].trim().to_owned()));
            rest = &after[end..];
        }
    }
    out
}

/// mdBook's id for a heading's text: a link's target dropped, then
/// alphanumerics, `_` and `-` kept
/// (lowercased), whitespace turned into `-`, the rest dropped.
fn heading_id(text: &str) -> String {
    let mut plain = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        plain.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find("](").zip(after.find(')')) {
            Some((mid, end)) if mid < end => {
                plain.push_str(&after[..mid]);
                rest = &after[end + 1..];
            }
            _ => {
                plain.push('[');
                rest = after;
            }
        }
    }
    plain.push_str(rest);
    plain
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The anchors of a page's headings; a repeated one gets `-1`, `-2`… as
/// mdBook numbers them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for (_, line) in prose(text) {
        let hashes = line.len() - line.trim_start_matches('#').len();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let id = heading_id(line[hashes..].trim().trim_end_matches('#').trim());
        let n = seen.entry(id.clone()).or_insert(0);
        out.insert(if *n == 0 { id } else { format!("{id}-{n}") });
        *n += 1;
    }
    out
}

#[test]
fn every_link_and_anchor_resolves() {
    let mut checked = 0;
    let mut broken = Vec::new();
    for (page, text) in pages() {
        for (line_no, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let at = format!("{}:{line_no}: `{target}`", page.display());
            if !file.exists() {
                broken.push(format!("{at}: no file {}", file.display()));
            } else if !anchor.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let known = anchors(&read(&file));
                if !known.contains(anchor) {
                    broken.push(format!(
                        "{at}: no heading with anchor `{anchor}` (has: {known:?})"
                    ));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked >= 50,
        "only {checked} links found: is the scan broken?"
    );
    println!("{checked} links checked");
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let summary = read(&book_dir().join("SUMMARY.md"));
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    let mut files = Vec::new();
    markdown_under(&book_dir(), &mut files);
    for f in files {
        let name = f
            .strip_prefix(book_dir())
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if name != "SUMMARY.md" {
            assert!(
                listed.contains(&name),
                "docs/src/{name} is not in SUMMARY.md"
            );
        }
    }
}

/// What a config in the docs may name: every variable is set (as an
/// operator following the docs would), except the two that would replace
/// the file's own addresses (`SWITCHYARD_LISTEN`, `SWITCHYARD_ADMIN_LISTEN`).
fn docs_env(name: &str) -> Option<String> {
    (!name.starts_with("SWITCHYARD_")).then(|| format!("value-of-{name}"))
}

#[test]
fn every_yaml_block_is_a_config_that_loads() {
    let mut loaded = 0;
    let mut failed = Vec::new();
    for (page, text) in pages() {
        // The rule the config's adversarial tests use too: every block
        // fenced as ```yaml is a whole config.
        for block in text.split("```yaml\n").skip(1) {
            let src = block.split("```").next().unwrap_or_default();
            let name = page.display().to_string();
            match load_str(src, &name, &docs_env) {
                Ok(_) => loaded += 1,
                Err(diags) => failed.extend(diags.iter().map(|d| d.to_string())),
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(loaded >= 3, "only {loaded} configs found in the docs");
    println!("{loaded} yaml blocks loaded");
}

// === the configuration reference against the loader ===

const PROBE: &str = "zz_docs_probe";

fn obj(key: &str, value: Value) -> Value {
    let mut m = Map::new();
    m.insert(key.to_owned(), value);
    Value::Object(m)
}

/// Puts a value somewhere in a whole config.
type Place = Rc<dyn Fn(Value) -> Value>;

/// Puts a value under a key, in one of the shapes a key's value may take.
type Shape = fn(&str, Value) -> Value;

/// The keys the loader allows in the mapping `place` puts the probe key in,
/// read from its "unknown key" diagnostic; `None` when that place is not a
/// mapping of named keys. (JSON is YAML, so the config is written as JSON.)
fn allowed_at(place: &Place) -> Option<Vec<String>> {
    let src = place(obj(PROBE, Value::from(1))).to_string();
    let diags = load_str(&src, "probe.yaml", &|_| None).err()?;
    let prefix = format!("unknown key `{PROBE}`; allowed keys: ");
    diags
        .iter()
        .find_map(|d| d.message.strip_prefix(prefix.as_str()))
        .map(|keys| keys.split(", ").map(str::to_owned).collect())
}

/// Every key under `path` (`""` for the top), by full path: `<name>` for a
/// name the config chooses, `[]` for a list's item.
fn walk(path: &str, place: Place, out: &mut BTreeSet<String>) {
    let Some(keys) = allowed_at(&place) else {
        return;
    };
    for key in keys {
        let full = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        assert!(out.insert(full.clone()), "{full} found twice");
        // The shapes of a value that holds keys of its own: a mapping, a
        // list of mappings, a mapping of named mappings.
        let shapes: [(String, Shape); 3] = [
            (full.clone(), obj),
            (format!("{full}[]"), |k, v| obj(k, Value::Array(vec![v]))),
            (format!("{full}.<name>"), |k, v| obj(k, obj("x", v))),
        ];
        for (inner, shape) in shapes {
            let outer = place.clone();
            let k = key.clone();
            walk(&inner, Rc::new(move |v: Value| outer(shape(&k, v))), out);
        }
    }
}

fn loader_keys() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk("", Rc::new(|v: Value| v), &mut out);
    out
}

/// The first cells of the rows of every table whose header starts with
/// `key`: each a key's full path in backticks.
fn documented_keys(reference: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_table = false;
    for (line_no, line) in prose(reference) {
        let line = line.trim();
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let first = line
            .trim_matches('|')
            .split('|')
            .next()
            .unwrap_or("")
            .trim();
        if first == "key" {
            in_table = true;
        } else if in_table && !first.starts_with("---") {
            let key = first
                .strip_prefix('`')
                .and_then(|k| k.strip_suffix('`'))
                .unwrap_or_else(|| {
                    panic!("configuration.md:{line_no}: `{first}` is not a key in backticks")
                });
            assert!(
                out.insert(key.to_owned()),
                "configuration.md:{line_no}: `{key}` twice"
            );
        }
    }
    out
}

#[test]
fn the_configuration_reference_lists_every_key_the_loader_accepts() {
    let loader = loader_keys();
    let documented = documented_keys(&read(&book_dir().join("configuration.md")));
    let undocumented: Vec<_> = loader.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&loader).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/src/configuration.md and the config loader disagree:\n\
         accepted by the loader, missing from the reference: {undocumented:?}\n\
         in the reference, not accepted by the loader: {unknown:?}"
    );
    // The probe itself must find the sections it is meant to find.
    for key in [
        "server.listen",
        "clients[].budget.per",
        "providers.<name>.keys[].weight",
        "providers.<name>.circuit.cooldown",
        "models[].pricing.cache_write",
        "routes.<name>.targets[].deployment",
        "routes.<name>.retry.max",
        "task_rules[].regex",
        "degraded.message",
    ] {
        assert!(loader.contains(key), "the probe missed {key}: {loader:?}");
    }
    println!("{} config keys checked", loader.len());
}
