//! `POST /v1/messages/count_tokens` over real HTTP: forwarded to Anthropic,
//! `:countTokens` on Gemini with the whole generateContentRequest, counted
//! locally with tiktoken for OpenAI; fallback, timeouts and the Anthropic
//! error envelope.

mod common;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

const CONFIG: &str = r#"
providers:
  an:
    protocol: anthropic
    base_url: "{mock}"
    keys: [{ env: TEST_KEY }]
    timeouts: { first_byte: 300ms, total: 2s }
  gm: { protocol: gemini, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  oa: { protocol: openai, base_url: "{mock}/v1", keys: [{ env: TEST_KEY }] }
models:
  - { id: an/claude, provider: an, model: claude-sonnet-4-5 }
  - { id: gm/flash, provider: gm, model: gemini-2.5-flash }
  - { id: oa/4o, provider: oa, model: gpt-4o }
  - { id: oa/4, provider: oa, model: gpt-4 }
routes:
  claude: { targets: [an/claude], retry: { attempts: 1 } }
  gem: { targets: [gm/flash] }
  gpt: { targets: [oa/4o] }
  fb: { targets: [an/claude], fallbacks: [oa/4o], retry: { attempts: 1 } }
"#;

async fn count(h: &common::Harness, body: &Value, beta: Option<&str>) -> reqwest::Response {
    let mut r = reqwest::Client::new()
        .post(h.url("/v1/messages/count_tokens"))
        .header("anthropic-version", "2023-06-01")
        .json(body);
    if let Some(b) = beta {
        r = r.header("anthropic-beta", b);
    }
    r.send().await.unwrap()
}

fn header<'r>(r: &'r reqwest::Response, name: &str) -> &'r str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

fn fixture_request() -> Value {
    serde_json::from_str(include_str!(
        "../../../fixtures/providers/anthropic/count_tokens.request.json"
    ))
    .unwrap()
}

fn weather_tool() -> Value {
    json!({
        "name": "get_weather",
        "description": "Get the weather for a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}}, "required": ["city"]}
    })
}

#[tokio::test]
async fn anthropic_forwards_the_body_with_model_replaced() {
    let h = common::start(CONFIG).await;
    let mut body = fixture_request();
    body["model"] = json!("claude");
    let r = count(&h, &body, Some("token-counting-2024-11-01")).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "an/claude");
    assert_eq!(header(&r, "x-switchyard-attempts"), "1");
    assert!(r.headers().contains_key("x-request-id"));
    let v: Value = r.json().await.unwrap();
    // The mock counts "What is the capital of France?" (30 chars) / 4.
    assert_eq!(v, json!({"input_tokens": 7}));

    let sent = &h.mock.requests()[0];
    assert_eq!(sent.path_and_query, "/v1/messages/count_tokens");
    assert_eq!(
        sent.header("anthropic-beta"),
        Some("token-counting-2024-11-01")
    );
    assert_eq!(sent.header("x-api-key"), Some("sk-test-secret-value-1234"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    let mut expected = fixture_request();
    expected["model"] = json!("claude-sonnet-4-5");
    assert_eq!(
        sent.json.as_ref().unwrap(),
        &expected,
        "forwarded as it came"
    );

    let d = h.decision(0).await;
    assert_eq!(d["selected"], "an/claude");
    assert_eq!(d["status"], 200);
}

#[tokio::test]
async fn gemini_counts_the_whole_generate_content_request() {
    let h = common::start(CONFIG).await;
    let body = json!({
        "model": "gem",
        "system": "You are terse.",
        "tools": [weather_tool()],
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}]
    });
    let r = count(&h, &body, None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "gm/flash");
    let v: Value = r.json().await.unwrap();
    // The mock counts system + message text: (14 + 29) / 4.
    assert_eq!(v, json!({"input_tokens": 10}));

    let sent = &h.mock.requests()[0];
    assert_eq!(
        sent.path_and_query,
        "/v1beta/models/gemini-2.5-flash:countTokens"
    );
    let g = &sent.json.as_ref().unwrap()["generateContentRequest"];
    assert_eq!(g["model"], "models/gemini-2.5-flash");
    assert_eq!(g["systemInstruction"]["parts"][0]["text"], "You are terse.");
    assert_eq!(
        g["tools"][0]["functionDeclarations"][0]["name"],
        "get_weather"
    );
    assert_eq!(g["contents"][0]["role"], "user");
    assert_eq!(
        g["contents"][0]["parts"][0]["text"],
        "What is the weather in Paris?"
    );
}

