//! Streams that break after their first byte (contract §3): resumed on a
//! prefill-capable deployment as one seamless stream, or ended with an error
//! event — never a silent clean end.

mod common;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

const FULL: &str = "Hello from the mock openai provider.";

fn config(extra_route: &str, caps_a: &str, caps_b: &str) -> String {
    format!(
        r#"
providers:
  pa: {{ protocol: openai, base_url: "{{mock}}/v1", timeouts: {{ stream_idle: 300ms }} }}
  pb: {{ protocol: openai, base_url: "{{mock}}/v1" }}
models:
  - {{ id: pa/a, provider: pa, model: a, capabilities: [{caps_a}] }}
  - {{ id: pb/b, provider: pb, model: b, capabilities: [{caps_b}] }}
routes:
  chat: {{ targets: [pa/a, pb/b] {extra_route} }}
"#
    )
}

async fn stream(h: &common::Harness) -> String {
    h.post(json!({"model": "chat", "messages": common::user("hi"), "stream": true}))
        .await
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_cut_stream_is_resumed_on_the_same_prefill_deployment_seamlessly() {
    let h = common::start(&config("", "streaming, prefill", "streaming, prefill")).await;
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(3)]);
    let body = stream(&h).await;
    assert_eq!(common::sse_text(&body), FULL, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    assert_eq!(
        body.matches("\"role\":\"assistant\"").count(),
        1,
        "one stream: {body}"
    );
    // One envelope: the continuation kept the first stream's id.
    let ids: std::collections::BTreeSet<String> = common::sse_data(&body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    // The continuation carried the finish through: exactly one finish_reason.
    let finishes: Vec<String> = common::sse_data(&body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["choices"][0]["finish_reason"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(finishes, ["stop"], "{body}");
    // The second request carried the text so far as a trailing assistant message.
    let reqs = h.mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].json.as_ref().unwrap()["model"], "a");
    let last = reqs[1].json.as_ref().unwrap()["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["content"], "Hello from");
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][1]["resumed"], true, "{d}");
    assert_eq!(d["error"], Value::Null);
    let m = reqwest::get(format!("{}/metrics", h.gw.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains(r#"switchyard_stream_interruptions_total{deployment="pa/a"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn a_stalled_stream_is_resumed_on_the_next_prefill_candidate() {
    let h = common::start(&config("", "streaming, prefill", "streaming, prefill")).await;
    h.mock.script(vec![Behavior::fault(Fault::Stall).after(3)]);
    let body = stream(&h).await;
    assert_eq!(common::sse_text(&body), FULL, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"));
    let reqs = h.mock.requests();
    assert_eq!(
        reqs[1].json.as_ref().unwrap()["model"],
        "b",
        "after a stall, the next candidate"
    );
}

#[tokio::test]
async fn without_a_prefill_deployment_or_with_resume_off_the_stream_ends_with_an_error_event() {
    for (route, caps) in [
        ("", "streaming"),
        (", on_stream_interrupt: error", "streaming, prefill"),
    ] {
        let h = common::start(&config(route, caps, caps)).await;
        h.mock.script(vec![Behavior::fault(Fault::Cut).after(3)]);
        let body = stream(&h).await;
        let last: Value = serde_json::from_str(&common::sse_data(&body).pop().unwrap()).unwrap();
        assert_eq!(last["error"]["code"], "connection_error", "{route}: {body}");
        assert!(!body.contains("[DONE]"));
        assert_eq!(
            h.mock.request_count(),
            1,
            "{route}: never a prefill to a deployment without it"
        );
    }
}

#[tokio::test]
async fn a_stream_cut_inside_a_tool_call_is_not_resumed() {
    let h = common::start(&config(
        "",
        "tools, streaming, prefill",
        "tools, streaming, prefill",
    ))
    .await;
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(3)]);
    let tools = json!([{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]);
    let body = h.post(json!({"model": "chat", "messages": common::user("find"), "tools": tools, "stream": true})).await.text().await.unwrap();
    let last: Value = serde_json::from_str(&common::sse_data(&body).pop().unwrap()).unwrap();
    assert!(last.get("error").is_some(), "{body}");
    assert_eq!(h.mock.request_count(), 1);
}

// === Anthropic clients (`POST /v1/messages`) ===

/// An Anthropic deployment (short `stream_idle`) then an OpenAI one.
fn anthropic_config(extra_route: &str, caps: &str) -> String {
    format!(
        r#"
providers:
  an: {{ protocol: anthropic, base_url: "{{mock}}", keys: [{{ env: TEST_KEY }}], timeouts: {{ stream_idle: 300ms }} }}
  oa: {{ protocol: openai, base_url: "{{mock}}/v1" }}
models:
  - {{ id: an/claude, provider: an, model: claude, capabilities: [{caps}] }}
  - {{ id: oa/gpt, provider: oa, model: gpt, capabilities: [{caps}] }}
routes:
  chat: {{ targets: [an/claude, oa/gpt] {extra_route} }}
"#
    )
}

async fn messages_stream(h: &common::Harness) -> String {
    reqwest::Client::new()
        .post(h.url("/v1/messages"))
        .header("anthropic-version", "2023-06-01")
        .json(&json!({"model": "chat", "max_tokens": 100, "stream": true,
            "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// An Anthropic SSE body as (event name, payload) pairs.
fn anthropic_events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|e| !e.trim().is_empty() && !e.starts_with(':'))
        .map(|ev| {
            let name = ev
                .lines()
                .find_map(|l| l.strip_prefix("event: "))
                .unwrap_or_default()
                .to_owned();
            let data = ev
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(|d| serde_json::from_str(d).unwrap())
                .unwrap_or_default();
            (name, data)
        })
        .collect()
}

/// Checks the stream is one well-formed Anthropic message: one
/// `message_start`, blocks opened and closed in order with increasing
/// indexes (deltas only into the open block), then `message_delta` and one
/// `message_stop` last. Returns the text.
fn assert_one_message(body: &str) -> String {
    let evs = anthropic_events(body);
    let count = |n: &str| evs.iter().filter(|(name, _)| name == n).count();
    assert_eq!(count("message_start"), 1, "{body}");
    assert_eq!(count("message_stop"), 1, "{body}");
    assert_eq!(count("message_delta"), 1, "{body}");
    assert_eq!(evs[0].0, "message_start", "{body}");
    assert_eq!(evs.last().unwrap().0, "message_stop", "{body}");
    let (mut open, mut next, mut text) = (None::<u64>, 0u64, String::new());
    for (name, v) in &evs {
        let index = v["index"].as_u64();
        match name.as_str() {
            "content_block_start" => {
                assert_eq!(open, None, "a block is still open: {body}");
                assert_eq!(index, Some(next), "indexes increase by one: {body}");
                open = index;
                next += 1;
            }
            "content_block_delta" => {
                assert_eq!(index, open, "a delta outside the open block: {body}");
                text.push_str(v["delta"]["text"].as_str().unwrap_or(""));
            }
            "content_block_stop" => {
                assert_eq!(index, open, "{body}");
                open = None;
            }
            "message_delta" => assert_eq!(open, None, "message_delta inside a block: {body}"),
            _ => {}
        }
    }
    text
}

/// The text of a request's trailing assistant message, if it has one.
fn trailing_assistant(req: &switchyard_mock::RecordedRequest) -> Option<String> {
    let body = req.json.as_ref()?;
    let last = body["messages"].as_array()?.last()?.clone();
    if last["role"] != "assistant" {
        return None;
    }
    match &last["content"] {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>(),
        ),
        _ => None,
    }
}

#[tokio::test]
async fn an_anthropic_clients_cut_stream_is_resumed_in_the_same_text_block() {
    let h = common::start(&anthropic_config("", "streaming, prefill")).await;
    // message_start, content_block_start, ping, "Hello", " from" — then cut.
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(5)]);
    let body = messages_stream(&h).await;
    assert_eq!(
        assert_one_message(&body),
        "Hello from the mock anthropic provider.",
        "{body}"
    );
    let evs = anthropic_events(&body);
    // The continuation went on in block 0: one block start, one block stop.
    let starts: Vec<&Value> = evs
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, v)| v)
        .collect();
    assert_eq!(starts.len(), 1, "{body}");
    assert_eq!(starts[0]["content_block"]["type"], "text");
    let delta = &evs.iter().find(|(n, _)| n == "message_delta").unwrap().1;
    assert_eq!(delta["delta"]["stop_reason"], "end_turn", "{body}");
    // The continuation's own output tokens: the four words it added.
    assert_eq!(delta["usage"]["output_tokens"], 4, "{body}");
    let reqs = h.mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].path_and_query, "/v1/messages");
    assert_eq!(reqs[1].json.as_ref().unwrap()["model"], "claude");
    assert_eq!(trailing_assistant(&reqs[1]).as_deref(), Some("Hello from"));
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][0]["outcome"], "connection_error", "{d}");
    assert_eq!(d["attempts"][1]["resumed"], true, "{d}");
    assert_eq!(d["error"], Value::Null, "{d}");
}

