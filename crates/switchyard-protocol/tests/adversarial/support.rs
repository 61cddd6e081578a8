//! What every property shares: the real fixtures, ways to mangle them,
//! hostile JSON, arbitrary chunkings, the watchdog and the size bounds.

use std::fmt::Debug;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::LazyLock;
use std::time::Duration;

use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::Value;
use switchyard_protocol::sse::{SseDecoder, SseEvent};

pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/");

/// Cases per property (`PROPTEST_CASES` overrides, for a longer hunt), and
/// no failure files written into the source tree.
pub fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// === fixtures ===

#[derive(Debug)]
pub struct Fixture {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Files of `dirs` (under `fixtures/`) whose name passes `keep`, sorted. A
/// missing folder or an empty selection fails the test: a moved fixture
/// tree must not turn the suite into a silent no-op.
fn load(dirs: &[&str], keep: impl Fn(&str) -> bool, at_least: usize) -> Vec<Fixture> {
    let mut out = Vec::new();
    for dir in dirs {
        let path = format!("{ROOT}{dir}");
        let entries =
            std::fs::read_dir(&path).unwrap_or_else(|e| panic!("fixtures missing at {path}: {e}"));
        for e in entries {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            if keep(&name) {
                let bytes = std::fs::read(e.path()).unwrap();
                out.push(Fixture {
                    name: format!("{dir}/{name}"),
                    bytes,
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    assert!(
        out.len() >= at_least,
        "expected at least {at_least} fixtures in {dirs:?}, found {}",
        out.len()
    );
    out
}

const CHAT_DIRS: [&str; 4] = [
    "providers/openai",
    "providers/deepseek",
    "providers/azure",
    "providers/qwen",
];

fn sse_of(dirs: &[&str], at_least: usize) -> Vec<Fixture> {
    load(dirs, |n| n.ends_with(".sse"), at_least)
}

pub static OPENAI_SSE: LazyLock<Vec<Fixture>> = LazyLock::new(|| sse_of(&CHAT_DIRS, 15));
pub static ANTHROPIC_SSE: LazyLock<Vec<Fixture>> =
    LazyLock::new(|| sse_of(&["providers/anthropic"], 7));
pub static GEMINI_SSE: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    load(
        &["providers/gemini"],
        |n| n.ends_with(".sse") || n == "stream_error_midstream.txt",
        9,
    )
});
pub static RESPONSES_SSE: LazyLock<Vec<Fixture>> =
    LazyLock::new(|| sse_of(&["providers/openai-responses"], 5));
/// Every stream of every provider (for decoders fed the wrong dialect).
pub static ALL_SSE: LazyLock<Vec<&'static Fixture>> = LazyLock::new(|| {
    [&OPENAI_SSE, &ANTHROPIC_SSE, &GEMINI_SSE, &RESPONSES_SSE]
        .into_iter()
        .flat_map(|s| s.iter())
        .collect()
});

/// The head of each stream of [`ALL_SSE`] (see [`rewrite`]), for the
/// properties that run every decoder on every case.
pub static ALL_SSE_HEADS: LazyLock<Vec<Vec<u8>>> =
    LazyLock::new(|| ALL_SSE.iter().map(|f| rewrite(&f.bytes, &[])).collect());

/// Whole answers (`*.response.json`, the chat and embedding ones alike) and
/// the bodies of the recorded errors (`*.http.json`), every provider.
pub static BODIES: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    let dirs = [
        "providers/openai",
        "providers/deepseek",
        "providers/azure",
        "providers/qwen",
        "providers/anthropic",
        "providers/gemini",
        "providers/openai-responses",
    ];
    let mut out = load(
        &dirs,
        |n| n.ends_with(".response.json") || n.ends_with(".http.json"),
        80,
    );
    for f in &mut out {
        if f.name.ends_with(".http.json") {
            f.bytes = error_body(&f.bytes);
        }
    }
    out
});

/// The bodies small enough for a property's every case (the embeddings and
/// model lists, 13 to 134 KB, are only cut, in [`BODIES`]' sweep).
pub static SMALL_BODIES: LazyLock<Vec<&'static Fixture>> = LazyLock::new(|| {
    BODIES
        .iter()
        .filter(|f| f.bytes.len() <= 8 * 1024)
        .collect()
});

