//! The OpenAI Chat Completions door (`POST /v1/chat/completions`): its
//! request view, routing facts, answers, stream chunks and error envelope.

use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use serde::Serialize;
use switchyard_protocol::ir::{ChatResponse, StreamEvent, Usage};
use switchyard_protocol::openai::{
    self as oa, parse_request, ChatCompletionRequest, ChunkEnvelope, PartKind, RequestView,
    ResponseFormatKind, WireContent, WireRole,
};
use switchyard_protocol::sse::{data_frame, DONE_FRAME};

use super::facts::{Facts, Raw, Tally};
use super::{Continues, Inbound, StreamPosition};
use crate::config::{Capabilities, Capability};
use crate::error::GatewayError;

/// The passthrough view; the IR is built only if an adapter needs it.
pub fn decode(text: &str) -> Result<Inbound<'_>, GatewayError> {
    let view = parse_request(text).map_err(|e| GatewayError::invalid(e.param, e.message))?;
    Ok(Inbound::OpenAi {
        view,
        ir: OnceLock::new(),
    })
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: ErrorBody<'a>,
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    code: &'a str,
    param: Option<&'a str>,
}

/// `{"error":{"message","type","code","param"}}`
pub fn error_body(e: &GatewayError) -> Vec<u8> {
    let env = Envelope {
        error: ErrorBody {
            message: &e.message,
            kind: e.code.openai_type(),
            code: e.code.as_str(),
            param: e.param.as_deref(),
        },
    };
    serde_json::to_vec(&env).unwrap_or_default()
}

/// `data: {"error":{…}}`
pub fn stream_error(e: &GatewayError) -> Bytes {
    data_frame(&error_body(e))
}

pub fn answer(r: &ChatResponse) -> Bytes {
    Bytes::from(oa::encode_response(r))
}

pub fn pass_end() -> Bytes {
    Bytes::from_static(DONE_FRAME)
}

pub fn continues(at: &StreamPosition, include_usage: bool) -> Continues {
    Continues::OpenAi {
        envelope: ChunkEnvelope {
            id: at.id.clone().unwrap_or_default(),
            model: at.model.clone().unwrap_or_default(),
            created: at.created.unwrap_or_default(),
        },
        include_usage,
    }
}

/// Routing facts straight from the view (the passthrough path never
/// builds the IR): the typed messages, the raw `tools` and schema.
pub fn facts(view: &RequestView<'_>) -> Facts {
    let t = &view.typed;
    let mut needs = Capabilities::default();
    if !t.tools.is_empty() {
        needs.insert(Capability::Tools);
    }
    let mut tally = Tally::default();
    for m in &t.messages {
        tally.message();
        if let Some(n) = &m.name {
            tally.text(n);
        }
        match &m.content {
            Some(WireContent::Text(s)) => tally.text(s),
            Some(WireContent::Parts(parts)) => {
                for p in parts {
                    match p.kind {
                        PartKind::Text => tally.text(p.text.as_deref().unwrap_or_default()),
                        PartKind::ImageUrl => {
                            needs.insert(Capability::Vision);
                            tally.binary();
                        }
                        PartKind::InputAudio | PartKind::File => tally.binary(),
                    }
                }
            }
            None => {}
        }
        if let Some(r) = &m.reasoning_content {
            tally.text(r);
        }
        for c in m.tool_calls.iter().flatten() {
            tally.call(&c.function.name, &c.function.arguments);
        }
    }
    for tool in &t.tools {
        let f = &tool.function;
        let params = f
            .parameters
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        tally.tool_compact(&f.name, f.description.as_deref(), &params);
    }
    let raw = Raw::of(&view.fields);
    if let Some(tools) = raw.tools {
        tally.tools_json(tools.get());
    }
    // Whatever `provider_options` adds goes upstream too.
    if let Some(options) = raw.options {
        tally.json(options.get());
    }
    if let Some(f) = &t.response_format {
        if f.kind == ResponseFormatKind::JsonSchema {
            needs.insert(Capability::JsonSchema);
            if let Some(j) = &f.json_schema {
                let schema = j
                    .schema
                    .and_then(|s| serde_json::from_str(s.get()).ok())
                    .unwrap_or_default();
                tally.schema(&j.name, &schema);
            }
        }
    }
    tally.finish(
        needs,
        t.max_completion_tokens.or(t.max_tokens),
        t.n.unwrap_or(1),
    )
}

pub fn last_user_text(t: &ChatCompletionRequest<'_>) -> String {
    t.messages
        .iter()
        .rev()
        .find(|m| m.role == WireRole::User)
        .map(|m| match &m.content {
            Some(WireContent::Text(s)) => s.to_string(),
            Some(WireContent::Parts(parts)) => {
                parts.iter().filter_map(|p| p.text.as_deref()).collect()
            }
            None => String::new(),
        })
        .unwrap_or_default()
}

/// IR events → OpenAI `chat.completion.chunk`s.
pub struct StreamEncoder {
    env: ChunkEnvelope,
    include_usage: bool,
    usage: Option<Usage>,
    finished: bool,
    /// Continuing another stream: its role chunk was already sent.
    resumed: bool,
    /// Whitespace trimmed off the prefill, put back before the continuation.
    prefix: String,
}

impl StreamEncoder {
    pub fn new(include_usage: bool) -> Self {
        StreamEncoder {
            env: ChunkEnvelope::default(),
            include_usage,
            usage: None,
            finished: false,
            resumed: false,
            prefix: String::new(),
        }
    }

    pub fn resumed(env: ChunkEnvelope, include_usage: bool, prefix: String) -> Self {
        StreamEncoder {
            env,
            resumed: true,
            prefix,
            ..StreamEncoder::new(include_usage)
        }
    }

    /// A continuation's encoder carries the envelope the client already has.
    pub fn position(&self, at: &mut StreamPosition) {
        if self.resumed {
            at.id = Some(self.env.id.clone());
            at.model = Some(self.env.model.clone());
            at.created = Some(self.env.created);
        }
    }

    pub fn encode(&mut self, ev: &StreamEvent, out: &mut BytesMut) {
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
                    created: if *created == 0 {
                        crate::doors::unix_now()
                    } else {
                        *created
                    },
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

    pub fn end(&mut self) -> Bytes {
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
