//! CLIENT DIALECTS: one module per door a client can speak to, behind one
//! interface ([`Door`]). A door decodes its request body into what the rest
//! of the path works with ([`Inbound`]: a passthrough view and/or the IR, and
//! the routing [`Facts`]), and encodes everything that goes back: a whole
//! answer, a stream (live or continuing one that broke), an error (as a
//! response, or as the event that ends a stream) and a degraded answer.
//!
//! Layering: doors sit on the protocol crate, `error`, `names`, `config`, `tokenize`
//! (the input estimate) and `state` (stored Responses-API answers); adapters,
//! route, reliability and ingress use them, never the other way round. Adding a
//! door is a new module and a variant here; every `match` over [`Door`] is
//! exhaustive, so the compiler lists what it must learn.

pub mod anthropic_messages;
pub mod embeddings;
pub mod facts;
pub mod normalize;
pub mod openai_chat;
pub mod responses;

use std::sync::OnceLock;

use bytes::Bytes;
use switchyard_protocol::ir::{ChatRequest, ChatResponse, StreamEvent};
use switchyard_protocol::openai::RequestView;
use switchyard_protocol::passthrough::Fields;

use crate::error::GatewayError;
pub use facts::Facts;

/// Seconds since the Unix epoch (`created` / `created_at` of answers the
/// gateway writes).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// The client-facing dialects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    /// `POST /v1/chat/completions`.
    OpenAiChat,
    /// `POST /v1/messages`.
    AnthropicMessages,
    /// `POST /v1/responses`.
    Responses,
}

impl Door {
    /// The request body, decoded for the rest of the path.
    pub fn decode(self, text: &str) -> Result<Inbound<'_>, GatewayError> {
        match self {
            Door::OpenAiChat => openai_chat::decode(text),
            Door::AnthropicMessages => anthropic_messages::decode(text),
            Door::Responses => responses::decode(text),
        }
    }

    /// The error envelope's JSON.
    pub fn error_body(self, e: &GatewayError) -> Vec<u8> {
        match self {
            Door::OpenAiChat => openai_chat::error_body(e),
            Door::AnthropicMessages => anthropic_messages::error_body(e),
            Door::Responses => responses::error_body(e),
        }
    }

    /// The event that ends a stream that broke.
    pub fn stream_error(self, e: &GatewayError) -> Bytes {
        match self {
            Door::OpenAiChat => openai_chat::stream_error(e),
            Door::AnthropicMessages => anthropic_messages::stream_error(e),
            // No encoder of ours numbered the stream (a passthrough keeps
            // its own count: `responses::stream_error_after`).
            Door::Responses => responses::stream_error_after("", 0, e),
        }
    }

    /// A whole answer's body, with nothing of the request to echo (the
    /// degraded answer; a served one goes through [`Inbound::answer`]).
    pub fn answer(self, r: &ChatResponse) -> Bytes {
        match self {
            Door::OpenAiChat => openai_chat::answer(r),
            Door::AnthropicMessages => anthropic_messages::answer(r),
            Door::Responses => responses::answer(r),
        }
    }

    /// A whole answer this door wrote (or passed through), read back as the
    /// IR: what the response cache keeps of it.
    pub fn read_answer(self, body: &[u8]) -> Option<ChatResponse> {
        match self {
            Door::OpenAiChat => switchyard_protocol::openai::peek_response(body)
                .ok()
                .map(|p| p.to_ir()),
            Door::AnthropicMessages => {
                switchyard_protocol::anthropic::decode_response(body, None).ok()
            }
            Door::Responses => switchyard_protocol::responses::decode_response(body).ok(),
        }
    }

    /// An encoder for a fresh stream of IR events.
    pub fn encoder(self, include_usage: bool) -> Encoder {
        match self {
            Door::OpenAiChat => Encoder::OpenAi(openai_chat::StreamEncoder::new(include_usage)),
            Door::AnthropicMessages => Encoder::Anthropic(anthropic_messages::StreamEncoder::new()),
            Door::Responses => Encoder::Responses(Box::new(responses::fresh_encoder())),
        }
    }

    /// The client's terminator after a passthrough stream (its own bytes
    /// went out as they came; the upstream's terminator may be missing).
    pub fn pass_end(self) -> Bytes {
        match self {
            Door::OpenAiChat => openai_chat::pass_end(),
            Door::AnthropicMessages => anthropic_messages::pass_end(),
            // The terminal event (`response.completed`) is the end.
            Door::Responses => Bytes::new(),
        }
    }

    /// Where a broken stream left the client, for its continuation.
    /// `None` when it cannot be continued (a Responses passthrough: its
    /// items were not ours to track).
    pub fn continues(self, at: &StreamPosition, include_usage: bool) -> Option<Continues> {
        match self {
            Door::OpenAiChat => Some(openai_chat::continues(at, include_usage)),
            Door::AnthropicMessages => Some(anthropic_messages::continues(at)),
            Door::Responses => responses::continues(at),
        }
    }

    /// The client's request read again from its body, as the IR (for a
    /// continuation, after the first request's view is gone).
    pub fn reparse(self, body: &str) -> Option<ChatRequest> {
        match self {
            Door::OpenAiChat => switchyard_protocol::openai::parse_request(body)
                .ok()
                .map(|v| v.to_ir()),
            Door::AnthropicMessages => switchyard_protocol::anthropic::decode_request(body).ok(),
            // (A request that continued a stored conversation keeps its
            // expanded IR for this instead: `Resume::ir`.)
            Door::Responses => match responses::decode(body) {
                Ok(Inbound::Responses(r)) => r.decoded.ok().map(|(ir, _)| ir),
                _ => None,
            },
        }
    }

    /// The door a path belongs to (for errors on paths that have no handler).
    pub fn for_path(path: &str) -> Door {
        if path.starts_with("/v1/messages") {
            Door::AnthropicMessages
        } else if path.starts_with("/v1/responses") {
            Door::Responses
        } else {
            Door::OpenAiChat
        }
    }
}

