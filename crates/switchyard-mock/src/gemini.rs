//! Gemini generateContent / streamGenerateContent?alt=sse wire format.

use crate::answer::{Answer, Content};
use crate::conv::Conv;
use crate::json::{gemini_compact, pretty_nl};
use crate::render::{fixed, Ctx, Payload, Rendered, StreamOpts};
use bytes::Bytes;
use serde_json::{json, Map, Value};

const MIDSTREAM_TXT: &str = fixture!("gemini/stream_error_midstream.txt");

/// The recorded mid-stream error: a bare pretty JSON error object after the frames
/// (no `data:` prefix), as in `gemini/stream_error_midstream.txt`.
pub fn midstream_error() -> Bytes {
    let start = MIDSTREAM_TXT
        .find("\n{")
        .map(|i| i + 1)
        .expect("fixture has an error object");
    Bytes::from_static(&MIDSTREAM_TXT.as_bytes()[start..])
}

fn safety_ratings() -> Value {
    let cats = [
        "HARM_CATEGORY_HATE_SPEECH",
        "HARM_CATEGORY_DANGEROUS_CONTENT",
        "HARM_CATEGORY_HARASSMENT",
        "HARM_CATEGORY_SEXUALLY_EXPLICIT",
    ];
    Value::Array(
        cats.iter()
            .map(|c| json!({"category": c, "probability": "NEGLIGIBLE"}))
            .collect(),
    )
}

/// `usageMetadata` in Gemini's key order (`gemini/generate_usage_cached_thoughts.response.json`):
/// counts, `cachedContentTokenCount` (only with a cache hit, a part of `promptTokenCount`),
/// the `*TokensDetails` lists (`cacheTokensDetails` likewise), `thoughtsTokenCount` last.
/// `candidates` is `None` in the partial usage of intermediate stream frames.
fn usage_metadata(ans: &Answer, candidates: Option<u64>) -> Value {
    let modality = |n: u64| json!([{"modality": "TEXT", "tokenCount": n}]);
    let mut u = Map::new();
    u.insert("promptTokenCount".into(), Value::from(ans.prompt_tokens));
    let mut total = ans.prompt_tokens;
    if let Some(c) = candidates {
        u.insert("candidatesTokenCount".into(), Value::from(c));
        total += ans.completion_tokens;
    }
    u.insert("totalTokenCount".into(), Value::from(total));
    if ans.cached_tokens > 0 {
        u.insert(
            "cachedContentTokenCount".into(),
            Value::from(ans.cached_tokens),
        );
    }
    u.insert("promptTokensDetails".into(), modality(ans.prompt_tokens));
    if ans.cached_tokens > 0 {
        u.insert("cacheTokensDetails".into(), modality(ans.cached_tokens));
    }
    if let Some(c) = candidates {
        u.insert("candidatesTokensDetails".into(), modality(c));
        if ans.reasoning_tokens > 0 {
            u.insert(
                "thoughtsTokenCount".into(),
                Value::from(ans.reasoning_tokens),
            );
        }
    }
    Value::Object(u)
}

fn usage_final(ans: &Answer) -> Value {
    usage_metadata(ans, Some(ans.completion_tokens - ans.reasoning_tokens))
}

fn usage_partial(ans: &Answer) -> Value {
    usage_metadata(ans, None)
}

fn parts(ans: &Answer) -> Vec<Value> {
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            let mut parts = Vec::new();
            if !reasoning.is_empty() {
                parts.push(json!({"text": reasoning.concat(), "thought": true}));
            }
            parts.push(json!({"text": pieces.concat()}));
            parts
        }
        Content::Tool { name, args, .. } => {
            vec![json!({"functionCall": {"name": name, "args": args}})]
        }
    }
}

/// Render a response (shape of `gemini/generate_text.response.json`) or an SSE stream
/// (shape of `gemini/stream_text.sse`: CRLF framing, no terminator).
pub fn render(conv: &Conv, ans: &Answer, _ctx: Ctx, opts: StreamOpts) -> Rendered {
    let payload = if conv.stream {
        Payload::Events(stream(conv, ans, opts))
    } else {
        Payload::Full(pretty_nl(&json!({
            "candidates": [{
                "content": {"parts": parts(ans), "role": "model"},
                "finishReason": "STOP",
                "safetyRatings": safety_ratings(),
                "avgLogprobs": -0.1
            }],
            "usageMetadata": usage_final(ans),
            "modelVersion": conv.model
        })))
    };
    Rendered {
        content_type: if conv.stream {
            "text/event-stream"
        } else {
            "application/json; charset=UTF-8"
        },
        headers: Vec::new(),
        payload,
        bad_event: Bytes::from_static(b"data: {not json\r\n\r\n"),
        midstream_error: fixed(midstream_error()),
    }
}

/// `usageMetadata` with Vertex's `trafficType` after `totalTokenCount`.
fn with_traffic(usage: Value) -> Value {
    let Value::Object(map) = usage else {
        return usage;
    };
    let mut out = Map::new();
    for (k, v) in map {
        let after = k == "totalTokenCount";
        out.insert(k, v);
        if after {
            out.insert("trafficType".into(), Value::String(TRAFFIC.into()));
        }
    }
    Value::Object(out)
}

