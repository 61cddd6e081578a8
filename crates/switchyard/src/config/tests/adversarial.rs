//! The config loader against broken and hostile YAML (issue 22): arbitrary
//! bytes, the real configs (this module's `FULL`, the demo's, the Kubernetes
//! ConfigMap's, the book's) cut, flipped and rearranged line by line with
//! hostile values put in, and YAML built to cost (alias bombs, deep nesting,
//! huge numbers and lists). `load_str` must answer with a config or with
//! diagnostics that point into the text, without a panic, in bounded time.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::prop::config;
use proptest::prelude::*;
use proptest::sample::Index;

use super::{env, FULL};
use crate::config::{load_str, Diagnostic};

/// The real configs of the repository.
fn configs() -> Vec<String> {
    static CONFIGS: OnceLock<Vec<String>> = OnceLock::new();
    CONFIGS.get_or_init(read_configs).clone()
}

fn read_configs() -> Vec<String> {
    let mut out = vec![
        FULL.to_owned(),
        // The demo's (`demo::config_yaml`, placeholders filled).
        include_str!("../../demo.yaml")
            .replace("{mock_url}", "http://127.0.0.1:9")
            .replace("{listen}", "127.0.0.1:0")
            .replace("{admin_listen}", "127.0.0.1:0"),
    ];
    let configmap = include_str!("../../../../../deploy/kubernetes/configmap.yaml");
    let (_, block) = configmap
        .split_once("switchyard.yaml: |\n")
        .expect("the ConfigMap holds switchyard.yaml");
    let body: Vec<&str> = block
        .lines()
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .map(|l| l.get(4..).unwrap_or(""))
        .collect();
    out.push(body.join("\n"));
    // Every ```yaml block of the book, read at run time so that a new
    // chapter's configs are covered too (`tests/docs.rs` loads each whole).
    let mut pages = Vec::new();
    book_pages(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/src"),
        &mut pages,
    );
    for page in pages {
        for block in page.split("```yaml\n").skip(1) {
            out.push(block.split("```").next().unwrap_or_default().to_owned());
        }
    }
    assert!(out.len() >= 6, "real configs missing: {}", out.len());
    out
}

/// The text of every `.md` file under `dir`, in path order.
fn book_pages(dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            book_pages(&p, out);
        } else if p.extension().is_some_and(|e| e == "md") {
            out.push(std::fs::read_to_string(&p).unwrap());
        }
    }
}

/// How long one load may take: the inputs are small, so anything near
/// this is a loop that does not end.
const LIMIT: Duration = Duration::from_secs(20);

/// The stack `load_str` runs on: a reload runs on a runtime worker (2 MiB).
/// A release build parses the deepest YAML the parser accepts (64 levels)
/// in under 2 MiB, measured; a debug build's frames are about ten times
/// larger, so the tests give it more.
const STACK: usize = if cfg!(debug_assertions) {
    16 << 20
} else {
    2 << 20
};

