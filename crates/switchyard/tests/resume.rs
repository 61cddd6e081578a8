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
