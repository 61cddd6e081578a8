//! Gemini's tools and images over real HTTP (contract §9), with the mock
//! recording what reached it:
//!
//! - Google Search beside function declarations where the deployment's
//!   `capabilities` say `search_with_tools` (Gemini 3), only the functions
//!   where they do not (Gemini 2.x refuses the pair) — on the Developer API
//!   and on Vertex, from Codex's own recorded request;
//! - an image URL the gateway will not fetch (http, loopback, the metadata
//!   address, a private range) is 400 `invalid_request` naming the image,
//!   from every door, and nothing reaches the upstream nor a fallback;
//!   Bedrock's Converse, which also takes only bytes, follows the same rule;
//!   URLs a provider reads itself, and `data:` URLs, go without a fetch.
//!
//! A fetch that succeeds needs a public host, which tests cannot reach: it
//! is tested against a loopback origin trusted explicitly
//! (`src/upstream/image_fetch/tests.rs`, `src/adapters/images/tests.rs`).

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use switchyard_mock::MockServer;

const CONFIG: &str = r#"
providers:
  gm: { protocol: gemini, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  vertex:
    protocol: vertex
    project: test-project
    location: us-east5
    base_url: "{mock}"
    credentials: { file: "{dir}/sa.json" }
  bedrock: { protocol: bedrock, region: us-east-1, base_url: "{mock}", credentials: { env_prefix: MOCK_AWS } }
  oa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: gm/gemini-3, provider: gm, model: gemini-3-pro-preview, capabilities: [tools, streaming, vision, search_with_tools] }
  - { id: gm/gemini-2.5, provider: gm, model: gemini-2.5-flash, capabilities: [tools, streaming, vision] }
  - { id: vertex/gemini-3, provider: vertex, model: gemini-3-pro-preview, capabilities: [tools, streaming, search_with_tools] }
  - { id: vertex/gemini-2.5, provider: vertex, model: gemini-2.5-pro, capabilities: [tools, streaming, vision] }
  - { id: bedrock/claude, provider: bedrock, model: "anthropic.claude-sonnet-4-5-20250929-v1:0" }
  - { id: oa/gpt, provider: oa, model: gpt-4o-mini }
routes:
  vision: { targets: [gm/gemini-2.5, oa/gpt] }
"#;

const SA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/providers/vertex/oauth/service_account.test.json"
);

const CODEX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/providers/openai-responses/responses_reasoning_codex.request.json"
);

/// The gateway over the mock, with the test service account for Vertex.
async fn start() -> common::Harness {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let mut sa: Value = serde_json::from_str(&std::fs::read_to_string(SA).unwrap()).unwrap();
    sa["token_uri"] = json!(format!("{}/token", mock.base_url()));
    std::fs::write(dir.path().join("sa.json"), sa.to_string()).unwrap();
    common::start_on(mock, CONFIG, "", dir).await
}

/// The model calls the mock received (token requests aside), oldest first.
fn model_calls(h: &common::Harness) -> Vec<switchyard_mock::RecordedRequest> {
    h.mock
        .requests()
        .into_iter()
        .filter(|r| r.path_and_query != "/token")
        .collect()
}

/// The `tools` of the last model call.
fn sent_tools(h: &common::Harness) -> Value {
    let last = model_calls(h).pop().expect("a model call");
    last.json.expect("a JSON body")["tools"].clone()
}