/// The body of an error envelope: `body` (JSON) or `body_raw` (text).
fn error_body(envelope: &[u8]) -> Vec<u8> {
    let v: Value = serde_json::from_slice(envelope).unwrap();
    match (&v["body"], &v["body_raw"]) {
        (Value::Null, Value::String(raw)) => raw.clone().into_bytes(),
        (body, _) => serde_json::to_vec(body).unwrap(),
    }
}

/// Client request bodies: the chat requests of the OpenAI-compatible
/// providers, Anthropic's, the Responses API's, and what Claude Code and
/// Codex really sent (`fixtures/agents/`, the `body` of each recording).
pub static OPENAI_REQUESTS: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    load(
        &CHAT_DIRS,
        |n| n.starts_with("chat_") && n.ends_with(".request.json"),
        8,
    )
});
pub static ANTHROPIC_REQUESTS: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    let mut out = load(
        &["providers/anthropic"],
        |n| n.ends_with(".request.json") && !n.starts_with("count_tokens"),
        6,
    );
    out.extend(agent_bodies("agents/claude_code", 5));
    out
});
pub static RESPONSES_REQUESTS: LazyLock<Vec<Fixture>> = LazyLock::new(|| {
    let mut out = load(
        &["providers/openai-responses"],
        |n| n.ends_with(".request.json") && !n.starts_with("input_tokens"),
        6,
    );
    out.extend(agent_bodies("agents/codex", 3));
    out
});

fn agent_bodies(dir: &str, at_least: usize) -> Vec<Fixture> {
    let mut out = load(&[dir], |n| n.ends_with(".json"), at_least);
    for f in &mut out {
        let v: Value = serde_json::from_slice(&f.bytes).unwrap();
        f.bytes = serde_json::to_vec(&v["body"]).unwrap();
    }
    out
}

// === mangling bytes ===

/// One edit of a byte string; positions are taken modulo its length.
#[derive(Debug, Clone)]
pub enum Edit {
    Truncate(Index),
    Flip(Index, u8),
    Insert(Index, Vec<u8>),
    Delete(Index, usize),
    /// Repeat a stretch (`len` bytes) `times` more times.
    Repeat(Index, usize, usize),
}

/// Bytes that mean something to SSE and JSON, and some that mean nothing.
fn spice() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            &b"\""[..],
            b"\\",
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"\n",
            b"\r",
            b"\r\n",
            b"\n\n",
            b"\r\r",
            b"data: ",
            b"event: ",
            b": ping\n\n",
            b"data: [DONE]\n\n",
            b"\\u0000",
            b"\\ud800",
            b"\xff\xfe",
            b"\xe2\x82",
            b"null",
            b"4294967295",
            b"-1",
            b"1e999",
        ])
        .prop_map(<[u8]>::to_vec),
        prop::collection::vec(any::<u8>(), 1..8),
    ]
}

pub fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<Index>().prop_map(Edit::Truncate),
        (any::<Index>(), 1..=255u8).prop_map(|(i, x)| Edit::Flip(i, x)),
        (any::<Index>(), spice()).prop_map(|(i, b)| Edit::Insert(i, b)),
        (any::<Index>(), 1..64usize).prop_map(|(i, n)| Edit::Delete(i, n)),
        (any::<Index>(), 1..200usize, 1..8usize).prop_map(|(i, n, k)| Edit::Repeat(i, n, k)),
    ]
}

pub fn edits() -> impl Strategy<Value = Vec<Edit>> {
    prop::collection::vec(edit(), 1..5)
}

pub fn apply(bytes: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut b = bytes.to_vec();
    for e in edits {
        let at = |i: &Index, len: usize| if len == 0 { 0 } else { i.index(len + 1) };
        match e {
            Edit::Truncate(i) => b.truncate(at(i, b.len())),
            Edit::Flip(i, x) if !b.is_empty() => {
                let p = i.index(b.len());
                b[p] ^= x;
            }
            Edit::Flip(..) => {}
            Edit::Insert(i, s) => {
                let p = at(i, b.len());
                b.splice(p..p, s.iter().copied());
            }
            Edit::Delete(i, n) => {
                let p = at(i, b.len());
                let end = (p + n).min(b.len());
                b.drain(p..end);
            }
            Edit::Repeat(i, n, k) => {
                let p = at(i, b.len());
                let end = (p + n).min(b.len());
                let piece = b[p..end].to_vec();
                for _ in 0..*k {
                    b.splice(end..end, piece.iter().copied());
                }
            }
        }
    }
    b
}

