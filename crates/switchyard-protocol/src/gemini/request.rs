//! IR request → generateContent body (MAPPING.md §2–§8, §11).

use std::collections::HashMap;
use std::fmt;

use serde::Serialize;
use serde_json::{Map, Value};

use super::config::*;
use super::wire::*;
use crate::ir::{self, ContentPart, ImageSource, Message, Role};

/// What the gateway knows about the upstream beyond the request.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    /// `maxOutputTokens` when the request sets none.
    pub max_output_tokens: Option<u32>,
    /// `thoughtSignature` to put on the first function call of a model turn
    /// that has none (history from an OpenAI client or another provider).
    /// Gemini 3 rejects such turns with 400 unless this is
    /// [`SKIP_SIGNATURE_VALIDATOR`]; `None` sends no signature.
    pub missing_signature: Option<&'a str>,
}

/// What the upstream model takes that not every Gemini model does (the
/// deployment's capabilities say so).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelTraits {
    /// Google Search beside function declarations in one request (Gemini 3:
    /// `tools: [{functionDeclarations}, {googleSearch}]`). Without it a web
    /// search asked for beside functions is left out: Gemini 2.x models
    /// answer 400 to the pair.
    pub search_with_tools: bool,
}

/// Google's documented placeholder for function calls that have no real
/// signature (turns not produced by Gemini 3).
pub const SKIP_SIGNATURE_VALIDATOR: &str = "skip_thought_signature_validator";

/// The request cannot be expressed for Gemini (reported as `invalid_request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertError {
    pub param: Option<String>,
    pub message: String,
}

impl ConvertError {
    fn new(param: String, message: impl Into<String>) -> Self {
        ConvertError {
            param: Some(param),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConvertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.param {
            Some(p) => write!(f, "{p}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ConvertError {}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutRequest<'a> {
    contents: Vec<OutContent<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_instruction: Option<OutContent<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<OutTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<GenerationConfig<'a>>,
}

/// The generateContent body for `req` (the model goes in the URL, see
/// [`super::path`]). `provider_options` are merged in last, objects merged
/// key by key (so `{"generationConfig": {"thinkingConfig": …}}` adds to the
/// generated config instead of replacing it).
pub fn encode_request(req: &ir::ChatRequest, target: &Target) -> Result<Vec<u8>, ConvertError> {
    encode_request_for(req, target, ModelTraits::default())
}

/// [`encode_request`] for a model with `traits`.
pub fn encode_request_for(
    req: &ir::ChatRequest,
    target: &Target,
    traits: ModelTraits,
) -> Result<Vec<u8>, ConvertError> {
    let body = OutRequest {
        system_instruction: system(&req.messages),
        contents: Contents::build(req, target)?,
        tools: tools(&req.tools, req.web_search, traits.search_with_tools),
        tool_config: req.tool_choice.as_ref().map(tool_config),
        generation_config: generation_config(req, target),
    };
    if req.provider_options.is_empty() {
        return Ok(serde_json::to_vec(&body).expect("serializable"));
    }
    let mut value = serde_json::to_value(&body).expect("serializable");
    if let Value::Object(top) = &mut value {
        merge(top, &req.provider_options);
    }
    Ok(serde_json::to_vec(&value).expect("serializable"))
}

fn merge(into: &mut Map<String, Value>, from: &Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => merge(a, b),
            _ => {
                into.insert(k.clone(), v.clone());
            }
        }
    }
}

/// All system / developer messages, in order, as `systemInstruction.parts`
/// (hoisted: a mid-conversation system message loses its position).
fn system(messages: &[Message]) -> Option<OutContent<'_>> {
    let parts: Vec<OutPart> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            ContentPart::Text(t) if !t.is_empty() => Some(OutPart::text(t)),
            _ => None,
        })
        .collect();
    (!parts.is_empty()).then_some(OutContent { role: None, parts })
}

/// One `contents[]` entry being assembled.
struct Turn<'a> {
    role: &'static str,
    /// functionResponse parts, keyed by the answered call's position in the
    /// preceding model turn (they go first, in call order).
    responses: Vec<(usize, OutPart<'a>)>,
    parts: Vec<OutPart<'a>>,
    /// Model turns: the ids of the calls made, in order.
    calls: Vec<&'a str>,
    /// Index of the first message that went into this turn.
    first_message: usize,
    /// Index of the first tool message that went into this turn.
    first_result: Option<usize>,
}

