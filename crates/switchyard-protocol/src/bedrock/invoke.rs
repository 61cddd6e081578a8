//! InvokeModel / InvokeModelWithResponseStream with an Anthropic Messages
//! body (MAPPING §16.6): the body is Anthropic's with Bedrock's version
//! marker, and each stream `chunk` wraps one Anthropic event in base64.

use std::borrow::Cow;
use std::fmt;

use base64::Engine as _;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// The `anthropic_version` Bedrock requires in the body.
pub const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// The key Bedrock adds to the last Anthropic stream event.
const INVOCATION_METRICS: &str = "amazon-bedrock-invocationMetrics";

/// An Anthropic Messages body as Bedrock InvokeModel takes it: `model` (in
/// the URL) and `stream` (chosen by the URL) removed, `anthropic_version`
/// set, and the `anthropic-beta` header's comma-separated values added to
/// `anthropic_beta` (after any already there, without repeats).
pub fn anthropic_body(body: &mut Map<String, Value>, betas: Option<&str>) -> Vec<u8> {
    body.remove("model");
    body.remove("stream");
    body.insert("anthropic_version".into(), Value::from(ANTHROPIC_VERSION));
    let mut all: Vec<Value> = match body.remove("anthropic_beta") {
        Some(Value::Array(a)) => a,
        Some(Value::String(s)) => vec![Value::String(s)],
        _ => Vec::new(),
    };
    for beta in betas.unwrap_or_default().split(',').map(str::trim) {
        if !beta.is_empty() && !all.iter().any(|b| b == beta) {
            all.push(Value::from(beta));
        }
    }
    if !all.is_empty() {
        body.insert("anthropic_beta".into(), Value::Array(all));
    }
    // Serializing a map of JSON values into a Vec cannot fail.
    serde_json::to_vec(body).unwrap_or_default()
}

/// A `chunk` payload that is not `{"bytes": "<base64 of an event>"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvokeError {
    /// Not JSON, or without a `bytes` string.
    Json(String),
    /// `bytes` is not base64.
    Base64(String),
    /// The decoded event is not a JSON object with a `type`.
    Event(String),
}

impl fmt::Display for InvokeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvokeError::Json(e) => write!(f, "unreadable InvokeModel chunk: {e}"),
            InvokeError::Base64(e) => write!(f, "InvokeModel chunk bytes not base64: {e}"),
            InvokeError::Event(e) => write!(f, "InvokeModel chunk event unreadable: {e}"),
        }
    }
}

impl std::error::Error for InvokeError {}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow)]
    bytes: Cow<'a, str>,
}

#[derive(Deserialize)]
struct EventHead<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, rename = "amazon-bedrock-invocationMetrics", borrow)]
    metrics: Option<&'a RawValue>,
}

