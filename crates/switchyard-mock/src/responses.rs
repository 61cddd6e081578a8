//! OpenAI Responses API wire format (`POST /v1/responses`).
//!
//! Its own module because nothing of Chat Completions carries over: the output is a list of
//! typed items (`reasoning`, `message`, `function_call`, `custom_tool_call`), the stream is
//! `event: X\ndata: {…}\n\n` with a `sequence_number` on every event and ends with the
//! terminal `response.completed` (no `[DONE]`), and every Response object echoes the request
//! parameters. Shapes:
//!
//! * non-stream: `openai-responses/responses_text.response.json` (2025 field set and key
//!   order), 2-space pretty, non-ASCII as `\uXXXX`, no trailing newline;
//! * stream: `openai-responses/stream_text.sse` (2026: the Response adds `completed_at`,
//!   `frequency_penalty`, `presence_penalty`, `prompt_cache_retention`; in every event `type`
//!   comes first and the other keys are alphabetical); function calls as in
//!   `stream_function_call.sse`, reasoning summaries as in `stream_reasoning_summary.sse`;
//! * in-band error: `event: error` + `event: response.failed` with the payloads of
//!   `stream_error_failed.sse`, numbered on from the events already sent.

use crate::answer::{call_text, Answer, Content, ARG_FRAGMENT};
use crate::conv::Conv;
use crate::json::{compact, pretty_ascii};
use crate::render::{Ctx, Midstream, Payload, Rendered, StreamOpts};
use crate::text;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::sync::OnceLock;

const FAILED_SSE: &str = fixture!("openai-responses/stream_error_failed.sse");
const ENCRYPTED: &str = "gAAAAABmock_encrypted_reasoning_content==";

/// The `data:` payload of the first event of type `ty` in `stream_error_failed.sse`.
fn failed_fixture(ty: &str) -> Value {
    FAILED_SSE
        .split("\n\n")
        .find(|ev| ev.starts_with(&format!("event: {ty}\n")))
        .and_then(|ev| ev.lines().find_map(|l| l.strip_prefix("data: ")))
        .and_then(|d| serde_json::from_str(d).ok())
        .expect("stream_error_failed.sse has the event")
}

/// (`error` event's nested error object, `response.failed`'s `response.error`).
fn failed_errors() -> &'static (Value, Value) {
    static ERRORS: OnceLock<(Value, Value)> = OnceLock::new();
    ERRORS.get_or_init(|| {
        (
            failed_fixture("error")["error"].clone(),
            failed_fixture("response.failed")["response"]["error"].clone(),
        )
    })
}

/// Ids of one response's objects.
struct Ids {
    resp: String,
    reasoning: String,
    message: String,
    call: String,
}

impl Ids {
    fn new(seq: u64) -> Ids {
        Ids {
            resp: format!("resp_mock_{seq}"),
            reasoning: format!("rs_mock_{seq}"),
            message: format!("msg_mock_{seq}"),
            call: format!("fc_mock_{seq}"),
        }
    }
}

fn usage(ans: &Answer) -> Value {
    json!({
        "input_tokens": ans.prompt_tokens,
        "input_tokens_details": {"cached_tokens": ans.cached_tokens},
        "output_tokens": ans.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": ans.reasoning_tokens},
        "total_tokens": ans.prompt_tokens + ans.completion_tokens
    })
}

/// What a Response object needs besides the request echo.
struct State<'a> {
    status: &'a str,
    error: Value,
    output: Vec<Value>,
    usage: Value,
    /// `service_tier` is resolved only in the terminal object.
    terminal: bool,
}

