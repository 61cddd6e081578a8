//! Amazon Bedrock Runtime: Converse / ConverseStream (Bedrock's own dialect), InvokeModel /
//! InvokeModelWithResponseStream with an Anthropic body, CountTokens, and Bedrock's errors.
//!
//! Shapes: `bedrock/converse_text.response.json`, `converse_tool_use_thinking.response.json`
//! (compact, keys alphabetical), `converse_stream_*.eventstream` (event-stream frames, each
//! payload with a `"p"` padding field), `invoke_anthropic.response*.json`,
//! `invoke_stream_anthropic.eventstream` (`chunk` frames wrapping base64 Anthropic events),
//! `count_tokens_*.json`, `error_*.http.json` and `stream_exception_*.eventstream`.

use crate::answer::{Answer, Content, ARG_FRAGMENT};
use crate::anthropic;
use crate::conv::{self, Choice, Conv};
use crate::eventstream::{self, padding, with_padding};
use crate::faults::{self, full, Body};
use crate::json::compact;
use crate::render::{fixed, Ctx, Payload, Rendered, StreamOpts};
use crate::text;
use bytes::Bytes;
use http::Response;
use serde_json::{json, Map, Value};
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// Namespace of Bedrock's own exceptions in `x-amzn-errortype`.
pub const BEDROCK_NS: &str = "http://internal.amazon.com/coral/com.amazon.bedrock/";
/// Namespace of the authentication layer's exceptions (SigV4).
pub const CORAL_NS: &str = "http://internal.amazon.com/coral/com.amazon.coral.service/";

const SIGNATURE: &str = "mock_signature";

/// The request id Bedrock returns in `x-amzn-requestid` (UUID-shaped, from `seq`).
pub fn request_id(seq: u64) -> String {
    format!("00000000-0000-4000-8000-{:012x}", seq & 0xffff_ffff_ffff)
}

/// An error the way Bedrock sends it: `{"message": …}` and the exception name only in
/// `x-amzn-errortype: <Name>:<namespace>`.
pub fn error_response(
    status: u16,
    exception: &str,
    namespace: &str,
    message: &str,
    seq: u64,
    extra: impl IntoIterator<Item = (String, String)>,
) -> Response<Body> {
    let body = compact(&json!({ "message": message }));
    let headers = [
        (
            "x-amzn-errortype".to_string(),
            format!("{exception}:{namespace}"),
        ),
        ("x-amzn-requestid".to_string(), request_id(seq)),
    ]
    .into_iter()
    .chain(extra);
    faults::response(status, Some("application/json"), headers, full(body))
}

/// The recorded envelope a bare `status` behavior serves on a Bedrock route.
pub fn status_fixture(status: u16) -> Option<&'static str> {
    Some(match status {
        400 => "bedrock/error_400_validation_input_too_long",
        403 => "bedrock/error_403_access_denied",
        404 => "bedrock/error_404_resource_not_found_eol",
        429 => "bedrock/error_429_throttling",
        503 => "bedrock/error_503_service_unavailable",
        _ => return None,
    })
}

/// Exception name and message for a status with no recorded envelope (service model).
pub fn status_exception(status: u16) -> (&'static str, &'static str) {
    match status {
        408 => (
            "ModelTimeoutException",
            "Model has timed out in processing the request. Try your request again.",
        ),
        424 => (
            "ModelErrorException",
            "The model returned an error. Try your request again.",
        ),
        s if s >= 500 => (
            "InternalServerException",
            "The server encountered an internal error while processing the request.",
        ),
        _ => (
            "ValidationException",
            "Malformed input request, please reformat your input and try again.",
        ),
    }
}

