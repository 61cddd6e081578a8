//! Azure OpenAI: deployment in the URL, `api-key` header, api-version query.

mod common;

use serde_json::json;

const AZURE: &str = r#"
providers:
  azure:
    protocol: azure
    base_url: "{mock}"
    api_version: 2024-10-21
    keys: [{ env: TEST_KEY }]
models:
  - { id: azure/gpt-4o, provider: azure, model: my-gpt4o-deployment }
routes:
  chat: { targets: [azure/gpt-4o] }
"#;

#[tokio::test]
async fn azure_requests_use_the_deployment_url_and_api_key_header() {
    let h = common::start(AZURE).await;
    let resp = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(resp.status(), 200);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello from the mock openai provider."
    );
    let sent = &h.mock.requests()[0];
    assert_eq!(
        sent.path_and_query,
        "/openai/deployments/my-gpt4o-deployment/chat/completions?api-version=2024-10-21"
    );
    assert_eq!(sent.header("api-key"), Some("sk-test-secret-value-1234"));
    assert_eq!(sent.header("authorization"), None);
    assert!(
        sent.json.as_ref().unwrap().get("model").is_none(),
        "Azure takes the deployment from the URL"
    );

    let resp = h
        .post(json!({"model": "chat", "messages": common::user("hi"), "stream": true}))
        .await;
    let text = resp.text().await.unwrap();
    assert_eq!(
        common::sse_text(&text),
        "Hello from the mock openai provider."
    );
    assert!(text.ends_with("data: [DONE]\n\n"));
}

#[tokio::test]
async fn azure_content_filter_error_is_content_filtered() {
    let h = common::start(AZURE).await;
    h.mock.set_default(switchyard_mock::Behavior::fixture(
        "azure/error_400_content_filter",
    ));
    let resp = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "content_filtered");
}