/// A Response object. `stream` selects the 2026 field set of `stream_text.sse`, otherwise
/// the 2025 one of `responses_text.response.json`.
fn response(conv: &Conv, ctx: Ctx, ids: &Ids, st: State, stream: bool) -> Value {
    let empty = Value::Object(Map::new());
    let e = conv.echo.as_deref().unwrap_or(&empty);
    let echo = |k: &str| e.get(k).cloned().unwrap_or(Value::Null);
    let mut m = Map::new();
    let mut put = |k: &str, v: Value| {
        m.insert(k.to_string(), v);
    };
    put("id", Value::String(ids.resp.clone()));
    put("object", Value::String("response".into()));
    put("created_at", Value::from(ctx.created));
    put("status", Value::String(st.status.into()));
    put("background", Value::Bool(false));
    if stream {
        let done = (st.status == "completed").then_some(ctx.created);
        put("completed_at", done.map_or(Value::Null, Value::from));
    }
    put("error", st.error);
    if stream {
        put("frequency_penalty", echo("frequency_penalty"));
    }
    put("incomplete_details", Value::Null);
    for k in ["instructions", "max_output_tokens", "max_tool_calls"] {
        put(k, echo(k));
    }
    put("model", Value::String(conv.model.clone()));
    put("output", Value::Array(st.output));
    put("parallel_tool_calls", echo("parallel_tool_calls"));
    if stream {
        put("presence_penalty", echo("presence_penalty"));
    }
    put("previous_response_id", echo("previous_response_id"));
    put("prompt_cache_key", echo("prompt_cache_key"));
    if stream {
        put("prompt_cache_retention", echo("prompt_cache_retention"));
    }
    put("reasoning", echo("reasoning"));
    put("safety_identifier", echo("safety_identifier"));
    let tier = match echo("service_tier") {
        Value::String(t) if st.terminal && t == "auto" => Value::String("default".into()),
        other => other,
    };
    put("service_tier", tier);
    for k in [
        "store",
        "temperature",
        "text",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "truncation",
    ] {
        put(k, echo(k));
    }
    put("usage", st.usage);
    put("user", echo("user"));
    put("metadata", echo("metadata"));
    Value::Object(m)
}

fn encrypted(conv: &Conv) -> bool {
    conv.echo
        .as_deref()
        .and_then(|e| e.get("include_encrypted"))
        .and_then(Value::as_bool)
        == Some(true)
}

fn reasoning_item(conv: &Conv, ids: &Ids, summary: Option<&str>) -> Value {
    let mut item = json!({"id": ids.reasoning, "type": "reasoning"});
    if encrypted(conv) {
        item["encrypted_content"] = Value::String(ENCRYPTED.into());
    }
    item["summary"] = match summary {
        Some(t) => json!([{"type": "summary_text", "text": t}]),
        None => json!([]),
    };
    item
}

fn text_part(text: &str) -> Value {
    json!({"type": "output_text", "annotations": [], "logprobs": [], "text": text})
}

fn message_item(ids: &Ids, status: &str, content: Vec<Value>) -> Value {
    json!({"id": ids.message, "type": "message", "status": status, "content": content, "role": "assistant"})
}

fn call_item(ids: &Ids, status: &str, id: &str, name: &str, args: &str, custom: bool) -> Value {
    if custom {
        json!({"id": ids.call.replacen("fc_", "ctc_", 1), "type": "custom_tool_call", "status": status,
            "call_id": id, "input": args, "name": name})
    } else {
        json!({"id": ids.call, "type": "function_call", "status": status,
            "arguments": args, "call_id": id, "name": name})
    }
}

/// The completed output items.
fn output(conv: &Conv, ans: &Answer, ids: &Ids) -> Vec<Value> {
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            let mut out = Vec::new();
            if !reasoning.is_empty() {
                out.push(reasoning_item(conv, ids, Some(&reasoning.concat())));
            }
            out.push(message_item(
                ids,
                "completed",
                vec![text_part(&pieces.concat())],
            ));
            out
        }
        Content::Tool {
            id,
            name,
            args,
            custom,
        } => vec![call_item(
            ids,
            "completed",
            id,
            name,
            &call_text(args, *custom),
            *custom,
        )],
    }
}

/// Render a Response body or an SSE stream (see the module docs for the shapes).
pub fn render(conv: &Conv, ans: &Answer, ctx: Ctx, opts: StreamOpts) -> Rendered {
    let ids = Ids::new(ctx.seq);
    let payload = if conv.stream {
        Payload::Events(stream(conv, ans, ctx, &ids, opts))
    } else {
        let st = State {
            status: "completed",
            error: Value::Null,
            output: output(conv, ans, &ids),
            usage: usage(ans),
            terminal: true,
        };
        Payload::Full(pretty_ascii(&response(conv, ctx, &ids, st, false)))
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
        bad_event: Bytes::from_static(b"event: response.output_text.delta\ndata: {not json\n\n"),
        midstream_error: if conv.stream {
            midstream(conv.clone(), ctx, ids)
        } else {
            crate::render::fixed(Bytes::new())
        },
    }
}