struct Contents<'a> {
    turns: Vec<Turn<'a>>,
    /// tool-call id → function name, over the whole history.
    names: HashMap<&'a str, &'a str>,
}

impl<'a> Contents<'a> {
    fn build(
        req: &'a ir::ChatRequest,
        target: &Target<'a>,
    ) -> Result<Vec<OutContent<'a>>, ConvertError> {
        let names = req
            .messages
            .iter()
            .flat_map(|m| &m.tool_calls)
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect();
        let mut c = Contents {
            turns: Vec::new(),
            names,
        };
        for (i, m) in req.messages.iter().enumerate() {
            match m.role {
                Role::System => {}
                Role::User => {
                    let parts = user_parts(m);
                    if !parts.is_empty() {
                        c.turn("user", i).parts.extend(parts);
                    }
                }
                Role::Assistant => {
                    let (parts, calls) = model_parts(m, i, target)?;
                    if !parts.is_empty() {
                        let t = c.turn("model", i);
                        t.parts.extend(parts);
                        t.calls.extend(calls);
                    }
                }
                Role::Tool => c.tool_result(m, i)?,
            }
        }
        c.check_pairing()?;
        Ok(c.turns.into_iter().map(Turn::finish).collect())
    }

    /// The turn to append to: the last one when it has this role (Gemini
    /// wants alternation, so consecutive same-role messages merge).
    fn turn(&mut self, role: &'static str, message: usize) -> &mut Turn<'a> {
        if self.turns.last().is_none_or(|t| t.role != role) {
            self.turns.push(Turn {
                role,
                responses: Vec::new(),
                parts: Vec::new(),
                calls: Vec::new(),
                first_message: message,
                first_result: None,
            });
        }
        self.turns.last_mut().expect("just pushed")
    }

    fn tool_result(&mut self, m: &'a Message, i: usize) -> Result<(), ConvertError> {
        let id = m.tool_call_id.as_deref().unwrap_or_default();
        let name = self
            .names
            .get(id)
            .copied()
            .or_else(|| super::name_from_call_id(id))
            .or(m.name.as_deref())
            .ok_or_else(|| {
                ConvertError::new(
                    format!("messages[{i}].tool_call_id"),
                    format!("no assistant tool call with id {id:?} precedes this tool result"),
                )
            })?;
        let position = self
            .turns
            .last()
            .filter(|t| t.role == "model")
            .or_else(|| self.turns.iter().rev().nth(1))
            .and_then(|t| t.calls.iter().position(|c| *c == id))
            .unwrap_or(usize::MAX);
        let text = tool_text(m);
        let response = if m.is_error {
            ResponseObject::Wrapped { key: "error", text }
        } else {
            match as_object(text) {
                Some(raw) => ResponseObject::Raw(raw),
                None => ResponseObject::Wrapped {
                    key: "result",
                    text,
                },
            }
        };
        let part = OutPart {
            function_response: Some(OutFunctionResponse { name, response }),
            ..Default::default()
        };
        let turn = self.turn("user", i);
        turn.first_result.get_or_insert(i);
        turn.responses.push((position, part));
        Ok(())
    }

    /// MAPPING.md §3/§7: a user turn answering tools must hold exactly one
    /// functionResponse per functionCall of the model turn before it (a
    /// trailing model turn with calls is left alone).
    fn check_pairing(&self) -> Result<(), ConvertError> {
        for (k, t) in self.turns.iter().enumerate() {
            if t.role != "user" {
                continue;
            }
            let calls = k
                .checked_sub(1)
                .map(|p| &self.turns[p])
                .filter(|p| p.role == "model")
                .map_or(0, |p| p.calls.len());
            let answered = t.responses.len();
            if answered != calls {
                return Err(ConvertError::new(
                    format!("messages[{}]", t.first_result.unwrap_or(t.first_message)),
                    format!(
                        "Gemini needs exactly one tool result per tool call of the \
                         preceding assistant message: {calls} call(s), {answered} result(s)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl<'a> Turn<'a> {
    fn finish(mut self) -> OutContent<'a> {
        self.responses.sort_by_key(|(pos, _)| *pos);
        let mut parts: Vec<OutPart> = self.responses.into_iter().map(|(_, p)| p).collect();
        parts.append(&mut self.parts);
        OutContent {
            role: Some(self.role),
            parts,
        }
    }
}

/// The text of a tool result (image parts cannot go into a functionResponse).
fn tool_text(m: &Message) -> &str {
    match m.content.as_slice() {
        [ContentPart::Text(t)] => t,
        parts => parts
            .iter()
            .find_map(|p| match p {
                ContentPart::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .unwrap_or_default(),
    }
}

fn user_parts(m: &Message) -> Vec<OutPart<'_>> {
    m.content
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text(t) if !t.is_empty() => Some(OutPart::text(t)),
            ContentPart::Image { source, .. } => Some(image(source)),
            _ => None,
        })
        .collect()
}

/// An assistant message as model parts: thoughts, text and images in order,
/// then its function calls. The first reasoning signature goes on the first
/// function call, else on the last text part, else on the last thought.
fn model_parts<'a>(
    m: &'a Message,
    i: usize,
    target: &Target<'a>,
) -> Result<(Vec<OutPart<'a>>, Vec<&'a str>), ConvertError> {
    let mut parts = Vec::new();
    let mut signature = None;
    for p in &m.content {
        match p {
            ContentPart::Text(t) if !t.is_empty() => parts.push(OutPart::text(t)),
            ContentPart::Image { source, .. } => parts.push(image(source)),
            ContentPart::Reasoning { text, signature: s } => {
                if !text.is_empty() {
                    parts.push(OutPart::thought(text));
                }
                signature = signature.or(s.as_deref().filter(|s| !s.is_empty()));
            }
            _ => {}
        }
    }
    let mut calls = Vec::new();
    for (j, call) in m.tool_calls.iter().enumerate() {
        let args = if call.arguments.trim().is_empty() {
            empty_object()
        } else {
            as_object(&call.arguments).ok_or_else(|| {
                ConvertError::new(
                    format!("messages[{i}].tool_calls[{j}].function.arguments"),
                    "tool call arguments must be a JSON object",
                )
            })?
        };
        let thought_signature = if j == 0 {
            signature.take().or(target.missing_signature)
        } else {
            None
        };
        parts.push(OutPart {
            function_call: Some(OutFunctionCall {
                name: &call.name,
                args,
            }),
            thought_signature,
            ..Default::default()
        });
        calls.push(call.id.as_str());
    }
    if let Some(sig) = signature {
        let home = parts
            .iter()
            .rposition(|p| p.text.is_some() && p.thought.is_none())
            .or_else(|| parts.iter().rposition(|p| p.thought.is_some()));
        if let Some(k) = home {
            parts[k].thought_signature = Some(sig);
        }
    }
    Ok((parts, calls))
}

fn image(source: &ImageSource) -> OutPart<'_> {
    match source {
        ImageSource::Base64 { media_type, data } => OutPart {
            inline_data: Some(Blob {
                mime_type: media_type,
                data,
            }),
            ..Default::default()
        },
        // The Developer API only fetches Files-API URIs (Vertex also gs://);
        // the gateway fetches any other image URL and inlines it before it
        // gets here (switchyard's `adapters::images`), or the upstream
        // answers 400.
        ImageSource::Url(url) => OutPart {
            file_data: Some(FileData {
                mime_type: guess_mime(url),
                file_uri: url,
            }),
            ..Default::default()
        },
    }
}

/// MIME type from a URL's extension; `image/jpeg` when unknown.
pub(super) fn guess_mime(url: &str) -> &'static str {
    let path = url.split(['?', '#']).next().unwrap_or(url);
    let file = path.rsplit('/').next().unwrap_or(path);
    let ext = file.rsplit_once('.').map(|(_, e)| e.to_ascii_lowercase());
    match ext.as_deref() {
        Some("png") => "image/png",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("heic") => "image/heic",
        Some("heif") => "image/heif",
        Some("pdf") => "application/pdf",
        _ => "image/jpeg",
    }
}
