//! The layering holds: every `crate::` path in the library's sources names
//! a module of a lower layer (or the file's own top-level module), as the
//! table in `src/lib.rs` orders them, and every top-level module has a
//! place in that table. A new upward `use` fails here with the file and
//! the line.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The layer of each top-level module, from `lib.rs`'s `layer N  a b c` lines.
fn layers(lib: &str) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for line in lib.lines() {
        let Some(rest) = line.trim_start_matches("//!").trim().strip_prefix("layer ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let n: usize = words
            .next()
            .and_then(|n| n.parse().ok())
            .expect("layer number");
        for m in words {
            assert!(
                out.insert(m.to_owned(), n).is_none(),
                "{m} is in two layers"
            );
        }
    }
    out
}

/// `pub mod x;` lines of `lib.rs`: the top-level modules.
fn top_modules(lib: &str) -> Vec<String> {
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect()
}

/// `src` with its comments and the insides of its string and char
/// literals blanked (newlines kept, so lines still count).
fn code_only(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    // Blank `b[from..to]` (keeping newlines) and go on from `to`.
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        out.extend(
            b[from..to]
                .iter()
                .map(|&c| if c == b'\n' { c } else { b' ' }),
        );
    };
    while i < b.len() {
        let rest = &b[i..];
        let end = if rest.starts_with(b"//") {
            i + rest.iter().position(|&c| c == b'\n').unwrap_or(rest.len())
        } else if rest.starts_with(b"/*") {
            i + 2
                + rest[2..]
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(rest.len() - 2, |p| p + 2)
        } else if rest.starts_with(b"r#") || rest.starts_with(b"r\"") {
            let hashes = rest[1..].iter().take_while(|&&c| c == b'#').count();
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let body = 2 + hashes;
            i + body
                + rest[body..]
                    .windows(close.len())
                    .position(|w| w == close)
                    .map_or(rest.len() - body, |p| p + close.len())
        } else if rest[0] == b'"' {
            let mut j = 1;
            while j < rest.len() && rest[j] != b'"' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            i + (j + 1).min(rest.len())
        } else if rest[0] == b'\'' && (rest.get(1) == Some(&b'\\') || rest.get(2) == Some(&b'\'')) {
            // A char literal ('"', '\''), not a lifetime.
            let mut j = 1;
            while j < rest.len() && rest[j] != b'\'' {
                j += if rest[j] == b'\\' { 2 } else { 1 };
            }
            i + (j + 1).min(rest.len())
        } else {
            out.push(b[i]);
            i += 1;
            continue;
        };
        blank(&mut out, i, end.min(b.len()));
        i = end.min(b.len());
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Top-level modules a source text names through `crate::`: each with its
/// line, `crate::a::…` and every root of `crate::{a, b::c}`.
fn named(src: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    // Group imports can span lines: read the code as one text, lines kept.
    let text = code_only(src);
    let line_at = |i: usize| text[..i].matches('\n').count() + 1;
    let mut from = 0;
    while let Some(i) = text[from..].find("crate::") {
        let at = from + i;
        from = at + "crate::".len();
        // `switchyard_protocol::crate::` never occurs; a path ending in
        // `…crate::` (e.g. `$crate::`) is not ours.
        if at > 0
            && (text.as_bytes()[at - 1].is_ascii_alphanumeric() || text.as_bytes()[at - 1] == b'$')
        {
            continue;
        }
        let rest = &text[from..];
        if let Some(group) = rest.strip_prefix('{') {
            let body = &group[..group.find('}').unwrap_or(group.len())];
            for item in body.split(',') {
                let root: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !root.is_empty() {
                    out.push((root, line_at(at)));
                }
            }
        } else {
            let root: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push((root, line_at(at)));
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `crate::` path of `src` (a file of top-level module `top`) that
/// does not go down: "file:line: top (layer a) uses m (layer b)".
fn upward(file: &str, top: &str, src: &str, layer: &HashMap<String, usize>) -> Vec<String> {
    let Some(&own) = layer.get(top) else {
        return vec![format!("{file}: module {top} has no layer in lib.rs")];
    };
    named(src)
        .into_iter()
        .filter(|(m, _)| m != top && m != "self")
        .filter_map(|(m, line)| {
            let l = *layer.get(&m)?;
            (l >= own).then(|| format!("{file}:{line}: {top} (layer {own}) uses {m} (layer {l})"))
        })
        .collect()
}

#[test]
fn every_import_goes_down_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let layer = layers(&lib);
    let tops = top_modules(&lib);
    assert!(tops.len() >= 20, "lib.rs lists {} modules", tops.len());
    let unplaced: Vec<_> = tops.iter().filter(|m| !layer.contains_key(*m)).collect();
    assert!(
        unplaced.is_empty(),
        "modules with no layer in lib.rs: {unplaced:?}"
    );
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut wrong = Vec::new();
    let mut checked = 0;
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let top = first.trim_end_matches(".rs");
        if top == "lib" || top == "main" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        checked += named(&text).len();
        wrong.extend(upward(&rel.display().to_string(), top, &text, &layer));
    }
    assert!(checked > 400, "only {checked} crate:: paths found");
    assert!(
        wrong.is_empty(),
        "{} upward imports:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The check itself catches what it must: an upward `use`, a group import,
/// a path in an expression, a same-layer import; not a comment or a string.
#[test]
fn an_upward_import_is_caught() {
    let layer = layers("//! layer 0   error\n//! layer 1   config\n//! layer 2   observe sinks\n//! layer 3   ingress\n");
    let file = r#"
use crate::error::GatewayError; // fine
use crate::{config::Config,
    ingress::serve};
// use crate::ingress::x; a comment
fn f() { crate::ingress::go(); let s = "crate::ingress"; }
use crate::sinks::Sinks;
"#;
    let found = upward("observe/x.rs", "observe", file, &layer);
    assert_eq!(
        found,
        [
            "observe/x.rs:3: observe (layer 2) uses ingress (layer 3)",
            "observe/x.rs:6: observe (layer 2) uses ingress (layer 3)",
            "observe/x.rs:7: observe (layer 2) uses sinks (layer 2)",
        ]
    );
    assert!(upward("ingress/y.rs", "ingress", file, &layer).is_empty());
}
