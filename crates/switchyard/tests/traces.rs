//! OpenTelemetry traces (contract §6) into a real OTLP receiver: one trace
//! per request (request → route, attempts), joined to the caller's
//! `traceparent`, the upstream's `traceparent` naming the attempt span,
//! GenAI attributes, head sampling and the tail rule (errors and requests
//! past `trace_slow` kept whatever the sample said), and a collector that
//! is down costing counted spans, not requests.

mod common;

use std::time::{Duration, Instant};

use common::otlp::{self, Receiver, Span};
use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

async fn traced(r: &Receiver, protocol: &str, sample: f64, yaml: &str) -> common::Harness {
    let obs = otlp::observability(&r.endpoint, protocol, sample);
    common::start(&format!("{yaml}\n{obs}")).await
}

async fn chat(h: &common::Harness, stream: bool, traceparent: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .json(&json!({"model": "chat", "messages": common::user("hi"), "stream": stream}));
    if let Some(tp) = traceparent {
        req = req.header("traceparent", tp);
    }
    req.send().await.unwrap()
}

/// The one trace's spans, checked for shape: one request span, every other
/// span its child, all under one trace id.
fn tree(spans: &[Span]) -> (&Span, &Span, Vec<&Span>) {
    let req = otlp::one(spans, "switchyard.request");
    let route = otlp::one(spans, "switchyard.route");
    assert!(
        spans.iter().all(|s| s.trace_id == req.trace_id),
        "{spans:#?}"
    );
    for s in spans.iter().filter(|s| s.span_id != req.span_id) {
        assert_eq!(s.parent, req.span_id, "{} is the request's child", s.name);
        assert!(
            s.start >= req.start && s.end <= req.end,
            "{s:#?} within {req:#?}"
        );
        assert!(s.end >= s.start);
    }
    let ids: std::collections::BTreeSet<&str> = spans.iter().map(|s| s.span_id.as_str()).collect();
    assert_eq!(ids.len(), spans.len(), "distinct span ids");
    (req, route, otlp::attempts(spans))
}

fn as_u64(v: &Value) -> u64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}")) as u64
}

#[tokio::test]
async fn a_request_is_one_trace_with_genai_attributes() {
    let r = Receiver::start_grpc().await;
    let h = traced(&r, "grpc", 1.0, common::ONE_OPENAI).await;
    let resp = chat(&h, false, None).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    let spans = r.wait_spans(3).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let (req, route, attempts) = tree(&spans);
    assert_eq!(req.parent, "", "a root without a caller's traceparent");
    assert_eq!(req.kind, 2);
    assert_eq!(req.service.as_deref(), Some("switchyard"));
    let d = h.decision(0).await;
    assert_eq!(
        d["trace_id"],
        req.trace_id.as_str(),
        "the log names the trace"
    );
    assert_eq!(req.attr("switchyard.request_id"), &d["request_id"]);
    assert_eq!(req.attr("switchyard.route"), "chat");
    assert_eq!(req.attr("http.response.status_code"), 200);
    assert_eq!(req.attr("switchyard.stream"), false);
    assert_eq!(req.status, 0);
    assert_eq!(route.attr("switchyard.route.candidates"), 1);
    assert_eq!(route.attr("switchyard.route.selected"), "mock/gpt-4o-mini");
    assert_eq!(attempts.len(), 1);
    let a = attempts[0];
    assert_eq!(a.name, "chat gpt-4o-mini");
    assert_eq!(a.attr("gen_ai.operation.name"), "chat");
    assert_eq!(a.attr("gen_ai.provider.name"), "openai");
    assert_eq!(a.attr("switchyard.provider"), "mock");
    assert_eq!(
        a.attr("gen_ai.request.model"),
        "gpt-4o-mini",
        "the upstream model asked for"
    );
    assert_eq!(
        a.attr("gen_ai.response.model"),
        "gpt-4o-mini",
        "the model the upstream reported"
    );
    assert_eq!(
        req.attr("gen_ai.request.model"),
        "chat",
        "what the client asked for"
    );
    assert_eq!(a.attr("switchyard.deployment"), "mock/gpt-4o-mini");
    assert_eq!(a.attr("switchyard.outcome"), "ok");
    assert_eq!(a.attr("switchyard.resumed"), false);
    assert_eq!(a.status, 0);
    let (input, output) = (
        body["usage"]["prompt_tokens"].as_u64().unwrap(),
        body["usage"]["completion_tokens"].as_u64().unwrap(),
    );
    assert!(input > 0 && output > 0);
    assert_eq!(as_u64(a.attr("gen_ai.usage.input_tokens")), input);
    assert_eq!(as_u64(a.attr("gen_ai.usage.output_tokens")), output);
    let cost = (input as f64 * 1.0 + output as f64 * 2.0) / 1e6;
    assert!((a.attr("switchyard.cost_usd").as_f64().unwrap() - cost).abs() < 1e-12);
    assert!((req.attr("switchyard.cost_usd").as_f64().unwrap() - cost).abs() < 1e-12);
    // The upstream call went out under the attempt span.
    assert_eq!(
        h.mock.requests()[0].header("traceparent").unwrap(),
        format!("00-{}-{}-01", a.trace_id, a.span_id)
    );
}

