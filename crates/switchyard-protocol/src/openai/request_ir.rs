//! Validated OpenAI request → IR.

use serde_json::Value;

use super::wire::*;
use crate::ir::{self, ContentPart, ImageSource, Message, Role};

pub(super) fn to_ir(t: &ChatCompletionRequest) -> ir::ChatRequest {
    ir::ChatRequest {
        model: t.model.to_string(),
        messages: t.messages.iter().map(message).collect(),
        tools: t.tools.iter().map(tool).collect(),
        tool_choice: t.tool_choice.as_ref().map(tool_choice),
        parallel_tool_calls: t.parallel_tool_calls,
        response_format: t.response_format.as_ref().map(response_format),
        max_tokens: t.max_completion_tokens.or(t.max_tokens),
        temperature: t.temperature,
        top_p: t.top_p,
        top_k: None,
        stop: t.stop.clone(),
        seed: t.seed,
        presence_penalty: t.presence_penalty,
        frequency_penalty: t.frequency_penalty,
        reasoning: t.reasoning_effort.as_ref().map(|e| ir::ReasoningConfig {
            effort: Some(e.clone()),
            budget_tokens: None,
        }),
        user: t.user.clone(),
        stream: t.stream,
        include_usage: t.include_usage,
        provider_options: t.provider_options.clone().unwrap_or_default(),
        n: t.n,
        web_search: false,
    }
}

fn message(m: &WireMessage) -> Message {
    let role = match m.role {
        WireRole::System | WireRole::Developer => Role::System,
        WireRole::User => Role::User,
        WireRole::Assistant => Role::Assistant,
        WireRole::Tool | WireRole::Function => Role::Tool,
    };
    let mut content = Vec::new();
    if let Some(r) = &m.reasoning_content {
        if !r.is_empty() {
            content.push(ContentPart::Reasoning {
                text: r.to_string(),
                signature: None,
            });
        }
    }
    match &m.content {
        Some(WireContent::Text(t)) if !t.is_empty() => {
            content.push(ContentPart::Text(t.to_string()))
        }
        Some(WireContent::Parts(parts)) => content.extend(parts.iter().filter_map(part)),
        _ => {}
    }
    if let Some(r) = &m.refusal {
        if content.is_empty() {
            content.push(ContentPart::Text(r.to_string()));
        }
    }
    Message {
        role,
        content,
        tool_calls: m
            .tool_calls
            .iter()
            .flatten()
            .map(|c| ir::ToolCall {
                id: c.id.to_string(),
                name: c.function.name.to_string(),
                arguments: c.function.arguments.to_string(),
            })
            .collect(),
        tool_call_id: m.tool_call_id.as_ref().map(|s| s.to_string()),
        is_error: false,
        name: m.name.as_ref().map(|s| s.to_string()),
    }
}

fn part(p: &WirePart) -> Option<ContentPart> {
    match p.kind {
        PartKind::Text => Some(ContentPart::Text(
            p.text.as_deref().unwrap_or_default().to_owned(),
        )),
        PartKind::ImageUrl => p.image_url.as_ref().map(|i| ContentPart::Image {
            source: image_source(&i.url),
            detail: i.detail.clone(),
        }),
        PartKind::InputAudio | PartKind::File => None,
    }
}

/// `data:image/png;base64,AAAA` → Base64; anything else is a URL.
pub fn image_source(url: &str) -> ImageSource {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((meta, data)) = rest.split_once(',') {
            if let Some(media_type) = meta.strip_suffix(";base64") {
                return ImageSource::Base64 {
                    media_type: media_type.to_owned(),
                    data: data.to_owned(),
                };
            }
        }
    }
    ImageSource::Url(url.to_owned())
}

fn tool(t: &WireTool) -> ir::Tool {
    ir::Tool {
        name: t.function.name.to_string(),
        description: t.function.description.as_ref().map(|d| d.to_string()),
        parameters: t
            .function
            .parameters
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
        strict: t.function.strict,
    }
}

fn tool_choice(c: &WireToolChoice) -> ir::ToolChoice {
    match c {
        WireToolChoice::Mode(ToolChoiceMode::Auto) => ir::ToolChoice::Auto,
        WireToolChoice::Mode(ToolChoiceMode::None) => ir::ToolChoice::None,
        WireToolChoice::Mode(ToolChoiceMode::Required) => ir::ToolChoice::Required,
        WireToolChoice::Function { function, .. } => ir::ToolChoice::Named(function.name.clone()),
        WireToolChoice::Allowed { allowed_tools, .. } => ir::ToolChoice::Allowed {
            names: allowed_tools
                .tools
                .iter()
                .map(|t| t.function.name.clone())
                .collect(),
            required: allowed_tools.mode == ToolChoiceMode::Required,
        },
    }
}

fn response_format(f: &WireResponseFormat) -> ir::ResponseFormat {
    match (f.kind, &f.json_schema) {
        (ResponseFormatKind::JsonSchema, Some(js)) => ir::ResponseFormat::JsonSchema {
            name: js.name.clone(),
            schema: js
                .schema
                .and_then(|s| serde_json::from_str::<Value>(s.get()).ok())
                .unwrap_or(Value::Null),
            strict: js.strict,
            description: js.description.clone(),
        },
        (ResponseFormatKind::JsonObject, _) => ir::ResponseFormat::JsonObject,
        _ => ir::ResponseFormat::Text,
    }
}
