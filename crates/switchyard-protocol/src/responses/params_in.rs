//! The request parameters of a Responses body that are not input items:
//! `tools` (flat functions, emulated `custom` tools, hosted tools recorded
//! in the extras), `tool_choice`, `text` and `reasoning`.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::extras::ResponsesExtras;
use super::request_in::{err, field, value};
use super::FieldError;
use crate::ir::{self, ToolChoice};

#[derive(Deserialize)]
struct WireTool<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    parameters: Option<Value>,
    #[serde(default)]
    strict: Option<bool>,
}

pub(super) fn tools(
    raw: &RawValue,
    req: &mut ir::ChatRequest,
    x: &mut ResponsesExtras,
) -> Result<(), FieldError> {
    let list: Option<Vec<&RawValue>> =
        field(raw, "tools").map_err(|_| err("tools", "must be an array of tool objects"))?;
    for (i, raw) in list.into_iter().flatten().enumerate() {
        let param = format!("tools[{i}]");
        let t: WireTool = field(raw, &param)?;
        let named = |t: &WireTool| match t.name.as_deref() {
            Some(n) if !n.is_empty() => Ok(n.to_owned()),
            _ => Err(err(format!("{param}.name"), "a tool needs a `name`")),
        };
        match t.kind.as_ref() {
            "function" => req.tools.push(ir::Tool {
                name: named(&t)?,
                description: t.description.clone(),
                parameters: match &t.parameters {
                    Some(p @ Value::Object(_)) => p.clone(),
                    None | Some(Value::Null) => {
                        serde_json::json!({"type": "object", "properties": {}})
                    }
                    Some(_) => {
                        return Err(err(format!("{param}.parameters"), "must be an object"));
                    }
                },
                strict: t.strict,
            }),
            "custom" => {
                let name = named(&t)?;
                req.tools.push(custom_tool(&name, t.description.clone()));
                x.custom_tools.push(name);
            }
            "web_search"
            | "web_search_preview"
            | "web_search_2025_08_26"
            | "web_search_preview_2025_03_11" => x.web_search = Some(raw.get().to_owned()),
            other => x.dropped_tools.push(other.to_owned()),
        }
        let mut echo = value(raw, &param)?;
        if let (Value::Object(o), "function" | "custom") = (&mut echo, t.kind.as_ref()) {
            // The API echoes a missing or empty description as null.
            let empty = o.get("description").is_none_or(|d| d.as_str() == Some(""));
            if empty {
                o.insert("description".into(), Value::Null);
            }
        }
        x.echo.tools.push(echo);
    }
    Ok(())
}

/// A `custom` (freeform) tool as an IR function: one required string
/// parameter `input` carrying the freeform text. The grammar (`format`) is
/// lost — there is no way to tell a Chat/Anthropic/Gemini model about it.
fn custom_tool(name: &str, description: Option<String>) -> ir::Tool {
    ir::Tool {
        name: name.to_owned(),
        description,
        parameters: serde_json::json!({
            "type": "object",
            "properties": {
                "input": {
                    "type": "string",
                    "description": "The raw freeform input for this tool (plain text, not JSON)."
                }
            },
            "required": ["input"],
            "additionalProperties": false
        }),
        strict: None,
    }
}

