//! `application/vnd.amazon.eventstream` frames (Bedrock ConverseStream and
//! InvokeModelWithResponseStream), written with the SDK's own codec (both CRCs).
//!
//! Headers in the recorded order (`bedrock/FRAMING.md`): `:event-type` (or
//! `:exception-type`), `:content-type: application/json`, `:message-type`.

use aws_smithy_eventstream::frame::write_message_to;
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::Bytes;
use serde_json::{Map, Value};

/// Content type of an event-stream body.
pub const CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";

fn frame(
    kind_header: &'static str,
    kind: &str,
    message_type: &'static str,
    payload: &[u8],
) -> Bytes {
    let headers = vec![
        Header::new(kind_header, HeaderValue::String(kind.to_string().into())),
        Header::new(
            ":content-type",
            HeaderValue::String("application/json".into()),
        ),
        Header::new(":message-type", HeaderValue::String(message_type.into())),
    ];
    let msg = Message::new_from_parts(headers, Bytes::copy_from_slice(payload));
    let mut out = Vec::with_capacity(payload.len() + 128);
    match write_message_to(&msg, &mut out) {
        Ok(()) => Bytes::from(out),
        Err(e) => {
            // Only a header or payload over the codec's limits fails; the mock's never are.
            tracing::warn!(error = %e, "mock event-stream frame not written");
            Bytes::new()
        }
    }
}

/// An `event` frame with `:event-type` `event_type`.
pub fn event(event_type: &str, payload: &[u8]) -> Bytes {
    frame(":event-type", event_type, "event", payload)
}

/// An `exception` frame with `:exception-type` `exception_type`.
pub fn exception(exception_type: &str, payload: &[u8]) -> Bytes {
    frame(":exception-type", exception_type, "exception", payload)
}

const PAD: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// The `"p"` padding of frame `index` of response `seq`: a prefix of `a…z A…Z 0…9`, 1 to 62
/// characters long, picked deterministically (recorded lengths vary like this).
pub fn padding(seq: u64, index: usize) -> &'static str {
    let mut x = seq
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add((index as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9));
    x ^= x >> 31;
    let len = 1 + (x % PAD.len() as u64) as usize;
    &PAD[..len]
}

/// `payload` (an object) with `"p"` inserted among its keys in alphabetical order, as
/// compact JSON. Bedrock's payloads are alphabetical; the caller builds the other keys in
/// that order.
pub fn with_padding(payload: &Value, p: &str) -> String {
    let Value::Object(map) = payload else {
        return payload.to_string();
    };
    let mut out = Map::new();
    let mut placed = false;
    for (k, v) in map {
        if !placed && k.as_str() > "p" {
            out.insert("p".into(), Value::String(p.into()));
            placed = true;
        }
        out.insert(k.clone(), v.clone());
    }
    if !placed {
        out.insert("p".into(), Value::String(p.into()));
    }
    Value::Object(out).to_string()
}
