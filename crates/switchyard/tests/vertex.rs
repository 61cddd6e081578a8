//! Google Vertex AI over real HTTP (contract §9): Gemini (publisher
//! `google`) and Claude (publisher `anthropic`, `rawPredict`) from every
//! door, streamed and not, with an access token minted from a service
//! account at the mock's token endpoint — once per lifetime, never on the
//! request path — and Vertex's error bodies.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault, MockServer};

const VERTEX: &str = r#"
providers:
  vertex:
    protocol: vertex
    project: test-project
    location: us-east5
    base_url: "{mock}"
    credentials: { file: "{dir}/sa.json" }
models:
  - { id: vertex/gemini, provider: vertex, model: gemini-2.5-pro, capabilities: [tools, streaming] }
  - { id: vertex/claude, provider: vertex, model: "claude-sonnet-4-5@20250929", capabilities: [tools, streaming] }
routes:
  gemini: { targets: [vertex/gemini] }
  claude: { targets: [vertex/claude] }
"#;

const SA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/providers/vertex/oauth/service_account.test.json"
);

/// The gateway with the test service account, its `token_uri` the mock's.
async fn start() -> common::Harness {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut sa: Value = serde_json::from_str(&std::fs::read_to_string(SA).unwrap()).unwrap();
    sa["token_uri"] = json!(format!("{}/token", mock.base_url()));
    std::fs::write(dir.path().join("sa.json"), sa.to_string()).unwrap();
    common::start_on(mock, VERTEX, "", dir).await
}

#[tokio::test]
async fn gemini_on_vertex_from_the_openai_door() {
    let h = start().await;
    let r = h
        .post(json!({"model": "gemini", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"], "Hello from the mock gemini provider.",
        "{body}"
    );
    let sent = h
        .mock
        .requests()
        .into_iter()
        .find(|r| r.path_and_query.contains(":generateContent"))
        .unwrap();
    assert_eq!(
        sent.path_and_query,
        "/v1/projects/test-project/locations/us-east5/publishers/google/models/gemini-2.5-pro:generateContent"
    );
    assert!(sent
        .header("authorization")
        .unwrap()
        .starts_with("Bearer ya29."));
    assert_eq!(sent.header("x-goog-api-key"), None);

    let r = h
        .post(json!({"model": "gemini", "stream": true, "messages": common::user("hi")}))
        .await;
    let text = r.text().await.unwrap();
    assert_eq!(
        common::sse_text(&text),
        "Hello from the mock gemini provider."
    );
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn claude_on_vertex_passes_an_anthropic_client_through_and_translates_others() {
    let h = start().await;
    let msg = json!({"model": "claude", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]});
    let r = h.messages(msg.clone()).await;
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["content"][0]["text"],
        "Hello from the mock anthropic provider."
    );
    assert!(
        body["id"].as_str().unwrap().starts_with("msg_vrtx_"),
        "{body}"
    );
    let sent = h.mock.requests().last().unwrap().clone();
    assert_eq!(
        sent.path_and_query,
        "/v1/projects/test-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"
    );
    let upstream = sent.json.unwrap();
    assert_eq!(upstream["anthropic_version"], "vertex-2023-10-16");
    assert!(upstream.get("model").is_none(), "{upstream}");

    let mut stream = msg.clone();
    stream["stream"] = json!(true);
    let text = h.messages(stream).await.text().await.unwrap();
    assert!(text.contains("event: message_stop"), "{text}");
    assert!(h
        .mock
        .requests()
        .last()
        .unwrap()
        .path_and_query
        .ends_with(":streamRawPredict"));

    for stream in [false, true] {
        let r = h
            .post(json!({"model": "claude", "stream": stream, "messages": common::user("hi")}))
            .await;
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        assert!(
            text.contains("Hello from the mock anthropic provider.")
                || common::sse_text(&text) == "Hello from the mock anthropic provider.",
            "{text}"
        );
    }
    let r = reqwest::Client::new()
        .post(h.url("/v1/responses"))
        .json(&json!({"model": "claude", "input": "hi"}))
        .send()
        .await
        .unwrap();
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["output"][0]["content"][0]["text"], "Hello from the mock anthropic provider.",
        "{body}"
    );
}

/// One token serves every request of its lifetime: the token endpoint is
/// hit once, however many requests go out.
#[tokio::test]
async fn a_token_is_minted_once_per_lifetime_not_per_request() {
    let h = start().await;
    for i in 0..20 {
        let model = if i % 2 == 0 { "gemini" } else { "claude" };
        let r = h
            .post(json!({"model": model, "messages": common::user("hi")}))
            .await;
        assert_eq!(r.status(), 200);
    }
    assert_eq!(h.mock.token_requests(), 1);
}