/// In-stream exceptions (`:exception-type`) with their payloads: the first four as in
/// `bedrock/stream_exception_*.eventstream`, the last two constructed from the service model.
pub const STREAM_EXCEPTIONS: &[(&str, &str)] = &[
    (
        "throttlingException",
        r#"{"message":"Too many tokens, please wait before trying again."}"#,
    ),
    (
        "serviceUnavailableException",
        r#"{"message":"Bedrock is unable to process your request."}"#,
    ),
    (
        "modelStreamErrorException",
        r#"{"message":"Model stream error.","originalStatusCode":500,"originalMessage":"Internal error"}"#,
    ),
    (
        "validationException",
        r#"{"message":"Input is too long for requested model."}"#,
    ),
    (
        "internalServerException",
        r#"{"message":"The server encountered an internal error while processing the request."}"#,
    ),
    (
        "modelTimeoutException",
        r#"{"message":"Model has timed out in processing the request. Try your request again."}"#,
    ),
];

/// The exception frame a mid-stream failure sends: `name` (default `throttlingException`),
/// its `message` replaced by `message` when given.
pub fn stream_exception(name: Option<&str>, message: Option<&str>) -> Bytes {
    let (ty, payload) = STREAM_EXCEPTIONS
        .iter()
        .find(|(n, _)| Some(*n) == name)
        .unwrap_or(&STREAM_EXCEPTIONS[0]);
    let payload = match message {
        Some(m) => crate::json::with_message(payload.as_bytes(), m),
        None => Bytes::from_static(payload.as_bytes()),
    };
    eventstream::exception(ty, &payload)
}

// === request readers ===

fn malformed(detail: &str) -> String {
    format!("Malformed input request: {detail}, please reformat your input and try again.")
}

fn not_null(at: &str) -> String {
    format!("1 validation error detected: Value null at '{at}' failed to satisfy constraint: Member must not be null")
}

const CONTENT_BLOCKS: &[&str] = &[
    "text",
    "image",
    "document",
    "video",
    "audio",
    "toolUse",
    "toolResult",
    "guardContent",
    "cachePoint",
    "reasoningContent",
    "citationsContent",
    "searchResult",
];
const SYSTEM_BLOCKS: &[&str] = &["text", "guardContent", "cachePoint"];
const TOOL_BLOCKS: &[&str] = &["toolSpec", "systemTool", "cachePoint"];

/// A union member: an object with exactly one key among `allowed`.
fn one_key<'a>(
    block: &'a Value,
    allowed: &[&str],
    at: &str,
) -> Result<(&'a str, &'a Value), String> {
    let Some(obj) = block.as_object() else {
        return Err(malformed(&format!("{at}: expected type: JSONObject")));
    };
    let mut it = obj.iter();
    let (Some((k, v)), None) = (it.next(), it.next()) else {
        return Err(malformed(&format!(
            "{at}: a union must have exactly one member set"
        )));
    };
    if !allowed.contains(&k.as_str()) {
        return Err(malformed(&format!(
            "{at}: extraneous key [{k}] is not permitted"
        )));
    }
    Ok((k.as_str(), v))
}

fn string_at<'a>(v: &'a Value, key: &str, at: &str) -> Result<&'a str, String> {
    v.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| not_null(&format!("{at}.{key}")))
}

/// Text of a `toolResult.content` list: `text` items, `json` items as compact JSON.
fn tool_result_text(content: &[Value]) -> String {
    content
        .iter()
        .filter_map(|c| {
            c.get("text")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| c.get("json").map(compact))
        })
        .collect::<Vec<_>>()
        .join("")
}

/// Tracks the prompt prefix before each `cachePoint`.
struct CachePrefix {
    hasher: DefaultHasher,
    last: Option<(usize, u64)>,
}

impl CachePrefix {
    fn new(model: &str) -> CachePrefix {
        let mut hasher = DefaultHasher::new();
        model.hash(&mut hasher);
        CachePrefix { hasher, last: None }
    }
    fn text(&mut self, t: &str) {
        t.hash(&mut self.hasher);
    }
    fn point(&mut self, chars: usize) {
        self.last = Some((chars, self.hasher.clone().finish()));
    }
}

