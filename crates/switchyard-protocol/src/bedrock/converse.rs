//! Converse / ConverseStream ↔ IR (MAPPING §16.2–16.5).
//!
//! Requests are built block for block as for Anthropic (system hoisted,
//! tool results in user turns, adjacent turns merged, JSON mode as a forced
//! tool); answers and stream events are read back into the IR. Converse
//! sends no answer id, so one is made up per answer; tool-call ids are
//! Bedrock's own `toolUseId`s.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::eventstream::{Frame, FrameKind};
use crate::anthropic::JSON_TOOL_NAME;
use crate::ids;
use crate::ir::{
    self, ChatRequest, ContentPart, FinishReason, ImageSource, ResponseFormat, Role, StreamEvent,
    ToolChoice,
};
use crate::json::compact_json;

/// The description of the JSON-mode forced tool (as the Anthropic codec's).
const JSON_TOOL_DESCRIPTION: &str = "Respond with a JSON object.";

/// The image formats Converse takes (`ImageBlock.format`).
const IMAGE_FORMATS: &[&str] = &["png", "jpeg", "gif", "webp"];

/// A Converse body plus what the answer side needs to undo.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    /// The Converse / ConverseStream body (the model goes in the URL).
    pub body: Value,
    /// JSON mode was emulated with this forced tool: pass it to
    /// [`decode_response`] / [`StreamTranslator::new`] so its call comes
    /// back as text.
    pub json_tool: Option<String>,
}

/// The request cannot be expressed for Converse (an `invalid_request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertError {
    /// Where in the IR request: `n`, `messages[2].content[0]`…
    pub param: Option<String>,
    pub message: String,
}

impl ConvertError {
    fn new(param: String, message: String) -> Self {
        ConvertError {
            param: Some(param),
            message,
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

/// The Converse body for `req`, sent to `model` (a base model id, an
/// inference profile or an ARN; it decides whether Anthropic-only fields go
/// in `additionalModelRequestFields`). Rules (MAPPING §16.2):
/// * system messages → `system[]` text blocks; consecutive tool messages →
///   `toolResult` blocks at the front of one user turn; adjacent same-role
///   turns merged; empty text parts dropped;
/// * images only as base64 (`image{format, source{bytes}}`): an https URL
///   is an error, the caller must inline it;
/// * reasoning without a signature is dropped (Claude would reject it);
/// * `tool_choice: none` has no Converse form: `toolChoice` is left out and
///   so are the tools, unless the history holds tool blocks (Bedrock then
///   requires `toolConfig`; with no tools given, stubs are declared for the
///   names the history calls);
/// * JSON mode → a forced tool (see [`Encoded::json_tool`]);
/// * for Anthropic models: `top_k` and the thinking budget go in
///   `additionalModelRequestFields`, temperature is clamped to 0..=1; for
///   other models they are dropped (pass model-native fields through
///   `provider_options`);
/// * seed, penalties, `user`, `parallel_tool_calls` and `web_search` have
///   no Converse field and are dropped; `n > 1` is refused;
/// * `provider_options` are merged in last, at the top level (they win).
pub fn encode_request(req: &ChatRequest, model: &str) -> Result<Encoded, ConvertError> {
    if let Some(n) = req.n.filter(|n| *n > 1) {
        let message = format!("Bedrock Converse returns one choice; n={n} is not supported");
        return Err(ConvertError::new("n".into(), message));
    }
    let anthropic = is_anthropic(model);
    let (system, turns) = conversation(req)?;
    let history = History::of(req);
    let (tool_config, json_tool) = tool_config(req, &history);
    let mut body = Map::new();
    body.insert("messages".into(), Value::Array(turns));
    put_nonempty(&mut body, "system", Value::Array(system));
    put_nonempty(
        &mut body,
        "inferenceConfig",
        inference_config(req, anthropic),
    );
    if let Some(c) = tool_config {
        body.insert("toolConfig".into(), c);
    }
    put_nonempty(
        &mut body,
        "additionalModelRequestFields",
        additional_fields(req, anthropic),
    );
    for (k, v) in &req.provider_options {
        body.insert(k.clone(), v.clone());
    }
    Ok(Encoded {
        body: Value::Object(body),
        json_tool,
    })
}

/// `anthropic.…`, `us.anthropic.…` (any inference-profile prefix), or an ARN
/// (plain or percent-encoded) ending in one of those.
fn is_anthropic(model: &str) -> bool {
    let id = model.rsplit('/').next().unwrap_or(model);
    let id = id.rsplit("%2F").next().unwrap_or(id);
    let id = id.rsplit("%2f").next().unwrap_or(id);
    id.starts_with("anthropic.") || id.contains(".anthropic.")
}

/// Insert `v` unless it is an empty array or object.
fn put_nonempty(body: &mut Map<String, Value>, key: &str, v: Value) {
    let empty = match &v {
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if !empty {
        body.insert(key.into(), v);
    }
}

/// `system[]` blocks and the `messages[]` turns.
fn conversation(req: &ChatRequest) -> Result<(Vec<Value>, Vec<Value>), ConvertError> {
    let mut system = Vec::new();
    let mut turns: Vec<(Role, Vec<Value>)> = Vec::new();
    for (at, m) in req.messages.iter().enumerate() {
        match m.role {
            Role::System => system.extend(texts(&m.content).map(|text| json!({ "text": text }))),
            Role::User => push_turn(&mut turns, Role::User, blocks(&m.content, at, false)?),
            Role::Assistant => {
                let mut b = blocks(&m.content, at, true)?;
                for (k, call) in m.tool_calls.iter().enumerate() {
                    b.push(tool_use(call, at, k)?);
                }
                push_turn(&mut turns, Role::Assistant, b);
            }
            Role::Tool => push_tool_result(&mut turns, tool_result(m, at)?),
        }
    }
    let turns = turns
        .into_iter()
        .map(|(role, content)| {
            let role = if role == Role::Assistant {
                "assistant"
            } else {
                "user"
            };
            json!({ "role": role, "content": content })
        })
        .collect();
    Ok((system, turns))
}

fn texts(parts: &[ContentPart]) -> impl Iterator<Item = &str> {
    parts.iter().filter_map(|p| match p {
        ContentPart::Text(t) if !t.is_empty() => Some(t.as_str()),
        _ => None,
    })
}

/// Content parts as Converse blocks: text and images; for an assistant's
/// own turn also its signed reasoning and redacted reasoning, in place.
fn blocks(parts: &[ContentPart], at: usize, assistant: bool) -> Result<Vec<Value>, ConvertError> {
    let mut out = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        match p {
            ContentPart::Text(t) if !t.is_empty() => out.push(json!({ "text": t })),
            ContentPart::Image { source, .. } => out.push(image(source, at, j)?),
            ContentPart::Reasoning {
                text,
                signature: Some(signature),
            } if assistant => out.push(json!({
                "reasoningContent": {"reasoningText": {"text": text, "signature": signature}}
            })),
            ContentPart::RedactedReasoning(data) if assistant => {
                out.push(json!({ "reasoningContent": { "redactedContent": data } }))
            }
            _ => {} // empty text, unsigned reasoning, Responses items
        }
    }
    Ok(out)
}

/// `image{format, source{bytes}}` from base64 data (or a `data:` URL).
fn image(source: &ImageSource, at: usize, j: usize) -> Result<Value, ConvertError> {
    let param = || format!("messages[{at}].content[{j}]");
    let (media_type, data) = match source {
        ImageSource::Base64 { media_type, data } => (media_type.clone(), data.clone()),
        ImageSource::Url(url) => match crate::openai::image_source(url) {
            ImageSource::Base64 { media_type, data } => (media_type, data),
            ImageSource::Url(url) => {
                let shown: String = url.chars().take(100).collect();
                let message = format!(
                    "image `{shown}`: Bedrock takes only inline (base64) images; the URL must be downloaded and inlined first"
                );
                return Err(ConvertError::new(param(), message));
            }
        },
    };
    let subtype = media_type.rsplit('/').next().unwrap_or_default();
    let format = match subtype.to_ascii_lowercase().as_str() {
        "jpg" => "jpeg".to_owned(),
        s => s.to_owned(),
    };
    if !IMAGE_FORMATS.contains(&format.as_str()) {
        let message =
            format!("image type `{media_type}` is not one Bedrock takes (png, jpeg, gif, webp)");
        return Err(ConvertError::new(param(), message));
    }
    Ok(json!({ "image": { "format": format, "source": { "bytes": data } } }))
}

/// `toolUse{toolUseId, name, input}`; the arguments must be a JSON object
/// (`""` counts as `{}`).
fn tool_use(call: &ir::ToolCall, at: usize, k: usize) -> Result<Value, ConvertError> {
    let text = call.arguments.trim();
    let input = if text.is_empty() {
        Ok(Value::Object(Map::new()))
    } else {
        match serde_json::from_str::<Value>(text) {
            Ok(v @ Value::Object(_)) => Ok(v),
            Ok(_) => Err("not an object".to_owned()),
            Err(e) => Err(crate::json::strip_position(&e)),
        }
    };
    let input = input.map_err(|reason| {
        let message = format!(
            "tool call `{}` (`{}`): arguments are not a JSON object: {reason}",
            call.id, call.name
        );
        ConvertError::new(format!("messages[{at}].tool_calls[{k}]"), message)
    })?;
    Ok(json!({ "toolUse": { "toolUseId": call.id, "name": call.name, "input": input } }))
}

/// `toolResult{toolUseId, content, status}` of a tool message.
fn tool_result(m: &ir::Message, at: usize) -> Result<Value, ConvertError> {
    let status = if m.is_error { "error" } else { "success" };
    Ok(json!({ "toolResult": {
        "toolUseId": m.tool_call_id.as_deref().unwrap_or_default(),
        "content": blocks(&m.content, at, false)?,
        "status": status,
    }}))
}

/// Append to the last turn when it has the same role, else open a new one.
fn push_turn(turns: &mut Vec<(Role, Vec<Value>)>, role: Role, blocks: Vec<Value>) {
    if blocks.is_empty() {
        return;
    }
    match turns.last_mut() {
        Some((r, b)) if *r == role => b.extend(blocks),
        _ => turns.push((role, blocks)),
    }
}

/// A tool result joins the user turn, after its earlier tool results but
/// before any other block.
fn push_tool_result(turns: &mut Vec<(Role, Vec<Value>)>, block: Value) {
    match turns.last_mut() {
        Some((Role::User, blocks)) => {
            let at = blocks
                .iter()
                .take_while(|b| b.get("toolResult").is_some())
                .count();
            blocks.insert(at, block);
        }
        _ => turns.push((Role::User, vec![block])),
    }
}

/// What the history says about tools: Bedrock needs `toolConfig` whenever
/// it holds `toolUse` / `toolResult` blocks.
struct History<'a> {
    has_tool_blocks: bool,
    /// Names the assistant called, first use first.
    called: Vec<&'a str>,
}

impl<'a> History<'a> {
    fn of(req: &'a ChatRequest) -> Self {
        let mut seen = HashSet::new();
        let calls = req.messages.iter().filter(|m| m.role == Role::Assistant);
        let called: Vec<&str> = calls
            .flat_map(|m| &m.tool_calls)
            .map(|c| c.name.as_str())
            .filter(|name| seen.insert(*name))
            .collect();
        let results = req.messages.iter().any(|m| m.role == Role::Tool);
        History {
            has_tool_blocks: results || !called.is_empty(),
            called,
        }
    }
}

/// `toolConfig` (tools and `toolChoice`) and the JSON-mode tool's name.
fn tool_config(req: &ChatRequest, history: &History) -> (Option<Value>, Option<String>) {
    let allowed = match &req.tool_choice {
        Some(ToolChoice::Allowed { names, .. }) => Some(names),
        _ => None,
    };
    let mut tools: Vec<Value> = req
        .tools
        .iter()
        .filter(|t| allowed.is_none_or(|names| names.contains(&t.name)))
        .map(|t| {
            tool_spec(
                &t.name,
                t.description.as_deref(),
                object_schema(&t.parameters),
            )
        })
        .collect();
    if let Some((schema, description)) = json_schema(req) {
        return json_mode(req, tools, schema, description);
    }
    let choice = match &req.tool_choice {
        _ if tools.is_empty() => None,
        Some(ToolChoice::Auto) => Some(json!({"auto": {}})),
        Some(ToolChoice::Required) => Some(json!({"any": {}})),
        Some(ToolChoice::Named(name)) => Some(json!({"tool": {"name": name}})),
        Some(ToolChoice::Allowed { required: true, .. }) => Some(json!({"any": {}})),
        Some(ToolChoice::Allowed {
            required: false, ..
        }) => Some(json!({"auto": {}})),
        Some(ToolChoice::None) | None => None,
    };
    if matches!(req.tool_choice, Some(ToolChoice::None)) && !history.has_tool_blocks {
        tools.clear();
    }
    if tools.is_empty() && history.has_tool_blocks {
        let stub = || json!({"type": "object", "properties": {}});
        tools = history
            .called
            .iter()
            .map(|n| tool_spec(n, None, stub()))
            .collect();
    }
    if tools.is_empty() {
        return (None, None);
    }
    let mut config = Map::new();
    config.insert("tools".into(), Value::Array(tools));
    if let Some(c) = choice {
        config.insert("toolChoice".into(), c);
    }
    (Some(Value::Object(config)), None)
}

/// JSON mode as a forced tool, as the Anthropic codec does (MAPPING §11):
/// the client's own forced tool still wins; with other tools the model must
/// call one of them (`any`); alone, the JSON tool is forced.
fn json_mode(
    req: &ChatRequest,
    mut tools: Vec<Value>,
    schema: Value,
    description: Option<&str>,
) -> (Option<Value>, Option<String>) {
    let mut name = JSON_TOOL_NAME.to_owned();
    while tools.iter().any(|t| t["toolSpec"]["name"] == name.as_str()) {
        name.push('_');
    }
    let user_forced = match &req.tool_choice {
        Some(ToolChoice::Named(n)) if !tools.is_empty() => Some(n.clone()),
        _ => None,
    };
    if matches!(req.tool_choice, Some(ToolChoice::None)) {
        tools.clear();
    }
    let has_user_tools = !tools.is_empty();
    let description = description.unwrap_or(JSON_TOOL_DESCRIPTION);
    tools.push(tool_spec(&name, Some(description), schema));
    let choice = match (user_forced, has_user_tools) {
        (Some(n), _) => json!({"tool": {"name": n}}),
        (None, true) => json!({"any": {}}),
        (None, false) => json!({"tool": {"name": name}}),
    };
    let config = json!({"tools": tools, "toolChoice": choice});
    (Some(config), Some(name))
}

/// The schema and description JSON mode asks for, if it does.
fn json_schema(req: &ChatRequest) -> Option<(Value, Option<&str>)> {
    match &req.response_format {
        Some(ResponseFormat::JsonSchema {
            schema,
            description,
            ..
        }) => Some((object_schema(schema), description.as_deref())),
        Some(ResponseFormat::JsonObject) => Some((json!({"type": "object"}), None)),
        _ => None,
    }
}

fn tool_spec(name: &str, description: Option<&str>, schema: Value) -> Value {
    let mut spec = Map::new();
    spec.insert("name".into(), Value::from(name));
    if let Some(d) = description {
        spec.insert("description".into(), Value::from(d));
    }
    spec.insert("inputSchema".into(), json!({ "json": schema }));
    json!({ "toolSpec": spec })
}

/// A schema with a root `type: "object"` (Claude requires one; the schema
/// otherwise passes as is, MAPPING §16.2).
fn object_schema(schema: &Value) -> Value {
    match schema {
        Value::Object(m) if m.contains_key("type") => schema.clone(),
        Value::Object(m) => {
            let mut m = m.clone();
            m.insert("type".into(), Value::from("object"));
            Value::Object(m)
        }
        _ => json!({"type": "object", "properties": {}}),
    }
}

/// `inferenceConfig`: maxTokens, temperature, topP, stopSequences.
fn inference_config(req: &ChatRequest, anthropic: bool) -> Value {
    let mut c = Map::new();
    if let Some(n) = req.max_tokens {
        c.insert("maxTokens".into(), Value::from(n));
    }
    if let Some(t) = req.temperature {
        let t = if anthropic { t.clamp(0.0, 1.0) } else { t };
        c.insert("temperature".into(), Value::from(t));
    }
    if let Some(p) = req.top_p {
        c.insert("topP".into(), Value::from(p));
    }
    if !req.stop.is_empty() {
        c.insert("stopSequences".into(), Value::from(req.stop.clone()));
    }
    Value::Object(c)
}

/// Anthropic-native fields: the thinking budget and `top_k`.
fn additional_fields(req: &ChatRequest, anthropic: bool) -> Value {
    let mut f = Map::new();
    if anthropic {
        if let Some(budget) = req.reasoning.as_ref().and_then(|r| r.budget_tokens) {
            let thinking = json!({"type": "enabled", "budget_tokens": budget});
            f.insert("thinking".into(), thinking);
        }
        if let Some(k) = req.top_k {
            f.insert("top_k".into(), Value::from(k));
        }
    }
    Value::Object(f)
}

// ---------------------------------------------------------------- answers

/// Why a Converse answer body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a ConverseResponse.
    Json(String),
    /// No `output.message` (an error body served with 200?).
    NoMessage,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Json(e) => write!(f, "unreadable Converse response: {e}"),
            DecodeError::NoMessage => f.write_str("Converse response without output.message"),
        }
    }
}

