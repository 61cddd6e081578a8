//! Response contracts (contract §11) over real HTTP: a deployment whose
//! answer does not satisfy the request's JSON Schema is repaired, then
//! falls back, then errors — per the route's `contract:` — on all three
//! doors, whole and streamed, and every check is in the decision log and
//! the metrics. The mock serves scripted answers, in order, one per
//! upstream call.

mod common;

use serde_json::{json, Value};
use switchyard_mock::Behavior;

/// Route `extract` over two OpenAI-protocol deployments of the same mock
/// (whose answers the script sets; the Anthropic and Responses doors
/// translate); `{contract}` is the route's `contract:` value.
fn config(contract: &str) -> String {
    format!(
        r#"
providers:
  oai: {{ protocol: openai, base_url: "{{mock}}/v1" }}
models:
  - id: oai/a
    provider: oai
    model: a
    capabilities: [json_schema, streaming]
    pricing: {{ input: 1.0, output: 2.0 }}
  - id: oai/b
    provider: oai
    model: b
    capabilities: [json_schema, streaming]
    pricing: {{ input: 3.0, output: 15.0 }}
routes:
  extract:
    targets: [oai/a, oai/b]
    contract: {contract}
"#
    )
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "total": {"type": "number", "minimum": 0}
        },
        "required": ["name", "total"],
        "additionalProperties": false
    })
}

const GOOD: &str = r#"{"name": "ACME", "total": 12.5}"#;
const BAD: &str = r#"{"name": "ACME", "total": "twelve"}"#;

fn chat(stream: bool) -> Value {
    json!({
        "model": "extract",
        "stream": stream,
        "messages": common::user("Extract the invoice: ACME owes 12.50"),
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "invoice", "schema": schema(), "strict": true}
        }
    })
}

fn messages(stream: bool) -> Value {
    json!({
        "model": "extract",
        "max_tokens": 200,
        "stream": stream,
        "messages": common::user("Extract the invoice: ACME owes 12.50"),
        "output_config": {"format": {"type": "json_schema", "schema": schema()}}
    })
}

fn responses(stream: bool) -> Value {
    json!({
        "model": "extract",
        "stream": stream,
        "input": "Extract the invoice: ACME owes 12.50",
        "text": {"format": {"type": "json_schema", "name": "invoice", "schema": schema(), "strict": true}}
    })
}

fn script(h: &common::Harness, texts: &[&str]) {
    h.mock
        .script(texts.iter().map(|t| Behavior::text(*t)).collect());
}

/// The upstream calls, in order: (path, body).
fn calls(h: &common::Harness) -> Vec<(String, Value)> {
    h.mock
        .requests()
        .into_iter()
        .map(|r| (r.path_and_query, r.json.unwrap_or(Value::Null)))
        .collect()
}

/// The one decision-log line's `contract` entry.
async fn contract_log(h: &common::Harness) -> Value {
    let d = h.decision(0).await;
    d["contract"].clone()
}

fn violations(metrics: &str, deployment: &str) -> f64 {
    let want = format!(
        "switchyard_contract_violations_total{{route=\"extract\",deployment=\"{deployment}\"}} "
    );
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&want))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

fn openai_text(body: &Value) -> &str {
    body["choices"][0]["message"]["content"].as_str().unwrap()
}