pub(super) fn choice(
    raw: &RawValue,
    req: &mut ir::ChatRequest,
    x: &mut ResponsesExtras,
) -> Result<(), FieldError> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Wire<'a> {
        Mode(Cow<'a, str>),
        Object {
            #[serde(rename = "type", borrow)]
            kind: Cow<'a, str>,
            #[serde(default, borrow)]
            name: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            mode: Option<Cow<'a, str>>,
            #[serde(default)]
            tools: Option<Vec<Value>>,
        },
    }
    const P: &str = "tool_choice";
    let Some(w) = field::<Option<Wire>>(raw, P)? else {
        return Ok(());
    };
    x.echo.tool_choice = value(raw, P)?;
    let known = |n: &str| req.tools.iter().any(|t| t.name == n);
    let choice = match w {
        Wire::Mode(m) => match m.as_ref() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            other => {
                return Err(err(
                    P,
                    format!("must be `auto`, `none`, `required` or an object, got `{other}`"),
                ))
            }
        },
        Wire::Object { kind, name, .. } if kind == "function" || kind == "custom" => {
            let name = name.ok_or_else(|| err(P, format!("`{kind}` needs a `name`")))?;
            if !known(&name) {
                return Err(err(P, format!("names unknown tool `{name}`")));
            }
            ToolChoice::Named(name.into_owned())
        }
        Wire::Object {
            kind, mode, tools, ..
        } if kind == "allowed_tools" => {
            let required = match mode.as_deref() {
                None | Some("auto") => false,
                Some("required") => true,
                Some(other) => {
                    return Err(err(
                        format!("{P}.mode"),
                        format!("must be `auto` or `required`, got `{other}`"),
                    ))
                }
            };
            let mut names = Vec::new();
            for t in tools.iter().flatten() {
                let kind = t.get("type").and_then(Value::as_str).unwrap_or_default();
                let name = t.get("name").and_then(Value::as_str);
                match (kind, name) {
                    ("function" | "custom", Some(n)) if known(n) => names.push(n.to_owned()),
                    ("function" | "custom", Some(n)) => {
                        return Err(err(P, format!("names unknown tool `{n}`")))
                    }
                    // Hosted entries: the gateway already knows them from `tools`.
                    _ => {}
                }
            }
            ToolChoice::Allowed { names, required }
        }
        Wire::Object { kind, .. } => {
            x.forced_hosted = Some(kind.into_owned());
            return Ok(());
        }
    };
    req.tool_choice = Some(choice);
    Ok(())
}

pub(super) fn text(
    raw: &RawValue,
    req: &mut ir::ChatRequest,
    x: &mut ResponsesExtras,
) -> Result<(), FieldError> {
    #[derive(Deserialize)]
    struct Text {
        #[serde(default)]
        format: Option<Format>,
        #[serde(default)]
        verbosity: Option<String>,
    }
    #[derive(Deserialize)]
    struct Format {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        schema: Option<Value>,
        #[serde(default)]
        strict: Option<bool>,
        #[serde(default)]
        description: Option<String>,
    }
    let Some(t) = field::<Option<Text>>(raw, "text")? else {
        return Ok(());
    };
    req.response_format = match t.format {
        None => None,
        Some(f) => Some(match f.kind.as_str() {
            "text" => ir::ResponseFormat::Text,
            "json_object" => ir::ResponseFormat::JsonObject,
            "json_schema" => ir::ResponseFormat::JsonSchema {
                name: f
                    .name
                    .ok_or_else(|| err("text.format.name", "`json_schema` needs a `name`"))?,
                schema: f
                    .schema
                    .filter(Value::is_object)
                    .ok_or_else(|| err("text.format.schema", "must be a JSON Schema object"))?,
                strict: f.strict,
                description: f.description,
            },
            other => {
                return Err(err(
                    "text.format.type",
                    format!("must be `text`, `json_object` or `json_schema`, got `{other}`"),
                ))
            }
        }),
    };
    x.verbosity = t.verbosity;
    let mut echo = value(raw, "text")?;
    if let Value::Object(o) = &mut echo {
        o.entry("format")
            .or_insert_with(|| serde_json::json!({"type": "text"}));
        o.entry("verbosity").or_insert_with(|| "medium".into());
    }
    x.echo.text = echo;
    Ok(())
}

pub(super) fn reasoning(
    raw: &RawValue,
    req: &mut ir::ChatRequest,
    x: &mut ResponsesExtras,
) -> Result<(), FieldError> {
    #[derive(Deserialize)]
    struct Reasoning {
        #[serde(default)]
        effort: Option<String>,
        #[serde(default)]
        summary: Option<String>,
        /// Deprecated spelling of `summary`.
        #[serde(default)]
        generate_summary: Option<String>,
    }
    let Some(r) = field::<Option<Reasoning>>(raw, "reasoning")? else {
        return Ok(());
    };
    x.echo.reasoning = serde_json::json!({"effort": r.effort, "summary": r.summary});
    x.reasoning_summary = r.summary.or(r.generate_summary);
    if let Some(effort) = r.effort {
        req.reasoning = Some(ir::ReasoningConfig {
            effort: Some(effort),
            budget_tokens: None,
        });
    }
    Ok(())
}
