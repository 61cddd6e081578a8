//! IR → OpenAI Chat Completions request body, for clients that spoke another
//! dialect (an Anthropic client reaching an OpenAI-protocol deployment).

use serde::Serialize;
use serde_json::{Map, Value};

use crate::ir::{self, ContentPart, ImageSource, Role};

#[derive(Serialize)]
struct Body<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    model: Option<&'a str>,
    messages: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    stop: Vec<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<Value>,
    #[serde(flatten)]
    options: Map<String, Value>,
}

/// The upstream body. `model: None` leaves it out (Azure names the deployment
/// in the URL). Streams always ask for usage; provider `options` win last.
pub fn encode_request(
    req: &ir::ChatRequest,
    model: Option<&str>,
    options: &Map<String, Value>,
) -> Vec<u8> {
    let mut extra = req.provider_options.clone();
    extra.extend(options.iter().map(|(k, v)| (k.clone(), v.clone())));
    let body = Body {
        model,
        messages: req.messages.iter().flat_map(message).collect(),
        tools: req.tools.iter().map(tool).collect(),
        tool_choice: req.tool_choice.as_ref().map(tool_choice),
        parallel_tool_calls: req.parallel_tool_calls,
        response_format: req.response_format.as_ref().map(response_format),
        max_completion_tokens: req.max_tokens,
        temperature: req.temperature,
        top_p: req.top_p,
        stop: req.stop.iter().map(String::as_str).collect(),
        seed: req.seed,
        n: req.n.filter(|n| *n > 1),
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        reasoning_effort: req.reasoning.as_ref().and_then(|r| r.effort.as_deref()),
        user: req.user.as_deref(),
        stream: req.stream,
        stream_options: req
            .stream
            .then(|| serde_json::json!({"include_usage": true})),
        options: extra,
    };
    serde_json::to_vec(&body).unwrap_or_default()
}

fn message(m: &ir::Message) -> Vec<Value> {
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let mut out = serde_json::Map::new();
    out.insert("role".into(), role.into());
    let parts: Vec<Value> = m.content.iter().filter_map(part).collect();
    let only_text = m.content.iter().all(|p| {
        matches!(
            p,
            ContentPart::Text(_)
                | ContentPart::Reasoning { .. }
                | ContentPart::RedactedReasoning(_)
                | ContentPart::ResponsesItem(_)
        )
    });
    let content = if only_text || m.role != Role::User {
        let text = m.text();
        if text.is_empty() && !m.tool_calls.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        }
    } else {
        Value::Array(parts)
    };
    out.insert("content".into(), content);
    let reasoning: String = m
        .content
        .iter()
        .filter_map(|p| match p {
            ContentPart::Reasoning { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    if !reasoning.is_empty() && m.role == Role::Assistant {
        out.insert("reasoning_content".into(), reasoning.into());
    }
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| serde_json::json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
            .collect();
        out.insert("tool_calls".into(), calls.into());
    }
    if let Some(id) = &m.tool_call_id {
        out.insert("tool_call_id".into(), id.clone().into());
    }
    vec![Value::Object(out)]
}

fn part(p: &ContentPart) -> Option<Value> {
    match p {
        ContentPart::Text(t) => Some(serde_json::json!({"type": "text", "text": t})),
        ContentPart::Image { source, detail } => {
            let url = match source {
                ImageSource::Url(u) => u.clone(),
                ImageSource::Base64 { media_type, data } => {
                    format!("data:{media_type};base64,{data}")
                }
            };
            let mut image = serde_json::json!({"url": url});
            if let Some(d) = detail {
                image["detail"] = d.clone().into();
            }
            Some(serde_json::json!({"type": "image_url", "image_url": image}))
        }
        ContentPart::Reasoning { .. }
        | ContentPart::RedactedReasoning(_)
        | ContentPart::ResponsesItem(_) => None,
    }
}

fn tool(t: &ir::Tool) -> Value {
    let mut f = serde_json::json!({"name": t.name, "parameters": t.parameters});
    if let Some(d) = &t.description {
        f["description"] = d.clone().into();
    }
    if let Some(s) = t.strict {
        f["strict"] = s.into();
    }
    serde_json::json!({"type": "function", "function": f})
}

fn tool_choice(c: &ir::ToolChoice) -> Value {
    match c {
        ir::ToolChoice::Auto => "auto".into(),
        ir::ToolChoice::None => "none".into(),
        ir::ToolChoice::Required => "required".into(),
        ir::ToolChoice::Named(n) => {
            serde_json::json!({"type": "function", "function": {"name": n}})
        }
        ir::ToolChoice::Allowed { names, required } => serde_json::json!({
            "type": "allowed_tools",
            "allowed_tools": {
                "mode": if *required { "required" } else { "auto" },
                "tools": names.iter().map(|n| serde_json::json!({"type": "function", "function": {"name": n}})).collect::<Vec<_>>()
            }
        }),
    }
}

fn response_format(f: &ir::ResponseFormat) -> Value {
    match f {
        ir::ResponseFormat::Text => serde_json::json!({"type": "text"}),
        ir::ResponseFormat::JsonObject => serde_json::json!({"type": "json_object"}),
        ir::ResponseFormat::JsonSchema {
            name,
            schema,
            strict,
            description,
        } => {
            let mut js = serde_json::json!({"name": name, "schema": schema});
            if let Some(s) = strict {
                js["strict"] = (*s).into();
            }
            if let Some(d) = description {
                js["description"] = d.clone().into();
            }
            serde_json::json!({"type": "json_schema", "json_schema": js})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenAI fixture → IR → OpenAI body → parses back to the same IR.
    #[test]
    fn ir_round_trips_through_the_openai_body() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/providers/");
        for f in [
            "openai/chat_text.request.json",
            "openai/chat_tool_call.request.json",
            "openai/chat_tool_result.request.json",
            "openai/chat_vision.request.json",
            "openai/chat_json_schema.request.json",
            "openai/chat_json_object.request.json",
        ] {
            let body = std::fs::read_to_string(format!("{root}{f}")).unwrap();
            let ir = crate::openai::parse_request(&body).unwrap().to_ir();
            let again = encode_request(&ir, Some(&ir.model), &Map::new());
            let text = String::from_utf8(again).unwrap();
            let back = crate::openai::parse_request(&text)
                .unwrap_or_else(|e| panic!("{f}: {e}\n{text}"))
                .to_ir();
            assert_eq!(back.messages, ir.messages, "{f}");
            assert_eq!(back.tools, ir.tools, "{f}");
            assert_eq!(back.response_format, ir.response_format, "{f}");
        }
    }
}
