//! Token counting: Anthropic `POST /v1/messages/count_tokens`, Gemini `:countTokens`,
//! OpenAI `POST /v1/responses/input_tokens`.
//!
//! The count is the prompt-token figure the same body would get in a generation's usage
//! (characters of system, message and tool-result text / 4, at least 1, read by the same
//! [`conv`] functions), so a test can predict it and compare it with a real call.
//! Shapes: `anthropic/count_tokens.response.json` (compact), `gemini/count_tokens.response.json`
//! (pretty, `totalTokens` first as Gemini orders its fields),
//! `openai-responses/input_tokens.response.json` (pretty, no trailing newline).

use crate::conv;
use crate::json::{compact, pretty_ascii, pretty_nl};
use crate::text;
use bytes::Bytes;
use serde_json::{json, Value};

/// `{"input_tokens":N}` for a Messages body.
pub fn anthropic(body: &Value) -> Bytes {
    let n = text::prompt_tokens(conv::anthropic(body).prompt_chars);
    Bytes::from(compact(&json!({"input_tokens": n})))
}

/// `{totalTokens, promptTokensDetails}` for `{contents}` or
/// `{generateContentRequest: {contents, systemInstruction, …}}`.
pub fn gemini(body: &Value, model: &str) -> Bytes {
    let inner = body
        .get("generateContentRequest")
        .or(body.get("generate_content_request"))
        .unwrap_or(body);
    let n = text::prompt_tokens(conv::gemini(inner, model, false).prompt_chars);
    pretty_nl(&json!({
        "totalTokens": n,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": n}]
    }))
}

/// `{"input_tokens": N, "object": "response.input_tokens"}` for a Responses body.
pub fn responses(body: &Value) -> Bytes {
    let n = text::prompt_tokens(conv::responses(body).prompt_chars);
    pretty_ascii(&json!({"input_tokens": n, "object": "response.input_tokens"}))
}
