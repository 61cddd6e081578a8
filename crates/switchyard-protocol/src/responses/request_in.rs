//! Client's `POST /v1/responses` body → IR request + [`ResponsesExtras`].
//!
//! The Responses API is item-based; the IR is turn-based. Items are grouped
//! into turns here (MAPPING §14.1): a `reasoning` item, an assistant message
//! and the `function_call` items after it form ONE assistant turn;
//! `function_call_output` items become Tool messages; system and developer
//! messages stay in place as System messages (`instructions` comes first).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::extras::ResponsesExtras;
use super::params_in::{choice, reasoning, text, tools};
use super::FieldError;
use crate::ir::{self, ContentPart, Message, Role};
use crate::passthrough::{self, Fields};

pub(super) use crate::json::{err, field};

pub(super) fn value(raw: &RawValue, param: &str) -> Result<Value, FieldError> {
    field(raw, param)
}

/// Parse and validate a Responses request. `model` and `input` are
/// required; unknown fields are ignored (they survive only on the
/// passthrough path to a Responses upstream).
pub fn decode_request(body: &str) -> Result<(ir::ChatRequest, ResponsesExtras), FieldError> {
    let fields = passthrough::parse_object(body).map_err(|message| FieldError {
        param: None,
        message,
    })?;
    decode_fields(&fields)
}

/// [`decode_request`] on a body already split into its top-level fields.
pub fn decode_fields(
    fields: &Fields<'_>,
) -> Result<(ir::ChatRequest, ResponsesExtras), FieldError> {
    let mut req = ir::ChatRequest::default();
    let mut x = ResponsesExtras::default();
    let mut input = None;
    let mut tool_choice = None;
    let mut user = None;
    for (key, raw) in fields {
        let raw: &RawValue = raw;
        let key = key.as_ref();
        match key {
            "model" => req.model = field(raw, key)?,
            "input" => input = Some(raw),
            "instructions" => x.echo.instructions = field(raw, key)?,
            "tools" => tools(raw, &mut req, &mut x)?,
            "tool_choice" => tool_choice = Some(raw),
            "text" => text(raw, &mut req, &mut x)?,
            "reasoning" => reasoning(raw, &mut req, &mut x)?,
            "max_output_tokens" => {
                let n: Option<u32> = field(raw, key)?;
                if n == Some(0) {
                    return Err(err(key, "must be at least 1"));
                }
                req.max_tokens = n;
                x.echo.max_output_tokens = n;
            }
            "temperature" => {
                req.temperature = range(raw, key, 2.0)?;
                x.echo.temperature = req.temperature.unwrap_or(1.0);
            }
            "top_p" => {
                req.top_p = range(raw, key, 1.0)?;
                x.echo.top_p = req.top_p.unwrap_or(1.0);
            }
            "top_logprobs" => x.echo.top_logprobs = field::<Option<u32>>(raw, key)?.unwrap_or(0),
            "max_tool_calls" => x.echo.max_tool_calls = field(raw, key)?,
            "parallel_tool_calls" => {
                req.parallel_tool_calls = field(raw, key)?;
                x.echo.parallel_tool_calls = req.parallel_tool_calls.unwrap_or(true);
            }
            "user" => user = field::<Option<String>>(raw, key)?,
            "safety_identifier" => x.safety_identifier = field(raw, key)?,
            "metadata" => x.metadata = field(raw, key)?,
            "stream" => req.stream = field::<Option<bool>>(raw, key)?.unwrap_or(false),
            "store" => x.store = field::<Option<bool>>(raw, key)?.unwrap_or(true),
            "background" => x.echo.background = field::<Option<bool>>(raw, key)?.unwrap_or(false),
            "previous_response_id" => x.previous_response_id = field(raw, key)?,
            "conversation" if raw.get() != "null" => x.conversation = Some(raw.get().to_owned()),
            "include" => x.include = field::<Option<Vec<String>>>(raw, key)?.unwrap_or_default(),
            "prompt_cache_key" => x.prompt_cache_key = field(raw, key)?,
            "service_tier" => x.service_tier = field(raw, key)?,
            "truncation" => x.truncation = field(raw, key)?,
            "provider_options" => {
                req.provider_options = crate::json::provider_options(raw)?.unwrap_or_default()
            }
            _ => {}
        }
    }
    if req.model.is_empty() {
        return Err(err("model", "`model` is required"));
    }
    let input = input.ok_or_else(|| err("input", "`input` is required"))?;
    if let Some(raw) = tool_choice {
        choice(raw, &mut req, &mut x)?;
    }
    if let Some(i) = x.echo.instructions.as_ref().filter(|i| !i.is_empty()) {
        req.messages.push(Message {
            role: Role::System,
            content: vec![ContentPart::Text(i.clone())],
            ..Message::default()
        });
    }
    items(input, &mut req.messages)?;
    req.user = user.clone().or_else(|| x.safety_identifier.clone());
    let e = &mut x.echo;
    e.user = user;
    e.safety_identifier.clone_from(&x.safety_identifier);
    e.store = x.store;
    e.previous_response_id.clone_from(&x.previous_response_id);
    e.prompt_cache_key.clone_from(&x.prompt_cache_key);
    if let Some(t) = &x.service_tier {
        e.service_tier.clone_from(t);
    }
    if let Some(t) = &x.truncation {
        e.truncation.clone_from(t);
    }
    if let Some(m) = &x.metadata {
        e.metadata = Value::Object(m.clone());
    }
    Ok((req, x))
}

