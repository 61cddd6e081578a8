//! Parsing and validating a client's Chat Completions body, keeping the raw
//! bytes of every field for the passthrough path.

use std::fmt;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::wire::*;
use crate::ir;
use crate::json::{field, provider_options, strip_position};
use crate::passthrough::{self, Fields, Splice};

/// The client's request: raw fields in arrival order plus their typed view.
#[derive(Debug)]
pub struct RequestView<'a> {
    /// Top-level fields exactly as sent (JSON text of each value).
    pub fields: Fields<'a>,
    pub typed: ChatCompletionRequest<'a>,
}

/// A request problem, reported as `invalid_request` with `param`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub param: Option<String>,
    pub message: String,
}

impl FieldError {
    fn new(param: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            param: Some(param.into()),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.param {
            Some(p) => write!(f, "{p}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Parse and validate. `body` must already be UTF-8 (the caller checks, so it
/// can say so precisely).
pub fn parse_request(body: &str) -> Result<RequestView<'_>, FieldError> {
    let fields = parse_top_level(body)?;
    let mut typed = ChatCompletionRequest::default();
    let mut saw_model = false;
    let mut saw_messages = false;
    for (key, raw) in &fields {
        match key.as_ref() {
            "model" => {
                typed.model = field(raw, "model")?;
                saw_model = true;
            }
            "messages" => {
                typed.messages = parse_messages(raw)?;
                saw_messages = true;
            }
            "stream" => typed.stream = field::<Option<bool>>(raw, "stream")?.unwrap_or(false),
            "stream_options" => {
                let o: Option<StreamOptions> = field(raw, "stream_options")?;
                typed.include_usage = o.and_then(|o| o.include_usage).unwrap_or(false);
            }
            "temperature" => typed.temperature = range(raw, "temperature", 0.0, 2.0)?,
            "top_p" => typed.top_p = range(raw, "top_p", 0.0, 1.0)?,
            "presence_penalty" => typed.presence_penalty = range(raw, key, -2.0, 2.0)?,
            "frequency_penalty" => typed.frequency_penalty = range(raw, key, -2.0, 2.0)?,
            "max_tokens" => typed.max_tokens = positive(raw, "max_tokens")?,
            "max_completion_tokens" => {
                typed.max_completion_tokens = positive(raw, "max_completion_tokens")?
            }
            "n" => {
                typed.n = field::<Option<u32>>(raw, "n")?;
                if typed.n.is_some_and(|n| !(1..=128).contains(&n)) {
                    return Err(FieldError::new("n", "must be between 1 and 128"));
                }
            }
            "stop" => typed.stop = parse_stop(raw)?,
            "seed" => typed.seed = field(raw, "seed")?,
            "tools" => {
                typed.tools = field::<Option<Vec<WireTool>>>(raw, "tools")?.unwrap_or_default()
            }
            "tool_choice" => typed.tool_choice = field(raw, "tool_choice")?,
            "parallel_tool_calls" => typed.parallel_tool_calls = field(raw, "parallel_tool_calls")?,
            "response_format" => typed.response_format = field(raw, "response_format")?,
            "reasoning_effort" => typed.reasoning_effort = field(raw, "reasoning_effort")?,
            "user" => typed.user = field(raw, "user")?,
            "provider_options" => typed.provider_options = provider_options(raw)?,
            _ => {} // passed through untouched
        }
    }
    if !saw_model || typed.model.is_empty() {
        return Err(FieldError::new("model", "`model` is required"));
    }
    if !saw_messages {
        return Err(FieldError::new("messages", "`messages` is required"));
    }
    check_tool_choice(&typed)?;
    check_response_format(&typed)?;
    Ok(RequestView { fields, typed })
}

/// The body must be one JSON object; keep each value as raw text.
fn parse_top_level(body: &str) -> Result<Fields<'_>, FieldError> {
    passthrough::parse_object(body).map_err(|message| FieldError {
        param: None,
        message,
    })
}

fn range(raw: &RawValue, param: &str, lo: f64, hi: f64) -> Result<Option<f64>, FieldError> {
    let v: Option<f64> = field(raw, param)?;
    match v {
        Some(x) if !(lo..=hi).contains(&x) => Err(FieldError::new(
            param,
            format!("must be between {lo} and {hi}, got {x}"),
        )),
        _ => Ok(v),
    }
}

fn positive(raw: &RawValue, param: &str) -> Result<Option<u32>, FieldError> {
    let v: Option<u32> = field(raw, param)?;
    if v == Some(0) {
        return Err(FieldError::new(param, "must be at least 1"));
    }
    Ok(v)
}

fn parse_stop(raw: &RawValue) -> Result<Vec<String>, FieldError> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Stop {
        One(String),
        Many(Vec<String>),
    }
    match field::<Option<Stop>>(raw, "stop") {
        Ok(None) => Ok(Vec::new()),
        Ok(Some(Stop::One(s))) => Ok(vec![s]),
        Ok(Some(Stop::Many(v))) if v.len() <= 4 => Ok(v),
        Ok(Some(Stop::Many(_))) => Err(FieldError::new("stop", "at most 4 stop sequences")),
        Err(_) => Err(FieldError::new(
            "stop",
            "must be a string or an array of strings",
        )),
    }
}

fn parse_messages(raw: &RawValue) -> Result<Vec<WireMessage<'_>>, FieldError> {
    // Valid input, the common case, in one pass; only a failure pays for
    // the per-message pass that names the broken message.
    let Ok(out) = serde_json::from_str::<Vec<WireMessage>>(raw.get()) else {
        return Err(locate_bad_message(raw));
    };
    if out.is_empty() {
        return Err(FieldError::new(
            "messages",
            "must contain at least one message",
        ));
    }
    for (i, m) in out.iter().enumerate() {
        check_message(m).map_err(|why| FieldError::new(format!("messages[{i}]"), why))?;
        check_parts(m)
            .map_err(|(j, why)| FieldError::new(format!("messages[{i}].content[{j}]"), why))?;
    }
    Ok(out)
}

