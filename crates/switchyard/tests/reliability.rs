//! Routing and reliability scenarios over real HTTP with scripted upstream
//! faults: what the client saw, what the upstreams received (count and
//! order), the headers and the decision log.

mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault, MockServer};

/// One deployment that serves one request at a time and queues none.
const ONE_SLOT: &str = r#"
providers:
  mock:
    protocol: openai
    base_url: "{mock}/v1"
    limits: { concurrency: 1, queue: 0 }
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a] }
"#;

fn chat() -> Value {
    json!({"model": "chat", "messages": common::user("hi")})
}

async fn admin_state(h: &common::Harness) -> Value {
    reqwest::get(format!("{}/admin/state", h.gw.admin_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn deployment<'a>(state: &'a Value, id: &str) -> &'a Value {
    state["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .unwrap()
}

async fn admin_post(h: &common::Harness, path: &str) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{}{path}", h.gw.admin_url()))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn rate_limit_is_retried_after_retry_after_on_the_same_deployment() {
    let h = common::start(common::TWO_TARGETS).await;
    h.mock.script(vec![Behavior::fixture(
        "openai/error_429_rate_limit_tokens",
    )]);
    let started = Instant::now();
    let resp = h.post(chat()).await;
    assert_eq!(resp.status(), 200);
    // Retry-After: 1 was honoured: a back-off signal, not an outage.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/a");
    assert_eq!(resp.headers()["x-switchyard-attempts"], "2");
    assert!(resp.headers().get("x-switchyard-fallback-reason").is_none());
    let models: Vec<String> = h
        .mock
        .requests()
        .iter()
        .map(|r| {
            r.json.as_ref().unwrap()["model"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(models, ["a", "a"]);
    let d = h.decision(0).await;
    assert_eq!(d["retries"], 1);
    assert_eq!(d["attempts"][0]["outcome"], "rate_limited");
    let m = reqwest::get(format!("{}/metrics", h.gw.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains(r#"switchyard_retries_total{deployment="mock/a"} 1"#),
        "{m}"
    );
    assert!(m.contains(r#"switchyard_upstream_attempts_total{deployment="mock/a",provider="mock",code="rate_limited"} 1"#), "{m}");
}

#[tokio::test]
async fn client_errors_and_content_filter_are_never_retried() {
    let h = common::start(common::TWO_TARGETS).await;
    for fixture in [
        "openai/error_400_invalid_request",
        "azure/error_400_content_filter",
    ] {
        h.mock.clear_requests();
        h.mock.set_default(Behavior::fixture(fixture));
        assert_eq!(h.post(chat()).await.status(), 400);
        assert_eq!(h.mock.request_count(), 1, "{fixture}");
    }
}

/// A key pool rotates by weight: over many requests each key's share of
/// the calls follows its weight (gradual rotation: move weight, not keys).
#[tokio::test]
async fn keys_are_used_in_proportion_to_their_weights() {
    let yaml = r#"
providers:
  mock:
    protocol: openai
    base_url: "{mock}/v1"
    keys: [{ value: key-a, weight: 3 }, { value: key-b, weight: 1 }, { value: key-c, weight: 0 }]
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a] }
"#;
    let h = common::start(yaml).await;
    const N: usize = 400;
    let client = reqwest::Client::new();
    for _ in 0..N {
        let resp = client
            .post(h.url("/v1/chat/completions"))
            .json(&chat())
            .send();
        assert_eq!(resp.await.unwrap().status(), 200);
    }
    let used = |key: &str| {
        h.mock
            .requests()
            .iter()
            .filter(|r| r.header("authorization") == Some(&format!("Bearer {key}")))
            .count()
    };
    let (a, b, c) = (used("key-a"), used("key-b"), used("key-c"));
    assert_eq!(a + b + c, N.min(switchyard_mock::MAX_RECORDED));
    // 3:1 expected 300/100; binomial sd ≈ 8.7, so ±45 is over 5 sd.
    assert!((255..=345).contains(&a), "key-a {a}, key-b {b}");
    assert!((55..=145).contains(&b), "key-a {a}, key-b {b}");
    assert_eq!(c, 0, "a weight of 0 takes no traffic");
}

#[tokio::test]
async fn upstream_401_sets_the_key_aside_and_tries_the_next_key() {
    let yaml = r#"
providers:
  mock:
    protocol: openai
    base_url: "{mock}/v1"
    keys: [{ value: key-a, weight: 1000 }, { value: key-b, weight: 1 }]
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a] }
"#;
    let h = common::start(yaml).await;
    h.mock.set_valid_keys(vec!["key-b".into()]);
    for _ in 0..5 {
        assert_eq!(h.post(chat()).await.status(), 200);
    }
    let keys: Vec<String> = h
        .mock
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.header("authorization").unwrap().to_owned())
        .collect();
    // key-a (heavily weighted) failed once, was quarantined, never used again.
    assert_eq!(
        keys.iter().filter(|k| k.ends_with("key-a")).count(),
        1,
        "{keys:?}"
    );
    let state = admin_state(&h).await;
    let key_states = &deployment(&state, "mock/a")["keys"];
    assert!(
        key_states.to_string().contains("quarantined"),
        "{key_states}"
    );
    // The secret itself never shows.
    assert!(!state.to_string().contains("key-a\""), "{state}");
}

#[tokio::test]
async fn context_too_long_escalates_to_a_larger_window() {
    let yaml = r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/small, provider: mock, model: small, context_window: 8000 }
  - { id: mock/large, provider: mock, model: large, context_window: 200000 }
routes:
  chat: { targets: [mock/small, mock/large], on_context_overflow: escalate }
"#;
    let h = common::start(yaml).await;
    // The upstream says too long (its tokenizer knows better than our estimate).
    h.mock
        .script(vec![Behavior::fixture("openai/error_400_context_length")]);
    let resp = h.post(chat()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/large");
    assert_eq!(
        resp.headers()["x-switchyard-fallback-reason"],
        "context_too_long"
    );
    // A prompt estimated too long for the small window skips it outright.
    h.mock.clear_requests();
    let big = "word ".repeat(40_000);
    let resp = h
        .post(json!({"model": "chat", "messages": common::user(&big)}))
        .await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/large");
    assert_eq!(h.mock.request_count(), 1);
    let d = h.decision(1).await;
    assert!(
        d["skipped"]
            .to_string()
            .contains("context_window_too_small"),
        "{d}"
    );
}

#[tokio::test]
async fn a_full_queue_answers_429_fast_with_retry_after() {
    let h = common::start(ONE_SLOT).await;
    h.mock.set_default(Behavior::default().latency(600));
    let slow = h.post(chat());
    let fast = async {
        // The scenario: the slow request holds the one slot first.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let started = Instant::now();
        let r = h.post(chat()).await;
        (r, started.elapsed())
    };
    let (slow, (fast, took)) = tokio::join!(slow, fast);
    assert_eq!(slow.status(), 200);
    assert_eq!(fast.status(), 429);
    assert!(took < Duration::from_millis(300), "rejected fast: {took:?}");
    assert!(fast.headers().contains_key("retry-after"));
    let body: Value = fast.json().await.unwrap();
    assert_eq!(body["error"]["code"], "gateway_rate_limited");
    assert_eq!(
        h.mock.request_count(),
        1,
        "the busy deployment was not sent more"
    );
}

#[tokio::test]
async fn the_route_deadline_bounds_all_attempts() {
    let yaml = r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1", timeouts: { first_byte: 10s } }
models:
  - { id: mock/a, provider: mock, model: a }
  - { id: mock/b, provider: mock, model: b }
routes:
  chat: { targets: [mock/a, mock/b], deadline: 400ms }
"#;
    let h = common::start(yaml).await;
    h.mock.set_default(Behavior::fault(Fault::Hang));
    let started = Instant::now();
    let resp = h.post(chat()).await;
    assert_eq!(resp.status(), 504);
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "timeout");
}

#[tokio::test]
async fn a_refusing_deployment_opens_its_circuit_and_a_probe_closes_it_after_recovery() {
    let second = MockServer::start("127.0.0.1:0").await.unwrap();
    let yaml = format!(
        r#"
providers:
  flaky:
    protocol: openai
    base_url: "{}/v1"
    circuit: {{ consecutive_failures: 3, cooldown: 500ms, min_requests: 100 }}
  good: {{ protocol: openai, base_url: "{{mock}}/v1" }}
models:
  - {{ id: flaky/m, provider: flaky, model: m }}
  - {{ id: good/m, provider: good, model: m }}
routes:
  chat: {{ targets: [flaky/m, good/m], retry: {{ attempts: 1 }} }}
"#,
        second.base_url()
    );
    let h = common::start(&yaml).await;
    second.stop_listening().await;
    for _ in 0..6 {
        let resp = h.post(chat()).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["x-switchyard-deployment"], "good/m");
    }
    let state = admin_state(&h).await;
    assert_eq!(deployment(&state, "flaky/m")["circuit"], "open");
    // Skipped candidates are not counted as upstream attempts.
    let m = reqwest::get(format!("{}/metrics", h.gw.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(m.contains(r#"switchyard_upstream_attempts_total{deployment="flaky/m",provider="flaky",code="connection_error"} 3"#), "{m}");
    assert!(
        !m.lines()
            .any(|l| l.starts_with("switchyard_upstream_attempts_total")
                && l.contains("circuit_open")),
        "{m}"
    );
    // They were fallbacks, and said why.
    assert!(
        m.contains(r#"switchyard_fallbacks_total{reason="circuit_open"} 3"#),
        "{m}"
    );
    // Requests 4..6 did not even try the open deployment.
    let d = h.decision(5).await;
    assert!(d["skipped"].to_string().contains("circuit_open"), "{d}");
    assert_eq!(d["attempts"].as_array().unwrap().len(), 1);
    // It recovers; after the cooldown one probe closes the circuit again.
    second.resume_listening().await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Its probe is due: a half-open first choice keeps a share of the
    // requests (docs/src/routing.md), so one of the next few goes to it.
    let mut sent = 0;
    loop {
        let resp = h.post(chat()).await;
        assert_eq!(resp.status(), 200);
        sent += 1;
        if resp.headers()["x-switchyard-deployment"] == "flaky/m" {
            break;
        }
        assert!(sent < 200, "the probe never came");
    }
    assert_eq!(
        deployment(&admin_state(&h).await, "flaky/m")["circuit"],
        "closed"
    );
    assert_eq!(second.request_count(), 1);
}

/// A first choice that was skipped rather than failed still makes the
/// answer a fallback, and says why (contract §3).
#[tokio::test]
async fn a_skipped_first_choice_is_named_in_the_fallback_reason() {
    let h = common::start(common::TWO_TARGETS).await;
    let resp = h.post(chat()).await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/a");
    assert!(resp.headers().get("x-switchyard-fallback-reason").is_none());
    admin_post(&h, "/admin/deployments/mock%2Fa/open").await;
    let resp = h.post(chat()).await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/b");
    assert_eq!(
        resp.headers()["x-switchyard-fallback-reason"],
        "circuit_open"
    );
    assert_eq!(h.decision(1).await["fallback_reason"], "circuit_open");
    // A stream says it too.
    let resp = h
        .post(json!({"model": "chat", "stream": true, "messages": common::user("hi")}))
        .await;
    assert_eq!(
        resp.headers()["x-switchyard-fallback-reason"],
        "circuit_open"
    );
    // Back to the first choice: no reason.
    admin_post(&h, "/admin/deployments/mock%2Fa/close").await;
    let resp = h.post(chat()).await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/a");
    assert!(resp.headers().get("x-switchyard-fallback-reason").is_none());
}

#[tokio::test]
async fn circuits_can_be_opened_and_closed_by_hand() {
    let h = common::start(common::ONE_OPENAI).await;
    assert_eq!(
        admin_post(&h, "/admin/deployments/mock%2Fgpt-4o-mini/open")
            .await
            .status(),
        200
    );
    let ready = reqwest::get(format!("{}/readyz", h.gw.admin_url()))
        .await
        .unwrap();
    assert_eq!(ready.status(), 503, "no deployment can take traffic");
    let resp = h.post(chat()).await;
    assert_eq!(resp.status(), 503);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "no_healthy_deployment");
    assert_eq!(h.mock.request_count(), 0);
    assert_eq!(
        admin_post(&h, "/admin/deployments/mock%2Fgpt-4o-mini/close")
            .await
            .status(),
        200
    );
    assert_eq!(h.post(chat()).await.status(), 200);
    assert_eq!(
        admin_post(&h, "/admin/deployments/mock%2Fgpt-4o-mini/sideways")
            .await
            .status(),
        400
    );
    assert_eq!(
        admin_post(&h, "/admin/deployments/nope/open")
            .await
            .status(),
        404
    );
    let state = admin_state(&h).await;
    assert_eq!(state["config_version"].as_str().unwrap().len(), 64);
    let d = deployment(&state, "mock/gpt-4o-mini");
    for field in [
        "circuit",
        "health_score",
        "error_rate",
        "latency_p50_ms",
        "latency_p95_ms",
        "inflight",
        "rpm_used",
        "tpm_used",
        "keys",
    ] {
        assert!(d.get(field).is_some(), "missing {field}: {d}");
    }
    let m = reqwest::get(format!("{}/metrics", h.gw.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains(r#"switchyard_circuit_state{deployment="mock/gpt-4o-mini",state="closed"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn sticky_sessions_stay_put_while_healthy_and_move_when_their_deployment_opens() {
    let yaml = r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/a, provider: mock, model: a }
  - { id: mock/b, provider: mock, model: b }
routes:
  chat: { strategy: weighted, targets: [mock/a, mock/b], sticky: true }
"#;
    let h = common::start(yaml).await;
    let send = || {
        reqwest::Client::new()
            .post(h.url("/v1/chat/completions"))
            .header("x-switchyard-session", "conv-42")
            .json(&chat())
            .send()
    };
    let first = send().await.unwrap().headers()["x-switchyard-deployment"]
        .to_str()
        .unwrap()
        .to_owned();
    for _ in 0..8 {
        assert_eq!(
            send().await.unwrap().headers()["x-switchyard-deployment"],
            first.as_str()
        );
    }
    admin_post(
        &h,
        &format!("/admin/deployments/{}/open", first.replace('/', "%2F")),
    )
    .await;
    let moved = send().await.unwrap().headers()["x-switchyard-deployment"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_ne!(moved, first);
    admin_post(
        &h,
        &format!("/admin/deployments/{}/close", first.replace('/', "%2F")),
    )
    .await;
    // The conversation now lives on its new deployment.
    for _ in 0..4 {
        assert_eq!(
            send().await.unwrap().headers()["x-switchyard-deployment"],
            moved.as_str()
        );
    }
}

#[tokio::test]
async fn strategies_and_constraints_order_the_candidates() {
    let yaml = r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/dear, provider: mock, model: dear, capabilities: [tools, streaming], pricing: { input: 10, output: 30 } }
  - { id: mock/cheap, provider: mock, model: cheap, capabilities: [streaming], pricing: { input: 0.1, output: 0.4 } }
routes:
  chat: { strategy: cost, targets: [mock/dear, mock/cheap] }
  capped: { strategy: priority, targets: [mock/dear, mock/cheap], max_cost_per_mtok: 5 }
"#;
    let h = common::start(yaml).await;
    let resp = h.post(chat()).await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/cheap");
    let d = h.decision(0).await;
    assert_eq!(d["candidates"][0]["deployment"], "mock/cheap");
    assert!(
        d["candidates"][0]["parts"]["est_cost_usd"]
            .as_f64()
            .unwrap()
            < d["candidates"][1]["parts"]["est_cost_usd"]
                .as_f64()
                .unwrap()
    );
    // A request with tools only goes where tools are.
    let tools = json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]);
    let resp = h
        .post(json!({"model": "chat", "messages": common::user("hi"), "tools": tools}))
        .await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/dear");
    // The price cap drops the dear deployment even though it is first.
    let resp = h
        .post(json!({"model": "capped", "messages": common::user("hi")}))
        .await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/cheap");
    let d = h.decision(2).await;
    assert!(
        d["skipped"].to_string().contains("over_max_cost_per_mtok"),
        "{d}"
    );
}

#[tokio::test]
async fn task_hints_prefer_their_targets() {
    let yaml = r#"
task_rules:
  - { task: code, keywords: [python, rust] }
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/general, provider: mock, model: general }
  - { id: mock/coder, provider: mock, model: coder }
routes:
  chat: { targets: [mock/general, mock/coder], tasks: { code: [mock/coder] } }
"#;
    let h = common::start(yaml).await;
    assert_eq!(
        h.post(chat()).await.headers()["x-switchyard-deployment"],
        "mock/general"
    );
    let resp = h
        .post(json!({"model": "chat", "messages": common::user("Write Rust please")}))
        .await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/coder");
    let resp = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .header("x-switchyard-task", "code")
        .json(&chat())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/coder");
    assert_eq!(h.decision(2).await["task"], "code");
}

/// `classify: true`: a request with no task header and no rule match is
/// labelled by the scene classifier (its latest user message), and the
/// label drives the route's task preferences; a header or a rule still
/// decides first. The label and where it came from are in the decision
/// log and the metrics.
#[tokio::test]
async fn the_scene_classifier_labels_what_header_and_rules_leave_open() {
    let yaml = r#"
task_rules:
  - { task: chat, keywords: [zzzq] }
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/general, provider: mock, model: general }
  - { id: mock/coder, provider: mock, model: coder }
  - { id: mock/poet, provider: mock, model: poet }
routes:
  chat: { targets: [mock/general, mock/coder, mock/poet], classify: true, tasks: { code: [mock/coder], creative: [mock/poet] } }
  plain: { targets: [mock/general, mock/coder] }
"#;
    let h = common::start(yaml).await;
    let ask = |model: &str, text: &str| json!({"model": model, "messages": common::user(text)});
    let code =
        "my Rust build fails with error[E0382]: borrow of moved value in main.rs, how do I fix it?";
    let poem = "写一首关于秋天和故乡的短诗";
    let cases = [
        (
            ask("chat", code),
            "mock/coder",
            Some(("code", "classifier")),
        ),
        (
            ask("chat", poem),
            "mock/poet",
            Some(("creative", "classifier")),
        ),
        // A rule decides before the classifier.
        (
            ask("chat", "zzzq write me a rust function"),
            "mock/general",
            Some(("chat", "rule")),
        ),
        // A route without `classify` gets no label.
        (ask("plain", code), "mock/general", None),
    ];
    for (i, (body, served, task)) in cases.iter().enumerate() {
        let resp = h.post(body.clone()).await;
        assert_eq!(
            resp.headers()["x-switchyard-deployment"],
            *served,
            "case {i}"
        );
        let line = h.decision(i).await;
        match task {
            Some((label, source)) => {
                assert_eq!(line["task"], *label, "case {i}: {line}");
                assert_eq!(line["task_source"], *source, "case {i}: {line}");
            }
            None => assert!(line.get("task").is_none(), "case {i}: {line}"),
        }
    }
    // The header wins over everything.
    let resp = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .header("x-switchyard-task", "creative")
        .json(&ask("chat", code))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/poet");
    assert_eq!(h.decision(4).await["task_source"], "header");
    let m = h.metrics().await;
    for line in [
        r#"switchyard_task_requests_total{route="chat",task="code",source="classifier"} 1"#,
        r#"switchyard_task_requests_total{route="chat",task="creative",source="classifier"} 1"#,
        r#"switchyard_task_requests_total{route="chat",task="creative",source="header"} 1"#,
    ] {
        assert!(m.contains(line), "{line} not in:\n{m}");
    }
}

#[tokio::test]
async fn a_clients_own_rpm_is_enforced_with_retry_after() {
    let yaml = r#"
clients:
  - { id: tiny, key_env: CLIENT_KEY, rpm: 2 }
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a] }
"#;
    let h = common::start(yaml).await;
    let send = || {
        reqwest::Client::new()
            .post(h.url("/v1/chat/completions"))
            .bearer_auth("client-secret")
            .json(&chat())
            .send()
    };
    assert_eq!(send().await.unwrap().status(), 200);
    assert_eq!(send().await.unwrap().status(), 200);
    let third = send().await.unwrap();
    assert_eq!(third.status(), 429);
    assert!(third.headers().contains_key("retry-after"));
    let body: Value = third.json().await.unwrap();
    assert_eq!(body["error"]["code"], "gateway_rate_limited");
    assert_eq!(h.mock.request_count(), 2);
    h.decision(2).await;
    let m = reqwest::get(format!("{}/metrics", h.gw.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains(r#"switchyard_ratelimit_rejections_total{scope="client"} 1"#),
        "{m}"
    );
}

#[tokio::test]
async fn an_upstream_that_says_its_quota_is_spent_is_rested_before_its_429() {
    let yaml = r#"
providers:
  spent:
    protocol: openai
    base_url: "{mock}/v1"
    options: { mock: { headers: { x-ratelimit-remaining-requests: "0", x-ratelimit-reset-requests: "20s" } } }
  other: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: spent/a, provider: spent, model: a }
  - { id: other/b, provider: other, model: b }
routes:
  chat: { targets: [spent/a, other/b] }
"#;
    let h = common::start(yaml).await;
    let first = h.post(chat()).await;
    let status = first.status();
    let headers = first.headers().clone();
    assert_eq!(status, 200, "{}", first.text().await.unwrap());
    assert_eq!(headers["x-switchyard-deployment"], "spent/a");
    // It said 0 requests remain for 20 s: the next request goes elsewhere
    // without spending a request on a certain 429.
    let resp = h.post(chat()).await;
    assert_eq!(resp.headers()["x-switchyard-deployment"], "other/b");
    assert_eq!(
        resp.headers()["x-switchyard-fallback-reason"],
        "gateway_rate_limited"
    );
    assert_eq!(h.mock.request_count(), 2);
}

#[tokio::test]
async fn degraded_answers_when_nothing_can_serve_and_it_is_enabled() {
    let yaml = r#"
degraded: { enabled: true, message: "We are busy, back soon." }
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a], retry: { attempts: 1 } }
"#;
    let h = common::start(yaml).await;
    h.mock
        .set_default(Behavior::fixture("openai/error_503_overloaded"));
    let resp = h.post(chat()).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-switchyard-deployment"], "degraded");
    assert_eq!(resp.headers()["x-switchyard-fallback-reason"], "overloaded");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "We are busy, back soon."
    );
    // Streams get it as a stream, and the Anthropic door in its own shape.
    let text = h
        .post(json!({"model": "chat", "messages": common::user("hi"), "stream": true}))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(common::sse_text(&text), "We are busy, back soon.");
    assert!(text.ends_with("data: [DONE]\n\n"));
    let an: Value = reqwest::Client::new()
        .post(h.url("/v1/messages"))
        .json(&json!({"model": "chat", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(an["content"][0]["text"], "We are busy, back soon.");
    // A client error is still an error.
    h.mock
        .set_default(Behavior::fixture("openai/error_400_invalid_request"));
    assert_eq!(h.post(chat()).await.status(), 400);
    assert_eq!(h.decision(0).await["fallback_reason"], "degraded");
}

#[tokio::test]
async fn an_open_stream_holds_its_concurrency_slot_until_it_ends() {
    let h = common::start(ONE_SLOT).await;
    let slow = json!({"model": "chat", "messages": common::user("hi"), "stream": true, "mock": {"chunks": 4, "chunk_delay_ms": 150}});
    let streaming = async {
        let r = h.post(slow).await;
        r.text().await.unwrap()
    };
    let second = async {
        // The scenario: sent while the stream is still open (it takes ~600 ms).
        tokio::time::sleep(Duration::from_millis(200)).await;
        h.post(chat()).await.status()
    };
    let (body, status) = tokio::join!(streaming, second);
    assert!(body.ends_with("data: [DONE]\n\n"));
    assert_eq!(status, 429, "the slot was still taken by the open stream");
    // Once the stream ended, the slot is free again.
    assert_eq!(h.post(chat()).await.status(), 200);
}

/// ~400 KB of function definitions (~100k tokens).
fn big_tools() -> Value {
    let description = "Reads a file from the workspace and returns its lines. ".repeat(20);
    let tool = json!({"type": "function", "function": {"name": "read_file", "description": description,
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": description}}}}});
    Value::Array(vec![tool; 180])
}

/// CONTRACT §8: a tpm reservation covers tool definitions. Requests that
/// carry ~100k tokens of them take turns under a 150k tpm — the client's
/// own or the deployment's — where an estimate without them let every one
/// through at once.
#[tokio::test]
async fn tool_definitions_count_against_tpm() {
    for limits in [
        "clients: [{ id: app, key_env: CLIENT_KEY, tpm: 150000 }]\nproviders:\n  mock: { protocol: openai, base_url: \"{mock}/v1\" }",
        "clients: [{ id: app, key_env: CLIENT_KEY }]\nproviders:\n  mock: { protocol: openai, base_url: \"{mock}/v1\", limits: { tpm: 150000 } }",
    ] {
        let yaml = format!(
            "{limits}\nmodels:\n  - {{ id: mock/a, provider: mock, model: a }}\nroutes:\n  chat: {{ targets: [mock/a] }}\n"
        );
        let h = common::start(&yaml).await;
        h.mock.set_default(Behavior::default().latency(600));
        let body = json!({"model": "chat", "max_tokens": 10, "messages": common::user("hi"), "tools": big_tools()});
        let http = reqwest::Client::new();
        let calls = (0..4).map(|_| {
            let req = http
                .post(h.url("/v1/chat/completions"))
                .bearer_auth("client-secret")
                .json(&body);
            async move {
                let r = req.send().await.unwrap();
                (r.status().as_u16(), r.text().await.unwrap())
            }
        });
        let results = futures_util::future::join_all(calls).await;
        let ok = results.iter().filter(|r| r.0 == 200).count();
        assert_eq!(ok, 1, "{limits}: {results:#?}");
        for (status, body) in results.iter().filter(|r| r.0 != 200) {
            assert_eq!(*status, 429, "{body}");
            assert!(body.contains("gateway_rate_limited"), "{body}");
        }
        assert_eq!(h.mock.request_count(), 1, "{limits}");
    }
}

/// A client's and a deployment's tpm count what answers really used, not
/// what was reserved for them: a request that reserves most of the budget
/// (its max_tokens) but uses a few tokens leaves room for the next. The
/// client's answers carry OpenAI's rate-limit headers.
#[tokio::test]
async fn tpm_settles_to_real_usage_and_clients_see_their_rate_limit_headers() {
    let yaml = r#"
clients:
  - { id: app, key_env: CLIENT_KEY, rpm: 10, tpm: 1000 }
providers:
  mock: { protocol: openai, base_url: "{mock}/v1", limits: { tpm: 1000 } }
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a] }
"#;
    let h = common::start(yaml).await;
    let send = |stream: bool| {
        reqwest::Client::new()
            .post(h.url("/v1/chat/completions"))
            .bearer_auth("client-secret")
            .json(&json!({"model": "chat", "max_tokens": 900, "stream": stream, "messages": common::user("hi")}))
            .send()
    };
    for (i, stream) in [false, true, false, true].into_iter().enumerate() {
        let resp = send(stream).await.unwrap();
        assert_eq!(
            resp.status(),
            200,
            "request {i}: each uses ~7 tokens of its 900 reserved"
        );
        let h = resp.headers();
        assert_eq!(h["x-ratelimit-limit-requests"], "10");
        assert_eq!(
            h["x-ratelimit-remaining-requests"],
            (9 - i).to_string().as_str()
        );
        assert_eq!(h["x-ratelimit-limit-tokens"], "1000");
        let remaining: u64 = h["x-ratelimit-remaining-tokens"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            remaining < 1000 - 900,
            "request {i}: its own reservation is counted: {remaining}"
        );
        assert!(h["x-ratelimit-reset-requests"]
            .to_str()
            .unwrap()
            .ends_with('s'));
        let _ = resp.text().await;
    }
    assert_eq!(h.mock.request_count(), 4);
}

// === Provider keys: one tenant cannot take a key from the others (§8) ===

/// One provider with one key (`inline#0` = `key-a`), behind route `chat`;
/// route `tight` has a deadline shorter than a 1 s Retry-After. Tenant
/// `team-a` sends `client-secret`; `team-b` gets its key from the admin API.
const ONE_KEY: &str = r#"
clients:
  - { id: team-a, key_env: CLIENT_KEY }
  - { id: team-b, key_env: TEST_KEY }
providers:
  mock:
    protocol: openai
    base_url: "{mock}/v1"
    keys: [{ value: key-a }]
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a] }
  tight: { targets: [mock/a], deadline: 300ms }
"#;

/// A chat request on `route` as a tenant (its virtual key), on `http`
/// (made once: a new client takes a while, which a test of waits feels).
async fn ask_on(
    http: &reqwest::Client,
    h: &common::Harness,
    key: &str,
    route: &str,
) -> reqwest::Response {
    http.post(h.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": route, "messages": common::user("hi")}))
        .send()
        .await
        .unwrap()
}

/// A chat request to `route` (with `key`, if any) on a task of its own:
/// its status, once answered.
fn spawn_ask(
    h: &common::Harness,
    key: Option<&str>,
    route: &str,
) -> tokio::task::JoinHandle<reqwest::StatusCode> {
    let mut req = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .json(&json!({"model": route, "messages": common::user("hi")}));
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    tokio::spawn(async move { req.send().await.unwrap().status() })
}

async fn ask_as(h: &common::Harness, key: &str, route: &str) -> reqwest::Response {
    ask_on(&reqwest::Client::new(), h, key, route).await
}

const TEAM_A: &str = "client-secret";
const TEAM_B: &str = "sk-test-secret-value-1234";

/// Wait until the provider's key cools down after a 429.
async fn until_cooling(h: &common::Harness) {
    common::eventually(
        || async { key_status(h).await["status"] == "cooling_down" },
        "the key cooling down after its 429",
    )
    .await;
}

/// `/admin/state`'s word on the provider key `inline#0` of `mock/a`.
async fn key_status(h: &common::Harness) -> Value {
    let state = admin_state(h).await;
    deployment(&state, "mock/a")["keys"][0].clone()
}

/// Chat requests (not key checks) the mock has seen.
fn posts(h: &common::Harness) -> usize {
    h.mock
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count()
}

/// Tenant A provokes 403s about its own requests (a model the project may
/// not use): each fails alone, as `forbidden`; the key stays in use, the
/// circuit closed, and tenant B is served with that same key throughout.
#[tokio::test]
async fn a_403_about_one_request_leaves_the_key_to_every_other_tenant() {
    let h = common::start(ONE_KEY).await;
    let refusal = Behavior::status(
        403,
        r#"{"error":{"message":"Project `proj_abc` does not have access to model `a`","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
    );
    // More than the circuit's default 5 consecutive failures.
    for _ in 0..8 {
        h.mock.script(vec![refusal.clone()]);
        let r = ask_as(&h, TEAM_A, "chat").await;
        assert_eq!(r.status(), 403);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "forbidden", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("does not have access"),
            "{body}"
        );
        let r = ask_as(&h, TEAM_B, "chat").await;
        assert_eq!(r.status(), 200, "tenant B keeps being served");
    }
    assert_eq!(key_status(&h).await["status"], "active");
    let state = admin_state(&h).await;
    let dep = deployment(&state, "mock/a");
    assert_eq!(dep["circuit"], "closed");
    // Nor does it make the deployment look unhealthy to everyone else.
    assert_eq!(
        (&dep["health_score"], &dep["error_rate"]),
        (&json!(1.0), &json!(0.0)),
        "{dep}"
    );
    // Every call went out with the one key, none was skipped.
    let reqs = h.mock.requests();
    assert_eq!(reqs.len(), 16);
    assert!(reqs
        .iter()
        .all(|r| r.header("authorization") == Some("Bearer key-a")));
    // A 403 is not retried on the same deployment.
    let d = h.decision(0).await;
    assert_eq!(d["attempts"].as_array().unwrap().len(), 1, "{d}");
}

/// A key the upstream rejects as bad is set aside (requests no longer
/// reach the upstream with it), then checked in the background with a
/// model list, and back in use as soon as the upstream takes it again.
#[tokio::test]
async fn a_rejected_key_is_checked_in_the_background_and_restored() {
    let h = common::start(ONE_KEY).await;
    h.mock.set_valid_keys(vec!["some-other-key".into()]);
    let r = ask_as(&h, TEAM_A, "chat").await;
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "auth_failed");
    let k = key_status(&h).await;
    assert_eq!(
        (&k["status"], &k["reason"]),
        (&json!("quarantined"), &json!("rejected")),
        "{k}"
    );
    // Set aside: the next request does not spend a call on it.
    assert_eq!(ask_as(&h, TEAM_B, "chat").await.status(), 401);
    assert_eq!(posts(&h), 1);

    // The upstream still refuses: the checks leave it aside.
    common::eventually(
        || async { h.mock.requests().iter().any(|r| r.method == "GET") },
        "a key check",
    )
    .await;
    assert_eq!(key_status(&h).await["status"], "quarantined");
    let check = h
        .mock
        .requests()
        .into_iter()
        .find(|r| r.method == "GET")
        .unwrap();
    assert_eq!(check.path_and_query, "/v1/models");
    assert_eq!(check.header("authorization"), Some("Bearer key-a"));

    // The account is fixed: the next check restores the key.
    h.mock.set_valid_keys(vec!["key-a".into()]);
    common::eventually(
        || async { key_status(&h).await["status"] == "active" },
        "the key restored by its background check",
    )
    .await;
    assert_eq!(ask_as(&h, TEAM_A, "chat").await.status(), 200);
}