fn range(raw: &RawValue, param: &str, hi: f64) -> Result<Option<f64>, FieldError> {
    let v: Option<f64> = field(raw, param)?;
    match v {
        Some(x) if !(0.0..=hi).contains(&x) => {
            Err(err(param, format!("must be between 0 and {hi}, got {x}")))
        }
        _ => Ok(v),
    }
}

// === input items ===

#[derive(Deserialize)]
struct Item<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    content: Option<&'a RawValue>,
    #[serde(default)]
    call_id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default, borrow)]
    output: Option<&'a RawValue>,
    #[serde(default)]
    input: Option<String>,
    #[serde(default)]
    summary: Option<Vec<Summary>>,
}

#[derive(Deserialize)]
struct Summary {
    #[serde(default)]
    text: String,
}

#[derive(Deserialize)]
struct Part<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    image_url: Option<String>,
    #[serde(default)]
    file_id: Option<String>,
    #[serde(default)]
    detail: Option<String>,
}

/// Grows the open assistant turn as items arrive; anything that is not
/// assistant output closes it.
struct Turns<'o> {
    out: &'o mut Vec<Message>,
    open: Option<Message>,
}

impl Turns<'_> {
    fn flush(&mut self) {
        if let Some(m) = self.open.take() {
            self.out.push(m);
        }
    }

    fn push(&mut self, m: Message) {
        self.flush();
        self.out.push(m);
    }

    /// The open assistant turn; a new one when `fresh` says the open one
    /// is complete.
    fn assistant(&mut self, fresh: impl Fn(&Message) -> bool) -> &mut Message {
        if self.open.as_ref().is_some_and(fresh) {
            self.flush();
        }
        self.open.get_or_insert_with(|| Message {
            role: Role::Assistant,
            ..Message::default()
        })
    }
}

fn has_text(m: &Message) -> bool {
    m.content.iter().any(|p| matches!(p, ContentPart::Text(_)))
}

