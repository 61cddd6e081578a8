//! Every error code the request path can produce, over raw HTTP, in the
//! OpenAI envelope; and each kind of bad input.

mod common;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

async fn error_of(resp: reqwest::Response) -> (u16, reqwest::header::HeaderMap, Value) {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body: Value = resp.json().await.unwrap();
    (status, headers, body)
}

fn chat(extra: Value) -> Value {
    let mut body = json!({"model": "chat", "messages": common::user("hi")});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    body
}

async fn upstream_fixture(fixture: &str) -> (u16, reqwest::header::HeaderMap, Value) {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock.set_default(Behavior::fixture(fixture));
    error_of(h.post(chat(json!({}))).await).await
}

#[tokio::test]
async fn upstream_rate_limit_is_429_with_retry_after_and_the_upstream_message() {
    let (status, headers, body) = upstream_fixture("openai/error_429_rate_limit_tokens").await;
    assert_eq!(status, 429);
    assert_eq!(body["error"]["code"], "rate_limited");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Rate limit reached for gpt-4.1"));
    assert_eq!(headers["retry-after"], "1");
    assert!(headers.contains_key("x-request-id"));
}

#[tokio::test]
async fn upstream_error_classes_map_to_contract_codes() {
    for (fixture, status, code) in [
        ("openai/error_400_context_length", 400, "context_too_long"),
        ("openai/error_400_invalid_request", 400, "invalid_request"),
        ("openai/error_404_model_not_found", 404, "model_not_found"),
        ("openai/error_500_server_error", 502, "upstream_error"),
        ("openai/error_503_overloaded", 503, "overloaded"),
        ("azure/error_400_content_filter", 400, "content_filtered"),
        (
            "deepseek/error_402_insufficient_balance",
            429,
            "rate_limited",
        ),
    ] {
        let (s, _, body) = upstream_fixture(fixture).await;
        assert_eq!(
            (s, body["error"]["code"].as_str().unwrap()),
            (status, code),
            "{fixture}"
        );
    }
}

#[tokio::test]
async fn upstream_auth_failure_is_401_and_never_leaks_a_key() {
    let (status, _, body) = upstream_fixture("openai/error_401_invalid_api_key").await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "auth_failed");
    let text = body.to_string();
    assert!(!text.contains("sk-"), "key-shaped text leaked: {text}");
}

#[tokio::test]
async fn our_own_key_is_redacted_if_an_upstream_echoes_it() {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock.set_default(Behavior::status(400, r#"{"error":{"message":"bad key sk-test-secret-value-1234 given","type":"invalid_request_error"}}"#));
    let (_, _, body) = error_of(h.post(chat(json!({}))).await).await;
    assert!(!body.to_string().contains("secret-value"), "{body}");
}

#[tokio::test]
async fn refused_connection_is_connection_error() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let yaml = common::ONE_OPENAI.replace("{mock}", &format!("http://127.0.0.1:{port}"));
    let h = common::start(&yaml).await;
    let (status, _, body) = error_of(h.post(chat(json!({}))).await).await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (502, "connection_error")
    );
}

#[tokio::test]
async fn dropped_connection_is_connection_error() {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock.set_default(Behavior::fault(Fault::Drop));
    let (status, _, body) = error_of(h.post(chat(json!({}))).await).await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (502, "connection_error")
    );
}

#[tokio::test]
async fn silent_upstream_is_timeout_within_first_byte() {
    let yaml = common::ONE_OPENAI.replace(
        "keys: [{ env: TEST_KEY }]",
        "keys: [{ env: TEST_KEY }]\n    timeouts: { first_byte: 300ms, total: 5s }",
    );
    let h = common::start(&yaml).await;
    h.mock.set_default(Behavior::fault(Fault::Hang));
    let started = std::time::Instant::now();
    let (status, _, body) = error_of(h.post(chat(json!({}))).await).await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (504, "timeout")
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
}