/// `POST /admin/providers/{name}/keys/{label}/reset` puts a key set aside
/// back in use at once (admin key required, like every admin endpoint);
/// an unknown provider or label is a 404 in the admin envelope.
#[tokio::test]
async fn an_operator_resets_a_key_by_hand() {
    let h = common::start_with(ONE_KEY, "  admin_key_env: ADMIN_KEY").await;
    h.mock.set_valid_keys(vec!["some-other-key".into()]);
    assert_eq!(ask_as(&h, TEAM_A, "chat").await.status(), 401);
    let admin = reqwest::Client::new();
    let reset = |path: &str| {
        admin
            .post(h.admin(&format!("/admin/providers/{path}/reset")))
            .bearer_auth("admin-secret")
            .send()
    };
    let anonymous = admin
        .post(h.admin("/admin/providers/mock/keys/inline%230/reset"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    h.mock.set_valid_keys(vec!["key-a".into()]);
    let r = reset("mock/keys/inline%230").await.unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body,
        json!({"provider": "mock", "label": "inline#0", "was": "quarantined", "status": "active"})
    );
    assert_eq!(ask_as(&h, TEAM_B, "chat").await.status(), 200);

    for (path, code) in [
        ("nope/keys/inline%230", "provider_not_found"),
        ("mock/keys/inline%231", "key_not_found"),
    ] {
        let r = reset(path).await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["type"], "admin_error", "{body}");
        assert_eq!(body["error"]["code"], code, "{body}");
    }
}

