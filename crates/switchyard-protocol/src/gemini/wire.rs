//! Borrowing wire types for generateContent bodies: `Out*` are serialized
//! (requests, and responses for a Gemini front door), `In*` deserialized.

use std::borrow::Cow;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::ir;

// === outgoing ===

#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct OutPart<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thought_signature: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inline_data: Option<Blob<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file_data: Option<FileData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_call: Option<OutFunctionCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_response: Option<OutFunctionResponse<'a>>,
}

impl<'a> OutPart<'a> {
    pub fn text(t: &'a str) -> Self {
        OutPart {
            text: Some(t),
            ..Default::default()
        }
    }

    pub fn thought(t: &'a str) -> Self {
        OutPart {
            text: Some(t),
            thought: Some(true),
            ..Default::default()
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Blob<'a> {
    pub mime_type: &'a str,
    pub data: &'a str,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct FileData<'a> {
    pub mime_type: &'a str,
    pub file_uri: &'a str,
}

#[derive(Debug, Serialize)]
pub(super) struct OutFunctionCall<'a> {
    pub name: &'a str,
    /// Always a JSON object.
    pub args: &'a RawValue,
}

#[derive(Debug, Serialize)]
pub(super) struct OutFunctionResponse<'a> {
    pub name: &'a str,
    pub response: ResponseObject<'a>,
}

/// `functionResponse.response`: must be a JSON object.
#[derive(Debug)]
pub(super) enum ResponseObject<'a> {
    /// The tool's text already was a JSON object.
    Raw(&'a RawValue),
    /// `{"result": text}` or `{"error": text}`.
    Wrapped { key: &'static str, text: &'a str },
}

impl Serialize for ResponseObject<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ResponseObject::Raw(r) => r.serialize(s),
            ResponseObject::Wrapped { key, text } => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry(key, text)?;
                m.end()
            }
        }
    }
}

#[derive(Debug, Serialize)]
pub(super) struct OutContent<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    pub parts: Vec<OutPart<'a>>,
}

/// `args` for a call whose arguments are missing.
pub(super) fn empty_object() -> &'static RawValue {
    serde_json::from_str("{}").expect("static JSON")
}

/// `text` as a JSON object, if it is one (leading/trailing whitespace allowed).
pub(super) fn as_object(text: &str) -> Option<&RawValue> {
    let t = text.trim();
    if !t.starts_with('{') {
        return None;
    }
    serde_json::from_str::<&RawValue>(t).ok()
}

// === incoming ===

/// One `GenerateContentResponse` (a whole answer or one stream chunk).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InResponse<'a> {
    #[serde(default, borrow)]
    pub candidates: Vec<InCandidate<'a>>,
    #[serde(default, borrow)]
    pub prompt_feedback: Option<PromptFeedback<'a>>,
    #[serde(default)]
    pub usage_metadata: Option<UsageMetadata>,
    #[serde(default, borrow)]
    pub model_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub response_id: Option<Cow<'a, str>>,
    /// An in-band `google.rpc.Status` (mid-stream failures).
    #[serde(default, borrow)]
    pub error: Option<&'a RawValue>,
}

impl InResponse<'_> {
    /// The candidate we asked for (`candidateCount` is never sent, so 1).
    pub fn candidate(&self) -> Option<&InCandidate<'_>> {
        self.candidates
            .iter()
            .find(|c| c.index.unwrap_or(0) == 0)
            .or(self.candidates.first())
    }

    /// `promptFeedback.blockReason` when there is no candidate to show.
    pub fn blocked(&self) -> Option<(String, Option<String>)> {
        if !self.candidates.is_empty() {
            return None;
        }
        let f = self.prompt_feedback.as_ref()?;
        let reason = f.block_reason.as_deref()?;
        Some((
            reason.to_owned(),
            f.block_reason_message.as_deref().map(str::to_owned),
        ))
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InCandidate<'a> {
    #[serde(default, borrow)]
    pub content: Option<InContent<'a>>,
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    pub index: Option<u32>,
}

#[derive(Debug, Deserialize)]
pub(super) struct InContent<'a> {
    #[serde(default, borrow)]
    pub parts: Vec<InPart<'a>>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InPart<'a> {
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    #[serde(default)]
    pub thought: Option<bool>,
    #[serde(default, borrow)]
    pub thought_signature: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub function_call: Option<InFunctionCall<'a>>,
}

impl InPart<'_> {
    pub fn is_thought(&self) -> bool {
        self.thought == Some(true)
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InFunctionCall<'a> {
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub args: Option<&'a RawValue>,
    /// Vertex `streamFunctionCallArguments`: argument fragments.
    #[serde(default, borrow)]
    pub partial_args: Vec<PartialArg<'a>>,
    #[serde(default)]
    pub will_continue: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PartialArg<'a> {
    #[serde(borrow)]
    pub json_path: Cow<'a, str>,
    #[serde(default, borrow)]
    pub string_value: Option<Cow<'a, str>>,
    #[serde(default)]
    pub number_value: Option<f64>,
    #[serde(default)]
    pub bool_value: Option<bool>,
    #[serde(default, borrow)]
    pub null_value: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct PromptFeedback<'a> {
    #[serde(default, borrow)]
    pub block_reason: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub block_reason_message: Option<Cow<'a, str>>,
}

/// `usageMetadata` (counts are absent rather than 0 when unknown).
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct UsageMetadata {
    #[serde(default)]
    pub prompt_token_count: u64,
    #[serde(default)]
    pub candidates_token_count: u64,
    #[serde(default)]
    pub total_token_count: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_content_token_count: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub thoughts_token_count: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_use_prompt_token_count: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl UsageMetadata {
    /// MAPPING.md §10: input = prompt (+ tool-use prompt); output = candidates
    /// + thoughts (Gemini's candidates count excludes thoughts).
    pub fn to_ir(self) -> ir::Usage {
        ir::Usage {
            // Saturating: counts are the upstream's, and a wrapped sum
            // would bill a huge answer as a tiny one.
            input_tokens: self
                .prompt_token_count
                .saturating_add(self.tool_use_prompt_token_count),
            output_tokens: self
                .candidates_token_count
                .saturating_add(self.thoughts_token_count),
            cached_input_tokens: self.cached_content_token_count,
            cache_write_tokens: 0,
            reasoning_tokens: self.thoughts_token_count,
        }
    }

    pub fn from_ir(u: &ir::Usage) -> Self {
        UsageMetadata {
            prompt_token_count: u.input_tokens,
            candidates_token_count: u.output_tokens.saturating_sub(u.reasoning_tokens),
            total_token_count: u.total(),
            cached_content_token_count: u.cached_input_tokens,
            thoughts_token_count: u.reasoning_tokens,
            tool_use_prompt_token_count: 0,
        }
    }
}