/// `load_str` on a thread of its own, watched: a hang fails the test
/// instead of stalling it. Every diagnostic must point into the text and
/// say something.
fn load_checked(src: String) {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            let diags = load_str(&src, "t.yaml", &env).err().unwrap_or_default();
            check_positions(&src, &diags);
            let _ = tx.send(());
        })
        .unwrap();
    match rx.recv_timeout(LIMIT) {
        Ok(()) => worker.join().unwrap(),
        Err(RecvTimeoutError::Timeout) => panic!("load_str still running after {LIMIT:?}"),
        Err(RecvTimeoutError::Disconnected) => {
            if let Err(panic) = worker.join() {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

fn check_positions(src: &str, diags: &[Diagnostic]) {
    let lines = src.split('\n').count();
    for d in diags {
        assert!(!d.message.is_empty(), "{d:?}");
        assert!(
            (1..=lines + 1).contains(&d.line) && d.column >= 1,
            "{d} points outside a {lines}-line text"
        );
    }
}

// === mutations ===

#[derive(Debug, Clone)]
enum Edit {
    Truncate(Index),
    Flip(Index, u8),
    Insert(Index, &'static str),
    Delete(Index, usize),
    /// A line written `1..=8` more times.
    RepeatLine(Index, usize),
    DropLine(Index),
    SwapLines(Index, Index),
    /// Two spaces more (or fewer) in front of a line.
    Indent(Index, bool),
    /// The value of a `key: value` line replaced.
    Value(Index, Index),
    /// The values of the `key: value` lines `mask` picks (bit `i % 64` for
    /// the `i`-th) all replaced by one hostile value.
    Values(u64, Index),
    /// In the `key: value` lines `mask` picks, every number in the value
    /// made huge, the shape kept (`1m30s` → `99…9m99…9s`).
    Huge(u64, Index),
}

/// Text that means something to YAML or to the loader.
const SPICE: &[&str] = &[
    "&a ",
    "*a",
    "<<: *a\n",
    "!!binary ",
    "!!str ",
    "? ",
    "- ",
    ": ",
    "\t",
    "'",
    "\"",
    "|\n",
    ">-\n",
    "{",
    "}",
    "[",
    "]",
    "#",
    "${",
    "${X:-",
    "$${",
    "${OPENAI_API_KEY}",
    "\n",
    "---\n",
    "...\n",
    "%YAML 1.2\n",
    "\u{feff}",
    "\u{0}",
    "é",
    "\r\n",
    "\r",
];

/// Values that sit at the edges of what the readers accept.
fn hostile_value(i: usize) -> String {
    let huge = "9".repeat(400);
    match i {
        0 => huge.clone(),
        1 => format!("-{huge}"),
        2 => format!("{huge}d1h"),
        3 => format!("{huge}.5s"),
        4 => format!("{huge}TiB"),
        5 => "18446744073709551616".into(),
        6 => "-9223372036854775809".into(),
        7 => "1e999".into(),
        8 => ".nan".into(),
        9 => "-.inf".into(),
        10 => "0".into(),
        11 => "-1".into(),
        12 => "0.0000000001ms".into(),
        13 => "1d1d".into(),
        14 => "~".into(),
        15 => "[]".into(),
        16 => "{}".into(),
        17 => format!("\"{}\"", "x".repeat(20_000)),
        18 => "\"${NOPE}${}${1}${A:-${B}}\"".into(),
        19 => format!("{}{}", "[".repeat(200), "]".repeat(200)),
        20 => "*undefined".into(),
        21 => "!!binary aGVsbG8=".into(),
        22 => "2024-01-01T00:00:00Z".into(),
        23 => "0x7fffffffffffffff".into(),
        24 => "\"\\ud800\"".into(),
        _ => "\"a\\u0000b\"".into(),
    }
}
const HOSTILE_VALUES: usize = 26;

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        1 => any::<Index>().prop_map(Edit::Truncate),
        1 => (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Edit::Flip(i, x)),
        1 => (any::<Index>(), prop::sample::select(SPICE)).prop_map(|(i, s)| Edit::Insert(i, s)),
        1 => (any::<Index>(), 1..40usize).prop_map(|(i, n)| Edit::Delete(i, n)),
        1 => (any::<Index>(), 1..=8usize).prop_map(|(i, k)| Edit::RepeatLine(i, k)),
        1 => any::<Index>().prop_map(Edit::DropLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Edit::SwapLines(a, b)),
        1 => (any::<Index>(), any::<bool>()).prop_map(|(i, more)| Edit::Indent(i, more)),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(i, v)| Edit::Value(i, v)),
        2 => (any::<u64>(), any::<Index>()).prop_map(|(m, v)| Edit::Values(m, v)),
        2 => (any::<u64>(), any::<Index>()).prop_map(|(m, v)| Edit::Huge(m, v)),
    ]
}

fn apply(src: &str, edits: &[Edit]) -> String {
    let mut b = src.as_bytes().to_vec();
    for e in edits {
        let at = |i: &Index, len: usize| i.index(len + 1);
        match e {
            Edit::Truncate(i) => b.truncate(at(i, b.len())),
            Edit::Flip(i, x) if !b.is_empty() => {
                let p = i.index(b.len());
                b[p] ^= x;
            }
            Edit::Flip(..) => {}
            Edit::Insert(i, s) => {
                let p = at(i, b.len());
                b.splice(p..p, s.bytes());
            }
            Edit::Delete(i, n) => {
                let p = at(i, b.len());
                b.drain(p..(p + n).min(b.len()));
            }
            _ => b = edit_lines(&b, e),
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

fn edit_lines(b: &[u8], e: &Edit) -> Vec<u8> {
    let text = String::from_utf8_lossy(b);
    let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
    let n = lines.len();
    match e {
        Edit::RepeatLine(i, k) => {
            let at = i.index(n);
            let line = lines[at].clone();
            for _ in 0..*k {
                lines.insert(at, line.clone());
            }
        }
        Edit::DropLine(i) => {
            lines.remove(i.index(n));
        }
        Edit::SwapLines(a, b) => lines.swap(a.index(n), b.index(n)),
        Edit::Indent(i, more) => {
            let line = &mut lines[i.index(n)];
            if *more {
                line.insert_str(0, "  ");
            } else if line.starts_with("  ") {
                line.drain(..2);
            }
        }
        Edit::Value(i, v) => {
            let with_value = with_value(&lines);
            if !with_value.is_empty() {
                set_value(&mut lines[*i.get(&with_value)], v);
            }
        }
        Edit::Values(mask, v) => {
            for (k, j) in with_value(&lines).into_iter().enumerate() {
                if mask >> (k % 64) & 1 == 1 {
                    set_value(&mut lines[j], v);
                }
            }
        }
        Edit::Huge(mask, n) => {
            let digits = [
                "9".repeat(400),
                "18446744073709551616".into(),
                "4294967296".into(),
            ];
            let digits = n.get(&digits);
            for (k, j) in with_value(&lines).into_iter().enumerate() {
                if mask >> (k % 64) & 1 == 1 {
                    let (key, value) = lines[j].split_once(": ").unwrap_or_default();
                    lines[j] = format!("{key}: {}", huge_numbers(value, digits));
                }
            }
        }
        _ => unreachable!("byte edits are applied in place"),
    }
    lines.join("\n").into_bytes()
}

/// `value` with every run of digits replaced by `digits`.
fn huge_numbers(value: &str, digits: &str) -> String {
    let mut out = String::new();
    let mut in_number = false;
    for c in value.chars() {
        match (c.is_ascii_digit(), in_number) {
            (true, false) => out.push_str(digits),
            (true, true) => {}
            (false, _) => out.push(c),
        }
        in_number = c.is_ascii_digit();
    }
    out
}

/// The lines written `key: value`.
fn with_value(lines: &[String]) -> Vec<usize> {
    (0..lines.len())
        .filter(|&j| lines[j].trim_end().split_once(": ").is_some())
        .collect()
}

fn set_value(line: &mut String, v: &Index) {
    let (key, _) = line.split_once(": ").unwrap_or_default();
    *line = format!("{key}: {}", hostile_value(v.index(HOSTILE_VALUES)));
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn arbitrary_text(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        load_checked(String::from_utf8_lossy(&bytes).into_owned());
    }

    #[test]
    fn real_configs_mangled(
        which in any::<Index>(),
        edits in prop::collection::vec(edit(), 1..6),
    ) {
        let src = apply(which.get::<String>(&configs()), &edits);
        load_checked(src);
    }
}

/// Every real config cut at every line end. The first two (FULL, the
/// demo's) load whole: the mangling starts from valid configs. The others
/// name variables this test's environment does not set.
#[test]
fn every_real_config_cut_at_every_line() {
    let configs = configs();
    for src in &configs[..2] {
        if let Err(e) = load_str(src, "t.yaml", &env) {
            panic!("{e:#?}");
        }
    }
    for src in configs {
        for (cut, _) in src.match_indices('\n') {
            load_checked(src[..cut].to_owned());
        }
    }
}

proptest! {
    #![proptest_config(config(24))]

    /// Each anchor's list holds the previous one `fan` times: expanded,
    /// `fan^levels` nodes from a few hundred bytes. Up to 5 000 here; the
    /// parser refuses past 250 000 nodes (a debug build takes seconds to
    /// get there, a release one 0.7 s, measured), so no more is expanded.
    #[test]
    fn alias_bombs(
        (levels, fan) in (1..10u32, 2..16usize).prop_filter("small", |(l, f)| f.pow(*l) <= 5_000),
        at_route in any::<bool>(),
    ) {
        let levels = levels as usize;
        let mut src = String::from("x:\n");
        src.push_str(&format!("  a0: &a0 [{}]\n", vec!["v"; fan].join(", ")));
        for l in 1..levels {
            let prev = format!("*a{}", l - 1);
            src.push_str(&format!("  a{l}: &a{l} [{}]\n", vec![prev.as_str(); fan].join(", ")));
        }
        if at_route {
            src.push_str(&format!("routes:\n  r:\n    targets: *a{}\n", levels - 1));
        }
        let started = Instant::now();
        load_checked(src);
        prop_assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn deep_nesting(depth in 1..400usize, flow in any::<bool>()) {
        let src = if flow {
            format!("routes: {}{}\n", "[".repeat(depth), "]".repeat(depth))
        } else {
            let mut s = String::new();
            for d in 0..depth {
                s.push_str(&format!("{}k{d}:\n", "  ".repeat(d)));
            }
            s
        };
        load_checked(src);
    }
}
