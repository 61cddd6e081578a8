//! Prompt-cache usage figures (`cached_tokens`, `cache_write_tokens`) in every wire format,
//! stream and non-stream, and their clamp to the prompt.

mod common;

use common::*;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockServer};

const CACHE: &str = r#"{"cached_tokens":30,"cache_write_tokens":20}"#;

/// A user text of `4 * tokens` characters: the mock reports `tokens` prompt tokens.
fn prompt(tokens: usize) -> String {
    "abcd".repeat(tokens)
}

fn openai(stream: bool, tokens: usize) -> Value {
    json!({"model": "gpt-4o", "stream": stream, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": prompt(tokens)}]})
}

fn anthropic(stream: bool, tokens: usize) -> Value {
    json!({"model": "claude-haiku-4-5", "max_tokens": 100, "stream": stream,
        "messages": [{"role": "user", "content": prompt(tokens)}]})
}

fn gemini(tokens: usize) -> Value {
    json!({"contents": [{"role": "user", "parts": [{"text": prompt(tokens)}]}]})
}

fn responses(stream: bool, tokens: usize) -> Value {
    json!({"model": "gpt-4o-mini", "stream": stream, "input": prompt(tokens)})
}

/// The usage object of the last OpenAI stream chunk that has one.
fn openai_stream_usage(body: &str) -> Value {
    sse_json(body)
        .into_iter()
        .rev()
        .find_map(|c| c.get("usage").filter(|u| !u.is_null()).cloned())
        .expect("a usage chunk")
}

fn responses_completed_usage(body: &str) -> Value {
    let evs = sse_events(body);
    let (_, done) = evs
        .iter()
        .find(|(n, _)| n == "response.completed")
        .expect("response.completed");
    done["response"]["usage"].clone()
}

fn anthropic_stream_usage(body: &str) -> (Value, Value) {
    let evs = sse_events(body);
    let get = |name: &str| {
        evs.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| panic!("no {name}"))
    };
    (
        get("message_start")["message"]["usage"].clone(),
        get("message_delta")["usage"].clone(),
    )
}

#[tokio::test]
async fn openai_chat() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let h = [("x-mock-behavior", CACHE)];
    let path = "/v1/chat/completions";

    let u = call(m.addr(), path, &h, &openai(false, 100)).await.json()["usage"].clone();
    assert_eq!(u["prompt_tokens"], 100, "whole prompt, cached included");
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 30);
    assert_eq!(u["prompt_tokens_details"]["audio_tokens"], 0);
    assert_eq!(
        u["total_tokens"],
        100 + u["completion_tokens"].as_u64().unwrap()
    );
    assert!(
        !u.to_string().contains("cache_write") && !u.to_string().contains("creation"),
        "OpenAI reports no cache writes: {u}"
    );

    let r = call(m.addr(), path, &h, &openai(true, 100)).await;
    let u = openai_stream_usage(&r.text());
    assert_eq!(u["prompt_tokens"], 100);
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 30);

    // Same key paths as the recorded usage.
    let fix = fixture_json("openai/chat_text_gpt41.response.json");
    assert_eq!(key_paths(&u), key_paths(&fix["usage"]));
}

