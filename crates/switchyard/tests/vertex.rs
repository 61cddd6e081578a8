//! Google Vertex AI over real HTTP (contract §9): Gemini (publisher
//! `google`) and Claude (publisher `anthropic`, `rawPredict`) from every
//! door, streamed and not, with an access token minted from a service
//! account at the mock's token endpoint — once per lifetime, never on the
//! request path — and Vertex's error bodies.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockServer};

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
        ("gemini", 429, "rate_limited"),
        ("claude", 429, "rate_limited"),
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
}