/// One `chunk` frame's payload → the Anthropic event's `type` and its JSON,
/// ready to go out as `event: <type>\ndata: <json>`. The
/// `amazon-bedrock-invocationMetrics` Bedrock adds to `message_stop` is
/// removed (not part of Anthropic's schema); other events pass byte for
/// byte.
pub fn chunk_event(payload: &[u8]) -> Result<(String, Bytes), InvokeError> {
    let chunk: Chunk =
        serde_json::from_slice(payload).map_err(|e| InvokeError::Json(e.to_string()))?;
    let event = base64::engine::general_purpose::STANDARD
        .decode(chunk.bytes.as_bytes())
        .map_err(|e| InvokeError::Base64(e.to_string()))?;
    let head: EventHead =
        serde_json::from_slice(&event).map_err(|e| InvokeError::Event(e.to_string()))?;
    let kind = head.kind.into_owned();
    if head.metrics.is_none() {
        return Ok((kind, Bytes::from(event)));
    }
    let mut map: Map<String, Value> =
        serde_json::from_slice(&event).map_err(|e| InvokeError::Event(e.to_string()))?;
    map.remove(INVOCATION_METRICS);
    let json = serde_json::to_vec(&map).unwrap_or_default();
    Ok((kind, Bytes::from(json)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bedrock::eventstream::{FrameDecoder, FrameKind};
    use serde_json::json;

    use crate::bedrock::testdata::{json_file, read};

    fn object(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    /// The recorded InvokeModel bodies are what the client's first-party
    /// body (with `model` and `stream`) becomes.
    #[test]
    fn anthropic_bodies_match_the_recorded_ones() {
        for name in [
            "invoke_anthropic.request.json",
            "invoke_stream_anthropic.request.json",
        ] {
            let want = json_file(name);
            let mut client = object(want.clone());
            client.remove("anthropic_version");
            client.insert("model".into(), json!("claude-haiku-4-5"));
            client.insert("stream".into(), json!(name.contains("stream")));
            let got: Value = serde_json::from_slice(&anthropic_body(&mut client, None)).unwrap();
            assert_eq!(got, want, "{name}");
        }
    }

    /// The count-tokens fixture's inner body carries the beta from the
    /// `anthropic-beta` header as `anthropic_beta`.
    #[test]
    fn betas_from_the_header_go_in_the_body() {
        let wrapped = json_file("count_tokens_invoke.request.json");
        let b64 = wrapped["input"]["invokeModel"]["body"].as_str().unwrap();
        let inner = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        let want: Value = serde_json::from_slice(&inner).unwrap();
        let mut client = object(want.clone());
        client.remove("anthropic_version");
        client.remove("anthropic_beta");
        client.insert("model".into(), json!("claude-sonnet-4"));
        let header = Some("token-efficient-tools-2025-02-19");
        let got: Value = serde_json::from_slice(&anthropic_body(&mut client, header)).unwrap();
        assert_eq!(got, want);

        let mut m = object(json!({"anthropic_beta": ["a"], "max_tokens": 5}));
        let got: Value =
            serde_json::from_slice(&anthropic_body(&mut m, Some(" b, a ,,c"))).unwrap();
        assert_eq!(got["anthropic_beta"], json!(["a", "b", "c"]));
        let mut m = object(json!({"max_tokens": 5}));
        let got: Value = serde_json::from_slice(&anthropic_body(&mut m, Some(" , "))).unwrap();
        assert_eq!(
            got,
            json!({"max_tokens": 5, "anthropic_version": ANTHROPIC_VERSION})
        );
    }

    /// Every chunk of the recorded stream gives the event its decoded view
    /// lists, minus the invocation metrics; events without them pass byte
    /// for byte.
    #[test]
    fn stream_chunks_decode_to_anthropic_events() {
        let decoded = json_file("invoke_stream_anthropic.decoded.json");
        let frames = decoded["frames"].as_array().unwrap();
        let mut d = FrameDecoder::new();
        d.push(&read("invoke_stream_anthropic.eventstream"));
        let mut types = Vec::new();
        for want in frames {
            let f = d.next_frame().unwrap().unwrap();
            assert_eq!((f.kind, f.name.as_str()), (FrameKind::Event, "chunk"));
            let (kind, event) = chunk_event(&f.payload).unwrap();
            let mut listed = want["payload_bytes_decoded"].clone();
            assert_eq!(kind, listed["type"].as_str().unwrap());
            let had_metrics = object(listed.clone()).contains_key(INVOCATION_METRICS);
            if let Value::Object(m) = &mut listed {
                m.remove(INVOCATION_METRICS);
            }
            assert_eq!(serde_json::from_slice::<Value>(&event).unwrap(), listed);
            let chunk: Value = serde_json::from_slice(&f.payload).unwrap();
            let raw = base64::engine::general_purpose::STANDARD
                .decode(chunk["bytes"].as_str().unwrap())
                .unwrap();
            assert_eq!(event == raw, !had_metrics, "{kind}");
            types.push(kind);
        }
        assert_eq!(d.next_frame().unwrap(), None);
        assert_eq!(types.first().map(String::as_str), Some("message_start"));
        assert_eq!(types.last().map(String::as_str), Some("message_stop"));
        assert_eq!(types.len(), 10);
    }

    #[test]
    fn bad_chunks_are_errors_not_panics() {
        assert!(matches!(chunk_event(b"nope"), Err(InvokeError::Json(_))));
        assert!(matches!(chunk_event(b"{}"), Err(InvokeError::Json(_))));
        let bad = br#"{"bytes":"%%%","p":"abc"}"#;
        assert!(matches!(chunk_event(bad), Err(InvokeError::Base64(_))));
        let no_type = format!(
            r#"{{"bytes":"{}"}}"#,
            base64::engine::general_purpose::STANDARD.encode(br#"{"index":0}"#)
        );
        let got = chunk_event(no_type.as_bytes());
        assert!(matches!(got, Err(InvokeError::Event(_))));
    }
}
