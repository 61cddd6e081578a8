//! Tools, tool_choice and the JSON-mode forced tool of an upstream body.

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::request_out::{JSON_TOOL_DESCRIPTION, JSON_TOOL_NAME};
use crate::ir::{self, ResponseFormat, ToolChoice};

#[derive(Serialize)]
pub(super) struct OutTool<'a> {
    /// Server tools only (`web_search_20250305`); client tools have none.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    name: Cow<'a, str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_schema: Option<Cow<'a, Value>>,
}

/// Anthropic's own web search, run on its side.
const WEB_SEARCH: OutTool<'static> = OutTool {
    kind: Some("web_search_20250305"),
    name: Cow::Borrowed("web_search"),
    description: None,
    input_schema: None,
};

#[derive(Serialize)]
pub(super) struct OutToolChoice<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    disable_parallel_tool_use: bool,
}

/// Tools, tool_choice (MAPPING §6) and the JSON-mode forced tool (§11).
pub(super) fn tools_and_choice<'a>(
    req: &'a ir::ChatRequest,
) -> (Vec<OutTool<'a>>, Option<OutToolChoice<'a>>, Option<String>) {
    let allowed = match &req.tool_choice {
        Some(ToolChoice::Allowed { names, .. }) => Some(names),
        _ => None,
    };
    let mut tools: Vec<OutTool> = req
        .tools
        .iter()
        .filter(|t| allowed.is_none_or(|names| names.contains(&t.name)))
        .map(|t| OutTool {
            kind: None,
            name: Cow::Borrowed(&t.name),
            description: t.description.as_deref(),
            input_schema: Some(object_schema(&t.parameters)),
        })
        .collect();
    let no_parallel = req.parallel_tool_calls == Some(false);
    let choice = |kind, name: Option<Cow<'a, str>>| OutToolChoice {
        kind,
        name,
        disable_parallel_tool_use: no_parallel && kind != "none",
    };
    let json_schema = match &req.response_format {
        Some(ResponseFormat::JsonSchema {
            schema,
            description,
            ..
        }) => Some((Cow::Borrowed(schema), description.as_deref())),
        Some(ResponseFormat::JsonObject) => {
            Some((Cow::Owned(serde_json::json!({"type": "object"})), None))
        }
        _ => None,
    };
    if let Some((schema, description)) = json_schema {
        let mut name = JSON_TOOL_NAME.to_owned();
        while tools.iter().any(|t| t.name == name) {
            name.push('_');
        }
        let user_forced = match &req.tool_choice {
            Some(ToolChoice::Named(n)) if !tools.is_empty() => Some(Cow::Borrowed(n.as_str())),
            _ => None,
        };
        if matches!(req.tool_choice, Some(ToolChoice::None)) {
            tools.clear();
        }
        let has_user_tools = !tools.is_empty();
        tools.push(OutTool {
            kind: None,
            name: Cow::Owned(name.clone()),
            description: Some(description.unwrap_or(JSON_TOOL_DESCRIPTION)),
            input_schema: Some(match schema {
                Cow::Borrowed(s) => object_schema(s),
                Cow::Owned(s) => Cow::Owned(s),
            }),
        });
        let tc = match (user_forced, has_user_tools) {
            (Some(n), _) => choice("tool", Some(n)),
            (None, true) => choice("any", None),
            (None, false) => choice("tool", Some(Cow::Owned(name.clone()))),
        };
        return (tools, Some(tc), Some(name));
    }
    let client_tools = !tools.is_empty();
    if req.web_search {
        tools.push(WEB_SEARCH);
    }
    let tc = match &req.tool_choice {
        _ if !client_tools => None,
        Some(ToolChoice::Auto) => Some(choice("auto", None)),
        Some(ToolChoice::None) => Some(choice("none", None)),
        Some(ToolChoice::Required) => Some(choice("any", None)),
        Some(ToolChoice::Named(n)) => Some(choice("tool", Some(Cow::Borrowed(n.as_str())))),
        Some(ToolChoice::Allowed { required, .. }) => {
            Some(choice(if *required { "any" } else { "auto" }, None))
        }
        None if no_parallel => Some(choice("auto", None)),
        None => None,
    };
    (tools, tc, None)
}

/// Anthropic wants `input_schema` with a root `type: "object"`.
fn object_schema(schema: &Value) -> Cow<'_, Value> {
    match schema {
        Value::Object(m) if m.contains_key("type") => Cow::Borrowed(schema),
        Value::Object(m) => {
            let mut m = m.clone();
            m.insert("type".into(), Value::String("object".into()));
            Cow::Owned(Value::Object(m))
        }
        _ => Cow::Owned(serde_json::json!({"type": "object", "properties": {}})),
    }
}
