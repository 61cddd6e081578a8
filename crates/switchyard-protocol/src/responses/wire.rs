//! Lenient read-side wire types of a Responses upstream's answers and
//! stream events: every field optional, unknown ones ignored (the API adds
//! fields often; MAPPING §14 lists the ones that matter).

use serde::Deserialize;

use crate::ir::{FinishReason, Usage};

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireResponse {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub created_at: Option<u64>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub incomplete_details: Option<Incomplete>,
    #[serde(default)]
    pub output: Vec<OutItem>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    #[serde(default)]
    pub error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
pub(super) struct Incomplete {
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireError {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct OutItem {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub call_id: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
    #[serde(default)]
    pub input: Option<String>,
    #[serde(default)]
    pub content: Option<Vec<OutPart>>,
    #[serde(default)]
    pub summary: Option<Vec<OutPart>>,
    #[serde(default)]
    pub encrypted_content: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct OutPart {
    #[serde(rename = "type", default)]
    pub kind: String,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub refusal: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct WireUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub input_tokens_details: Option<InputDetails>,
    #[serde(default)]
    pub output_tokens_details: Option<OutputDetails>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct InputDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct OutputDetails {
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl WireUsage {
    pub fn to_ir(&self) -> Usage {
        let i = self.input_tokens_details.as_ref();
        Usage {
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            cached_input_tokens: i.and_then(|d| d.cached_tokens).unwrap_or(0),
            cache_write_tokens: i.and_then(|d| d.cache_write_tokens).unwrap_or(0),
            reasoning_tokens: self
                .output_tokens_details
                .as_ref()
                .and_then(|d| d.reasoning_tokens)
                .unwrap_or(0),
        }
    }
}

impl WireResponse {
    /// The finish reason (MAPPING §14.2: the API has none) and the raw value
    /// kept for logs (`completed`, or the incomplete reason).
    pub fn finish(&self, has_calls: bool, refused: bool) -> (FinishReason, String) {
        let reason = self
            .incomplete_details
            .as_ref()
            .and_then(|d| d.reason.as_deref());
        match (self.status.as_deref(), reason) {
            (Some("incomplete"), Some("content_filter")) => {
                (FinishReason::ContentFilter, "content_filter".into())
            }
            (Some("incomplete"), r) => (
                FinishReason::Length,
                r.unwrap_or("max_output_tokens").into(),
            ),
            (s, _) => {
                let raw = s.unwrap_or("completed").to_owned();
                if has_calls {
                    (FinishReason::ToolCalls, raw)
                } else if refused {
                    (FinishReason::ContentFilter, raw)
                } else {
                    (FinishReason::Stop, raw)
                }
            }
        }
    }
}

/// One stream event, as far as the translator reads it.
#[derive(Debug, Default, Deserialize)]
pub(super) struct WireEvent {
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub response: Option<WireResponse>,
    #[serde(default)]
    pub item: Option<OutItem>,
    #[serde(default)]
    pub output_index: Option<u32>,
    #[serde(default)]
    pub item_id: Option<String>,
    #[serde(default)]
    pub delta: Option<String>,
    #[serde(default)]
    pub arguments: Option<String>,
    #[serde(default)]
    pub input: Option<String>,
    #[serde(default)]
    pub summary_index: Option<u32>,
    #[serde(default)]
    pub sequence_number: Option<u64>,
    /// `error` events: nested (the wire) …
    #[serde(default)]
    pub error: Option<WireError>,
    /// … or top-level (openai-python's `ResponseErrorEvent`).
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}