/// Arbitrary bytes, half of them from the alphabet SSE and JSON are made of
/// (so that arbitrary input reaches past the first check).
pub fn noise(max: usize) -> impl Strategy<Value = Vec<u8>> {
    const ALPHABET: &[u8] = b"\r\n\n:data event{}[]\",0123456789 nultrefas\\";
    // One plain byte per element (a union per element is slow to draw).
    prop::collection::vec(any::<u8>(), 0..max).prop_map(|mut v| {
        for b in &mut v {
            if *b < 128 {
                *b = ALPHABET[usize::from(*b) % ALPHABET.len()];
            }
        }
        v
    })
}

// === chunking ===

/// Cut points of a byte string: any number of arbitrary boundaries.
pub fn cuts() -> impl Strategy<Value = Vec<Index>> {
    prop::collection::vec(any::<Index>(), 0..12)
}

/// `bytes` split at `cuts` (positions modulo the length; empty pieces kept:
/// a read may bring nothing).
pub fn split<'a>(bytes: &'a [u8], cuts: &[Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::with_capacity(at.len() + 1);
    let mut from = 0;
    for p in at {
        out.push(&bytes[from..p]);
        from = p;
    }
    out.push(&bytes[from..]);
    out
}

/// SSE events of `bytes` fed in `chunks`, checking the decoder's own bound
/// as it goes: what it holds is never more than what it was given and has
/// not handed back.
pub fn sse_events(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut d = SseDecoder::new();
    let mut out = Vec::new();
    let (mut pushed, mut taken) = (0, 0);
    for c in chunks {
        d.push(c);
        pushed += c.len();
        while let Some(ev) = d.next_event().expect("small inputs are never too large") {
            taken += ev.raw.len();
            out.push(ev);
        }
        assert!(
            d.pending() <= pushed - taken,
            "decoder holds {} bytes, {pushed} pushed, {taken} handed back",
            d.pending()
        );
    }
    out.extend(d.finish());
    assert_eq!(d.pending(), 0, "bytes left after finish");
    // Asked again after its end, a decoder has nothing more to say.
    assert_eq!(d.next_event(), Ok(None));
    assert_eq!(d.finish(), None);
    assert!(
        out.len() <= pushed,
        "{} events from {pushed} bytes",
        out.len()
    );
    out
}

// === hostile JSON ===

/// A hostile value put somewhere in a document: `kind` picks the value,
/// `at` the node it replaces among those of the kind's [`Class`].
#[derive(Debug, Clone)]
pub struct Hostile {
    pub at: Index,
    pub kind: usize,
}

/// Which nodes a hostile value replaces: a huge number goes where a number
/// was (an `index`, a token count), a nasty string where a string was (an
/// id, a JSON path), a copy of an array's item into an array (50 choices).
#[derive(Clone, Copy, PartialEq)]
enum Class {
    Any,
    Number,
    Str,
    Array,
    Object,
}

/// The hostile values, as raw JSON text made from the value they replace.
#[allow(clippy::type_complexity)]
const KINDS: &[(Class, fn(&Value) -> String)] = &[
    (Class::Any, |_| "null".into()),
    (Class::Any, |_| "true".into()),
    (Class::Any, |_| "[]".into()),
    (Class::Any, |_| "{}".into()),
    (Class::Any, |_| "\"42\"".into()),
    (Class::Any, |o| format!("[{}]", json(o))),
    (Class::Any, |o| json(&Value::String(json(o)))),
    (Class::Any, |_| nest("[", "", "]", 3_000)),
    (Class::Any, |_| nest("{\"a\":", "1", "}", 3_000)),
    (Class::Any, |_| nest("[", "", "]", 120)),
    (Class::Number, |_| "-1".into()),
    (Class::Number, |_| "0".into()),
    (Class::Number, |_| "4294967295".into()),
    (Class::Number, |_| "4294967296".into()),
    (Class::Number, |_| "18446744073709551615".into()),
    (Class::Number, |_| "18446744073709551616".into()),
    (Class::Number, |_| "-9223372036854775809".into()),
    (Class::Number, |_| "1e999".into()),
    (Class::Number, |_| "-1.7976931348623157e308".into()),
    (Class::Number, |_| "0.5".into()),
    (Class::Str, |_| "\"\"".into()),
    (Class::Str, |_| {
        format!(
            "\"{}\\n\\u00e9\\\"{}\"",
            "a".repeat(40_000),
            "b".repeat(20_000)
        )
    }),
    (Class::Str, |_| "\"\\ud800\"".into()),
    (Class::Str, |_| "\"\\u0000\"".into()),
    (Class::Str, |_| "\"$[4294967295]\"".into()),
    (Class::Str, |_| "\"$[18446744073709551615]\"".into()),
    (Class::Str, |_| "\"$[99999999]\"".into()),
    (Class::Str, |_| format!("\"${}\"", ".a".repeat(30_000))),
    (Class::Str, |_| format!("\"${}\"", "[0]".repeat(20_000))),
    (Class::Str, |o| {
        json(&Value::String(o.as_str().unwrap_or("x").repeat(50)))
    }),
    (Class::Array, |o| {
        let item = o.as_array().and_then(|a| a.first()).unwrap_or(o);
        format!("[{}]", vec![json(item); 50].join(","))
    }),
    (Class::Array, |_| {
        format!("[{}]", vec!["4294967295"; 50].join(","))
    }),
    (Class::Object, duplicate_keys),
];