/// GenAI conventions (CONTRACT §8): an attempt asks the upstream for the
/// deployment's model and records the one the upstream says answered,
/// stream or not; the client's `model` (a route) is the request span's.
#[tokio::test]
async fn attempt_spans_name_the_model_asked_for_and_the_one_that_answered() {
    let r = Receiver::start_grpc().await;
    let h = traced(&r, "grpc", 1.0, common::ONE_OPENAI).await;
    let fixture = |name: &str| {
        std::fs::read_to_string(format!(
            "{}/../../fixtures/providers/openai/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    };
    let mut sse = Behavior::status(200, fixture("stream_text_usage.sse"));
    sse.headers
        .insert("content-type".into(), "text/event-stream".into());
    h.mock.script(vec![
        Behavior::status(200, fixture("chat_text_gpt41.response.json")),
        sse,
    ]);
    let mut seen = Vec::new();
    for (i, stream) in [false, true].into_iter().enumerate() {
        let resp = chat(&h, stream, None).await;
        assert_eq!(resp.status(), 200);
        let _ = resp.bytes().await.unwrap();
        let spans = r.wait_spans(3 * (i + 1)).await;
        // This request's trace: the one not seen before.
        let trace = spans
            .iter()
            .map(|s| s.trace_id.clone())
            .find(|t| !seen.contains(t))
            .unwrap();
        seen.push(trace.clone());
        let mine: Vec<Span> = spans.into_iter().filter(|s| s.trace_id == trace).collect();
        let (req, _, attempts) = tree(&mine);
        assert_eq!(req.attr("gen_ai.request.model"), "chat", "stream {stream}");
        let a = attempts[0];
        assert_eq!(
            a.attr("gen_ai.request.model"),
            "gpt-4o-mini",
            "stream {stream}"
        );
        assert_eq!(
            a.attr("gen_ai.response.model"),
            "gpt-4.1-nano-2025-04-14",
            "stream {stream}"
        );
        assert_eq!(a.name, "chat gpt-4o-mini");
    }
}

#[tokio::test]
async fn a_stream_is_one_trace_whose_attempt_lasts_the_stream() {
    let r = Receiver::start_grpc().await;
    let h = traced(&r, "grpc", 1.0, common::ONE_OPENAI).await;
    h.mock.set_default(
        Behavior::text("one two three four")
            .chunks(4)
            .chunk_delay(30),
    );
    let body = chat(&h, true, None).await.text().await.unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let spans = r.wait_spans(3).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let (req, _, attempts) = tree(&spans);
    assert_eq!(req.attr("switchyard.stream"), true);
    let a = attempts[0];
    // The call is the whole stream, not just its opening (4 chunks 30 ms apart).
    assert!(a.end - a.start >= 80_000_000, "{a:#?}");
    let d = h.decision(0).await;
    assert_eq!(a.attr("gen_ai.usage.input_tokens"), &d["tokens"]["input"]);
    assert_eq!(a.attr("gen_ai.usage.output_tokens"), &d["tokens"]["output"]);
    assert!(as_u64(a.attr("gen_ai.usage.output_tokens")) > 0);
    assert_eq!(a.attr("gen_ai.response.model"), "gpt-4o-mini");
}

#[tokio::test]
async fn the_callers_traceparent_is_joined_and_the_upstream_gets_the_attempt_span() {
    let r = Receiver::start_grpc().await;
    let h = traced(&r, "grpc", 1.0, common::ONE_OPENAI).await;
    let tp = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    assert_eq!(chat(&h, false, Some(&tp)).await.status(), 200);
    let spans = r.wait_spans(3).await;
    let (req, _, attempts) = tree(&spans);
    assert!(
        spans.iter().all(|s| s.trace_id == CALLER_TRACE),
        "{spans:#?}"
    );
    assert_eq!(req.parent, CALLER_SPAN);
    let sent = h.mock.requests()[0]
        .header("traceparent")
        .unwrap()
        .to_owned();
    assert_eq!(
        sent,
        format!("00-{CALLER_TRACE}-{}-01", attempts[0].span_id)
    );
    assert_ne!(attempts[0].span_id, CALLER_SPAN);
    assert_eq!(h.decision(0).await["trace_id"], CALLER_TRACE);
}

#[tokio::test]
async fn a_retried_request_has_a_span_per_attempt() {
    let yaml = r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a], retry: { attempts: 2 } }
"#;
    let r = Receiver::start_grpc().await;
    let h = traced(&r, "grpc", 1.0, yaml).await;
    h.mock
        .script(vec![Behavior::fixture("openai/error_503_overloaded")]);
    assert_eq!(chat(&h, false, None).await.status(), 200);
    let spans = r.wait_spans(4).await;
    assert_eq!(spans.len(), 4, "{spans:#?}");
    let (_, _, attempts) = tree(&spans);
    assert_eq!(attempts.len(), 2);
    let (first, second) = (attempts[0], attempts[1]);
    assert_eq!(first.attr("switchyard.outcome"), "overloaded");
    assert_eq!(first.attr("error.type"), "overloaded");
    assert_eq!(first.attr("http.response.status_code"), 503);
    assert_eq!(first.status, 2, "error status");
    assert_eq!(first.attr("gen_ai.response.model"), &Value::Null);
    assert_eq!(second.attr("switchyard.outcome"), "ok");
    assert_eq!(second.status, 0);
    assert!(first.end <= second.start);
    // Each upstream call named its own attempt span.
    let sent: Vec<String> = h
        .mock
        .requests()
        .iter()
        .map(|q| q.header("traceparent").unwrap().to_owned())
        .collect();
    let want: Vec<String> = attempts
        .iter()
        .map(|a| format!("00-{}-{}-01", a.trace_id, a.span_id))
        .collect();
    assert_eq!(sent, want);
}

#[tokio::test]
async fn a_resumed_stream_has_spans_for_the_broken_call_and_the_continuation() {
    let yaml = r#"
providers:
  pa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: pa/a, provider: pa, model: a, capabilities: [streaming, prefill] }
routes:
  chat: { targets: [pa/a] }
"#;
    let r = Receiver::start_grpc().await;
    let h = traced(&r, "grpc", 1.0, yaml).await;
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(3)]);
    let body = chat(&h, true, None).await.text().await.unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let spans = r.wait_spans(4).await;
    assert_eq!(spans.len(), 4, "{spans:#?}");
    let (_, _, attempts) = tree(&spans);
    assert_eq!(attempts.len(), 2);
    let (broken, resumed) = (attempts[0], attempts[1]);
    assert_eq!(broken.attr("switchyard.resumed"), false);
    assert_ne!(broken.attr("switchyard.outcome"), "ok");
    assert_eq!(broken.status, 2);
    assert_eq!(resumed.attr("switchyard.resumed"), true);
    assert_eq!(resumed.attr("switchyard.outcome"), "ok");
    // The broken call ends where the continuation begins.
    assert!(broken.end <= resumed.start);
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][1]["resumed"], true, "{d}");
    let reqs = h.mock.requests();
    assert_eq!(
        reqs[1].header("traceparent").unwrap(),
        format!("00-{}-{}-01", resumed.trace_id, resumed.span_id)
    );
}

