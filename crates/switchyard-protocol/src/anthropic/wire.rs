//! Borrowing deserialization types for Anthropic bodies and stream events.
//! Flat structs (not tagged enums) so raw values and strings stay borrowed.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::ir;

/// One content block of any type (request or response side). Fields that a
/// given `type` does not use stay `None`; unknown keys (`cache_control`,
/// `caller`, `citations`…) are ignored.
#[derive(Debug, Deserialize)]
pub(super) struct Block<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    /// An image's source (read by `image`: other blocks' `source` — a
    /// search result's is a URL string — is none of the IR's business).
    #[serde(default, borrow)]
    pub source: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub input: Option<&'a RawValue>,
    #[serde(default, borrow)]
    pub tool_use_id: Option<Cow<'a, str>>,
    /// `tool_result` content: a string or an array of blocks.
    #[serde(default, borrow)]
    pub content: Option<&'a RawValue>,
    #[serde(default)]
    pub is_error: Option<bool>,
    #[serde(default, borrow)]
    pub thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub signature: Option<Cow<'a, str>>,
    /// `redacted_thinking` payload.
    #[serde(default, borrow)]
    pub data: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct ImageSource<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Cow<'a, str>,
    #[serde(default, borrow)]
    pub media_type: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub data: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub url: Option<Cow<'a, str>>,
}

/// `usage` of a message, `message_start` or `message_delta`. Optional fields
/// tell "absent" from zero (a `message_delta` may omit the input counts).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Usage {
    #[serde(default)]
    pub input_tokens: Option<u64>,
    #[serde(default)]
    pub output_tokens: Option<u64>,
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
}

impl Usage {
    /// MAPPING §10: Anthropic `input_tokens` excludes cache reads and writes.
    pub fn to_ir(&self) -> ir::Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let write = self.cache_creation_input_tokens.unwrap_or(0);
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

    pub fn has_input(&self) -> bool {
        self.input_tokens.is_some()
            || self.cache_read_input_tokens.is_some()
            || self.cache_creation_input_tokens.is_some()
    }
}

/// A whole `message` body.
#[derive(Debug, Deserialize)]
pub(super) struct Message<'a> {
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub model: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub content: Vec<Block<'a>>,
    #[serde(default, borrow)]
    pub stop_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    pub usage: Usage,
}

/// One stream event payload (any `type`).
#[derive(Debug, Deserialize)]
pub(super) struct Event<'a> {
    #[serde(default, rename = "type", borrow)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(default)]
    pub index: Option<u32>,
    /// `message_start`: the skeleton (`content` is `[]`).
    #[serde(default, borrow)]
    pub message: Option<Message<'a>>,
    #[serde(default, borrow)]
    pub content_block: Option<Block<'a>>,
    #[serde(default, borrow)]
    pub delta: Option<Delta<'a>>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default, borrow)]
    pub error: Option<ErrorObj<'a>>,
}

/// `content_block_delta.delta` or `message_delta.delta`.
#[derive(Debug, Deserialize)]
pub(super) struct Delta<'a> {
    #[serde(default, rename = "type", borrow)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub signature: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub partial_json: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub stop_reason: Option<Cow<'a, str>>,
}

/// `{"type": "...", "message": "..."}` inside an error body or event.
#[derive(Debug, Deserialize)]
pub(super) struct ErrorObj<'a> {
    #[serde(default, rename = "type", borrow)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub message: Option<Cow<'a, str>>,
}

/// MAPPING §9, Anthropic → unified.
pub(super) fn finish_from_wire(s: &str) -> ir::FinishReason {
    match s {
        "max_tokens" | "model_context_window_exceeded" => ir::FinishReason::Length,
        "tool_use" => ir::FinishReason::ToolCalls,
        "refusal" => ir::FinishReason::ContentFilter,
        _ => ir::FinishReason::Stop, // end_turn, stop_sequence, pause_turn, unknown
    }
}

/// MAPPING §9, unified → Anthropic. A raw Anthropic value of the same class
/// is kept (`pause_turn`, `model_context_window_exceeded`); `stop_sequence`
/// is not, since the matched sequence is not known here.
pub(super) fn finish_to_wire(reason: ir::FinishReason, raw: Option<&str>) -> &'static str {
    let default = match reason {
        ir::FinishReason::Stop | ir::FinishReason::Error => "end_turn",
        ir::FinishReason::Length => "max_tokens",
        ir::FinishReason::ToolCalls => "tool_use",
        ir::FinishReason::ContentFilter => "refusal",
    };
    match raw {
        Some("pause_turn") if reason == ir::FinishReason::Stop => "pause_turn",
        Some("model_context_window_exceeded") if reason == ir::FinishReason::Length => {
            "model_context_window_exceeded"
        }
        _ => default,
    }
}
