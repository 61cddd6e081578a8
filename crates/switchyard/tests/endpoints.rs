//! The client listener's other endpoints: the model catalogue in both
//! shapes, `HEAD /`, and unknown paths as `unknown_endpoint` in the right
//! envelope (contract §3).

mod common;

use serde_json::Value;

const CATALOGUE: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: oa/gpt, provider: oa, model: gpt-4o-mini, context_window: 128000, max_output_tokens: 16384 }
routes:
  chat: { targets: [oa/gpt] }
"#;

async fn get(h: &common::Harness, path: &str, anthropic: bool) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .get(h.url(path))
        .header("x-request-id", "rid-123");
    if anthropic {
        req = req.header("anthropic-version", "2023-06-01");
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn models_are_listed_and_retrieved_in_the_callers_shape() {
    let h = common::start(CATALOGUE).await;
    let list: Value = get(&h, "/v1/models", false).await.json().await.unwrap();
    assert_eq!(list["object"], "list");
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["chat", "oa/gpt"]);
    let one: Value = get(&h, "/v1/models/oa%2Fgpt", false)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (
            one["id"].as_str(),
            one["object"].as_str(),
            one["owned_by"].as_str()
        ),
        (Some("oa/gpt"), Some("model"), Some("oa"))
    );
    let resp = get(&h, "/v1/models/chat", false).await;
    assert_eq!(resp.headers()["x-request-id"], "rid-123");
    assert_eq!(resp.json::<Value>().await.unwrap()["id"], "chat");
    // Anthropic's shape for Anthropic clients.
    let list: Value = get(&h, "/v1/models", true).await.json().await.unwrap();
    assert_eq!(list["has_more"], false);
    assert_eq!(list["first_id"], "chat");
    assert_eq!(list["last_id"], "oa/gpt");
    let dep = &list["data"][1];
    assert_eq!(dep["type"], "model");
    assert_eq!(dep["display_name"], "oa/gpt");
    assert_eq!(dep["max_input_tokens"], 128000);
    assert!(dep["created_at"].as_str().unwrap().ends_with('Z'));
    let one: Value = get(&h, "/v1/models/oa%2Fgpt", true)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        (one["type"].as_str(), one["max_tokens"].as_u64()),
        (Some("model"), Some(16384))
    );
    // Unknown ids: model_not_found in the caller's envelope.
    let resp = get(&h, "/v1/models/nope", false).await;
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    let body: Value = get(&h, "/v1/models/nope", true).await.json().await.unwrap();
    assert_eq!(
        (body["type"].as_str(), body["error"]["type"].as_str()),
        (Some("error"), Some("not_found_error"))
    );
}

#[tokio::test]
async fn unknown_paths_are_unknown_endpoint_in_the_doors_envelope_and_logged() {
    let h = common::start(CATALOGUE).await;
    let resp = reqwest::Client::new()
        .post(h.url("/v1/nope"))
        .header("x-request-id", "rid-1")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert_eq!(resp.headers()["x-request-id"], "rid-1");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_endpoint");
    assert_eq!(body["error"]["type"], "not_found_error");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v1/nope"));
    // Under /v1/messages: Anthropic's envelope, a generated request id.
    let resp = reqwest::Client::new()
        .post(h.url("/v1/messages/batches"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    assert!(resp.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .starts_with("req_"));
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "not_found_error");
    assert_eq!(body["error"]["code"], "unknown_endpoint");
    // Each left a decision-log line.
    let d = h.decision(0).await;
    assert_eq!(
        (d["request_id"].as_str(), d["status"].as_u64()),
        (Some("rid-1"), Some(404))
    );
    assert_eq!(d["error"], "unknown_endpoint");
    assert_eq!(h.decision(1).await["error"], "unknown_endpoint");
    assert_eq!(h.mock.request_count(), 0);
}

#[tokio::test]
async fn head_root_answers() {
    let h = common::start(CATALOGUE).await;
    let resp = reqwest::Client::new()
        .head(h.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}
