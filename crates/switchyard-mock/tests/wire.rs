//! Wire format of each protocol compared with the recorded fixtures.

mod common;

use common::*;
use serde_json::json;
use switchyard_mock::MockServer;

#[tokio::test]
async fn openai_non_stream_matches_fixture() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call(m.addr(), "/v1/chat/completions", &[], &openai_req(false)).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert_eq!(
        key_paths(&v),
        key_paths(&fixture_json("openai/chat_text_gpt41.response.json"))
    );
    // 2-space pretty + trailing newline
    assert_eq!(
        r.text(),
        format!("{}\n", serde_json::to_string_pretty(&v).unwrap())
    );
    assert!(r.text().starts_with("{\n  \"id\": \"chatcmpl-"));
    assert_eq!(v["model"], "gpt-4o");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Hello from the mock openai provider."
    );
    // (28 + 5) chars / 4 = 8 prompt tokens; 6 word pieces
    assert_eq!(v["usage"]["prompt_tokens"], 8);
    assert_eq!(v["usage"]["completion_tokens"], 6);
    assert_eq!(v["usage"]["total_tokens"], 14);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

#[tokio::test]
async fn openai_stream_matches_fixture() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call(m.addr(), "/v1/chat/completions", &[], &openai_req(true)).await;
    assert_eq!(
        r.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let body = r.text();
    assert!(body.ends_with("}\n\ndata: [DONE]\n\n"));
    assert!(body.starts_with("data: {\"id\":\"chatcmpl-"));
    let ours = sse_json(&body);
    let fix = sse_json(&fixture("openai/stream_text_usage.sse"));
    assert_eq!(shapes(&ours), shapes(&fix));
    let text: String = ours
        .iter()
        .filter_map(|e| e.pointer("/choices/0/delta/content")?.as_str())
        .collect();
    assert_eq!(text, "Hello from the mock openai provider.");
    // role chunk + 6 pieces + finish + usage
    assert_eq!(ours.len(), 9);
    assert_eq!(ours[1]["choices"][0]["delta"]["content"], "Hello");
    assert_eq!(ours[2]["choices"][0]["delta"]["content"], " from");
    assert_eq!(ours[7]["choices"][0]["finish_reason"], "stop");
    assert_eq!(ours[8]["choices"], json!([]));
    assert_eq!(ours[8]["usage"]["completion_tokens"], 6);
    assert_eq!(ours[8]["usage"]["prompt_tokens"], 8);
    // one chunk per event: flushed event by event
    assert_eq!(r.chunks.len(), 10);

    // without include_usage: no usage key, no usage chunk
    let mut req = openai_req(true);
    req.as_object_mut().unwrap().remove("stream_options");
    let r = call(m.addr(), "/chat/completions", &[], &req).await;
    let ours = sse_json(&r.text());
    assert_eq!(ours.len(), 8);
    assert!(ours.iter().all(|e| e.get("usage").is_none()));
}

#[tokio::test]
async fn azure_and_models_and_404() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call(
        m.addr(),
        "/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21",
        &[],
        &openai_req(false),
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["model"], "my-gpt4o");
    let r = Conn::send(m.addr(), "GET", "/v1/models", &[], "")
        .await
        .unwrap()
        .read_all()
        .await
        .unwrap();
    assert_eq!(r.json()["object"], "list");
    assert!(r.json()["data"].as_array().unwrap().len() > 1);
    let r = call(m.addr(), "/v2/nothing", &[], &json!({})).await;
    assert_eq!(r.status, 404);
    assert!(r.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v2/nothing"));
}

