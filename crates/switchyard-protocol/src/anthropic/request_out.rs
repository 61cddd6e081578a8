//! IR → Anthropic `/v1/messages` request body (gateway → provider).

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::tools_out::{tools_and_choice, OutTool, OutToolChoice};
use super::ConvertError;
use crate::ir::{self, ContentPart, ImageSource, Role};

/// `max_tokens` when neither the request nor the target gives one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// Name of the forced tool that carries JSON-mode answers (unless a client
/// tool already has that name; see [`Encoded::json_tool`]).
pub const JSON_TOOL_NAME: &str = "json";
pub(super) const JSON_TOOL_DESCRIPTION: &str = "Respond with a JSON object.";

/// Where the request goes.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// The upstream's model name.
    pub model: &'a str,
    /// `max_tokens` when the request has none (Anthropic requires one).
    pub max_output_tokens: Option<u32>,
    pub stream: bool,
}

/// An encoded body plus what the response side needs to undo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub body: Vec<u8>,
    /// Whitespace cut from the end of a trailing assistant message (prefill;
    /// Anthropic rejects trailing whitespace there). Empty when nothing was
    /// cut. The caller may prepend it to the answer's text.
    pub prefill_trimmed: String,
    /// JSON mode was emulated with this forced tool: pass it to
    /// [`super::decode_response`] / [`super::StreamTranslator::new`] so its
    /// call comes back as text.
    pub json_tool: Option<String>,
}

#[derive(Serialize)]
struct OutRequest<'a> {
    model: &'a str,
    max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<TextBlock<'a>>,
    messages: Vec<OutMessage<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u32>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<OutTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<OutToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<Metadata<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
}

#[derive(Serialize)]
struct TextBlock<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    content: OutContent<'a>,
}

/// A lone text block goes out as a plain string.
#[derive(Serialize)]
#[serde(untagged)]
enum OutContent<'a> {
    Text(&'a str),
    Blocks(Vec<OutBlock<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutBlock<'a> {
    Text {
        text: &'a str,
    },
    Image {
        source: OutSource<'a>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    RedactedThinking {
        data: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: &'a RawValue,
    },
    ToolResult {
        tool_use_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        content: Option<OutContent<'a>>,
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutSource<'a> {
    Base64 { media_type: &'a str, data: &'a str },
    Url { url: &'a str },
}

#[derive(Serialize)]
struct Metadata<'a> {
    user_id: &'a str,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u32,
}

/// Build the body. Rules (MAPPING §2–§11):
/// * system/developer messages → `system` text blocks, in order, wherever
///   they stood (hoisting is lossy about position);
/// * tool messages → `tool_result` blocks at the front of a user turn;
///   adjacent same-role turns merged; empty text parts dropped;
/// * reasoning without a signature is dropped (Anthropic would reject it);
/// * `max_tokens`: request, else `target.max_output_tokens`, else 4096;
///   temperature clamped to 0..=1; seed and penalties dropped;
/// * JSON mode → a forced tool (see [`Encoded::json_tool`]);
/// * `provider_options` merged last (they win).
pub fn encode_request(req: &ir::ChatRequest, target: &Target) -> Result<Encoded, ConvertError> {
    // Parsed tool arguments must outlive the borrowed body.
    let args = parse_arguments(req)?;
    let mut system = Vec::new();
    let mut turns: Vec<(Role, Vec<OutBlock>)> = Vec::new();
    let mut arg_iter = args.iter();
    for m in &req.messages {
        match m.role {
            Role::System => {
                system.extend(texts(&m.content).map(|text| TextBlock { kind: "text", text }))
            }
            Role::User => push_turn(&mut turns, Role::User, content_blocks(&m.content)),
            Role::Assistant => {
                let mut blocks = content_blocks(&m.content);
                for (c, input) in m.tool_calls.iter().zip(&mut arg_iter) {
                    blocks.push(OutBlock::ToolUse {
                        id: &c.id,
                        name: &c.name,
                        input,
                    });
                }
                push_turn(&mut turns, Role::Assistant, blocks);
            }
            Role::Tool => push_tool_result(&mut turns, m),
        }
    }
    let prefill_trimmed = trim_prefill(&mut turns);
    let messages = turns
        .into_iter()
        .map(|(role, blocks)| OutMessage {
            role: if role == Role::Assistant {
                "assistant"
            } else {
                "user"
            },
            content: content_of(blocks).unwrap_or(OutContent::Text("")),
        })
        .collect();

    let (tools, tool_choice, json_tool) = tools_and_choice(req);
    let out = OutRequest {
        model: target.model,
        max_tokens: req
            .max_tokens
            .or(target.max_output_tokens)
            .unwrap_or(DEFAULT_MAX_TOKENS),
        system,
        messages,
        temperature: req.temperature.map(|t| t.clamp(0.0, 1.0)),
        top_p: req.top_p,
        top_k: req.top_k,
        stop_sequences: &req.stop,
        tools,
        tool_choice,
        metadata: req.user.as_deref().map(|user_id| Metadata { user_id }),
        thinking: req
            .reasoning
            .as_ref()
            .and_then(|r| r.budget_tokens)
            .map(|budget_tokens| Thinking {
                kind: "enabled",
                budget_tokens,
            }),
        stream: target.stream,
    };
    let body = if req.provider_options.is_empty() {
        serde_json::to_vec(&out)
    } else {
        serde_json::to_value(&out).and_then(|v| {
            let mut map = match v {
                Value::Object(m) => m,
                _ => Map::new(),
            };
            for (k, v) in &req.provider_options {
                map.insert(k.clone(), v.clone());
            }
            serde_json::to_vec(&map)
        })
    }
    .unwrap_or_default(); // serializing plain structs into a Vec cannot fail
    Ok(Encoded {
        body,
        prefill_trimmed,
        json_tool,
    })
}

/// Every assistant tool call's arguments as a JSON object (`""` → `{}`).
fn parse_arguments(req: &ir::ChatRequest) -> Result<Vec<Box<RawValue>>, ConvertError> {
    let calls = req.messages.iter().filter(|m| m.role == Role::Assistant);
    let mut out = Vec::new();
    for c in calls.flat_map(|m| &m.tool_calls) {
        let text = c.arguments.trim();
        let text = if text.is_empty() { "{}" } else { text };
        let bad = |reason: String| ConvertError::InvalidToolArguments {
            id: c.id.clone(),
            name: c.name.clone(),
            reason,
        };
        let raw: Box<RawValue> = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if !raw.get().starts_with('{') {
            return Err(bad("not an object".into()));
        }
        out.push(raw);
    }
    Ok(out)
}

fn texts(parts: &[ContentPart]) -> impl Iterator<Item = &str> {
    parts.iter().filter_map(|p| match p {
        ContentPart::Text(t) if !t.is_empty() => Some(t.as_str()),
        _ => None,
    })
}

fn content_blocks(parts: &[ContentPart]) -> Vec<OutBlock<'_>> {
    parts
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text(t) if t.is_empty() => None,
            ContentPart::Text(text) => Some(OutBlock::Text { text }),
            ContentPart::Image { source, .. } => Some(OutBlock::Image {
                source: match source {
                    ImageSource::Url(url) => OutSource::Url { url },
                    ImageSource::Base64 { media_type, data } => {
                        OutSource::Base64 { media_type, data }
                    }
                },
            }),
            ContentPart::Reasoning {
                text,
                signature: Some(signature),
            } => Some(OutBlock::Thinking {
                thinking: text,
                signature,
            }),
            ContentPart::Reasoning {
                signature: None, ..
            } => None,
            ContentPart::RedactedReasoning(data) => Some(OutBlock::RedactedThinking { data }),
            ContentPart::ResponsesItem(_) => None,
        })
        .collect()
}