/// The client's request, as each adapter may need it: the raw fields for a
/// same-dialect passthrough, the IR (built once, on first need) otherwise.
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, on the handler's stack; never moved in bulk"
)]
pub enum Inbound<'a> {
    OpenAi {
        view: RequestView<'a>,
        ir: OnceLock<ChatRequest>,
    },
    Anthropic {
        fields: Fields<'a>,
        ir: ChatRequest,
    },
    Responses(Box<responses::ResponsesIn<'a>>),
    /// A stream's continuation (the original request plus the text already
    /// sent as a trailing assistant message), always through the IR, encoded
    /// for the client inside the stream it continues.
    Resume(Box<Resumed>),
    /// The client's request asked again in another shape, always through
    /// the IR and never as a stream, its answer encoded as the client's
    /// own would be: a response contract's repair, or a stream held until
    /// its answer is checked (`reliability::contract`).
    Reshaped(Box<Reshaped<'a>>),
}

/// A request reshaped from the client's ([`Inbound::Reshaped`]).
pub struct Reshaped<'a> {
    /// What goes upstream (`stream: false`).
    pub ir: ChatRequest,
    /// The client's request, whose door the answer is written for.
    pub of: &'a Inbound<'a>,
}

impl Inbound<'_> {
    pub fn door(&self) -> Door {
        match self {
            Inbound::OpenAi { .. } => Door::OpenAiChat,
            Inbound::Anthropic { .. } => Door::AnthropicMessages,
            Inbound::Responses(_) => Door::Responses,
            Inbound::Resume(r) => r.continues.door(),
            Inbound::Reshaped(r) => r.of.door(),
        }
    }

    /// (A Responses request the IR cannot express is an empty one: every
    /// adapter but the passthrough refuses it first, `ResponsesIn::refusal`.)
    pub fn ir(&self) -> &ChatRequest {
        static NONE: std::sync::LazyLock<ChatRequest> =
            std::sync::LazyLock::new(ChatRequest::default);
        match self {
            Inbound::Responses(r) => r.decoded.as_ref().map_or(&NONE, |(ir, _)| ir),
            Inbound::OpenAi { view, ir } => ir.get_or_init(|| view.to_ir()),
            Inbound::Anthropic { ir, .. } => ir,
            Inbound::Resume(r) => &r.ir,
            Inbound::Reshaped(r) => &r.ir,
        }
    }

    pub fn model(&self) -> &str {
        match self {
            Inbound::OpenAi { view, .. } => &view.typed.model,
            Inbound::Anthropic { ir, .. } => &ir.model,
            Inbound::Responses(r) => &r.peek.model,
            Inbound::Resume(r) => &r.ir.model,
            Inbound::Reshaped(r) => &r.ir.model,
        }
    }

    pub fn stream(&self) -> bool {
        match self {
            Inbound::OpenAi { view, .. } => view.typed.stream,
            Inbound::Anthropic { ir, .. } => ir.stream,
            Inbound::Responses(r) => r.peek.stream,
            Inbound::Resume(_) => true,
            Inbound::Reshaped(r) => r.ir.stream,
        }
    }

    /// Choices asked for (OpenAI `n`; 1 elsewhere).
    pub fn n(&self) -> u32 {
        match self {
            Inbound::OpenAi { view, .. } => view.typed.n.unwrap_or(1),
            Inbound::Reshaped(r) => r.of.n(),
            _ => 1,
        }
    }

    /// The client asked for usage in its stream (Anthropic streams always carry it).
    pub fn include_usage(&self) -> bool {
        match self {
            Inbound::OpenAi { view, .. } => view.typed.include_usage,
            Inbound::Anthropic { .. } | Inbound::Responses(_) => true,
            Inbound::Resume(r) => r.continues.include_usage(),
            Inbound::Reshaped(r) => r.of.include_usage(),
        }
    }

    /// What routing needs to know (the passthrough view is read as it is:
    /// the OpenAI fast path never builds the IR).
    pub fn facts(&self) -> Facts {
        match self {
            Inbound::OpenAi { view, .. } => openai_chat::facts(view),
            Inbound::Anthropic { fields, ir } => anthropic_messages::facts(fields, ir),
            Inbound::Responses(r) => r.facts(),
            Inbound::Resume(r) => Facts::from_ir(&r.ir, facts::Raw::default()),
            Inbound::Reshaped(r) => r.of.facts(),
        }
    }

    /// The last user message's text (for task rules).
    pub fn last_user_text(&self) -> String {
        match self {
            Inbound::OpenAi { view, .. } => openai_chat::last_user_text(&view.typed),
            Inbound::Anthropic { ir, .. } => facts::last_user(ir),
            Inbound::Responses(_) => facts::last_user(self.ir()),
            Inbound::Resume(r) => facts::last_user(&r.ir),
            Inbound::Reshaped(r) => facts::last_user(&r.ir),
        }
    }

    /// A whole answer the gateway translated, in the client's dialect.
    pub fn answer(&self, r: &ChatResponse) -> Bytes {
        match self {
            Inbound::Responses(x) => x.answer(r),
            Inbound::Reshaped(x) => x.of.answer(r),
            _ => self.door().answer(r),
        }
    }

    /// A whole answer written as this request's stream, all at once (a
    /// cached answer replayed, an answer held until it was checked).
    pub fn as_stream(&self, answer: &ChatResponse) -> Bytes {
        let mut enc = self.encoder();
        let mut out = bytes::BytesMut::new();
        for ev in answer.stream_events() {
            enc.encode(&ev, &mut out);
        }
        out.extend_from_slice(&enc.end());
        out.freeze()
    }

    /// An encoder for this request's stream.
    pub fn encoder(&self) -> Encoder {
        match self {
            Inbound::Responses(x) => Encoder::Responses(Box::new(x.encoder())),
            Inbound::Resume(r) => r.continues.encoder(r.prefix.clone()),
            Inbound::Reshaped(r) => r.of.encoder(),
            _ => self.door().encoder(self.include_usage()),
        }
    }
}