/// The error of a `messages` value that did not parse, naming the message.
fn locate_bad_message(raw: &RawValue) -> FieldError {
    let items: Vec<&RawValue> = match field(raw, "messages") {
        Ok(items) => items,
        Err(_) => return FieldError::new("messages", "must be an array of message objects"),
    };
    for (i, item) in items.into_iter().enumerate() {
        if let Err(e) = serde_json::from_str::<WireMessage>(item.get()) {
            return FieldError::new(format!("messages[{i}]"), strip_position(&e));
        }
    }
    FieldError::new("messages", "must be an array of message objects")
}

fn check_message(m: &WireMessage) -> Result<(), &'static str> {
    match m.role {
        WireRole::Tool if m.tool_call_id.is_none() => Err("a `tool` message needs `tool_call_id`"),
        WireRole::Assistant => {
            if m.content.is_none() && m.tool_calls.is_none() && m.refusal.is_none() {
                return Err("an assistant message needs `content` or `tool_calls`");
            }
            Ok(())
        }
        WireRole::User | WireRole::System | WireRole::Developer if m.content.is_none() => {
            Err("`content` is required")
        }
        _ => Ok(()),
    }
}

fn check_tool_choice(t: &ChatCompletionRequest) -> Result<(), FieldError> {
    let named = match &t.tool_choice {
        Some(WireToolChoice::Function { function, .. }) => vec![function.name.as_str()],
        Some(WireToolChoice::Allowed { allowed_tools, .. }) => allowed_tools
            .tools
            .iter()
            .map(|t| t.function.name.as_str())
            .collect(),
        Some(WireToolChoice::Mode(ToolChoiceMode::Required)) if t.tools.is_empty() => {
            return Err(FieldError::new("tool_choice", "`required` needs `tools`"));
        }
        _ => return Ok(()),
    };
    for name in named {
        if !t.tools.iter().any(|tool| tool.function.name == name) {
            return Err(FieldError::new(
                "tool_choice",
                format!("names unknown tool `{name}`"),
            ));
        }
    }
    Ok(())
}

fn check_response_format(t: &ChatCompletionRequest) -> Result<(), FieldError> {
    match &t.response_format {
        Some(f) if f.kind == ResponseFormatKind::JsonSchema && f.json_schema.is_none() => {
            Err(FieldError::new(
                "response_format",
                "`json_schema` type needs a `json_schema` object",
            ))
        }
        _ => Ok(()),
    }
}

fn check_parts(m: &WireMessage) -> Result<(), (usize, &'static str)> {
    let Some(WireContent::Parts(parts)) = &m.content else {
        return Ok(());
    };
    for (j, p) in parts.iter().enumerate() {
        let bad = match p.kind {
            PartKind::Text => p.text.is_none(),
            PartKind::ImageUrl => p.image_url.is_none(),
            _ => false,
        };
        if bad {
            return Err((j, "content part is missing its payload"));
        }
    }
    Ok(())
}

// === passthrough ===

/// What the gateway changes in a body it forwards to an OpenAI-protocol upstream.
#[derive(Debug, Default)]
pub struct UpstreamEdits<'e> {
    /// The upstream's model name (`None` = leave out, e.g. Azure puts it in the URL).
    pub model: Option<&'e str>,
    /// Force `stream_options.include_usage: true` (streams only).
    pub force_include_usage: bool,
    /// Provider `options`, merged last (they win).
    pub options: Option<&'e serde_json::Map<String, serde_json::Value>>,
}

impl RequestView<'_> {
    /// Write the upstream body: the client's fields byte for byte, in order,
    /// except `model` (rewritten), `stream_options` (usage forced on for streams),
    /// `provider_options` (unwrapped into top-level fields) and provider options.
    pub fn write_upstream(&self, edits: &UpstreamEdits) -> Vec<u8> {
        let force_usage = edits.force_include_usage && self.typed.stream;
        let replace: &[(&str, &str)] = if force_usage {
            &[("stream_options", r#"{"include_usage":true}"#)]
        } else {
            &[]
        };
        passthrough::write(
            &self.fields,
            &Splice {
                model: edits.model,
                replace,
                remove: &["provider_options"],
                client_options: self.typed.provider_options.as_ref(),
                provider_options: edits.options,
            },
        )
    }

    /// The dialect-neutral form, for non-OpenAI upstreams.
    pub fn to_ir(&self) -> ir::ChatRequest {
        super::request_ir::to_ir(&self.typed)
    }
}
