//! How a stream's events get from the upstream's dialect to the client's.
//! Same dialect: forwarded as they are (peeked for usage, finish and text).
//! Otherwise: each upstream event is decoded into IR events and each IR event
//! is encoded for the client at once — incremental, nothing buffered.

use bytes::{Bytes, BytesMut};
use switchyard_protocol::anthropic as an;
use switchyard_protocol::gemini as gm;
use switchyard_protocol::ir::{StreamEvent, Usage};
use switchyard_protocol::openai::{self as oa, ChunkEnvelope};
use switchyard_protocol::sse::{data_frame, SseEvent, DONE_FRAME};

use super::body::Outbound;
use super::stream::Seen;
use super::{Dialect, Inbound};
use crate::error::{ErrorCode, GatewayError};
use crate::ingress::respond::openai_error_body;
use crate::state::live::DeploymentRt;

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
    /// Anything else: decode, then encode.
    Translate { from: Decoder, to: Encoder },
}

impl Mode {
    pub fn new(inbound: &Inbound<'_>, dep: &DeploymentRt, out: &Outbound) -> Mode {
        let upstream = dep.provider.adapter.dialect();
        // A continuation always goes through the IR: whatever the upstream,
        // its events are written into the client's stream where it broke.
        if let Inbound::Resume(r) = inbound {
            let prefix = r.prefix.clone();
            let to = match &r.continues {
                Continues::OpenAi {
                    envelope,
                    include_usage,
                } => Encoder::OpenAi(OpenAiEncoder::resumed(
                    envelope.clone(),
                    *include_usage,
                    prefix,
                )),
                Continues::Anthropic { at } => {
                    Encoder::Anthropic(AnthropicEncoder::resumed(*at, prefix))
                }
            };
            return Mode::Translate {
                from: Decoder::new(upstream, out),
                to,
            };
        }
        match (upstream, inbound.dialect()) {
            (Dialect::OpenAi, Dialect::OpenAi) => Mode::OpenAiPass {
                include_usage: inbound.include_usage(),
            },
            (Dialect::Anthropic, Dialect::Anthropic) => Mode::AnthropicPass {
                peek: an::StreamTranslator::new(None),
            },
            (_, client) => Mode::Translate {
                from: Decoder::new(upstream, out),
                to: Encoder::new(client, inbound.include_usage()),
            },
        }
    }
}

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

pub enum Encoder {
    OpenAi(OpenAiEncoder),
    Anthropic(AnthropicEncoder),
}

impl Encoder {
    fn new(client: Dialect, include_usage: bool) -> Encoder {
        match client {
            Dialect::Anthropic => Encoder::Anthropic(AnthropicEncoder::new()),
            Dialect::OpenAi | Dialect::Gemini => Encoder::OpenAi(OpenAiEncoder::new(include_usage)),
        }
    }

    pub fn encode(&mut self, ev: &StreamEvent, out: &mut BytesMut) {
        match self {
            Encoder::OpenAi(e) => e.encode(ev, out),
            Encoder::Anthropic(e) => e.encode(ev, out),
        }
    }

    /// The client's terminator (after any usage it is owed).
    pub fn end(&mut self) -> Bytes {
        match self {
            Encoder::OpenAi(e) => e.end(),
            Encoder::Anthropic(e) => e.end(),
        }
    }

    /// What the client already has, for a continuation's encoder: the
    /// envelope it continues (OpenAI) or where its blocks stand (Anthropic).
    pub fn seed(&self, seen: &mut Seen) {
        match self {
            Encoder::OpenAi(e) if e.resumed => {
                seen.id = Some(e.env.id.clone());
                seen.model = Some(e.env.model.clone());
                seen.created = Some(e.env.created);
            }
            Encoder::OpenAi(_) => {}
            Encoder::Anthropic(e) => seen.blocks = e.cursor(),
        }
    }
}

/// What a stream's continuation needs to look like part of the stream it
/// continues.
pub struct Resumed {
    pub ir: switchyard_protocol::ir::ChatRequest,
    /// The client's stream, where the continuation goes on.
    pub continues: Continues,
    /// Whitespace trimmed off the prefill, put back before the continuation.
    pub prefix: String,
}