#[tokio::test]
async fn spans_go_over_http_protobuf_too() {
    let r = Receiver::start_http().await;
    let h = traced(&r, "http", 1.0, common::ONE_OPENAI).await;
    assert_eq!(chat(&h, false, None).await.status(), 200);
    let spans = r.wait_spans(3).await;
    assert_eq!(spans.len(), 3, "{spans:#?}");
    let (req, _, attempts) = tree(&spans);
    assert_eq!(req.attr("switchyard.route"), "chat");
    assert_eq!(attempts[0].attr("gen_ai.provider.name"), "openai");
    assert_eq!(h.decision(0).await["trace_id"], req.trace_id.as_str());
}

#[tokio::test]
async fn sampling_zero_exports_nothing_but_a_sampled_in_caller_is_followed() {
    let r = Receiver::start_grpc().await;
    let h = traced(&r, "grpc", 0.0, common::ONE_OPENAI).await;
    assert_eq!(chat(&h, false, None).await.status(), 200);
    let unsampled = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-00");
    assert_eq!(chat(&h, false, Some(&unsampled)).await.status(), 200);
    // Not sampled: the caller's traceparent goes upstream as it came, and
    // the log has no trace of ours.
    let reqs = h.mock.requests();
    assert_eq!(reqs[0].header("traceparent"), None);
    assert_eq!(reqs[1].header("traceparent"), Some(unsampled.as_str()));
    assert_eq!(h.decision(0).await["trace_id"], Value::Null);
    assert_eq!(h.decision(1).await["trace_id"], CALLER_TRACE);
    // A sampled-in caller is traced whatever the ratio.
    let other = "0af7651916cd43dd8448eb211c80319c";
    let sampled = format!("00-{other}-{CALLER_SPAN}-01");
    assert_eq!(chat(&h, false, Some(&sampled)).await.status(), 200);
    let spans = r.wait_spans(3).await;
    assert_eq!(spans.len(), 3, "only the sampled-in request: {spans:#?}");
    assert!(spans.iter().all(|s| s.trace_id == other));
    assert_eq!(r.spans_for(CALLER_TRACE).len(), 0);
}