/// One event: `type` first, the other keys alphabetical (2026 order), `sequence_number`.
fn event(ty: &str, fields: Vec<(&str, Value)>, seq: usize) -> Bytes {
    let mut fields = fields;
    fields.push(("sequence_number", Value::from(seq)));
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let mut m = Map::new();
    m.insert("type".into(), Value::String(ty.into()));
    for (k, v) in fields {
        m.insert(k.into(), v);
    }
    Bytes::from(format!(
        "event: {ty}\ndata: {}\n\n",
        compact(&Value::Object(m))
    ))
}

/// Stream events under construction, numbered as they are pushed.
struct Events(Vec<Bytes>);

impl Events {
    fn push(&mut self, ty: &str, fields: Vec<(&str, Value)>) {
        let seq = self.0.len();
        self.0.push(event(ty, fields, seq));
    }
}

/// The `obfuscation` padding of delta events (random on the wire; here a deterministic
/// alphanumeric string that pads delta + obfuscation to 16 characters, at least 1).
fn obfuscation(delta: &str, n: usize) -> Value {
    const ALPHA: &[u8] = b"mK3xQ9vLp2Rt7ZbW";
    let len = 16usize.saturating_sub(delta.chars().count()).max(1);
    Value::String(
        (0..len)
            .map(|i| ALPHA[(i + n) % ALPHA.len()] as char)
            .collect(),
    )
}

fn stream(conv: &Conv, ans: &Answer, ctx: Ctx, ids: &Ids, opts: StreamOpts) -> Vec<Bytes> {
    let in_progress = || {
        let st = State {
            status: "in_progress",
            error: Value::Null,
            output: Vec::new(),
            usage: Value::Null,
            terminal: false,
        };
        response(conv, ctx, ids, st, true)
    };
    let mut ev = Events(Vec::new());
    ev.push("response.created", vec![("response", in_progress())]);
    ev.push("response.in_progress", vec![("response", in_progress())]);
    let mut index = 0usize;
    match &ans.content {
        Content::Text { reasoning, pieces } => {
            if !reasoning.is_empty() {
                reasoning_events(&mut ev, conv, ids, index, reasoning);
                index += 1;
            }
            let oi = Value::from(index);
            let item_id = Value::String(ids.message.clone());
            ev.push(
                "response.output_item.added",
                vec![
                    ("item", message_item(ids, "in_progress", Vec::new())),
                    ("output_index", oi.clone()),
                ],
            );
            let part_fields = |part: Value| {
                vec![
                    ("content_index", Value::from(0)),
                    ("item_id", item_id.clone()),
                    ("output_index", oi.clone()),
                    ("part", part),
                ]
            };
            ev.push("response.content_part.added", part_fields(text_part("")));
            for (n, p) in pieces.iter().enumerate() {
                ev.push(
                    "response.output_text.delta",
                    vec![
                        ("content_index", Value::from(0)),
                        ("delta", Value::String(p.clone())),
                        ("item_id", item_id.clone()),
                        ("logprobs", json!([])),
                        ("obfuscation", obfuscation(p, n)),
                        ("output_index", oi.clone()),
                    ],
                );
            }
            let full = pieces.concat();
            ev.push(
                "response.output_text.done",
                vec![
                    ("content_index", Value::from(0)),
                    ("item_id", item_id.clone()),
                    ("logprobs", json!([])),
                    ("output_index", oi.clone()),
                    ("text", Value::String(full.clone())),
                ],
            );
            ev.push("response.content_part.done", part_fields(text_part(&full)));
            ev.push(
                "response.output_item.done",
                vec![
                    (
                        "item",
                        message_item(ids, "completed", vec![text_part(&full)]),
                    ),
                    ("output_index", oi),
                ],
            );
        }
        Content::Tool {
            id,
            name,
            args,
            custom,
        } => {
            let oi = Value::from(index);
            let item_id = if *custom {
                ids.call.replacen("fc_", "ctc_", 1)
            } else {
                ids.call.clone()
            };
            let item_id = Value::String(item_id);
            let all = call_text(args, *custom);
            ev.push(
                "response.output_item.added",
                vec![
                    ("item", call_item(ids, "in_progress", id, name, "", *custom)),
                    ("output_index", oi.clone()),
                ],
            );
            let (delta_ty, done_ty, done_key) = if *custom {
                (
                    "response.custom_tool_call_input.delta",
                    "response.custom_tool_call_input.done",
                    "input",
                )
            } else {
                (
                    "response.function_call_arguments.delta",
                    "response.function_call_arguments.done",
                    "arguments",
                )
            };
            for (n, f) in text::fragments(&all, ARG_FRAGMENT).into_iter().enumerate() {
                let obf = obfuscation(&f, n);
                ev.push(
                    delta_ty,
                    vec![
                        ("delta", Value::String(f)),
                        ("item_id", item_id.clone()),
                        ("obfuscation", obf),
                        ("output_index", oi.clone()),
                    ],
                );
            }
            ev.push(
                done_ty,
                vec![
                    (done_key, Value::String(all.clone())),
                    ("item_id", item_id),
                    ("output_index", oi.clone()),
                ],
            );
            ev.push(
                "response.output_item.done",
                vec![
                    ("item", call_item(ids, "completed", id, name, &all, *custom)),
                    ("output_index", oi),
                ],
            );
        }
    }
    // `response.completed` is both the finish and the terminator: `no_finish` and
    // `no_terminator` both leave it out.
    if opts.finish && opts.terminator {
        let st = State {
            status: "completed",
            error: Value::Null,
            output: output(conv, ans, ids),
            usage: usage(ans),
            terminal: true,
        };
        ev.push(
            "response.completed",
            vec![("response", response(conv, ctx, ids, st, true))],
        );
    }
    ev.0
}

