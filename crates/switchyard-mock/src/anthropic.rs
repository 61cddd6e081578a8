//! Anthropic Messages wire format.

use crate::answer::{Answer, Content, ARG_FRAGMENT};
use crate::conv::Conv;
use crate::json::compact;
use crate::render::{fixed, Ctx, Payload, Rendered, StreamOpts};
use crate::text;
use bytes::Bytes;
use serde_json::{json, Value};

const MIDSTREAM_SSE: &str = fixture!("anthropic/stream_error_overloaded_midstream.sse");
const SIGNATURE: &str = "mock_signature";

/// The recorded in-band error event (`event: error\ndata: {…}\n\n`).
pub fn midstream_error() -> Bytes {
    let start = MIDSTREAM_SSE
        .find("event: error\n")
        .expect("fixture has an error event");
    Bytes::from_static(&MIDSTREAM_SSE.as_bytes()[start..])
}

/// `input_tokens` excludes the cache: prompt = input + cache read + cache creation (all
/// cache writes are reported as 5-minute ephemeral ones).
fn usage(ans: &Answer, output_tokens: u64) -> Value {
    json!({
        "input_tokens": ans.uncached_prompt_tokens(),
        "cache_creation_input_tokens": ans.cache_write_tokens,
        "cache_read_input_tokens": ans.cached_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": ans.cache_write_tokens,
            "ephemeral_1h_input_tokens": 0
        },
        "output_tokens": output_tokens,
        "service_tier": "standard",
        "inference_geo": "not_available"
    })
}

fn stop_reason(ans: &Answer) -> &'static str {
    match ans.content {
        Content::Tool { .. } => "tool_use",
        Content::Text { .. } => "end_turn",
    }
}

/// Per-platform differences of the Anthropic Messages answer.
#[derive(Debug, Clone, Copy)]
pub struct Flavor {
    /// Message id prefix (`msg_mock_`, `msg_vrtx_mock_`, `msg_bdrk_mock_`).
    pub id_prefix: &'static str,
    /// `request-id` header prefix.
    pub request_id_prefix: &'static str,
    /// Send `ping` events in streams.
    pub ping: bool,
}

/// api.anthropic.com.
pub const FIRST_PARTY: Flavor = Flavor {
    id_prefix: "msg_mock_",
    request_id_prefix: "req_mock_",
    ping: true,
};

/// Claude on Vertex AI (`msg_vrtx_…`, `request-id: req_vrtx_…`).
pub const VERTEX: Flavor = Flavor {
    id_prefix: "msg_vrtx_mock_",
    request_id_prefix: "req_vrtx_mock_",
    ping: true,
};

/// Claude on Bedrock InvokeModel (`msg_bdrk_…`, no `ping` in the recorded streams).
pub const BEDROCK: Flavor = Flavor {
    id_prefix: "msg_bdrk_mock_",
    request_id_prefix: "",
    ping: false,
};

/// Render a message (shape of `anthropic/messages_tool_result.response.json`) or a stream
/// (shape of `anthropic/stream_text.sse`, unpadded).
pub fn render(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Rendered {
    render_flavor(conv, ans, ctx, opts, FIRST_PARTY)
}

/// [`render`] for a platform.
pub fn render_flavor(
    conv: &Conv,
    ans: &Answer,
    ctx: Ctx,
    opts: StreamOpts,
    flavor: Flavor,
) -> Rendered {
    let payload = if conv.stream {
        Payload::Events(
            events(conv, ans, ctx, opts, flavor)
                .iter()
                .map(event)
                .collect(),
        )
    } else {
        Payload::Full(Bytes::from(compact(&message(conv, ans, ctx, flavor))))
    };
    let mut headers = vec![(
        "request-id",
        format!("{}{}", flavor.request_id_prefix, ctx.seq),
    )];
    if conv.stream {
        headers.push(("cache-control", "no-cache".into()));
    }
    Rendered {
        content_type: if conv.stream {
            "text/event-stream; charset=utf-8"
        } else {
            "application/json"
        },
        headers,
        payload,
        bad_event: Bytes::from_static(b"event: content_block_delta\ndata: {not json\n\n"),
        midstream_error: fixed(midstream_error()),
    }
}

/// The whole message.
pub fn message(conv: &Conv, ans: &Answer, ctx: Ctx, flavor: Flavor) -> Value {
    let mut content = Vec::new();
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            if !reasoning.is_empty() {
                content.push(json!({"type": "thinking", "thinking": reasoning.concat(), "signature": SIGNATURE}));
            }
            if !pieces.is_empty() {
                content.push(json!({"type": "text", "text": pieces.concat()}));
            }
        }
        Content::Tool { id, name, args, .. } => content.push(json!({
            "type": "tool_use", "id": id, "name": name, "input": args, "caller": {"type": "direct"}
        })),
    }
    json!({
        "model": conv.model,
        "id": format!("{}{}", flavor.id_prefix, ctx.seq),
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": stop_reason(ans),
        "stop_sequence": null,
        "usage": usage(ans, ans.completion_tokens)
    })
}