/// One deployment, one try: an upstream error is the request's at once.
const ONE_TRY: &str = r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/a, provider: mock, model: a, capabilities: [streaming] }
routes:
  chat: { targets: [mock/a], retry: { attempts: 1 } }
"#;

/// Sampled out at the start (`trace_sample: 0`), with `trace_slow` when given.
async fn tail_traced(r: &Receiver, slow: Option<&str>) -> common::Harness {
    let mut obs = otlp::observability(&r.endpoint, "grpc", 0.0);
    if let Some(slow) = slow {
        obs.push_str(&format!("  trace_slow: {slow}\n"));
    }
    common::start(&format!("{ONE_TRY}\n{obs}")).await
}

/// Wait until every trace in `ids` (the decision log's) has its request
/// span, then return every span received. The export task sends in the
/// order requests finished, so a request that finished before these and
/// was exported would be in by then too: no sleep proves "nothing else".
async fn exported(r: &Receiver, ids: &[&str]) -> Vec<Span> {
    common::eventually(
        || async {
            ids.iter().all(|id| {
                r.spans_for(id)
                    .iter()
                    .any(|s| s.name == "switchyard.request")
            })
        },
        "the kept traces' request spans",
    )
    .await;
    r.spans()
}

/// The traces among `spans`, by id.
fn trace_ids(spans: &[Span]) -> std::collections::BTreeSet<String> {
    spans.iter().map(|s| s.trace_id.clone()).collect()
}

