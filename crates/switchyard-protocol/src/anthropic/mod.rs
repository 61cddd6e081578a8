//! Anthropic Messages (`POST /v1/messages`): wire types and conversions to and
//! from the IR, in both directions.
//!
//! Upstream (gateway → Anthropic provider):
//! [`encode_request`] builds the body, [`decode_response`] reads a whole
//! answer, [`StreamTranslator`] turns named SSE events into IR events and
//! [`parse_error`] reads error bodies.
//!
//! Client (Anthropic-speaking client → gateway):
//! [`decode_request`] validates a body into the IR ([`peek_request`] reads only
//! `model` and `stream` for the passthrough path), [`encode_response`] writes a
//! `message` body and [`StreamEncoder`] writes the SSE event sequence.
//!
//! Field rules follow `fixtures/providers/MAPPING.md`; deliberate deviations
//! are listed on the functions that make them.

mod params_in;
mod request_in;
mod request_out;
mod response;
mod stream_in;
mod stream_out;
mod tools_out;
mod wire;

pub use crate::openai::FieldError;
pub use request_in::{
    decode_count_fields, decode_fields, decode_request, peek_request, RequestPeek,
};
pub use request_out::{encode_request, Encoded, Target, DEFAULT_MAX_TOKENS, JSON_TOOL_NAME};
pub use response::{decode_response, encode_response, parse_error};
pub use stream_in::{PushError, StreamError, StreamTranslator};
pub use stream_out::{error_frame, BlockCursor, BlockType, StreamEncoder};

use std::fmt;

/// The IR holds something the Anthropic body cannot carry.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConvertError {
    /// An assistant tool call whose `arguments` are not a JSON object
    /// (Anthropic `tool_use.input` must be one).
    InvalidToolArguments {
        id: String,
        name: String,
        reason: String,
    },
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConvertError::InvalidToolArguments { id, name, reason } => write!(
                f,
                "tool call `{id}` (`{name}`): arguments are not a JSON object: {reason}"
            ),
        }
    }
}

impl std::error::Error for ConvertError {}

pub(crate) use crate::json::compact_json;

#[cfg(test)]
mod tests;
