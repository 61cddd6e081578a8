//! Rests that learn (contract §10): a provider that keeps answering 429
//! past its Retry-After rests longer each time while requests go
//! elsewhere, and every 429 a client gets says when to come back. (The
//! jitter on Retry-After waits is `upstream::retry_after`'s unit test.)

mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard_mock::Behavior;

/// `flaky` always answers 429 with `Retry-After: 1` (the recorded OpenAI
/// envelope); `good` answers.
const TWO: &str = r#"
providers:
  flaky:
    protocol: openai
    base_url: "{mock}/v1"
    options: { mock: { fixture: "openai/error_429_rate_limit_tokens" } }
  good: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: flaky/m, provider: flaky, model: gpt-flaky }
  - { id: good/m, provider: good, model: gpt-good }
routes:
  chat: { targets: [flaky/m, good/m], retry: { attempts: 1 } }
"#;

/// The mock's requests for `model`.
fn calls(h: &common::Harness, model: &str) -> usize {
    h.mock
        .requests()
        .iter()
        .filter(|r| r.json.as_ref().is_some_and(|j| j["model"] == model))
        .count()
}

/// Ten requests a second for six seconds, one at a time, all served by
/// the fallback; the 429ing first choice is asked again only when its
/// rest ends, and each rest is twice the last (1 s, 2 s, 4 s…): three or
/// four calls, not sixty.
#[tokio::test]
async fn a_provider_that_keeps_answering_429_rests_longer_each_time() {
    let h = common::start(TWO).await;
    let started = Instant::now();
    let mut served = 0;
    while started.elapsed() < Duration::from_secs(6) {
        let r = h
            .post(json!({"model": "chat", "messages": common::user("hi")}))
            .await;
        assert_eq!(r.status(), 200);
        served += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let flaky = calls(&h, "gpt-flaky");
    assert!(served >= 40, "{served}");
    assert_eq!(
        calls(&h, "gpt-good"),
        served,
        "every request served by the fallback"
    );
    assert!(
        (2..=4).contains(&flaky),
        "the 429ing provider was asked {flaky} times in 6 s (rests 1, 2, 4 s)"
    );
}

/// A 429 whose upstream named no wait (here, a bare 429 body) still
/// reaches the client with Retry-After.
#[tokio::test]
async fn every_429_a_client_gets_carries_retry_after() {
    let h = common::start(
        r#"
providers:
  p: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: p/m, provider: p, model: gpt-m }
routes:
  chat: { targets: [p/m], retry: { attempts: 1 } }
"#,
    )
    .await;
    let body = json!({"error": {"message": "slow down", "type": "rate_limit_error"}});
    h.mock.set_default(Behavior::status(429, body.to_string()));
    let r = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 429);
    assert_eq!(common::header_f64(&r, "retry-after"), 1.0);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "rate_limited", "{v}");
}