/// The client stream a continuation is written into, per client dialect.
#[derive(Clone)]
pub enum Continues {
    /// The interrupted stream's id, model and created; the role chunk was sent.
    OpenAi {
        envelope: ChunkEnvelope,
        include_usage: bool,
    },
    /// `message_start` was sent; text goes on in the open text block, a new
    /// block gets the next index.
    Anthropic { at: an::BlockCursor },
}

impl Continues {
    pub fn dialect(&self) -> Dialect {
        match self {
            Continues::OpenAi { .. } => Dialect::OpenAi,
            Continues::Anthropic { .. } => Dialect::Anthropic,
        }
    }

    pub fn include_usage(&self) -> bool {
        match self {
            Continues::OpenAi { include_usage, .. } => *include_usage,
            Continues::Anthropic { .. } => true,
        }
    }
}

/// IR events → Anthropic named frames.
pub struct AnthropicEncoder {
    enc: an::StreamEncoder,
    /// Continuing another stream: whitespace trimmed off the prefill, put
    /// back in front of the continuation's first text.
    prefix: String,
}

impl AnthropicEncoder {
    fn new() -> Self {
        AnthropicEncoder {
            enc: an::StreamEncoder::new(),
            prefix: String::new(),
        }
    }

    /// Continues a stream that stands at `at`: no second `message_start`,
    /// text in the block left open. The `message_delta` at the end carries
    /// the continuation's own usage (its input includes the prefill; its
    /// output counts only the continued part).
    fn resumed(at: an::BlockCursor, prefix: String) -> Self {
        AnthropicEncoder {
            enc: an::StreamEncoder::continuing(at),
            prefix,
        }
    }

    fn encode(&mut self, ev: &StreamEvent, out: &mut BytesMut) {
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

    fn end(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        self.enc.end().iter().for_each(|f| out.extend_from_slice(f));
        out.freeze()
    }

    /// Where the frames written so far leave the client's stream.
    pub fn cursor(&self) -> an::BlockCursor {
        self.enc.cursor()
    }
}

/// IR events → OpenAI `chat.completion.chunk`s.
pub struct OpenAiEncoder {
    env: ChunkEnvelope,
    include_usage: bool,
    usage: Option<Usage>,
    finished: bool,
    /// Continuing another stream: its role chunk was already sent.
    resumed: bool,
    prefix: String,
}

impl OpenAiEncoder {
    fn new(include_usage: bool) -> Self {
        OpenAiEncoder {
            env: ChunkEnvelope::default(),
            include_usage,
            usage: None,
            finished: false,
            resumed: false,
            prefix: String::new(),
        }
    }

    fn resumed(env: ChunkEnvelope, include_usage: bool, prefix: String) -> Self {
        OpenAiEncoder {
            env,
            resumed: true,
            prefix,
            ..OpenAiEncoder::new(include_usage)
        }
    }

    fn encode(&mut self, ev: &StreamEvent, out: &mut BytesMut) {
        // A continuation with no text of its own still owes the whitespace.
        if matches!(ev, StreamEvent::Finish { .. }) && !self.prefix.is_empty() && !self.finished {
            let text = std::mem::take(&mut self.prefix);
            self.encode(&StreamEvent::TextDelta(text), out);
        }
        match ev {
            // A continuation keeps the envelope and role chunk already sent.
            StreamEvent::Start { .. } if self.resumed => return,
            StreamEvent::TextDelta(t) if !self.prefix.is_empty() => {
                let text = std::mem::take(&mut self.prefix) + t;
                out.extend_from_slice(&data_frame(&oa::encode_chunk(
                    &self.env,
                    &StreamEvent::TextDelta(text),
                )));
                return;
            }
            StreamEvent::Start { id, model, created } => {
                self.env = ChunkEnvelope {
                    id: if id.is_empty() {
                        format!("chatcmpl-{:024x}", rand::random::<u128>())
                    } else {
                        id.clone()
                    },
                    model: model.clone(),
                    created: if *created == 0 { now_secs() } else { *created },
                };
            }
            // Usage goes out once, last, and only if the client asked for it.
            StreamEvent::Usage(u) => {
                self.usage = Some(*u);
                return;
            }
            // A signature alone has nothing to show an OpenAI client.
            StreamEvent::ReasoningDelta { text, .. } if text.is_empty() => return,
            StreamEvent::Finish { .. } if self.finished => return,
            StreamEvent::Finish { .. } => self.finished = true,
            _ => {}
        }
        out.extend_from_slice(&data_frame(&oa::encode_chunk(&self.env, ev)));
    }

