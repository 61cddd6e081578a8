//! OpenAI Responses API (`POST /v1/responses`) ↔ IR, in both directions
//! (MAPPING §14).
//!
//! The API is item-based where the IR is turn-based, and it can say more
//! than the IR holds (hosted tools, server-side state, encrypted reasoning).
//! What the IR cannot carry goes into [`ResponsesExtras`] for the gateway to
//! act on; reasoning items are kept whole as [`crate::ir::ContentPart::ResponsesItem`]
//! so a Responses upstream gets them back byte for byte and other upstreams
//! drop them.
//!
//! Client (Responses-speaking client → gateway):
//! [`decode_request`] groups items into IR turns ([`peek_request`] reads only
//! `model`, `stream`, `store` and `previous_response_id` for the passthrough
//! to a Responses upstream), [`encode_response`] writes a Response body and
//! [`StreamEncoder`] the SSE event sequence; [`error_body`] writes the error
//! envelope.
//!
//! Upstream (gateway → Responses provider): [`decode_response`] reads a
//! Response body and [`StreamTranslator`] its event stream.

mod error;
mod extras;
mod items;
mod params_in;
mod peek;
mod request_in;
mod response;
mod stream_in;
mod stream_out;
mod wire;

pub use crate::openai::FieldError;
pub use error::error_body;
pub use extras::{Echo, ResponsesExtras};
pub use peek::{peek_request, RequestPeek};
pub use request_in::{decode_fields, decode_request};
pub use response::{decode_response, encode_response, DecodeError};
pub use stream_in::{Problem, StreamTranslator};
pub use stream_out::{OpenItem, OpenKind, StreamCursor, StreamEncoder};

/// A failure the upstream reported (`response.failed`, an `error` event or
/// a failed body): `code` as sent (`insufficient_quota`,
/// `rate_limit_exceeded`, `server_error`…), for the gateway to classify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamError {
    pub code: String,
    pub message: String,
}

#[cfg(test)]
mod tests;
