//! Borrowing wire types for OpenAI Chat Completions bodies.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::ir;

/// A request as the client sent it, validated field by field.
#[derive(Debug, Default)]
pub struct ChatCompletionRequest<'a> {
    pub model: Cow<'a, str>,
    pub messages: Vec<WireMessage<'a>>,
    pub stream: bool,
    pub include_usage: bool,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u32>,
    pub max_completion_tokens: Option<u32>,
    pub stop: Vec<String>,
    pub seed: Option<i64>,
    pub presence_penalty: Option<f64>,
    pub frequency_penalty: Option<f64>,
    pub tools: Vec<WireTool<'a>>,
    pub tool_choice: Option<WireToolChoice>,
    pub parallel_tool_calls: Option<bool>,
    pub response_format: Option<WireResponseFormat<'a>>,
    pub reasoning_effort: Option<String>,
    pub user: Option<String>,
    pub provider_options: Option<serde_json::Map<String, serde_json::Value>>,
    /// Choices asked for (1..=128).
    pub n: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WireRole {
    System,
    Developer,
    User,
    Assistant,
    Tool,
    Function,
}

#[derive(Debug, Deserialize)]
pub struct WireMessage<'a> {
    pub role: WireRole,
    #[serde(default, borrow)]
    pub content: Option<WireContent<'a>>,
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub tool_calls: Option<Vec<WireToolCall<'a>>>,
    #[serde(default, borrow)]
    pub tool_call_id: Option<Cow<'a, str>>,
    /// DeepSeek / Qwen reasoning echoed back in history.
    #[serde(default, borrow)]
    pub reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub refusal: Option<Cow<'a, str>>,
}

/// `content`: a string or an array of parts. Deserialized by hand rather than
/// as an untagged enum, which would buffer and lose borrowed raw values.
#[derive(Debug)]
pub enum WireContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<WirePart<'a>>),
}

impl<'de: 'a, 'a> Deserialize<'de> for WireContent<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for V<'a> {
            type Value = WireContent<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("`content` as a string or an array of content parts")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(WireContent::Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(WireContent::Text(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(WireContent::Text(Cow::Owned(v)))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut parts = Vec::new();
                while let Some(p) = seq.next_element()? {
                    parts.push(p);
                }
                Ok(WireContent::Parts(parts))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    Text,
    ImageUrl,
    InputAudio,
    File,
}

/// One content part. A flat struct (not a tagged enum) so raw values borrow.
/// Audio and file parts pass through to OpenAI upstreams untouched; other
/// dialects cannot carry them.
#[derive(Debug, Deserialize)]
pub struct WirePart<'a> {
    #[serde(rename = "type")]
    pub kind: PartKind,
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub image_url: Option<WireImageUrl<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct WireImageUrl<'a> {
    #[serde(borrow)]
    pub url: Cow<'a, str>,
    #[serde(default)]
    pub detail: Option<String>,
}

#[derive(Debug, Deserialize, Serialize)]
pub struct WireToolCall<'a> {
    #[serde(borrow)]
    pub id: Cow<'a, str>,
    #[serde(rename = "type", default = "function_type")]
    pub kind: Cow<'a, str>,
    #[serde(borrow)]
    pub function: WireFunctionCall<'a>,
}

fn function_type() -> Cow<'static, str> {
    Cow::Borrowed("function")
}

#[derive(Debug, Deserialize, Serialize)]
pub struct WireFunctionCall<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(borrow)]
    pub arguments: Cow<'a, str>,
}

#[derive(Debug, Deserialize)]
pub struct WireTool<'a> {
    #[serde(rename = "type")]
    pub kind: ToolKind,
    #[serde(borrow)]
    pub function: WireFunction<'a>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolKind {
    Function,
}

