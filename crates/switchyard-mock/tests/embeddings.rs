//! Embeddings and token counting against the fixtures.

mod common;

use common::*;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault, MockServer};

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

#[tokio::test]
async fn openai_float_matches_fixture() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let req = fixture_json("openai/embeddings_float.request.json");
    let r = call(m.addr(), "/v1/embeddings", &[], &req).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("openai-model"), Some("text-embedding-3-small"));
    let v = r.json();
    let fix = fixture_json("openai/embeddings_float.response.json");
    assert_eq!(key_paths(&v), key_paths(&fix));
    // 2-space pretty + trailing newline, one float per line
    assert_eq!(
        r.text(),
        format!("{}\n", serde_json::to_string_pretty(&v).unwrap())
    );
    let data = v["data"].as_array().unwrap();
    assert_eq!(data.len(), 4);
    let inputs = req["input"].as_array().unwrap();
    let mut chars = 0;
    for (i, d) in data.iter().enumerate() {
        assert_eq!(d["index"], i);
        let e = floats(&d["embedding"]);
        assert_eq!(e.len(), 8, "default dims");
        assert!((norm(&e) - 1.0).abs() < 1e-5);
        chars += inputs[i].as_str().unwrap().chars().count();
    }
    assert_ne!(data[0]["embedding"], data[1]["embedding"]);
    assert_eq!(v["usage"]["prompt_tokens"], chars / 4);
    assert_eq!(v["usage"]["total_tokens"], chars / 4);
    assert_eq!(v["model"], "text-embedding-3-small");

    // deterministic: the same text alone, on the short path, gives the same vector
    let one = json!({"model": "text-embedding-3-small", "input": inputs[2]});
    let v1 = call(m.addr(), "/embeddings", &[], &one).await.json();
    assert_eq!(v1["data"][0]["embedding"], data[2]["embedding"]);
    assert_eq!(v1["data"][0]["index"], 0);
    // token arrays: usage counts the tokens
    let toks = json!({"model": "m", "input": [[1, 2, 3], [4, 5]]});
    let v = call(m.addr(), "/v1/embeddings", &[], &toks).await.json();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["usage"]["prompt_tokens"], 5);
    let toks = json!({"model": "m", "input": [1, 2, 3]});
    let v = call(m.addr(), "/v1/embeddings", &[], &toks).await.json();
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
    // Azure deployment: the deployment is the model
    let r = call(
        m.addr(),
        "/openai/deployments/emb/embeddings?api-version=2024-10-21",
        &[],
        &json!({"input": "hi"}),
    )
    .await;
    assert_eq!(r.json()["model"], "emb");
}

#[tokio::test]
async fn openai_base64_decodes_to_the_floats() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let req = fixture_json("openai/embeddings_base64.request.json");
    let v = call(m.addr(), "/v1/embeddings", &[], &req).await.json();
    let fix = fixture_json("openai/embeddings_base64.response.json");
    assert_eq!(
        sorted_paths(&v),
        sorted_paths(&fix),
        "recorder-sorted fixture"
    );
    assert_eq!(
        key_paths(&v),
        [
            ".object",
            ".data",
            ".data[].object",
            ".data[].index",
            ".data[].embedding",
            ".model",
            ".usage",
            ".usage.prompt_tokens",
            ".usage.total_tokens"
        ],
        "the float fixture's wire order"
    );
    let b64 = v["data"][0]["embedding"].as_str().unwrap();
    // 128 dims = 512 bytes = 684 chars, like the recording
    assert_eq!(
        b64.len(),
        fix["data"][0]["embedding"].as_str().unwrap().len()
    );
    let decoded = b64_floats(b64);
    assert_eq!(decoded.len(), 128);
    let mut float_req = req.clone();
    float_req.as_object_mut().unwrap().remove("encoding_format");
    let f = call(m.addr(), "/v1/embeddings", &[], &float_req)
        .await
        .json();
    assert_eq!(decoded, floats(&f["data"][0]["embedding"]), "bit-exact");
    // "Hello, world!" = 13 chars → 3
    assert_eq!(v["usage"]["prompt_tokens"], 3);

    // bad requests: 400 in the OpenAI envelope
    for bad in [
        json!({"model": "m", "input": "x", "encoding_format": "int8"}),
        json!({"model": "m", "input": "x", "dimensions": 0}),
        json!({"model": "m", "input": ""}),
        json!({"model": "m"}),
        json!({"input": "x"}),
    ] {
        let r = call(m.addr(), "/v1/embeddings", &[], &bad).await;
        assert_eq!(r.status, 400, "{bad}");
        assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    }
}

