//! Quota (contract §10) over real HTTP with the mock providers: a
//! deployment near its rpm/tpm — by the upstream's `x-ratelimit-*`
//! headers or by the gateway's own counts — gives its traffic away
//! gradually (its weight moves at most a fifth per 10 s) and takes it back
//! when it recovers; past `stop` it serves only when nothing else can; a
//! provider's `limits` bound its deployments together; a per-day quota
//! 429 rests a deployment until the provider's midnight.
//!
//! The tests that watch the weight move run on tokio's paused clock (the
//! gateway and the mocks run on the test's runtime): the clock moves only
//! when the test advances it, so "10 s later" is exact and instant.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockServer};

/// `a` first (priority), `b` behind it. `a`'s answers are the mock's
/// default behavior (the test sets its quota headers); `b`'s are fixed.
const TWO: &str = r#"
providers:
  a: { protocol: openai, base_url: "{mock}/v1", keys: [{ env: TEST_KEY }] }
  b:
    protocol: openai
    base_url: "{mock}/v1"
    options: { mock: { text: "from b" } }
models:
  - { id: a/m, provider: a, model: gpt-a }
  - { id: b/m, provider: b, model: gpt-b }
routes:
  chat: { strategy: priority, targets: [a/m, b/m], retry: { attempts: 1 } }
"#;

/// The mock answers with OpenAI's request quota headers: `remaining` of
/// 100 left, whole again in a minute.
fn quota_headers(remaining: u32) -> Behavior {
    let mut b = Behavior::default();
    for (k, v) in [
        ("x-ratelimit-limit-requests", "100".to_owned()),
        ("x-ratelimit-remaining-requests", remaining.to_string()),
        ("x-ratelimit-reset-requests", "1m0s".to_owned()),
    ] {
        b.headers.insert(k.to_owned(), v);
    }
    b
}

/// `n` requests to `model`, one after another: how many each deployment
/// served (`x-switchyard-deployment`), and each status but 200.
async fn send(
    h: &common::Harness,
    http: &reqwest::Client,
    model: &str,
    n: usize,
) -> BTreeMap<String, usize> {
    let mut served = BTreeMap::new();
    for _ in 0..n {
        let r = http
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": model, "messages": common::user("hi"), "max_tokens": 8}))
            .send()
            .await
            .unwrap();
        let who = match r.status().as_u16() {
            200 => r.headers()["x-switchyard-deployment"]
                .to_str()
                .unwrap()
                .to_owned(),
            s => format!("status {s}"),
        };
        let _ = r.bytes().await;
        *served.entry(who).or_insert(0) += 1;
    }
    served
}

/// The share of `n` requests `id` served.
async fn share(h: &common::Harness, http: &reqwest::Client, id: &str, n: usize) -> f64 {
    let served = send(h, http, "chat", n).await;
    let ok: usize = served
        .iter()
        .filter(|(k, _)| !k.starts_with("status"))
        .map(|(_, v)| v)
        .sum();
    assert_eq!(ok, n, "every request served: {served:?}");
    served.get(id).copied().unwrap_or(0) as f64 / n as f64
}

/// `/admin/state`'s entry for deployment `id`.
async fn state_of(h: &common::Harness, id: &str) -> Value {
    let state = h.admin_json("/admin/state").await;
    state["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no {id} in {state}"))
}

async fn weight(h: &common::Harness, id: &str) -> f64 {
    state_of(h, id).await["quota_weight"].as_f64().unwrap()
}

async fn later(secs: u64) {
    tokio::time::advance(Duration::from_secs(secs)).await;
}

/// A client that opens a connection per request: the clock jumps, and a
/// kept-alive connection the gateway closed meanwhile (its idle timeout
/// fired in the jump) must not be reused.
fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// A share drawn per request from `weight`: within 0.12 of it (300
/// requests: more than four standard deviations).
fn near(share: f64, weight: f64, what: &str) {
    assert!(
        (share - weight).abs() <= 0.12,
        "{what}: share {share}, weight {weight}"
    );
}