/// Read (and validate, as Bedrock does) a Converse body into a [`Conv`]. `Err` is the
/// message of a 400 `ValidationException`.
pub fn converse(body: &Value, model: &str, stream: bool) -> Result<Conv, String> {
    if !body.is_object() {
        return Err(malformed("#: expected type: JSONObject"));
    }
    if body.get("model").is_some() {
        return Err(malformed("#: extraneous key [model] is not permitted"));
    }
    let mut c = Conv::new(model.to_string());
    c.stream = stream;
    let mut cache = CachePrefix::new(model);
    let mut has_points = false;
    // Tools (their definitions do not count as prompt text, but are part of the cached
    // prefix), then system, then messages: Bedrock's cache order.
    let tool_config = match body.get("toolConfig") {
        None | Some(Value::Null) => None,
        Some(tc @ Value::Object(_)) => Some(tc),
        Some(_) => return Err(malformed("#/toolConfig: expected type: JSONObject")),
    };
    if let Some(tc) = tool_config {
        let tools = tc
            .get("tools")
            .and_then(Value::as_array)
            .ok_or_else(|| not_null("toolConfig.tools"))?;
        for (i, t) in tools.iter().enumerate() {
            let at = format!("toolConfig.tools.{}.member", i + 1);
            match one_key(t, TOOL_BLOCKS, &at)? {
                ("toolSpec", spec) => {
                    let name = string_at(spec, "name", &format!("{at}.toolSpec"))?;
                    let schema = spec
                        .pointer("/inputSchema/json")
                        .ok_or_else(|| not_null(&format!("{at}.toolSpec.inputSchema")))?;
                    cache.text(&compact(t));
                    c.tools.push((name.to_string(), schema.clone()));
                }
                ("cachePoint", _) => {
                    has_points = true;
                    cache.point(c.prompt_chars);
                }
                _ => cache.text(&compact(t)),
            }
        }
        c.choice = match tc.get("toolChoice") {
            None | Some(Value::Null) => Choice::Auto,
            Some(choice) => {
                match one_key(choice, &["auto", "any", "tool"], "toolConfig.toolChoice")? {
                    ("tool", v) => Choice::Named(
                        string_at(v, "name", "toolConfig.toolChoice.tool")?.to_string(),
                    ),
                    _ => Choice::Auto,
                }
            }
        };
    }
    match body.get("system") {
        None | Some(Value::Null) => {}
        Some(Value::Array(blocks)) => {
            for (i, b) in blocks.iter().enumerate() {
                let at = format!("system.{}.member", i + 1);
                match one_key(b, SYSTEM_BLOCKS, &at)? {
                    ("text", t) => {
                        let t = t.as_str().ok_or_else(|| not_null(&format!("{at}.text")))?;
                        c.prompt_chars += t.chars().count();
                        cache.text(t);
                    }
                    ("cachePoint", _) => {
                        has_points = true;
                        cache.point(c.prompt_chars);
                    }
                    _ => {}
                }
            }
        }
        Some(_) => return Err(malformed("#/system: expected type: JSONArray")),
    }
    let msgs = match body.get("messages") {
        Some(Value::Array(m)) => m.as_slice(),
        Some(_) => return Err(malformed("#/messages: expected type: JSONArray")),
        None => return Err(not_null("messages")),
    };
    let mut roles = Vec::with_capacity(msgs.len());
    let mut tool_blocks = false;
    for (i, m) in msgs.iter().enumerate() {
        let at = format!("messages.{}.member", i + 1);
        let role = m
            .get("role")
            .and_then(Value::as_str)
            .ok_or_else(|| not_null(&format!("{at}.role")))?;
        if role != "user" && role != "assistant" {
            return Err(format!("1 validation error detected: Value '{role}' at '{at}.role' failed to satisfy constraint: Member must satisfy enum value set: [user, assistant]"));
        }
        let blocks = m
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| not_null(&format!("{at}.content")))?;
        let mut kinds = Vec::with_capacity(blocks.len());
        for (j, b) in blocks.iter().enumerate() {
            let bat = format!("{at}.content.{}.member", j + 1);
            let (k, v) = one_key(b, CONTENT_BLOCKS, &bat)?;
            match k {
                "text" if !v.is_string() => return Err(not_null(&format!("{bat}.text"))),
                "toolUse" => {
                    string_at(v, "toolUseId", &format!("{bat}.toolUse"))?;
                    string_at(v, "name", &format!("{bat}.toolUse"))?;
                    if v.get("input").is_none() {
                        return Err(not_null(&format!("{bat}.toolUse.input")));
                    }
                    tool_blocks = true;
                }
                "toolResult" => {
                    string_at(v, "toolUseId", &format!("{bat}.toolResult"))?;
                    if !v.get("content").is_some_and(Value::is_array) {
                        return Err(not_null(&format!("{bat}.toolResult.content")));
                    }
                    tool_blocks = true;
                }
                _ => {}
            }
            kinds.push((k, v));
        }
        roles.push(role);
        // The last message, an assistant turn without a tool call, is a prefill: not
        // counted, answered from where it stops.
        let is_prefill = i + 1 == msgs.len()
            && role == "assistant"
            && !kinds.iter().any(|(k, _)| *k == "toolUse");
        if is_prefill {
            c.prefill = Some(
                kinds
                    .iter()
                    .filter(|(k, _)| *k == "text")
                    .filter_map(|(_, v)| v.as_str())
                    .collect(),
            );
            continue;
        }
        let tool_turn = role == "user" && kinds.iter().any(|(k, _)| *k == "toolResult");
        for (k, v) in kinds {
            match k {
                "text" => {
                    let t = v.as_str().unwrap_or_default();
                    if role == "user" && !tool_turn {
                        c.user_text(t);
                    } else {
                        c.prompt_chars += t.chars().count();
                    }
                    cache.text(t);
                }
                "toolResult" => {
                    let t = tool_result_text(
                        v.get("content")
                            .and_then(Value::as_array)
                            .map(Vec::as_slice)
                            .unwrap_or_default(),
                    );
                    cache.text(&t);
                    c.tool_result(t);
                }
                "cachePoint" => {
                    has_points = true;
                    cache.point(c.prompt_chars);
                }
                _ => cache.text(&compact(v)),
            }
        }
    }
    if roles.first() != Some(&"user") {
        return Err("A conversation must start with a user message. Try again with a conversation that starts with a user message.".into());
    }
    if roles.windows(2).any(|w| w[0] == w[1]) {
        return Err("A conversation must alternate between user and assistant roles. Make sure the conversation alternates between user and assistant roles and try again.".into());
    }
    if tool_blocks && tool_config.is_none() {
        return Err(
            "The toolConfig field must be defined when using toolUse and toolResult content blocks."
                .into(),
        );
    }
    if body
        .get("inferenceConfig")
        .is_some_and(|v| !v.is_object() && !v.is_null())
    {
        return Err(malformed("#/inferenceConfig: expected type: JSONObject"));
    }
    if has_points {
        c.cache_prefix = cache.last;
    }
    Ok(c)
}