#[tokio::test]
async fn openai_is_counted_locally_with_tiktoken() {
    let h = common::start(CONFIG).await;
    let msg = |model: &str, text: &str| json!({"model": model, "messages": [{"role": "user", "content": text}]});
    let n = |v: Value| v["input_tokens"].as_u64().unwrap();
    // "hello world" is 2 tokens in o200k_base ([24912, 2375]); the message
    // adds 3 + 1 ("user") and the reply priming 3.
    let r = count(&h, &msg("gpt", "hello world"), None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "oa/4o");
    assert_eq!(n(r.json().await.unwrap()), 9);

    // The vocabulary follows the model: o200k for gpt-4o, cl100k for gpt-4.
    let text = "Καλημέρα κόσμε — 这是一个测试 — supercalifragilisticexpialidocious";
    let o200k = tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len() as u64;
    let cl100k = tiktoken_rs::cl100k_base_singleton()
        .encode_ordinary(text)
        .len() as u64;
    assert_ne!(o200k, cl100k, "the sample must tell the vocabularies apart");
    let r = count(&h, &msg("oa/4o", text), None).await;
    assert_eq!(n(r.json().await.unwrap()), 7 + o200k);
    let r = count(&h, &msg("oa/4", text), None).await;
    assert_eq!(n(r.json().await.unwrap()), 7 + cl100k);

    // A system prompt and a tool definition count.
    let mut with_system = msg("gpt", "hello world");
    with_system["system"] = json!("You are terse.");
    let r = count(&h, &with_system, None).await;
    let sys = n(r.json().await.unwrap());
    assert!(sys > 9 + 4, "{sys}");
    let mut with_tool = with_system.clone();
    with_tool["tools"] = json!([weather_tool()]);
    let r = count(&h, &with_tool, None).await;
    let tool = n(r.json().await.unwrap());
    // At least the per-function start (7) and end (12) overheads.
    assert!(tool >= sys + 19, "{tool} vs {sys}");

    assert_eq!(h.mock.request_count(), 0, "nothing went upstream");
}

#[tokio::test]
async fn an_upstream_5xx_or_silence_falls_back_a_4xx_is_the_clients() {
    let h = common::start(CONFIG).await;
    let body = json!({"model": "fb", "messages": [{"role": "user", "content": "hello world"}]});

    h.mock
        .script(vec![Behavior::fixture("anthropic/error_500_api_error")]);
    let r = count(&h, &body, None).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "oa/4o");
    assert_eq!(header(&r, "x-switchyard-fallback-reason"), "upstream_error");
    assert_eq!(header(&r, "x-switchyard-attempts"), "2");
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"input_tokens": 9}));

    // A silent upstream: first_byte (300ms) applies, then the fallback.
    h.mock.script(vec![Behavior::fault(Fault::Hang)]);
    let started = std::time::Instant::now();
    let r = count(&h, &body, None).await;
    assert_eq!(r.status(), 200);
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert_eq!(header(&r, "x-switchyard-fallback-reason"), "timeout");

    // Silence with nothing to fall back to: 504 `timeout`, Anthropic envelope.
    h.mock.script(vec![Behavior::fault(Fault::Hang)]);
    let mut only = body.clone();
    only["model"] = json!("claude");
    let r = count(&h, &only, None).await;
    assert_eq!(r.status(), 504);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["type"], "error");
    assert_eq!(e["error"]["type"], "api_error");
    assert_eq!(e["error"]["code"], "timeout");

    // The upstream's 400 is the client's answer: no fallback.
    h.mock.clear_requests();
    h.mock.script(vec![Behavior::fixture(
        "anthropic/error_400_invalid_request",
    )]);
    let r = count(&h, &body, None).await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["type"], "error");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert_eq!(e["error"]["code"], "invalid_request");
    assert_eq!(h.mock.request_count(), 1);
}

#[tokio::test]
async fn errors_use_the_anthropic_envelope() {
    let h = common::start(CONFIG).await;
    let cases = [
        (json!({"model": "gpt"}), 400, "invalid_request_error"),
        (json!({"messages": []}), 400, "invalid_request_error"),
        (
            json!({"model": "nope", "messages": [{"role": "user", "content": "x"}]}),
            404,
            "not_found_error",
        ),
    ];
    for (body, status, kind) in cases {
        let r = count(&h, &body, None).await;
        assert_eq!(r.status(), status, "{body}");
        assert!(r.headers().contains_key("x-request-id"));
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["type"], "error", "{e}");
        assert_eq!(e["error"]["type"], kind, "{e}");
        assert!(e["error"]["message"].is_string());
    }
    // Not JSON at all.
    let r = reqwest::Client::new()
        .post(h.url("/v1/messages/count_tokens"))
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["type"],
        "invalid_request_error"
    );
}
