//! Fault injection, fixtures, keys, scripting and listener control over real HTTP.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use switchyard_mock::{Behavior, Fault, MockServer};

fn oa(stream: bool) -> Value {
    json!({"model": "gpt-4o", "stream": stream, "messages": [{"role": "user", "content": "Hello"}]})
}
fn an(stream: bool) -> Value {
    json!({"model": "claude-x", "max_tokens": 10, "stream": stream, "messages": [{"role": "user", "content": "Hello"}]})
}
fn ge() -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": "Hello"}]}]})
}

async fn send(m: &MockServer, path: &str, body: &Value) -> Conn {
    Conn::send(m.addr(), "POST", path, &[], &body.to_string())
        .await
        .unwrap()
}

#[tokio::test]
async fn drop_and_hang() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.script(vec![
        Behavior::fault(Fault::Drop),
        Behavior::fault(Fault::Hang),
    ]);
    let err = send(&m, "/v1/chat/completions", &oa(false))
        .await
        .read_all()
        .await
        .unwrap_err();
    assert!(err.1.is_empty(), "no response bytes at all");
    let mut c = send(&m, "/v1/chat/completions", &oa(false)).await;
    let r = tokio::time::timeout(Duration::from_millis(200), c.read_head()).await;
    assert!(r.is_err(), "no headers while hanging");
    assert_eq!(m.request_count(), 2);
}

#[tokio::test]
async fn first_event_delay_and_latency() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.script(vec![Behavior {
        fault: Some(Fault::FirstEventDelay),
        first_event_delay_ms: 250,
        ..Default::default()
    }]);
    let t0 = Instant::now();
    let mut c = send(&m, "/v1/chat/completions", &oa(true)).await;
    assert_eq!(c.read_head().await.unwrap().status, 200);
    let head_at = t0.elapsed();
    assert!(
        head_at < Duration::from_millis(150),
        "headers at once: {head_at:?}"
    );
    let first = c.read_chunk().await.unwrap().unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(240));
    assert!(first.starts_with(b"data: {"));

    m.script(vec![Behavior::default().latency(200)]);
    let t0 = Instant::now();
    let mut c = send(&m, "/v1/messages", &an(false)).await;
    c.read_head().await.unwrap();
    assert!(t0.elapsed() >= Duration::from_millis(190));
}

#[tokio::test]
async fn cut_all_protocols() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    for (path, body) in [
        ("/v1/chat/completions", oa(true)),
        ("/v1/messages", an(true)),
        (GEM_STREAM, ge()),
    ] {
        m.script(vec![Behavior::fault(Fault::Cut).after(2)]);
        let mut c = send(&m, path, &body).await;
        assert_eq!(c.read_head().await.unwrap().status, 200);
        let (err, got) = c.read_all().await.unwrap_err();
        assert_eq!(err, "eof", "{path}");
        let text = String::from_utf8(got).unwrap();
        assert_eq!(sse_data(&text).len(), 2, "{path}: {text}");
    }
    // non-stream: half the body, then abort
    m.script(vec![Behavior::fault(Fault::Cut)]);
    let (_, got) = send(&m, "/v1/chat/completions", &oa(false))
        .await
        .read_all()
        .await
        .unwrap_err();
    assert!(!got.is_empty() && serde_json::from_slice::<Value>(&got).is_err());
}

#[tokio::test]
async fn stall_keeps_connection_open() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.script(vec![Behavior::fault(Fault::Stall).after(1)]);
    let mut c = send(&m, "/v1/messages", &an(true)).await;
    c.read_head().await.unwrap();
    let first = c.read_chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"event: message_start"));
    let r = tokio::time::timeout(Duration::from_millis(200), c.read_chunk()).await;
    assert!(r.is_err(), "nothing after the stall");
}