/// Every key of an object twice, the second time with another type.
fn duplicate_keys(o: &Value) -> String {
    let Some(m) = o.as_object().filter(|m| !m.is_empty()) else {
        return r#"{"a":1,"a":"x"}"#.into();
    };
    let fields: Vec<String> = m
        .iter()
        .flat_map(|(k, v)| {
            let other = if v.is_string() {
                Value::from(1)
            } else {
                Value::from("x")
            };
            let key = json(&Value::from(k.as_str()));
            [
                format!("{key}:{}", json(v)),
                format!("{key}:{}", json(&other)),
            ]
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

fn json(v: &Value) -> String {
    serde_json::to_string(v).unwrap()
}

fn nest(open: &str, inner: &str, close: &str, depth: usize) -> String {
    format!("{}{inner}{}", open.repeat(depth), close.repeat(depth))
}

pub fn hostile() -> impl Strategy<Value = Hostile> {
    (any::<Index>(), 0..KINDS.len()).prop_map(|(at, kind)| Hostile { at, kind })
}

/// Up to three hostile values in one document.
pub fn hostiles() -> impl Strategy<Value = Vec<Hostile>> {
    prop::collection::vec(hostile(), 1..4)
}

const MARK: &str = "\u{1}hostile\u{1}";

/// `doc` with hostile values put in, as JSON text. A value whose class has
/// no node in the document is left out.
pub fn plant(doc: &Value, hs: &[Hostile]) -> String {
    let mut doc = doc.clone();
    let mut raws = Vec::new();
    for h in hs {
        let (class, make) = KINDS[h.kind];
        let mut paths = Vec::new();
        nodes(&doc, &mut Vec::new(), &mut paths);
        paths.retain(|p| {
            let v = get(&doc, p);
            !is_mark(v)
                && match class {
                    Class::Any => true,
                    Class::Number => v.is_number(),
                    Class::Str => v.is_string(),
                    Class::Array => v.is_array(),
                    Class::Object => v.is_object(),
                }
        });
        if paths.is_empty() {
            continue;
        }
        let path = h.at.get(&paths).clone();
        let slot = get_mut(&mut doc, &path);
        raws.push(make(slot));
        *slot = Value::String(MARK.to_owned());
    }
    let mut text = json(&doc);
    let quoted = json(&Value::from(MARK));
    for raw in raws {
        // Marks are replaced in document order, not in the order they were
        // planted: which value lands where does not matter.
        text = text.replacen(&quoted, &raw, 1);
    }
    text
}

fn is_mark(v: &Value) -> bool {
    v.as_str() == Some(MARK)
}

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    At(usize),
}

fn nodes(v: &Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(here.clone());
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                here.push(Seg::At(i));
                nodes(x, here, out);
                here.pop();
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                here.push(Seg::Key(k.clone()));
                nodes(x, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn get<'v>(v: &'v Value, path: &[Seg]) -> &'v Value {
    path.iter().fold(v, |v, s| match s {
        Seg::Key(k) => &v[k.as_str()],
        Seg::At(i) => &v[*i],
    })
}

fn get_mut<'v>(v: &'v mut Value, path: &[Seg]) -> &'v mut Value {
    path.iter().fold(v, |v, s| match s {
        Seg::Key(k) => &mut v[k.as_str()],
        Seg::At(i) => &mut v[*i],
    })
}