fn items(raw: &RawValue, out: &mut Vec<Message>) -> Result<(), FieldError> {
    if raw.get().starts_with('"') {
        let text: String = field(raw, "input")?;
        out.push(Message {
            role: Role::User,
            content: vec![ContentPart::Text(text)],
            ..Message::default()
        });
        return Ok(());
    }
    let list: Vec<&RawValue> =
        field(raw, "input").map_err(|_| err("input", "must be a string or an array of items"))?;
    let mut turns = Turns { out, open: None };
    for (i, raw) in list.into_iter().enumerate() {
        let param = format!("input[{i}]");
        let it: Item = field(raw, &param)?;
        let missing = |what: &str| err(&param, format!("needs `{what}`"));
        match it.kind.as_deref().unwrap_or("message") {
            "message" => {
                let role = match it.role.as_deref() {
                    Some("user") => Role::User,
                    Some("assistant") => Role::Assistant,
                    Some("system" | "developer") => Role::System,
                    Some(other) => {
                        return Err(err(
                            format!("{param}.role"),
                            format!(
                            "must be `user`, `assistant`, `system` or `developer`, got `{other}`"
                        ),
                        ))
                    }
                    None => return Err(missing("role")),
                };
                let content = it.content.ok_or_else(|| missing("content"))?;
                let parts = content_parts(content, &format!("{param}.content"))?;
                if role == Role::Assistant {
                    // A second message after calls (or after text: the
                    // `commentary` / `final_answer` phases) is a new turn
                    // only once calls were made.
                    let m = turns.assistant(|m| !m.tool_calls.is_empty());
                    m.content.extend(parts);
                } else {
                    turns.push(Message {
                        role,
                        content: parts,
                        ..Message::default()
                    });
                }
            }
            "function_call" => {
                let call = ir::ToolCall {
                    id: it.call_id.ok_or_else(|| missing("call_id"))?,
                    name: it.name.ok_or_else(|| missing("name"))?,
                    arguments: it.arguments.ok_or_else(|| missing("arguments"))?,
                };
                turns.assistant(|_| false).tool_calls.push(call);
            }
            "custom_tool_call" => {
                let input = it.input.ok_or_else(|| missing("input"))?;
                let call = ir::ToolCall {
                    id: it.call_id.ok_or_else(|| missing("call_id"))?,
                    name: it.name.ok_or_else(|| missing("name"))?,
                    arguments: serde_json::json!({ "input": input }).to_string(),
                };
                turns.assistant(|_| false).tool_calls.push(call);
            }
            "function_call_output" | "custom_tool_call_output" => {
                let output = it.output.ok_or_else(|| missing("output"))?;
                turns.push(Message {
                    role: Role::Tool,
                    content: tool_output(output, &format!("{param}.output"))?,
                    tool_call_id: Some(it.call_id.ok_or_else(|| missing("call_id"))?),
                    ..Message::default()
                });
            }
            "reasoning" => {
                // Reasoning opens a turn: after text or calls it starts the next one.
                let m = turns.assistant(|m| !m.tool_calls.is_empty() || has_text(m));
                for s in it.summary.into_iter().flatten() {
                    if !s.text.is_empty() {
                        m.content.push(ContentPart::Reasoning {
                            text: s.text,
                            signature: None,
                        });
                    }
                }
                m.content
                    .push(ContentPart::ResponsesItem(raw.get().to_owned()));
            }
            other => {
                return Err(err(
                    &param,
                    format!(
                    "input item type `{other}` can only be served by an OpenAI Responses upstream"
                ),
                ))
            }
        }
    }
    turns.flush();
    Ok(())
}

/// A message `content`: a string or `input_text` / `output_text` /
/// `input_image` / `refusal` parts. Empty text is dropped.
fn content_parts(raw: &RawValue, param: &str) -> Result<Vec<ContentPart>, FieldError> {
    if raw.get().starts_with('"') {
        let text: String = field(raw, param)?;
        return Ok(if text.is_empty() {
            Vec::new()
        } else {
            vec![ContentPart::Text(text)]
        });
    }
    let parts: Vec<Part> =
        field(raw, param).map_err(|_| err(param, "must be a string or an array of parts"))?;
    let mut out = Vec::with_capacity(parts.len());
    for (j, p) in parts.into_iter().enumerate() {
        let param = format!("{param}[{j}]");
        match p.kind.as_ref() {
            "input_text" | "output_text" | "text" => {
                let t = p
                    .text
                    .ok_or_else(|| err(&param, "a text part needs `text`"))?;
                if !t.is_empty() {
                    out.push(ContentPart::Text(t));
                }
            }
            "refusal" => {
                let t = p
                    .refusal
                    .ok_or_else(|| err(&param, "a refusal part needs `refusal`"))?;
                out.push(ContentPart::Text(t));
            }
            "input_image" => match (p.image_url, p.file_id) {
                (Some(url), _) => out.push(ContentPart::Image {
                    source: crate::openai::image_source(&url),
                    detail: p.detail,
                }),
                (None, Some(_)) => {
                    return Err(err(
                        format!("{param}.file_id"),
                        "images by `file_id` live in OpenAI's file store; send `image_url`",
                    ))
                }
                (None, None) => {
                    return Err(err(&param, "`input_image` needs `image_url` or `file_id`"))
                }
            },
            other => {
                return Err(err(
                    &param,
                    format!("content part type `{other}` is not supported"),
                ))
            }
        }
    }
    Ok(out)
}

/// A tool output: a string (kept even when empty: the call was answered)
/// or parts.
fn tool_output(raw: &RawValue, param: &str) -> Result<Vec<ContentPart>, FieldError> {
    if raw.get().starts_with('"') {
        let text: String = field(raw, param)?;
        return Ok(vec![ContentPart::Text(text)]);
    }
    content_parts(raw, param)
}