#[tokio::test]
async fn no_finish_and_no_terminator() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.script(vec![
        Behavior::fault(Fault::NoFinish),
        Behavior::fault(Fault::NoTerminator),
    ]);
    let body = call(m.addr(), "/v1/chat/completions", &[], &oa(true))
        .await
        .text();
    assert!(!body.contains("[DONE]") && !body.contains("\"finish_reason\":\"stop\""));
    let body = call(m.addr(), "/v1/chat/completions", &[], &oa(true))
        .await
        .text();
    assert!(!body.contains("[DONE]") && body.contains("\"finish_reason\":\"stop\""));

    m.script(vec![
        Behavior::fault(Fault::NoFinish),
        Behavior::fault(Fault::NoTerminator),
    ]);
    let body = call(m.addr(), "/v1/messages", &[], &an(true)).await.text();
    assert!(!body.contains("message_delta") && !body.contains("message_stop"));
    assert!(body.contains("content_block_stop"));
    let body = call(m.addr(), "/v1/messages", &[], &an(true)).await.text();
    assert!(body.contains("\"stop_reason\":\"end_turn\"") && !body.contains("message_stop"));

    m.script(vec![Behavior::fault(Fault::NoFinish)]);
    let body = call(m.addr(), GEM_STREAM, &[], &ge()).await.text();
    assert!(!body.contains("finishReason"));
    assert_eq!(sse_json(&body).len(), 6);
}

#[tokio::test]
async fn bad_event_then_continues() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    for (path, body, marker) in [
        ("/v1/chat/completions", oa(true), "data: [DONE]\n\n"),
        ("/v1/messages", an(true), "event: message_stop"),
        (GEM_STREAM, ge(), "\"finishReason\": \"STOP\""),
    ] {
        m.script(vec![Behavior::fault(Fault::BadEvent).after(2)]);
        let text = call(m.addr(), path, &[], &body).await.text();
        let data = sse_data(&text);
        assert_eq!(data[2], "{not json", "{path}");
        assert!(text.contains(marker), "{path} continues to the end");
        assert_eq!(
            sse_json(&text).len() + 1 + usize::from(path.ends_with("completions")),
            data.len()
        );
    }
}

#[tokio::test]
async fn midstream_error_all_protocols() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.script(vec![Behavior::fault(Fault::MidstreamError).after(1)]);
    let text = call(m.addr(), "/v1/chat/completions", &[], &oa(true))
        .await
        .text();
    let fix = fixture("openai/stream_error_midstream.sse");
    assert!(text.ends_with(&fix[fix.find("data: {\"error\"").unwrap()..]));
    assert_eq!(sse_data(&text).len(), 2);

    m.script(vec![Behavior::fault(Fault::MidstreamError).after(3)]);
    let text = call(m.addr(), "/v1/messages", &[], &an(true)).await.text();
    assert!(text.ends_with("event: error\ndata: {\"type\": \"error\", \"error\": {\"type\": \"overloaded_error\", \"message\": \"Overloaded\"}}\n\n"));
    assert!(!text.contains("message_stop"));

    m.script(vec![Behavior::fault(Fault::MidstreamError).after(2)]);
    let text = call(m.addr(), GEM_STREAM, &[], &ge()).await.text();
    let (frames, err) = text.split_at(text.find("\n{\n").unwrap() + 1);
    assert_eq!(frames.matches("\r\n\r\n").count(), 2);
    assert_eq!(
        serde_json::from_str::<Value>(err).unwrap()["error"]["status"],
        "CANCELLED"
    );
}

#[tokio::test]
async fn malformed_json_and_drip() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.script(vec![Behavior::fault(Fault::MalformedJson)]);
    let r = call(m.addr(), "/v1/chat/completions", &[], &oa(false)).await;
    assert_eq!(r.status, 200);
    assert!(serde_json::from_slice::<Value>(&r.body).is_err());
    assert!(r.text().starts_with("{\n  \"id\""));

    let normal = call(m.addr(), GEM_STREAM, &[], &ge()).await.text();
    m.script(vec![Behavior {
        fault: Some(Fault::Drip),
        drip_bytes: 7,
        drip_delay_ms: 1,
        ..Default::default()
    }]);
    let r = call(m.addr(), GEM_STREAM, &[], &ge()).await;
    assert!(r.chunks.len() > 10);
    assert!(r.chunks[..r.chunks.len() - 1].iter().all(|c| c.len() == 7));
    assert_eq!(r.text(), normal, "same bytes, split");

    m.script(vec![Behavior {
        fault: Some(Fault::Drip),
        drip_bytes: 16,
        ..Default::default()
    }]);
    let r = call(m.addr(), "/v1/messages", &[], &an(false)).await;
    assert!(r.chunks.iter().all(|c| c.len() <= 16));
    assert_eq!(r.json()["type"], "message");
}