/// Every protocol's model list (what a gateway checks a key with) answers a
/// good key and refuses a bad one as the provider does, byte for byte; it
/// never takes the next scripted behavior.
#[tokio::test]
async fn model_lists_check_the_key_like_the_provider() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.set_valid_keys(vec!["good".into()]);
    m.script(vec![switchyard_mock::Behavior::fixture(
        "openai/error_503_overloaded",
    )]);
    let get = |path: &'static str, headers: Vec<(&'static str, &'static str)>| {
        let addr = m.addr();
        async move {
            let c = Conn::send(addr, "GET", path, &headers, "").await.unwrap();
            c.read_all().await.unwrap()
        }
    };
    type Headers = fn(&'static str) -> Vec<(&'static str, &'static str)>;
    let cases: [(&str, Headers, &str); 4] = [
        (
            "/v1/models",
            |k| {
                vec![(
                    "authorization",
                    if k == "good" {
                        "Bearer good"
                    } else {
                        "Bearer bad"
                    },
                )]
            },
            "openai/error_401_invalid_api_key",
        ),
        (
            "/v1/models?limit=1",
            |k| vec![("x-api-key", k), ("anthropic-version", "2023-06-01")],
            "anthropic/error_401_authentication",
        ),
        (
            "/v1beta/models?pageSize=1",
            |k| vec![("x-goog-api-key", k)],
            "gemini/error_400_api_key_invalid",
        ),
        (
            "/openai/models?api-version=2024-10-21",
            |k| vec![("api-key", k)],
            "azure/error_401_access_denied",
        ),
    ];
    for (path, headers, refusal) in cases {
        let bad = get(path, headers("bad")).await;
        let env = fixture_json(&format!("{refusal}.http.json"));
        assert_eq!(
            u64::from(bad.status),
            env["status"].as_u64().unwrap(),
            "{path}"
        );
        assert_eq!(bad.json(), env["body"], "{path}");
        let ok = get(path, headers("good")).await;
        assert_eq!(ok.status, 200, "{path}: {}", ok.text());
    }
    let v = get(
        "/v1/models",
        vec![("x-api-key", "good"), ("anthropic-version", "2023-06-01")],
    )
    .await;
    assert_eq!(
        v.text(),
        fixture("anthropic/models_list.response.json").trim_end(),
        "Anthropic's list, as recorded"
    );
    let v = get("/v1beta/models", vec![("x-goog-api-key", "good")]).await;
    assert_eq!(
        v.header("content-type"),
        Some("application/json; charset=UTF-8")
    );
    assert_eq!(v.json()["models"][0]["name"], "models/gemini-2.5-flash");
    assert_eq!(
        v.text(),
        format!("{}\n", serde_json::to_string_pretty(&v.json()).unwrap())
    );
    let v = get(
        "/openai/models?api-version=2024-10-21",
        vec![("api-key", "good")],
    )
    .await;
    assert_eq!(v.json()["object"], "list");
    assert_eq!(v.text(), v.json().to_string(), "compact");
    // The script is still there for the next API call.
    let r = call(
        m.addr(),
        "/v1/chat/completions",
        &[("authorization", "Bearer good")],
        &openai_req(false),
    )
    .await;
    assert_eq!(r.status, 503);
}

#[tokio::test]
async fn anthropic_matches_fixtures() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call(m.addr(), "/v1/messages", &[], &anthropic_req(false)).await;
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert_eq!(r.text(), v.to_string(), "compact JSON");
    assert_eq!(
        key_paths(&v),
        key_paths(&fixture_json(
            "anthropic/messages_tool_result.response.json"
        ))
    );
    assert_eq!(v["model"], "claude-haiku-4-5");
    assert_eq!(
        v["content"][0]["text"],
        "Hello from the mock anthropic provider."
    );
    assert_eq!(v["usage"]["input_tokens"], 8);
    assert_eq!(v["usage"]["output_tokens"], 6);

    let r = call(m.addr(), "/v1/messages", &[], &anthropic_req(true)).await;
    assert_eq!(
        r.header("content-type"),
        Some("text/event-stream; charset=utf-8")
    );
    let body = r.text();
    let ours = sse_json(&body);
    assert_eq!(
        shapes(&ours),
        shapes(&sse_json(&fixture("anthropic/stream_text.sse")))
    );
    let types: Vec<&str> = ours.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(
        types[types.len() - 3..],
        ["content_block_stop", "message_delta", "message_stop"]
    );
    assert!(body.contains("event: ping\ndata: {\"type\": \"ping\"}\n\n"));
    assert!(body.starts_with("event: message_start\ndata: {\"type\":\"message_start\""));
    assert!(body.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
    let delta = ours.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert_eq!(delta["usage"]["output_tokens"], 6);
    let text: String = ours
        .iter()
        .filter_map(|e| e.pointer("/delta/text")?.as_str())
        .collect();
    assert_eq!(text, "Hello from the mock anthropic provider.");
}

#[tokio::test]
async fn gemini_matches_fixtures() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let r = call(m.addr(), GEM, &[], &gemini_req()).await;
    assert_eq!(
        r.header("content-type"),
        Some("application/json; charset=UTF-8")
    );
    let v = r.json();
    assert_eq!(
        r.text(),
        format!("{}\n", serde_json::to_string_pretty(&v).unwrap())
    );
    assert_eq!(
        key_paths(&v),
        key_paths(&fixture_json("gemini/generate_text.response.json"))
    );
    assert_eq!(v["modelVersion"], "gemini-2.0-flash");
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"],
        "Hello from the mock gemini provider."
    );
    assert_eq!(v["usageMetadata"]["promptTokenCount"], 8);
    assert_eq!(v["usageMetadata"]["candidatesTokenCount"], 6);
    assert_eq!(v["usageMetadata"]["totalTokenCount"], 14);

    let r = call(m.addr(), GEM_STREAM, &[], &gemini_req()).await;
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    let body = r.text();
    assert!(body.starts_with("data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hello\"}],\"role\": \"model\"}}],\"usageMetadata\": {"));
    assert!(body.ends_with("}\r\n\r\n"));
    assert_eq!(body.matches("\r\n\r\n").count(), 6);
    let ours = sse_json(&body);
    assert_eq!(
        shapes(&ours),
        shapes(&sse_json(&fixture("gemini/stream_text.sse")))
    );
    assert_eq!(ours[5]["candidates"][0]["finishReason"], "STOP");
    assert_eq!(ours[5]["usageMetadata"]["candidatesTokenCount"], 6);
}