/// The Anthropic version InvokeModel requires.
pub const ANTHROPIC_VERSION: &str = "bedrock-2023-05-31";

/// Read (and validate) an InvokeModel body with the Anthropic Messages shape: no `model`
/// (the URL has it), no `stream` (the URL decides), `anthropic_version`
/// `bedrock-2023-05-31`, `max_tokens` and `messages` required.
pub fn invoke(body: &Value, model: &str, stream: bool) -> Result<Conv, String> {
    if !body.is_object() {
        return Err(malformed("#: expected type: JSONObject"));
    }
    for key in ["model", "stream"] {
        if body.get(key).is_some() {
            return Err(malformed(&format!(
                "#: extraneous key [{key}] is not permitted"
            )));
        }
    }
    match body.get("anthropic_version") {
        None => return Err(malformed("#: required key [anthropic_version] not found")),
        Some(Value::String(v)) if v == ANTHROPIC_VERSION => {}
        Some(v) => {
            return Err(malformed(&format!(
                "#/anthropic_version: {} is not a valid enum value",
                v.as_str().map_or_else(|| v.to_string(), str::to_string)
            )))
        }
    }
    for key in ["max_tokens", "messages"] {
        if body.get(key).is_none() {
            return Err(malformed(&format!("#: required key [{key}] not found")));
        }
    }
    let mut c = conv::anthropic(body);
    c.model = model.to_string();
    c.stream = stream;
    Ok(c)
}

