//! Client's Anthropic `/v1/messages` body → IR, validated field by field.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::params_in::{choice, output_config, thinking, tools};
use super::wire::{Block, ImageSource as WireSource};
use super::FieldError;
use crate::ir::{self, ContentPart, ImageSource, Message, Role};
use crate::passthrough::{self, Fields};

/// What the passthrough path needs from a body it forwards unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPeek<'a> {
    pub model: Cow<'a, str>,
    pub stream: bool,
}

/// Read only `model` and `stream` (other fields are skipped unparsed into
/// values, so this is cheap). The rest of the body is not validated.
pub fn peek_request(body: &str) -> Result<RequestPeek<'_>, FieldError> {
    #[derive(Deserialize)]
    struct Peek<'a> {
        #[serde(default, borrow)]
        model: Option<Cow<'a, str>>,
        #[serde(default)]
        stream: Option<bool>,
    }
    let p: Peek = serde_json::from_str(body).map_err(|e| FieldError {
        param: None,
        message: format!("request body is not valid JSON: {e}"),
    })?;
    match p.model {
        Some(model) if !model.is_empty() => Ok(RequestPeek {
            model,
            stream: p.stream.unwrap_or(false),
        }),
        _ => Err(err("model", "`model` is required")),
    }
}

pub(super) use crate::json::{err, field};

/// Parse and validate a Messages request. `model`, `max_tokens` and
/// `messages` are required; unknown top-level fields are ignored (they only
/// survive on the Anthropic→Anthropic passthrough path), except
/// `provider_options`, which is kept as on the OpenAI front door.
pub fn decode_request(body: &str) -> Result<ir::ChatRequest, FieldError> {
    let fields = passthrough::parse_object(body).map_err(|message| FieldError {
        param: None,
        message,
    })?;
    decode_fields(&fields)
}

/// [`decode_request`] on a body already split into its top-level fields
/// (the front door keeps them for the passthrough: one parse, not two).
pub fn decode_fields(fields: &Fields<'_>) -> Result<ir::ChatRequest, FieldError> {
    decode_fields_with(fields, true)
}

/// A `/v1/messages/count_tokens` body: a Messages request without
/// `max_tokens` (one is accepted and kept if sent).
pub fn decode_count_fields(fields: &Fields<'_>) -> Result<ir::ChatRequest, FieldError> {
    decode_fields_with(fields, false)
}

fn decode_fields_with(
    fields: &Fields<'_>,
    require_max_tokens: bool,
) -> Result<ir::ChatRequest, FieldError> {
    let mut req = ir::ChatRequest::default();
    let (mut saw_max, mut saw_messages) = (false, false);
    let mut tool_choice: Option<&RawValue> = None;
    let mut sys = Vec::new();
    for (key, raw) in fields {
        let raw: &RawValue = raw;
        match key.as_ref() {
            "model" => req.model = field(raw, "model")?,
            "max_tokens" => {
                let n: u32 = field(raw, "max_tokens")?;
                if n == 0 {
                    return Err(err("max_tokens", "must be at least 1"));
                }
                req.max_tokens = Some(n);
                saw_max = true;
            }
            "messages" => {
                req.messages = messages(raw)?;
                saw_messages = true;
            }
            "system" => sys = system(raw)?,
            "stream" => req.stream = field::<Option<bool>>(raw, "stream")?.unwrap_or(false),
            "temperature" => req.temperature = unit(raw, "temperature")?,
            "top_p" => req.top_p = unit(raw, "top_p")?,
            "top_k" => req.top_k = field(raw, "top_k")?,
            "stop_sequences" => {
                req.stop = field::<Option<Vec<String>>>(raw, "stop_sequences")?.unwrap_or_default()
            }
            "tools" => req.tools = tools(raw)?,
            "tool_choice" => tool_choice = Some(raw),
            "metadata" => {
                #[derive(Deserialize)]
                struct Meta {
                    #[serde(default)]
                    user_id: Option<String>,
                }
                req.user = field::<Option<Meta>>(raw, "metadata")?.and_then(|m| m.user_id);
            }
            "thinking" => thinking(raw, &mut req)?,
            "output_config" => output_config(raw, &mut req)?,
            "provider_options" => {
                req.provider_options = crate::json::provider_options(raw)?.unwrap_or_default()
            }
            _ => {}
        }
    }
    if req.model.is_empty() {
        return Err(err("model", "`model` is required"));
    }
    if require_max_tokens && !saw_max {
        return Err(err("max_tokens", "`max_tokens` is required"));
    }
    if !saw_messages {
        return Err(err("messages", "`messages` is required"));
    }
    if let Some(raw) = tool_choice {
        choice(raw, &mut req)?;
    }
    req.messages.splice(0..0, sys);
    Ok(req)
}

