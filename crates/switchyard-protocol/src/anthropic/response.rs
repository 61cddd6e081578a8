//! Whole (non-streamed) answers: Anthropic `message` ↔ IR, and error bodies.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::compact_json;
use super::wire::{finish_from_wire, finish_to_wire, ErrorObj, Message};
use crate::ir::{self, FinishReason};

/// A `message` body → IR. Text blocks are joined, thinking blocks joined into
/// `reasoning` (last signature kept), `tool_use` inputs become compact JSON
/// arguments. With `json_tool` (from [`super::Encoded::json_tool`]) that
/// tool's call is returned as the text, with finish `Stop` unless other tool
/// calls remain. `redacted_thinking` and server-tool blocks are dropped.
pub fn decode_response(
    body: &[u8],
    json_tool: Option<&str>,
) -> Result<ir::ChatResponse, serde_json::Error> {
    let m: Message = serde_json::from_slice(body)?;
    let mut text: Option<String> = None;
    let mut reasoning: Option<String> = None;
    let mut signature = None;
    let mut tool_calls = Vec::new();
    let mut json_text = None;
    for b in &m.content {
        match b.kind.as_ref() {
            "text" => text
                .get_or_insert_with(String::new)
                .push_str(b.text.as_deref().unwrap_or_default()),
            "thinking" => {
                reasoning
                    .get_or_insert_with(String::new)
                    .push_str(b.thinking.as_deref().unwrap_or_default());
                if let Some(s) = &b.signature {
                    signature = Some(s.to_string());
                }
            }
            "tool_use" => {
                let name = b.name.as_deref().unwrap_or_default();
                let args = b
                    .input
                    .map_or_else(|| "{}".to_owned(), |i| compact_json(i.get()));
                if json_tool.is_some_and(|j| j == name) && json_text.is_none() {
                    json_text = Some(args);
                } else {
                    tool_calls.push(ir::ToolCall {
                        id: b.id.as_deref().unwrap_or_default().to_owned(),
                        name: name.to_owned(),
                        arguments: args,
                    });
                }
            }
            _ => {}
        }
    }
    let raw = m.stop_reason.as_deref();
    let mut finish = raw.map(finish_from_wire).unwrap_or_default();
    if json_text.is_some() {
        text = json_text;
        if tool_calls.is_empty() && finish == FinishReason::ToolCalls {
            finish = FinishReason::Stop;
        }
    }
    Ok(ir::ChatResponse {
        id: m.id.as_deref().unwrap_or_default().to_owned(),
        model: m.model.as_deref().unwrap_or_default().to_owned(),
        created: 0,
        text,
        reasoning,
        reasoning_signature: signature,
        tool_calls,
        refusal: None,
        finish_reason: finish,
        raw_finish_reason: raw.map(str::to_owned),
        usage: m.usage.to_ir(),
    })
}

/// `{"type":"error","error":{"type","message"}}` → (error.type, message).
pub fn parse_error(body: &[u8]) -> Option<(String, String)> {
    #[derive(Deserialize)]
    struct Body<'a> {
        #[serde(borrow)]
        error: ErrorObj<'a>,
    }
    let b: Body = serde_json::from_slice(body).ok()?;
    Some((
        b.error.kind?.into_owned(),
        b.error.message.unwrap_or_default().into_owned(),
    ))
}

#[derive(Serialize)]
struct OutMessage<'a> {
    id: String,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: Vec<OutBlock<'a>>,
    stop_reason: &'static str,
    stop_sequence: Option<()>,
    usage: OutUsage,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutBlock<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    Text {
        text: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Box<RawValue>,
    },
}

/// Anthropic's `usage` shape (input excludes cache reads and writes).
#[derive(Serialize)]
pub(super) struct OutUsage {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
}

impl OutUsage {
    pub fn from_ir(u: &ir::Usage) -> OutUsage {
        OutUsage {
            input_tokens: u
                .input_tokens
                .saturating_sub(u.cached_input_tokens)
                .saturating_sub(u.cache_write_tokens),
            cache_creation_input_tokens: u.cache_write_tokens,
            cache_read_input_tokens: u.cached_input_tokens,
            output_tokens: u.output_tokens,
        }
    }
}

/// `msg_…` from any upstream id; an answer with none gets its own (never
/// a bare `msg_` that every such answer would share).
pub(super) fn message_id(id: &str) -> String {
    if id.is_empty() {
        crate::ids::with_prefix("msg")
    } else if id.starts_with("msg_") {
        id.to_owned()
    } else {
        format!("msg_{id}")
    }
}

/// A tool call's arguments as an `input` object (`{}` when not an object).
pub(super) fn input_object(arguments: &str) -> Box<RawValue> {
    serde_json::from_str::<Box<RawValue>>(arguments)
        .ok()
        .filter(|r| r.get().starts_with('{'))
        .unwrap_or_else(|| RawValue::from_string("{}".to_owned()).unwrap_or_default())
}

/// An IR answer as an Anthropic `message` body: thinking, text, tool_use
/// blocks in that order. An OpenAI-style `refusal` becomes the text (when
/// there is none) and `stop_reason: refusal`.
pub fn encode_response(r: &ir::ChatResponse) -> Vec<u8> {
    let mut content = Vec::new();
    if let Some(thinking) = r.reasoning.as_deref().filter(|t| !t.is_empty()) {
        content.push(OutBlock::Thinking {
            thinking,
            signature: r.reasoning_signature.as_deref().unwrap_or_default(),
        });
    }
    if let Some(text) = r.text.as_deref().or(r.refusal.as_deref()) {
        if !text.is_empty() {
            content.push(OutBlock::Text { text });
        }
    }
    for c in &r.tool_calls {
        content.push(OutBlock::ToolUse {
            id: &c.id,
            name: &c.name,
            input: input_object(&c.arguments),
        });
    }
    let stop_reason = if r.refusal.is_some() {
        "refusal"
    } else {
        finish_to_wire(r.finish_reason, r.raw_finish_reason.as_deref())
    };
    let out = OutMessage {
        id: message_id(&r.id),
        kind: "message",
        role: "assistant",
        model: &r.model,
        content,
        stop_reason,
        stop_sequence: None,
        usage: OutUsage::from_ir(&r.usage),
    };
    serde_json::to_vec(&out).unwrap_or_default()
}