/// Numbers near the edges of the integer types the decoders read into.
const HUGE: [&str; 9] = [
    "4294967295",
    "4294967294",
    "2147483648",
    "99999999",
    "65536",
    "18446744073709551615",
    "-1",
    "1e999",
    "1.5",
];

/// Strings that mean something to somebody: JSON paths reaching far or
/// deep, a run, a NUL. Short: they go into every event of a stream (the
/// long ones are in [`KINDS`], for one event).
fn nasty(i: usize) -> String {
    match i {
        0 => "$[4294967295]".into(),
        1 => "$[99999999]".into(),
        2 => "$[18446744073709551615]".into(),
        3 => format!("${}", ".a".repeat(300)),
        4 => format!("${}", "[0]".repeat(200)),
        5 => format!("$.a{}", "['b']".repeat(120)),
        6 => "x".repeat(2_000),
        7 => "\u{0}".into(),
        _ => String::new(),
    }
}
const NASTY: usize = 9;

/// Which scalars of a document to replace, and with what.
#[derive(Debug, Clone)]
pub struct Scalars {
    numbers: bool,
    which: usize,
    /// Bit `i % 64` says whether the `i`-th scalar is replaced.
    mask: u64,
}

pub fn scalars() -> impl Strategy<Value = Scalars> {
    prop_oneof![
        (0..HUGE.len(), any::<u64>()).prop_map(|(which, mask)| Scalars {
            numbers: true,
            which,
            mask
        }),
        (0..NASTY, any::<u64>()).prop_map(|(which, mask)| Scalars {
            numbers: false,
            which,
            mask
        }),
    ]
}

/// `doc` as JSON text with the scalars `how` picks replaced.
pub fn replace_scalars(doc: &Value, how: &Scalars) -> String {
    let mut doc = doc.clone();
    let mut paths = Vec::new();
    nodes(&doc, &mut Vec::new(), &mut paths);
    let mut n = 0;
    for p in paths {
        let v = get_mut(&mut doc, &p);
        let hit = if how.numbers {
            v.is_number()
        } else {
            v.is_string()
        };
        if hit {
            if how.mask >> (n % 64) & 1 == 1 {
                *v = Value::from(MARK);
            }
            n += 1;
        }
    }
    let raw = if how.numbers {
        HUGE[how.which].to_owned()
    } else {
        json(&Value::from(nasty(how.which)))
    };
    json(&doc).replace(&json(&Value::from(MARK)), &raw)
}

/// Each SSE event's JSON data in a stream, for hostile values.
pub fn json_events(events: &[SseEvent]) -> Vec<usize> {
    events
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.data
                .as_deref()
                .is_some_and(|d| serde_json::from_slice::<Value>(d).is_ok())
        })
        .map(|(i, _)| i)
        .collect()
}

/// A change to a stream, event by event.
#[derive(Debug, Clone)]
pub enum StreamEdit {
    /// Hostile values in one event's JSON data.
    Poison(Index, Vec<Hostile>),
    /// The same hostile values in every event's JSON data.
    PoisonAll(Vec<Hostile>),
    /// In every event, the numbers (or the strings) that `mask` picks
    /// become one huge number (one nasty string): a field only some events
    /// carry (a tool call's `index`, a JSON path) is reached this way.
    Everywhere(Scalars),
    /// One event sent `1..=50` more times.
    Repeat(Index, usize),
    Drop(Index),
    /// Two events trade places.
    Swap(Index, Index),
}

pub fn stream_edits() -> impl Strategy<Value = Vec<StreamEdit>> {
    let one = prop_oneof![
        3 => (any::<Index>(), hostiles()).prop_map(|(i, h)| StreamEdit::Poison(i, h)),
        2 => hostiles().prop_map(StreamEdit::PoisonAll),
        3 => scalars().prop_map(StreamEdit::Everywhere),
        1 => (any::<Index>(), 1..=50usize).prop_map(|(i, k)| StreamEdit::Repeat(i, k)),
        1 => any::<Index>().prop_map(StreamEdit::Drop),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| StreamEdit::Swap(a, b)),
    ];
    prop::collection::vec(one, 1..4)
}