impl std::error::Error for DecodeError {}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireResponse<'a> {
    #[serde(default, borrow)]
    output: Option<WireOutput<'a>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireOutput<'a> {
    #[serde(default, borrow)]
    message: Option<WireMessage<'a>>,
}

#[derive(Deserialize)]
struct WireMessage<'a> {
    #[serde(default, borrow)]
    content: Vec<WireBlock<'a>>,
}

/// One content block (a one-key union; other members are ignored).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireBlock<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<WireReasoning<'a>>,
    #[serde(default, borrow)]
    tool_use: Option<WireToolUse<'a>>,
}

/// `reasoningContent` (`redactedContent` is not read: the IR answer has no
/// place for it, as with Anthropic's `redacted_thinking`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireReasoning<'a> {
    #[serde(default, borrow)]
    reasoning_text: Option<WireText<'a>>,
}

/// `reasoningText{text, signature}`, or a stream's reasoning delta.
#[derive(Deserialize)]
struct WireText<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<Cow<'a, str>>,
}

/// `toolUse` of an answer, or `start.toolUse` of a stream block.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireToolUse<'a> {
    #[serde(default, borrow)]
    tool_use_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    input: Option<&'a RawValue>,
    /// `server_tool_use` for a hosted tool (run by Bedrock, not the client).
    #[serde(default, rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
}

impl WireToolUse<'_> {
    fn is_server_tool(&self) -> bool {
        self.kind.as_deref() == Some("server_tool_use")
    }
}

/// `usage` of an answer or of the stream's `metadata` (MAPPING §16.5).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_token_count: Option<u64>,
    #[serde(default)]
    cache_write_input_tokens: Option<u64>,
    #[serde(default)]
    cache_write_input_token_count: Option<u64>,
}

impl WireUsage {
    /// `inputTokens` excludes cache reads and writes; the IR's input
    /// includes them. The new names win over the legacy `…Count` ones.
    fn to_ir(&self) -> ir::Usage {
        let read = self
            .cache_read_input_tokens
            .or(self.cache_read_input_token_count)
            .unwrap_or(0);
        let write = self
            .cache_write_input_tokens
            .or(self.cache_write_input_token_count)
            .unwrap_or(0);
        ir::Usage {
            // Saturating: a wrapped sum would bill a huge input as a tiny one.
            input_tokens: self
                .input_tokens
                .unwrap_or(0)
                .saturating_add(read)
                .saturating_add(write),
            output_tokens: self.output_tokens.unwrap_or(0),
            cached_input_tokens: read,
            cache_write_tokens: write,
            reasoning_tokens: 0,
        }
    }
}

/// `stopReason` → finish (MAPPING §16.3). Unknown values are a stop.
pub fn finish_reason(raw: &str) -> FinishReason {
    match raw {
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "guardrail_intervened" | "content_filtered" => FinishReason::ContentFilter,
        "malformed_model_output" | "malformed_tool_use" => FinishReason::Error,
        _ => FinishReason::Stop, // end_turn, stop_sequence
    }
}

/// An id for an answer (Converse sends none): its own, never repeated.
fn answer_id() -> String {
    format!("bedrock-{}", ids::unique())
}

/// A tool call's id: Bedrock's `toolUseId`, or a made-up one if absent.
fn call_id(id: Option<&str>) -> String {
    ids::or_new(id, "tooluse")
}