/// Tail rule (contract §10): a request sampled out at the start is still
/// exported when it ends in an error, whoever made the head decision (the
/// ratio, or a caller's `-00`); a fast success sampled out is not, and
/// costs no `traceparent` upstream.
#[tokio::test]
async fn sampled_out_errors_are_traced_and_fast_successes_are_not() {
    let r = Receiver::start_grpc().await;
    let h = tail_traced(&r, Some("200ms")).await;
    assert_eq!(chat(&h, false, None).await.status(), 200);
    h.mock
        .script(vec![Behavior::fixture("openai/error_500_server_error")]);
    let failed = chat(&h, false, None).await;
    assert!(failed.status().is_server_error(), "{}", failed.status());
    let unsampled = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-00");
    h.mock
        .script(vec![Behavior::fixture("openai/error_500_server_error")]);
    let failed = chat(&h, false, Some(&unsampled)).await;
    assert!(failed.status().is_server_error(), "{}", failed.status());

    let (fast, error, joined) = (
        h.decision(0).await,
        h.decision(1).await,
        h.decision(2).await,
    );
    assert_eq!(fast["outcome"], "ok");
    assert_eq!(fast["trace_id"], Value::Null, "not traced: {fast}");
    assert_ne!(error["outcome"], "ok");
    let error_trace = error["trace_id"]
        .as_str()
        .expect("the log names the kept trace");
    assert_eq!(joined["trace_id"], CALLER_TRACE);

    let spans = exported(&r, &[error_trace, CALLER_TRACE]).await;
    assert_eq!(
        trace_ids(&spans),
        [error_trace.to_owned(), CALLER_TRACE.to_owned()].into(),
        "only the errors: {spans:#?}"
    );
    assert!(
        spans
            .iter()
            .all(|s| s.attr("switchyard.request_id") != &fast["request_id"]),
        "{spans:#?}"
    );
    let mine = r.spans_for(error_trace);
    let (req, _, attempts) = tree(&mine);
    assert_eq!(req.attr("switchyard.request_id"), &error["request_id"]);
    assert_eq!(req.attr("error.type"), &error["outcome"]);
    assert_eq!(req.status, 2, "error status");
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].attr("http.response.status_code"), 500);
    assert_eq!(attempts[0].status, 2);
    // The caller's unsampled trace is joined where it erred.
    let theirs = r.spans_for(CALLER_TRACE);
    let (req, _, _) = tree(&theirs);
    assert_eq!(req.parent, CALLER_SPAN);
    // Decided at the end: nothing went upstream that a sampled-in request
    // would send (the caller's header went as it came).
    let sent: Vec<Option<String>> = h
        .mock
        .requests()
        .iter()
        .map(|q| q.header("traceparent").map(str::to_owned))
        .collect();
    assert_eq!(sent, [None, None, Some(unsampled)]);
}

/// Errors are kept without `trace_slow` too (it is off by default: only
/// its latency rule is).
#[tokio::test]
async fn errors_are_traced_without_trace_slow() {
    let r = Receiver::start_grpc().await;
    let h = tail_traced(&r, None).await;
    h.mock
        .set_default(Behavior::text("slow but fine").latency(300));
    assert_eq!(chat(&h, false, None).await.status(), 200);
    h.mock
        .script(vec![Behavior::fixture("openai/error_500_server_error")]);
    assert!(chat(&h, false, None).await.status().is_server_error());
    let (slow, error) = (h.decision(0).await, h.decision(1).await);
    assert_eq!(slow["trace_id"], Value::Null, "no latency rule: {slow}");
    let error_trace = error["trace_id"].as_str().unwrap();
    let spans = exported(&r, &[error_trace]).await;
    assert_eq!(
        trace_ids(&spans),
        [error_trace.to_owned()].into(),
        "{spans:#?}"
    );
}

