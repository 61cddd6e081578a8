//! What a request costs: usage × the deployment's prices, the same for an
//! answer streamed or not, and every upstream call of a resumed stream paid
//! for — the broken one too, estimated when it sent no usage.

mod common;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

const PRICED: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: oa/m, provider: oa, model: m, capabilities: [streaming, prefill], pricing: { input: 3.0, output: 15.0, cached_input: 0.3, cache_write: 3.75 } }
routes:
  chat: { targets: [oa/m] }
"#;

fn cost(input: u64, output: u64) -> f64 {
    (input as f64 * 3.0 + output as f64 * 15.0) / 1e6
}

#[tokio::test]
async fn streamed_or_not_the_same_answer_costs_the_same() {
    let h = common::start(PRICED).await;
    let resp = h
        .post(json!({"model": "chat", "messages": common::user("Hello there")}))
        .await;
    let header: f64 = common::header_f64(&resp, "x-switchyard-cost-usd");
    let body: Value = resp.json().await.unwrap();
    let (i, o) = (
        body["usage"]["prompt_tokens"].as_u64().unwrap(),
        body["usage"]["completion_tokens"].as_u64().unwrap(),
    );
    assert!(
        (header - cost(i, o)).abs() < 1e-8,
        "{header} vs {}",
        cost(i, o)
    );
    let _ = h
        .post(json!({"model": "chat", "stream": true, "messages": common::user("Hello there")}))
        .await
        .text()
        .await
        .unwrap();
    let d = h.decision(1).await;
    assert_eq!(
        (
            d["tokens"]["input"].as_u64(),
            d["tokens"]["output"].as_u64()
        ),
        (Some(i), Some(o))
    );
    assert!(
        (d["cost_usd"].as_f64().unwrap() - header).abs() < 1e-12,
        "{d}"
    );
}

#[tokio::test]
async fn a_resumed_stream_pays_for_every_call_it_made() {
    let h = common::start(PRICED).await;
    h.mock.script(vec![Behavior::fault(Fault::Cut).after(3)]);
    let body = h
        .post(json!({"model": "chat", "stream": true, "messages": common::user("hi")}))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(
        common::sse_text(&body),
        "Hello from the mock openai provider."
    );
    let d = h.decision(0).await;
    assert_eq!(d["attempts"].as_array().unwrap().len(), 2, "{d}");
    let (i, o) = (
        d["tokens"]["input"].as_u64().unwrap(),
        d["tokens"]["output"].as_u64().unwrap(),
    );
    // The continuation's own usage ("the mock provider." is 4 pieces) plus
    // the broken call's estimate: its prompt, and "Hello from" streamed
    // (2 tokens, counted with the tokenizer).
    let continuation = h.mock.requests()[1].json.clone().unwrap();
    assert_eq!(continuation["messages"].as_array().unwrap().len(), 2);
    assert!(o >= 4 + 2, "{d}");
    assert!(i >= 2, "both calls' prompts: {d}");
    assert!(
        (d["cost_usd"].as_f64().unwrap() - cost(i, o)).abs() < 1e-12,
        "{d}"
    );
    // Each call's own tokens, on its own attempt: together the whole.
    let per: Vec<(u64, u64)> = d["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["tokens"]["input"].as_u64().unwrap(),
                a["tokens"]["output"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(per[1].1, 4, "the continuation streamed 4 pieces: {d}");
    assert_eq!((per[0].0 + per[1].0, per[0].1 + per[1].1), (i, o), "{d}");
}

#[tokio::test]
async fn a_stream_cut_for_good_is_billed_what_it_streamed() {
    let h = common::start(&PRICED.replace("[streaming, prefill]", "[streaming]")).await;
    h.mock.set_default(Behavior::fault(Fault::Cut).after(3));
    let body = h
        .post(json!({"model": "chat", "stream": true, "messages": common::user("hi")}))
        .await
        .text()
        .await
        .unwrap();
    assert!(body.contains("\"error\""), "{body}");
    let d = h.decision(0).await;
    assert!(d["tokens"]["output"].as_u64().unwrap() > 0, "{d}");
    assert!(
        d["cost_usd"].as_f64().unwrap() > 0.0,
        "never spend 0 for a billed call: {d}"
    );
}

/// Every price kind at once: fresh input, cache reads, cache writes and
/// output (reasoning included), through the Anthropic upstream that reports
/// all of them, streamed and not.
#[tokio::test]
async fn each_price_kind_is_charged_at_its_own_price() {
    let yaml = r#"
providers:
  an: { protocol: anthropic, base_url: "{mock}" }
models:
  - { id: an/c, provider: an, model: c, capabilities: [streaming], pricing: { input: 3.0, output: 15.0, cached_input: 0.3, cache_write: 3.75 } }
routes:
  chat: { targets: [an/c] }
"#;
    let h = common::start(yaml).await;
    let long = "word ".repeat(200);
    h.mock
        .set_default(Behavior::default().cached(120).cache_write(40));
    let mut costs = Vec::new();
    for stream in [false, true] {
        let r = h
            .post(json!({"model": "chat", "stream": stream, "messages": common::user(&long)}))
            .await;
        assert_eq!(r.status(), 200);
        r.text().await.unwrap();
        let d = h.decision(costs.len()).await;
        let (input, output, cached) = (
            d["tokens"]["input"].as_u64().unwrap(),
            d["tokens"]["output"].as_u64().unwrap(),
            d["tokens"]["cached"].as_u64().unwrap(),
        );
        assert_eq!(cached, 120, "{d}");
        // Input counts every prompt token: fresh, read and written.
        let fresh = input - 120 - 40;
        let want = (fresh as f64 * 3.0 + 120.0 * 0.3 + 40.0 * 3.75 + output as f64 * 15.0) / 1e6;
        let got = d["cost_usd"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-12,
            "stream={stream}: {got} vs {want}: {d}"
        );
        costs.push(got);
    }
    assert!((costs[0] - costs[1]).abs() < 1e-12, "{costs:?}");
    let u = h.usage("group_by=deployment").await;
    let row = &u["rows"][0];
    assert_eq!(row["cached_input_tokens"], 240);
    assert!(
        (row["cost_usd"].as_f64().unwrap() - 2.0 * costs[0]).abs() < 1e-12,
        "{u}"
    );
}
