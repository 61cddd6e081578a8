//! Client budgets (contract §2): parallel requests never together spend
//! past the budget, the rest are refused before any upstream call, the
//! real cost replaces the reservation, and spend survives a restart.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use switchyard_mock::Behavior;

/// $1000 per million tokens in and out, and a $5.50 daily budget: a
/// request capped at 1000 output tokens may cost just over $1.00, so five
/// fit at their worst case. What the mock really answers costs ~$0.02.
const BUDGETED: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: oa/m, provider: oa, model: m, capabilities: [streaming], pricing: { input: 1000, output: 1000 } }
routes:
  chat: { targets: [oa/m] }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 5.5, per: day } }
"#;

fn ask(http: &reqwest::Client, h: &common::Harness, stream: bool) -> reqwest::RequestBuilder {
    http.post(h.url("/v1/chat/completions"))
        .bearer_auth("client-secret")
        .json(
            &json!({"model": "chat", "stream": stream, "max_tokens": 1000,
                      "messages": common::user("What is the capital of France?")}),
        )
}

async fn budget_of(h: &common::Harness) -> Value {
    let clients: Value = h.admin_json("/admin/clients").await;
    clients["clients"][0]["budget"].clone()
}

#[tokio::test]
async fn parallel_requests_never_spend_past_the_budget() {
    let h = common::start(BUDGETED).await;
    // Slow enough that all 30 are in flight before any has settled.
    h.mock.set_default(Behavior::default().latency(600));
    let http = reqwest::Client::new();
    let calls = (0..30).map(|i| {
        let req = ask(&http, &h, i % 2 == 0);
        async move {
            let r = req.send().await.unwrap();
            let status = r.status().as_u16();
            let remaining = r
                .headers()
                .get("x-switchyard-budget-remaining-usd")
                .map(|v| v.to_str().unwrap().parse::<f64>().unwrap());
            let body = r.text().await.unwrap();
            (status, remaining, body)
        }
    });
    let results = futures_util::future::join_all(calls).await;
    let ok = results.iter().filter(|r| r.0 == 200).count();
    let refused: Vec<_> = results.iter().filter(|r| r.0 == 429).collect();
    assert_eq!(ok, 5, "five fit at their worst case: {results:#?}");
    assert_eq!(refused.len(), 25);
    for (_, remaining, body) in &refused {
        let e: Value = serde_json::from_str(body).unwrap();
        assert_eq!(e["error"]["code"], "budget_exceeded", "{body}");
        assert!(
            remaining.is_some(),
            "a budgeted client is told what is left"
        );
    }
    assert_eq!(
        h.mock.requests().len(),
        5,
        "refusals never reach the upstream"
    );
    // Every reservation has been replaced by the real cost.
    h.flush_usage().await;
    let b = budget_of(&h).await;
    let spent = b["spent_usd"].as_f64().unwrap();
    assert_eq!(b["reserved_usd"].as_f64(), Some(0.0), "{b}");
    assert!(spent > 0.0 && spent <= 5.5, "{b}");
    let logged: f64 = h
        .decisions()
        .iter()
        .filter_map(|d| d["cost_usd"].as_f64())
        .sum();
    assert!(
        (spent - logged).abs() < 1e-9,
        "settled {spent} vs logged {logged}"
    );
    // Real costs settled far below the reservations: admission resumes.
    h.mock.set_default(Behavior::default());
    let r = ask(&http, &h, false).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let left: f64 = common::header_f64(&r, "x-switchyard-budget-remaining-usd");
    let cost: f64 = common::header_f64(&r, "x-switchyard-cost-usd");
    assert!(
        (left - (5.5 - spent - cost)).abs() < 1e-5,
        "{left} {spent} {cost}"
    );
    // The metrics say who was refused and what was spent.
    let m = h.metrics().await;
    assert!(
        m.contains("switchyard_budget_rejections_total{client=\"team\"} 25"),
        "{m}"
    );
    assert!(
        m.contains("switchyard_budget_spent_usd{client=\"team\"}"),
        "{m}"
    );
}