/// A request slower than `trace_slow` end to end is kept: a slow answer,
/// and a stream whose opening is quick but which lasts past it, exported
/// once it ended; a fast one before them is not.
#[tokio::test]
async fn sampled_out_requests_slower_than_trace_slow_are_traced() {
    let r = Receiver::start_grpc().await;
    let h = tail_traced(&r, Some("200ms")).await;
    assert_eq!(chat(&h, false, None).await.status(), 200);
    h.mock.script(vec![
        Behavior::text("a slow answer").latency(400),
        Behavior::text("one two three four")
            .chunks(4)
            .chunk_delay(100),
    ]);
    assert_eq!(chat(&h, false, None).await.status(), 200);
    let stream = chat(&h, true, None).await;
    assert_eq!(stream.status(), 200);
    let body = stream.text().await.unwrap();
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");

    let (fast, slow, long) = (
        h.decision(0).await,
        h.decision(1).await,
        h.decision(2).await,
    );
    assert_eq!(fast["trace_id"], Value::Null, "not traced: {fast}");
    for d in [&slow, &long] {
        assert_eq!(d["outcome"], "ok", "{d}");
        assert!(d["duration_ms"].as_f64().unwrap() > 200.0, "{d}");
    }
    // The stream opened well within the threshold: its whole length counts.
    assert!(
        long["attempts"][0]["ttfb_ms"].as_f64().unwrap() < 200.0,
        "{long}"
    );
    let (slow_trace, long_trace) = (
        slow["trace_id"].as_str().expect("kept"),
        long["trace_id"].as_str().expect("kept"),
    );
    let spans = exported(&r, &[slow_trace, long_trace]).await;
    assert_eq!(
        trace_ids(&spans),
        [slow_trace.to_owned(), long_trace.to_owned()].into(),
        "only the slow ones: {spans:#?}"
    );
    let mine = r.spans_for(long_trace);
    let (req, _, attempts) = tree(&mine);
    assert_eq!(req.attr("switchyard.stream"), true);
    assert_eq!(req.status, 0, "not an error");
    assert!(req.end - req.start >= 200_000_000, "{req:#?}");
    // The call is the whole stream, as when sampled in.
    assert!(
        attempts[0].end - attempts[0].start >= 200_000_000,
        "{mine:#?}"
    );
    assert!(h
        .mock
        .requests()
        .iter()
        .all(|q| q.header("traceparent").is_none()));
}

#[tokio::test]
async fn a_collector_that_is_down_costs_counted_spans_not_requests() {
    // A port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let obs = otlp::observability(&endpoint, "grpc", 1.0);
    let h = common::start(&format!("{}\n{obs}", common::ONE_OPENAI)).await;
    let m = h.metrics().await;
    assert!(m.contains("switchyard_trace_spans_dropped_total 0"), "{m}");
    for _ in 0..5 {
        let started = Instant::now();
        assert_eq!(chat(&h, false, None).await.status(), 200);
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
    }
    let dropped = common::eventually_within(
        Duration::from_secs(15),
        || async {
            let m = h.metrics().await;
            let dropped = m
                .lines()
                .find_map(|l| l.strip_prefix("switchyard_trace_spans_dropped_total "))
                .map(|v| v.trim().parse::<f64>().unwrap())
                .unwrap_or(0.0);
            (dropped >= 15.0).then_some(dropped)
        },
        "15 spans counted as dropped",
    )
    .await;
    assert_eq!(dropped, 15.0, "3 spans for each of 5 requests");
}