/// `POST /model/{id}/count-tokens`: `{"input": {"converse": {…}}}` or
/// `{"input": {"invokeModel": {"body": "<base64>"}}}` → `{"inputTokens":N}`, N the prompt
/// tokens a generation with that body reports (`inputTokens` + cache read + cache write).
pub fn count_tokens(body: &Value, model: &str) -> Result<Bytes, String> {
    let input = body.get("input").ok_or_else(|| not_null("input"))?;
    let chars = if let Some(conv_body) = input.get("converse") {
        converse(conv_body, model, false)?.prompt_chars
    } else if let Some(inv) = input.get("invokeModel") {
        let b64 = inv
            .get("body")
            .and_then(Value::as_str)
            .ok_or_else(|| not_null("input.invokeModel.body"))?;
        let raw = aws_smithy_types::base64::decode(b64)
            .map_err(|_| malformed("#/input/invokeModel/body: invalid base64"))?;
        let v: Value = serde_json::from_slice(&raw)
            .map_err(|_| malformed("#/input/invokeModel/body: invalid JSON"))?;
        if !v.is_object() {
            return Err(malformed("#: expected type: JSONObject"));
        }
        conv::anthropic(&v).prompt_chars
    } else {
        return Err(malformed(
            "#/input: exactly one of [converse, invokeModel] is required",
        ));
    };
    let n = text::prompt_tokens(chars);
    Ok(Bytes::from(compact(&json!({ "inputTokens": n }))))
}

// === Converse answers ===

fn stop_reason(ans: &Answer) -> &'static str {
    match ans.content {
        Content::Tool { .. } => "tool_use",
        Content::Text { .. } => "end_turn",
    }
}

/// Converse `usage`, keys alphabetical. `inputTokens` excludes the cache; the cache fields
/// (new names and the legacy `…Count` duplicates) appear when the request has `cachePoint`
/// blocks or the behavior reports cache tokens.
fn usage(conv: &Conv, ans: &Answer) -> Value {
    let mut u = Map::new();
    if conv.cache_prefix.is_some() || ans.cached_tokens > 0 || ans.cache_write_tokens > 0 {
        u.insert("cacheReadInputTokenCount".into(), ans.cached_tokens.into());
        u.insert("cacheReadInputTokens".into(), ans.cached_tokens.into());
        u.insert(
            "cacheWriteInputTokenCount".into(),
            ans.cache_write_tokens.into(),
        );
        u.insert(
            "cacheWriteInputTokens".into(),
            ans.cache_write_tokens.into(),
        );
    }
    u.insert("inputTokens".into(), ans.uncached_prompt_tokens().into());
    u.insert("outputTokens".into(), ans.completion_tokens.into());
    u.insert(
        "totalTokens".into(),
        (ans.prompt_tokens + ans.completion_tokens).into(),
    );
    Value::Object(u)
}

fn content_blocks(ans: &Answer) -> Vec<Value> {
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            let mut out = Vec::new();
            if !reasoning.is_empty() {
                out.push(json!({"reasoningContent": {"reasoningText": {
                    "signature": SIGNATURE, "text": reasoning.concat()
                }}}));
            }
            if !pieces.is_empty() {
                out.push(json!({"text": pieces.concat()}));
            }
            out
        }
        Content::Tool { id, name, args, .. } => {
            vec![json!({"toolUse": {"input": args, "name": name, "toolUseId": id}})]
        }
    }
}