#[tokio::test]
async fn an_anthropic_clients_stall_is_resumed_on_the_next_candidate_in_another_protocol() {
    let h = common::start(&anthropic_config("", "streaming, prefill")).await;
    let text = "Hello from whichever mock answers.";
    h.mock.script(vec![
        Behavior::fault(Fault::Stall).after(5).with_text(text),
        Behavior::text(text),
    ]);
    let body = messages_stream(&h).await;
    assert_eq!(assert_one_message(&body), text, "{body}");
    let reqs = h.mock.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].path_and_query, "/v1/chat/completions");
    assert_eq!(
        reqs[1].json.as_ref().unwrap()["model"],
        "gpt",
        "after a stall, the next candidate"
    );
    assert_eq!(trailing_assistant(&reqs[1]).as_deref(), Some("Hello from"));
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][0]["outcome"], "timeout", "{d}");
    assert_eq!(d["attempts"][1]["deployment"], "oa/gpt", "{d}");
    assert_eq!(d["attempts"][1]["resumed"], true, "{d}");
}

#[tokio::test]
async fn an_anthropic_continuation_after_a_thinking_block_keeps_the_text_blocks_index() {
    let h = common::start(&anthropic_config("", "streaming, prefill")).await;
    // message_start, thinking block (start, ping, 3 deltas, signature, stop),
    // text block 1 (start, "Hello", " from") — then cut.
    let mut b = Behavior::fault(Fault::Cut).after(11);
    b.reasoning = Some("Let me think.".into());
    h.mock.script(vec![b]);
    let body = messages_stream(&h).await;
    assert_eq!(
        assert_one_message(&body),
        "Hello from the mock anthropic provider.",
        "{body}"
    );
    let evs = anthropic_events(&body);
    let last_delta = evs
        .iter()
        .rfind(|(n, _)| n == "content_block_delta")
        .unwrap();
    assert_eq!(last_delta.1["index"], 1, "{body}");
    assert_eq!(
        evs.iter()
            .filter(|(n, _)| n == "content_block_start")
            .count(),
        2,
        "{body}"
    );
}

