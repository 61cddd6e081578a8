//! Gemini generateContent (Developer API, `v1beta`): request encoding, response
//! and stream decoding, error bodies, and (for a Gemini front door) response
//! and stream encoding. Field rules follow `fixtures/providers/MAPPING.md`.
//!
//! The model is not in the body: the gateway builds the URL with [`path`].
//!
//! # Tool-call ids
//!
//! Gemini function calls carry no id, so ids are synthesized as
//! `call_<n>_<tag>_<name>` (see [`synth_call_id`]):
//! - `n`: the call's position among the function calls of that response
//!   (0, 1, … — the same as the stream's tool-call `index`);
//! - `tag`: 16 hex digits hashed from the response's id — its `responseId`,
//!   or, when it has none, an id made up for that answer alone
//!   ([`crate::ids`]) — so ids stay unique across turns even when the
//!   upstream answers two turns alike (Anthropic rejects duplicate `tool_use`
//!   ids in one conversation);
//! - `name`: the function name, so a tool result can be routed back to the
//!   right `functionResponse.name` even when the client echoes only the id.
//!
//! An id the upstream does send (`functionCall.id`, some surfaces) is kept as
//! is. Ids with an 8-digit tag (from earlier versions) are still read back.
//!
//! # Thought signatures
//!
//! The IR has no per-tool-call signature field, so a `thoughtSignature` travels
//! as reasoning: [`decode_response`] puts it in `ChatResponse::reasoning_signature`,
//! the stream emits a `ReasoningDelta` with empty text and the signature just
//! before the part it belongs to, and on the way back [`encode_request`] attaches
//! the signature of an assistant's `ContentPart::Reasoning` to the next
//! non-thought part of that turn (the first function call, else the text).

mod config;
mod encode;
mod error;
mod request;
mod response;
mod schema;
mod stream;
mod wire;

pub use encode::{encode_response, StreamEncoder};
pub use error::{parse_error, GeminiError, MAX_RETRY_DELAY};
pub use request::{
    encode_request, encode_request_for, ConvertError, ModelTraits, Target, SKIP_SIGNATURE_VALIDATOR,
};
pub use response::{decode_candidates, decode_response, finish_reason, DecodeError};
pub use schema::sanitize_schema;
pub use stream::{StreamProblem, StreamTranslator};

/// Request path for `model`: `/v1beta/models/{model}:generateContent`, or
/// `:streamGenerateContent?alt=sse` when streaming. A `models/` prefix on the
/// name is accepted and not doubled.
pub fn path(model: &str, stream: bool) -> String {
    let model = model.strip_prefix("models/").unwrap_or(model);
    if stream {
        format!("/v1beta/models/{model}:streamGenerateContent?alt=sse")
    } else {
        format!("/v1beta/models/{model}:generateContent")
    }
}

/// The id of the `n`-th function call of the response `response_id` (see
/// the module docs).
pub fn synth_call_id(n: usize, response_id: &str, name: &str) -> String {
    let tag = fnv1a64(response_id.as_bytes());
    format!("call_{n}_{tag:016x}_{name}")
}

/// The function name inside a synthesized id, if `id` is one.
pub fn name_from_call_id(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("call_")?;
    let (n, rest) = rest.split_once('_')?;
    let (tag, name) = rest.split_once('_')?;
    let ok = !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_digit())
        && matches!(tag.len(), 8 | 16)
        && tag.bytes().all(|b| b.is_ascii_hexdigit())
        && !name.is_empty();
    ok.then_some(name)
}

/// A response id for an answer that carries no `responseId`: its own, never
/// another answer's (a hash of the body would repeat with the body).
fn synth_response_id() -> String {
    format!("gemini-{}", crate::ids::unique())
}

fn fnv1a64(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &c| {
        (h ^ u64::from(c)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

use crate::json::compact_json;

#[cfg(test)]
mod tests;
