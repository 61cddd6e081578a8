//! `POST /v1/embeddings` over real HTTP against the mock providers: OpenAI
//! passthrough, Azure, Gemini `:batchEmbedContents` mapped back, float and
//! base64, fallback, capability filtering and the OpenAI error envelope.

mod common;

use base64::Engine as _;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

const CONFIG: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1", keys: [{ env: TEST_KEY }] }
  gm: { protocol: gemini, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  an: { protocol: anthropic, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  az: { protocol: azure, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
models:
  - id: oa/embed
    provider: oa
    model: text-embedding-3-small
    capabilities: [embeddings]
    pricing: { input: 20000, output: 0 }
  - id: gm/embed
    provider: gm
    model: gemini-embedding-001
    capabilities: [embeddings]
    pricing: { input: 150000, output: 0 }
  - { id: oa/chat, provider: oa, model: gpt-4o-mini }
  - { id: an/claude, provider: an, model: claude-sonnet, capabilities: [tools, streaming] }
  - { id: az/embed, provider: az, model: emb-deploy, capabilities: [embeddings] }
routes:
  embed: { targets: [oa/embed] }
  gembed: { targets: [gm/embed] }
  fallback: { targets: [oa/embed], fallbacks: [gm/embed], retry: { attempts: 1 } }
  nochat: { targets: [oa/chat, an/claude] }
  mixed: { targets: [oa/chat, gm/embed] }
"#;

async fn embed(h: &common::Harness, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(h.url("/v1/embeddings"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

fn header<'r>(r: &'r reqwest::Response, name: &str) -> &'r str {
    r.headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"))
        .to_str()
        .unwrap()
}

/// The float vectors of an OpenAI list, in `data` order (base64 decoded).
fn vectors(v: &Value) -> Vec<Vec<f32>> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| match &d["embedding"] {
            Value::Array(a) => a.iter().map(|x| x.as_f64().unwrap() as f32).collect(),
            Value::String(s) => {
                let bytes = base64::engine::general_purpose::STANDARD.decode(s).unwrap();
                assert_eq!(bytes.len() % 4, 0);
                bytes
                    .chunks(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            }
            other => panic!("embedding is {other}"),
        })
        .collect()
}

fn indexes(v: &Value) -> Vec<u64> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["index"].as_u64().unwrap())
        .collect()
}

#[tokio::test]
async fn openai_float_and_base64_pass_through() {
    let h = common::start(CONFIG).await;
    let r = embed(
        &h,
        json!({"model": "embed", "input": ["hello", "world"], "dimensions": 16, "user": "u1"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "oa/embed");
    assert_eq!(header(&r, "x-switchyard-attempts"), "1");
    assert!(header(&r, "x-request-id").starts_with("req_"));
    // Mock usage: 10 characters / 4 = 2 tokens; 2 × 20000 USD/Mtok = 0.04.
    assert_eq!(header(&r, "x-switchyard-cost-usd"), "0.04000000");
    let float: Value = r.json().await.unwrap();
    assert_eq!(float["object"], "list");
    assert_eq!(float["model"], "text-embedding-3-small");
    assert_eq!(indexes(&float), [0, 1]);
    assert_eq!(
        float["usage"],
        json!({"prompt_tokens": 2, "total_tokens": 2})
    );
    let fv = vectors(&float);
    assert_eq!((fv.len(), fv[0].len()), (2, 16));
    assert_ne!(fv[0], fv[1]);

    // The body went upstream as the client wrote it, `model` replaced.
    let sent = &h.mock.requests()[0];
    assert_eq!(sent.path_and_query, "/v1/embeddings");
    assert_eq!(
        sent.header("authorization"),
        Some("Bearer sk-test-secret-value-1234")
    );
    assert_eq!(
        sent.json.as_ref().unwrap(),
        &json!({"model": "text-embedding-3-small", "input": ["hello", "world"], "dimensions": 16, "user": "u1"})
    );

    let r = embed(
        &h,
        json!({"model": "embed", "input": ["hello", "world"], "dimensions": 16, "encoding_format": "base64"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let b64: Value = r.json().await.unwrap();
    assert!(b64["data"][0]["embedding"].is_string());
    assert_eq!(vectors(&b64), fv, "base64 decodes to the float answer");

    // Usage and cost in the decision log.
    let d = h.decision(0).await;
    assert_eq!(d["route"], "embed");
    assert_eq!(d["selected"], "oa/embed");
    assert_eq!(d["tokens"]["input"], 2);
    assert_eq!(d["status"], 200);
    assert!((d["cost_usd"].as_f64().unwrap() - 0.04).abs() < 1e-9, "{d}");
}

#[tokio::test]
async fn gemini_batch_maps_back_to_the_openai_list() {
    let h = common::start(CONFIG).await;
    // The same texts from OpenAI (the mock's vectors depend on the text only).
    let r = embed(
        &h,
        json!({"model": "embed", "input": ["second text", "first text", "third"], "dimensions": 12}),
    )
    .await;
    let reference = vectors(&r.json::<Value>().await.unwrap());
    h.mock.clear_requests();

    let r = embed(
        &h,
        json!({"model": "gembed", "input": ["second text", "first text", "third"], "dimensions": 12}),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "gm/embed");
    // The batch answer carries no usageMetadata: the gateway counts the
    // input with the tokenizer (contract §8), never $0.
    let counted = switchyard::tokenize::Vocab::O200k.count("second text\nfirst text\nthird\n");
    assert!(counted >= 6, "{counted}");
    let cost: f64 = header(&r, "x-switchyard-cost-usd").parse().unwrap();
    assert!(
        (cost - counted as f64 * 0.15).abs() < 1e-9,
        "{cost} for {counted} tokens"
    );
    let float: Value = r.json().await.unwrap();
    assert_eq!(float["object"], "list");
    assert_eq!(float["model"], "gemini-embedding-001");
    assert_eq!(float["data"][0]["object"], "embedding");
    assert_eq!(indexes(&float), [0, 1, 2]);
    assert_eq!(
        float["usage"],
        json!({"prompt_tokens": counted, "total_tokens": counted})
    );
    let d = h.decision(1).await;
    assert_eq!(d["usage_estimated"], true, "{d}");
    assert_eq!(d["tokens"]["input"], counted, "{d}");
    assert_eq!(vectors(&float), reference, "same vectors, in input order");

    let sent = &h.mock.requests()[0];
    assert_eq!(
        sent.path_and_query,
        "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    );
    assert_eq!(
        sent.header("x-goog-api-key"),
        Some("sk-test-secret-value-1234")
    );
    let reqs = sent.json.as_ref().unwrap()["requests"].as_array().unwrap();
    assert_eq!(reqs.len(), 3);
    assert_eq!(
        reqs[1],
        json!({"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "first text"}]}, "outputDimensionality": 12})
    );

    let r = embed(
        &h,
        json!({"model": "gembed", "input": ["second text", "first text", "third"], "dimensions": 12, "encoding_format": "base64"}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let b64: Value = r.json().await.unwrap();
    assert!(b64["data"][2]["embedding"].is_string());
    assert_eq!(vectors(&b64), reference, "base64 packs f32 little-endian");

    // A single string is one request; token arrays cannot go to Gemini.
    let r = embed(&h, json!({"model": "gembed", "input": "solo"})).await;
    assert_eq!(r.status(), 200);
    let one: Value = r.json().await.unwrap();
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
    let r = embed(&h, json!({"model": "gembed", "input": [[1, 2, 3]]})).await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_request");
    assert_eq!(e["error"]["param"], "input");
}

#[tokio::test]
async fn azure_names_the_deployment_in_the_url() {
    let h = common::start(CONFIG).await;
    let r = embed(
        &h,
        json!({"model": "az/embed", "input": [[1, 2, 3], [4, 5]]}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(indexes(&v), [0, 1]);
    assert_eq!(v["usage"]["prompt_tokens"], 5);
    let sent = &h.mock.requests()[0];
    assert!(
        sent.path_and_query
            .starts_with("/openai/deployments/emb-deploy/embeddings?api-version="),
        "{}",
        sent.path_and_query
    );
    assert_eq!(sent.header("api-key"), Some("sk-test-secret-value-1234"));
    assert_eq!(
        sent.json.as_ref().unwrap(),
        &json!({"input": [[1, 2, 3], [4, 5]]})
    );
}

#[tokio::test]
async fn a_failing_deployment_falls_back_to_the_next() {
    let h = common::start(CONFIG).await;
    h.mock
        .script(vec![Behavior::fixture("openai/error_503_overloaded")]);
    let r = embed(&h, json!({"model": "fallback", "input": "hello"})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "gm/embed");
    assert_eq!(header(&r, "x-switchyard-attempts"), "2");
    assert_eq!(header(&r, "x-switchyard-fallback-reason"), "overloaded");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["model"], "gemini-embedding-001");
    let paths: Vec<String> = h
        .mock
        .requests()
        .iter()
        .map(|r| r.path_and_query.clone())
        .collect();
    assert_eq!(
        paths,
        [
            "/v1/embeddings",
            "/v1beta/models/gemini-embedding-001:batchEmbedContents"
        ]
    );
    let d = h.decision(0).await;
    let outcomes: Vec<&str> = d["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["overloaded", "ok"]);

    // A dropped connection falls back too.
    h.mock.script(vec![Behavior::fault(Fault::Drop)]);
    let r = embed(&h, json!({"model": "fallback", "input": "hello"})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "gm/embed");
    assert_eq!(
        header(&r, "x-switchyard-fallback-reason"),
        "connection_error"
    );
}

#[tokio::test]
async fn only_deployments_that_declare_embeddings_are_candidates() {
    let h = common::start(CONFIG).await;
    // A chat deployment with no capabilities and an Anthropic one: neither.
    for model in ["nochat", "oa/chat", "an/claude"] {
        let r = embed(&h, json!({"model": model, "input": "hello"})).await;
        assert_eq!(r.status(), 400, "{model}");
        assert!(r.headers().contains_key("x-request-id"));
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "invalid_request", "{e}");
        assert_eq!(e["error"]["type"], "invalid_request_error", "{e}");
        assert_eq!(e["error"]["param"], "model", "{e}");
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(msg.contains("serves embeddings"), "{msg}");
    }
    assert_eq!(h.mock.request_count(), 0, "nothing went upstream");

    // Beside a chat-only target, the embeddings deployment serves; the
    // chat one is logged as left out.
    let r = embed(&h, json!({"model": "mixed", "input": "hello"})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "gm/embed");
    let d = h.decision(3).await;
    assert_eq!(d["selected"], "gm/embed");
    assert!(d.to_string().contains("capability_not_declared"), "{d}");

    // Chat routing is unchanged: the capability-less deployment serves chat.
    let r = h
        .post(json!({"model": "nochat", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(&r, "x-switchyard-deployment"), "oa/chat");
}

#[tokio::test]
async fn errors_use_the_openai_envelope() {
    let h = common::start(CONFIG).await;
    let cases = [
        (
            json!({"model": "embed"}),
            400,
            "invalid_request",
            Some("input"),
        ),
        (json!({"input": "x"}), 400, "invalid_request", Some("model")),
        (
            json!({"model": "embed", "input": "x", "encoding_format": "int8"}),
            400,
            "invalid_request",
            Some("encoding_format"),
        ),
        (
            json!({"model": "nope", "input": "x"}),
            404,
            "model_not_found",
            None,
        ),
    ];
    for (body, status, code, param) in cases {
        let r = embed(&h, body.clone()).await;
        assert_eq!(r.status(), status, "{body}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], code, "{e}");
        assert!(e["error"]["message"].is_string());
        assert_eq!(e["error"]["param"], param.map_or(Value::Null, Value::from));
    }
    // The upstream's own 4xx is the client's, in the same envelope, not
    // retried or fallen back.
    h.mock
        .script(vec![Behavior::fixture("openai/error_400_invalid_request")]);
    let r = embed(&h, json!({"model": "fallback", "input": "x"})).await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_request", "{e}");
    assert_eq!(h.mock.request_count(), 1);
}

#[tokio::test]
async fn clients_authenticate_and_are_authorized_as_for_chat() {
    let yaml =
        format!("{CONFIG}\nclients:\n  - {{ id: app, key_env: CLIENT_KEY, routes: [gembed] }}\n");
    let h = common::start(&yaml).await;
    let post = |model: &'static str, key: Option<&'static str>| {
        let mut r = reqwest::Client::new()
            .post(h.url("/v1/embeddings"))
            .json(&json!({"model": model, "input": "hi"}));
        if let Some(k) = key {
            r = r.bearer_auth(k);
        }
        r.send()
    };
    let r = post("gembed", None).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "auth_failed"
    );
    let r = post("embed", Some("client-secret")).await.unwrap();
    assert_eq!(r.status(), 403);
    assert_eq!(
        r.json::<Value>().await.unwrap()["error"]["code"],
        "forbidden"
    );
    let r = post("gembed", Some("client-secret")).await.unwrap();
    assert_eq!(r.status(), 200);
}