/// `first_byte` bounds a whole answer's body too, not just its headers: an
/// upstream that sends its headers at once and its body seconds later is a
/// silent one, and the next target answers (contract §2 `first_byte`).
#[tokio::test]
async fn headers_without_a_body_time_out_at_first_byte_and_fall_back() {
    let yaml = r#"
providers:
  slow:
    protocol: openai
    base_url: "{mock}/v1"
    timeouts: { first_byte: 300ms, total: 30s }
    options: { mock: { fault: first_event_delay, first_event_delay_ms: 6000 } }
  good: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: slow/m, provider: slow, model: m }
  - { id: good/m, provider: good, model: m }
routes:
  chat: { targets: [slow/m, good/m] }
"#;
    let h = common::start(yaml).await;
    let resp = h.post(chat(json!({}))).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-switchyard-deployment"], "good/m");
    assert_eq!(resp.headers()["x-switchyard-fallback-reason"], "timeout");
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][0]["outcome"], "timeout", "{d}");
    // Bounded by first_byte (300 ms), not by the 6 s body delay.
    assert!(
        d["attempts"][0]["latency_ms"].as_f64().unwrap() < 3000.0,
        "{d}"
    );
}

#[tokio::test]
async fn malformed_upstream_json_is_upstream_error() {
    let h = common::start(common::ONE_OPENAI).await;
    h.mock.set_default(Behavior::fault(Fault::MalformedJson));
    let (status, _, body) = error_of(h.post(chat(json!({}))).await).await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (502, "upstream_error")
    );
}

#[tokio::test]
async fn fallback_serves_from_the_next_target_and_says_why() {
    let yaml = r#"
providers:
  bad:
    protocol: openai
    base_url: "http://127.0.0.1:1/v1"
    timeouts: { connect: 200ms }
  mock:
    protocol: openai
    base_url: "{mock}/v1"
models:
  - { id: bad/m, provider: bad, model: m }
  - { id: mock/m, provider: mock, model: m }
routes:
  chat: { targets: [bad/m, mock/m], retry: { attempts: 1 } }
"#;
    let h = common::start(yaml).await;
    let resp = h.post(chat(json!({}))).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-switchyard-deployment"], "mock/m");
    assert_eq!(resp.headers()["x-switchyard-attempts"], "2");
    assert_eq!(
        resp.headers()["x-switchyard-fallback-reason"],
        "connection_error"
    );
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][0]["outcome"], "connection_error");
    assert_eq!(d["attempts"][1]["outcome"], "ok");
    assert_eq!(d["selected"], "mock/m");
}

#[tokio::test]
async fn a_client_error_from_upstream_is_not_retried_elsewhere() {
    let h = common::start(common::TWO_TARGETS).await;
    h.mock
        .set_default(Behavior::fixture("openai/error_400_invalid_request"));
    let (status, _, _) = error_of(h.post(chat(json!({}))).await).await;
    assert_eq!(status, 400);
    assert_eq!(h.mock.request_count(), 1);
}

#[tokio::test]
async fn every_candidate_failing_differently_is_no_healthy_deployment() {
    let yaml = r#"
providers:
  mock:
    protocol: openai
    base_url: "{mock}/v1"
models:
  - { id: mock/a, provider: mock, model: a }
  - { id: mock/b, provider: mock, model: b }
routes:
  chat: { targets: [mock/a, mock/b], retry: { attempts: 1 } }
"#;
    let h = common::start(yaml).await;
    h.mock.script(vec![
        Behavior::fixture("openai/error_503_overloaded"),
        Behavior::fixture("openai/error_500_server_error"),
    ]);
    let (status, _, body) = error_of(h.post(chat(json!({}))).await).await;
    assert_eq!(
        (status, body["error"]["code"].as_str().unwrap()),
        (503, "no_healthy_deployment")
    );
}

// === bad input ===

