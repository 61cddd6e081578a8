//! Typed reads from the node tree. Each reader reports its own problem and
//! returns `None`, so decoding goes on and every problem is collected.

use std::time::Duration;

use super::node::{At, Kind, Node, Sp, Value};
use super::{units, Diags};

/// A mapping being read as a struct; unknown and duplicate keys are reported up front.
pub struct Fields<'n> {
    pub at: At,
    entries: Vec<(&'n str, &'n Node, At)>,
}

/// Reads `node` as a mapping with the `allowed` keys. `null` reads as an empty mapping.
pub fn fields<'n>(d: &mut Diags, node: &'n Node, at: &At, allowed: &[&str]) -> Option<Fields<'n>> {
    let at = At {
        pos: node.pos,
        path: at.path.clone(),
    };
    let mut out = Fields {
        at,
        entries: Vec::new(),
    };
    for (k, key_at, v) in map_entries(d, node, &out.at)? {
        if !allowed.contains(&k) {
            let msg = format!("unknown key `{k}`; allowed keys: {}", allowed.join(", "));
            d.err(
                &At {
                    pos: key_at.pos,
                    path: key_at.path,
                },
                msg,
            );
        } else {
            out.entries.push((k, v, key_at));
        }
    }
    Some(out)
}

/// The entries of a mapping with free-form keys (provider names, routes…), duplicates reported.
/// Each entry's `At` is at the key.
pub fn map_entries<'n>(
    d: &mut Diags,
    node: &'n Node,
    at: &At,
) -> Option<Vec<(&'n str, At, &'n Node)>> {
    let pairs: &[(Node, Node)] = match &node.value {
        Value::Map(m) => m,
        Value::Scalar(Kind::Null, _) => &[],
        _ => return mismatch(d, node, at, "a mapping"),
    };
    let mut out: Vec<(&str, At, &Node)> = Vec::new();
    // A set, not a scan of `out`: a mapping may have thousands of keys.
    let mut seen = std::collections::HashSet::new();
    for (k, v) in pairs {
        let Some(name) = k.text() else {
            d.err(
                &at.child(k.pos, "?"),
                format!("a key must be a string, found {}", k.describe()),
            );
            continue;
        };
        let key_at = at.child(k.pos, name);
        if !seen.insert(name) {
            d.err(&key_at, format!("duplicate key `{name}`"));
            continue;
        }
        out.push((name, key_at, v));
    }
    Some(out)
}

/// The items of a list, each with its `At`.
pub fn items<'n>(d: &mut Diags, node: &'n Node, at: &At) -> Option<Vec<(&'n Node, At)>> {
    match &node.value {
        Value::Seq(xs) => Some(
            xs.iter()
                .enumerate()
                .map(|(i, x)| (x, at.index(x.pos, i)))
                .collect(),
        ),
        Value::Scalar(Kind::Null, _) => Some(Vec::new()),
        _ => mismatch(d, node, at, "a list"),
    }
}

fn mismatch<T>(d: &mut Diags, node: &Node, at: &At, want: &str) -> Option<T> {
    if matches!(node.value, Value::Scalar(Kind::Invalid, _)) {
        return None;
    }
    d.err(
        &here(node, at),
        format!("expected {want}, found {}", node.describe()),
    );
    None
}

impl<'n> Fields<'n> {
    /// The non-null value under `key`, with its `At` (at the value).
    pub fn node(&self, key: &str) -> Option<(&'n Node, At)> {
        let (_, v, key_at) = self.entries.iter().find(|(k, _, _)| *k == key)?;
        (!v.is_null()).then(|| {
            (
                *v,
                At {
                    pos: v.pos,
                    path: key_at.path.clone(),
                },
            )
        })
    }

    /// Whether `key` is written at all (even with no value).
    pub fn has(&self, key: &str) -> bool {
        self.entries.iter().any(|(k, _, _)| *k == key)
    }

    /// Reads `key` with one of the readers below.
    pub fn get<T>(&self, d: &mut Diags, key: &str, read: Reader<T>) -> Option<Sp<T>> {
        let (n, at) = self.node(key)?;
        read(d, n, &at)
    }

    /// Reads `key` as a list of items each read with `read` (bad items are skipped).
    pub fn list<T>(&self, d: &mut Diags, key: &str, read: Reader<T>) -> Option<Sp<Vec<Sp<T>>>> {
        let (n, at) = self.node(key)?;
        let xs = items(d, n, &at)?;
        let value = xs
            .into_iter()
            .filter_map(|(x, xat)| read(d, x, &xat))
            .collect();
        Some(Sp { value, at })
    }

    /// Reads `key` as one of the named `choices`.
    pub fn choice<T: Copy>(
        &self,
        d: &mut Diags,
        key: &str,
        choices: &[(&str, T)],
    ) -> Option<Sp<T>> {
        let s = self.get(d, key, string)?;
        pick(d, &s, choices)
    }
}

