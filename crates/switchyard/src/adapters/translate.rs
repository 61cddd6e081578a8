//! How a stream's events get from the upstream's dialect to the client's.
//! Same dialect: forwarded as they are (peeked for usage, finish and text).
//! Otherwise: each upstream event is decoded into IR events (by the
//! provider module's decoder) and each IR event is encoded for the client
//! at once — incremental, nothing buffered.

use switchyard_protocol::anthropic as an;
use switchyard_protocol::ir::StreamEvent;
use switchyard_protocol::sse::SseEvent;

use super::body::Outbound;
use super::{Dialect, Inbound};
use crate::adapters::deployment::DeploymentRt;
use crate::doors::{Door, Encoder};
use crate::error::{ErrorCode, GatewayError};

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
        let provider = dep.api();
        let upstream = provider.dialect();
        // A continuation always goes through the IR: whatever the upstream,
        // its events are written into the client's stream where it broke.
        if let Inbound::Resume(_) = inbound {
            return Mode::Translate {
                from: provider.stream_decoder(out),
                to: inbound.encoder(),
            };
        }
        match (upstream, inbound.door()) {
            (Dialect::OpenAi, Door::Responses) if out.responses_api => {
                Mode::ResponsesPass(Box::default())
            }
            (Dialect::OpenAi, Door::OpenAiChat) if provider.passes_answers_through() => {
                Mode::OpenAiPass {
                    include_usage: inbound.include_usage(),
                }
            }
            (Dialect::Anthropic, Door::AnthropicMessages) => Mode::AnthropicPass {
                peek: an::StreamTranslator::new(None),
            },
            _ => Mode::Translate {
                from: provider.stream_decoder(out),
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

/// Decodes one provider's stream events into IR events; its module makes
/// one per translated stream ([`super::provider::Provider::stream_decoder`]).
pub trait StreamDecode: Send {
    fn push(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Decoded;
}

/// A translated stream's decoder (one allocation per translated stream).
pub type Decoder = Box<dyn StreamDecode>;

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