#[tokio::test]
async fn bad_input_gets_precise_4xx() {
    let h = common::start_with(common::ONE_OPENAI, "  max_body: 2KiB").await;
    let cases: Vec<(reqwest::Response, u16, &str, Option<&str>)> = vec![
        (
            h.post_raw("{\"model\": \"chat\", ", "application/json")
                .await,
            400,
            "invalid_request",
            None,
        ),
        (
            h.post_raw("[1,2]", "application/json").await,
            400,
            "invalid_request",
            None,
        ),
        (
            h.post(json!({"model": "chat"})).await,
            400,
            "invalid_request",
            Some("messages"),
        ),
        (
            h.post(json!({"messages": common::user("x")})).await,
            400,
            "invalid_request",
            Some("model"),
        ),
        (
            h.post(json!({"model": 5, "messages": common::user("x")}))
                .await,
            400,
            "invalid_request",
            Some("model"),
        ),
        (
            h.post(chat(json!({"temperature": "warm"}))).await,
            400,
            "invalid_request",
            Some("temperature"),
        ),
        (
            h.post(json!({"model": "chat", "messages": [{"role": "user"}]}))
                .await,
            400,
            "invalid_request",
            Some("messages[0]"),
        ),
        (
            h.post(json!({"model": "nope", "messages": common::user("x")}))
                .await,
            404,
            "model_not_found",
            None,
        ),
        (
            h.post_raw(vec![b'{', 0xff, 0xfe, b'}'], "application/json")
                .await,
            400,
            "invalid_request",
            None,
        ),
        (
            h.post(chat(json!({"pad": "x".repeat(4096)}))).await,
            413,
            "payload_too_large",
            None,
        ),
    ];
    for (i, (resp, status, code, param)) in cases.into_iter().enumerate() {
        let (s, _, body) = error_of(resp).await;
        assert_eq!(s, status, "case {i}: {body}");
        assert_eq!(body["error"]["code"], code, "case {i}");
        assert_eq!(body["error"]["param"].as_str(), param, "case {i}: {body}");
        assert!(!body["error"]["message"].as_str().unwrap().is_empty());
    }
    // Nothing bad reached the upstream.
    assert_eq!(h.mock.request_count(), 0);
}

#[tokio::test]
async fn unknown_path_is_enveloped_404() {
    let h = common::start(common::ONE_OPENAI).await;
    let resp = reqwest::get(h.url("/v1/nothing")).await.unwrap();
    let (status, _, body) = error_of(resp).await;
    assert_eq!(status, 404);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/v1/nothing"));
}

// === virtual keys ===

const WITH_CLIENTS: &str = r#"
clients:
  - id: support-bot
    key_env: CLIENT_KEY
    routes: [chat]
providers:
  mock:
    protocol: openai
    base_url: "{mock}/v1"
models:
  - { id: mock/a, provider: mock, model: a }
routes:
  chat: { targets: [mock/a] }
  other: { targets: [mock/a] }
"#;

#[tokio::test]
async fn virtual_keys_authenticate_and_authorize() {
    let h = common::start(WITH_CLIENTS).await;
    let http = reqwest::Client::new();
    let send = |key: Option<&str>, model: &str| {
        let mut r = http
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": model, "messages": common::user("x")}));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send()
    };
    let (s, _, b) = error_of(send(None, "chat").await.unwrap()).await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (401, "auth_failed")
    );
    let (s, _, b) = error_of(send(Some("wrong"), "chat").await.unwrap()).await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (401, "auth_failed")
    );
    let (s, _, b) = error_of(send(Some("client-secret"), "other").await.unwrap()).await;
    assert_eq!(
        (s, b["error"]["code"].as_str().unwrap()),
        (403, "forbidden")
    );
    assert_eq!(
        send(Some("client-secret"), "chat").await.unwrap().status(),
        200
    );
    // x-api-key works too.
    let ok = http
        .post(h.url("/v1/chat/completions"))
        .header("x-api-key", "client-secret")
        .json(&json!({"model": "chat", "messages": common::user("x")}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    // /v1/models lists only what this client may use.
    let list: Value = http
        .get(h.url("/v1/models"))
        .bearer_auth("client-secret")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["chat"]);
    let d = h.decision(3).await;
    assert_eq!(d["client"], "support-bot");
    assert!(!h
        .decisions
        .lock()
        .unwrap()
        .join("\n")
        .contains("client-secret"));
}

