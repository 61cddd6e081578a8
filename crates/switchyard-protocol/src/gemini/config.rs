//! Tools, tool choice and `generationConfig` (MAPPING.md §5, §6, §8, §11).

use serde::Serialize;
use serde_json::Value;

use super::schema::sanitize_schema;
use super::Target;
use crate::ir;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) enum OutTool<'a> {
    FunctionDeclarations(Vec<FunctionDeclaration<'a>>),
    /// Gemini's own Google Search grounding (`{"googleSearch": {}}`).
    GoogleSearch {},
}

#[derive(Serialize)]
pub(super) struct FunctionDeclaration<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<Value>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ToolConfig<'a> {
    function_calling_config: FunctionCallingConfig<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FunctionCallingConfig<'a> {
    mode: &'static str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    allowed_function_names: &'a [String],
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct GenerationConfig<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_k: Option<u32>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    stop_sequences: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    presence_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    frequency_penalty: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_mime_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_schema: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_config: Option<ThinkingConfig>,
    #[serde(skip_serializing_if = "Option::is_none")]
    candidate_count: Option<u32>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ThinkingConfig {
    thinking_budget: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    include_thoughts: Option<bool>,
}

/// Gemini accepts at most 5 stop sequences; later ones are dropped.
const MAX_STOP: usize = 5;

/// Function declarations, then Google Search when the client asked for the
/// provider's web search. Gemini 2.x models refuse the two together, so with
/// functions declared the search goes only where `beside_functions` says the
/// model takes both (Gemini 3); otherwise it is left out and the gateway
/// names it as dropped.
pub(super) fn tools(
    tools: &[ir::Tool],
    web_search: bool,
    beside_functions: bool,
) -> Vec<OutTool<'_>> {
    let mut out = Vec::new();
    if !tools.is_empty() {
        out.push(OutTool::FunctionDeclarations(
            tools
                .iter()
                .map(|t| FunctionDeclaration {
                    name: &t.name,
                    description: t.description.as_deref().filter(|d| !d.is_empty()),
                    parameters: sanitize_schema(&t.parameters),
                })
                .collect(),
        ));
    }
    if web_search && (tools.is_empty() || beside_functions) {
        out.push(OutTool::GoogleSearch {});
    }
    out
}

pub(super) fn tool_config(c: &ir::ToolChoice) -> ToolConfig<'_> {
    let (mode, names): (&'static str, &[String]) = match c {
        ir::ToolChoice::Auto => ("AUTO", &[]),
        ir::ToolChoice::None => ("NONE", &[]),
        ir::ToolChoice::Required => ("ANY", &[]),
        ir::ToolChoice::Named(n) => ("ANY", std::slice::from_ref(n)),
        ir::ToolChoice::Allowed { names, required } => {
            (if *required { "ANY" } else { "AUTO" }, names.as_slice())
        }
    };
    ToolConfig {
        function_calling_config: FunctionCallingConfig {
            mode,
            allowed_function_names: names,
        },
    }
}

pub(super) fn generation_config<'a>(
    req: &'a ir::ChatRequest,
    target: &Target,
) -> Option<GenerationConfig<'a>> {
    let (mime, schema) = match &req.response_format {
        Some(ir::ResponseFormat::JsonObject) => (Some("application/json"), None),
        Some(ir::ResponseFormat::JsonSchema { schema, .. }) => {
            (Some("application/json"), sanitize_schema(schema))
        }
        _ => (None, None),
    };
    let c = GenerationConfig {
        max_output_tokens: req.max_tokens.or(target.max_output_tokens),
        temperature: req.temperature,
        top_p: req.top_p,
        top_k: req.top_k,
        stop_sequences: &req.stop[..req.stop.len().min(MAX_STOP)],
        // Gemini's seed is an int32: wider values are truncated.
        seed: req.seed.map(|s| s as i32),
        presence_penalty: req.presence_penalty,
        frequency_penalty: req.frequency_penalty,
        response_mime_type: mime,
        response_schema: schema,
        thinking_config: req.reasoning.as_ref().and_then(thinking),
        candidate_count: req.n.filter(|n| *n > 1),
    };
    let empty = c.max_output_tokens.is_none()
        && c.temperature.is_none()
        && c.top_p.is_none()
        && c.top_k.is_none()
        && c.stop_sequences.is_empty()
        && c.seed.is_none()
        && c.presence_penalty.is_none()
        && c.frequency_penalty.is_none()
        && c.response_mime_type.is_none()
        && c.thinking_config.is_none()
        && c.candidate_count.is_none();
    (!empty).then_some(c)
}

/// A token budget wins; an OpenAI effort maps to Google's documented budgets
/// for its OpenAI-compatible endpoint (low 1024, medium 8192, high 24576;
/// `none` = 0 = thinking off, which some models reject).
fn thinking(r: &ir::ReasoningConfig) -> Option<ThinkingConfig> {
    let budget = match (r.budget_tokens, r.effort.as_deref()) {
        (Some(b), _) => b,
        (None, Some("none")) => {
            return Some(ThinkingConfig {
                thinking_budget: 0,
                include_thoughts: None,
            })
        }
        (None, Some("minimal" | "low")) => 1024,
        (None, Some("medium")) => 8192,
        (None, Some("high")) => 24576,
        _ => return None,
    };
    Some(ThinkingConfig {
        thinking_budget: budget,
        include_thoughts: (budget > 0).then_some(true),
    })
}