#[tokio::test]
async fn an_anthropic_stream_cut_between_blocks_continues_in_a_new_block() {
    let h = common::start(&anthropic_config("", "streaming, prefill")).await;
    // message_start, block start, ping, "Hello", " from", block stop — then
    // cut before message_delta. The continuation answers the rest.
    h.mock.script(vec![
        Behavior::fault(Fault::Cut).after(6).with_text("Hello from"),
        Behavior::text("Hello from the other side."),
    ]);
    let body = messages_stream(&h).await;
    assert_eq!(
        assert_one_message(&body),
        "Hello from the other side.",
        "{body}"
    );
    let starts: Vec<u64> = anthropic_events(&body)
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, v)| v["index"].as_u64().unwrap())
        .collect();
    assert_eq!(starts, [0, 1], "{body}");
}

#[tokio::test]
async fn an_anthropic_stream_that_cannot_be_resumed_ends_with_an_error_event() {
    for (route, caps) in [
        ("", "streaming"),
        (", on_stream_interrupt: error", "streaming, prefill"),
    ] {
        let h = common::start(&anthropic_config(route, caps)).await;
        h.mock.script(vec![Behavior::fault(Fault::Cut).after(5)]);
        let body = messages_stream(&h).await;
        let evs = anthropic_events(&body);
        let text: String = evs
            .iter()
            .filter(|(n, _)| n == "content_block_delta")
            .filter_map(|(_, v)| v["delta"]["text"].as_str())
            .collect();
        assert_eq!(text, "Hello from", "{route}: partial content first: {body}");
        let (name, last) = evs.last().unwrap();
        assert_eq!(name, "error", "{route}: {body}");
        assert_eq!(last["type"], "error");
        assert!(last["error"]["type"].is_string(), "{body}");
        assert!(!evs.iter().any(|(n, _)| n == "message_stop"), "{body}");
        assert_eq!(
            h.mock.request_count(),
            1,
            "{route}: never a prefill to a deployment without it"
        );
        let d = h.decision(0).await;
        assert_eq!(d["error"], "connection_error", "{route}: {d}");
    }
}