/// A service account the token endpoint refuses: `auth_failed`, the
/// private key nowhere in the answer.
#[tokio::test]
async fn a_refused_service_account_is_auth_failed() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut sa: Value = serde_json::from_str(&std::fs::read_to_string(SA).unwrap()).unwrap();
    sa["token_uri"] = json!(format!("{}/token", mock.base_url()));
    sa["client_email"] = json!("someone-else@example.iam.gserviceaccount.com");
    std::fs::write(dir.path().join("sa.json"), sa.to_string()).unwrap();
    let h = common::start_on(mock, VERTEX, "", dir).await;
    let r = h
        .post(json!({"model": "gemini", "messages": common::user("hi")}))
        .await;
    let text = r.text().await.unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["code"], "auth_failed", "{v}");
    assert!(!text.contains("PRIVATE KEY"), "{text}");
}

#[tokio::test]
async fn vertex_errors_keep_their_codes() {
    let h = start().await;
    for (route, status, code) in [
        // A bare 403 is about this request; IAM refusing the service
        // account (below) is the credentials'.
        ("gemini", 403, "forbidden"),
        ("gemini", 400, "invalid_request"),
    ] {
        h.mock.set_default(Behavior::status(status, ""));
        let v: Value = h
            .post(json!({"model": route, "messages": common::user("hi")}))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(v["error"]["code"], code, "{route} {status}: {v}");
    }
    for (fixture, code) in [
        ("vertex/error_400_context_length", "context_too_long"),
        ("vertex/error_403_permission_denied", "auth_failed"),
    ] {
        h.mock.set_default(Behavior::fixture(fixture));
        let v: Value = h
            .post(json!({"model": "gemini", "messages": common::user("hi")}))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(v["error"]["code"], code, "{fixture}: {v}");
    }
    // Last: a 429 rests the deployment (contract §10).
    for route in ["gemini", "claude"] {
        h.mock.set_default(Behavior::status(429, ""));
        let v: Value = h
            .post(json!({"model": route, "messages": common::user("hi")}))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(v["error"]["code"], "rate_limited", "{route} 429: {v}");
    }
}

// === hostile clients ===

/// [`VERTEX`] with prices and a budgeted client.
const PRICED: &str = r#"
providers:
  vertex:
    protocol: vertex
    project: test-project
    location: us-east5
    base_url: "{mock}"
    credentials: { file: "{dir}/sa.json" }
models:
  - { id: vertex/gemini, provider: vertex, model: gemini-2.5-pro, capabilities: [streaming], pricing: { input: 100, output: 300 } }
  - { id: vertex/claude, provider: vertex, model: "claude-sonnet-4-5@20250929", capabilities: [streaming], pricing: { input: 100, output: 300 } }
routes:
  gemini: { targets: [vertex/gemini] }
  claude: { targets: [vertex/claude] }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 100, per: day } }
"#;

/// The gateway on `yaml` with the test service account.
async fn start_yaml(yaml: &str) -> common::Harness {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut sa: Value = serde_json::from_str(&std::fs::read_to_string(SA).unwrap()).unwrap();
    sa["token_uri"] = json!(format!("{}/token", mock.base_url()));
    std::fs::write(dir.path().join("sa.json"), sa.to_string()).unwrap();
    common::start_on(mock, yaml, "", dir).await
}

/// The generation calls the mock received (not the token endpoint's).
fn model_calls(h: &common::Harness) -> Vec<switchyard_mock::RecordedRequest> {
    h.mock
        .requests()
        .into_iter()
        .filter(|r| r.path_and_query.starts_with("/v1/projects/"))
        .collect()
}

/// A client that leaves a Vertex stream (Gemini SSE, Claude's
/// `streamRawPredict`) once it has some text: the gateway stops the
/// upstream call (the mock sees the body dropped) and charges what the
/// client received — `client_closed`, estimated, the same cost in the
/// decision line, the usage row and the budget.
#[tokio::test]
async fn a_vertex_stream_the_client_leaves_is_charged_and_the_call_stopped() {
    // Gemini: five of its six text frames (the last one carries the
    // usage); Claude: message_start, content_block_start, ping and five
    // deltas. Then nothing, the connection open.
    for (route, events, enough) in [("gemini", 5, " gemini"), ("claude", 8, " anthropic")] {
        let h = start_yaml(PRICED).await;
        h.mock.set_default(Behavior {
            chunk_delay_ms: 40,
            ..Behavior::fault(Fault::Stall).after(events)
        });
        common::charges::read_then_close(&h, route, |t| t.ends_with(enough)).await;
        let d = h.decision(0).await;
        assert_eq!(d["outcome"], "client_closed", "{route}: {d}");
        assert_eq!(d["usage_estimated"], true, "{route}: {d}");
        assert_eq!(d["status"], 499, "{route}: {d}");
        let (input, output) = (
            d["tokens"]["input"].as_u64().unwrap(),
            d["tokens"]["output"].as_u64().unwrap(),
        );
        assert!(input >= 8, "{route}: the prompt is charged: {d}");
        // "Hello from the mock gemini|anthropic": about 5 tokens.
        assert!((4..=7).contains(&output), "{route}: what was relayed: {d}");
        let cost = d["cost_usd"].as_f64().unwrap();
        let want = (input as f64 * 100.0 + output as f64 * 300.0) / 1e6;
        assert!((cost - want).abs() < 1e-9, "{route}: {cost} vs {want}");
        common::charges::closed_and_charged(&h, route, cost, output).await;
    }
}

