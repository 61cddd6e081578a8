//! Request parameters of a client's Messages body: tools, tool_choice,
//! thinking and output_config.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use super::request_in::{err, field};
use super::FieldError;
use crate::ir::{self, ToolChoice};

pub(super) fn tools(raw: &RawValue) -> Result<Vec<ir::Tool>, FieldError> {
    #[derive(Deserialize)]
    struct InTool<'a> {
        #[serde(default, rename = "type", borrow)]
        kind: Option<Cow<'a, str>>,
        name: String,
        #[serde(default)]
        description: Option<String>,
        #[serde(default)]
        input_schema: Option<Value>,
        #[serde(default)]
        strict: Option<bool>,
    }
    let items: Option<Vec<&RawValue>> = field(raw, "tools")?;
    let mut out = Vec::new();
    for (i, item) in items.into_iter().flatten().enumerate() {
        let param = format!("tools[{i}]");
        let t: InTool = field(item, &param)?;
        if let Some(kind) = t.kind.as_deref().filter(|k| *k != "custom") {
            return Err(err(&param, format!("tool type `{kind}` is not supported")));
        }
        let Some(parameters) = t.input_schema.filter(Value::is_object) else {
            return Err(err(
                format!("{param}.input_schema"),
                "`input_schema` object is required",
            ));
        };
        out.push(ir::Tool {
            name: t.name,
            description: t.description,
            parameters,
            strict: t.strict,
        });
    }
    Ok(out)
}

pub(super) fn choice(raw: &RawValue, req: &mut ir::ChatRequest) -> Result<(), FieldError> {
    #[derive(Deserialize)]
    struct InChoice {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        name: Option<String>,
        #[serde(default)]
        disable_parallel_tool_use: Option<bool>,
    }
    let Some(c) = field::<Option<InChoice>>(raw, "tool_choice")? else {
        return Ok(());
    };
    req.tool_choice = Some(match (c.kind.as_str(), c.name) {
        ("auto", _) => ToolChoice::Auto,
        ("none", _) => ToolChoice::None,
        ("any", _) if req.tools.is_empty() => {
            return Err(err("tool_choice", "`any` needs `tools`"))
        }
        ("any", _) => ToolChoice::Required,
        ("tool", Some(name)) => {
            if !req.tools.iter().any(|t| t.name == name) {
                return Err(err("tool_choice", format!("names unknown tool `{name}`")));
            }
            ToolChoice::Named(name)
        }
        ("tool", None) => return Err(err("tool_choice.name", "required for `type: tool`")),
        (other, _) => {
            return Err(err(
                "tool_choice.type",
                format!("must be auto, any, tool or none, got `{other}`"),
            ))
        }
    });
    if c.disable_parallel_tool_use == Some(true) {
        req.parallel_tool_calls = Some(false);
    }
    Ok(())
}

pub(super) fn thinking(raw: &RawValue, req: &mut ir::ChatRequest) -> Result<(), FieldError> {
    #[derive(Deserialize)]
    struct InThinking {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        budget_tokens: Option<u32>,
    }
    let Some(t) = field::<Option<InThinking>>(raw, "thinking")? else {
        return Ok(());
    };
    if t.kind == "enabled" {
        let Some(budget) = t.budget_tokens else {
            return Err(err(
                "thinking.budget_tokens",
                "required when thinking is enabled",
            ));
        };
        req.reasoning
            .get_or_insert(ir::ReasoningConfig {
                effort: None,
                budget_tokens: None,
            })
            .budget_tokens = Some(budget);
    }
    Ok(())
}

/// `output_config`: `format` (json_schema → IR JSON schema named `json`) and
/// `effort` (→ reasoning effort).
pub(super) fn output_config(raw: &RawValue, req: &mut ir::ChatRequest) -> Result<(), FieldError> {
    #[derive(Deserialize)]
    struct Cfg {
        #[serde(default)]
        format: Option<Format>,
        #[serde(default)]
        effort: Option<String>,
    }
    #[derive(Deserialize)]
    struct Format {
        #[serde(rename = "type")]
        kind: String,
        #[serde(default)]
        schema: Option<Value>,
    }
    let Some(cfg) = field::<Option<Cfg>>(raw, "output_config")? else {
        return Ok(());
    };
    if let Some(f) = cfg.format {
        match (f.kind.as_str(), f.schema) {
            ("json_schema", Some(schema)) => {
                req.response_format = Some(ir::ResponseFormat::JsonSchema {
                    name: super::JSON_TOOL_NAME.to_owned(),
                    schema,
                    strict: None,
                    description: None,
                })
            }
            _ => {
                return Err(err(
                    "output_config.format",
                    "expected `type: json_schema` with a `schema`",
                ))
            }
        }
    }
    if let Some(effort) = cfg.effort {
        req.reasoning
            .get_or_insert(ir::ReasoningConfig {
                effort: None,
                budget_tokens: None,
            })
            .effort = Some(effort);
    }
    Ok(())
}