/// What a stream's continuation needs to look like part of the stream it
/// continues.
pub struct Resumed {
    pub ir: ChatRequest,
    /// The client's stream, where the continuation goes on.
    pub continues: Continues,
    /// Whitespace trimmed off the prefill, put back before the continuation.
    pub prefix: String,
}

/// Where the frames sent so far left the client's stream.
#[derive(Debug, Clone, Default)]
pub struct StreamPosition {
    /// The envelope of the client's stream (OpenAI chunk id, model, created).
    pub id: Option<String>,
    pub model: Option<String>,
    pub created: Option<u64>,
    /// Anthropic: the open block and the next block's index.
    pub blocks: switchyard_protocol::anthropic::BlockCursor,
    /// Responses: the encoder's state (sequence, items), what it echoes and
    /// where the answer is to be kept.
    pub responses: Option<(
        switchyard_protocol::responses::StreamCursor,
        std::sync::Arc<switchyard_protocol::responses::ResponsesExtras>,
        Option<responses::Remember>,
    )>,
}

/// The client stream a continuation is written into, per door.
#[derive(Clone)]
pub enum Continues {
    /// The interrupted stream's id, model and created; the role chunk was sent.
    OpenAi {
        envelope: switchyard_protocol::openai::ChunkEnvelope,
        include_usage: bool,
    },
    /// `message_start` was sent; text goes on in the open text block, a new
    /// block gets the next index.
    Anthropic {
        at: switchyard_protocol::anthropic::BlockCursor,
    },
    /// `response.created` was sent; the continuation's items and sequence
    /// numbers go on from the cursor.
    Responses {
        cursor: switchyard_protocol::responses::StreamCursor,
        extras: std::sync::Arc<switchyard_protocol::responses::ResponsesExtras>,
        remember: Option<responses::Remember>,
    },
}