#[tokio::test]
async fn fixtures_and_custom_status() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    for name in [
        "openai/error_429_rate_limit_tokens",
        "anthropic/error_529_overloaded",
        "gemini/error_429_resource_exhausted",
        "azure/error_429_rate_limit",
        "deepseek/error_402_insufficient_balance",
        "qwen/error_401_invalid_api_key",
    ] {
        let env = fixture_json(&format!("{name}.http.json"));
        let h = format!(r#"{{"fixture":"{name}"}}"#);
        let r = call(
            m.addr(),
            "/v1/chat/completions",
            &[("x-mock-behavior", &h)],
            &oa(true),
        )
        .await;
        assert_eq!(
            u64::from(r.status),
            env["status"].as_u64().unwrap(),
            "{name}"
        );
        for (k, v) in env["headers"].as_object().unwrap() {
            assert_eq!(r.header(k), v.as_str(), "{name} header {k}");
        }
        assert_eq!(r.json(), env["body"], "{name}");
    }
    m.script(vec![Behavior {
        status: Some(503),
        body: Some(json!("busy")),
        headers: [("retry-after".to_string(), "2".to_string())].into(),
        ..Default::default()
    }]);
    let r = call(m.addr(), "/v1/messages", &[], &an(false)).await;
    assert_eq!(
        (r.status, r.text().as_str(), r.header("retry-after")),
        (503, "busy", Some("2"))
    );
    // unknown fixture / invalid behavior → 400
    let r = call(
        m.addr(),
        "/v1/messages",
        &[("x-mock-behavior", r#"{"fixture":"nope"}"#)],
        &an(false),
    )
    .await;
    assert_eq!(r.status, 400);
    let r = call(
        m.addr(),
        "/v1/messages",
        &[("x-mock-behavior", r#"{"faults":"drop"}"#)],
        &an(false),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["type"], "error");
}

#[tokio::test]
async fn valid_keys() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.set_valid_keys(vec!["good".into()]);
    let cases = [
        (
            "/v1/chat/completions",
            oa(false),
            "authorization",
            "Bearer good",
            401,
            "openai/error_401_invalid_api_key",
        ),
        (
            "/v1/messages",
            an(false),
            "x-api-key",
            "good",
            401,
            "anthropic/error_401_authentication",
        ),
        (
            "/v1beta/models/g:generateContent",
            ge(),
            "x-goog-api-key",
            "good",
            400,
            "gemini/error_400_api_key_invalid",
        ),
        (
            "/openai/deployments/d/chat/completions?api-version=1",
            oa(false),
            "api-key",
            "good",
            401,
            "azure/error_401_access_denied",
        ),
    ];
    for (path, body, hk, hv, status, fix) in cases {
        let r = call(m.addr(), path, &[(hk, "bad")], &body).await;
        assert_eq!(r.status, status, "{path}");
        assert_eq!(r.json(), fixture_json(&format!("{fix}.http.json"))["body"]);
        let r = call(m.addr(), path, &[(hk, hv)], &body).await;
        assert_eq!(r.status, 200, "{path}");
    }
    m.set_valid_keys(vec![]);
    assert_eq!(
        call(m.addr(), "/v1/messages", &[], &an(false)).await.status,
        200
    );
}

#[tokio::test]
async fn behavior_sources_and_script_order() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.set_default(Behavior::text("default"));
    m.script(vec![Behavior::text("one"), Behavior::text("two")]);
    let h = [("x-mock-behavior", r#"{"text":"header"}"#)];
    let mut body = oa(false);
    body["mock"] = json!({"text": "body"});
    let content = |r: Resp| {
        r.json()["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        content(call(m.addr(), "/v1/chat/completions", &h, &body).await),
        "one"
    );
    assert_eq!(
        content(call(m.addr(), "/v1/chat/completions", &h, &body).await),
        "two"
    );
    assert_eq!(
        content(call(m.addr(), "/v1/chat/completions", &h, &body).await),
        "header"
    );
    assert_eq!(
        content(call(m.addr(), "/v1/chat/completions", &[], &body).await),
        "body"
    );
    assert_eq!(
        content(call(m.addr(), "/v1/chat/completions", &[], &oa(false)).await),
        "default"
    );
}

#[tokio::test]
async fn recorder() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    call(m.addr(), "/v1/messages", &[("x-api-key", "k1")], &an(false)).await;
    call(
        m.addr(),
        "/openai/deployments/d/chat/completions?api-version=2024",
        &[],
        &oa(false),
    )
    .await;
    let reqs = m.requests();
    assert_eq!(reqs.len(), 2);
    assert_eq!(m.request_count(), 2);
    assert_eq!(reqs[0].method, "POST");
    assert_eq!(reqs[0].path_and_query, "/v1/messages");
    assert_eq!(reqs[0].header("x-api-key"), Some("k1"));
    assert_eq!(reqs[0].json.as_ref().unwrap()["model"], "claude-x");
    assert_eq!(
        reqs[1].path_and_query,
        "/openai/deployments/d/chat/completions?api-version=2024"
    );
    m.clear_requests();
    assert_eq!(m.request_count(), 0);
    assert!(m.requests().is_empty());
}

#[tokio::test]
async fn stop_and_resume_listening() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    assert_eq!(
        call(m.addr(), "/v1/messages", &[], &an(false)).await.status,
        200
    );
    m.stop_listening().await;
    let err = tokio::net::TcpStream::connect(m.addr()).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    m.resume_listening().await.unwrap();
    assert_eq!(
        call(m.addr(), "/v1/messages", &[], &an(false)).await.status,
        200
    );
    m.shutdown();
}

#[tokio::test]
async fn fault_rate_applies_to_a_fraction() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let mut body = oa(false);
    body["mock"] = json!({"fixture": "openai/error_429_rate_limit_tokens", "fault_rate": 0.5});
    let (mut failed, mut ok) = (0, 0);
    for _ in 0..200 {
        let r = call(m.addr(), "/v1/chat/completions", &[], &body).await;
        match r.status {
            429 => {
                assert_eq!(r.header("retry-after"), Some("1"));
                failed += 1;
            }
            200 => {
                assert!(r.json()["choices"][0]["message"]["content"].is_string());
                ok += 1;
            }
            s => panic!("unexpected status {s}"),
        }
    }
    assert_eq!(failed + ok, 200);
    assert!((60..=140).contains(&failed), "{failed} of 200 failed");

    // 0 and 1 are never / always; the roll applies to `status` and `fault` too.
    for (rate, want) in [(0.0, 200), (1.0, 503)] {
        let h = format!(r#"{{"status":503,"body":"busy","fault_rate":{rate}}}"#);
        for _ in 0..20 {
            let r = call(
                m.addr(),
                "/v1/chat/completions",
                &[("x-mock-behavior", &h)],
                &oa(false),
            )
            .await;
            assert_eq!(r.status, want, "fault_rate {rate}");
        }
    }
    m.script(vec![Behavior::fault(Fault::Drop).rate(0.0)]);
    assert_eq!(
        call(m.addr(), "/v1/chat/completions", &[], &oa(true))
            .await
            .status,
        200
    );

    // Out of range: 400.
    let h = r#"{"fixture":"openai/error_429_rate_limit_tokens","fault_rate":1.5}"#;
    let r = call(
        m.addr(),
        "/v1/chat/completions",
        &[("x-mock-behavior", h)],
        &oa(false),
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(r.text().contains("fault_rate"), "{}", r.text());
}