fn push_event(frames: &mut Vec<Bytes>, seq: u64, event_type: &str, payload: Value) {
    let p = padding(seq, frames.len());
    frames.push(eventstream::event(
        event_type,
        with_padding(&payload, p).as_bytes(),
    ));
}

fn converse_frames(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Vec<Bytes> {
    let seq = ctx.seq;
    let mut f = Vec::new();
    push_event(&mut f, seq, "messageStart", json!({"role": "assistant"}));
    let delta = |i: usize, d: Value| json!({"contentBlockIndex": i, "delta": d});
    let stop = |i: usize| json!({"contentBlockIndex": i});
    let mut index = 0;
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            if !reasoning.is_empty() {
                for r in reasoning {
                    push_event(
                        &mut f,
                        seq,
                        "contentBlockDelta",
                        delta(index, json!({"reasoningContent": {"text": r}})),
                    );
                }
                push_event(
                    &mut f,
                    seq,
                    "contentBlockDelta",
                    delta(index, json!({"reasoningContent": {"signature": SIGNATURE}})),
                );
                push_event(&mut f, seq, "contentBlockStop", stop(index));
                index += 1;
            }
            if !pieces.is_empty() {
                for p in pieces {
                    push_event(
                        &mut f,
                        seq,
                        "contentBlockDelta",
                        delta(index, json!({"text": p})),
                    );
                }
                push_event(&mut f, seq, "contentBlockStop", stop(index));
            }
        }
        Content::Tool { id, name, args, .. } => {
            push_event(
                &mut f,
                seq,
                "contentBlockStart",
                json!({"contentBlockIndex": index, "start": {"toolUse": {"name": name, "toolUseId": id}}}),
            );
            for frag in text::fragments(&compact(args), ARG_FRAGMENT) {
                push_event(
                    &mut f,
                    seq,
                    "contentBlockDelta",
                    delta(index, json!({"toolUse": {"input": frag}})),
                );
            }
            push_event(&mut f, seq, "contentBlockStop", stop(index));
        }
    }
    if opts.finish {
        push_event(
            &mut f,
            seq,
            "messageStop",
            json!({"stopReason": stop_reason(ans)}),
        );
    }
    if opts.finish && opts.terminator {
        push_event(
            &mut f,
            seq,
            "metadata",
            json!({"metrics": {"latencyMs": ctx.latency_ms}, "usage": usage(conv, ans)}),
        );
    }
    f
}

