//! Protocol-independent rendering types and dispatch.

use crate::answer::Answer;
use crate::conv::{Conv, Proto};
use crate::{anthropic, bedrock, gemini, openai, responses};
use bytes::Bytes;

/// Per-response identifiers.
#[derive(Debug, Clone, Copy)]
pub struct Ctx {
    /// Request sequence number (1-based), used in ids.
    pub seq: u64,
    /// Unix time in seconds.
    pub created: u64,
    /// The mock's clock at the request (Vertex `createTime`).
    pub now: std::time::SystemTime,
    /// Milliseconds since the request arrived (Bedrock `latencyMs`), at least 1.
    pub latency_ms: u64,
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
    /// The in-band error in the protocol's framing, given the number of events sent
    /// before it (the Responses API numbers its events).
    pub midstream_error: Midstream,
}

/// Builds the in-band error frames from the number of events already sent.
pub type Midstream = Box<dyn FnOnce(usize) -> Bytes + Send>;

/// A [`Midstream`] that is the same bytes wherever it comes.
pub fn fixed(bytes: Bytes) -> Midstream {
    Box::new(move |_| bytes)
}

impl Rendered {
    /// A complete non-stream body with no stream fault frames (embeddings, token counts).
    pub fn full(
        content_type: &'static str,
        headers: Vec<(&'static str, String)>,
        body: Bytes,
    ) -> Rendered {
        Rendered {
            content_type,
            headers,
            payload: Payload::Full(body),
            bad_event: Bytes::new(),
            midstream_error: fixed(Bytes::new()),
        }
    }
}

/// Render `ans` for `proto`.
pub fn render(proto: Proto, conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Rendered {
    match proto {
        Proto::OpenAi | Proto::Azure => openai::render(conv, ans, ctx, opts),
        Proto::Anthropic => anthropic::render(conv, ans, ctx, opts),
        Proto::Gemini => gemini::render(conv, ans, ctx, opts),
        Proto::Responses => responses::render(conv, ans, ctx, opts),
        Proto::Converse => bedrock::render_converse(conv, ans, ctx, opts),
        Proto::BedrockAnthropic => bedrock::render_invoke(conv, ans, ctx, opts),
        Proto::VertexGemini => gemini::render_vertex(conv, ans, ctx, opts),
        Proto::VertexAnthropic => anthropic::render_flavor(conv, ans, ctx, opts, anthropic::VERTEX),
    }
}