/// One request's 429 (Retry-After: 1) cools the provider's only key down;
/// the requests that arrive meanwhile wait for it and are served, or, when
/// their deadline is shorter than the wait, get 429 `rate_limited` with
/// Retry-After. None gets `auth_failed`.
#[tokio::test]
async fn a_429_makes_the_others_wait_or_429_never_401() {
    let h = common::start(ONE_KEY).await;
    let http = reqwest::Client::new();
    h.mock.script(vec![Behavior::fixture(
        "openai/error_429_rate_limit_tokens",
    )]);
    let first = spawn_ask(&h, Some(TEAM_A), "chat");
    until_cooling(&h).await;
    let started = Instant::now();
    let patient: Vec<_> = (0..4).map(|_| ask_on(&http, &h, TEAM_B, "chat")).collect();
    let hurried: Vec<_> = (0..3).map(|_| ask_on(&http, &h, TEAM_B, "tight")).collect();
    let (patient, hurried) = tokio::join!(
        futures_util::future::join_all(patient),
        futures_util::future::join_all(hurried)
    );
    for r in patient {
        assert_eq!(r.status(), 200, "served once the key is back");
    }
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    for r in hurried {
        assert_eq!(r.status(), 429);
        let retry: u64 = r.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((1..=2).contains(&retry), "{retry}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    }
    assert_eq!(first.await.unwrap(), 200, "the 429'd request's own retry");
    // 1 refused + 1 retry + 4 waiters; the hurried ones never went out.
    assert_eq!(posts(&h), 6);
    assert_eq!(key_status(&h).await["status"], "active");
}

/// With a fallback candidate, a request that finds every key of the first
/// provider cooling down moves on to it at once.
#[tokio::test]
async fn cooling_keys_send_the_request_to_its_fallback() {
    let yaml = r#"
providers:
  mock:
    protocol: openai
    base_url: "{mock}/v1"
    keys: [{ value: key-a }]
  spare: { protocol: openai, base_url: "{mock}/v1", keys: [{ value: key-s }] }
models:
  - { id: mock/a, provider: mock, model: a }
  - { id: spare/b, provider: spare, model: b }
routes:
  chat: { targets: [mock/a], fallbacks: [spare/b] }
  only: { targets: [mock/a] }
"#;
    let h = common::start(yaml).await;
    let http = reqwest::Client::new();
    // A 429 with Retry-After alone: the recorded one also says its tokens
    // are at 0, which holds `mock/a` back past its quota's `stop` (a plan
    // question, `tests/quota.rs`); here the keys' cooldown decides.
    let mut refused = Behavior::status(
        429,
        r#"{"error":{"message":"Rate limit reached","type":"tokens","code":"rate_limit_exceeded"}}"#,
    );
    refused.headers.insert("retry-after".into(), "1".into());
    h.mock.script(vec![refused]);
    let first = spawn_ask(&h, None, "only");
    until_cooling(&h).await;
    let r = http
        .post(h.url("/v1/chat/completions"))
        .json(&chat())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        key_status(&h).await["status"],
        "cooling_down",
        "served without waiting for the key"
    );
    assert_eq!(r.headers()["x-switchyard-deployment"], "spare/b");
    assert_eq!(r.headers()["x-switchyard-fallback-reason"], "rate_limited");
    let d = h.decision(0).await;
    assert_eq!(d["route"], "chat", "{d}");
    // The cooling provider was passed over without a call.
    let first_try = &d["attempts"][0];
    assert_eq!(first_try["deployment"], "mock/a", "{d}");
    assert_eq!(first_try["outcome"], "rate_limited", "{d}");
    assert_eq!(first_try["status"], Value::Null, "{d}");
    assert_eq!(first.await.unwrap(), 200);
}