/// (a) `a`'s upstream says 91% of its requests are used: its weight falls
/// to 0.5 a fifth per 10 s, and its share of the traffic with it; when the
/// headers recover, it climbs back the same way.
#[tokio::test(start_paused = true)]
async fn falling_upstream_headers_move_traffic_away_gradually_and_back() {
    let h = common::start(TWO).await;
    let http = http();
    h.mock.set_default(quota_headers(9));
    // The first answer brings the reading: nothing has moved yet.
    assert_eq!(share(&h, &http, "a/m", 1).await, 1.0);
    let a = state_of(&h, "a/m").await;
    assert_eq!(a["quota_used"], json!({"rpm": 0.91, "tpm": 0.0}), "{a}");
    assert_eq!(a["quota_weight"], 1.0);
    assert_eq!(share(&h, &http, "a/m", 50).await, 1.0, "not all at once");
    let metrics = h.metrics().await;
    assert!(
        metrics.contains(r#"switchyard_quota_used_ratio{deployment="a/m",dimension="rpm"} 0.91"#),
        "{metrics}"
    );
    // A fifth of its traffic per 10 s, down to its target.
    for expected in [0.8, 0.6, 0.5] {
        later(10).await;
        assert_eq!(weight(&h, "a/m").await, expected);
        near(
            share(&h, &http, "a/m", 300).await,
            expected,
            "while it gives way",
        );
    }
    // Its demotions are in the decision log.
    let demoted = h
        .decisions()
        .iter()
        .filter(|d| {
            d["candidates"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["parts"]["quota_demoted"] == 1.0)
        })
        .count();
    assert!(demoted > 0);
    // Recovered: 10% used. Back a fifth per 10 s.
    h.mock.set_default(quota_headers(90));
    let _ = share(&h, &http, "a/m", 20).await;
    later(10).await;
    assert_eq!(weight(&h, "a/m").await, 0.7);
    near(
        share(&h, &http, "a/m", 300).await,
        0.7,
        "while it comes back",
    );
    later(20).await;
    assert_eq!(weight(&h, "a/m").await, 1.0);
    assert_eq!(share(&h, &http, "a/m", 50).await, 1.0);
    assert_eq!(state_of(&h, "a/m").await["quota_used"]["rpm"], 0.1);
}

/// (b) The same from the gateway's own counts: `a` may take 1000 requests
/// a minute (`models[].limits.rpm`). Past 85% of it, its weight falls a
/// fifth per 10 s (not at once to its target); at 97% it stops taking any
/// while `b` can; when the minute's counts slide out it climbs back.
#[tokio::test(start_paused = true)]
async fn own_counts_against_a_models_rpm_move_traffic_away_and_back() {
    let h = common::start(&TWO.replace("model: gpt-a }", "model: gpt-a, limits: { rpm: 1000 } }"))
        .await;
    let http = http();
    assert_eq!(share(&h, &http, "a/m", 850).await, 1.0);
    let a = state_of(&h, "a/m").await;
    assert_eq!(
        (a["quota_used"]["rpm"].as_f64(), a["rpm_limit"].as_u64()),
        (Some(0.85), Some(1000))
    );
    // Past `shift` (90%: its target is 0.58), but no time has passed.
    assert_eq!(share(&h, &http, "a/m", 50).await, 1.0, "not all at once");
    assert_eq!(weight(&h, "a/m").await, 1.0);
    later(10).await;
    assert_eq!(weight(&h, "a/m").await, 0.8, "a fifth in 10 s");
    // It serves about 80% from here, until its count reaches 97%: then
    // nothing more while `b` can.
    let served = send(&h, &http, "chat", 150).await;
    assert_eq!(served.get("a/m"), Some(&70), "{served:?}");
    assert_eq!(served.get("b/m"), Some(&80), "{served:?}");
    let a = state_of(&h, "a/m").await;
    assert_eq!(
        (a["quota_used"]["rpm"].as_f64(), a["quota_weight"].as_f64()),
        (Some(0.97), Some(0.0)),
        "{a}"
    );
    assert_eq!(share(&h, &http, "a/m", 20).await, 0.0);
    // A minute later its counts have slid out: back a fifth per 10 s.
    later(60).await;
    assert_eq!(state_of(&h, "a/m").await["quota_used"]["rpm"], 0.0);
    later(10).await;
    assert_eq!(weight(&h, "a/m").await, 0.2);
    later(40).await;
    assert_eq!(weight(&h, "a/m").await, 1.0);
    assert_eq!(share(&h, &http, "a/m", 20).await, 1.0);
}

/// (c) Past `stop` a deployment serves only when nothing else can: every
/// request goes to `b` while it answers; when `b` fails, or its circuit is
/// open, `a` still serves.
#[tokio::test(start_paused = true)]
async fn past_stop_a_deployment_serves_only_when_the_others_cannot() {
    let other = MockServer::start("127.0.0.1:0").await.unwrap();
    // `b` on a mock of its own, so that it can fail alone.
    let yaml = format!(
        r#"
providers:
  a: {{ protocol: openai, base_url: "{{mock}}/v1" }}
  b: {{ protocol: openai, base_url: "{}/v1" }}
models:
  - {{ id: a/m, provider: a, model: gpt-a }}
  - {{ id: b/m, provider: b, model: gpt-b }}
routes:
  chat: {{ strategy: priority, targets: [a/m, b/m], retry: {{ attempts: 1 }} }}
"#,
        other.base_url()
    );
    let h = common::start(&yaml).await;
    let http = http();
    // 99 of 100 requests used.
    h.mock.set_default(quota_headers(1));
    assert_eq!(share(&h, &http, "a/m", 1).await, 1.0);
    assert_eq!(share(&h, &http, "a/m", 20).await, 0.0, "held back");
    let d = h.decisions().last().cloned().unwrap();
    let a = d["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["deployment"] == "a/m")
        .cloned()
        .unwrap();
    assert_eq!(a["parts"]["quota_stop"], 1.0, "{d}");
    assert_eq!(d["fallback_reason"], "quota", "{d}");
    // `b` fails: `a` is the one left, and serves.
    other.set_default(Behavior::status(
        503,
        r#"{"error":{"message":"down","type":"server_error"}}"#,
    ));
    let served = send(&h, &http, "chat", 5).await;
    assert_eq!(served.get("a/m"), Some(&5), "{served:?}");
    // `b`'s circuit open: `a` serves.
    other.set_default(Behavior::default());
    let r = reqwest::Client::new()
        .post(h.admin("/admin/deployments/b%2Fm/open"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let served = send(&h, &http, "chat", 5).await;
    assert_eq!(served.get("a/m"), Some(&5), "{served:?}");
}

/// (d) `providers.p.limits.rpm: 10` bound `p/x` and `p/y` together: ten
/// requests between them, whichever is asked; the rest are refused as a
/// deployment's limit is, naming the provider. Another provider is not
/// touched.
#[tokio::test(start_paused = true)]
async fn a_providers_rpm_caps_its_deployments_together() {
    let h = common::start(
        r#"
providers:
  p: { protocol: openai, base_url: "{mock}/v1", limits: { rpm: 10 } }
  q: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: p/x, provider: p, model: gpt-x }
  - { id: p/y, provider: p, model: gpt-y }
  - { id: q/z, provider: q, model: gpt-z }
"#,
    )
    .await;
    let http = http();
    let mut served = BTreeMap::new();
    let mut refusal = None;
    for i in 0..30 {
        let model = if i % 2 == 0 { "p/x" } else { "p/y" };
        let r = http
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": model, "messages": common::user("hi")}))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        if status == 429 {
            assert!(r.headers().contains_key("retry-after"));
            refusal = Some(r.json::<Value>().await.unwrap());
        } else {
            let _ = r.bytes().await;
        }
        *served.entry((model, status)).or_insert(0) += 1;
    }
    assert_eq!(
        served,
        BTreeMap::from([
            (("p/x", 200), 5),
            (("p/x", 429), 10),
            (("p/y", 200), 5),
            (("p/y", 429), 10)
        ])
    );
    let e = refusal.unwrap();
    assert_eq!(e["error"]["code"], "gateway_rate_limited", "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("provider"),
        "{e}"
    );
    assert_eq!(h.mock.request_count(), 10);
    assert_eq!(send(&h, &http, "q/z", 3).await.get("q/z"), Some(&3));
    for id in ["p/x", "p/y"] {
        let d = state_of(&h, id).await;
        assert_eq!(
            (d["rpm_limit"].as_u64(), d["rpm_used"].as_u64()),
            (Some(10), Some(5)),
            "{d}"
        );
        assert_eq!(
            d["quota_used"]["rpm"], 1.0,
            "the pool is every deployment's quota"
        );
    }
    assert!(h
        .metrics()
        .await
        .contains(r#"switchyard_ratelimit_rejections_total{scope="deployment"} 20"#));
    // A minute on, the pool's window has room again.
    later(61).await;
    assert_eq!(send(&h, &http, "p/y", 1).await.get("p/y"), Some(&1));
}

/// Gemini behind `g/flash`, answering every request with `behavior`; an
/// OpenAI deployment behind it.
fn gemini_first(behavior: &Value) -> String {
    format!(
        r#"
providers:
  g:
    protocol: gemini
    base_url: "{{mock}}"
    keys: [{{ env: TEST_KEY }}]
    options: {{ mock: {behavior} }}
  o: {{ protocol: openai, base_url: "{{mock}}/v1" }}
models:
  - {{ id: g/flash, provider: g, model: gemini-2.5-flash }}
  - {{ id: o/m, provider: o, model: gpt-o }}
routes:
  chat: {{ strategy: priority, targets: [g/flash, o/m], retry: {{ attempts: 1 }} }}
"#
    )
}

/// The recorded Gemini 429 (`…PerModelPerMinute-FreeTier`, RetryInfo 26 s),
/// or the same with a per-day quota id.
fn gemini_429(per_day: bool) -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/providers/gemini/error_429_resource_exhausted.http.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let text = if per_day {
        text.replace(
            "GenerateContentInputTokensPerModelPerMinute-FreeTier",
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        )
    } else {
        text
    };
    let envelope: Value = serde_json::from_str(&text).unwrap();
    json!({"status": 429, "body": envelope["body"]})
}

fn gemini_calls(h: &common::Harness) -> usize {
    h.mock
        .requests()
        .iter()
        .filter(|r| r.path_and_query.contains("generateContent"))
        .count()
}

/// (e) A Gemini per-day quota 429 rests `g/flash` until midnight US
/// Pacific (Google's daily reset): requests go to `o/m` and Gemini is not
/// asked again; a per-minute one rests it for its RetryInfo only.
#[tokio::test(start_paused = true)]
async fn a_gemini_per_day_429_rests_until_the_pacific_midnight_a_per_minute_one_does_not() {
    let h = common::start(&gemini_first(&gemini_429(true))).await;
    let http = http();
    let served = send(&h, &http, "chat", 1).await;
    assert_eq!(served.get("o/m"), Some(&1), "{served:?}");
    let expected =
        switchyard::adapters::resets::until_pacific_midnight(std::time::SystemTime::now());
    let rest = state_of(&h, "g/flash").await["resting_for_s"]
        .as_f64()
        .unwrap();
    assert!(
        (rest - expected.as_secs_f64()).abs() < 5.0,
        "rests {rest} s, the reset is {} s away",
        expected.as_secs_f64()
    );
    assert!(
        rest > 300.0 || expected.as_secs() <= 300,
        "longer than any 429 rest"
    );
    assert_eq!(send(&h, &http, "chat", 10).await.get("o/m"), Some(&10));
    assert_eq!(gemini_calls(&h), 1, "not asked again before the reset");
    if expected > Duration::from_secs(3700) {
        later(3600).await;
        assert_eq!(send(&h, &http, "chat", 3).await.get("o/m"), Some(&3));
        assert_eq!(gemini_calls(&h), 1, "an hour on, still resting");
    }

    let h = common::start(&gemini_first(&gemini_429(false))).await;
    assert_eq!(send(&h, &http, "chat", 1).await.get("o/m"), Some(&1));
    let rest = state_of(&h, "g/flash").await["resting_for_s"]
        .as_f64()
        .unwrap();
    assert!(rest > 0.0 && rest <= 26.0, "rests {rest} s: its RetryInfo");
    later(27).await;
    let _ = send(&h, &http, "chat", 1).await;
    assert!(gemini_calls(&h) >= 2, "asked again after 26 s");
}