/// Maps a string onto one of `choices`, or reports the allowed names.
pub fn pick<T: Copy>(d: &mut Diags, s: &Sp<String>, choices: &[(&str, T)]) -> Option<Sp<T>> {
    match choices.iter().find(|(n, _)| *n == s.value) {
        Some((_, v)) => Some(Sp {
            value: *v,
            at: s.at.clone(),
        }),
        None => {
            let names: Vec<&str> = choices.iter().map(|(n, _)| *n).collect();
            d.err(
                &s.at,
                format!(
                    "unknown value `{}`; expected one of: {}",
                    s.value,
                    names.join(", ")
                ),
            );
            None
        }
    }
}

pub type Reader<T> = fn(&mut Diags, &Node, &At) -> Option<Sp<T>>;

/// The value's own position under the caller's path.
fn here(node: &Node, at: &At) -> At {
    At {
        pos: node.pos,
        path: at.path.clone(),
    }
}

fn sp<T>(value: T, node: &Node, at: &At) -> Option<Sp<T>> {
    Some(Sp {
        value,
        at: here(node, at),
    })
}

/// Any scalar, as text (numbers keep their spelling: `model: 3.5`).
pub fn string(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<String>> {
    match n.text() {
        Some(t) => sp(t.to_string(), n, at),
        None => mismatch(d, n, at, "a string"),
    }
}

/// A non-negative integer (also from a string, so `${PORT}` works).
pub fn uint(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<u64>> {
    let t = n
        .text()
        .filter(|_| matches!(&n.value, Value::Scalar(Kind::Int | Kind::Str, _)));
    match t.map(|t| t.trim().parse::<i128>()) {
        Some(Ok(v)) if v < 0 => {
            d.err(
                &here(n, at),
                format!("must be a non-negative integer, found {v}"),
            );
            None
        }
        Some(Ok(v)) => match u64::try_from(v) {
            Ok(v) => sp(v, n, at),
            Err(_) => {
                d.err(&here(n, at), format!("{v} is too large"));
                None
            }
        },
        _ => mismatch(d, n, at, "an integer"),
    }
}

/// A non-negative integer that fits in u32.
pub fn uint32(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<u32>> {
    let v = uint(d, n, at)?;
    match u32::try_from(v.value) {
        Ok(x) => Some(Sp { value: x, at: v.at }),
        Err(_) => {
            d.err(
                &v.at,
                format!("{} is too large (at most {})", v.value, u32::MAX),
            );
            None
        }
    }
}

/// A finite number.
pub fn float(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<f64>> {
    let t = n
        .text()
        .filter(|_| !matches!(&n.value, Value::Scalar(Kind::Bool, _)));
    match t.map(|t| t.trim().parse::<f64>()) {
        Some(Ok(v)) if v.is_finite() => sp(v, n, at),
        Some(_) if matches!(&n.value, Value::Scalar(Kind::Float, _)) => {
            d.err(
                &here(n, at),
                format!("must be a finite number, found {}", n.describe()),
            );
            None
        }
        _ => mismatch(d, n, at, "a number"),
    }
}

pub fn boolean(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<bool>> {
    match n.text() {
        Some("true") => sp(true, n, at),
        Some("false") => sp(false, n, at),
        _ => mismatch(d, n, at, "true or false"),
    }
}

pub fn duration(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<Duration>> {
    let s = string(d, n, at)?;
    match units::parse_duration(&s.value) {
        Ok(v) => Some(Sp { value: v, at: s.at }),
        Err(e) => {
            d.err(&s.at, e);
            None
        }
    }
}

/// Bytes: `20MiB`, `1MB`, or a plain integer.
pub fn size(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<u64>> {
    let s = string(d, n, at)?;
    match units::parse_size(&s.value) {
        Ok(v) => Some(Sp { value: v, at: s.at }),
        Err(e) => {
            d.err(&s.at, e);
            None
        }
    }
}

/// Converts a subtree to JSON (for provider `options`); keys must be strings.
pub fn json(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<serde_json::Value>> {
    use serde_json::Value as J;
    let v = match &n.value {
        Value::Scalar(Kind::Null, _) => J::Null,
        Value::Scalar(Kind::Invalid, _) => return None,
        Value::Scalar(Kind::Bool, t) => J::Bool(t == "true"),
        Value::Scalar(Kind::Int, t) => t
            .parse::<i64>()
            .map(J::from)
            .unwrap_or_else(|_| J::String(t.clone())),
        Value::Scalar(Kind::Float, _) => J::from(float(d, n, at)?.value),
        Value::Scalar(Kind::Str, t) => J::String(t.clone()),
        Value::Seq(_) => J::Array(
            items(d, n, at)?
                .into_iter()
                .filter_map(|(x, a)| json(d, x, &a))
                .map(|s| s.value)
                .collect(),
        ),
        Value::Map(_) => {
            let entries = map_entries(d, n, at)?;
            J::Object(
                entries
                    .into_iter()
                    .filter_map(|(k, a, v)| Some((k.to_string(), json(d, v, &a)?.value)))
                    .collect(),
            )
        }
    };
    sp(v, n, at)
}