/// Converse (`bedrock/converse_text.response.json`) or ConverseStream frames
/// (`bedrock/converse_stream_*.eventstream`).
pub fn render_converse(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Rendered {
    let headers = vec![("x-amzn-requestid", request_id(ctx.seq))];
    if conv.stream {
        return Rendered {
            content_type: eventstream::CONTENT_TYPE,
            headers,
            payload: Payload::Events(converse_frames(conv, ans, ctx, opts)),
            bad_event: eventstream::event("contentBlockDelta", b"{not json"),
            midstream_error: fixed(stream_exception(None, None)),
        };
    }
    let body = json!({
        "metrics": {"latencyMs": ctx.latency_ms},
        "output": {"message": {"content": content_blocks(ans), "role": "assistant"}},
        "stopReason": stop_reason(ans),
        "usage": usage(conv, ans)
    });
    Rendered::full("application/json", headers, Bytes::from(compact(&body)))
}

// === InvokeModel answers ===

/// InvokeModel (`bedrock/invoke_anthropic.response*.json`: the Anthropic message, id
/// `msg_bdrk_…`, token counts repeated in `x-amzn-bedrock-*` headers) or
/// InvokeModelWithResponseStream (`bedrock/invoke_stream_anthropic.eventstream`: one `chunk`
/// frame per Anthropic event, `{"bytes":"<base64 event JSON>","p":"…"}`, no `ping`, and
/// `amazon-bedrock-invocationMetrics` on `message_stop`).
pub fn render_invoke(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Rendered {
    let mut headers = vec![("x-amzn-requestid", request_id(ctx.seq))];
    if conv.stream {
        headers.push(("x-amzn-bedrock-content-type", "application/json".into()));
        let events = anthropic::events(conv, ans, ctx, opts, anthropic::BEDROCK);
        let frames = events
            .into_iter()
            .enumerate()
            .map(|(i, mut ev)| {
                if ev.get("type").and_then(Value::as_str) == Some("message_stop") {
                    if let Value::Object(m) = &mut ev {
                        m.insert(
                            "amazon-bedrock-invocationMetrics".into(),
                            json!({
                                "inputTokenCount": ans.uncached_prompt_tokens(),
                                "outputTokenCount": ans.completion_tokens,
                                "invocationLatency": ctx.latency_ms,
                                "firstByteLatency": ctx.latency_ms
                            }),
                        );
                    }
                }
                let bytes = aws_smithy_types::base64::encode(compact(&ev));
                let payload = with_padding(&json!({ "bytes": bytes }), padding(ctx.seq, i));
                eventstream::event("chunk", payload.as_bytes())
            })
            .collect();
        return Rendered {
            content_type: eventstream::CONTENT_TYPE,
            headers,
            payload: Payload::Events(frames),
            bad_event: eventstream::event("chunk", b"{not json"),
            midstream_error: fixed(stream_exception(None, None)),
        };
    }
    headers.extend([
        (
            "x-amzn-bedrock-cache-read-input-token-count",
            ans.cached_tokens.to_string(),
        ),
        (
            "x-amzn-bedrock-cache-write-input-token-count",
            ans.cache_write_tokens.to_string(),
        ),
        (
            "x-amzn-bedrock-input-token-count",
            ans.uncached_prompt_tokens().to_string(),
        ),
        (
            "x-amzn-bedrock-invocation-latency",
            ctx.latency_ms.to_string(),
        ),
        (
            "x-amzn-bedrock-output-token-count",
            ans.completion_tokens.to_string(),
        ),
    ]);
    let body = compact(&anthropic::message(conv, ans, ctx, anthropic::BEDROCK));
    Rendered::full("application/json", headers, Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_smithy_eventstream::frame::read_message_from;

    macro_rules! recorded {
        ($name:literal) => {
            include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../fixtures/providers/bedrock/",
                $name
            ))
            .as_slice()
        };
    }

    #[test]
    fn exception_frames_are_the_recorded_bytes() {
        for (name, rec) in [
            (
                "throttlingException",
                recorded!("stream_exception_throttlingException.eventstream"),
            ),
            (
                "serviceUnavailableException",
                recorded!("stream_exception_serviceUnavailableException.eventstream"),
            ),
            (
                "modelStreamErrorException",
                recorded!("stream_exception_modelStreamErrorException.eventstream"),
            ),
            (
                "validationException",
                recorded!("stream_exception_validationException.eventstream"),
            ),
        ] {
            assert_eq!(&stream_exception(Some(name), None)[..], rec, "{name}");
        }
        assert_eq!(
            &stream_exception(None, None)[..],
            recorded!("stream_exception_throttlingException.eventstream")
        );
        // A replaced message is inside the frame: lengths and CRCs cover it.
        let mut b = &stream_exception(Some("validationException"), Some("too \"long\""))[..];
        let m = read_message_from(&mut b).unwrap();
        assert_eq!(&m.payload()[..], br#"{"message":"too \"long\""}"#);
        assert!(b.is_empty());
    }

    /// Every recorded ConverseStream frame, rebuilt from its payload (without `p`) and its
    /// padding the way the mock writes frames, is byte-identical to the recording.
    #[test]
    fn recorded_frames_rebuild_byte_for_byte() {
        for rec in [
            recorded!("converse_stream_text.eventstream"),
            recorded!("converse_stream_tool_use.eventstream"),
        ] {
            let mut buf = rec;
            let mut n = 0;
            while !buf.is_empty() {
                let start = rec.len() - buf.len();
                let m = read_message_from(&mut buf).unwrap();
                let end = rec.len() - buf.len();
                let ty = m.headers()[0]
                    .value()
                    .as_string()
                    .unwrap()
                    .as_str()
                    .to_string();
                let mut v: Value = serde_json::from_slice(m.payload()).unwrap();
                let p = v["p"].as_str().unwrap().to_string();
                v.as_object_mut().unwrap().remove("p");
                let ours = eventstream::event(&ty, with_padding(&v, &p).as_bytes());
                assert_eq!(&ours[..], &rec[start..end], "frame {n} ({ty})");
                n += 1;
            }
            assert!(n > 5);
        }
    }

    /// Odd bodies are refused or answered, never a panic.
    #[test]
    fn odd_bodies() {
        for body in [
            json!(null),
            json!("x"),
            json!({"messages": [1]}),
            json!({"messages": [{"role": 1}]}),
            json!({"messages": [{"role": "user", "content": [[]]}]}),
            json!({"messages": [{"role": "user", "content": [{"text": 5}]}]}),
            json!({"messages": [{"role": "user", "content": [{"toolUse": 5}]}], "toolConfig": {"tools": []}}),
            json!({"messages": [{"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [1, {"json": null}]}}]}], "toolConfig": {"tools": []}}),
            json!({"system": [{"text": 5}], "messages": []}),
            json!({"system": {}, "messages": []}),
            json!({"toolConfig": {"tools": [{"toolSpec": {"name": "a"}}]}, "messages": []}),
            json!({"toolConfig": {"tools": [], "toolChoice": {"tool": 1}}, "messages": []}),
            json!({"toolConfig": 3, "messages": []}),
            json!({"messages": [{"role": "user", "content": [{"cachePoint": 1}]}], "inferenceConfig": 2}),
        ] {
            let _ = converse(&body, "m", true);
            let _ = invoke(&body, "m", true);
            let _ = count_tokens(&json!({"input": {"converse": body.clone()}}), "m");
            let _ = count_tokens(&body, "m");
        }
        let ok = json!({"messages": [{"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": [1, {"json": null}, {"text": "a"}]}}]}], "toolConfig": {"tools": []}});
        assert_eq!(
            converse(&ok, "m", false).unwrap().tool_results,
            Some(vec!["nulla".to_string()])
        );
    }

    #[test]
    fn converse_validation() {
        let ok = json!({"messages": [{"role": "user", "content": [{"text": "Hi"}]}]});
        assert!(converse(&ok, "m", false).is_ok());
        for (body, needle) in [
            (
                json!({"model": "x", "messages": []}),
                "extraneous key [model]",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"text": "a", "image": {}}]}]}),
                "exactly one member",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"bogus": 1}]}]}),
                "extraneous key [bogus]",
            ),
            (
                json!({"messages": [{"role": "user", "content": "Hi"}]}),
                "messages.1.member.content",
            ),
            (
                json!({"messages": [{"role": "system", "content": []}]}),
                "enum value set",
            ),
            (
                json!({"messages": [{"role": "assistant", "content": [{"text": "a"}]}]}),
                "must start with a user message",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"text": "a"}]}, {"role": "user", "content": [{"text": "b"}]}]}),
                "must alternate",
            ),
            (
                json!({"messages": [{"role": "user", "content": [{"toolResult": {"toolUseId": "t", "content": []}}]}]}),
                "toolConfig field must be defined",
            ),
            (json!({}), "Value null at 'messages'"),
            (json!([1]), "expected type: JSONObject"),
        ] {
            let err = converse(&body, "m", false).unwrap_err();
            assert!(err.contains(needle), "{body}: {err}");
        }
    }
}