#[tokio::test]
async fn an_anthropic_stream_cut_inside_a_tool_call_is_not_resumed() {
    let h = common::start(&anthropic_config("", "tools, streaming, prefill")).await;
    // message_start, tool_use block start, ping, first argument fragments —
    // cut (the rule is shared with OpenAI clients; here nothing precedes the
    // call, so there is no text to prefill either).
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(5)]);
    let body = reqwest::Client::new()
        .post(h.url("/v1/messages"))
        .json(&json!({"model": "chat", "max_tokens": 100, "stream": true,
            "tools": [{"name": "lookup", "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}}}],
            "messages": [{"role": "user", "content": "find"}]}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(anthropic_events(&body).last().unwrap().0, "error", "{body}");
    assert_eq!(h.mock.request_count(), 1);
}

// === Continuations take a slot like any attempt ===

#[tokio::test]
async fn a_continuation_passes_over_a_deployment_whose_concurrency_is_taken() {
    let h = common::start(
        r#"
providers:
  pa: { protocol: openai, base_url: "{mock}/v1", timeouts: { stream_idle: 300ms } }
  pb: { protocol: openai, base_url: "{mock}/v1", limits: { concurrency: 1, queue: 0 } }
  pc: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: pa/a, provider: pa, model: a, capabilities: [streaming, prefill] }
  - { id: pb/b, provider: pb, model: b, capabilities: [streaming, prefill] }
  - { id: pc/c, provider: pc, model: c, capabilities: [streaming, prefill] }
routes:
  chat: { targets: [pa/a, pb/b, pc/c] }
"#,
    )
    .await;
    h.mock.script(vec![
        // Another request's open stream holds pb/b's only slot.
        Behavior::fault(Fault::Stall).after(2),
        // Ours stalls on pa/a: the continuation goes to the candidates after it.
        Behavior::fault(Fault::Stall).after(3),
    ]);
    let busy = h
        .post(json!({"model": "pb/b", "messages": common::user("hi"), "stream": true}))
        .await;
    assert_eq!(busy.status(), 200);
    let body = stream(&h).await;
    assert_eq!(common::sse_text(&body), FULL, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let models: Vec<Value> = h
        .mock
        .requests()
        .iter()
        .map(|r| r.json.as_ref().unwrap()["model"].clone())
        .collect();
    assert_eq!(
        models,
        ["b", "a", "c"],
        "no continuation sent to the busy pb/b"
    );
    let d = h.decision(0).await;
    assert_eq!(d["route"], "chat", "{d}");
    let attempts: Vec<(Value, Value, Value)> = d["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["deployment"].clone(),
                a["outcome"].clone(),
                a["resumed"].clone(),
            )
        })
        .collect();
    assert_eq!(
        attempts,
        [
            (json!("pa/a"), json!("timeout"), json!(false)),
            (json!("pb/b"), json!("gateway_rate_limited"), json!(true)),
            (json!("pc/c"), json!("ok"), json!(true)),
        ],
        "{d}"
    );
    drop(busy);
}

#[tokio::test]
async fn a_continuation_on_the_same_deployment_gets_the_slot_the_broken_stream_held() {
    let h = common::start(
        r#"
providers:
  pa: { protocol: openai, base_url: "{mock}/v1", limits: { concurrency: 1, queue: 0 } }
models:
  - { id: pa/a, provider: pa, model: a, capabilities: [streaming, prefill] }
routes:
  chat: { targets: [pa/a] }
"#,
    )
    .await;
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(3)]);
    let body = stream(&h).await;
    assert_eq!(common::sse_text(&body), FULL, "{body}");
    assert_eq!(h.mock.request_count(), 2);
    // The continuation's slot was given back when its stream ended.
    let again = stream(&h).await;
    assert_eq!(common::sse_text(&again), FULL, "{again}");
}
