//! Protocol-independent rendering types and dispatch.

use crate::answer::Answer;
use crate::conv::{Conv, Proto};
use crate::{anthropic, gemini, openai};
use bytes::Bytes;

/// Per-response identifiers.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    /// Request sequence number (1-based), used in ids.
    pub seq: u64,
    /// Unix time in seconds.
    pub created: u64,
}

/// Which stream-ending events to produce.
#[derive(Debug, Clone, Copy)]
pub struct StreamOpts {
    /// Send the finish reason (and the usage that follows it).
    pub finish: bool,
    /// Send the terminator (`[DONE]`, `message_stop`).
    pub terminator: bool,
}

/// A rendered successful answer.
pub enum Payload {
    /// Non-stream body.
    Full(Bytes),
    /// SSE events, each one complete frame.
    Events(Vec<Bytes>),
}

/// A rendered answer with its content type and the protocol's fault frames.
pub struct Rendered {
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub payload: Payload,
    /// An unparsable event in the protocol's framing.
    pub bad_event: Bytes,
    /// An in-band error event in the protocol's framing.
    pub midstream_error: Bytes,
}

/// Render `ans` for `proto`.
pub fn render(proto: Proto, conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Rendered {
    match proto {
        Proto::OpenAi | Proto::Azure => openai::render(conv, ans, ctx, opts),
        Proto::Anthropic => anthropic::render(conv, ans, ctx, opts),
        Proto::Gemini => gemini::render(conv, ans, ctx, opts),
    }
}
