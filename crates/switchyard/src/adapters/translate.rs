//! How a stream's events get from the upstream's dialect to the client's.
//! Same dialect: forwarded as they are (peeked for usage, finish and text).
//! Otherwise: each upstream event is decoded into IR events and each IR event
//! is encoded for the client at once — incremental, nothing buffered.

use switchyard_protocol::anthropic as an;
use switchyard_protocol::gemini as gm;
use switchyard_protocol::ir::StreamEvent;
use switchyard_protocol::openai as oa;
use switchyard_protocol::sse::SseEvent;

use super::body::Outbound;
use super::{Dialect, Inbound};
use crate::adapters::deployment::DeploymentRt;
use crate::doors::{Door, Encoder};
use crate::error::{ErrorCode, GatewayError};

#[expect(
    clippy::large_enum_variant,
    reason = "one per stream, inside the boxed UpstreamStream; boxing would add an allocation per translated stream"
)]
pub enum Mode {
    /// OpenAI-protocol upstream, OpenAI client.
    OpenAiPass { include_usage: bool },
    /// Anthropic upstream, Anthropic client: bytes forwarded, peeked through
    /// the translator for usage, finish and text.
    AnthropicPass { peek: an::StreamTranslator },
    /// Responses upstream, Responses client: bytes forwarded, peeked for
    /// usage, the terminal event and the sequence numbers (an error the
    /// gateway adds goes on from the last).
    ResponsesPass(Box<ResponsesPeek>),
    /// Anything else: decode, then encode.
    Translate { from: Decoder, to: Encoder },
}

impl Mode {
    pub fn new(inbound: &Inbound<'_>, dep: &DeploymentRt, out: &Outbound) -> Mode {
        let upstream = dep.provider.adapter.dialect();
        // A continuation always goes through the IR: whatever the upstream,
        // its events are written into the client's stream where it broke.
        if let Inbound::Resume(_) = inbound {
            return Mode::Translate {
                from: Decoder::new(upstream, out),
                to: inbound.encoder(),
            };
        }
        match (upstream, inbound.door()) {
            (Dialect::OpenAi, Door::Responses) if out.responses_api => {
                Mode::ResponsesPass(Box::default())
            }
            (Dialect::OpenAi, Door::OpenAiChat) => Mode::OpenAiPass {
                include_usage: inbound.include_usage(),
            },
            (Dialect::Anthropic, Door::AnthropicMessages) => Mode::AnthropicPass {
                peek: an::StreamTranslator::new(None),
            },
            _ => Mode::Translate {
                from: Decoder::new(upstream, out),
                to: inbound.encoder(),
            },
        }
    }
}

/// What a Responses passthrough has seen of its upstream's events: usage,
/// the terminal event, the id and sequence numbers (an error the gateway
/// writes into the stream goes on from the last).
pub type ResponsesPeek = switchyard_protocol::responses::StreamTranslator;

/// What one upstream event meant.
pub enum Decoded {
    /// Zero or more IR events were pushed.
    Events,
    /// The upstream's own terminator.
    Done,
    /// Could not be parsed: skip and count.
    Unparsable,
    /// An in-band upstream error.
    Error(GatewayError),
}

pub enum Decoder {
    OpenAi(oa::StreamTranslator),
    Anthropic(an::StreamTranslator),
    Gemini(gm::StreamTranslator),
}

impl Decoder {
    fn new(upstream: Dialect, out: &Outbound) -> Decoder {
        match upstream {
            Dialect::OpenAi => Decoder::OpenAi(oa::StreamTranslator::default()),
            Dialect::Anthropic => {
                Decoder::Anthropic(an::StreamTranslator::new(out.json_tool.as_deref()))
            }
            Dialect::Gemini => Decoder::Gemini(gm::StreamTranslator::new()),
        }
    }

    pub fn push(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Decoded {
        match self {
            Decoder::OpenAi(t) => {
                let Some(data) = &ev.data else {
                    return Decoded::Events;
                };
                if ev.is_done_sentinel() {
                    return Decoded::Done;
                }
                match oa::peek_chunk(data) {
                    Err(_) => Decoded::Unparsable,
                    Ok(c) if c.error.is_some() => {
                        Decoded::Error(openai_in_band(c.error.map(|e| e.get()).unwrap_or_default()))
                    }
                    Ok(c) => {
                        t.push(&c, out);
                        Decoded::Events
                    }
                }
            }
            Decoder::Anthropic(t) => anthropic_push(t, ev, out),
            Decoder::Gemini(t) => match t.push_event(ev, out) {
                Ok(()) => Decoded::Events,
                Err(gm::StreamProblem::Unparsable(_)) => Decoded::Unparsable,
                Err(gm::StreamProblem::PromptBlocked { reason, message }) => Decoded::Error(
                    crate::adapters::gemini::blocked(&reason, message.as_deref()),
                ),
                Err(gm::StreamProblem::StreamError(g)) => {
                    Decoded::Error(crate::adapters::gemini::errors::in_band(g))
                }
            },
        }
    }
}

/// One Anthropic event; `message_stop` is the terminator.
pub fn anthropic_push(
    t: &mut an::StreamTranslator,
    ev: &SseEvent,
    out: &mut Vec<StreamEvent>,
) -> Decoded {
    if ev.event_str() == Some("message_stop") {
        return Decoded::Done;
    }
    match t.push_sse(ev, out) {
        Ok(()) => Decoded::Events,
        Err(an::PushError::BadJson(_)) => Decoded::Unparsable,
        Err(an::PushError::Upstream(e)) => {
            Decoded::Error(crate::adapters::anthropic::errors::in_band(&e))
        }
    }
}

/// `data: {"error": {...}}` from an OpenAI-protocol upstream.
pub fn openai_in_band(raw: &str) -> GatewayError {
    #[derive(serde::Deserialize)]
    struct E {
        #[serde(default)]
        message: Option<String>,
    }
    let msg = serde_json::from_str::<E>(raw)
        .ok()
        .and_then(|e| e.message)
        .unwrap_or_else(|| raw.to_owned());
    GatewayError::upstream(
        ErrorCode::UpstreamError,
        crate::observe::redact::redact(&msg, &[]),
    )
}