#[tokio::test]
async fn anthropic_messages() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let h = [("x-mock-behavior", CACHE)];

    let v = call(m.addr(), "/v1/messages", &h, &anthropic(false, 100))
        .await
        .json();
    let u = &v["usage"];
    assert_eq!(u["input_tokens"], 50, "100 - 30 read - 20 written");
    assert_eq!(u["cache_read_input_tokens"], 30);
    assert_eq!(u["cache_creation_input_tokens"], 20);
    assert_eq!(u["cache_creation"]["ephemeral_5m_input_tokens"], 20);
    assert_eq!(u["cache_creation"]["ephemeral_1h_input_tokens"], 0);

    let r = call(m.addr(), "/v1/messages", &h, &anthropic(true, 100)).await;
    let body = r.text();
    let (start, delta) = anthropic_stream_usage(&body);
    assert_eq!(start["input_tokens"], 50);
    assert_eq!(start["cache_read_input_tokens"], 30);
    assert_eq!(start["cache_creation_input_tokens"], 20);
    assert_eq!(start["cache_creation"]["ephemeral_5m_input_tokens"], 20);
    assert_eq!(start["cache_creation"]["ephemeral_1h_input_tokens"], 0);
    assert_eq!(start["output_tokens"], 1);
    assert_eq!(delta["input_tokens"], 50);
    assert_eq!(delta["cache_read_input_tokens"], 30);
    assert_eq!(delta["cache_creation_input_tokens"], 20);

    // Key order as recorded in stream_text_usage_cache_fields.sse.
    let fix = anthropic_stream_usage(&fixture("anthropic/stream_text_usage_cache_fields.sse"));
    assert_eq!(key_paths(&start), key_paths(&fix.0));
    assert_eq!(key_paths(&delta), key_paths(&fix.1));
}

#[tokio::test]
async fn gemini_generate() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let h = [("x-mock-behavior", CACHE)];

    let v = call(m.addr(), GEM, &h, &gemini(100)).await.json();
    let u = &v["usageMetadata"];
    assert_eq!(u["promptTokenCount"], 100, "whole prompt, cached included");
    assert_eq!(u["cachedContentTokenCount"], 30);
    assert_eq!(
        u["cacheTokensDetails"],
        json!([{"modality": "TEXT", "tokenCount": 30}])
    );
    assert_eq!(
        u["totalTokenCount"],
        100 + u["candidatesTokenCount"].as_u64().unwrap()
    );
    let keys: Vec<&String> = u.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "promptTokenCount",
            "candidatesTokenCount",
            "totalTokenCount",
            "cachedContentTokenCount",
            "promptTokensDetails",
            "cacheTokensDetails",
            "candidatesTokensDetails"
        ],
        "no cache-write field"
    );

    let r = call(m.addr(), GEM_STREAM, &h, &gemini(100)).await;
    let frames = sse_json(&r.text());
    assert!(frames.len() > 1);
    for f in &frames {
        let u = &f["usageMetadata"];
        assert_eq!(u["promptTokenCount"], 100);
        assert_eq!(u["cachedContentTokenCount"], 30, "every frame: {f}");
        assert_eq!(u["cacheTokensDetails"][0]["tokenCount"], 30);
    }

    // Key order as recorded (gemini-2.5-flash implicit caching, with thoughts).
    let h = [(
        "x-mock-behavior",
        r#"{"cached_tokens":30,"cache_write_tokens":20,"reasoning":"Let me think."}"#,
    )];
    let v = call(m.addr(), GEM, &h, &gemini(100)).await.json();
    let fix = fixture_json("gemini/generate_usage_cached_thoughts.response.json");
    let fix_keys: Vec<&String> = fix["usageMetadata"].as_object().unwrap().keys().collect();
    let ours: Vec<&String> = v["usageMetadata"]
        .as_object()
        .unwrap()
        .keys()
        .filter(|k| fix_keys.contains(k))
        .collect();
    assert_eq!(ours, fix_keys);

    // No cache hit: no cache fields at all.
    let v = call(m.addr(), GEM, &[], &gemini(100)).await.json();
    assert!(v["usageMetadata"].get("cachedContentTokenCount").is_none());
    assert!(v["usageMetadata"].get("cacheTokensDetails").is_none());
}

#[tokio::test]
async fn responses_api() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let h = [("x-mock-behavior", CACHE)];

    let u = call(m.addr(), RESP, &h, &responses(false, 100))
        .await
        .json()["usage"]
        .clone();
    assert_eq!(u["input_tokens"], 100, "whole prompt, cached included");
    assert_eq!(u["input_tokens_details"], json!({"cached_tokens": 30}));
    assert_eq!(
        u["total_tokens"],
        100 + u["output_tokens"].as_u64().unwrap()
    );

    let r = call(m.addr(), RESP, &h, &responses(true, 100)).await;
    let u = responses_completed_usage(&r.text());
    assert_eq!(u["input_tokens"], 100);
    assert_eq!(u["input_tokens_details"], json!({"cached_tokens": 30}));
}

