//! The strategies' behaviour over real HTTP: which deployment serves (the
//! `x-switchyard-deployment` header) over many requests, what each upstream
//! received, and the decision log's score parts. Shares are counted over
//! enough requests to sit well inside their tolerances; waits for a
//! deployment to take its traffic back are bounded by a number of requests,
//! not by time.

mod common;

use std::collections::HashMap;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockServer};
use tokio::task::JoinSet;

/// Requests in flight at once: enough to keep slow upstreams from making a
/// test long, few enough for a 2-core machine.
const AT_ONCE: usize = 8;

/// Sends `n` requests for `model`, [`AT_ONCE`] at a time; how many each
/// deployment served. Every one must be answered.
async fn serve(h: &common::Harness, model: &str, n: usize) -> HashMap<String, usize> {
    let client = reqwest::Client::new();
    let url = h.url("/v1/chat/completions");
    let body = json!({"model": model, "messages": common::user("hi")});
    let mut served = HashMap::new();
    let mut left = n;
    while left > 0 {
        let mut batch = JoinSet::new();
        for _ in 0..left.min(AT_ONCE) {
            let req = client.post(&url).json(&body);
            batch.spawn(async move { req.send().await.unwrap() });
        }
        left -= batch.len();
        while let Some(resp) = batch.join_next().await {
            let resp = resp.unwrap();
            assert_eq!(resp.status(), 200, "{:?}", resp.text().await);
            let dep = resp.headers()["x-switchyard-deployment"].to_str().unwrap();
            *served.entry(dep.to_owned()).or_default() += 1;
        }
    }
    served
}

fn share(served: &HashMap<String, usize>, dep: &str) -> f64 {
    let all: usize = served.values().sum();
    served.get(dep).copied().unwrap_or(0) as f64 / all.max(1) as f64
}

/// A provider per mock: `p0` on the harness's own, `p1`… on `others`.
fn providers(others: &[&MockServer], circuit: &str) -> String {
    let mut out =
        format!("providers:\n  p0: {{ protocol: openai, base_url: \"{{mock}}/v1\"{circuit} }}\n");
    for (i, m) in others.iter().enumerate() {
        out += &format!(
            "  p{}: {{ protocol: openai, base_url: \"{}/v1\"{circuit} }}\n",
            i + 1,
            m.base_url()
        );
    }
    out
}

/// Weighted 3:1 over 400 requests: the first gets 75% ± 8 points (the
/// binomial's standard deviation is about 2 points).
#[tokio::test]
async fn weighted_shares_follow_the_weights() {
    let h = common::start(
        r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/a, provider: mock, model: a }
  - { id: mock/b, provider: mock, model: b }
routes:
  chat:
    strategy: weighted
    targets: [{ deployment: mock/a, weight: 3 }, { deployment: mock/b, weight: 1 }]
"#,
    )
    .await;
    let served = serve(&h, "chat", 400).await;
    let a = share(&served, "mock/a");
    assert!((0.67..=0.83).contains(&a), "mock/a's share {a}: {served:?}");
    assert_eq!(served.values().sum::<usize>(), 400);
}

/// `latency`: a deployment ten times slower than the other gets a small
/// share, still measured; once it is fast again its share comes back over
/// batches of requests, not in the first one.
#[tokio::test]
async fn latency_demotes_a_slow_deployment_and_brings_it_back_gradually() {
    let slow = MockServer::start("127.0.0.1:0").await.unwrap();
    let yaml = format!(
        "{}models:\n  - {{ id: fast, provider: p0, model: m }}\n  - {{ id: slow, provider: p1, model: m }}\nroutes:\n  chat: {{ strategy: latency, targets: [fast, slow] }}\n",
        providers(&[&slow], "")
    );
    let h = common::start(&yaml).await;
    h.mock.set_default(Behavior::default().latency(10));
    slow.set_default(Behavior::default().latency(150));
    // Both unknown at first: explored, then measured.
    serve(&h, "chat", 24).await;
    let before = slow.request_count();
    let served = serve(&h, "chat", 240).await;
    let slow_share = share(&served, "slow");
    // Its weight is at the 5% floor: a share of ~5%.
    assert!(slow_share < 0.15, "slow's share {slow_share}: {served:?}");
    assert!(
        slow.request_count() > before,
        "a slow deployment is still measured: {served:?}"
    );

    slow.set_default(Behavior::default().latency(10));
    let mut shares = Vec::new();
    for _ in 0..30 {
        let s = share(&serve(&h, "chat", 40).await, "slow");
        shares.push(s);
        if s >= 0.3 {
            break;
        }
    }
    assert!(
        shares[0] < 0.25,
        "not all at once: its first batch after recovering {shares:?}"
    );
    assert!(
        *shares.last().unwrap() >= 0.3,
        "it takes traffic back: shares per batch of 40 {shares:?}"
    );
}