/// `n` through the OpenAI door: Claude on Vertex answers one choice (400
/// `invalid_request` naming `n`, whole or streamed, nothing sent); Gemini
/// on Vertex as Gemini: several whole answers as `candidateCount`, a
/// stream of several refused.
#[tokio::test]
async fn several_choices_on_vertex_follow_each_publisher() {
    let h = start().await;
    let refused = [
        ("claude", 2, false),
        ("claude", 2, true),
        ("claude", 50, false),
        ("claude", 50, true),
        ("gemini", 2, true),
        ("gemini", 50, true),
    ];
    for (route, n, stream) in refused {
        let r = h
            .post(json!({"model": route, "n": n, "stream": stream, "messages": common::user("hi")}))
            .await;
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        let what = format!("{route} n={n} stream={stream}: {v}");
        assert_eq!(status, 400, "{what}");
        assert_eq!(v["error"]["code"], "invalid_request", "{what}");
        assert_eq!(v["error"]["param"], "n", "{what}");
        assert!(
            v["error"]["message"]
                .as_str()
                .unwrap()
                .contains(&format!("n = {n}")),
            "{what}"
        );
    }
    assert!(model_calls(&h).is_empty(), "nothing was sent");
    let two = json!({
        "candidates": [
            {"content": {"parts": [{"text": "one"}], "role": "model"}, "finishReason": "STOP", "index": 0},
            {"content": {"parts": [{"text": "two"}], "role": "model"}, "finishReason": "STOP", "index": 1}
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4, "totalTokenCount": 7, "trafficType": "ON_DEMAND"},
        "modelVersion": "gemini-2.5-pro"
    });
    h.mock.script(vec![Behavior::status(200, two.to_string())]);
    let r = h
        .post(json!({"model": "gemini", "n": 2, "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    let texts: Vec<&str> = body["choices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["message"]["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(texts, ["one", "two"], "{body}");
    let sent = model_calls(&h).pop().unwrap();
    assert_eq!(
        sent.json.as_ref().unwrap()["generationConfig"]["candidateCount"],
        2
    );
}

/// Fields a client adds to reach another model never change the Vertex
/// URL's model nor reach the body as a model: unknown top-level fields
/// (`modelId`, `publisher`, `extra_body`) are dropped in translation, an
/// Anthropic client's `model` and `anthropic_version` are the gateway's,
/// and `provider_options` cannot name a model or the output cap.
#[tokio::test]
async fn smuggled_fields_never_choose_the_vertex_model() {
    let h = start().await;
    let other = "claude-opus-4-1@20250805";
    let smuggled = json!({"modelId": other, "publisher": "anthropic", "endpoint": other,
                          "extra_body": {"model": other}});
    let gemini_path = "/v1/projects/test-project/locations/us-east5/publishers/google/models/gemini-2.5-pro:generateContent";
    let claude_path = "/v1/projects/test-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict";
    for (route, path) in [("gemini", gemini_path), ("claude", claude_path)] {
        let mut body = json!({"model": route, "max_tokens": 20, "messages": common::user("hi")});
        for (k, v) in smuggled.as_object().unwrap() {
            body[k] = v.clone();
        }
        let r = h.post(body).await;
        assert_eq!(r.status(), 200, "{route}");
        let sent = model_calls(&h).pop().unwrap();
        assert_eq!(sent.path_and_query, path);
        let upstream = sent.json.unwrap();
        for key in ["model", "modelId", "publisher", "endpoint", "extra_body"] {
            assert!(upstream.get(key).is_none(), "{route}: {key} in {upstream}");
        }
    }
    // An Anthropic client's body goes to rawPredict nearly as it came:
    // still not its model, nor its API version.
    let r = h
        .messages(json!({"model": "claude", "max_tokens": 20,
                         "anthropic_version": "vertex-2099-01-01",
                         "messages": [{"role": "user", "content": "hi"}]}))
        .await;
    assert_eq!(r.status(), 200);
    let sent = model_calls(&h).pop().unwrap();
    assert_eq!(sent.path_and_query, claude_path);
    let upstream = sent.json.unwrap();
    assert!(upstream.get("model").is_none(), "{upstream}");
    assert_eq!(upstream["anthropic_version"], "vertex-2023-10-16");
    assert_eq!(upstream["max_tokens"], 20);
    // provider_options may not name the model or lift the cap.
    let before = model_calls(&h).len();
    for (route, options, param) in [
        ("claude", json!({"model": other}), "provider_options.model"),
        (
            "claude",
            json!({"max_tokens": 100000}),
            "provider_options.max_tokens",
        ),
        ("gemini", json!({"model": other}), "provider_options.model"),
        (
            "gemini",
            json!({"generationConfig": {"maxOutputTokens": 100000}}),
            "provider_options.generationConfig",
        ),
    ] {
        let r = h
            .post(
                json!({"model": route, "max_tokens": 20, "messages": common::user("hi"),
                         "provider_options": options}),
            )
            .await;
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (status.as_u16(), v["error"]["param"].as_str()),
            (400, Some(param)),
            "{route}: {v}"
        );
    }
    assert_eq!(model_calls(&h).len(), before, "nothing more was sent");
}