    fn end(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        if let (true, Some(u)) = (self.include_usage, self.usage) {
            out.extend_from_slice(&data_frame(&oa::encode_chunk(
                &self.env,
                &StreamEvent::Usage(u),
            )));
        }
        out.extend_from_slice(DONE_FRAME);
        out.freeze()
    }
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// The client's terminator for a passthrough stream.
pub fn pass_end(client: Dialect) -> Bytes {
    match client {
        Dialect::OpenAi | Dialect::Gemini => Bytes::from_static(DONE_FRAME),
        Dialect::Anthropic => {
            Bytes::from_static(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
        }
    }
}

/// The error event that ends an interrupted stream, in the client's dialect.
pub fn error_frame(client: Dialect, e: &GatewayError) -> Bytes {
    match client {
        Dialect::OpenAi | Dialect::Gemini => data_frame(&openai_error_body(e)),
        Dialect::Anthropic => switchyard_protocol::sse::named_frame(
            "error",
            &crate::ingress::respond::anthropic_error_body(e),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::ir::FinishReason;

    fn frames_of(frames: &[u8]) -> Vec<(String, serde_json::Value)> {
        std::str::from_utf8(frames)
            .unwrap()
            .split("\n\n")
            .filter(|f| !f.is_empty())
            .map(|f| {
                let data = f.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                let name = f.lines().find_map(|l| l.strip_prefix("event: "));
                let v: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
                (name.unwrap_or_default().to_owned(), v)
            })
            .collect()
    }

    fn finish() -> StreamEvent {
        StreamEvent::Finish {
            reason: FinishReason::Stop,
            raw: None,
        }
    }

    #[test]
    fn an_anthropic_continuation_puts_the_trimmed_whitespace_back_in_the_open_block() {
        let at = an::BlockCursor {
            open: Some((2, an::BlockType::Text)),
            next_index: 3,
        };
        let mut enc = AnthropicEncoder::resumed(at, "\n\n".into());
        let mut out = BytesMut::new();
        for ev in [
            StreamEvent::Start {
                id: "msg_x".into(),
                model: "m".into(),
                created: 0,
            },
            StreamEvent::TextDelta("World".into()),
            StreamEvent::TextDelta("!".into()),
            finish(),
        ] {
            enc.encode(&ev, &mut out);
        }
        out.extend_from_slice(&enc.end());
        let frames = frames_of(&out);
        let names: Vec<&str> = frames.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(frames[0].1["index"], 2);
        assert_eq!(frames[0].1["delta"]["text"], "\n\nWorld");
        assert_eq!(frames[1].1["delta"]["text"], "!");
        assert_eq!(frames[2].1["index"], 2);
    }

    #[test]
    fn a_continuation_without_text_still_sends_the_trimmed_whitespace() {
        let at = an::BlockCursor {
            open: Some((0, an::BlockType::Text)),
            next_index: 1,
        };
        let mut enc = AnthropicEncoder::resumed(at, " ".into());
        let mut out = BytesMut::new();
        enc.encode(&finish(), &mut out);
        out.extend_from_slice(&enc.end());
        let frames = frames_of(&out);
        assert_eq!(frames[0].0, "content_block_delta");
        assert_eq!(frames[0].1["delta"]["text"], " ");

        let env = ChunkEnvelope {
            id: "chatcmpl-1".into(),
            model: "m".into(),
            created: 1,
        };
        let mut enc = OpenAiEncoder::resumed(env, false, " ".into());
        let mut out = BytesMut::new();
        enc.encode(&finish(), &mut out);
        let chunks = frames_of(&out);
        assert_eq!(chunks.len(), 2);
        assert_eq!(chunks[0].1["choices"][0]["delta"]["content"], " ");
        assert_eq!(chunks[1].1["choices"][0]["finish_reason"], "stop");
    }
}