/// `balanced` as documented: `weights.health·health + weights.latency·latency
/// score + weights.cost·cost score`, highest first — the cheap, slow
/// deployment wins where cost weighs most, the dear, fast one where latency
/// does; every candidate's score in the decision log is that sum of its parts.
#[tokio::test]
async fn balanced_scores_are_the_documented_weighted_sum() {
    let slow = MockServer::start("127.0.0.1:0").await.unwrap();
    let yaml = format!(
        r#"{}models:
  - {{ id: dear, provider: p0, model: m, pricing: {{ input: 10, output: 10 }} }}
  - {{ id: cheap, provider: p1, model: m, pricing: {{ input: 1, output: 1 }} }}
routes:
  thrifty: {{ strategy: balanced, targets: [dear, cheap], weights: {{ health: 0.3, latency: 0.2, cost: 0.5 }} }}
  quick: {{ strategy: balanced, targets: [cheap, dear], weights: {{ health: 0.3, latency: 0.5, cost: 0.2 }} }}
"#,
        providers(&[&slow], "")
    );
    let h = common::start(&yaml).await;
    slow.set_default(Behavior::default().latency(200));
    // Measure both: each deployment named directly.
    serve(&h, "dear", 4).await;
    serve(&h, "cheap", 4).await;

    let served = serve(&h, "thrifty", 10).await;
    assert_eq!(served.get("cheap"), Some(&10), "{served:?}");
    let served = serve(&h, "quick", 10).await;
    assert_eq!(served.get("dear"), Some(&10), "{served:?}");

    let weights = HashMap::from([("thrifty", [0.3, 0.2, 0.5]), ("quick", [0.3, 0.5, 0.2])]);
    common::eventually(
        || async { h.decisions().len() >= 28 },
        "a decision line per request",
    )
    .await;
    let lines = h.decisions();
    let planned: Vec<&Value> = lines
        .iter()
        .filter(|d| weights.contains_key(d["route"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(planned.len(), 20);
    for d in planned {
        let [wh, wl, wc] = weights[d["route"].as_str().unwrap()];
        for c in d["candidates"].as_array().unwrap() {
            let p = &c["parts"];
            let f = |k: &str| p[k].as_f64().unwrap_or_else(|| panic!("{k} in {c}"));
            let sum = wh * f("health") + wl * f("latency_score") + wc * f("cost_score");
            assert!((c["score"].as_f64().unwrap() - sum).abs() < 1e-3, "{c}");
        }
        // The slowest's latency score is 0; one 100 times faster's near 1.
        let cands = d["candidates"].as_array().unwrap();
        let by = |id: &str| &cands.iter().find(|c| c["deployment"] == id).unwrap()["parts"];
        assert_eq!(by("cheap")["latency_score"], 0.0);
        assert!(by("dear")["latency_score"].as_f64().unwrap() > 0.8);
    }
}

/// `priority`: a first choice that errors gives its traffic to the second
/// (each request is still answered, by the second), is tried less and less
/// while it fails, and takes its traffic back once it answers again.
#[tokio::test]
async fn priority_moves_off_an_erroring_first_choice_and_back_on_recovery() {
    let first = MockServer::start("127.0.0.1:0").await.unwrap();
    // The circuit never opens here: health alone moves the traffic.
    let circuit = ", circuit: { consecutive_failures: 1000, min_requests: 1000 }";
    let yaml = format!(
        "{}models:\n  - {{ id: second, provider: p0, model: m }}\n  - {{ id: first, provider: p1, model: m }}\nroutes:\n  chat: {{ strategy: priority, targets: [first, second], retry: {{ attempts: 1 }} }}\n",
        providers(&[&first], circuit)
    );
    let h = common::start(&yaml).await;
    let served = serve(&h, "chat", 40).await;
    assert_eq!(
        served.get("first"),
        Some(&40),
        "healthy: all of it {served:?}"
    );

    first.set_default(Behavior::status(500, r#"{"error": {"message": "down"}}"#));
    let served = serve(&h, "chat", 40).await;
    assert_eq!(served.get("second"), Some(&40), "{served:?}");
    let tried = first.request_count();
    let served = serve(&h, "chat", 40).await;
    assert_eq!(served.get("second"), Some(&40), "{served:?}");
    let tried_late = first.request_count() - tried;
    // Priority blind to health would try it on all 40; its share is now
    // (health / 0.7)², about 0.1.
    assert!(
        tried_late <= 16,
        "{tried_late} of the last 40 requests tried the failing first choice"
    );
    let demoted = h.decisions().iter().any(|d| {
        d["candidates"]
            .as_array()
            .is_some_and(|c| c[1]["deployment"] == "first" && c[1]["parts"]["demoted"] == 1.0)
    });
    assert!(demoted, "the decision log shows it demoted");

    first.set_default(Behavior::default());
    let mut shares = Vec::new();
    for _ in 0..50 {
        let s = share(&serve(&h, "chat", 24).await, "first");
        shares.push(s);
        if s == 1.0 {
            break;
        }
    }
    assert_eq!(
        shares.last(),
        Some(&1.0),
        "it takes all its traffic back: its share per batch of 24 {shares:?}"
    );
}

/// `server.region: eu`: the target in `eu` serves though it is second in
/// config order; while it is open-circuited the other region serves.
#[tokio::test]
async fn this_regions_target_serves_first_and_another_region_covers_for_it() {
    let h = common::start_with(
        r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/us, provider: mock, model: m, region: us }
  - { id: mock/eu, provider: mock, model: m, region: eu }
routes:
  chat: { strategy: priority, targets: [mock/us, mock/eu] }
"#,
        "  region: eu",
    )
    .await;
    let served = serve(&h, "chat", 16).await;
    assert_eq!(served.get("mock/eu"), Some(&16), "{served:?}");
    let d = h.decision(0).await;
    assert_eq!(d["candidates"][0]["deployment"], "mock/eu");
    assert_eq!(d["candidates"][0]["parts"]["same_region"], 1.0);
    assert_eq!(d["candidates"][1]["parts"]["same_region"], 0.0);

    let admin = |action: &str| {
        reqwest::Client::new()
            .post(h.admin(&format!("/admin/deployments/mock%2Feu/{action}")))
            .send()
    };
    assert!(admin("open").await.unwrap().status().is_success());
    let served = serve(&h, "chat", 8).await;
    assert_eq!(served.get("mock/us"), Some(&8), "{served:?}");
    assert!(admin("close").await.unwrap().status().is_success());
    let served = serve(&h, "chat", 8).await;
    assert_eq!(served.get("mock/eu"), Some(&8), "{served:?}");
}