/// A whole Converse answer → IR, for `model` (Converse does not name it).
/// Text blocks are joined, reasoning texts joined (last signature kept),
/// `toolUse` inputs become compact JSON arguments. With `json_tool` (from
/// [`Encoded::json_tool`]) that tool's call is returned as the text, with
/// finish `Stop` unless other calls remain. Redacted reasoning, hosted
/// (`server_tool_use`) calls and their results are dropped.
pub fn decode_response(
    body: &[u8],
    model: &str,
    json_tool: Option<&str>,
) -> Result<ir::ChatResponse, DecodeError> {
    let r: WireResponse =
        serde_json::from_slice(body).map_err(|e| DecodeError::Json(e.to_string()))?;
    let message = r
        .output
        .and_then(|o| o.message)
        .ok_or(DecodeError::NoMessage)?;
    let mut acc = Collected::default();
    for b in &message.content {
        acc.block(b, json_tool);
    }
    let raw = r.stop_reason.as_deref();
    let mut finish = match raw {
        Some(raw) => finish_reason(raw),
        None if acc.calls.is_empty() => FinishReason::Stop,
        None => FinishReason::ToolCalls,
    };
    if acc.json_text.is_some() {
        acc.text = acc.json_text;
        if acc.calls.is_empty() && finish == FinishReason::ToolCalls {
            finish = FinishReason::Stop;
        }
    }
    Ok(ir::ChatResponse {
        id: answer_id(),
        model: model.to_owned(),
        created: 0,
        text: acc.text,
        reasoning: acc.reasoning,
        reasoning_signature: acc.signature,
        tool_calls: acc.calls,
        refusal: None,
        finish_reason: finish,
        raw_finish_reason: raw.map(str::to_owned),
        usage: r.usage.map(|u| u.to_ir()).unwrap_or_default(),
    })
}

#[derive(Default)]
struct Collected {
    text: Option<String>,
    reasoning: Option<String>,
    signature: Option<String>,
    calls: Vec<ir::ToolCall>,
    json_text: Option<String>,
}

impl Collected {
    fn block(&mut self, b: &WireBlock, json_tool: Option<&str>) {
        if let Some(t) = b.text.as_deref().filter(|t| !t.is_empty()) {
            self.text.get_or_insert_with(String::new).push_str(t);
        }
        if let Some(r) = b
            .reasoning_content
            .as_ref()
            .and_then(|r| r.reasoning_text.as_ref())
        {
            let text = r.text.as_deref().unwrap_or_default();
            self.reasoning
                .get_or_insert_with(String::new)
                .push_str(text);
            if let Some(s) = r.signature.as_deref().filter(|s| !s.is_empty()) {
                self.signature = Some(s.to_owned());
            }
        }
        if let Some(tu) = b.tool_use.as_ref().filter(|t| !t.is_server_tool()) {
            let name = tu.name.as_deref().unwrap_or_default();
            let arguments = tu
                .input
                .map_or_else(|| "{}".to_owned(), |i| compact_json(i.get()));
            if json_tool == Some(name) && self.json_text.is_none() {
                self.json_text = Some(arguments);
                return;
            }
            self.calls.push(ir::ToolCall {
                id: call_id(tu.tool_use_id.as_deref()),
                name: name.to_owned(),
                arguments,
            });
        }
    }
}

// ---------------------------------------------------------------- streams

/// A `:message-type: exception` frame (or an `x-amzn-errortype` name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamException {
    pub kind: ExceptionKind,
    pub message: String,
}

/// The exception, by name (MAPPING §16.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExceptionKind {
    Throttling,
    ServiceUnavailable,
    /// `too_long`: the message says the input / prompt is too long (a
    /// context-length error, told apart only by its text).
    Validation {
        too_long: bool,
    },
    /// The model failed mid-stream; `originalStatusCode` when given.
    ModelStreamError {
        original_status: Option<u16>,
    },
    InternalServer,
    ModelTimeout,
    /// Any other name, as received (`:` suffix cut).
    Other(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireException<'a> {
    #[serde(default, borrow, alias = "Message")]
    message: Option<Cow<'a, str>>,
    #[serde(default)]
    original_status_code: Option<u64>,
}

/// Classify an exception frame: `name` is its `:exception-type` (camelCase)
/// or an `x-amzn-errortype` header value (`ThrottlingException:http://…`);
/// compared case-insensitively. `payload` is `{"message": …}`; anything
/// else becomes the message as text.
pub fn exception(name: &str, payload: &[u8]) -> StreamException {
    let name = name.split(':').next().unwrap_or(name).trim();
    let (message, original_status) = match serde_json::from_slice::<WireException>(payload) {
        Ok(w) => (
            w.message.unwrap_or_default().into_owned(),
            w.original_status_code.and_then(|c| u16::try_from(c).ok()),
        ),
        Err(_) => (String::from_utf8_lossy(payload).trim().to_owned(), None),
    };
    let kind = match name.to_ascii_lowercase().as_str() {
        "throttlingexception" => ExceptionKind::Throttling,
        "serviceunavailableexception" => ExceptionKind::ServiceUnavailable,
        "validationexception" => ExceptionKind::Validation {
            too_long: says_too_long(&message),
        },
        "modelstreamerrorexception" => ExceptionKind::ModelStreamError { original_status },
        "internalserverexception" => ExceptionKind::InternalServer,
        "modeltimeoutexception" => ExceptionKind::ModelTimeout,
        _ => ExceptionKind::Other(name.to_owned()),
    };
    StreamException { kind, message }
}

/// "Input is too long for requested model." / "… prompt is too long: …".
fn says_too_long(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("too long") && (m.contains("input") || m.contains("prompt"))
}

/// Why [`StreamTranslator::push`] produced no events for an input.
#[derive(Debug)]
pub enum PushError {
    /// An exception (or error) frame: the stream is over, interrupted.
    Exception(StreamException),
    /// The payload was not JSON: count it and skip it.
    BadJson(serde_json::Error),
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Exception(e) => write!(f, "upstream {:?}: {}", e.kind, e.message),
            PushError::BadJson(e) => write!(f, "unparsable stream event: {e}"),
        }
    }
}

impl std::error::Error for PushError {}

/// One ConverseStream event payload (any `:event-type`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireEvent<'a> {
    #[serde(default)]
    content_block_index: Option<u32>,
    #[serde(default, borrow)]
    start: Option<WireStart<'a>>,
    #[serde(default, borrow)]
    delta: Option<WireDelta<'a>>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

/// `contentBlockStart.start` (a `toolResult` start is not read).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireStart<'a> {
    #[serde(default, borrow)]
    tool_use: Option<WireToolUse<'a>>,
}

/// `contentBlockDelta.delta` (`toolResult`, `citation`… are not read).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct WireDelta<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    /// `redactedContent` is not read (no IR stream event carries it).
    #[serde(default, borrow)]
    reasoning_content: Option<WireText<'a>>,
    #[serde(default, borrow)]
    tool_use: Option<WireToolDelta<'a>>,
}

#[derive(Deserialize)]
struct WireToolDelta<'a> {
    /// A fragment of the arguments' JSON text.
    #[serde(default, borrow)]
    input: Option<Cow<'a, str>>,
}

/// Where a tool block's input fragments go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Feed {
    /// A client tool call with this running index.
    Call(u32),
    /// The JSON-mode tool: its input is the answer's text.
    Text,
    /// A hosted (server) tool: dropped.
    Nothing,
}

#[derive(Debug)]
struct ToolBlock {
    block: Option<u32>,
    feed: Feed,
    got_input: bool,
}

/// Turns ConverseStream events into IR events (MAPPING §16.4): `Start`
/// (made-up id, the deployment's model) → text / reasoning deltas, tool
/// calls numbered 0, 1, … in order of their `contentBlockStart` (not by
/// `contentBlockIndex`) → `Finish` then `Usage`, both at `metadata`, the
/// order the Anthropic translator emits them in, so a client encoder that
/// holds the finish until usage comes can put the usage first.
///
/// Feed every event frame to [`push`](Self::push) (or any frame to
/// [`push_frame`](Self::push_frame)) and call [`end`](Self::end) at EOF.
#[derive(Debug, Default)]
pub struct StreamTranslator {
    model: String,
    json_tool: Option<String>,
    started: bool,
    /// Tool blocks seen (only tool blocks get a `contentBlockStart`).
    tools: Vec<ToolBlock>,
    next_tool: u32,
    saw_json_tool: bool,
    finish: Option<(FinishReason, Option<String>)>,
    usage: Option<ir::Usage>,
    metadata_seen: bool,
    finish_emitted: bool,
}

impl StreamTranslator {
    /// `model`: the deployment's model id (the stream does not name it);
    /// `json_tool`: [`Encoded::json_tool`] of the request, if any.
    pub fn new(model: &str, json_tool: Option<&str>) -> Self {
        StreamTranslator {
            model: model.to_owned(),
            json_tool: json_tool.map(str::to_owned),
            ..Self::default()
        }
    }

    /// `messageStop` was seen: with EOF, the stream is complete.
    pub fn finished(&self) -> bool {
        self.finish.is_some()
    }

    /// The usage from `metadata`, once it came.
    pub fn usage(&self) -> Option<ir::Usage> {
        self.usage
    }

    /// Any decoded frame: events go to [`push`](Self::push); exception and
    /// error frames end the stream as [`PushError::Exception`].
    pub fn push_frame(
        &mut self,
        frame: &Frame,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), PushError> {
        match frame.kind {
            FrameKind::Event => self.push(&frame.name, &frame.payload, out),
            FrameKind::Exception | FrameKind::Error => {
                Err(PushError::Exception(exception(&frame.name, &frame.payload)))
            }
        }
    }

    /// One event: its `:event-type` and JSON payload (the `p` padding is
    /// ignored). Unknown event types are skipped.
    pub fn push(
        &mut self,
        event_type: &str,
        payload: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), PushError> {
        const KNOWN: &[&str] = &[
            "messageStart",
            "contentBlockStart",
            "contentBlockDelta",
            "contentBlockStop",
            "messageStop",
            "metadata",
        ];
        if !KNOWN.contains(&event_type) {
            return Ok(());
        }
        let ev: WireEvent = serde_json::from_slice(payload).map_err(PushError::BadJson)?;
        self.start(out);
        match event_type {
            "contentBlockStart" => self.block_start(&ev, out),
            "contentBlockDelta" => self.block_delta(&ev, out),
            "contentBlockStop" => self.block_stop(&ev, out),
            "messageStop" => self.message_stop(&ev, out),
            "metadata" => self.metadata(&ev, out),
            _ => {} // messageStart: just the start
        }
        Ok(())
    }

    /// At EOF: emits the finish if `messageStop` came without `metadata`.
    /// True if the stream is complete (`messageStop` seen).
    pub fn end(&mut self, out: &mut Vec<StreamEvent>) -> bool {
        self.emit_finish(out);
        self.finished()
    }

