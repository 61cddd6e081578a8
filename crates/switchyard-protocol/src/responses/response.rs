//! Whole (non-streamed) answers: IR → Response body for Responses clients,
//! and a Responses upstream's body → IR.

use super::extras::ResponsesExtras;
use super::items::{self, item_id, Head};
use super::wire::WireResponse;
use super::UpstreamError;
use crate::ir::{ChatResponse, ToolCall};

/// The Response body for `resp`. `id` is the `resp_…` id the gateway issues
/// (item ids derive from it); `model` and `created_at` come from `resp`.
/// Output order: reasoning item, message item, one call item per call
/// (`custom_tool_call` for tools the request declared `custom`). The
/// reasoning signature is sent as `encrypted_content` only when the client
/// asked for it in `include`.
pub fn encode_response(resp: &ChatResponse, id: &str, extras: &ResponsesExtras) -> Vec<u8> {
    let refused = resp.refusal.as_deref().is_some_and(|r| !r.is_empty());
    let (status, incomplete) = items::status_of(resp.finish_reason, refused);
    let mut output = Vec::new();
    let reasoning = resp.reasoning.as_deref().filter(|r| !r.is_empty());
    let encrypted = resp
        .reasoning_signature
        .as_deref()
        .filter(|_| extras.wants_encrypted_reasoning());
    if reasoning.is_some() || encrypted.is_some() {
        let summary = reasoning.map(items::summary_text).into_iter().collect();
        output.push(items::reasoning_item(
            &item_id(id, "rs", None),
            summary,
            encrypted,
        ));
    }
    let mut content = Vec::new();
    if let Some(t) = resp.text.as_deref().filter(|t| !t.is_empty()) {
        content.push(items::output_text(t));
    }
    if let Some(r) = resp.refusal.as_deref().filter(|r| !r.is_empty()) {
        content.push(serde_json::json!({"type": "refusal", "refusal": r}));
    }
    if !content.is_empty() {
        output.push(items::message_item(
            &item_id(id, "msg", None),
            "completed",
            content,
        ));
    }
    for (n, c) in resp.tool_calls.iter().enumerate() {
        let custom = extras.is_custom(&c.name);
        let prefix = if custom { "ctc" } else { "fc" };
        output.push(items::call_item(
            &item_id(id, prefix, Some(n as u32)),
            &c.id,
            &c.name,
            &c.arguments,
            "completed",
            custom,
        ));
    }
    if status == "incomplete" {
        if let Some(last) = output.last_mut() {
            if last.get("status").is_some() {
                last["status"] = "incomplete".into();
            }
        }
    }
    let body = items::response_object(
        Head {
            id,
            created_at: resp.created,
            model: &resp.model,
            status,
            incomplete,
            error: None,
            output,
            usage: Some(&resp.usage),
        },
        &extras.echo,
    );
    // Serializing a Map into a Vec cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Why a Responses upstream body gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a Response object.
    Unparsable(String),
    /// `status: "failed"` with its `error`.
    Failed(UpstreamError),
}

/// A Responses upstream's JSON answer → IR. Text is every `output_text` of
/// every message item in order; reasoning is the summaries joined with a
/// blank line, its signature the last `encrypted_content`; call ids are the
/// `call_id`s; custom tool calls become `{"input": …}` arguments.
pub fn decode_response(body: &[u8]) -> Result<ChatResponse, DecodeError> {
    let w: WireResponse =
        serde_json::from_slice(body).map_err(|e| DecodeError::Unparsable(e.to_string()))?;
    if w.status.as_deref() == Some("failed") {
        let e = w.error.unwrap_or_default();
        return Err(DecodeError::Failed(UpstreamError {
            code: e.code.unwrap_or_else(|| "server_error".into()),
            message: e.message.unwrap_or_default(),
        }));
    }
    let mut text = String::new();
    let mut refusal = String::new();
    let mut summaries = Vec::new();
    let mut signature = None;
    let mut tool_calls = Vec::new();
    for item in &w.output {
        match item.kind.as_str() {
            "message" => {
                for p in item.content.iter().flatten() {
                    match p.kind.as_str() {
                        "output_text" => text.push_str(p.text.as_deref().unwrap_or_default()),
                        "refusal" => refusal.push_str(p.refusal.as_deref().unwrap_or_default()),
                        _ => {}
                    }
                }
            }
            "reasoning" => {
                for p in item.summary.iter().flatten() {
                    if let Some(t) = p.text.as_deref().filter(|t| !t.is_empty()) {
                        summaries.push(t);
                    }
                }
                if item.encrypted_content.is_some() {
                    signature.clone_from(&item.encrypted_content);
                }
            }
            "function_call" => tool_calls.push(ToolCall {
                id: item.call_id.clone().unwrap_or_default(),
                name: item.name.clone().unwrap_or_default(),
                arguments: item.arguments.clone().unwrap_or_default(),
            }),
            "custom_tool_call" => tool_calls.push(ToolCall {
                id: item.call_id.clone().unwrap_or_default(),
                name: item.name.clone().unwrap_or_default(),
                arguments: serde_json::json!({"input": item.input.as_deref().unwrap_or_default()})
                    .to_string(),
            }),
            _ => {} // hosted-tool calls: not representable
        }
    }
    let (finish_reason, raw) = w.finish(!tool_calls.is_empty(), !refusal.is_empty());
    let non_empty = |s: String| (!s.is_empty()).then_some(s);
    Ok(ChatResponse {
        id: w.id.clone().unwrap_or_default(),
        model: w.model.clone().unwrap_or_default(),
        created: w.created_at.unwrap_or(0),
        text: non_empty(text),
        reasoning: non_empty(summaries.join("\n\n")),
        reasoning_signature: signature,
        tool_calls,
        refusal: non_empty(refusal),
        finish_reason,
        raw_finish_reason: Some(raw),
        usage: w.usage.as_ref().map(|u| u.to_ir()).unwrap_or_default(),
    })
}