#[tokio::test]
async fn a_violation_is_repaired_on_the_same_deployment_with_the_validators_message() {
    let h = common::start(&config("{ on_violation: repair }")).await;
    script(&h, &[BAD, GOOD]);
    let resp = h.post(chat(false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-switchyard-deployment"], "oai/a");
    let cost = common::header_f64(&resp, "x-switchyard-cost-usd");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(openai_text(&body), GOOD);

    let calls = calls(&h);
    assert_eq!(calls.len(), 2, "the answer and one repair");
    let (path, repair) = &calls[1];
    assert!(path.ends_with("/chat/completions"), "{path}");
    let msgs = repair["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[1]["content"], BAD);
    let ask = msgs[2]["content"].as_str().unwrap();
    assert!(ask.contains("/total"), "the validator's message: {ask}");
    assert!(ask.contains("not of type \"number\""), "{ask}");
    // Still asked for the schema, and whole.
    assert_eq!(repair["response_format"]["type"], "json_schema");

    let log = contract_log(&h).await;
    assert_eq!(log["mode"], "whole");
    let checks = log["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0]["valid"], false);
    assert_eq!(checks[0]["then"], "repair");
    assert!(checks[0]["error"].as_str().unwrap().contains("not of type"));
    assert_eq!(checks[1]["valid"], true);
    assert_eq!(checks[1]["deployment"], "oai/a");

    // Both calls are paid for: the rejected answer too.
    let d = h.decision(0).await;
    let attempts = d["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2);
    let out: Vec<u64> = attempts
        .iter()
        .map(|a| a["tokens"]["output"].as_u64().unwrap())
        .collect();
    let input: Vec<u64> = attempts
        .iter()
        .map(|a| a["tokens"]["input"].as_u64().unwrap())
        .collect();
    assert!(out.iter().all(|&o| o > 0), "{d}");
    assert_eq!(d["tokens"]["output"].as_u64().unwrap(), out[0] + out[1]);
    assert_eq!(d["tokens"]["input"].as_u64().unwrap(), input[0] + input[1]);
    let priced = (input[0] + input[1]) as f64 * 1e-6 + (out[0] + out[1]) as f64 * 2e-6;
    assert!((cost - priced).abs() < 1e-12, "{cost} vs {priced}");
    assert_eq!(violations(&h.metrics().await, "oai/a"), 1.0);
}

#[tokio::test]
async fn repairs_spent_fall_back_and_then_answer_502_response_contract_violation() {
    let h = common::start(&config("{ on_violation: repair, repair_attempts: 1 }")).await;
    // oai/a: the answer and its repair; oai/b: the answer and its repair.
    script(&h, &[BAD, BAD, BAD, BAD]);
    let resp = h.post(chat(false)).await;
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "response_contract_violation");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("JSON Schema"));
    let models: Vec<Value> = calls(&h)
        .into_iter()
        .map(|(_, b)| b["model"].clone())
        .collect();
    assert_eq!(models, ["a", "a", "b", "b"]);
    let log = contract_log(&h).await;
    let then: Vec<&str> = log["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["then"].as_str().unwrap())
        .collect();
    assert_eq!(then, ["repair", "fallback", "repair", "fallback"]);
    let m = h.metrics().await;
    assert_eq!(violations(&m, "oai/a"), 2.0);
    assert_eq!(violations(&m, "oai/b"), 2.0);
    let d = h.decision(0).await;
    assert_eq!(d["error"], "response_contract_violation");
    assert_eq!(d["status"], 502);
    assert!(
        d["cost_usd"].as_f64().unwrap() > 0.0,
        "four calls were billed"
    );
}

#[tokio::test]
async fn with_fallback_the_next_candidate_answers_without_a_repair() {
    let h = common::start(&config("{ on_violation: fallback }")).await;
    script(&h, &[BAD, GOOD]);
    let resp = h.post(chat(false)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-switchyard-deployment"], "oai/b");
    assert_eq!(
        resp.headers()["x-switchyard-fallback-reason"],
        "response_contract_violation"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(openai_text(&body), GOOD);
    let calls = calls(&h);
    assert_eq!(calls.len(), 2);
    // The fallback got the client's conversation, not a repair.
    assert_eq!(calls[1].1["messages"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn with_error_the_first_violation_answers_502_and_with_pass_it_is_only_counted() {
    let h = common::start(&config("{ on_violation: error }")).await;
    script(&h, &[BAD]);
    let resp = h.post(chat(false)).await;
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "response_contract_violation");
    assert_eq!(calls(&h).len(), 1, "no repair, no fallback");

    let h = common::start(&config("{ on_violation: pass }")).await;
    script(&h, &[BAD]);
    let resp = h.post(chat(false)).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(openai_text(&body), BAD);
    assert_eq!(calls(&h).len(), 1);
    let log = contract_log(&h).await;
    assert_eq!(log["checks"][0]["then"], "pass");
    assert_eq!(violations(&h.metrics().await, "oai/a"), 1.0);
}

#[tokio::test]
async fn a_held_stream_sends_only_the_repaired_answer() {
    let h = common::start(&config("{ on_violation: repair }")).await;
    script(&h, &[BAD, GOOD]);
    let resp = h.post(chat(true)).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let body = resp.text().await.unwrap();
    assert_eq!(common::sse_text(&body), GOOD);
    assert!(
        !body.contains("twelve"),
        "the rejected answer never went out"
    );
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    // Asked of the upstream whole, both times.
    for (_, c) in calls(&h) {
        assert_ne!(c["stream"], true, "{c}");
    }
    let log = contract_log(&h).await;
    assert_eq!(log["mode"], "held");
    assert_eq!(log["checks"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn a_held_stream_that_never_validates_gets_the_error_and_no_stream() {
    let h = common::start(&config("{ on_violation: fallback }")).await;
    script(&h, &[BAD, BAD]);
    let resp = h.post(chat(true)).await;
    assert_eq!(resp.status(), 502);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "response_contract_violation");
}

#[tokio::test]
async fn stream_end_checks_at_the_end_and_a_violation_ends_with_an_error_event() {
    let h = common::start(&config("{ on_violation: repair, stream: end }")).await;
    script(&h, &[BAD]);
    let resp = h.post(chat(true)).await;
    assert_eq!(resp.status(), 200);
    let body = resp.text().await.unwrap();
    // It streamed as it came…
    assert_eq!(common::sse_text(&body), BAD);
    // …and ended with the contract's error, never a clean end.
    assert!(!body.contains("[DONE]"), "{body}");
    let last = common::sse_data(&body).pop().unwrap();
    let last: Value = serde_json::from_str(&last).unwrap();
    assert_eq!(
        last["error"]["code"], "response_contract_violation",
        "{last}"
    );
    assert_eq!(calls(&h)[0].1["stream"], true);
    let log = contract_log(&h).await;
    assert_eq!(log["mode"], "end");
    assert_eq!(log["checks"][0]["valid"], false);
    assert_eq!(violations(&h.metrics().await, "oai/a"), 1.0);

    // A valid answer ends cleanly.
    let h = common::start(&config("{ stream: end }")).await;
    script(&h, &[GOOD]);
    let body = h.post(chat(true)).await.text().await.unwrap();
    assert_eq!(common::sse_text(&body), GOOD);
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    assert_eq!(contract_log(&h).await["checks"][0]["valid"], true);
}

/// The text of an Anthropic answer, whole or streamed.
fn anthropic_text(body: &str, stream: bool) -> String {
    if !stream {
        let v: Value = serde_json::from_str(body).unwrap();
        return v["content"][0]["text"].as_str().unwrap().to_owned();
    }
    common::sse_data(body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["delta"]["text"].as_str().map(str::to_owned))
        .collect()
}

/// The text of a Responses answer, whole or streamed.
fn responses_text(body: &str, stream: bool) -> String {
    if !stream {
        let v: Value = serde_json::from_str(body).unwrap();
        return v["output"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["type"] == "message")
            .flat_map(|i| i["content"].as_array().unwrap().clone())
            .filter_map(|c| c["text"].as_str().map(str::to_owned))
            .collect();
    }
    common::sse_data(body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["type"] == "response.output_text.delta")
        .filter_map(|v| v["delta"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_anthropic_and_responses_doors_are_repaired_and_fall_back_alike() {
    for stream in [false, true] {
        // Anthropic door: repaired on oai/a.
        let h = common::start(&config("{ on_violation: repair }")).await;
        script(&h, &[BAD, GOOD]);
        let resp = h.messages(messages(stream)).await;
        assert_eq!(resp.status(), 200, "stream={stream}");
        let body = resp.text().await.unwrap();
        assert_eq!(anthropic_text(&body, stream), GOOD, "stream={stream}");
        assert_eq!(calls(&h).len(), 2);
        let log = contract_log(&h).await;
        assert_eq!(log["checks"][0]["then"], "repair");
        assert_eq!(log["checks"][1]["valid"], true);

        // Responses door: falls back to oai/b.
        let h = common::start(&config("{ on_violation: fallback }")).await;
        script(&h, &[BAD, GOOD]);
        let resp = h.responses(responses(stream)).await;
        assert_eq!(resp.status(), 200, "stream={stream}");
        assert_eq!(resp.headers()["x-switchyard-deployment"], "oai/b");
        let body = resp.text().await.unwrap();
        assert_eq!(
            responses_text(&body, stream),
            GOOD,
            "stream={stream}: {body}"
        );

        // And both answer the contract's error in their own envelope.
        let h = common::start(&config("{ on_violation: error }")).await;
        script(&h, &[BAD, BAD]);
        let resp = h.messages(messages(stream)).await;
        assert_eq!(resp.status(), 502);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["type"], "error");
        assert_eq!(body["error"]["type"], "api_error");
        let resp = h.responses(responses(stream)).await;
        assert_eq!(resp.status(), 502);
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "response_contract_violation");
    }
}

#[tokio::test]
async fn requests_without_a_schema_and_schemas_that_cannot_compile_are_not_held_hostage() {
    let h = common::start(&config("{ on_violation: error }")).await;
    // No schema: the route's contract has nothing to check.
    script(&h, &["not json at all"]);
    let resp = h
        .post(json!({"model": "extract", "messages": common::user("hi")}))
        .await;
    assert_eq!(resp.status(), 200);
    assert!(h.decision(0).await.get("contract").is_none());

    // A schema whose `$ref` would need the network: never fetched, the
    // answer passes (and the request does not hang on it).
    script(&h, &["not json at all"]);
    let mut body = chat(false);
    body["response_format"]["json_schema"]["schema"] =
        json!({"$ref": "https://example.invalid/invoice.json"});
    let resp = h.post(body).await;
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn a_repair_the_budget_cannot_cover_is_refused_not_overspent() {
    // A call may cost up to 200 output tokens: $0.0004 on oai/a, $0.003 on
    // oai/b. The budget covers one call on oai/a; the rejected answer used
    // 150 of them, and the repair's worst case on top does not fit.
    let yaml = format!(
        "{}\nclients:\n  - {{ id: team, key_env: CLIENT_KEY, budget: {{ usd: 0.0006, per: day }} }}\n",
        config("{ on_violation: repair }")
    );
    let h = common::start(&yaml).await;
    let long_bad = format!(
        r#"{{"name": "{}", "total": "twelve"}}"#,
        "ACME ".repeat(160)
    );
    h.mock.script(vec![
        Behavior::text(long_bad).chunks(150),
        Behavior::text(GOOD),
    ]);
    let mut body = chat(false);
    body["max_tokens"] = json!(200);
    let resp = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .bearer_auth("client-secret")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    let d = h.decision(0).await;
    let spent = d["cost_usd"].as_f64().unwrap_or(0.0);
    assert!(
        spent <= 0.0006 + 1e-12,
        "spent {spent} past the budget ({status}: {text})"
    );
    // The repair was not sent: one upstream call.
    assert_eq!(calls(&h).len(), 1, "{status}: {text}");
    assert_eq!(status, 429, "{text}");
    assert!(text.contains("budget_exceeded"), "{text}");
}

#[tokio::test]
async fn an_anthropic_upstreams_json_tool_answer_is_checked_and_repaired_too() {
    // Anthropic has no JSON mode: the schema goes up as a forced tool, and
    // the tool's input comes back as the answer text.
    let h = common::start(
        r#"
providers:
  ant: { protocol: anthropic, base_url: "{mock}" }
models:
  - { id: ant/c, provider: ant, model: c, capabilities: [json_schema, streaming] }
routes:
  extract:
    targets: [ant/c]
    contract: { on_violation: repair }
"#,
    )
    .await;
    h.mock.script(vec![
        Behavior::tool_loop("json", json!({"name": "ACME", "total": "twelve"}), "-"),
        Behavior::tool_loop("json", json!({"name": "ACME", "total": 12.5}), "-"),
    ]);
    let resp = h.post(chat(false)).await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    let got: Value = serde_json::from_str(openai_text(&body)).unwrap();
    assert_eq!(got, json!({"name": "ACME", "total": 12.5}));
    let calls = calls(&h);
    assert_eq!(calls.len(), 2);
    assert!(calls[1].0.ends_with("/v1/messages"), "{}", calls[1].0);
    // The repair went up in Anthropic's dialect, the rejected answer as
    // the assistant's turn.
    let msgs = calls[1].1["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["role"], "assistant");
    assert!(msgs[1].to_string().contains("twelve"), "{msgs:?}");
    let log = contract_log(&h).await;
    assert_eq!(log["checks"][0]["then"], "repair");
    assert_eq!(log["checks"][1]["valid"], true);
}

#[tokio::test]
async fn a_client_that_gives_up_on_a_held_stream_is_charged_and_never_sees_a_rejected_answer() {
    let h = common::start(&config("{ on_violation: repair }")).await;
    // The rejected answer comes at once; its repair takes 3 s.
    h.mock.script(vec![
        Behavior::text(BAD),
        Behavior::text(GOOD).latency(3_000),
    ]);
    let http = reqwest::Client::new();
    let got = tokio::time::timeout(std::time::Duration::from_millis(800), async {
        let resp = http
            .post(h.url("/v1/chat/completions"))
            .json(&chat(true))
            .send()
            .await
            .unwrap();
        resp.text().await.unwrap()
    })
    .await;
    assert!(
        got.is_err(),
        "nothing goes out while the answer is held: {got:?}"
    );
    drop(http);
    let d = h.decision(0).await;
    assert_eq!(d["status"], 499);
    assert_eq!(d["outcome"], "client_closed");
    // The rejected answer (billed) and the repair's prompt, sent before
    // the client left.
    assert!(d["tokens"]["output"].as_u64().unwrap() > 0, "{d}");
    assert!(d["cost_usd"].as_f64().unwrap() > 0.0, "{d}");
    assert_eq!(d["contract"]["checks"][0]["then"], "repair");
}

#[tokio::test]
async fn several_choices_keep_every_choice_whole_and_are_not_held_as_a_stream() {
    let h = common::start(&config("{ on_violation: repair }")).await;
    // Whole: every choice comes back; the first is the one checked.
    script(&h, &[GOOD]);
    let mut body = chat(false);
    body["n"] = json!(3);
    let resp = h.post(body).await;
    assert_eq!(resp.status(), 200);
    let got: Value = resp.json().await.unwrap();
    assert_eq!(got["choices"].as_array().unwrap().len(), 3, "{got}");
    assert_eq!(contract_log(&h).await["checks"][0]["valid"], true);

    // A stream of several choices is not held (a held answer would come
    // back as one choice): it streams as it came, unchecked.
    let h = common::start(&config("{ on_violation: repair }")).await;
    script(&h, &[BAD]);
    let mut body = chat(true);
    body["n"] = json!(2);
    let resp = h.post(body).await;
    assert_eq!(resp.status(), 200);
    let text = resp.text().await.unwrap();
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert_eq!(calls(&h)[0].1["stream"], true);
    assert!(h.decision(0).await.get("contract").is_none());
}