#[derive(Debug, Deserialize)]
pub struct WireFunction<'a> {
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub description: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub parameters: Option<&'a RawValue>,
    #[serde(default)]
    pub strict: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum WireToolChoice {
    Mode(ToolChoiceMode),
    Function {
        #[serde(rename = "type")]
        kind: ToolKind,
        function: NamedFunction,
    },
    Allowed {
        #[serde(rename = "type")]
        kind: AllowedToolsKind,
        allowed_tools: AllowedTools,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolChoiceMode {
    Auto,
    None,
    Required,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AllowedToolsKind {
    AllowedTools,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct NamedFunction {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AllowedTools {
    pub mode: ToolChoiceMode,
    pub tools: Vec<AllowedTool>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AllowedTool {
    pub function: NamedFunction,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResponseFormatKind {
    Text,
    JsonObject,
    JsonSchema,
}

/// A flat struct (not a tagged enum) so the schema stays a borrowed raw value.
#[derive(Debug, Deserialize)]
pub struct WireResponseFormat<'a> {
    #[serde(rename = "type")]
    pub kind: ResponseFormatKind,
    #[serde(default, borrow)]
    pub json_schema: Option<WireJsonSchema<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct WireJsonSchema<'a> {
    pub name: String,
    #[serde(default, borrow)]
    pub schema: Option<&'a RawValue>,
    #[serde(default)]
    pub strict: Option<bool>,
    #[serde(default)]
    pub description: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// `usage` as OpenAI-compatible providers send it (DeepSeek adds cache hits).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub total_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptDetails>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek's cache hits (MAPPING §18.1).
    #[serde(default, skip_serializing)]
    pub prompt_cache_hit_tokens: Option<u64>,
    /// Moonshot's cache hits, at the top level (MAPPING §18.4).
    #[serde(default, skip_serializing)]
    pub cached_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct PromptDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    /// Qwen's explicit-cache writes (MAPPING §18.2).
    #[serde(default, skip_serializing)]
    pub cache_creation_input_tokens: Option<u64>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct CompletionDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl WireUsage {
    pub fn to_ir(&self) -> ir::Usage {
        let cached = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cached_tokens)
            .or(self.prompt_cache_hit_tokens)
            .or(self.cached_tokens)
            .unwrap_or(0);
        let written = self
            .prompt_tokens_details
            .as_ref()
            .and_then(|d| d.cache_creation_input_tokens)
            .unwrap_or(0);
        ir::Usage {
            input_tokens: self.prompt_tokens,
            output_tokens: self.completion_tokens,
            cached_input_tokens: cached,
            cache_write_tokens: written,
            reasoning_tokens: self
                .completion_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }

    pub fn from_ir(u: &ir::Usage) -> WireUsage {
        WireUsage {
            prompt_tokens: u.input_tokens,
            completion_tokens: u.output_tokens,
            total_tokens: u.total(),
            prompt_tokens_details: Some(PromptDetails {
                cached_tokens: Some(u.cached_input_tokens),
                cache_creation_input_tokens: None,
            }),
            completion_tokens_details: Some(CompletionDetails {
                reasoning_tokens: Some(u.reasoning_tokens),
            }),
            prompt_cache_hit_tokens: None,
            cached_tokens: None,
        }
    }
}

/// `{"error": {...}}` as OpenAI-compatible providers return it.
#[derive(Debug, Deserialize)]
pub struct WireErrorBody<'a> {
    #[serde(borrow)]
    pub error: WireError<'a>,
}

#[derive(Debug, Deserialize)]
pub struct WireError<'a> {
    #[serde(default, borrow)]
    pub message: Option<Cow<'a, str>>,
    #[serde(default, rename = "type", borrow)]
    pub kind: Option<Cow<'a, str>>,
    /// A string on OpenAI, sometimes a number-as-string on Azure.
    #[serde(default, borrow)]
    pub code: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub param: Option<&'a RawValue>,
}

impl WireError<'_> {
    /// `code` as text, whether it came as a string or a number.
    pub fn code_str(&self) -> Option<String> {
        let raw = self.code?.get();
        match serde_json::from_str::<serde_json::Value>(raw).ok()? {
            serde_json::Value::String(s) => Some(s),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}