fn reasoning_events(ev: &mut Events, conv: &Conv, ids: &Ids, index: usize, pieces: &[String]) {
    let oi = Value::from(index);
    let item_id = Value::String(ids.reasoning.clone());
    let full = pieces.concat();
    ev.push(
        "response.output_item.added",
        vec![
            ("item", reasoning_item(conv, ids, None)),
            ("output_index", oi.clone()),
        ],
    );
    let part = |t: &str| json!({"type": "summary_text", "text": t});
    let base = |extra: Vec<(&'static str, Value)>| {
        let mut f = vec![
            ("item_id", item_id.clone()),
            ("output_index", oi.clone()),
            ("summary_index", Value::from(0)),
        ];
        f.extend(extra);
        f
    };
    ev.push(
        "response.reasoning_summary_part.added",
        base(vec![("part", part(""))]),
    );
    for (n, p) in pieces.iter().enumerate() {
        ev.push(
            "response.reasoning_summary_text.delta",
            base(vec![
                ("delta", Value::String(p.clone())),
                ("obfuscation", obfuscation(p, n)),
            ]),
        );
    }
    ev.push(
        "response.reasoning_summary_text.done",
        base(vec![("text", Value::String(full.clone()))]),
    );
    ev.push(
        "response.reasoning_summary_part.done",
        base(vec![("part", part(&full))]),
    );
    ev.push(
        "response.output_item.done",
        vec![
            ("item", reasoning_item(conv, ids, Some(&full))),
            ("output_index", oi),
        ],
    );
}

/// `event: error` (the fixture's nested error object) then `event: response.failed`
/// (`status: "failed"`, the fixture's `error: {code, message}`), numbered from `n`.
/// Built only when the fault asks for it.
fn midstream(conv: Conv, ctx: Ctx, ids: Ids) -> Midstream {
    Box::new(move |n| {
        let (error, failed_error) = failed_errors().clone();
        // `service_tier` stays unresolved in `response.failed`, as in the fixture.
        let st = State {
            status: "failed",
            error: failed_error,
            output: Vec::new(),
            usage: Value::Null,
            terminal: false,
        };
        let failed = response(&conv, ctx, &ids, st, true);
        let mut out = event("error", vec![("error", error)], n).to_vec();
        out.extend_from_slice(&event("response.failed", vec![("response", failed)], n + 1));
        Bytes::from(out)
    })
}

/// A Responses-style error body (the Chat Completions envelope, pretty, no newline).
pub fn error_body(message: &str, ty: &str, code: Option<&str>) -> Bytes {
    pretty_ascii(&json!({"error": {"message": message, "type": ty, "param": null, "code": code}}))
}
