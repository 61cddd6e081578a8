//! The normalized request: what decides a request's answer, so that two
//! bodies that differ only in key order, whitespace or number spelling
//! (`0` / `0.0`) are the same request. Its sha256 is the decision log's
//! `input_hash` and the response cache's key material.
//!
//! Transport fields are left out (`stream`, `stream_options`): a streamed
//! and a whole answer to the same question are the same answer.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Top-level fields that change how the answer travels, not what it is.
const TRANSPORT: [&str; 2] = ["stream", "stream_options"];

pub struct Normalized {
    pub hash: [u8; 32],
    /// `temperature: 0` or a `seed`: the request asks for a repeatable
    /// answer (`cache.when: deterministic`).
    pub deterministic: bool,
}

impl Normalized {
    pub fn hex(&self) -> String {
        let mut out = [0u8; 64];
        let _ = hex::encode_to_slice(self.hash, &mut out);
        // Hex digits are ASCII: always valid UTF-8.
        std::str::from_utf8(&out).unwrap_or_default().to_owned()
    }
}

/// A JSON body, normalized and hashed. A body that is not JSON is hashed
/// as it came (its decode fails anyway; the log still gets a hash).
pub fn normalize(body: &[u8]) -> Normalized {
    let Ok(Value::Object(top)) = serde_json::from_slice::<Value>(body) else {
        return Normalized {
            hash: Sha256::new()
                .chain_update(b"raw:")
                .chain_update(body)
                .finalize()
                .into(),
            deterministic: false,
        };
    };
    let deterministic = top.get("temperature").and_then(Value::as_f64) == Some(0.0)
        || top.get("seed").is_some_and(|s| !s.is_null());
    let mut out = Vec::with_capacity(body.len());
    let mut keys: Vec<&String> = top
        .keys()
        .filter(|k| !TRANSPORT.contains(&k.as_str()))
        .collect();
    keys.sort_unstable();
    write_object(&mut out, keys.into_iter().map(|k| (k, &top[k])));
    Normalized {
        hash: Sha256::digest(&out).into(),
        deterministic,
    }
}

/// Canonical JSON: object keys sorted (whatever order the map keeps),
/// no whitespace, integral floats written as integers.
fn write(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort_unstable();
            write_object(out, keys.into_iter().map(|k| (k, &m[k])));
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, x);
            }
            out.push(b']');
        }
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                out.extend_from_slice(itoa::Buffer::new().format(f as i64).as_bytes());
            }
            _ => out.extend_from_slice(n.to_string().as_bytes()),
        },
        other => {
            // Strings, booleans, null: serde_json's own escaping.
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

fn write_object<'a>(out: &mut Vec<u8>, fields: impl Iterator<Item = (&'a String, &'a Value)>) {
    out.push(b'{');
    for (i, (k, v)) in fields.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let _ = serde_json::to_writer(&mut *out, k);
        out.push(b':');
        write(out, v);
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(body: &str) -> [u8; 32] {
        normalize(body.as_bytes()).hash
    }

    #[test]
    fn key_order_whitespace_and_number_spelling_do_not_matter() {
        let a = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0}"#;
        let b = "{ \"temperature\" : 0.0,\n \"messages\": [ {\"content\":\"hi\", \"role\":\"user\"} ],\n \"model\":\"m\" }";
        assert_eq!(h(a), h(b));
    }

    #[test]
    fn transport_fields_do_not_matter_but_content_does() {
        let a = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        let streamed = r#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}"#;
        assert_eq!(h(a), h(streamed));
        for other in [
            r#"{"model":"m","messages":[{"role":"user","content":"hi!"}]}"#,
            r#"{"model":"n","messages":[{"role":"user","content":"hi"}]}"#,
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5}"#,
            r#"{"model":"m","messages":[{"content":"hi","role":"assistant"}]}"#,
        ] {
            assert_ne!(h(a), h(other), "{other}");
        }
        // `stream` deeper down is content, not transport.
        let nested = r#"{"model":"m","messages":[{"role":"user","content":"hi","stream":1}]}"#;
        assert_ne!(h(a), h(nested));
    }

    #[test]
    fn deterministic_means_temperature_zero_or_a_seed() {
        let d = |b: &str| normalize(b.as_bytes()).deterministic;
        assert!(d(r#"{"temperature":0}"#));
        assert!(d(r#"{"temperature":0.0,"seed":null}"#));
        assert!(d(r#"{"seed":42,"temperature":1}"#));
        assert!(!d(r#"{"temperature":0.2}"#));
        assert!(!d(r#"{"seed":null}"#));
        assert!(!d("not json"));
    }

    #[test]
    fn a_body_that_is_not_json_still_hashes() {
        assert_eq!(h("garbage"), h("garbage"));
        assert_ne!(h("garbage"), h("garbage2"));
        assert_eq!(normalize(b"x").hex().len(), 64);
    }
}