#[tokio::test]
async fn gemini_embed_and_batch_match_fixtures() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let req = fixture_json("gemini/embed_content.request.json");
    let r = call(
        m.addr(),
        "/v1beta/models/gemini-embedding-001:embedContent",
        &[],
        &req,
    )
    .await;
    assert_eq!(
        r.header("content-type"),
        Some("application/json; charset=UTF-8")
    );
    let v = r.json();
    assert_eq!(
        r.text(),
        format!("{}\n", serde_json::to_string_pretty(&v).unwrap())
    );
    let fix = fixture_json("gemini/embed_content.response.json");
    assert_eq!(sorted_paths(&v), sorted_paths(&fix));
    let values = floats(&v["embedding"]["values"]);
    assert_eq!(values.len(), 768, "outputDimensionality");
    // "What is the meaning of life?" = 28 chars → 7
    assert_eq!(v["usageMetadata"]["promptTokenCount"], 7);

    let batch = fixture_json("gemini/batch_embed_contents.request.json");
    let url = "/v1beta/models/gemini-embedding-2-preview:batchEmbedContents";
    let v = call(m.addr(), url, &[], &batch).await.json();
    let fix = fixture_json("gemini/batch_embed_contents.response.json");
    assert_eq!(key_paths(&v), key_paths(&fix));
    let embs = v["embeddings"].as_array().unwrap();
    assert_eq!(embs.len(), 2);
    assert_eq!(floats(&embs[0]["values"]).len(), 8);
    assert_ne!(embs[0], embs[1]);
    // same text, same vector, whichever endpoint
    let single = json!({"content": {"parts": [{"text": "hello"}]}});
    let s = call(m.addr(), "/v1beta/models/x:embedContent", &[], &single)
        .await
        .json();
    assert_eq!(s["embedding"]["values"], embs[0]["values"]);
    // a request naming another model: 400 INVALID_ARGUMENT
    let r = call(
        m.addr(),
        "/v1beta/models/other:batchEmbedContents",
        &[],
        &batch,
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["status"], "INVALID_ARGUMENT");
}

