//! The YAML document as a tree of positioned nodes, and typed accessors on it.
//!
//! serde-saphyr parses the text (it reports syntax errors with a position) into
//! this tree via `Spanned`; the typed mirror in `raw.rs` is then decoded from the
//! tree by hand, so that every unknown key and every wrong type is reported —
//! a derived `Deserialize` stops at the first one.

use std::ops::Range;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::Diags;

/// 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: usize,
    pub column: usize,
}

/// Where a value sits: its position and its dotted path (`routes.chat.targets[1]`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct At {
    pub pos: Pos,
    pub path: String,
}

impl At {
    pub fn child(&self, pos: Pos, key: &str) -> At {
        let path = if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        };
        At { pos, path }
    }
    pub fn index(&self, pos: Pos, i: usize) -> At {
        At {
            pos,
            path: format!("{}[{i}]", self.path),
        }
    }
}

/// A decoded value with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Sp<T> {
    pub value: T,
    pub at: At,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Int,
    Float,
    Str,
    /// A string whose `${…}` expansion failed (already reported): reads as nothing.
    Invalid,
}

#[derive(Debug, Clone)]
pub enum Value {
    /// Scalar text: the string for `Str`, the source spelling for the others.
    Scalar(Kind, String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Debug, Clone)]
pub struct Node {
    pub value: Value,
    pub pos: Pos,
    /// Byte range of the scalar in the source (for mapping `${` positions), when known.
    pub span: Option<Range<usize>>,
    /// A string that took (part of) its value from `${VAR}`: not written in clear.
    pub from_env: bool,
}

impl Node {
    pub fn is_null(&self) -> bool {
        matches!(self.value, Value::Scalar(Kind::Null, _))
    }
    pub fn describe(&self) -> String {
        match &self.value {
            Value::Scalar(Kind::Null | Kind::Invalid, _) => "nothing".into(),
            Value::Scalar(Kind::Bool, t) => format!("the boolean `{t}`"),
            Value::Scalar(Kind::Int | Kind::Float, t) => format!("the number `{t}`"),
            Value::Scalar(Kind::Str, t) => format!("the string `{t}`"),
            Value::Seq(_) => "a list".into(),
            Value::Map(_) => "a mapping".into(),
        }
    }
    /// Scalar text of a non-null scalar.
    pub fn text(&self) -> Option<&str> {
        match &self.value {
            Value::Scalar(k, t) if !matches!(k, Kind::Null | Kind::Invalid) => Some(t),
            _ => None,
        }
    }
}