/// A stream rewritten by `edits`, framed again as SSE.
pub fn rewrite(stream: &[u8], edits: &[StreamEdit]) -> Vec<u8> {
    let mut events: Vec<Vec<u8>> = sse_events(&[stream])
        .into_iter()
        .map(|e| frame(&e, None))
        .collect();
    // The head of a long stream: its middle repeats itself, and a case must
    // stay cheap (the last event is kept: it is often the one that ends it).
    let mut kept = 0;
    let head = events.iter().take_while(|e| {
        kept += e.len();
        kept <= 8 * 1024
    });
    let head = head.count().max(1);
    if head + 1 < events.len() {
        let last = events.pop();
        events.truncate(head);
        events.extend(last);
    }
    if events.is_empty() {
        return stream.to_vec();
    }
    for e in edits {
        match e {
            StreamEdit::Poison(i, hs) => {
                let parsed = sse_events(&[&events.concat()]);
                let candidates = json_events(&parsed);
                if candidates.is_empty() {
                    continue;
                }
                let at = *i.get(&candidates);
                let ev = &parsed[at];
                let doc: Value = serde_json::from_slice(ev.data.as_deref().unwrap()).unwrap();
                events[at] = frame(ev, Some(plant(&doc, hs).as_bytes()));
            }
            StreamEdit::PoisonAll(hs) => {
                let parsed = sse_events(&[&events.concat()]);
                for at in json_events(&parsed) {
                    let ev = &parsed[at];
                    let doc: Value = serde_json::from_slice(ev.data.as_deref().unwrap()).unwrap();
                    events[at] = frame(ev, Some(plant(&doc, hs).as_bytes()));
                }
            }
            StreamEdit::Everywhere(how) => {
                let parsed = sse_events(&[&events.concat()]);
                for at in json_events(&parsed) {
                    let ev = &parsed[at];
                    let doc: Value = serde_json::from_slice(ev.data.as_deref().unwrap()).unwrap();
                    events[at] = frame(ev, Some(replace_scalars(&doc, how).as_bytes()));
                }
            }
            StreamEdit::Repeat(i, k) => {
                let at = i.index(events.len());
                let copy = events[at].clone();
                for _ in 0..*k {
                    events.insert(at, copy.clone());
                }
            }
            StreamEdit::Drop(i) if events.len() > 1 => {
                events.remove(i.index(events.len()));
            }
            StreamEdit::Drop(_) => {}
            StreamEdit::Swap(a, b) => {
                let (a, b) = (a.index(events.len()), b.index(events.len()));
                events.swap(a, b);
            }
        }
    }
    events.concat()
}

/// An event as text again, with its data replaced if `data` is given.
fn frame(ev: &SseEvent, data: Option<&[u8]>) -> Vec<u8> {
    let Some(data) = data else {
        // The last event of a stream may lack its blank line: given one,
        // it stays one event wherever it moves.
        let mut out = ev.raw.to_vec();
        if ![&b"\n\n"[..], b"\r\n\r\n", b"\r\r"]
            .iter()
            .any(|t| out.ends_with(t))
        {
            out.extend_from_slice(b"\n\n");
        }
        return out;
    };
    let mut out = Vec::new();
    if let Some(name) = &ev.event {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(name);
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data);
    out.extend_from_slice(b"\n\n");
    out
}

// === bounds ===

/// How long any one decode may take: the inputs are small, so anything
/// near this is a loop that does not end.
const LIMIT: Duration = Duration::from_secs(20);

/// Run `f` on a thread of its own (2 MiB of stack, as a runtime worker has)
/// and fail if it does not finish within [`LIMIT`]; a panic in `f` is
/// passed on as it was.
pub fn within<R: Send + 'static>(what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::Builder::new()
        .name(what.to_owned())
        .stack_size(2 << 20)
        .spawn(move || {
            let _ = tx.send(f());
        })
        .unwrap();
    match rx.recv_timeout(LIMIT) {
        Ok(r) => {
            let _ = worker.join();
            r
        }
        Err(RecvTimeoutError::Timeout) => panic!("{what}: still running after {LIMIT:?}"),
        Err(RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!("the worker sends before it ends"),
        },
    }
}

/// The size of a value's debug form: a stand-in for the memory it holds.
pub fn size(v: &impl Debug) -> usize {
    format!("{v:?}").len()
}

/// What `n` bytes of input may become: a constant plus a fixed multiple.
/// Anything past it is amplification (a small input made into a large
/// state or output), which is how unbounded growth shows in small cases.
pub fn bound(n: usize, per_byte: usize) -> usize {
    4096 + per_byte * n
}