fn content_of(mut blocks: Vec<OutBlock<'_>>) -> Option<OutContent<'_>> {
    match blocks.as_slice() {
        [] => None,
        [OutBlock::Text { text }] => Some(OutContent::Text(text)),
        _ => Some(OutContent::Blocks(std::mem::take(&mut blocks))),
    }
}

/// Append to the last turn when it has the same role, else open a new one.
/// Empty block lists add nothing.
fn push_turn<'a>(
    turns: &mut Vec<(Role, Vec<OutBlock<'a>>)>,
    role: Role,
    blocks: Vec<OutBlock<'a>>,
) {
    if blocks.is_empty() {
        return;
    }
    match turns.last_mut() {
        Some((r, b)) if *r == role => b.extend(blocks),
        _ => turns.push((role, blocks)),
    }
}

/// A tool message becomes a `tool_result` in a user turn, placed after the
/// turn's earlier tool results but before any other block.
fn push_tool_result<'a>(turns: &mut Vec<(Role, Vec<OutBlock<'a>>)>, m: &'a ir::Message) {
    let block = OutBlock::ToolResult {
        tool_use_id: m.tool_call_id.as_deref().unwrap_or_default(),
        content: content_of(content_blocks(&m.content)),
        is_error: m.is_error,
    };
    match turns.last_mut() {
        Some((Role::User, blocks)) => {
            let at = blocks
                .iter()
                .take_while(|b| matches!(b, OutBlock::ToolResult { .. }))
                .count();
            blocks.insert(at, block);
        }
        _ => turns.push((Role::User, vec![block])),
    }
}

/// A trailing assistant turn is a prefill: it must not end in whitespace.
fn trim_prefill(turns: &mut Vec<(Role, Vec<OutBlock<'_>>)>) -> String {
    let Some((Role::Assistant, blocks)) = turns.last_mut() else {
        return String::new();
    };
    let Some(OutBlock::Text { text }) = blocks.last_mut() else {
        return String::new();
    };
    let kept = text.trim_end();
    let cut = text[kept.len()..].to_owned();
    *text = kept;
    if kept.is_empty() {
        blocks.pop();
        if blocks.is_empty() {
            turns.pop();
        }
    }
    cut
}