/// Sends `body` as the budgeted client, `n` times at once; the statuses.
async fn burst(h: &common::Harness, body: Value, n: usize) -> Vec<(u16, String)> {
    let http = reqwest::Client::new();
    let calls = (0..n).map(|_| {
        let req = http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth("client-secret")
            .json(&body);
        async move {
            let r = req.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    });
    futures_util::future::join_all(calls).await
}

/// CONTRACT §8: the output reservation is the cap × `n`. Each answer here
/// bills 50 choices × 100 tokens (~$5 of a $5.50 budget): one fits; a
/// reservation for a single choice would let all twenty through and spend
/// ~18× the budget.
#[tokio::test]
async fn a_burst_of_many_choice_requests_never_spends_past_the_budget() {
    let h = common::start(BUDGETED).await;
    h.mock
        .set_default(Behavior::default().chunks(100).latency(600));
    let body = json!({"model": "chat", "n": 50, "max_tokens": 100,
                      "messages": common::user("Name a colour.")});
    let results = burst(&h, body, 20).await;
    let ok = results.iter().filter(|r| r.0 == 200).count();
    assert_eq!(ok, 1, "{results:#?}");
    for (status, body) in results.iter().filter(|r| r.0 != 200) {
        assert_eq!(*status, 429, "{body}");
        assert!(body.contains("budget_exceeded"), "{body}");
    }
    assert_eq!(
        h.mock.requests().len(),
        1,
        "refusals never reach the upstream"
    );
    h.flush_usage().await;
    let b = budget_of(&h).await;
    let spent = b["spent_usd"].as_f64().unwrap();
    assert!(spent > 5.0, "the answer billed its 50 choices: {b}");
    assert!(spent <= 5.5, "never past the budget: {b}");
}

/// A request's tool definitions are input it is billed for: ~400 KB of them
/// (~100k tokens, $10 here) are refused up front by a $5.50 budget, where
/// an estimate without them let such a request spend 100× what it reserved.
#[tokio::test]
async fn tool_definitions_are_reserved_and_refused_when_the_budget_cannot_cover_them() {
    let h = common::start(&BUDGETED.replace("[streaming]", "[streaming, tools]")).await;
    let body = json!({"model": "chat", "max_tokens": 10, "messages": common::user("hi"),
                      "tools": big_tools()});
    let results = burst(&h, body, 1).await;
    assert_eq!(results[0].0, 429, "{results:?}");
    assert!(results[0].1.contains("budget_exceeded"), "{results:?}");
    assert_eq!(h.mock.requests().len(), 0, "nothing was sent");
    let b = budget_of(&h).await;
    assert_eq!(
        (b["spent_usd"].as_f64(), b["reserved_usd"].as_f64()),
        (Some(0.0), Some(0.0)),
        "{b}"
    );
    // The same request without its tools fits.
    let body = json!({"model": "chat", "max_tokens": 10, "messages": common::user("hi")});
    assert_eq!(burst(&h, body, 1).await[0].0, 200);
}

/// ~400 KB of function definitions, each with long descriptions.
pub fn big_tools() -> Value {
    let description = "Reads a file from the workspace and returns its lines. ".repeat(20);
    let tool = json!({"type": "function", "function": {"name": "read_file", "description": description,
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": description}}}}});
    let tools = Value::Array(vec![tool; 180]);
    assert!(tools.to_string().len() > 400_000);
    tools
}

#[tokio::test]
async fn a_failed_attempt_releases_its_reservation() {
    let h = common::start(BUDGETED).await;
    h.mock
        .set_default(Behavior::fixture("openai/error_400_context_length"));
    let http = reqwest::Client::new();
    for _ in 0..8 {
        let r = ask(&http, &h, false).send().await.unwrap();
        assert_eq!(r.status(), 400, "the upstream's error, not budget_exceeded");
    }
    let b = budget_of(&h).await;
    assert_eq!(
        (b["spent_usd"].as_f64(), b["reserved_usd"].as_f64()),
        (Some(0.0), Some(0.0)),
        "{b}"
    );
}

#[tokio::test]
async fn a_cheaper_fallback_serves_when_the_first_choice_does_not_fit() {
    let yaml = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: oa/dear, provider: oa, model: dear, pricing: { input: 100000, output: 100000 } }
  - { id: oa/cheap, provider: oa, model: cheap, pricing: { input: 1, output: 1 } }
routes:
  chat: { targets: [oa/dear], fallbacks: [oa/cheap] }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 1, per: hour } }
"#;
    let h = common::start(yaml).await;
    let http = reqwest::Client::new();
    let r = ask(&http, &h, false).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-deployment"], "oa/cheap");
    assert_eq!(
        r.headers()["x-switchyard-fallback-reason"],
        "budget_exceeded"
    );
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][0]["outcome"], "budget_exceeded", "{d}");
    assert_eq!(
        h.mock.requests().len(),
        1,
        "the pricey one was never called"
    );
}