#[tokio::test]
async fn clamped_to_the_prompt() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let h = [("x-mock-behavior", CACHE)];

    // 40-token prompt: cache_write is cut to 10, cached stays 30.
    let u = call(m.addr(), "/v1/messages", &h, &anthropic(false, 40))
        .await
        .json()["usage"]
        .clone();
    assert_eq!(u["input_tokens"], 0);
    assert_eq!(u["cache_read_input_tokens"], 30);
    assert_eq!(u["cache_creation_input_tokens"], 10);
    assert_eq!(u["cache_creation"]["ephemeral_5m_input_tokens"], 10);

    // 10-token prompt: cache_write goes to 0, cached to the whole prompt.
    let r = call(m.addr(), "/v1/messages", &h, &anthropic(true, 10)).await;
    let (start, delta) = anthropic_stream_usage(&r.text());
    for u in [&start, &delta] {
        assert_eq!(u["input_tokens"], 0);
        assert_eq!(u["cache_read_input_tokens"], 10);
        assert_eq!(u["cache_creation_input_tokens"], 0);
    }
    let u = call(m.addr(), "/v1/chat/completions", &h, &openai(false, 10))
        .await
        .json()["usage"]
        .clone();
    assert_eq!(u["prompt_tokens"], 10);
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 10);
    let v = call(m.addr(), GEM, &h, &gemini(10)).await.json();
    assert_eq!(v["usageMetadata"]["promptTokenCount"], 10);
    assert_eq!(v["usageMetadata"]["cachedContentTokenCount"], 10);
    let u = call(m.addr(), RESP, &h, &responses(false, 10)).await.json()["usage"].clone();
    assert_eq!(u["input_tokens"], 10);
    assert_eq!(u["input_tokens_details"]["cached_tokens"], 10);

    // Only cache writes, larger than the prompt.
    let h = [("x-mock-behavior", r#"{"cache_write_tokens":500}"#)];
    let u = call(m.addr(), "/v1/messages", &h, &anthropic(false, 10))
        .await
        .json()["usage"]
        .clone();
    assert_eq!(u["input_tokens"], 0);
    assert_eq!(u["cache_read_input_tokens"], 0);
    assert_eq!(u["cache_creation_input_tokens"], 10);
}

#[tokio::test]
async fn builders_and_defaults() {
    let b = Behavior::text("hi").cached(30).cache_write(20);
    assert_eq!(
        b,
        Behavior::from_json(&CACHE.replace('{', r#"{"text":"hi","#)).unwrap()
    );
    assert_eq!(Behavior::default().cached_tokens, 0);
    assert_eq!(Behavior::default().cache_write_tokens, 0);

    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    m.script(vec![b]);
    let u = call(m.addr(), "/v1/messages", &[], &anthropic(false, 100))
        .await
        .json()["usage"]
        .clone();
    assert_eq!(u["input_tokens"], 50);
    assert_eq!(u["cache_read_input_tokens"], 30);
    assert_eq!(u["cache_creation_input_tokens"], 20);

    // Without the fields every figure is as before: nothing cached.
    let u = call(m.addr(), "/v1/messages", &[], &anthropic(false, 100))
        .await
        .json()["usage"]
        .clone();
    assert_eq!(u["input_tokens"], 100);
    assert_eq!(u["cache_read_input_tokens"], 0);
    assert_eq!(u["cache_creation_input_tokens"], 0);
    assert_eq!(u["cache_creation"]["ephemeral_5m_input_tokens"], 0);
    let u = call(m.addr(), "/v1/chat/completions", &[], &openai(false, 100))
        .await
        .json()["usage"]
        .clone();
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 0);
}
