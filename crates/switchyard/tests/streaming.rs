//! Streams through the gateway under every upstream stream fault: how each
//! one ends (contract §3 "How a stream ends"), byte-split robustness, usage
//! handling and keep-alives.

mod common;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

async fn stream(h: &common::Harness, extra: Value) -> (reqwest::header::HeaderMap, String) {
    let mut body = json!({"model": "chat", "messages": common::user("hi"), "stream": true});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let resp = h.post(body).await;
    assert_eq!(resp.status(), 200);
    let headers = resp.headers().clone();
    (headers, resp.text().await.unwrap())
}

fn last_data(body: &str) -> String {
    common::sse_data(body).pop().unwrap()
}

const FULL: &str = "Hello from the mock openai provider.";

#[tokio::test]
async fn clean_stream_ends_with_done_and_no_unasked_usage_chunk() {
    let h = common::start(common::ONE_OPENAI).await;
    let (headers, body) = stream(&h, json!({})).await;
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["x-switchyard-deployment"], "mock/gpt-4o-mini");
    assert_eq!(common::sse_text(&body), FULL);
    assert_eq!(last_data(&body), "[DONE]");
    // The gateway asked upstream for usage on its own account…
    let sent = h.mock.requests()[0].json.clone().unwrap();
    assert_eq!(sent["stream_options"]["include_usage"], true);
    // …but the client did not, so no `choices: []` chunk reaches it.
    assert!(!body.contains("\"choices\":[]"), "{body}");
    // It still knows the usage.
    assert_eq!(h.decision(0).await["tokens"]["output"], 6);
}

#[tokio::test]
async fn finish_reason_without_done_is_complete() {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock.set_default(Behavior::fault(Fault::NoTerminator));
    let (_, body) = stream(&h, json!({})).await;
    assert_eq!(common::sse_text(&body), FULL);
    assert_eq!(last_data(&body), "[DONE]");
    assert_eq!(h.decision(0).await["error"], Value::Null);
}

#[tokio::test]
async fn unparsable_event_is_skipped_and_counted() {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock
        .set_default(Behavior::fault(Fault::BadEvent).after(3));
    let (_, body) = stream(&h, json!({})).await;
    assert_eq!(common::sse_text(&body), FULL);
    assert_eq!(last_data(&body), "[DONE]");
    assert!(!body.contains("{not json"));
    assert_eq!(h.decision(0).await["skipped_events"], 1);
}

fn assert_error_end(body: &str, code: &str) {
    let last: Value = serde_json::from_str(&last_data(body))
        .unwrap_or_else(|_| panic!("last event is not JSON: {body}"));
    assert_eq!(last["error"]["code"], code, "{body}");
    assert!(
        !body.contains("[DONE]"),
        "an interrupted stream must not end cleanly: {body}"
    );
}

#[tokio::test]
async fn cut_after_first_bytes_ends_with_an_error_event() {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock.set_default(Behavior::fault(Fault::Cut).after(3));
    let (_, body) = stream(&h, json!({})).await;
    assert!(FULL.starts_with(&common::sse_text(&body)));
    assert!(common::sse_text(&body).len() < FULL.len());
    assert_error_end(&body, "connection_error");
    let d = h.decision(0).await;
    assert_eq!(d["error"], "connection_error");
    assert_eq!(d["attempts"][0]["outcome"], "connection_error");
}

#[tokio::test]
async fn end_without_finish_reason_is_an_interruption() {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock.set_default(Behavior::fault(Fault::NoFinish));
    let (_, body) = stream(&h, json!({})).await;
    assert_error_end(&body, "upstream_error");
}

#[tokio::test]
async fn in_band_upstream_error_ends_with_an_error_event() {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock
        .set_default(Behavior::fault(Fault::MidstreamError).after(2));
    let (_, body) = stream(&h, json!({})).await;
    assert_error_end(&body, "upstream_error");
    assert!(body.contains("The server had an error while processing your request"));
}