#[tokio::test]
async fn count_tokens_predictable() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    // Anthropic: compact {"input_tokens":N}; "What is the capital of France?" = 30 → 7
    let req = fixture_json("anthropic/count_tokens.request.json");
    let r = call(m.addr(), "/v1/messages/count_tokens?beta=true", &[], &req).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), r#"{"input_tokens":7}"#);
    assert_eq!(
        key_paths(&r.json()),
        key_paths(&fixture_json("anthropic/count_tokens.response.json"))
    );
    // = the usage of the same body
    let mut gen = anthropic_req(false);
    let c = call(m.addr(), "/v1/messages/count_tokens", &[], &gen)
        .await
        .json();
    gen["tools"] = json!([]);
    let u = call(m.addr(), "/v1/messages", &[], &gen).await.json();
    assert_eq!(c["input_tokens"], u["usage"]["input_tokens"]);
    assert_eq!(c["input_tokens"], 8);

    // Gemini, `contents` form: "The quick brown fox jumps over the lazydog." = 43 → 10
    let req = fixture_json("gemini/count_tokens.request.json");
    let url = "/v1beta/models/gemini-2.5-flash:countTokens";
    let r = call(m.addr(), url, &[], &req).await;
    let v = r.json();
    assert_eq!(
        r.text(),
        format!("{}\n", serde_json::to_string_pretty(&v).unwrap())
    );
    assert_eq!(
        sorted_paths(&v),
        sorted_paths(&fixture_json("gemini/count_tokens.response.json"))
    );
    assert_eq!(
        v,
        json!({"totalTokens": 10, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 10}]})
    );
    // `generateContentRequest` form counts the system instruction too, like usage does
    let wrapped = json!({"generateContentRequest": {"model": "models/gemini-2.5-flash", "contents": gemini_req()["contents"], "systemInstruction": gemini_req()["systemInstruction"]}});
    let v = call(m.addr(), url, &[], &wrapped).await.json();
    let u = call(m.addr(), GEM, &[], &gemini_req()).await.json();
    assert_eq!(v["totalTokens"], u["usageMetadata"]["promptTokenCount"]);
    assert_eq!(v["totalTokens"], 8);

    // Responses: pretty, no trailing newline; "What is the weather in Paris?" = 29 → 7
    let req = fixture_json("openai-responses/input_tokens.request.json");
    let r = call(m.addr(), "/v1/responses/input_tokens", &[], &req).await;
    assert_eq!(
        r.text(),
        "{\n  \"input_tokens\": 7,\n  \"object\": \"response.input_tokens\"\n}"
    );
    assert_eq!(
        key_paths(&r.json()),
        key_paths(&fixture_json("openai-responses/input_tokens.response.json"))
    );
    let c = call(
        m.addr(),
        "/responses/input_tokens",
        &[],
        &responses_req(false),
    )
    .await
    .json();
    let u = call(m.addr(), RESP, &[], &responses_req(false))
        .await
        .json();
    assert_eq!(c["input_tokens"], u["usage"]["input_tokens"]);

    // Anthropic count without a model: 400
    let r = call(
        m.addr(),
        "/v1/messages/count_tokens",
        &[],
        &json!({"messages": []}),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["type"], "error");
}

#[tokio::test]
async fn faults_on_embeddings_and_counts() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let emb = json!({"model": "text-embedding-3-small", "input": "hi"});
    m.script(vec![
        Behavior::fixture("openai/error_429_rate_limit_tokens"),
        Behavior::fault(Fault::MalformedJson),
        Behavior::default().latency(100),
    ]);
    let r = call(m.addr(), "/v1/embeddings", &[], &emb).await;
    assert_eq!(r.status, 429);
    let r = call(m.addr(), "/v1/embeddings", &[], &emb).await;
    assert_eq!(r.status, 200);
    assert!(serde_json::from_slice::<Value>(&r.body).is_err());
    let t0 = std::time::Instant::now();
    let r = call(m.addr(), "/v1/embeddings", &[], &emb).await;
    assert!(t0.elapsed() >= std::time::Duration::from_millis(95));
    assert_eq!(r.status, 200);

    m.script(vec![Behavior::fault(Fault::Cut)]);
    let c = Conn::send(
        m.addr(),
        "POST",
        "/v1beta/models/g:countTokens",
        &[],
        &fixture("gemini/count_tokens.request.json"),
    )
    .await
    .unwrap();
    assert!(c.read_all().await.is_err(), "cut mid-body");

    let h = [("x-mock-behavior", r#"{"status":503,"body":"busy"}"#)];
    let r = call(
        m.addr(),
        "/v1/messages/count_tokens",
        &h,
        &fixture_json("anthropic/count_tokens.request.json"),
    )
    .await;
    assert_eq!((r.status, r.text().as_str()), (503, "busy"));

    m.set_valid_keys(vec!["k".into()]);
    let r = call(
        m.addr(),
        "/v1beta/models/g:batchEmbedContents",
        &[("x-goog-api-key", "nope")],
        &json!({"requests": []}),
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json(),
        fixture_json("gemini/error_400_api_key_invalid.http.json")["body"]
    );
}