    fn start(&mut self, out: &mut Vec<StreamEvent>) {
        if !std::mem::replace(&mut self.started, true) {
            out.push(StreamEvent::Start {
                id: answer_id(),
                model: self.model.clone(),
                created: 0,
            });
        }
    }

    fn block_start(&mut self, ev: &WireEvent, out: &mut Vec<StreamEvent>) {
        let Some(tu) = ev.start.as_ref().and_then(|s| s.tool_use.as_ref()) else {
            return; // a hosted tool's result block
        };
        let name = tu.name.as_deref().unwrap_or_default();
        let feed = if tu.is_server_tool() {
            Feed::Nothing
        } else if self.json_tool.as_deref() == Some(name) {
            self.saw_json_tool = true;
            Feed::Text
        } else {
            let index = self.next_tool;
            self.next_tool += 1;
            out.push(StreamEvent::ToolCallStart {
                index,
                id: call_id(tu.tool_use_id.as_deref()),
                name: name.to_owned(),
            });
            Feed::Call(index)
        };
        self.tools.push(ToolBlock {
            block: ev.content_block_index,
            feed,
            got_input: false,
        });
    }

    fn tool_block(&mut self, index: Option<u32>) -> Option<&mut ToolBlock> {
        self.tools.iter_mut().rev().find(|t| t.block == index)
    }

    fn block_delta(&mut self, ev: &WireEvent, out: &mut Vec<StreamEvent>) {
        let Some(d) = &ev.delta else {
            return;
        };
        if let Some(t) = d.text.as_deref().filter(|t| !t.is_empty()) {
            out.push(StreamEvent::TextDelta(t.to_owned()));
        }
        if let Some(r) = &d.reasoning_content {
            if let Some(t) = r.text.as_deref().filter(|t| !t.is_empty()) {
                out.push(StreamEvent::ReasoningDelta {
                    text: t.to_owned(),
                    signature: None,
                });
            }
            if let Some(s) = r.signature.as_deref().filter(|s| !s.is_empty()) {
                out.push(StreamEvent::ReasoningDelta {
                    text: String::new(),
                    signature: Some(s.to_owned()),
                });
            }
        }
        let input = d.tool_use.as_ref().and_then(|t| t.input.as_deref());
        if let Some(input) = input.filter(|i| !i.is_empty()) {
            if let Some(t) = self.tool_block(ev.content_block_index) {
                t.got_input = true;
                let feed = t.feed;
                emit_input(feed, input, out);
            }
        }
    }

    /// A tool block that closes without input had no arguments: `{}`.
    fn block_stop(&mut self, ev: &WireEvent, out: &mut Vec<StreamEvent>) {
        if let Some(t) = self.tool_block(ev.content_block_index) {
            if !std::mem::replace(&mut t.got_input, true) {
                let feed = t.feed;
                emit_input(feed, "{}", out);
            }
        }
    }

    fn message_stop(&mut self, ev: &WireEvent, out: &mut Vec<StreamEvent>) {
        let raw = ev.stop_reason.as_deref();
        let mut reason = match raw {
            Some(raw) => finish_reason(raw),
            None if self.next_tool > 0 => FinishReason::ToolCalls,
            None => FinishReason::Stop,
        };
        let only_json = self.next_tool == 0 && self.saw_json_tool;
        if reason == FinishReason::ToolCalls && only_json {
            reason = FinishReason::Stop;
        }
        if self.finish.is_none() {
            self.finish = Some((reason, raw.map(str::to_owned)));
        }
        if self.metadata_seen {
            self.emit_finish(out);
        }
    }

    fn metadata(&mut self, ev: &WireEvent, out: &mut Vec<StreamEvent>) {
        self.metadata_seen = true;
        if let Some(u) = &ev.usage {
            self.usage = Some(u.to_ir());
        }
        self.emit_finish(out);
        if let Some(u) = self.usage {
            out.push(StreamEvent::Usage(u));
        }
    }

    /// The finish, once, if `messageStop` gave one.
    fn emit_finish(&mut self, out: &mut Vec<StreamEvent>) {
        let Some((reason, raw)) = &self.finish else {
            return;
        };
        if !std::mem::replace(&mut self.finish_emitted, true) {
            out.push(StreamEvent::Finish {
                reason: *reason,
                raw: raw.clone(),
            });
        }
    }
}