#[tokio::test]
async fn models_lists_routes_then_deployments() {
    let h = common::start(common::ONE_OPENAI).await;
    let list: Value = reqwest::get(h.url("/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(list["object"], "list");
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["chat", "mock/gpt-4o-mini"]);
}

#[tokio::test]
async fn deployment_ids_are_models_too_and_admin_health_answers() {
    let h = common::start(common::ONE_OPENAI).await;
    let resp = h
        .post(json!({"model": "mock/gpt-4o-mini", "messages": common::user("x")}))
        .await;
    assert_eq!(resp.status(), 200);
    let health = reqwest::get(format!("{}/healthz", h.gw.admin_url()))
        .await
        .unwrap();
    assert_eq!(health.text().await.unwrap(), "ok");
    let ready = reqwest::get(format!("{}/readyz", h.gw.admin_url()))
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);
}

/// A provider key that looks like no known key shape.
const PLAIN_KEY: &str = "plain-secret-value-42";

const ECHOING: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1", keys: [{ env: PLAIN_KEY }] }
  an: { protocol: anthropic, base_url: "{mock}", keys: [{ env: PLAIN_KEY }] }
  rs: { protocol: openai, base_url: "{mock}/v1", keys: [{ env: PLAIN_KEY }] }
  gm: { protocol: gemini, base_url: "{mock}", keys: [{ env: PLAIN_KEY }] }
models:
  - { id: oa/gpt, provider: oa, model: gpt-4o-mini }
  - { id: an/claude, provider: an, model: claude-sonnet-4-5, max_output_tokens: 1024 }
  - { id: rs/gpt, provider: rs, model: gpt-5.5, capabilities: [streaming, responses] }
  - { id: gm/gemini, provider: gm, model: gemini-2.5-flash }
"#;

/// Contract §8 "Secrets never leave": an upstream that echoes the
/// provider's key — here one shaped like no known key — in an in-stream
/// error (every client door, passthrough and translated) or in an error
/// body: the client gets the upstream's message with the key masked, and
/// the key is nowhere in the decision log, the gateway's log or the spans.
#[tokio::test]
async fn a_provider_key_echoed_by_the_upstream_reaches_no_client_log_or_trace() {
    use common::instance::Instance;
    let otlp = common::otlp::Receiver::start_grpc().await;
    let obs = common::otlp::observability(&otlp.endpoint, "grpc", 1.0);
    let gw = Instance::start(&format!("{ECHOING}\n{obs}"), &[("PLAIN_KEY", PLAIN_KEY)]).await;
    let echo =
        "Incorrect API key provided: {key}. You can find your API key at https://example.com.";
    let midstream = Behavior::fault(Fault::MidstreamError)
        .after(2)
        .error_message(echo);
    let body_error = |fixture: &str| Behavior::fixture(fixture).error_message(echo);
    let streamed = |model: &str| json!({"model": model, "messages": common::user("hi"), "max_tokens": 64, "stream": true});
    let whole =
        |model: &str| json!({"model": model, "messages": common::user("hi"), "max_tokens": 64});
    // (door path, body, what the upstream does)
    let cases = [
        (
            "/v1/chat/completions",
            streamed("oa/gpt"),
            midstream.clone(),
        ),
        (
            "/v1/chat/completions",
            streamed("gm/gemini"),
            midstream.clone(),
        ),
        ("/v1/messages", streamed("an/claude"), midstream.clone()),
        ("/v1/messages", streamed("oa/gpt"), midstream.clone()),
        (
            "/v1/responses",
            json!({"model": "rs/gpt", "input": "hi", "stream": true}),
            midstream.clone(),
        ),
        (
            "/v1/responses",
            json!({"model": "an/claude", "input": "hi", "stream": true}),
            midstream.clone(),
        ),
        (
            "/v1/chat/completions",
            whole("oa/gpt"),
            body_error("openai/error_400_invalid_request"),
        ),
        (
            "/v1/messages",
            whole("an/claude"),
            body_error("anthropic/error_400_invalid_request"),
        ),
    ];
    gw.mock
        .script(cases.iter().map(|(_, _, b)| b.clone()).collect());
    let http = reqwest::Client::new();
    for (path, body, _) in &cases {
        let r = http.post(gw.url(path)).json(body).send().await.unwrap();
        let stream = body["stream"] == true;
        assert_eq!(r.status(), if stream { 200 } else { 400 }, "{path} {body}");
        let bytes = r.text().await.unwrap();
        assert!(!bytes.contains("plain-secret"), "{path} {body}: {bytes}");
        // The upstream's words reach the client, the key masked.
        assert!(
            bytes.contains("Incorrect API key provided: *****"),
            "{path} {body}: {bytes}"
        );
    }
    assert_eq!(
        gw.mock.request_count(),
        cases.len(),
        "no retries, no resumes"
    );
    common::eventually(
        || async { gw.decisions().len() == cases.len() },
        "every request's decision line",
    )
    .await;
    let spans = otlp.wait_spans(3 * cases.len()).await;
    assert!(!format!("{spans:?}").contains("plain-secret"), "{spans:#?}");
    assert!(!gw.stdout().contains("plain-secret"), "{}", gw.stdout());
    assert!(!gw.stderr().contains("plain-secret"), "{}", gw.stderr());
}

