//! Gemini generateContent / streamGenerateContent?alt=sse wire format.

use crate::answer::{Answer, Content};
use crate::conv::Conv;
use crate::json::{gemini_compact, pretty_nl};
use crate::render::{fixed, Ctx, Payload, Rendered, StreamOpts};
use bytes::Bytes;
use serde_json::{json, Value};

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

fn usage_final(ans: &Answer) -> Value {
    let candidates = ans.completion_tokens - ans.reasoning_tokens;
    let mut u = json!({
        "promptTokenCount": ans.prompt_tokens,
        "candidatesTokenCount": candidates,
        "totalTokenCount": ans.prompt_tokens + ans.completion_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": ans.prompt_tokens}],
        "candidatesTokensDetails": [{"modality": "TEXT", "tokenCount": candidates}]
    });
    if ans.reasoning_tokens > 0 {
        u["thoughtsTokenCount"] = Value::from(ans.reasoning_tokens);
    }
    u
}

fn usage_partial(ans: &Answer) -> Value {
    json!({
        "promptTokenCount": ans.prompt_tokens,
        "totalTokenCount": ans.prompt_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": ans.prompt_tokens}]
    })
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

fn frame(parts: Vec<Value>, finish: bool, usage: Value, model: &str) -> Bytes {
    let mut cand = json!({"content": {"parts": parts, "role": "model"}});
    if finish {
        cand["finishReason"] = Value::String("STOP".into());
    }
    let v = json!({"candidates": [cand], "usageMetadata": usage, "modelVersion": model});
    Bytes::from(format!("data: {}\r\n\r\n", gemini_compact(&v)))
}

fn stream(conv: &Conv, ans: &Answer, opts: StreamOpts) -> Vec<Bytes> {
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
