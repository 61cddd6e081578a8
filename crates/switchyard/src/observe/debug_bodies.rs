//! Debug bodies (contract §11): a client with `clients[].debug: true` that
//! sends `x-switchyard-debug: 1`, under `observability.debug_bodies:
//! header`, has the request's body and the answer as its client received it
//! (a stream's frames as written) in its decision-log line, redacted.
//!
//! Redaction: the values of JSON members whose name says secret (`api_key`,
//! `authorization`, `password`, `*_secret`, `*_token` but not token counts)
//! are masked, and every string and any text that is not JSON goes through
//! [`super::redact::redact`]: the providers' configured key values and
//! anything shaped like a key. Each body is kept up to [`CAP`] bytes, so a
//! long stream cannot grow a log line without bound.

use serde::Serialize;
use serde_json::Value;

use super::redact::{redact, MASK};

/// The most of each body kept (request, answer).
pub const CAP: usize = 256 * 1024;

/// A request's bodies as they pass, redacted when the request ends.
#[derive(Debug)]
pub struct Capture {
    request: Vec<u8>,
    response: Vec<u8>,
    truncated: bool,
    /// Key values to mask (the providers' configured keys).
    known: Vec<String>,
}

/// What the decision-log line carries as `debug`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DebugBodies {
    pub request: String,
    pub response: String,
    /// A body was longer than [`CAP`] and was cut there.
    pub truncated: bool,
}

impl Capture {
    pub fn new(request: &[u8], known: Vec<String>) -> Box<Capture> {
        let mut c = Box::new(Capture {
            request: Vec::new(),
            response: Vec::new(),
            truncated: false,
            known,
        });
        c.truncated = keep(&mut c.request, request);
        c
    }

    /// Bytes the client was sent (a whole answer, or one stream frame).
    pub fn response(&mut self, bytes: &[u8]) {
        self.truncated |= keep(&mut self.response, bytes);
    }

    /// The bodies, redacted.
    pub fn done(self) -> DebugBodies {
        let known: Vec<&str> = self.known.iter().map(String::as_str).collect();
        DebugBodies {
            request: redact_body(&String::from_utf8_lossy(&self.request), &known),
            response: redact_body(&String::from_utf8_lossy(&self.response), &known),
            truncated: self.truncated,
        }
    }
}

/// Appends what fits under [`CAP`]; whether some was left out.
fn keep(into: &mut Vec<u8>, bytes: &[u8]) -> bool {
    let room = CAP.saturating_sub(into.len());
    into.extend_from_slice(&bytes[..bytes.len().min(room)]);
    bytes.len() > room
}

/// A body with its secrets masked: a JSON document member by member, an
/// event stream's `data:` lines the same way, anything else as text.
pub fn redact_body(text: &str, known: &[&str]) -> String {
    if let Ok(mut v) = serde_json::from_str::<Value>(text) {
        redact_value(&mut v, known);
        return v.to_string();
    }
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\r', '\n']);
        let data = body.strip_prefix("data:").map(str::trim_start);
        match data.and_then(|d| serde_json::from_str::<Value>(d).ok()) {
            Some(mut v) => {
                redact_value(&mut v, known);
                out.push_str("data: ");
                out.push_str(&v.to_string());
                out.push_str(&line[body.len()..]);
            }
            None => out.push_str(&redact(line, known)),
        }
    }
    out
}

fn redact_value(v: &mut Value, known: &[&str]) {
    match v {
        Value::String(s) => {
            let r = redact(s, known);
            if r != *s {
                *s = r;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|i| redact_value(i, known)),
        Value::Object(members) => {
            for (name, value) in members.iter_mut() {
                if secret_name(name) && !value.is_null() {
                    *value = Value::String(MASK.to_owned());
                } else {
                    redact_value(value, known);
                }
            }
        }
        _ => {}
    }
}

/// A member whose name says it holds a credential. Token counts
/// (`max_tokens`, `prompt_tokens`) are not credentials.
fn secret_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase().replace('-', "_");
    matches!(
        n.as_str(),
        "authorization" | "password" | "secret" | "token" | "credentials" | "x_api_key"
    ) || n.ends_with("api_key")
        || n.ends_with("apikey")
        || n.ends_with("_secret")
        || n.ends_with("_password")
        || n.ends_with("access_token")
        || n.ends_with("refresh_token")
        || n.ends_with("id_token")
        || n.ends_with("session_token")
        || n.ends_with("access_key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_members_and_key_shapes_are_masked_counts_are_not() {
        let body = r#"{"model":"m","max_tokens":5,"api_key":"abc123","metadata":{"client_secret":"s3cret","refresh_token":"r"},"messages":[{"role":"user","content":"use sk-live-0123456789abcdef and my-provider-key-value"}]}"#;
        let out = redact_body(body, &["my-provider-key-value"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["max_tokens"], 5);
        assert_eq!(v["api_key"], MASK);
        assert_eq!(v["metadata"]["client_secret"], MASK);
        assert_eq!(v["metadata"]["refresh_token"], MASK);
        let text = v["messages"][0]["content"].as_str().unwrap();
        assert_eq!(text, format!("use {MASK} and {MASK}"));
        for secret in ["abc123", "s3cret", "sk-live", "my-provider-key-value"] {
            assert!(!out.contains(secret), "{secret} in {out}");
        }
    }

    #[test]
    fn a_stream_is_redacted_event_by_event() {
        let sse = "event: x\ndata: {\"delta\":\"key sk-abcdefghijkl0123\"}\n\ndata: [DONE]\n\n";
        let out = redact_body(sse, &[]);
        assert!(
            out.starts_with("event: x\ndata: {\"delta\":\"key *****\"}\n\n"),
            "{out}"
        );
        assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
    }

    #[test]
    fn each_body_is_kept_up_to_the_cap() {
        let mut c = Capture::new(b"{}", vec![]);
        c.response(&vec![b'a'; CAP - 1]);
        c.response(b"bc");
        let d = c.done();
        assert!(d.truncated);
        assert_eq!(d.response.len(), CAP);
        assert!(d.response.ends_with("ab"));
    }
}