fn emit_input(feed: Feed, input: &str, out: &mut Vec<StreamEvent>) {
    match feed {
        Feed::Call(index) => out.push(StreamEvent::ToolCallDelta {
            index,
            arguments: input.to_owned(),
        }),
        Feed::Text => out.push(StreamEvent::TextDelta(input.to_owned())),
        Feed::Nothing => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bedrock::eventstream::{encode_frame, FrameDecoder};
    use crate::ir::{AnswerBuilder, Message, ReasoningConfig, Tool, ToolCall, Usage};

    use crate::bedrock::testdata::{json_file, read, DIR};

    fn files(prefix: &str, suffix: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(DIR)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(prefix) && n.ends_with(suffix))
            .collect();
        names.sort();
        names
    }

    fn arr(v: &Value) -> &[Value] {
        v.as_array().map(Vec::as_slice).unwrap_or_default()
    }

    fn text(t: &str) -> ContentPart {
        ContentPart::Text(t.into())
    }

    fn msg(role: Role, content: Vec<ContentPart>) -> Message {
        Message {
            role,
            content,
            ..Message::default()
        }
    }

    fn user(t: &str) -> Message {
        msg(Role::User, vec![text(t)])
    }

    fn tool_msg(id: &str, t: &str) -> Message {
        Message {
            tool_call_id: Some(id.into()),
            ..msg(Role::Tool, vec![text(t)])
        }
    }

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.into(),
        }
    }

    fn tool(name: &str) -> Tool {
        Tool {
            name: name.into(),
            description: None,
            parameters: json!({"type": "object", "properties": {}}),
            strict: None,
        }
    }

    fn body(req: &ChatRequest, model: &str) -> Value {
        encode_request(req, model).unwrap().body
    }

    const NOVA: &str = "us.amazon.nova-micro-v1:0";
    const CLAUDE: &str = "us.anthropic.claude-3-7-sonnet-20250219-v1:0";

    /// The model a fixture was recorded against (its README row's URL).
    fn recorded_model(file: &str) -> String {
        let readme = String::from_utf8(read("README.md")).unwrap();
        let row = readme
            .lines()
            .find(|l| l.starts_with(&format!("| `{file}`")))
            .unwrap_or_else(|| panic!("{file} not in README"));
        let after = row.split("/model/").nth(1).unwrap();
        after.split("/converse").next().unwrap().replace("%3A", ":")
    }

    /// What the IR holds for a recorded Converse body (a test-only reader).
    /// Cache points, documents and system tools have no IR form: skipped.
    fn ir_of(body: &Value) -> ChatRequest {
        let mut req = ChatRequest::default();
        for b in arr(&body["system"]) {
            if let Some(t) = b["text"].as_str() {
                req.messages.push(msg(Role::System, vec![text(t)]));
            }
        }
        for m in arr(&body["messages"]) {
            let role = if m["role"] == "assistant" {
                Role::Assistant
            } else {
                Role::User
            };
            let mut cur = msg(role, Vec::new());
            for b in arr(&m["content"]) {
                read_block(b, &mut cur, &mut req.messages);
            }
            if !cur.content.is_empty() || !cur.tool_calls.is_empty() {
                req.messages.push(cur);
            }
        }
        let tc = &body["toolConfig"];
        for t in arr(&tc["tools"]).iter().filter_map(|t| t.get("toolSpec")) {
            req.tools.push(Tool {
                name: t["name"].as_str().unwrap().into(),
                description: t["description"].as_str().map(str::to_owned),
                parameters: t["inputSchema"]["json"].clone(),
                strict: None,
            });
        }
        let choice = &tc["toolChoice"];
        req.tool_choice = if choice.get("auto").is_some() {
            Some(ToolChoice::Auto)
        } else if choice.get("any").is_some() {
            Some(ToolChoice::Required)
        } else {
            choice["tool"]["name"]
                .as_str()
                .map(|n| ToolChoice::Named(n.into()))
        };
        let ic = &body["inferenceConfig"];
        req.max_tokens = ic["maxTokens"].as_u64().map(|n| n as u32);
        req.temperature = ic["temperature"].as_f64();
        req.top_p = ic["topP"].as_f64();
        req.stop = arr(&ic["stopSequences"])
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect();
        let extra = &body["additionalModelRequestFields"];
        if let Some(b) = extra["thinking"]["budget_tokens"].as_u64() {
            req.reasoning = Some(ReasoningConfig {
                effort: None,
                budget_tokens: Some(b as u32),
            });
        }
        req.top_k = extra["top_k"].as_u64().map(|k| k as u32);
        req
    }

    fn read_block(b: &Value, cur: &mut Message, messages: &mut Vec<Message>) {
        if let Some(t) = b["text"].as_str() {
            cur.content.push(text(t));
        } else if let Some(rt) = b["reasoningContent"].get("reasoningText") {
            cur.content.push(ContentPart::Reasoning {
                text: rt["text"].as_str().unwrap().into(),
                signature: rt["signature"].as_str().map(str::to_owned),
            });
        } else if let Some(r) = b["reasoningContent"]["redactedContent"].as_str() {
            cur.content.push(ContentPart::RedactedReasoning(r.into()));
        } else if let Some(tu) = b.get("toolUse") {
            let id = tu["toolUseId"].as_str().unwrap();
            let name = tu["name"].as_str().unwrap();
            cur.tool_calls
                .push(call(id, name, &tu["input"].to_string()));
        } else if let Some(tr) = b.get("toolResult") {
            let parts = arr(&tr["content"]);
            messages.push(Message {
                tool_call_id: tr["toolUseId"].as_str().map(str::to_owned),
                is_error: tr["status"] == "error",
                ..msg(
                    Role::Tool,
                    parts
                        .iter()
                        .map(|p| text(p["text"].as_str().unwrap()))
                        .collect(),
                )
            });
        } else if let Some(img) = b.get("image") {
            cur.content.push(ContentPart::Image {
                source: ImageSource::Base64 {
                    media_type: format!("image/{}", img["format"].as_str().unwrap()),
                    data: img["source"]["bytes"].as_str().unwrap().into(),
                },
                detail: None,
            });
        }
    }

    /// The recorded body less what the IR cannot carry (cache points,
    /// documents, system tools), and less an empty `system` or
    /// `inferenceConfig` (the encoder leaves those out; Bedrock reads absent
    /// and empty alike).
    fn normalized(mut body: Value) -> Value {
        fn retain(v: Option<&mut Value>) {
            if let Some(Value::Array(a)) = v {
                let dropped = ["cachePoint", "document", "systemTool"];
                a.retain(|b| !dropped.iter().any(|k| b.get(k).is_some()));
            }
        }
        retain(body.get_mut("system"));
        if let Some(Value::Array(ms)) = body.get_mut("messages") {
            ms.iter_mut().for_each(|m| retain(m.get_mut("content")));
        }
        if let Some(tc) = body.get_mut("toolConfig") {
            retain(tc.get_mut("tools"));
        }
        let top = body.as_object_mut().unwrap();
        if top.get("system") == Some(&json!([])) {
            top.remove("system");
        }
        if top.get("inferenceConfig") == Some(&json!({})) {
            top.remove("inferenceConfig");
        }
        body
    }

    /// Every recorded Converse request, read into the IR and encoded again
    /// for the model it was sent to, is the recorded body (as JSON values,
    /// up to what the IR cannot hold).
    #[test]
    fn converse_request_fixtures_round_trip_through_the_ir() {
        let names = files("converse_", ".request.json");
        assert_eq!(names.len(), 14);
        for name in &names {
            let recorded = json_file(name);
            let req = ir_of(&recorded);
            let enc = encode_request(&req, &recorded_model(name)).unwrap();
            assert_eq!(enc.json_tool, None, "{name}");
            assert_eq!(enc.body, normalized(recorded), "{name}");
        }
    }

    /// The thinking-with-tools follow-up built by hand as an OpenAI-style
    /// history (reasoning kept from the previous answer, a `tool` message):
    /// reasoning goes back verbatim before the `toolUse`, the result in a
    /// user turn.
    #[test]
    fn tool_result_turn_from_a_hand_built_history() {
        let recorded = json_file("converse_tool_result.request.json");
        let prev = json_file("converse_tool_use_thinking.response.json");
        let rt = &prev["output"]["message"]["content"][0]["reasoningContent"]["reasoningText"];
        let question = "What is the largest city in the user country?";
        let answer = "I'll need to check what country you're from to answer that question.";
        let req = ChatRequest {
            messages: vec![
                user(question),
                Message {
                    tool_calls: vec![call(
                        "tooluse_W9DaUFg4Tj2cRPpndqxWSg",
                        "get_user_country",
                        "",
                    )],
                    ..msg(
                        Role::Assistant,
                        vec![
                            ContentPart::Reasoning {
                                text: rt["text"].as_str().unwrap().into(),
                                signature: rt["signature"].as_str().map(str::to_owned),
                            },
                            text(answer),
                        ],
                    )
                },
                tool_msg("tooluse_W9DaUFg4Tj2cRPpndqxWSg", "Mexico"),
            ],
            tools: vec![Tool {
                parameters: json!({"additionalProperties": false, "properties": {}, "type": "object"}),
                ..tool("get_user_country")
            }],
            reasoning: Some(ReasoningConfig {
                effort: None,
                budget_tokens: Some(1024),
            }),
            ..ChatRequest::default()
        };
        assert_eq!(body(&req, CLAUDE), normalized(recorded));
    }

    /// OpenAI-style arguments text (spaces and all) become the `input`
    /// object of the recorded Nova follow-up.
    #[test]
    fn after_tool_result_from_openai_style_arguments() {
        let recorded = json_file("converse_stream_after_tool_result.request.json");
        let mut req = ir_of(&recorded);
        let thinking = req.messages[2].text();
        req.messages[2] = Message {
            tool_calls: vec![call(
                "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
                "get_temperature",
                "{ \"city\" : \"Paris\" }",
            )],
            ..msg(Role::Assistant, vec![text(&thinking), text("")])
        };
        assert_eq!(body(&req, NOVA), normalized(recorded));
    }

    #[test]
    fn images_go_inline_and_urls_are_refused() {
        let png = ContentPart::Image {
            source: ImageSource::Base64 {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            },
            detail: None,
        };
        let jpg = ContentPart::Image {
            source: ImageSource::Url("data:image/jpg;base64,/9j/4AAQ".into()),
            detail: Some("high".into()),
        };
        let req = ChatRequest {
            messages: vec![msg(Role::User, vec![text("what?"), png, jpg])],
            ..ChatRequest::default()
        };
        assert_eq!(
            body(&req, NOVA)["messages"][0]["content"],
            json!([
                {"text": "what?"},
                {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
                {"image": {"format": "jpeg", "source": {"bytes": "/9j/4AAQ"}}},
            ])
        );
        let url = "https://example.com/cat.png";
        let req = ChatRequest {
            messages: vec![
                user("hi"),
                msg(
                    Role::User,
                    vec![
                        text("see"),
                        ContentPart::Image {
                            source: ImageSource::Url(url.into()),
                            detail: None,
                        },
                    ],
                ),
            ],
            ..ChatRequest::default()
        };
        let e = encode_request(&req, NOVA).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("messages[1].content[1]"));
        assert!(e.message.contains(url), "{e}");
        let bmp = ContentPart::Image {
            source: ImageSource::Base64 {
                media_type: "image/bmp".into(),
                data: "Qk0=".into(),
            },
            detail: None,
        };
        let req = ChatRequest {
            messages: vec![msg(Role::User, vec![bmp])],
            ..ChatRequest::default()
        };
        let e = encode_request(&req, NOVA).unwrap_err();
        assert!(e.message.contains("image/bmp"), "{e}");
    }

    /// System messages are hoisted wherever they stand; consecutive tool
    /// results form one user turn (before the user's own text); adjacent
    /// same-role turns merge; an error result says so; empty parts vanish.
    #[test]
    fn turns_are_hoisted_grouped_and_merged() {
        let mut failed = tool_msg("c2", "boom");
        failed.is_error = true;
        let req = ChatRequest {
            messages: vec![
                msg(Role::System, vec![text("be brief"), text("")]),
                user("a"),
                user("b"),
                Message {
                    tool_calls: vec![call("c1", "f", "{\"x\":1}"), call("c2", "g", "")],
                    ..msg(Role::Assistant, vec![text("")])
                },
                tool_msg("c1", "one"),
                failed,
                user("thanks"),
                msg(Role::System, vec![text("late")]),
                msg(Role::Tool, Vec::new()),
            ],
            ..ChatRequest::default()
        };
        let b = body(&req, NOVA);
        assert_eq!(b["system"], json!([{"text": "be brief"}, {"text": "late"}]));
        assert_eq!(
            b["messages"],
            json!([
                {"role": "user", "content": [{"text": "a"}, {"text": "b"}]},
                {"role": "assistant", "content": [
                    {"toolUse": {"toolUseId": "c1", "name": "f", "input": {"x": 1}}},
                    {"toolUse": {"toolUseId": "c2", "name": "g", "input": {}}},
                ]},
                {"role": "user", "content": [
                    {"toolResult": {"toolUseId": "c1", "content": [{"text": "one"}], "status": "success"}},
                    {"toolResult": {"toolUseId": "c2", "content": [{"text": "boom"}], "status": "error"}},
                    {"toolResult": {"toolUseId": "", "content": [], "status": "success"}},
                    {"text": "thanks"},
                ]},
            ])
        );
        // The history has tool blocks and no tools were given: stubs.
        assert_eq!(
            b["toolConfig"],
            json!({"tools": [
                {"toolSpec": {"name": "f", "inputSchema": {"json": {"type": "object", "properties": {}}}}},
                {"toolSpec": {"name": "g", "inputSchema": {"json": {"type": "object", "properties": {}}}}},
            ]})
        );
    }

    /// Signed reasoning and redacted reasoning go back in place; unsigned
    /// reasoning (Claude would reject it) and a user's reasoning do not.
    #[test]
    fn reasoning_history() {
        let req = ChatRequest {
            messages: vec![
                msg(
                    Role::User,
                    vec![
                        text("q"),
                        ContentPart::Reasoning {
                            text: "x".into(),
                            signature: Some("s".into()),
                        },
                    ],
                ),
                Message {
                    tool_calls: vec![call("t1", "f", "{}")],
                    ..msg(
                        Role::Assistant,
                        vec![
                            ContentPart::Reasoning {
                                text: "unsigned".into(),
                                signature: None,
                            },
                            ContentPart::RedactedReasoning("UkVE".into()),
                            ContentPart::Reasoning {
                                text: "think".into(),
                                signature: Some("sig".into()),
                            },
                            ContentPart::ResponsesItem("{}".into()),
                        ],
                    )
                },
            ],
            ..ChatRequest::default()
        };
        let b = body(&req, CLAUDE);
        assert_eq!(b["messages"][0]["content"], json!([{"text": "q"}]));
        assert_eq!(
            b["messages"][1]["content"],
            json!([
                {"reasoningContent": {"redactedContent": "UkVE"}},
                {"reasoningContent": {"reasoningText": {"text": "think", "signature": "sig"}}},
                {"toolUse": {"toolUseId": "t1", "name": "f", "input": {}}},
            ])
        );
    }

    #[test]
    fn tool_arguments_must_be_an_object() {
        for args in ["[1]", "{oops", "\"s\""] {
            let req = ChatRequest {
                messages: vec![
                    user("q"),
                    Message {
                        tool_calls: vec![call("t1", "f", args)],
                        ..msg(Role::Assistant, Vec::new())
                    },
                ],
                ..ChatRequest::default()
            };
            let e = encode_request(&req, NOVA).unwrap_err();
            assert_eq!(e.param.as_deref(), Some("messages[1].tool_calls[0]"));
            assert!(e.message.contains("`t1`"), "{e}");
        }
    }

    fn with_tools(choice: Option<ToolChoice>, history: bool) -> ChatRequest {
        let mut messages = vec![user("q")];
        if history {
            messages.push(Message {
                tool_calls: vec![call("t1", "a", "{}")],
                ..msg(Role::Assistant, Vec::new())
            });
            messages.push(tool_msg("t1", "r"));
        }
        ChatRequest {
            messages,
            tools: vec![
                Tool {
                    description: Some("A.".into()),
                    parameters: json!({"properties": {"x": {"type": "string"}}}),
                    ..tool("a")
                },
                tool("b"),
            ],
            tool_choice: choice,
            ..ChatRequest::default()
        }
    }

    #[test]
    fn tool_specs_and_choices() {
        let b = body(&with_tools(Some(ToolChoice::Auto), false), NOVA);
        assert_eq!(
            b["toolConfig"],
            json!({
                "tools": [
                    {"toolSpec": {"name": "a", "description": "A.", "inputSchema": {"json":
                        {"type": "object", "properties": {"x": {"type": "string"}}}}}},
                    {"toolSpec": {"name": "b", "inputSchema": {"json": {"type": "object", "properties": {}}}}},
                ],
                "toolChoice": {"auto": {}},
            })
        );
        let choice =
            |c: Option<ToolChoice>| body(&with_tools(c, false), NOVA)["toolConfig"].clone();
        assert_eq!(
            choice(Some(ToolChoice::Required))["toolChoice"],
            json!({"any": {}})
        );
        let named = choice(Some(ToolChoice::Named("b".into())));
        assert_eq!(named["toolChoice"], json!({"tool": {"name": "b"}}));
        assert_eq!(choice(None).get("toolChoice"), None);
        let allowed = choice(Some(ToolChoice::Allowed {
            names: vec!["b".into()],
            required: true,
        }));
        assert_eq!(allowed["tools"].as_array().unwrap().len(), 1);
        assert_eq!(allowed["tools"][0]["toolSpec"]["name"], "b");
        assert_eq!(allowed["toolChoice"], json!({"any": {}}));
        let allowed = choice(Some(ToolChoice::Allowed {
            names: vec!["a".into()],
            required: false,
        }));
        assert_eq!(allowed["toolChoice"], json!({"auto": {}}));
    }

    /// `none` has no Converse form: no tools at all, unless the history
    /// holds tool blocks (then the tools, without `toolChoice`).
    #[test]
    fn tool_choice_none() {
        let b = body(&with_tools(Some(ToolChoice::None), false), NOVA);
        assert_eq!(b.get("toolConfig"), None);
        let b = body(&with_tools(Some(ToolChoice::None), true), NOVA);
        let tc = &b["toolConfig"];
        assert_eq!(tc["tools"].as_array().unwrap().len(), 2);
        assert_eq!(tc.get("toolChoice"), None);
        let no_tools = ChatRequest {
            messages: vec![user("q")],
            tool_choice: Some(ToolChoice::Required),
            ..ChatRequest::default()
        };
        assert_eq!(body(&no_tools, NOVA).get("toolConfig"), None);
    }

    /// JSON mode is a forced tool named `json` (renamed past a client tool
    /// of that name); the client's own forced tool wins; with other tools,
    /// `any`.
    #[test]
    fn json_mode_is_a_forced_tool() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let format = ResponseFormat::JsonSchema {
            name: "out".into(),
            schema: schema.clone(),
            strict: Some(true),
            description: None,
        };
        let req = ChatRequest {
            messages: vec![user("q")],
            response_format: Some(format.clone()),
            ..ChatRequest::default()
        };
        let enc = encode_request(&req, NOVA).unwrap();
        assert_eq!(enc.json_tool.as_deref(), Some("json"));
        assert_eq!(
            enc.body["toolConfig"],
            json!({
                "tools": [{"toolSpec": {"name": "json", "description": JSON_TOOL_DESCRIPTION,
                    "inputSchema": {"json": schema}}}],
                "toolChoice": {"tool": {"name": "json"}},
            })
        );
        let mut clash = with_tools(None, false);
        clash.tools[1].name = "json".into();
        clash.response_format = Some(ResponseFormat::JsonObject);
        let enc = encode_request(&clash, NOVA).unwrap();
        assert_eq!(enc.json_tool.as_deref(), Some("json_"));
        assert_eq!(enc.body["toolConfig"]["toolChoice"], json!({"any": {}}));
        assert_eq!(
            enc.body["toolConfig"]["tools"][2]["toolSpec"]["name"],
            "json_"
        );
        let mut forced = with_tools(Some(ToolChoice::Named("a".into())), false);
        forced.response_format = Some(format.clone());
        let enc = encode_request(&forced, NOVA).unwrap();
        assert_eq!(
            enc.body["toolConfig"]["toolChoice"],
            json!({"tool": {"name": "a"}})
        );
        let mut none = with_tools(Some(ToolChoice::None), false);
        none.response_format = Some(format);
        let enc = encode_request(&none, NOVA).unwrap();
        assert_eq!(enc.body["toolConfig"]["tools"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn model_ids_that_are_anthropic() {
        for id in [
            "anthropic.claude-3-haiku-20240307-v1:0",
            "us.anthropic.claude-3-7-sonnet-20250219-v1:0",
            "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0",
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.anthropic.claude-x",
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A%3Afoundation-model%2Fanthropic.claude-x",
        ] {
            assert!(is_anthropic(id), "{id}");
        }
        for id in [
            "us.amazon.nova-micro-v1:0",
            "meta.llama3-8b",
            "openai.gpt-oss-120b-1:0",
        ] {
            assert!(!is_anthropic(id), "{id}");
        }
    }

    /// Sampling settings in `inferenceConfig`; `top_k` and the thinking
    /// budget only for Claude, whose temperature is clamped; provider
    /// options merged last; `n > 1` refused.
    #[test]
    fn settings_and_options() {
        let mut req = ChatRequest {
            messages: vec![user("q")],
            max_tokens: Some(100),
            temperature: Some(1.5),
            top_p: Some(0.9),
            top_k: Some(40),
            stop: vec!["END".into()],
            seed: Some(7),
            reasoning: Some(ReasoningConfig {
                effort: Some("high".into()),
                budget_tokens: Some(2048),
            }),
            n: Some(1),
            ..ChatRequest::default()
        };
        req.provider_options
            .insert("performanceConfig".into(), json!({"latency": "optimized"}));
        req.provider_options
            .insert("inferenceConfig".into(), json!({"maxTokens": 5}));
        let claude = body(&req, CLAUDE);
        assert_eq!(claude["inferenceConfig"], json!({"maxTokens": 5}));
        assert_eq!(claude["performanceConfig"], json!({"latency": "optimized"}));
        assert_eq!(
            claude["additionalModelRequestFields"],
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048}, "top_k": 40})
        );
        req.provider_options.clear();
        let claude = body(&req, CLAUDE);
        assert_eq!(
            claude["inferenceConfig"],
            json!({"maxTokens": 100, "temperature": 1.0, "topP": 0.9, "stopSequences": ["END"]})
        );
        let nova = body(&req, NOVA);
        assert_eq!(nova["inferenceConfig"]["temperature"], json!(1.5));
        assert_eq!(nova.get("additionalModelRequestFields"), None);
        assert_eq!(nova.get("seed"), None);
        req.n = Some(2);
        let e = encode_request(&req, NOVA).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("n"));
    }

    // ------------------------------------------------------------ answers

    fn decode(name: &str) -> ir::ChatResponse {
        decode_response(&read(name), "us.anthropic.claude-x", None).unwrap()
    }

    /// Every recorded answer: the model given, a made-up id, the raw stop
    /// reason kept, and an IR total equal to Bedrock's `totalTokens`.
    #[test]
    fn converse_response_fixtures_decode() {
        let names = files("converse_", ".response.json");
        assert_eq!(names.len(), 7);
        for name in &names {
            let r = decode(name);
            let v = json_file(name);
            assert_eq!(r.model, "us.anthropic.claude-x");
            assert!(r.id.starts_with("bedrock-"), "{name}");
            assert_eq!(r.raw_finish_reason.as_deref(), v["stopReason"].as_str());
            assert_eq!(
                r.usage.total(),
                v["usage"]["totalTokens"].as_u64().unwrap(),
                "{name}"
            );
            assert_ne!(decode(name).id, r.id);
        }
    }

    /// MAPPING §16.5: cache write 2 + 0 + 1322 + 5 = 1329, cache read
    /// 2 + 1322 + 0 + 5; `inputTokens` excludes both.
    #[test]
    fn cache_usage() {
        let write = decode("converse_cache_write.response.json");
        let usage = |input, cached, written| Usage {
            input_tokens: input,
            output_tokens: 5,
            cached_input_tokens: cached,
            cache_write_tokens: written,
            reasoning_tokens: 0,
        };
        assert_eq!(write.usage, usage(1324, 0, 1322));
        assert_eq!(write.text.as_deref(), Some("21"));
        assert_eq!(write.finish_reason, FinishReason::Stop);
        let read = decode("converse_cache_read.response.json");
        assert_eq!(read.usage, usage(1324, 1322, 0));
        // Only the legacy names, or neither.
        let legacy = br#"{"output":{"message":{"content":[],"role":"assistant"}},"stopReason":"end_turn",
            "usage":{"cacheReadInputTokenCount":7,"cacheWriteInputTokenCount":3,"inputTokens":1,"outputTokens":2}}"#;
        let r = decode_response(legacy, "m", None).unwrap();
        assert_eq!((r.usage.input_tokens, r.usage.cached_input_tokens), (11, 7));
        assert_eq!(r.usage.cache_write_tokens, 3);
        let text = decode("converse_text.response.json");
        assert_eq!(
            text.usage,
            Usage {
                input_tokens: 7,
                output_tokens: 30,
                ..Usage::default()
            }
        );
    }

    #[test]
    fn reasoning_and_tool_use_answer() {
        let r = decode("converse_tool_use_thinking.response.json");
        let reasoning = r.reasoning.as_deref().unwrap();
        assert!(reasoning.starts_with("The user is asking for the largest city"));
        let sig = r.reasoning_signature.as_deref().unwrap();
        assert!(sig.starts_with("ErcBCkgIBhAB") && sig.ends_with("kGAI="));
        assert_eq!(
            r.text.as_deref(),
            Some("I'll need to check what country you're from to answer that question.")
        );
        assert_eq!(
            r.tool_calls,
            [call(
                "tooluse_W9DaUFg4Tj2cRPpndqxWSg",
                "get_user_country",
                "{}"
            )]
        );
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (397, 130));

        let r = decode("converse_reasoning.response.json");
        assert!(r
            .reasoning
            .as_deref()
            .unwrap()
            .starts_with("This is a straightforward"));
        assert!(r
            .reasoning_signature
            .as_deref()
            .unwrap()
            .starts_with("Eu4CCkgIBxAB"));
        assert!(r
            .text
            .as_deref()
            .unwrap()
            .starts_with("Here are the basic steps"));
        assert!(r.tool_calls.is_empty());

        // Redacted reasoning has no place in an IR answer: only the text.
        let r = decode("converse_reasoning_redacted.response.json");
        assert_eq!(
            (r.reasoning.as_deref(), r.reasoning_signature.as_deref()),
            (None, None)
        );
        assert!(r
            .text
            .as_deref()
            .unwrap()
            .starts_with("I notice you've sent"));
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (92, 176));

        let r = decode("converse_tool_result.response.json");
        assert!(r
            .text
            .as_deref()
            .unwrap()
            .starts_with("Based on your location in Mexico"));
        assert_eq!((r.usage.input_tokens, r.usage.output_tokens), (539, 106));
    }

    #[test]
    fn stop_reasons() {
        let table = [
            ("end_turn", FinishReason::Stop),
            ("tool_use", FinishReason::ToolCalls),
            ("max_tokens", FinishReason::Length),
            ("stop_sequence", FinishReason::Stop),
            ("guardrail_intervened", FinishReason::ContentFilter),
            ("content_filtered", FinishReason::ContentFilter),
            ("malformed_model_output", FinishReason::Error),
            ("malformed_tool_use", FinishReason::Error),
            ("model_context_window_exceeded", FinishReason::Length),
            ("something_new", FinishReason::Stop),
        ];
        for (raw, want) in table {
            assert_eq!(finish_reason(raw), want, "{raw}");
            let b = format!(r#"{{"output":{{"message":{{"content":[]}}}},"stopReason":"{raw}"}}"#);
            let r = decode_response(b.as_bytes(), "m", None).unwrap();
            assert_eq!(
                (r.finish_reason, r.raw_finish_reason.as_deref()),
                (want, Some(raw))
            );
        }
    }

    /// The JSON-mode tool's call is the text; hosted tools are dropped.
    #[test]
    fn json_tool_and_server_tools_in_answers() {
        let b = br#"{"output":{"message":{"content":[
            {"toolUse":{"input":{"snippet":"1+1"},"name":"nova_code_interpreter","toolUseId":"s1","type":"server_tool_use"}},
            {"toolResult":{"content":[{"json":{"stdOut":"2"}}],"toolUseId":"s1"}},
            {"toolUse":{"input":{"n": 2},"name":"json","toolUseId":"t1"}}],"role":"assistant"}},
            "stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7}}"#;
        let r = decode_response(b, "m", Some("json")).unwrap();
        assert_eq!(r.text.as_deref(), Some("{\"n\":2}"));
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.finish_reason, FinishReason::Stop);
        let r = decode_response(b, "m", None).unwrap();
        assert_eq!(r.tool_calls, [call("t1", "json", "{\"n\":2}")]);
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    }

    #[test]
    fn bad_answers_are_errors() {
        assert!(matches!(
            decode_response(b"<html>", "m", None),
            Err(DecodeError::Json(_))
        ));
        let e = decode_response(br#"{"message":"Bedrock is unable"}"#, "m", None);
        assert_eq!(e, Err(DecodeError::NoMessage));
        let no_id = br#"{"output":{"message":{"content":[{"toolUse":{"name":"f"}}]}}}"#;
        let r = decode_response(no_id, "m", None).unwrap();
        assert!(r.tool_calls[0].id.starts_with("tooluse_"));
        assert_eq!(r.tool_calls[0].arguments, "{}");
        assert_eq!(r.finish_reason, FinishReason::ToolCalls);
    }

    // ------------------------------------------------------------ streams

    /// A stream body fed in `chunks` through the frame decoder and the
    /// translator; the made-up answer id blanked so runs compare.
    fn translate<'a>(
        chunks: impl IntoIterator<Item = &'a [u8]>,
        json_tool: Option<&str>,
    ) -> Result<Vec<StreamEvent>, StreamException> {
        let mut d = FrameDecoder::new();
        let mut t = StreamTranslator::new("m", json_tool);
        let mut out = Vec::new();
        for c in chunks {
            d.push(c);
            while let Some(f) = d.next_frame().unwrap() {
                match t.push_frame(&f, &mut out) {
                    Ok(()) => {}
                    Err(PushError::Exception(e)) => return Err(e),
                    Err(e) => panic!("{e}"),
                }
            }
        }
        d.finish().unwrap();
        assert!(t.end(&mut out));
        for e in &mut out {
            if let StreamEvent::Start { id, .. } = e {
                assert!(id.starts_with("bedrock-"));
                id.clear();
            }
        }
        Ok(out)
    }

    fn answer(events: &[StreamEvent]) -> ir::ChatResponse {
        let mut b = AnswerBuilder::default();
        events.iter().for_each(|e| b.push(e));
        b.finish().expect("finished")
    }

    /// The answer a `*.decoded.json` describes, read plainly from its
    /// frames (the oracle for the translator).
    fn expected(decoded: &Value) -> ir::ChatResponse {
        let mut r = ir::ChatResponse {
            model: "m".into(),
            ..ir::ChatResponse::default()
        };
        let mut blocks: Vec<(u64, usize)> = Vec::new();
        for f in arr(&decoded["frames"]) {
            let name = f["headers"][0]["value"].as_str().unwrap();
            let p: Value = serde_json::from_str(f["payload"].as_str().unwrap()).unwrap();
            let index = p["contentBlockIndex"].as_u64().unwrap_or(0);
            let tu = &p["start"]["toolUse"];
            let d = &p["delta"];
            match name {
                "contentBlockStart" if tu.is_object() && tu["type"] != "server_tool_use" => {
                    blocks.push((index, r.tool_calls.len()));
                    let id = tu["toolUseId"].as_str().unwrap();
                    r.tool_calls
                        .push(call(id, tu["name"].as_str().unwrap(), ""));
                }
                "contentBlockDelta" => {
                    if let Some(t) = d["text"].as_str().filter(|t| !t.is_empty()) {
                        r.text.get_or_insert_with(String::new).push_str(t);
                    }
                    if let Some(t) = d["reasoningContent"]["text"].as_str() {
                        r.reasoning.get_or_insert_with(String::new).push_str(t);
                    }
                    if let Some(s) = d["reasoningContent"]["signature"].as_str() {
                        r.reasoning_signature = Some(s.into());
                        r.reasoning.get_or_insert_with(String::new);
                    }
                    let at = blocks.iter().find(|(i, _)| *i == index);
                    if let (Some(i), Some((_, k))) = (d["toolUse"]["input"].as_str(), at) {
                        r.tool_calls[*k].arguments.push_str(i);
                    }
                }
                "messageStop" => {
                    let raw = p["stopReason"].as_str().unwrap();
                    r.finish_reason = finish_reason(raw);
                    r.raw_finish_reason = Some(raw.into());
                }
                "metadata" => {
                    r.usage.input_tokens = p["usage"]["inputTokens"].as_u64().unwrap();
                    r.usage.output_tokens = p["usage"]["outputTokens"].as_u64().unwrap();
                }
                _ => {}
            }
        }
        r
    }

    /// Every recorded ConverseStream gives, fed whole and split at every
    /// byte, the same events, which add up to the answer its frames
    /// describe: `Start` first, `Finish` then `Usage` last, no empty
    /// deltas, hosted tools dropped.
    #[test]
    fn converse_stream_fixtures_translate_however_cut() {
        let names = files("converse_stream_", ".eventstream");
        assert_eq!(names.len(), 7);
        for name in &names {
            let bytes = read(name);
            let stem = name.trim_end_matches(".eventstream");
            let events = translate([&bytes[..]], None).unwrap();
            assert_eq!(
                answer(&events),
                expected(&json_file(&format!("{stem}.decoded.json"))),
                "{name}"
            );
            let start = StreamEvent::Start {
                id: String::new(),
                model: "m".into(),
                created: 0,
            };
            assert_eq!(events[0], start, "{name}");
            let n = events.len();
            assert!(
                matches!(events[n - 2], StreamEvent::Finish { .. }),
                "{name}"
            );
            assert!(matches!(events[n - 1], StreamEvent::Usage(_)), "{name}");
            assert_eq!(
                events
                    .iter()
                    .filter(|e| matches!(e, StreamEvent::Start { .. }))
                    .count(),
                1
            );
            for e in &events {
                let empty = match e {
                    StreamEvent::TextDelta(t) => t.is_empty(),
                    StreamEvent::ReasoningDelta { text, signature } => {
                        text.is_empty() && signature.is_none()
                    }
                    StreamEvent::ToolCallDelta { arguments, .. } => arguments.is_empty(),
                    _ => false,
                };
                assert!(!empty, "{name}: {e:?}");
            }
            for cut in 0..=bytes.len() {
                let (a, b) = bytes.split_at(cut);
                assert_eq!(translate([a, b], None).unwrap(), events, "{name} cut {cut}");
            }
        }
    }

    /// The recorded specifics, spelled out.
    #[test]
    fn converse_stream_specifics() {
        let run = |name: &str| answer(&translate([&read(name)[..]], None).unwrap());
        let text = run("converse_stream_text.eventstream");
        assert!(text
            .text
            .as_deref()
            .unwrap()
            .starts_with("The capital of France is Paris."));
        assert_eq!(
            (text.usage.input_tokens, text.usage.output_tokens),
            (13, 82)
        );
        assert_eq!(text.finish_reason, FinishReason::Stop);

        let tool = run("converse_stream_tool_use.eventstream");
        assert!(tool
            .text
            .as_deref()
            .unwrap()
            .starts_with("<thinking> To find"));
        assert_eq!(tool.reasoning, None);
        assert_eq!(
            tool.tool_calls,
            [call(
                "tooluse_lAG_zP8QRHmSYOwZzzaCqA",
                "get_temperature",
                "{\"city\":\"Paris\"}"
            )]
        );
        assert_eq!(tool.finish_reason, FinishReason::ToolCalls);
        assert_eq!(
            (tool.usage.input_tokens, tool.usage.output_tokens),
            (471, 91)
        );

        let thinking = run("converse_stream_reasoning.eventstream");
        assert!(thinking
            .reasoning
            .as_deref()
            .unwrap()
            .starts_with("The user has greeted me"));
        assert!(thinking
            .reasoning_signature
            .as_deref()
            .unwrap()
            .starts_with("Eu0CCkgIBxAB"));
        assert_eq!(
            thinking.text.as_deref(),
            Some("Hello! It's nice to meet you. How can I help you today?")
        );

        let redacted = run("converse_stream_reasoning_redacted.eventstream");
        assert_eq!(redacted.reasoning, None);
        assert!(redacted
            .text
            .as_deref()
            .unwrap()
            .starts_with("I notice you've sent"));
        assert_eq!(
            (redacted.usage.input_tokens, redacted.usage.output_tokens),
            (92, 253)
        );

        // The hosted code interpreter is not a client call: final_result is call 0.
        let events =
            translate([&read("converse_stream_server_tool.eventstream")[..]], None).unwrap();
        let starts: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, StreamEvent::ToolCallStart { .. }))
            .collect();
        let want = StreamEvent::ToolCallStart {
            index: 0,
            id: "tooluse_ptgCcZ0uQu-UUMz0abqoWw".into(),
            name: "final_result".into(),
        };
        assert_eq!(starts, [&want]);
        let server = answer(&events);
        assert_eq!(server.tool_calls[0].arguments, "{\"result\":7006652.0}");
        assert_eq!(
            (server.usage.input_tokens, server.usage.output_tokens),
            (1002, 59)
        );

        let empty = run("converse_stream_empty_text_delta.eventstream");
        assert_eq!(
            empty.text.as_deref(),
            Some("Hello! How can I help you today?")
        );
        assert!(empty
            .reasoning
            .as_deref()
            .unwrap()
            .starts_with("The user just says"));

        let after = run("converse_stream_after_tool_result.eventstream");
        assert_eq!(
            after.text.as_deref(),
            Some("The current temperature in Paris, the capital of France, is 30°C.")
        );
        assert_eq!(
            (after.usage.input_tokens, after.usage.output_tokens),
            (577, 18)
        );
    }

    /// The four recorded in-stream exceptions, fed whole and byte by byte.
    #[test]
    fn stream_exceptions() {
        let cases = [
            (
                "modelStreamErrorException",
                ExceptionKind::ModelStreamError {
                    original_status: Some(500),
                },
                "Model stream error.",
            ),
            (
                "serviceUnavailableException",
                ExceptionKind::ServiceUnavailable,
                "Bedrock is unable to process your request.",
            ),
            (
                "throttlingException",
                ExceptionKind::Throttling,
                "Too many tokens, please wait before trying again.",
            ),
            (
                "validationException",
                ExceptionKind::Validation { too_long: true },
                "Input is too long for requested model.",
            ),
        ];
        assert_eq!(
            files("stream_exception_", ".eventstream").len(),
            cases.len()
        );
        for (name, kind, message) in cases {
            let bytes = read(&format!("stream_exception_{name}.eventstream"));
            let want = StreamException {
                kind,
                message: message.into(),
            };
            assert_eq!(translate([&bytes[..]], None), Err(want.clone()), "{name}");
            assert_eq!(translate(bytes.chunks(1), None), Err(want), "{name}");
        }
    }

    /// The same classification for HTTP errors by their `x-amzn-errortype`.
    #[test]
    fn http_error_types() {
        let kind = |name: &str| {
            let env = json_file(name);
            let headers = env["headers"].as_object().unwrap();
            let (_, t) = headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case("x-amzn-errortype"))
                .unwrap();
            let body = serde_json::to_vec(&env["body"]).unwrap();
            exception(t.as_str().unwrap(), &body).kind
        };
        let too_long = |b| ExceptionKind::Validation { too_long: b };
        assert_eq!(
            kind("error_400_validation_input_too_long.http.json"),
            too_long(true)
        );
        assert_eq!(
            kind("error_400_validation_prompt_too_long_anthropic.http.json"),
            too_long(true)
        );
        assert_eq!(
            kind("error_400_validation_invalid_model.http.json"),
            too_long(false)
        );
        assert_eq!(
            kind("error_400_validation_anthropic_body.http.json"),
            too_long(false)
        );
        assert_eq!(
            kind("error_429_throttling.http.json"),
            ExceptionKind::Throttling
        );
        assert_eq!(
            kind("error_503_too_many_connections.http.json"),
            ExceptionKind::ServiceUnavailable
        );
        let other = ExceptionKind::Other("AccessDeniedException".into());
        assert_eq!(kind("error_403_access_denied.http.json"), other);
        let e = exception("MODELTIMEOUTEXCEPTION", b"gateway gave up ");
        assert_eq!(
            e,
            StreamException {
                kind: ExceptionKind::ModelTimeout,
                message: "gateway gave up".into()
            }
        );
        let e = exception("internalServerException", br#"{"Message":"oops"}"#);
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ExceptionKind::InternalServer, "oops")
        );
        let e = exception(
            "modelStreamErrorException",
            br#"{"message":"m","originalStatusCode":70000}"#,
        );
        assert_eq!(
            e.kind,
            ExceptionKind::ModelStreamError {
                original_status: None
            }
        );
    }

    fn frames(events: &[(&str, Value)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, payload) in events {
            out.extend(encode_frame(
                FrameKind::Event,
                name,
                payload.to_string().as_bytes(),
            ));
        }
        out
    }

    /// The JSON-mode tool streams out as text and its `tool_use` stop is a
    /// plain stop; a call with no input gets `{}` at its block's stop.
    #[test]
    fn json_tool_and_argumentless_calls_in_streams() {
        let body = frames(&[
            ("messageStart", json!({"role": "assistant", "p": "ab"})),
            (
                "contentBlockStart",
                json!({"contentBlockIndex": 0, "start": {"toolUse": {"name": "json", "toolUseId": "t0"}}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{\"n\":"}}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": "1}"}}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 0})),
            (
                "contentBlockStart",
                json!({"contentBlockIndex": 1, "start": {"toolUse": {"name": "now", "toolUseId": "t1"}}}),
            ),
            ("contentBlockStop", json!({"contentBlockIndex": 1})),
            ("contentBlockStop", json!({"contentBlockIndex": 1})),
            ("messageStop", json!({"stopReason": "tool_use"})),
            (
                "metadata",
                json!({"usage": {"inputTokens": 1, "outputTokens": 2}}),
            ),
        ]);
        let a = answer(&translate([&body[..]], Some("json")).unwrap());
        assert_eq!(a.text.as_deref(), Some("{\"n\":1}"));
        assert_eq!(a.tool_calls, [call("t1", "now", "{}")]);
        assert_eq!(a.finish_reason, FinishReason::ToolCalls);

        let only_json = frames(&[
            (
                "contentBlockStart",
                json!({"contentBlockIndex": 0, "start": {"toolUse": {"name": "json", "toolUseId": "t0"}}}),
            ),
            (
                "contentBlockDelta",
                json!({"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}),
            ),
            ("messageStop", json!({"stopReason": "tool_use"})),
            (
                "metadata",
                json!({"usage": {"inputTokens": 1, "outputTokens": 2}}),
            ),
        ]);
        let a = answer(&translate([&only_json[..]], Some("json")).unwrap());
        assert_eq!(
            (a.text.as_deref(), a.finish_reason),
            (Some("{}"), FinishReason::Stop)
        );
        assert_eq!(a.raw_finish_reason.as_deref(), Some("tool_use"));
    }

    /// How a stream ends: `messageStop` without `metadata` is complete (the
    /// finish comes at EOF); EOF before it is not; usage before the stop
    /// lets the finish out at once.
    #[test]
    fn stream_endings() {
        let mut t = StreamTranslator::new("m", None);
        let mut out = Vec::new();
        t.push(
            "contentBlockDelta",
            br#"{"contentBlockIndex":0,"delta":{"text":"hi"}}"#,
            &mut out,
        )
        .unwrap();
        t.push("messageStop", br#"{"stopReason":"max_tokens"}"#, &mut out)
            .unwrap();
        assert!(t.finished());
        assert_eq!(out.len(), 2); // Start, text: the finish waits for metadata
        assert!(t.end(&mut out));
        let finish = StreamEvent::Finish {
            reason: FinishReason::Length,
            raw: Some("max_tokens".into()),
        };
        assert_eq!(out[2], finish);
        assert!(t.end(&mut out));
        assert_eq!(out.len(), 3);

        let mut t = StreamTranslator::new("m", None);
        let mut out = Vec::new();
        t.push("messageStart", br#"{"role":"assistant"}"#, &mut out)
            .unwrap();
        assert!(!t.end(&mut out));
        assert_eq!(out.len(), 1);

        let mut t = StreamTranslator::new("m", None);
        let mut out = Vec::new();
        t.push(
            "metadata",
            br#"{"usage":{"inputTokens":4,"outputTokens":1}}"#,
            &mut out,
        )
        .unwrap();
        assert_eq!(t.usage().map(|u| u.input_tokens), Some(4));
        t.push("messageStop", br#"{"stopReason":"end_turn"}"#, &mut out)
            .unwrap();
        assert!(matches!(
            out.last(),
            Some(StreamEvent::Finish {
                reason: FinishReason::Stop,
                ..
            })
        ));
    }

    /// Bad JSON is reported and skipped; unknown events, toolResult deltas,
    /// redacted reasoning and deltas for unknown tool blocks add nothing.
    #[test]
    fn odd_events() {
        let mut t = StreamTranslator::new("m", None);
        let mut out = Vec::new();
        assert!(matches!(
            t.push("contentBlockDelta", b"{nope", &mut out),
            Err(PushError::BadJson(_))
        ));
        t.push("someFutureEvent", b"\xff not json", &mut out)
            .unwrap();
        assert!(out.is_empty());
        let quiet: [&[u8]; 4] = [
            br#"{"contentBlockIndex":0,"delta":{"reasoningContent":{"redactedContent":"UkVE"}}}"#,
            br#"{"contentBlockIndex":1,"delta":{"toolResult":[{"json":{"a":1}}]}}"#,
            br#"{"contentBlockIndex":2,"delta":{"toolUse":{"input":"{}"}}}"#,
            br#"{"contentBlockIndex":3,"delta":{"text":""}}"#,
        ];
        for q in quiet {
            t.push("contentBlockDelta", q, &mut out).unwrap();
        }
        t.push(
            "contentBlockStart",
            br#"{"contentBlockIndex":4,"start":{"toolResult":{"toolUseId":"x"}}}"#,
            &mut out,
        )
        .unwrap();
        t.push("contentBlockStop", br#"{"contentBlockIndex":4}"#, &mut out)
            .unwrap();
        assert_eq!(out.len(), 1, "{out:?}"); // the Start
        t.push(
            "contentBlockStart",
            br#"{"contentBlockIndex":5,"start":{"toolUse":{"name":"f"}}}"#,
            &mut out,
        )
        .unwrap();
        assert!(
            matches!(&out[1], StreamEvent::ToolCallStart { index: 0, id, .. } if id.starts_with("tooluse_"))
        );
    }

    proptest::proptest! {
        /// Arbitrary payloads under every event type never panic.
        #[test]
        fn arbitrary_payloads_never_panic(
            kind in 0usize..7,
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
        ) {
            let names = ["messageStart", "contentBlockStart", "contentBlockDelta",
                "contentBlockStop", "messageStop", "metadata", "chunk"];
            let mut t = StreamTranslator::new("m", Some("json"));
            let mut out = Vec::new();
            let _ = t.push(names[kind], &payload, &mut out);
            let _ = exception(names[kind], &payload);
            let _ = decode_response(&payload, "m", None);
            t.end(&mut out);
        }
    }
}
