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

/// A deployment id has a `/`: clients send it raw as well as `%2F`.
#[tokio::test]
async fn a_deployment_id_is_found_with_a_raw_slash() {
    let h = common::start(CATALOGUE).await;
    for (path, anthropic) in [
        ("/v1/models/oa/gpt", false),
        ("/v1/models/oa/gpt", true),
        ("/v1/models/oa%2Fgpt", false),
    ] {
        let resp = get(&h, path, anthropic).await;
        assert_eq!(resp.status(), 200, "{path}");
        let one: Value = resp.json().await.unwrap();
        assert_eq!(one["id"], "oa/gpt", "{path}");
    }
    // A longer path is not that deployment.
    let resp = get(&h, "/v1/models/oa/gpt/x", false).await;
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
}

/// Twelve routes and three deployments (fifteen models, in that order).
const MANY: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: oa/a, provider: oa, model: a }
  - { id: oa/b, provider: oa, model: b }
  - { id: oa/c, provider: oa, model: c }
routes:
  r01: { targets: [oa/a] }
  r02: { targets: [oa/a] }
  r03: { targets: [oa/a] }
  r04: { targets: [oa/a] }
  r05: { targets: [oa/a] }
  r06: { targets: [oa/a] }
  r07: { targets: [oa/a] }
  r08: { targets: [oa/a] }
  r09: { targets: [oa/a] }
  r10: { targets: [oa/a] }
  r11: { targets: [oa/a] }
  r12: { targets: [oa/a] }
"#;

/// One Anthropic page: (ids, has_more, first_id, last_id).
async fn page(h: &common::Harness, query: &str) -> (Vec<String>, bool, Value, Value) {
    let resp = get(h, &format!("/v1/models{query}"), true).await;
    assert_eq!(resp.status(), 200, "{query}");
    let v: Value = resp.json().await.unwrap();
    let ids = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    (
        ids,
        v["has_more"].as_bool().unwrap(),
        v["first_id"].clone(),
        v["last_id"].clone(),
    )
}

/// The Anthropic list pages as Anthropic's does: `limit`, then `after_id`
/// (the next page) or `before_id` (the previous one), `has_more` saying
/// whether there is more in that direction.
#[tokio::test]
async fn the_anthropic_list_pages_with_limit_after_id_and_before_id() {
    let h = common::start(MANY).await;
    let all: Vec<String> = (1..=12)
        .map(|i| format!("r{i:02}"))
        .chain(["oa/a", "oa/b", "oa/c"].map(String::from))
        .collect();
    let (ids, more, first, last) = page(&h, "").await;
    assert_eq!((ids, more), (all.clone(), false), "default limit 20");
    assert_eq!((first, last), ("r01".into(), "oa/c".into()));

    // Forward, five at a time, as an SDK's auto-paging does.
    let (mut seen, mut after) = (Vec::new(), String::new());
    loop {
        let q = if after.is_empty() {
            "?limit=5".to_owned()
        } else {
            format!("?limit=5&after_id={after}")
        };
        let (ids, more, first, last) = page(&h, &q).await;
        assert_eq!(ids.len(), 5, "{q}");
        assert_eq!(
            (first, last.clone()),
            (ids[0].clone().into(), ids[4].clone().into())
        );
        seen.extend(ids);
        if !more {
            break;
        }
        after = last.as_str().unwrap().to_owned();
    }
    assert_eq!(seen, all);

    // Backward from a deployment id (with its `/`, encoded or not).
    let (ids, more, _, _) = page(&h, "?limit=4&before_id=oa%2Fb").await;
    assert_eq!((ids, more), (all[9..13].to_vec(), true));
    let (ids, more, _, _) = page(&h, "?limit=4&before_id=r03").await;
    assert_eq!(
        (ids, more),
        (vec!["r01".to_owned(), "r02".to_owned()], false)
    );
    let (ids, more, first, last) = page(&h, "?after_id=oa/c").await;
    assert_eq!((ids.len(), more), (0, false));
    assert_eq!((first, last), (Value::Null, Value::Null));

    // Bad parameters: 400 in Anthropic's envelope.
    for (q, param) in [
        ("?limit=0", "limit"),
        ("?limit=1001", "limit"),
        ("?limit=ten", "limit"),
        ("?after_id=nope", "after_id"),
        ("?after_id=r01&before_id=r05", "before_id"),
    ] {
        let resp = get(&h, &format!("/v1/models{q}"), true).await;
        assert_eq!(resp.status(), 400, "{q}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(
            body["error"]["type"], "invalid_request_error",
            "{q}: {body}"
        );
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with(param),
            "{q}: {body}"
        );
    }
    // The OpenAI list is not paged: everything, whatever the query.
    let list: Value = get(&h, "/v1/models?limit=2", false)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["data"].as_array().unwrap().len(), 15);
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
