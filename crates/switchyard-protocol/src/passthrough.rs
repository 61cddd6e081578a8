//! The passthrough view of a JSON request body: its top-level fields kept as
//! the raw text they arrived as, and a writer that splices in only what the
//! gateway must change. Used for same-dialect hops (OpenAI→OpenAI,
//! Anthropic→Anthropic), where decoding and re-encoding the whole body would
//! be wasted work.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// Top-level fields in arrival order.
pub type Fields<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// Parse a body that must be one JSON object (no trailing data, no duplicate keys).
pub fn parse_object(body: &str) -> Result<Fields<'_>, String> {
    let mut de = serde_json::Deserializer::from_str(body);
    let fields = de
        .deserialize_map(FieldsVisitor)
        .map_err(|e| format!("request body is not valid JSON: {e}"))?;
    de.end()
        .map_err(|e| format!("request body is not valid JSON: {e}"))?;
    Ok(fields)
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out: Self::Value = Vec::with_capacity(map.size_hint().unwrap_or(8));
        // A scan of the keys so far is cheapest for the dozen a request
        // has; past that a set, so a body of a million keys costs linear
        // time, not a quadratic hang.
        let mut seen: Option<std::collections::HashSet<Cow<'de, str>>> = None;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let value: &'de RawValue = map.next_value()?;
            let duplicate = match &mut seen {
                Some(set) => !set.insert(key.clone()),
                None if out.len() < 32 => out.iter().any(|(k, _)| *k == key),
                None => {
                    let mut set: std::collections::HashSet<_> =
                        out.iter().map(|(k, _)| k.clone()).collect();
                    let dup = !set.insert(key.clone());
                    seen = Some(set);
                    dup
                }
            };
            if duplicate {
                return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
            }
            out.push((key, value));
        }
        Ok(out)
    }
}

/// What to change on the way out.
#[derive(Debug, Default)]
pub struct Splice<'e> {
    /// Written first as `"model"`; `None` drops the client's `model` too.
    pub model: Option<&'e str>,
    /// Fields replaced by this raw JSON (written after the client's fields).
    pub replace: &'e [(&'e str, &'e str)],
    /// Fields dropped.
    pub remove: &'e [&'e str],
    /// Client-chosen extra fields (e.g. `provider_options`), then the
    /// provider's `options`; on the same key the provider wins.
    pub client_options: Option<&'e Map<String, Value>>,
    pub provider_options: Option<&'e Map<String, Value>>,
}

pub fn write(fields: &Fields<'_>, s: &Splice<'_>) -> Vec<u8> {
    let size: usize = fields
        .iter()
        .map(|(k, v)| k.len() + v.get().len() + 4)
        .sum();
    let mut out = Vec::with_capacity(size + 96);
    let merged = |k: &str| {
        s.provider_options.is_some_and(|o| o.contains_key(k))
            || s.client_options.is_some_and(|o| o.contains_key(k))
    };
    let mut first = true;
    let mut field = |out: &mut Vec<u8>, key: &str, raw: &[u8]| {
        if !std::mem::take(&mut first) {
            out.push(b',');
        }
        write_json_str(out, key);
        out.push(b':');
        out.extend_from_slice(raw);
    };
    out.push(b'{');
    if let Some(model) = s.model.filter(|_| !merged("model")) {
        let mut quoted = Vec::with_capacity(model.len() + 2);
        write_json_str(&mut quoted, model);
        field(&mut out, "model", &quoted);
    }
    for (key, raw) in fields {
        let k = key.as_ref();
        let skip = k == "model"
            || s.remove.contains(&k)
            || s.replace.iter().any(|(r, _)| *r == k)
            || merged(k);
        if !skip {
            field(&mut out, k, raw.get().as_bytes());
        }
    }
    for (k, raw) in s.replace {
        if !merged(k) {
            field(&mut out, k, raw.as_bytes());
        }
    }
    let provider_has = |k: &String| s.provider_options.is_some_and(|o| o.contains_key(k));
    let client = s
        .client_options
        .into_iter()
        .flatten()
        .filter(|(k, _)| !provider_has(k));
    for (k, v) in client.chain(s.provider_options.into_iter().flatten()) {
        // Serializing a Value into a Vec cannot fail.
        let raw = serde_json::to_vec(v).unwrap_or_default();
        field(&mut out, k, &raw);
    }
    out.push(b'}');
    out
}

fn write_json_str(out: &mut Vec<u8>, s: &str) {
    // Serializing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splices_only_what_it_must() {
        let body = r#"{"stream":true,"model":"alias","x":{"a" : 1},"drop_me":1}"#;
        let fields = parse_object(body).unwrap();
        let mut provider = Map::new();
        provider.insert("x".into(), serde_json::json!(2));
        let out = write(
            &fields,
            &Splice {
                model: Some("real"),
                remove: &["drop_me"],
                replace: &[("stream", "false")],
                provider_options: Some(&provider),
                ..Splice::default()
            },
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"model":"real","stream":false,"x":2}"#
        );
    }

    #[test]
    fn many_keys_parse_in_linear_time_and_late_duplicates_are_caught() {
        let mut body = String::from("{");
        for i in 0..200_000 {
            body.push_str(&format!("\"k{i}\":{i},"));
        }
        body.push_str("\"model\":\"m\"}");
        assert_eq!(parse_object(&body).unwrap().len(), 200_001);
        let dup = body.replace("\"model\":\"m\"}", "\"k7\":1}");
        let e = parse_object(&dup).unwrap_err();
        assert!(e.contains("duplicate field `k7`"), "{e}");
    }

    #[test]
    fn rejects_non_objects_and_duplicates() {
        assert!(parse_object("[1]").is_err());
        assert!(parse_object(r#"{"a":1,"a":2}"#).is_err());
        assert!(parse_object(r#"{"a":1} trailing"#).is_err());
    }
}
