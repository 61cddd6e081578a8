//! OpenAI (and Azure OpenAI) Chat Completions wire format.

use crate::answer::{Answer, Content, ARG_FRAGMENT};
use crate::conv::Conv;
use crate::json::{compact, pretty_nl};
use crate::render::{fixed, Ctx, Payload, Rendered, StreamOpts};
use crate::text;
use bytes::Bytes;
use serde_json::{json, Value};

const MIDSTREAM_SSE: &str = fixture!("openai/stream_error_midstream.sse");

/// The recorded in-band error frame (`data: {"error":{…}}\n\n`).
pub fn midstream_error() -> Bytes {
    let start = MIDSTREAM_SSE
        .find("data: {\"error\"")
        .expect("fixture has an error frame");
    Bytes::from_static(&MIDSTREAM_SSE.as_bytes()[start..])
}

/// `choices`: every choice is billed its own completion tokens.
fn usage(ans: &Answer, choices: u64) -> Value {
    let completion = ans.completion_tokens * choices;
    json!({
        "prompt_tokens": ans.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": ans.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": ans.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": ans.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0
        }
    })
}

fn finish_reason(ans: &Answer) -> &'static str {
    match ans.content {
        Content::Tool { .. } => "tool_calls",
        Content::Text { .. } => "stop",
    }
}

/// Render a chat completion (shape of `openai/chat_text_gpt41.response.json`) or a
/// stream (shape of `openai/stream_text_usage.sse`).
pub fn render(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Rendered {
    let payload = if conv.stream {
        Payload::Events(stream(conv, ans, ctx, opts))
    } else {
        Payload::Full(pretty_nl(&non_stream(conv, ans, ctx)))
    };
    Rendered {
        content_type: if conv.stream {
            "text/event-stream; charset=utf-8"
        } else {
            "application/json"
        },
        headers: vec![
            ("x-request-id", format!("req_mock_{}", ctx.seq)),
            ("openai-processing-ms", "1".into()),
            ("openai-version", "2020-10-01".into()),
        ],
        payload,
        bad_event: Bytes::from_static(b"data: {not json\n\n"),
        midstream_error: fixed(midstream_error()),
    }
}

fn non_stream(conv: &Conv, ans: &Answer, ctx: Ctx) -> Value {
    let message = match &ans.content {
        Content::Text { reasoning, pieces } => {
            let mut m = json!({"role": "assistant", "content": pieces.concat()});
            if !reasoning.is_empty() {
                m["reasoning_content"] = Value::String(reasoning.concat());
            }
            m["refusal"] = Value::Null;
            m["annotations"] = json!([]);
            m
        }
        Content::Tool { id, name, args, .. } => json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": compact(args)}
            }],
            "refusal": null,
            "annotations": []
        }),
    };
    json!({
        "id": format!("chatcmpl-mock{}", ctx.seq),
        "object": "chat.completion",
        "created": ctx.created,
        "model": conv.model,
        // `n` choices, the same answer each time.
        "choices": (0..conv.n).map(|i| json!({
            "index": i,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(ans)
        })).collect::<Vec<_>>(),
        "usage": usage(ans, conv.n),
        "service_tier": "default",
        "system_fingerprint": "fp_mock"
    })
}

fn stream(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Vec<Bytes> {
    let id = format!("chatcmpl-mock{}", ctx.seq);
    let chunk = |choices: Value, usage: Option<Value>| -> Bytes {
        let mut c = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": conv.model,
            "service_tier": "default",
            "system_fingerprint": "fp_mock",
            "choices": choices
        });
        if conv.include_usage {
            c["usage"] = usage.unwrap_or(Value::Null);
        }
        c["obfuscation"] = Value::String(String::new());
        Bytes::from(format!("data: {}\n\n", compact(&c)))
    };
    let delta =
        |d: Value| json!([{"index": 0, "delta": d, "logprobs": null, "finish_reason": null}]);
    let mut events = Vec::new();
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            if reasoning.is_empty() {
                events.push(chunk(
                    delta(json!({"role": "assistant", "content": "", "refusal": null})),
                    None,
                ));
                for p in pieces {
                    events.push(chunk(delta(json!({"content": p})), None));
                }
            } else {
                events.push(chunk(
                    delta(json!({"role": "assistant", "content": null, "reasoning_content": ""})),
                    None,
                ));
                for r in reasoning {
                    events.push(chunk(
                        delta(json!({"content": null, "reasoning_content": r})),
                        None,
                    ));
                }
                for p in pieces {
                    events.push(chunk(
                        delta(json!({"content": p, "reasoning_content": null})),
                        None,
                    ));
                }
            }
        }
        Content::Tool { id, name, args, .. } => {
            events.push(chunk(
                delta(json!({
                    "role": "assistant",
                    "content": null,
                    "tool_calls": [{
                        "index": 0,
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": ""}
                    }],
                    "refusal": null
                })),
                None,
            ));
            for f in text::fragments(&compact(args), ARG_FRAGMENT) {
                events.push(chunk(
                    delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": f}}]})),
                    None,
                ));
            }
        }
    }
    if opts.finish {
        events.push(chunk(
            json!([{"index": 0, "delta": {}, "logprobs": null, "finish_reason": finish_reason(ans)}]),
            None,
        ));
        if conv.include_usage {
            events.push(chunk(json!([]), Some(usage(ans, 1))));
        }
    }
    if opts.terminator {
        events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    }
    events
}

/// `GET /v1/models` body.
pub fn models(created: u64) -> Bytes {
    let data: Vec<Value> = [
        "gpt-4o",
        "gpt-4o-mini",
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4.1-nano",
    ]
    .iter()
    .map(|m| json!({"id": m, "object": "model", "created": created, "owned_by": "switchyard-mock"}))
    .collect();
    pretty_nl(&json!({"object": "list", "data": data}))
}

/// Azure OpenAI `GET /openai/models?api-version=…`: the resource's models with their
/// capabilities and lifecycle (compact, as Azure answers).
pub fn azure_models(created: u64) -> Bytes {
    let data: Vec<Value> = ["gpt-4o", "gpt-4o-mini", "text-embedding-3-small"]
        .iter()
        .map(|m| {
            let embeddings = m.starts_with("text-embedding");
            json!({
                "status": "succeeded",
                "capabilities": {
                    "fine_tune": false,
                    "inference": true,
                    "completion": false,
                    "chat_completion": !embeddings,
                    "embeddings": embeddings
                },
                "lifecycle_status": "generally-available",
                "deprecation": {"inference": created + 365 * 86_400},
                "id": m,
                "created_at": created,
                "object": "model"
            })
        })
        .collect();
    Bytes::from(json!({"data": data, "object": "list"}).to_string())
}

/// An OpenAI-style error body (pretty, like the API's own).
pub fn error_body(message: &str, ty: &str, code: Option<&str>) -> Bytes {
    pretty_nl(&json!({"error": {"message": message, "type": ty, "param": null, "code": code}}))
}
