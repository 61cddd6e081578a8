//! Output items, usage and the Response object, shared by the whole-body
//! encoder and the stream encoder (whose terminal event repeats every item
//! as its `output_item.done` sent it).

use serde_json::{json, Map, Value};

use super::extras::Echo;
use crate::ir::{FinishReason, Usage};

/// Item ids derived from the response id: `resp_X` → `msg_X`, `rs_X`,
/// `fc_X_1`… (any other id is used whole as the suffix).
pub(super) fn item_id(response_id: &str, prefix: &str, n: Option<u32>) -> String {
    let suffix = response_id.strip_prefix("resp_").unwrap_or(response_id);
    match n {
        Some(n) => format!("{prefix}_{suffix}_{n}"),
        None => format!("{prefix}_{suffix}"),
    }
}

pub(super) fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
}

pub(super) fn message_item(id: &str, status: &str, content: Vec<Value>) -> Value {
    json!({"id": id, "type": "message", "status": status, "content": content, "role": "assistant"})
}

pub(super) fn summary_text(text: &str) -> Value {
    json!({"type": "summary_text", "text": text})
}

pub(super) fn reasoning_item(id: &str, summary: Vec<Value>, encrypted: Option<&str>) -> Value {
    let mut item = json!({"id": id, "type": "reasoning", "summary": summary});
    if let Some(e) = encrypted {
        item["encrypted_content"] = e.into();
    }
    item
}

/// A `function_call` item, or a `custom_tool_call` item (`input` = the
/// string under `input` in the emulated function's arguments).
pub(super) fn call_item(
    id: &str,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
    custom: bool,
) -> Value {
    if custom {
        json!({"id": id, "type": "custom_tool_call", "status": status, "call_id": call_id,
               "name": name, "input": custom_input(arguments)})
    } else {
        json!({"id": id, "type": "function_call", "status": status, "arguments": arguments,
               "call_id": call_id, "name": name})
    }
}

/// The freeform text of an emulated custom-tool call: `{"input": "…"}` →
/// `…`; arguments of any other shape are passed on as they are.
pub(super) fn custom_input(arguments: &str) -> String {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(mut o)) => match o.remove("input") {
            Some(Value::String(s)) => s,
            _ => arguments.to_owned(),
        },
        _ => arguments.to_owned(),
    }
}

pub(super) fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input_tokens,
        "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": u.reasoning_tokens},
        "total_tokens": u.total(),
    })
}

/// `status` and `incomplete_details.reason` for a finish (MAPPING §14.2);
/// `refused` = the answer carries a refusal part, which is `completed`.
pub(super) fn status_of(
    reason: FinishReason,
    refused: bool,
) -> (&'static str, Option<&'static str>) {
    match reason {
        FinishReason::Length => ("incomplete", Some("max_output_tokens")),
        FinishReason::ContentFilter if !refused => ("incomplete", Some("content_filter")),
        _ => ("completed", None),
    }
}

/// The fields of a Response object that are not echoed request params.
pub(super) struct Head<'a> {
    pub id: &'a str,
    pub created_at: u64,
    pub model: &'a str,
    pub status: &'a str,
    pub incomplete: Option<&'a str>,
    pub error: Option<(&'a str, &'a str)>,
    pub output: Vec<Value>,
    pub usage: Option<&'a Usage>,
}

pub(super) fn response_object(h: Head<'_>, echo: &Echo) -> Map<String, Value> {
    let mut o = Map::new();
    echo.write_into(&mut o);
    o.insert("id".into(), h.id.into());
    o.insert("object".into(), "response".into());
    o.insert("created_at".into(), h.created_at.into());
    o.insert("status".into(), h.status.into());
    o.insert("model".into(), h.model.into());
    o.insert(
        "error".into(),
        h.error.map_or(
            Value::Null,
            |(code, message)| json!({"code": code, "message": message}),
        ),
    );
    o.insert(
        "incomplete_details".into(),
        h.incomplete.map_or(Value::Null, |r| json!({"reason": r})),
    );
    o.insert("output".into(), Value::Array(h.output));
    o.insert("usage".into(), h.usage.map_or(Value::Null, usage));
    o
}