/// One SSE event (`ping` as the API writes it).
fn event(v: &Value) -> Bytes {
    let ty = v.get("type").and_then(Value::as_str).unwrap_or("");
    if ty == "ping" {
        return Bytes::from_static(PING);
    }
    Bytes::from(format!("event: {ty}\ndata: {}\n\n", compact(v)))
}

const PING: &[u8] = b"event: ping\ndata: {\"type\": \"ping\"}\n\n";

/// The stream's events as JSON (`{"type": "ping"}` for a ping, when the flavor has them).
pub fn events(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts, flavor: Flavor) -> Vec<Value> {
    let ping = || json!({"type": "ping"});
    let mut events = vec![json!({
        "type": "message_start",
        "message": {
            "model": conv.model,
            "id": format!("{}{}", flavor.id_prefix, ctx.seq),
            "type": "message",
            "role": "assistant",
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage(ans, 1)
        }
    })];
    // (content_block_start payload, deltas)
    let mut blocks: Vec<(Value, Vec<Value>)> = Vec::new();
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            if !reasoning.is_empty() {
                let mut deltas: Vec<Value> = reasoning
                    .iter()
                    .map(|r| json!({"type": "thinking_delta", "thinking": r}))
                    .collect();
                deltas.push(json!({"type": "signature_delta", "signature": SIGNATURE}));
                blocks.push((
                    json!({"type": "thinking", "thinking": "", "signature": ""}),
                    deltas,
                ));
            }
            if !pieces.is_empty() {
                let deltas = pieces
                    .iter()
                    .map(|p| json!({"type": "text_delta", "text": p}))
                    .collect();
                blocks.push((json!({"type": "text", "text": ""}), deltas));
            }
        }
        Content::Tool { id, name, args, .. } => {
            let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
            for f in text::fragments(&compact(args), ARG_FRAGMENT) {
                deltas.push(json!({"type": "input_json_delta", "partial_json": f}));
            }
            blocks.push((
                json!({"type": "tool_use", "id": id, "name": name, "input": {}, "caller": {"type": "direct"}}),
                deltas,
            ));
        }
    }
    if blocks.is_empty() && flavor.ping {
        events.push(ping());
    }
    for (index, (start, deltas)) in blocks.into_iter().enumerate() {
        events.push(json!({"type": "content_block_start", "index": index, "content_block": start}));
        if index == 0 && flavor.ping {
            events.push(ping());
        }
        for d in deltas {
            events.push(json!({"type": "content_block_delta", "index": index, "delta": d}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    if opts.finish {
        events.push(json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(ans), "stop_sequence": null},
            "usage": {
                "input_tokens": ans.uncached_prompt_tokens(),
                "cache_creation_input_tokens": ans.cache_write_tokens,
                "cache_read_input_tokens": ans.cached_tokens,
                "output_tokens": ans.completion_tokens
            }
        }));
    }
    if opts.terminator {
        events.push(json!({"type": "message_stop"}));
    }
    events
}

/// An Anthropic-style error body.
pub fn error_body(message: &str, ty: &str) -> Bytes {
    Bytes::from(compact(
        &json!({"type": "error", "error": {"type": ty, "message": message}}),
    ))
}

const MODELS_LIST: &str = fixture!("anthropic/models_list.response.json");

/// `GET /v1/models`: `anthropic/models_list.response.json` (compact, as the API answers,
/// without the file's trailing newline).
pub fn models() -> Bytes {
    Bytes::from_static(MODELS_LIST.trim_end().as_bytes())
}
