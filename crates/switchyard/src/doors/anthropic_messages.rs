//! The Anthropic Messages door (`POST /v1/messages`): its request fields
//! (kept raw for the Anthropic passthrough), answers, stream events and
//! error envelope.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use switchyard_protocol::anthropic as an;
use switchyard_protocol::ir::{ChatRequest, ChatResponse, StreamEvent};
use switchyard_protocol::passthrough;

use super::facts::{Facts, Raw};
use super::{Continues, Inbound, StreamPosition};
use crate::error::{ErrorCode, GatewayError};
use crate::tokenize::estimate;

/// The raw fields are kept for the Anthropic→Anthropic passthrough; the IR
/// is decoded from them (the body is parsed once).
pub fn decode(text: &str) -> Result<Inbound<'_>, GatewayError> {
    let fields = passthrough::parse_object(text).map_err(|m| GatewayError::invalid(None, m))?;
    let ir = an::decode_fields(&fields).map_err(|e| GatewayError::invalid(e.param, e.message))?;
    Ok(Inbound::Anthropic { fields, ir })
}

/// Routing facts: the IR's, plus what only the passthrough carries.
pub fn facts(fields: &passthrough::Fields<'_>, ir: &ChatRequest) -> Facts {
    let mut f = Facts::from_ir(ir, Raw::of(fields));
    f.input.passthrough_only = passthrough_only(fields);
    f
}

/// Block types that may hold what the IR leaves out (looked for in the raw
/// text first, so the common request is not parsed twice).
const OPAQUE_HINTS: [&str; 5] = [
    "\"document\"",
    "\"search_result\"",
    "_tool_result\"",
    "\"server_tool_use\"",
    "\"mcp_tool_use\"",
];

/// Estimated tokens of the message blocks the IR leaves out (documents,
/// search results, server tool calls and results, newer types), which the
/// Anthropic passthrough forwards and its upstream bills: their JSON, an
/// inline file as one binary.
fn passthrough_only(fields: &passthrough::Fields<'_>) -> u64 {
    #[derive(Deserialize)]
    struct Msg<'a> {
        #[serde(borrow)]
        content: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Block<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(default, borrow)]
        content: Option<&'a RawValue>,
    }
    let Some(raw) = fields
        .iter()
        .find(|(k, _)| k == "messages")
        .map(|(_, v)| v.get())
    else {
        return 0;
    };
    if !OPAQUE_HINTS.iter().any(|h| raw.contains(h)) {
        return 0;
    }
    let msgs: Vec<Msg> = serde_json::from_str(raw).unwrap_or_default();
    let mut n = 0;
    for block in msgs.iter().flat_map(|m| blocks_of(m.content)) {
        let Ok(b) = serde_json::from_str::<Block>(block.get()) else {
            continue;
        };
        match b.kind.as_ref() {
            "text" | "image" | "thinking" | "redacted_thinking" | "tool_use" => {}
            // Its text and images are in the IR; anything else it holds is not.
            "tool_result" => {
                for inner in b.content.map(blocks_of).unwrap_or_default() {
                    let kind = serde_json::from_str::<Block>(inner.get()).map(|b| b.kind);
                    if !matches!(kind.as_deref(), Ok("text" | "image")) {
                        n += estimate::json(inner.get());
                    }
                }
            }
            _ => n += estimate::json(block.get()),
        }
    }
    n
}

/// A raw array's items (none when it is not one: a string content).
fn blocks_of(raw: &RawValue) -> Vec<&RawValue> {
    serde_json::from_str(raw.get()).unwrap_or_default()
}

#[derive(Serialize)]
struct Envelope<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: &'a str,
    /// The contract's code, beside Anthropic's own `type`.
    code: &'static str,
}

/// `{"type":"error","error":{"type","message"}}` (plus the contract `code`).
pub fn error_body(e: &GatewayError) -> Vec<u8> {
    let env = Envelope {
        kind: "error",
        error: ErrorBody {
            kind: error_type(e.code),
            message: &e.message,
            code: e.code.as_str(),
        },
    };
    serde_json::to_vec(&env).unwrap_or_default()
}

/// Anthropic's error `type`, so its SDKs raise their usual exception classes.
fn error_type(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::InvalidRequest
        | ErrorCode::ContextTooLong
        | ErrorCode::ContentFiltered
        | ErrorCode::RequestTimeout => "invalid_request_error",
        ErrorCode::AuthFailed => "authentication_error",
        ErrorCode::Forbidden => "permission_error",
        ErrorCode::ModelNotFound | ErrorCode::UnknownEndpoint => "not_found_error",
        ErrorCode::PayloadTooLarge => "request_too_large",
        ErrorCode::RateLimited | ErrorCode::GatewayRateLimited | ErrorCode::BudgetExceeded => {
            "rate_limit_error"
        }
        ErrorCode::Overloaded | ErrorCode::NoHealthyDeployment => "overloaded_error",
        ErrorCode::UpstreamError
        | ErrorCode::ConnectionError
        | ErrorCode::Timeout
        | ErrorCode::ResponseContractViolation => "api_error",
    }
}

/// `event: error`
pub fn stream_error(e: &GatewayError) -> Bytes {
    switchyard_protocol::sse::named_frame("error", &error_body(e))
}

pub fn answer(r: &ChatResponse) -> Bytes {
    Bytes::from(an::encode_response(r))
}

pub fn pass_end() -> Bytes {
    Bytes::from_static(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
}

pub fn continues(at: &StreamPosition) -> Continues {
    Continues::Anthropic { at: at.blocks }
}

/// IR events → Anthropic named frames.
pub struct StreamEncoder {
    enc: an::StreamEncoder,
    /// Continuing another stream: whitespace trimmed off the prefill, put
    /// back in front of the continuation's first text.
    prefix: String,
}

impl StreamEncoder {
    pub fn new() -> Self {
        StreamEncoder {
            enc: an::StreamEncoder::new(),
            prefix: String::new(),
        }
    }

    /// Continues a stream that stands at `at`: no second `message_start`,
    /// text in the block left open. The `message_delta` at the end carries
    /// the continuation's own usage (its input includes the prefill; its
    /// output counts only the continued part).
    pub fn resumed(at: an::BlockCursor, prefix: String) -> Self {
        StreamEncoder {
            enc: an::StreamEncoder::continuing(at),
            prefix,
        }
    }

    pub fn encode(&mut self, ev: &StreamEvent, out: &mut BytesMut) {
        if !self.prefix.is_empty() {
            match ev {
                StreamEvent::TextDelta(t) => {
                    let text = std::mem::take(&mut self.prefix) + t;
                    return self.write(&StreamEvent::TextDelta(text), out);
                }
                // A continuation with no text of its own still owes it.
                StreamEvent::Finish { .. } => {
                    let text = std::mem::take(&mut self.prefix);
                    self.write(&StreamEvent::TextDelta(text), out);
                }
                _ => {}
            }
        }
        self.write(ev, out);
    }

    fn write(&mut self, ev: &StreamEvent, out: &mut BytesMut) {
        self.enc
            .push(ev)
            .iter()
            .for_each(|f| out.extend_from_slice(f));
    }

    pub fn end(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        self.enc.end().iter().for_each(|f| out.extend_from_slice(f));
        out.freeze()
    }

    /// Where the frames written so far leave the client's stream.
    pub fn cursor(&self) -> an::BlockCursor {
        self.enc.cursor()
    }
}

impl Default for StreamEncoder {
    fn default() -> Self {
        Self::new()
    }
}
