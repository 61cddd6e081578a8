//! OpenAI Chat Completions: wire types, the passthrough view of a request, and
//! conversions to and from the IR.
//!
//! The OpenAI→OpenAI path never re-encodes the client's body: [`RequestView`]
//! keeps each top-level field as the raw JSON text it arrived as, validates the
//! fields it knows, and [`RequestView::write_upstream`] splices in only what must
//! change (model, stream_options, merged options).

mod request;
mod request_encode;
mod request_ir;
mod response;
pub mod think;
mod wire;

pub use request::{parse_request, FieldError, RequestView, UpstreamEdits};
pub use request_encode::encode_request;
pub(crate) use request_ir::image_source;
pub use response::{
    encode_choices, encode_chunk, encode_response, peek_chunk, peek_pass_chunk, peek_response,
    peek_usage, ChunkEnvelope, ChunkPeek, PassChunk, PeekError, ResponsePeek, StreamTranslator,
    UsagePeek,
};
pub use wire::*;

#[cfg(test)]
mod tests;