fn declared(tools: &Value) -> Vec<String> {
    tools[0]["functionDeclarations"]
        .as_array()
        .unwrap_or_else(|| panic!("no function declarations first: {tools}"))
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Codex's recorded request (function `shell_command`, custom
/// `apply_patch`, hosted `web_search`) through the Responses door: a
/// deployment that declares `search_with_tools` gets the functions and
/// Google Search, one that does not gets the functions and the search is
/// named as dropped; on Vertex as on the Developer API, streamed or not.
#[tokio::test]
async fn codex_gets_google_search_beside_its_functions_where_the_deployment_says_so() {
    let h = start().await;
    let codex: Value = serde_json::from_str(&std::fs::read_to_string(CODEX).unwrap()).unwrap();
    for (dep, both) in [
        ("gm/gemini-3", true),
        ("gm/gemini-2.5", false),
        ("vertex/gemini-3", true),
        ("vertex/gemini-2.5", false),
    ] {
        for stream in [false, true] {
            let mut body = codex.clone();
            body["model"] = json!(dep);
            body["stream"] = json!(stream);
            let resp = h.responses(body.clone()).await;
            assert_eq!(resp.status(), 200, "{dep} stream={stream}");
            let dropped = resp
                .headers()
                .get("x-switchyard-dropped-tools")
                .map(|v| v.to_str().unwrap().to_owned());
            let _ = resp.bytes().await.unwrap();
            let tools = sent_tools(&h);
            assert_eq!(
                declared(&tools),
                ["shell_command", "apply_patch"],
                "{dep}: {tools}"
            );
            if both {
                assert_eq!(tools.as_array().unwrap().len(), 2, "{dep}: {tools}");
                assert_eq!(tools[1], json!({"googleSearch": {}}), "{dep}");
                assert_eq!(dropped, None, "{dep}: the search ran, nothing dropped");
            } else {
                assert_eq!(tools.as_array().unwrap().len(), 1, "{dep}: {tools}");
                assert_eq!(dropped.as_deref(), Some("web_search"), "{dep}");
            }
        }
    }
    // The decision log names what was dropped, where it was.
    h.decision(7).await;
    for d in h.decisions() {
        let both = d["selected"].as_str().unwrap().ends_with("gemini-3");
        let dropped = d.get("dropped_tools").cloned().unwrap_or_default();
        assert_eq!(dropped.to_string().contains("web_search"), !both, "{d}");
    }
}

/// The capability sends the search only when one was asked for: an OpenAI
/// client's function tools (Chat Completions has no hosted web search)
/// reach a `search_with_tools` deployment as function declarations alone;
/// a Responses search without functions is Google Search alone.
#[tokio::test]
async fn the_capability_adds_no_search_nobody_asked_for() {
    let h = start().await;
    let tool = json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}});
    let resp = h
        .post(
            json!({"model": "gm/gemini-3", "messages": common::user("Weather?"), "tools": [tool]}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("x-switchyard-dropped-tools").is_none());
    let tools = sent_tools(&h);
    assert_eq!(tools.as_array().unwrap().len(), 1, "{tools}");
    assert_eq!(declared(&tools), ["get_weather"]);

    for dep in ["gm/gemini-3", "gm/gemini-2.5"] {
        let body = json!({"model": dep, "input": "News?", "tools": [{"type": "web_search"}]});
        let resp = h.responses(body.clone()).await;
        assert_eq!(resp.status(), 200, "{dep}");
        assert!(resp.headers().get("x-switchyard-dropped-tools").is_none());
        assert_eq!(sent_tools(&h), json!([{"googleSearch": {}}]), "{dep}");
    }
}

/// URLs the gateway will not fetch, each with what the 400 says.
fn refused_urls() -> [(&'static str, &'static str); 5] {
    [
        ("http://images.example.com/cat.png?sig=SECRET", "only https"),
        ("https://127.0.0.1/cat.png?sig=SECRET", "non-public"),
        ("https://localhost:8443/cat.png?sig=SECRET", "non-public"),
        (
            "https://169.254.169.254/latest/meta-data/?sig=SECRET",
            "non-public",
        ),
        ("https://10.1.2.3/cat.png?sig=SECRET", "non-public"),
    ]
}