#[tokio::test]
async fn stalled_stream_hits_stream_idle() {
    let yaml = common::ONE_OPENAI.replace(
        "keys: [{ env: TEST_KEY }]",
        "keys: [{ env: TEST_KEY }]\n    timeouts: { stream_idle: 300ms }",
    );
    let h = common::start(&yaml).await;
    h.mock.set_default(Behavior::fault(Fault::Stall).after(2));
    let started = std::time::Instant::now();
    let (_, body) = stream(&h, json!({})).await;
    assert_error_end(&body, "timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}

#[tokio::test]
async fn failure_before_the_first_event_falls_back_invisibly() {
    let yaml = r#"
providers:
  slow:
    protocol: openai
    base_url: "{mock}/v1"
    timeouts: { first_byte: 200ms }
    options: { mock: { fault: first_event_delay, first_event_delay_ms: 2000 } }
  good:
    protocol: openai
    base_url: "{mock}/v1"
models:
  - { id: slow/m, provider: slow, model: m }
  - { id: good/m, provider: good, model: m }
routes:
  chat: { targets: [slow/m, good/m] }
"#;
    let h = common::start(yaml).await;
    let (headers, body) = stream(&h, json!({})).await;
    assert_eq!(headers["x-switchyard-deployment"], "good/m");
    assert_eq!(headers["x-switchyard-fallback-reason"], "timeout");
    assert_eq!(common::sse_text(&body), FULL);
    assert_eq!(last_data(&body), "[DONE]");
    assert_eq!(
        body.matches("\"role\":\"assistant\"").count(),
        1,
        "one clean stream: {body}"
    );
}

#[tokio::test]
async fn any_byte_split_gives_the_same_stream() {
    let h = common::start(common::ONE_OPENAI).await;
    let (_, reference) = stream(&h, json!({"mock": {"chunks": 9}})).await;
    for n in [1, 2, 3, 5, 7, 13, 64] {
        let (_, body) = stream(
            &h,
            json!({"mock": {"chunks": 9, "fault": "drip", "drip_bytes": n}}),
        )
        .await;
        assert_eq!(
            common::sse_text(&body),
            common::sse_text(&reference),
            "drip {n}"
        );
        assert_eq!(last_data(&body), "[DONE]", "drip {n}");
    }
}

#[tokio::test]
async fn usage_chunk_is_forwarded_when_the_client_asks() {
    let h = common::start(common::ONE_OPENAI).await;
    let (_, body) = stream(&h, json!({"stream_options": {"include_usage": true}})).await;
    let datas = common::sse_data(&body);
    let usage: Value = serde_json::from_str(&datas[datas.len() - 2]).unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 6);
}

#[tokio::test]
async fn idle_streams_get_keepalive_comments() {
    let h = common::start_with(common::ONE_OPENAI, "  sse_keepalive: 100ms").await;
    let (_, body) = stream(&h, json!({"mock": {"chunks": 3, "chunk_delay_ms": 350}})).await;
    assert!(body.contains(": keep-alive\n\n"), "{body}");
    assert_eq!(common::sse_text(&body), FULL);
}

#[tokio::test]
async fn events_are_flushed_as_they_arrive() {
    let h = common::start(common::ONE_OPENAI).await;
    let body = json!({"model": "chat", "messages": common::user("hi"), "stream": true, "mock": {"chunks": 4, "chunk_delay_ms": 300}});
    let started = std::time::Instant::now();
    let mut resp = h.post(body).await;
    // The first chunk arrives long before the whole stream (4 × 300 ms) is done.
    let first = resp.chunk().await.unwrap().unwrap();
    assert!(
        started.elapsed() < std::time::Duration::from_millis(800),
        "{:?}",
        started.elapsed()
    );
    assert!(String::from_utf8_lossy(&first).starts_with("data: "));
    while resp.chunk().await.unwrap().is_some() {}
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
}