/// What serde-saphyr hands us, before positions are attached.
enum Raw {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Raw>>),
    Map(Vec<(Spanned<Raw>, Spanned<Raw>)>),
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::Int(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u128<E>(self, v: u128) -> Result<Raw, E> {
        Ok(Raw::Int(i128::try_from(v).unwrap_or(i128::MAX)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = a.next_element()? {
            items.push(item);
        }
        Ok(Raw::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = a.next_key()? {
            entries.push((k, a.next_value()?));
        }
        Ok(Raw::Map(entries))
    }
}

/// How deeply mappings and lists may nest.
pub const MAX_DEPTH: usize = 32;
/// How many values (scalars, lists, mappings) a file may hold, aliases expanded.
pub const MAX_NODES: usize = 100_000;

/// Parses YAML text into a node tree; a syntax error becomes one diagnostic.
pub fn parse(src: &str, d: &mut Diags) -> Option<Node> {
    let opts = serde_saphyr::options! {
        // `no`, `on`, `y` stay strings (YAML 1.2): `region: no` is Norway.
        strict_booleans: true,
        with_snippet: false,
        // Duplicates reach our visitor, which reports each one.
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::PassThrough,
        // `.inf` reaches the number readers, which say "must be a finite number".
        non_finite_float_policy: serde_saphyr::options::NonFiniteFloatPolicy::PassThrough,
        // A config is a few levels deep (a provider's `options` a few more);
        // the parser's own depth limit (64) lets a nested file overflow a
        // thread's stack while it is turned into a tree (a 2 MiB tokio or
        // test thread, in a debug build, at about 45 levels).
        // And however aliases multiply it, a config is not a database.
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            flow_nesting_limit: MAX_DEPTH,
            max_nodes: MAX_NODES,
        },
    };
    match serde_saphyr::from_str_with_options::<Spanned<Raw>>(src, opts) {
        Ok(root) => Some(build(root, src)),
        Err(e) => {
            let pos = e
                .location()
                .map(|l| pos_in(src, &l))
                .unwrap_or(Pos { line: 1, column: 1 });
            let msg = e.to_string();
            // The position goes in the diagnostic's prefix, not twice.
            let msg = match msg.find(" at line ") {
                Some(i) => msg[..i].to_string(),
                None => msg,
            };
            let msg = if msg.contains("Depth {") || msg.contains("recursion limit exceeded") {
                format!("nested deeper than {MAX_DEPTH} levels")
            } else if msg.contains("Nodes {") {
                format!("more than {MAX_NODES} values (aliases expanded)")
            } else {
                msg
            };
            d.err(
                &At {
                    pos,
                    path: String::new(),
                },
                format!("YAML syntax error: {msg}"),
            );
            None
        }
    }
}

/// Where `l` is in `src` as an editor or `grep -n` counts: lines end at
/// `\n` only. The parser also ends a line at a lone `\r` (YAML 1.2), which
/// would name a line no editor shows, so the position is counted again from
/// the byte offset (or, for errors, which carry none, from the parser's own
/// line and column).
fn pos_in(src: &str, l: &serde_saphyr::Location) -> Pos {
    let (line, column) = (l.line() as usize, l.column() as usize);
    let at = match l.span().byte_offset() {
        Some(o) => Some(o as usize),
        None => yaml_offset(src, line, column),
    };
    let Some(before) = at.and_then(|at| src.get(..at)) else {
        return Pos { line, column };
    };
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    Pos {
        line: before.matches('\n').count() + 1,
        column: before[line_start..].chars().count() + 1,
    }
}

/// The byte offset of 1-based `line`:`column` as YAML counts them (a line
/// ends at `\n`, `\r\n` or a lone `\r`; columns are characters).
fn yaml_offset(src: &str, line: usize, column: usize) -> Option<usize> {
    let (mut l, mut c) = (1, 1);
    let mut chars = src.char_indices().peekable();
    while let Some((i, ch)) = chars.next() {
        if (l, c) == (line, column) {
            return Some(i);
        }
        match ch {
            '\r' if chars.peek().is_some_and(|&(_, n)| n == '\n') => {}
            '\n' | '\r' => (l, c) = (l + 1, 1),
            _ => c += 1,
        }
    }
    ((l, c) == (line, column)).then_some(src.len())
}

fn build(sp: Spanned<Raw>, src: &str) -> Node {
    let pos = pos_in(src, &sp.referenced);
    let span = sp.defined.span();
    let span = span.byte_offset().zip(span.byte_len()).and_then(|(o, l)| {
        let r = o as usize..(o + l) as usize;
        src.get(r.clone()).map(|_| r)
    });
    // A scalar's own spelling (for numbers and booleans read as strings, e.g. `model: 3.5`).
    let spelled = |fallback: String| {
        span.clone()
            .and_then(|r| src.get(r))
            .map(str::to_string)
            .unwrap_or(fallback)
    };
    let value = match sp.value {
        Raw::Null => Value::Scalar(Kind::Null, String::new()),
        Raw::Bool(b) => Value::Scalar(Kind::Bool, b.to_string()),
        Raw::Int(i) => Value::Scalar(Kind::Int, spelled(i.to_string())),
        Raw::Float(f) => Value::Scalar(Kind::Float, spelled(f.to_string())),
        Raw::Str(s) => Value::Scalar(Kind::Str, s),
        Raw::Seq(items) => Value::Seq(items.into_iter().map(|i| build(i, src)).collect()),
        Raw::Map(entries) => Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| (build(k, src), build(v, src)))
                .collect(),
        ),
    };
    let span = if sp.referenced == sp.defined {
        span
    } else {
        None
    };
    Node {
        value,
        pos,
        span,
        from_env: false,
    }
}