#[tokio::test]
async fn spend_survives_a_restart_on_the_same_store() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let h = common::start_in(BUDGETED, "", dir.clone()).await;
    let http = reqwest::Client::new();
    for stream in [false, true, false] {
        let r = ask(&http, &h, stream).send().await.unwrap();
        assert_eq!(r.status(), 200);
        r.text().await.unwrap();
    }
    let _ = h.decision(2).await;
    let before = budget_of(&h).await["spent_usd"].as_f64().unwrap();
    assert!(before > 0.0);
    h.gw.shutdown().await;

    let h = common::start_in(BUDGETED, "", dir).await;
    let after = budget_of(&h).await;
    assert!(
        (after["spent_usd"].as_f64().unwrap() - before).abs() < 1e-9,
        "{before} vs {after}"
    );
    assert!(
        after["resets_at"].as_str().unwrap().ends_with("T00:00:00Z"),
        "{after}"
    );
}

#[tokio::test]
async fn a_restored_spend_that_fills_the_budget_refuses_at_once() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    // First run: no budget, just traffic into the store.
    let open = BUDGETED.replace(", budget: { usd: 5.5, per: day }", "");
    let h = common::start_in(&open, "", dir.clone()).await;
    let http = reqwest::Client::new();
    let r = ask(&http, &h, false).send().await.unwrap();
    let cost: f64 = common::header_f64(&r, "x-switchyard-cost-usd");
    h.gw.shutdown().await;
    // Second run: a budget smaller than what was already spent today.
    let tight = BUDGETED.replace("usd: 5.5", &format!("usd: {}", cost / 2.0));
    let h = common::start_in(&tight, "", dir).await;
    let r = ask(&http, &h, false).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.headers()["x-switchyard-budget-remaining-usd"]
            .to_str()
            .unwrap(),
        "0.000000"
    );
    assert!(h.mock.requests().is_empty());
}

#[tokio::test]
async fn a_spent_budget_refuses_chat_and_embeddings_but_not_token_counts() {
    let yaml = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
  an: { protocol: anthropic, base_url: "{mock}" }
models:
  - { id: oa/m, provider: oa, model: m, capabilities: [embeddings], pricing: { input: 1000, output: 1000 } }
  - { id: an/c, provider: an, model: claude-c, max_output_tokens: 1000, pricing: { input: 1000, output: 1000 } }
routes:
  chat: { targets: [oa/m] }
  claude: { targets: [an/c] }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 0.01, per: hour } }
"#;
    let h = common::start(yaml).await;
    let http = reqwest::Client::new();
    let post = |path: &str, body: Value| {
        http.post(h.url(path))
            .bearer_auth("client-secret")
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
    };
    // The worst case of a chat ($0.1) does not fit; an embedding's input may.
    let chat = post(
        "/v1/chat/completions",
        json!({"model": "chat", "max_tokens": 100, "messages": common::user("hi")}),
    )
    .await
    .unwrap();
    assert_eq!(chat.status(), 429);
    // Embeddings reserve their input only, and spend until nothing is left.
    let mut served = 0;
    let mut refused = false;
    for _ in 0..50 {
        let e = post(
            "/v1/embeddings",
            json!({"model": "chat", "input": "hello there, embed me"}),
        )
        .await
        .unwrap();
        match e.status().as_u16() {
            200 => served += 1,
            429 => {
                refused = true;
                break;
            }
            other => panic!("{other}"),
        }
    }
    assert!(
        served > 0 && refused,
        "{served} served before the budget ran out"
    );
    let n = post(
        "/v1/messages/count_tokens",
        json!({"model": "claude", "messages": common::user("hi")}),
    )
    .await
    .unwrap();
    assert_eq!(n.status(), 200, "counting tokens costs nothing");
    let clients: Value = h.admin_json("/admin/clients").await;
    let b = &clients["clients"][0]["budget"];
    assert!(b["spent_usd"].as_f64().unwrap() > 0.0, "{b}");
}