const TRAFFIC: &str = "ON_DEMAND";

/// Gemini on Vertex AI: the Developer API answer plus Vertex's `createTime`, `responseId`
/// and `usageMetadata.trafficType` (`vertex/gemini_generate_text.response.json`), no
/// `safetyRatings`; stream frames as `vertex/gemini_stream_thought_summary.sse` (`role`
/// before `parts`, intermediate frames with usage `{"trafficType": "ON_DEMAND"}` only, the
/// full counts on the last).
pub fn render_vertex(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Rendered {
    let create_time = crate::time::rfc3339_micros(ctx.now);
    let response_id = format!("vrtx_mock_{}", ctx.seq);
    let payload = if conv.stream {
        let frames = stream_parts(ans);
        let n = frames.len();
        Payload::Events(
            frames
                .into_iter()
                .enumerate()
                .map(|(i, parts)| {
                    let last = i + 1 == n && opts.finish;
                    let mut cand = json!({"content": {"role": "model", "parts": parts}});
                    let usage = if last {
                        cand["finishReason"] = Value::String("STOP".into());
                        with_traffic(usage_final(ans))
                    } else {
                        json!({"trafficType": TRAFFIC})
                    };
                    let v = json!({
                        "candidates": [cand],
                        "usageMetadata": usage,
                        "modelVersion": conv.model,
                        "createTime": create_time,
                        "responseId": response_id
                    });
                    Bytes::from(format!("data: {}\r\n\r\n", gemini_compact(&v)))
                })
                .collect(),
        )
    } else {
        Payload::Full(pretty_nl(&json!({
            "candidates": [{
                "content": {"parts": parts(ans), "role": "model"},
                "finishReason": "STOP",
                "avgLogprobs": -0.1
            }],
            "usageMetadata": with_traffic(usage_final(ans)),
            "modelVersion": conv.model,
            "createTime": create_time,
            "responseId": response_id
        })))
    };
    Rendered {
        content_type: if conv.stream {
            "text/event-stream"
        } else {
            "application/json; charset=UTF-8"
        },
        headers: if conv.stream {
            vec![("content-disposition", "attachment".to_string())]
        } else {
            Vec::new()
        },
        payload,
        bad_event: Bytes::from_static(b"data: {not json\r\n\r\n"),
        midstream_error: fixed(midstream_error()),
    }
}

fn frame(parts: Vec<Value>, finish: bool, usage: Value, model: &str) -> Bytes {
    let mut cand = json!({"content": {"parts": parts, "role": "model"}});
    if finish {
        cand["finishReason"] = Value::String("STOP".into());
    }
    let v = json!({"candidates": [cand], "usageMetadata": usage, "modelVersion": model});
    Bytes::from(format!("data: {}\r\n\r\n", gemini_compact(&v)))
}

/// The parts of each stream frame.
fn stream_parts(ans: &Answer) -> Vec<Vec<Value>> {
    let mut frames: Vec<Vec<Value>> = Vec::new();
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            for r in reasoning {
                frames.push(vec![json!({"text": r, "thought": true})]);
            }
            for p in pieces {
                frames.push(vec![json!({"text": p})]);
            }
            if pieces.is_empty() {
                frames.push(vec![json!({"text": ""})]);
            }
        }
        Content::Tool { .. } => frames.push(parts(ans)),
    }
    frames
}

fn stream(conv: &Conv, ans: &Answer, opts: StreamOpts) -> Vec<Bytes> {
    let frames = stream_parts(ans);
    let n = frames.len();
    frames
        .into_iter()
        .enumerate()
        .map(|(i, parts)| {
            let last = i + 1 == n && opts.finish;
            let usage = if last {
                usage_final(ans)
            } else {
                usage_partial(ans)
            };
            frame(parts, last, usage, &conv.model)
        })
        .collect()
}

/// A Gemini-style error body (`google.rpc.Status`).
pub fn error_body(code: u16, message: &str, status: &str) -> Bytes {
    pretty_nl(&json!({"error": {"code": code, "message": message, "status": status}}))
}

/// `GET /v1beta/models`: `{"models": [Model…]}` with the fields of the API reference's
/// `Model` resource (name, version, displayName, description, token limits,
/// supportedGenerationMethods, sampling defaults), 2-space pretty like every Gemini body.
pub fn models() -> Bytes {
    let model = |id: &str, display: &str, version: &str| {
        json!({
            "name": format!("models/{id}"),
            "version": version,
            "displayName": display,
            "description": format!("{display} (switchyard mock)"),
            "inputTokenLimit": 1048576,
            "outputTokenLimit": 65536,
            "supportedGenerationMethods": ["generateContent", "countTokens", "createCachedContent", "batchGenerateContent"],
            "temperature": 1,
            "topP": 0.95,
            "topK": 64,
            "maxTemperature": 2,
            "thinking": true
        })
    };
    pretty_nl(&json!({"models": [
        model("gemini-2.5-flash", "Gemini 2.5 Flash", "001"),
        model("gemini-2.5-pro", "Gemini 2.5 Pro", "2.5"),
    ]}))
}