fn unit(raw: &RawValue, param: &str) -> Result<Option<f64>, FieldError> {
    let v: Option<f64> = field(raw, param)?;
    match v {
        Some(x) if !(0.0..=1.0).contains(&x) => {
            Err(err(param, format!("must be between 0 and 1, got {x}")))
        }
        _ => Ok(v),
    }
}

/// `system`: a string or text blocks; becomes leading System messages.
fn system(raw: &RawValue) -> Result<Vec<Message>, FieldError> {
    let texts: Vec<String> = match raw.get().trim_start().as_bytes().first() {
        Some(b'"') => vec![field(raw, "system")?],
        Some(b'n') => Vec::new(),
        _ => {
            let blocks: Vec<Block> = field(raw, "system")?;
            let mut texts = Vec::with_capacity(blocks.len());
            for (i, b) in blocks.into_iter().enumerate() {
                match (b.kind.as_ref(), b.text) {
                    ("text", Some(t)) => texts.push(t.into_owned()),
                    ("text", None) => {
                        return Err(err(format!("system[{i}]"), "a text block needs `text`"))
                    }
                    _ => {} // not text: nothing a translation can carry
                }
            }
            texts
        }
    };
    Ok(texts
        .into_iter()
        .filter(|t| !t.is_empty())
        .map(|t| Message {
            role: Role::System,
            content: vec![ContentPart::Text(t)],
            ..Message::default()
        })
        .collect())
}

fn messages(raw: &RawValue) -> Result<Vec<Message>, FieldError> {
    #[derive(Deserialize)]
    struct Msg<'a> {
        role: Cow<'a, str>,
        #[serde(borrow)]
        content: &'a RawValue,
    }
    let items: Vec<&RawValue> = field(raw, "messages")
        .map_err(|_| err("messages", "must be an array of message objects"))?;
    if items.is_empty() {
        return Err(err("messages", "must contain at least one message"));
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let param = format!("messages[{i}]");
        let m: Msg = field(item, &param)?;
        // `system` in the middle of the conversation is what Claude Code
        // sends (the mid-conversation system beta): kept in place, like an
        // OpenAI system message; adapters that hoist do so on the way out.
        let role = match m.role.as_ref() {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "system" => Role::System,
            other => {
                return Err(err(
                    format!("{param}.role"),
                    format!("must be `user`, `assistant` or `system`, got `{other}`"),
                ))
            }
        };
        let content_param = format!("{param}.content");
        if m.content.get().starts_with('"') {
            let text: String = field(m.content, &content_param)?;
            out.push(Message {
                role,
                content: vec![ContentPart::Text(text)],
                ..Message::default()
            });
            continue;
        }
        let blocks: Vec<&RawValue> = field(m.content, &content_param)
            .map_err(|_| err(&content_param, "must be a string or an array of blocks"))?;
        blocks_to_messages(role, &blocks, &content_param, &mut out)?;
    }
    Ok(out)
}