#[tokio::test]
async fn a_reload_changes_the_sampling_and_refuses_to_move_the_exporter() {
    let r = Receiver::start_grpc().await;
    let mock = switchyard_mock::MockServer::start("127.0.0.1:0")
        .await
        .unwrap();
    let text = |endpoint: &str, sample: f64| {
        let obs = otlp::observability(endpoint, "grpc", sample);
        let yaml = common::ONE_OPENAI.replace("{mock}", &mock.base_url());
        format!("server: {{ listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0 }}\nusage: {{ store: off }}\n{yaml}\n{obs}")
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.yaml");
    std::fs::write(&path, text(&r.endpoint, 0.0)).unwrap();
    let cfg = switchyard::config::load_str(&text(&r.endpoint, 0.0), "t.yaml", &|name| {
        (name == "TEST_KEY").then(|| "sk-test".to_string())
    })
    .unwrap();
    let gw = switchyard::server::start(
        cfg,
        switchyard::server::Options {
            decisions: switchyard::observe::decision_log::DecisionSink::Off,
            config_source: Some(switchyard::config::source::Source::File(
                path.clone().into(),
            )),
            workers: switchyard::server::Workers::Current,
        },
    )
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let ask = || {
        http.post(format!("{}/v1/chat/completions", gw.base_url()))
            .json(&json!({"model": "chat", "messages": common::user("hi")}))
            .send()
    };
    let reload = || http.post(format!("{}/admin/reload", gw.admin_url())).send();
    assert_eq!(ask().await.unwrap().status(), 200);
    // The variable the key names is read from the process environment on
    // reload: the provider then has no key, which the mock does not check.
    std::fs::write(
        &path,
        text(&r.endpoint, 1.0).replace("    keys: [{ env: TEST_KEY }]\n", ""),
    )
    .unwrap();
    assert_eq!(reload().await.unwrap().status(), 200);
    assert_eq!(ask().await.unwrap().status(), 200);
    let spans = r.wait_spans(3).await;
    assert_eq!(
        spans.len(),
        3,
        "only the request after the reload: {spans:#?}"
    );
    std::fs::write(
        &path,
        text("http://127.0.0.1:1", 1.0).replace("    keys: [{ env: TEST_KEY }]\n", ""),
    )
    .unwrap();
    let refused = reload().await.unwrap();
    assert_eq!(refused.status(), 422);
    let body = refused.text().await.unwrap();
    assert!(
        body.contains("otlp_endpoint and otlp_protocol take effect at start-up only"),
        "{body}"
    );
    gw.shutdown().await;
}

#[tokio::test]
async fn spans_still_queued_at_shutdown_are_exported() {
    let r = Receiver::start_grpc().await;
    let h = traced(&r, "grpc", 1.0, common::ONE_OPENAI).await;
    assert_eq!(chat(&h, false, None).await.status(), 200);
    // Well within the export delay: the spans are still queued.
    let common::Harness { gw, mock, .. } = h;
    gw.shutdown().await;
    assert_eq!(r.spans().len(), 3, "exported before shutdown returned");
    drop(mock);
}

#[tokio::test]
async fn a_cached_request_traces_its_lookup_and_no_upstream_call() {
    let r = Receiver::start_grpc().await;
    let yaml = format!("{}\ncache: {{ backend: memory }}\n", common::ONE_OPENAI);
    let h = traced(&r, "grpc", 1.0, &yaml).await;
    let ask = || {
        reqwest::Client::new()
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": "chat", "temperature": 0, "messages": common::user("again?")}))
            .send()
    };
    assert_eq!(ask().await.unwrap().headers()["x-switchyard-cache"], "miss");
    let hit = ask().await.unwrap();
    assert_eq!(hit.headers()["x-switchyard-cache"], "hit");
    // Miss: request, cache, route, attempt. Hit: request, cache.
    let spans = r.wait_spans(6).await;
    let traces: std::collections::BTreeSet<&str> =
        spans.iter().map(|s| s.trace_id.as_str()).collect();
    assert_eq!(traces.len(), 2, "{spans:#?}");
    let d = h.decision(1).await;
    let hit_spans = r.spans_for(d["trace_id"].as_str().unwrap());
    let names: Vec<&str> = hit_spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(hit_spans.len(), 2, "{names:?}");
    let (req, cache) = (
        otlp::one(&hit_spans, "switchyard.request"),
        otlp::one(&hit_spans, "switchyard.cache"),
    );
    assert_eq!(cache.parent, req.span_id);
    assert_eq!(cache.attr("switchyard.cache.result"), "hit");
    assert_eq!(req.attr("switchyard.cache"), "hit");
    assert!(otlp::attempts(&hit_spans).is_empty(), "no upstream call");
    let d0 = h.decision(0).await;
    let miss_spans = r.spans_for(d0["trace_id"].as_str().unwrap());
    assert_eq!(
        otlp::one(&miss_spans, "switchyard.cache").attr("switchyard.cache.result"),
        "miss"
    );
    assert_eq!(otlp::attempts(&miss_spans).len(), 1);
}