/// A 400 `invalid_request` naming the image at `param`, without the URL's
/// query (a signed URL's signature).
async fn assert_refused(resp: reqwest::Response, url: &str, why: &str, param: &str) {
    assert_eq!(resp.status(), 400, "{url}");
    let body: Value = resp.json().await.unwrap();
    let e = &body["error"];
    let message = e["message"].as_str().unwrap_or_default();
    let bare = url.split('?').next().unwrap();
    assert!(message.contains(bare), "{url}: {body}");
    assert!(message.contains(why), "{url}: {body}");
    assert!(message.contains(param), "{url}: {body}");
    assert!(!body.to_string().contains("SECRET"), "{url}: {body}");
    if let Some(p) = e.get("param").filter(|p| !p.is_null()) {
        assert_eq!(p, param, "{url}: {body}");
    }
}

/// From the OpenAI door, to a route whose first target is Gemini and
/// whose fallback (OpenAI) could take the URL: the client gets the 400,
/// neither upstream is called, and the decision log says
/// `invalid_request`.
#[tokio::test]
async fn an_image_url_the_gateway_will_not_fetch_is_refused_before_any_upstream_call() {
    let h = start().await;
    for (url, why) in refused_urls() {
        let messages = json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [
                {"type": "text", "text": "What is in this image?"},
                {"type": "image_url", "image_url": {"url": url}}
            ]}
        ]);
        let resp = h
            .post(json!({"model": "vision", "messages": messages}))
            .await;
        assert_eq!(resp.status(), 400, "{url}");
        let text = resp.text().await.unwrap();
        assert!(!text.contains("SECRET"), "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
        assert_eq!(v["error"]["code"], "invalid_request", "{v}");
        assert_eq!(v["error"]["param"], "messages[1].content[1]", "{v}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(url.split('?').next().unwrap()), "{v}");
        assert!(message.contains(why), "{url}: {v}");
        assert!(model_calls(&h).is_empty(), "{url}: no upstream was called");
    }
    let d = h.decision(refused_urls().len() - 1).await;
    assert_eq!(d["error"], "invalid_request", "{d}");
}

/// The Anthropic and Responses doors, Vertex's Gemini and Bedrock's
/// Converse follow the same rule.
#[tokio::test]
async fn every_door_and_every_inline_only_provider_refuses_alike() {
    let h = start().await;
    let (url, why) = refused_urls()[3];
    for dep in ["gm/gemini-2.5", "vertex/gemini-2.5", "bedrock/claude"] {
        let resp = h
            .messages(json!({
                "model": dep,
                "max_tokens": 100,
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image", "source": {"type": "url", "url": url}}
                ]}]
            }))
            .await;
        assert_refused(resp, url, why, "messages[0].content[1]").await;

        let resp = h
            .responses(json!({
                "model": dep,
                "input": [{"role": "user", "content": [
                    {"type": "input_text", "text": "What is this?"},
                    {"type": "input_image", "image_url": url}
                ]}]
            }))
            .await;
        assert_refused(resp, url, why, "messages[0].content[1]").await;
        assert!(model_calls(&h).is_empty(), "{dep}: no upstream was called");
    }
}

/// What a provider reads itself goes as a URL (Gemini's Files API), and a
/// `data:` URL is already inline: neither is fetched, and the request is
/// served.
#[tokio::test]
async fn files_api_uris_and_data_urls_go_without_a_fetch() {
    let h = start().await;
    let files = "https://generativelanguage.googleapis.com/v1beta/files/abc123";
    let data = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";
    let resp = h
        .responses(json!({
            "model": "gm/gemini-2.5",
            "input": [{"role": "user", "content": [
                {"type": "input_text", "text": "What are these?"},
                {"type": "input_image", "image_url": files},
                {"type": "input_image", "image_url": format!("data:image/png;base64,{data}")}
            ]}]
        }))
        .await;
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
    let sent = model_calls(&h).pop().unwrap().json.unwrap();
    let parts = &sent["contents"][0]["parts"];
    assert_eq!(parts[1]["fileData"]["fileUri"], files, "{sent}");
    assert_eq!(
        parts[2],
        json!({"inlineData": {"mimeType": "image/png", "data": data}}),
        "{sent}"
    );
}