impl Continues {
    pub fn door(&self) -> Door {
        match self {
            Continues::OpenAi { .. } => Door::OpenAiChat,
            Continues::Anthropic { .. } => Door::AnthropicMessages,
            Continues::Responses { .. } => Door::Responses,
        }
    }

    pub fn include_usage(&self) -> bool {
        match self {
            Continues::OpenAi { include_usage, .. } => *include_usage,
            Continues::Anthropic { .. } | Continues::Responses { .. } => true,
        }
    }

    /// The encoder that writes the continuation into the client's stream.
    pub fn encoder(&self, prefix: String) -> Encoder {
        match self {
            Continues::OpenAi {
                envelope,
                include_usage,
            } => Encoder::OpenAi(openai_chat::StreamEncoder::resumed(
                envelope.clone(),
                *include_usage,
                prefix,
            )),
            Continues::Anthropic { at } => {
                Encoder::Anthropic(anthropic_messages::StreamEncoder::resumed(*at, prefix))
            }
            Continues::Responses {
                cursor,
                extras,
                remember,
            } => Encoder::Responses(Box::new(responses::StreamEncoder::continuing(
                cursor.clone(),
                extras.clone(),
                remember.clone(),
                prefix,
            ))),
        }
    }
}

/// IR events → the client's stream frames, per door.
pub enum Encoder {
    OpenAi(openai_chat::StreamEncoder),
    Anthropic(anthropic_messages::StreamEncoder),
    Responses(Box<responses::StreamEncoder>),
}

impl Encoder {
    pub fn encode(&mut self, ev: &StreamEvent, out: &mut bytes::BytesMut) {
        match self {
            Encoder::OpenAi(e) => e.encode(ev, out),
            Encoder::Anthropic(e) => e.encode(ev, out),
            Encoder::Responses(e) => e.encode(ev, out),
        }
    }

    /// The client's terminator (after any usage it is owed).
    pub fn end(&mut self) -> Bytes {
        match self {
            Encoder::OpenAi(e) => e.end(),
            Encoder::Anthropic(e) => e.end(),
            Encoder::Responses(e) => e.end(),
        }
    }

    /// The event(s) that end a stream that broke, in the client's dialect.
    pub fn error(&mut self, e: &GatewayError) -> Bytes {
        match self {
            Encoder::OpenAi(_) => openai_chat::stream_error(e),
            Encoder::Anthropic(_) => anthropic_messages::stream_error(e),
            Encoder::Responses(r) => r.error(e),
        }
    }

    /// Where the frames written so far leave the client's stream (a
    /// continuation's encoder knows it from the start).
    pub fn position(&self, at: &mut StreamPosition) {
        match self {
            Encoder::OpenAi(e) => e.position(at),
            Encoder::Anthropic(e) => at.blocks = e.cursor(),
            Encoder::Responses(e) => e.position(at),
        }
    }
}

#[cfg(test)]
mod tests;