/// One Anthropic message → IR messages: `tool_result` blocks become Tool
/// messages ahead of whatever else the user turn held.
fn blocks_to_messages(
    role: Role,
    blocks: &[&RawValue],
    param: &str,
    out: &mut Vec<Message>,
) -> Result<(), FieldError> {
    let mut msg = Message {
        role,
        ..Message::default()
    };
    for (j, raw) in blocks.iter().enumerate() {
        let param = format!("{param}[{j}]");
        let b: Block = field(raw, &param)?;
        let missing = |what: &str| err(&param, format!("`{}` block needs `{what}`", b.kind));
        match (b.kind.as_ref(), role) {
            ("text", _) => {
                let t = b.text.as_deref().ok_or_else(|| missing("text"))?;
                msg.content.push(ContentPart::Text(t.to_owned()));
            }
            ("image", _) => msg.content.push(image(&b, &param)?),
            ("thinking", Role::Assistant) => msg.content.push(ContentPart::Reasoning {
                text: b
                    .thinking
                    .as_deref()
                    .ok_or_else(|| missing("thinking"))?
                    .into(),
                signature: b.signature.map(Cow::into_owned),
            }),
            ("redacted_thinking", Role::Assistant) => msg.content.push(
                ContentPart::RedactedReasoning(b.data.ok_or_else(|| missing("data"))?.into()),
            ),
            ("tool_use", Role::Assistant) => {
                let input = b.input.ok_or_else(|| missing("input"))?;
                if !input.get().starts_with('{') {
                    return Err(err(format!("{param}.input"), "must be an object"));
                }
                msg.tool_calls.push(ir::ToolCall {
                    id: b.id.ok_or_else(|| missing("id"))?.into(),
                    name: b.name.ok_or_else(|| missing("name"))?.into(),
                    arguments: super::compact_json(input.get()),
                });
            }
            ("tool_result", Role::User) => out.push(Message {
                role: Role::Tool,
                content: tool_result_content(b.content, &param)?,
                tool_call_id: Some(b.tool_use_id.ok_or_else(|| missing("tool_use_id"))?.into()),
                is_error: b.is_error.unwrap_or(false),
                ..Message::default()
            }),
            (kind @ ("thinking" | "redacted_thinking" | "tool_use" | "tool_result"), _) => {
                return Err(err(
                    &param,
                    format!("a `{kind}` block cannot be in a {} turn", role_name(role)),
                ))
            }
            // Blocks only Anthropic understands (documents, server tool
            // calls and results, container uploads, newer types): the
            // passthrough forwards them as they came; a translation drops
            // them, it never refuses the request (contract §3).
            _ => {}
        }
    }
    if !msg.content.is_empty() || !msg.tool_calls.is_empty() {
        out.push(msg);
    }
    Ok(())
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User | Role::Tool => "user",
        Role::Assistant => "assistant",
    }
}

fn image(b: &Block, param: &str) -> Result<ContentPart, FieldError> {
    let bad = || {
        err(
            format!("{param}.source"),
            "needs `type: base64` with `media_type` and `data`, or `type: url` with `url`",
        )
    };
    let src: WireSource = b
        .source
        .and_then(|raw| serde_json::from_str(raw.get()).ok())
        .ok_or_else(bad)?;
    let source = match (src.kind.as_ref(), &src.media_type, &src.data, &src.url) {
        ("base64", Some(m), Some(d), _) => ImageSource::Base64 {
            media_type: m.to_string(),
            data: d.to_string(),
        },
        ("url", _, _, Some(u)) => ImageSource::Url(u.to_string()),
        _ => return Err(bad()),
    };
    Ok(ContentPart::Image {
        source,
        detail: None,
    })
}

fn tool_result_content(
    raw: Option<&RawValue>,
    param: &str,
) -> Result<Vec<ContentPart>, FieldError> {
    let param = format!("{param}.content");
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    if raw.get().starts_with('"') {
        let t: String = field(raw, &param)?;
        return Ok(vec![ContentPart::Text(t)]);
    }
    let blocks: Vec<Block> = field(raw, &param)?;
    let mut parts = Vec::with_capacity(blocks.len());
    for (k, b) in blocks.iter().enumerate() {
        match (b.kind.as_ref(), &b.text) {
            ("text", Some(t)) => parts.push(ContentPart::Text(t.to_string())),
            ("image", _) => parts.push(image(b, &format!("{param}[{k}]"))?),
            _ => {} // documents, search results: not representable
        }
    }
    Ok(parts)
}
