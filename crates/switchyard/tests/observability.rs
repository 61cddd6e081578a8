//! The decision log line and the Prometheus metrics a request leaves behind.

mod common;

use serde_json::json;
use switchyard_mock::{Behavior, Fault};

async fn metrics(h: &common::Harness) -> String {
    reqwest::get(format!("{}/metrics", h.gw.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test]
async fn decision_log_line_has_the_contract_fields() {
    let h = common::start(common::ONE_OPENAI).await;
    let resp = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .header("x-request-id", "req-abc-123")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .json(&json!({"model": "chat", "messages": common::user("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "req-abc-123");
    let d = h.decision(0).await;
    for field in [
        "ts",
        "request_id",
        "trace_id",
        "client",
        "route",
        "config_version",
        "input_hash",
        "candidates",
        "selected",
        "decision_reason",
        "attempts",
        "stream",
        "tokens",
        "cost_usd",
        "cache",
        "fallback_reason",
        "status",
    ] {
        assert!(d.get(field).is_some(), "missing {field}: {d}");
    }
    assert_eq!(d["request_id"], "req-abc-123");
    assert_eq!(d["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(d["route"], "chat");
    assert_eq!(d["selected"], "mock/gpt-4o-mini");
    assert_eq!(d["status"], 200);
    assert_eq!(d["input_hash"].as_str().unwrap().len(), 64);
    assert_eq!(d["config_version"].as_str().unwrap().len(), 64);
    let a = &d["attempts"][0];
    assert_eq!(a["outcome"], "ok");
    assert!(a["latency_ms"].as_f64().unwrap() > 0.0);
    assert!(a["ttfb_ms"].as_f64().is_some());
    // Priced from the deployment: 1 $/Mtok in, 2 $/Mtok out.
    let (input, output) = (
        d["tokens"]["input"].as_u64().unwrap(),
        d["tokens"]["output"].as_u64().unwrap(),
    );
    let expect = (input as f64 * 1.0 + output as f64 * 2.0) / 1e6;
    assert!((d["cost_usd"].as_f64().unwrap() - expect).abs() < 1e-12);
    // The traceparent went upstream; the key did not go into the log.
    assert_eq!(
        h.mock.requests()[0].header("traceparent"),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    );
    assert!(!h.decisions.lock().unwrap()[0].contains("sk-test"));
}

/// Every family of contract §6, in the Prometheus text format by default
/// (OpenMetrics only on request), before any request was made.
#[tokio::test]
async fn metrics_answer_prometheus_text_with_every_family_from_start_up() {
    let h = common::start(common::ONE_OPENAI).await;
    let resp = reqwest::get(format!("{}/metrics", h.gw.admin_url()))
        .await
        .unwrap();
    assert_eq!(
        resp.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let m = resp.text().await.unwrap();
    assert!(!m.contains("# EOF"), "{m}");
    for (family, kind) in [
        ("switchyard_requests_total", "counter"),
        ("switchyard_request_duration_seconds", "histogram"),
        ("switchyard_time_to_first_token_seconds", "histogram"),
        ("switchyard_upstream_attempts_total", "counter"),
        ("switchyard_fallbacks_total", "counter"),
        ("switchyard_retries_total", "counter"),
        ("switchyard_tokens_total", "counter"),
        ("switchyard_cost_usd_total", "counter"),
        ("switchyard_cache_requests_total", "counter"),
        ("switchyard_circuit_state", "gauge"),
        ("switchyard_deployment_health_score", "gauge"),
        ("switchyard_stream_interruptions_total", "counter"),
        ("switchyard_ratelimit_rejections_total", "counter"),
        ("switchyard_inflight_requests", "gauge"),
        ("switchyard_config_reloads_total", "counter"),
        ("switchyard_upstream_events_skipped_total", "counter"),
        ("switchyard_budget_spent_usd", "gauge"),
        ("switchyard_budget_rejections_total", "counter"),
        ("switchyard_usage_store_writes_total", "counter"),
        ("switchyard_state_backend_errors_total", "counter"),
        ("switchyard_cache_entries", "gauge"),
    ] {
        let line = format!("# TYPE {family} {kind}\n");
        assert!(m.contains(&line), "missing `{line}` in:\n{m}");
    }
    // Zero-valued series before the first event.
    for line in [
        r#"switchyard_tokens_total{deployment="mock/gpt-4o-mini",kind="input"} 0"#,
        r#"switchyard_cache_requests_total{result="hit"} 0"#,
        r#"switchyard_config_reloads_total{result="error"} 0"#,
        r#"switchyard_circuit_state{deployment="mock/gpt-4o-mini",state="open"} 0"#,
        "switchyard_cache_entries 0",
    ] {
        assert!(m.contains(line), "missing `{line}` in:\n{m}");
    }
    let resp = reqwest::Client::new()
        .get(format!("{}/metrics", h.gw.admin_url()))
        .header("accept", "application/openmetrics-text; version=1.0.0")
        .send()
        .await
        .unwrap();
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/openmetrics-text"));
    let om = resp.text().await.unwrap();
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(om.contains("# TYPE switchyard_requests counter\n"), "{om}");
}

#[tokio::test]
async fn metrics_count_requests_tokens_and_stream_trouble() {
    let h = common::start(common::ONE_OPENAI).await;
    assert_eq!(
        h.post(json!({"model": "chat", "messages": common::user("hi")}))
            .await
            .status(),
        200
    );
    h.mock
        .set_default(Behavior::fault(Fault::BadEvent).after(2));
    let _ = h
        .post(json!({"model": "chat", "messages": common::user("hi"), "stream": true}))
        .await
        .text()
        .await;
    h.mock.set_default(Behavior::fault(Fault::Cut).after(2));
    let _ = h
        .post(json!({"model": "chat", "messages": common::user("hi"), "stream": true}))
        .await
        .text()
        .await;
    let _ = h
        .post(json!({"model": "nope", "messages": common::user("hi")}))
        .await;
    h.decision(3).await;
    let m = metrics(&h).await;
    for line in [
        r#"switchyard_requests_total{route="chat",deployment="mock/gpt-4o-mini",status="200",stream="false"} 1"#,
        r#"switchyard_requests_total{route="",deployment="",status="model_not_found",stream="false"} 1"#,
        r#"switchyard_requests_total{route="chat",deployment="mock/gpt-4o-mini",status="connection_error",stream="true"} 1"#,
        r#"switchyard_upstream_events_skipped_total{deployment="mock/gpt-4o-mini"} 1"#,
        r#"switchyard_stream_interruptions_total{deployment="mock/gpt-4o-mini"} 1"#,
        // 6 + 6, and the cut stream is billed what it streamed ("Hello",
        // one token by the tokenizer: it sent no usage before it broke).
        r#"switchyard_tokens_total{deployment="mock/gpt-4o-mini",kind="output"} 13"#,
        "switchyard_inflight_requests 0",
    ] {
        assert!(m.contains(line), "missing `{line}` in:\n{m}");
    }
    assert!(m.contains("switchyard_request_duration_seconds_bucket"));
    assert!(
        m.contains("switchyard_time_to_first_token_seconds_count{deployment=\"mock/gpt-4o-mini\"}")
    );
}
