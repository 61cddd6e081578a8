//! The Anthropic Messages door (`POST /v1/messages`): its request fields
//! (kept raw for the Anthropic passthrough), answers, stream events and
//! error envelope.

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use switchyard_protocol::anthropic as an;
use switchyard_protocol::ir::{ChatResponse, StreamEvent};
use switchyard_protocol::passthrough;

use super::{Continues, Inbound, StreamPosition};
use crate::error::{ErrorCode, GatewayError};

/// The raw fields are kept for the Anthropic→Anthropic passthrough; the IR
/// is decoded from them (the body is parsed once).
pub fn decode(text: &str) -> Result<Inbound<'_>, GatewayError> {
    let fields = passthrough::parse_object(text).map_err(|m| GatewayError::invalid(None, m))?;
    let ir = an::decode_fields(&fields).map_err(|e| GatewayError::invalid(e.param, e.message))?;
    Ok(Inbound::Anthropic { fields, ir })
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
        ErrorCode::UpstreamError | ErrorCode::ConnectionError | ErrorCode::Timeout => "api_error",
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