async fn post_to(
    h: &common::Harness,
    path: &str,
    key: Option<&str>,
    body: Value,
) -> reqwest::Response {
    let mut req = reqwest::Client::new().post(h.url(path)).json(&body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    req.send().await.unwrap()
}

/// CONTRACT §8: `provider_options` adds fields; a key the gateway sets or
/// meters is refused on every door before anything is sent or reserved —
/// a client allowed only `chat` cannot reach `gpt-secret` through it, nor
/// lift its output cap. The operator's `options` may set anything.
#[tokio::test]
async fn provider_options_add_fields_and_never_override_the_gateway() {
    let yaml = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1", options: { max_tokens: 7 } }
models:
  - { id: oa/cheap, provider: oa, model: cheap }
  - { id: oa/secret, provider: oa, model: gpt-secret }
routes:
  chat: { targets: [oa/cheap] }
  secret: { targets: [oa/secret] }
clients:
  - { id: team, key_env: CLIENT_KEY, routes: [chat], budget: { usd: 10, per: day } }
"#;
    let h = common::start(yaml).await;
    let options = json!({"model": "gpt-secret", "max_tokens": 3000});
    let doors = [
        (
            "/v1/chat/completions",
            json!({"model": "chat", "messages": common::user("hi"), "provider_options": options}),
        ),
        (
            "/v1/messages",
            json!({"model": "chat", "max_tokens": 5, "messages": common::user("hi"), "provider_options": options}),
        ),
        (
            "/v1/responses",
            json!({"model": "chat", "input": "hi", "provider_options": options}),
        ),
    ];
    for (path, body) in doors {
        let resp = post_to(&h, path, Some("client-secret"), body).await;
        let (status, _, e) = error_of(resp).await;
        assert_eq!(status, 400, "{path}: {e}");
        assert!(e.to_string().contains("invalid_request"), "{path}: {e}");
        assert!(
            e.to_string().contains("provider_options.model"),
            "{path}: {e}"
        );
    }
    assert_eq!(h.mock.request_count(), 0, "nothing was sent");
    for key in [
        "max_tokens",
        "n",
        "stream",
        "tools",
        "messages",
        "generationConfig",
    ] {
        let body = chat(json!({"provider_options": {key: 1}}));
        let (status, _, e) =
            error_of(post_to(&h, "/v1/chat/completions", Some("client-secret"), body).await).await;
        assert_eq!(
            (status, e["error"]["param"].as_str()),
            (400, Some(format!("provider_options.{key}").as_str())),
            "{e}"
        );
    }
    // Other fields are added; the operator's options win over the client's body.
    let body = chat(json!({"max_tokens": 50, "provider_options": {"top_k": 5}}));
    let resp = post_to(&h, "/v1/chat/completions", Some("client-secret"), body).await;
    assert_eq!(resp.status(), 200);
    let sent = h.mock.requests()[0].json.clone().unwrap();
    assert_eq!(
        (
            sent["model"].clone(),
            sent["top_k"].clone(),
            sent["max_tokens"].clone()
        ),
        (json!("cheap"), json!(5), json!(7)),
        "{sent}"
    );
}

/// CONTRACT §8: a request no deployment could ever serve (every candidate
/// lacks a capability it needs) is the client's 400 `invalid_request`,
/// naming what is missing, in the door's envelope — never a 503 that SDKs
/// retry, nor a degraded answer; 503 is for a capable candidate that is
/// unhealthy. An Anthropic request to an Anthropic deployment passes as it
/// came: it is never ruled out for what that protocol carries.
#[tokio::test]
async fn a_request_no_deployment_can_serve_is_the_clients_error() {
    let yaml = r#"
degraded: { enabled: true, message: "We are busy, back soon." }
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
  an: { protocol: anthropic, base_url: "{mock}" }
models:
  - { id: oa/plain, provider: oa, model: plain, capabilities: [streaming] }
  - { id: oa/schema, provider: oa, model: schema, capabilities: [streaming, json_schema] }
  - { id: an/claude, provider: an, model: claude-x, capabilities: [streaming] }
routes:
  chat: { targets: [oa/plain] }
  claude: { targets: [an/claude] }
  either: { targets: [oa/plain, oa/schema] }
"#;
    let h = common::start(yaml).await;
    let schema = json!({"type": "json_schema", "json_schema": {"name": "city", "schema": {"type": "object", "properties": {"city": {"type": "string"}}}}});
    // The chat door: 400 naming the capability (degraded answers are for outages).
    let body =
        json!({"model": "chat", "messages": common::user("City?"), "response_format": schema});
    let (status, _, e) = error_of(h.post(body).await).await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["code"], "invalid_request");
    assert_eq!(
        e["error"]["message"],
        "no deployment of route `chat` supports json_schema"
    );
    // The Messages door, in its own envelope (tools through an OpenAI deployment).
    let tools = json!([{"name": "f", "input_schema": {"type": "object", "properties": {}}}]);
    let body =
        json!({"model": "chat", "max_tokens": 5, "messages": common::user("hi"), "tools": tools});
    let (status, _, e) = error_of(post_to(&h, "/v1/messages", None, body).await).await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert_eq!(
        e["error"]["message"],
        "no deployment of route `chat` supports tools"
    );
    assert_eq!(h.mock.request_count(), 0);
    // The Anthropic passthrough: output_config.format goes as it came.
    let body = json!({"model": "claude", "max_tokens": 5, "messages": common::user("City?"),
                      "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}});
    let resp = post_to(&h, "/v1/messages", None, body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        h.mock.requests()[0].json.clone().unwrap()["output_config"]["format"]["type"],
        "json_schema"
    );
    // … but the same need in another dialect is translated: ruled out there.
    let body =
        json!({"model": "claude", "messages": common::user("City?"), "response_format": schema});
    assert_eq!(h.post(body).await.status(), 400);
    // A capable candidate that is open-circuited makes it an outage again.
    let open = reqwest::Client::new()
        .post(format!(
            "{}/admin/deployments/oa%2Fschema/open",
            h.gw.admin_url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status(), 200);
    let body =
        json!({"model": "either", "messages": common::user("City?"), "response_format": schema});
    let resp = h.post(body.clone()).await;
    assert_eq!(resp.status(), 200, "degraded: an outage");
    assert_eq!(resp.headers()["x-switchyard-deployment"], "degraded");
    assert_eq!(
        resp.headers()["x-switchyard-fallback-reason"],
        "no_healthy_deployment"
    );
    let close = reqwest::Client::new()
        .post(format!(
            "{}/admin/deployments/oa%2Fschema/close",
            h.gw.admin_url()
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(close.status(), 200);
    // Closed again: the capable one serves, and the plan says why the first was passed over.
    let before = h.mock.request_count();
    let resp = h.post(body).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-switchyard-deployment"], "oa/schema");
    assert_eq!(
        h.mock.requests()[before].json.clone().unwrap()["model"],
        "schema"
    );
}
