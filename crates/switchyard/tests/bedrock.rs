//! Amazon Bedrock over real HTTP (contract §9): every door to Converse and
//! to InvokeModel, streamed and not, signed with SigV4 that the mock
//! verifies, with the event-stream framing, tools, cached-token pricing,
//! token counting, and each error class.

mod common;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

const BEDROCK: &str = r#"
providers:
  bedrock:
    protocol: bedrock
    region: us-east-1
    base_url: "{mock}"
    credentials: { env_prefix: MOCK_AWS }
models:
  - id: bedrock/claude
    provider: bedrock
    model: "anthropic.claude-sonnet-4-5-20250929-v1:0"
    capabilities: [tools, streaming]
    pricing: { input: 3.0, output: 15.0, cached_input: 0.3, cache_write: 3.75 }
  - id: bedrock/claude-invoke
    provider: bedrock
    model: "anthropic.claude-haiku-4-5-20251001-v1:0"
    api: invoke
    capabilities: [tools, streaming]
routes:
  chat: { targets: [bedrock/claude] }
  invoke: { targets: [bedrock/claude-invoke] }
"#;

const CONVERSE_PATH: &str = "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse";
const TEXT: &str = "Hello from the mock bedrock provider.";
const INVOKE_TEXT: &str = "Hello from the mock anthropic provider.";

async fn responses(h: &common::Harness, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(h.url("/v1/responses"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

/// The text of an Anthropic SSE stream's text deltas.
fn anthropic_stream_text(body: &str) -> String {
    common::sse_data(body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["type"] == "content_block_delta")
        .filter_map(|v| v["delta"]["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_openai_door_to_converse_signed_whole_and_streamed() {
    let h = common::start(BEDROCK).await;
    let r = h
        .post(json!({"model": "chat", "messages": common::user("hi there")}))
        .await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], TEXT, "{body}");
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert!(
        body["usage"]["prompt_tokens"].as_u64().unwrap() > 0,
        "{body}"
    );
    let sent = &h.mock.requests()[0];
    assert_eq!(sent.path_and_query, CONVERSE_PATH);
    let auth = sent.header("authorization").unwrap();
    assert!(
        auth.starts_with("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
            && auth.contains("/us-east-1/bedrock/aws4_request"),
        "{auth}"
    );
    let upstream = sent.json.as_ref().unwrap();
    assert!(upstream.get("model").is_none(), "the model is in the URL");
    assert_eq!(upstream["messages"][0]["content"][0]["text"], "hi there");

    let r = h
        .post(
            json!({"model": "chat", "stream": true, "stream_options": {"include_usage": true},
                     "messages": common::user("hi")}),
        )
        .await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert_eq!(common::sse_text(&text), TEXT);
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let data = common::sse_data(&text);
    let usage: Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
    assert!(
        usage["usage"]["completion_tokens"].as_u64().unwrap() > 0,
        "{usage}"
    );
    assert!(h.mock.requests()[1]
        .path_and_query
        .ends_with("/converse-stream"));
    assert_eq!((h.mock.sigv4_verified(), h.mock.sigv4_rejected()), (2, 0));
}

#[tokio::test]
async fn the_anthropic_and_responses_doors_to_converse() {
    let h = common::start(BEDROCK).await;
    let msg =
        json!({"model": "chat", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]});
    let r = h.messages(msg.clone()).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["content"][0]["text"], TEXT, "{body}");
    assert_eq!(body["stop_reason"], "end_turn");

    let mut stream = msg.clone();
    stream["stream"] = json!(true);
    let text = h.messages(stream).await.text().await.unwrap();
    assert_eq!(anthropic_stream_text(&text), TEXT, "{text}");
    assert!(text.contains("event: message_stop"), "{text}");

    let r = responses(&h, json!({"model": "chat", "input": "hi"})).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["output"][0]["content"][0]["text"], TEXT, "{body}");
    let r = responses(&h, json!({"model": "chat", "input": "hi", "stream": true})).await;
    let text = r.text().await.unwrap();
    assert!(text.contains("response.completed"), "{text}");
    assert_eq!(h.mock.sigv4_verified(), 4);
}

#[tokio::test]
async fn tool_calls_go_out_and_their_results_come_back() {
    let h = common::start(BEDROCK).await;
    let tools = json!([{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]);
    for stream in [false, true] {
        let r = h
            .post(json!({"model": "chat", "stream": stream, "tools": tools,
                         "messages": common::user("weather in Paris?")}))
            .await;
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        let (name, args, finish) = if stream {
            let chunks: Vec<Value> = common::sse_data(&text)
                .iter()
                .filter_map(|d| serde_json::from_str(d).ok())
                .collect();
            let calls: Vec<&Value> = chunks
                .iter()
                .filter_map(|c| {
                    c["choices"][0]["delta"]["tool_calls"][0]
                        .as_object()
                        .map(|_| c)
                })
                .collect();
            let name = calls[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"].clone();
            let args: String = calls
                .iter()
                .filter_map(|c| {
                    c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
                })
                .collect();
            let finish = chunks
                .iter()
                .find_map(|c| c["choices"][0]["finish_reason"].as_str().map(str::to_owned));
            (name, args, finish.unwrap())
        } else {
            let v: Value = serde_json::from_str(&text).unwrap();
            let call = &v["choices"][0]["message"]["tool_calls"][0];
            (
                call["function"]["name"].clone(),
                call["function"]["arguments"].as_str().unwrap().to_owned(),
                v["choices"][0]["finish_reason"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        };
        assert_eq!(name, "get_weather", "stream={stream}: {text}");
        assert_eq!(
            serde_json::from_str::<Value>(&args).unwrap(),
            json!({"city": "mock"})
        );
        assert_eq!(finish, "tool_calls");
    }
    // The result goes back as a toolResult in a user turn.
    let r = h
        .post(json!({"model": "chat", "tools": tools, "messages": [
            {"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "tool_calls": [{"id": "tooluse_abc", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "tooluse_abc", "content": "sunny"}
        ]}))
        .await;
    let body: Value = r.json().await.unwrap();
    assert_eq!(
        body["choices"][0]["message"]["content"], "Tool result received: sunny",
        "{body}"
    );
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert_eq!(sent["messages"][2]["role"], "user");
    assert_eq!(
        sent["messages"][2]["content"][0]["toolResult"]["toolUseId"],
        "tooluse_abc"
    );
}

/// Cache reads and writes reported by Converse (its `inputTokens` leaves
/// them out) are priced at their own rates, streamed or not.
#[tokio::test]
async fn cached_tokens_are_priced_at_their_own_rates() {
    let h = common::start(BEDROCK).await;
    h.mock
        .set_default(Behavior::default().cached(120).cache_write(40));
    let long = "word ".repeat(200);
    for (i, stream) in [false, true].into_iter().enumerate() {
        let r = h
            .post(json!({"model": "chat", "stream": stream, "messages": common::user(&long)}))
            .await;
        assert_eq!(r.status(), 200);
        r.text().await.unwrap();
        let d = h.decision(i).await;
        let (input, output, cached) = (
            d["tokens"]["input"].as_u64().unwrap(),
            d["tokens"]["output"].as_u64().unwrap(),
            d["tokens"]["cached"].as_u64().unwrap(),
        );
        assert_eq!(cached, 120, "{d}");
        assert!(
            input > 160,
            "input counts fresh, read and written tokens: {d}"
        );
        let fresh = input - 120 - 40;
        let want = (fresh as f64 * 3.0 + 120.0 * 0.3 + 40.0 * 3.75 + output as f64 * 15.0) / 1e6;
        let got = d["cost_usd"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 1e-12,
            "stream={stream}: {got} vs {want}: {d}"
        );
    }
}

#[tokio::test]
async fn invoke_passes_an_anthropic_client_through_and_translates_the_others() {
    let h = common::start(BEDROCK).await;
    let msg = json!({"model": "invoke", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]});
    let r = h.messages(msg.clone()).await;
    let status = r.status();
    let body: Value = r.json().await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["content"][0]["text"], INVOKE_TEXT, "{body}");
    assert!(
        body["id"].as_str().unwrap().starts_with("msg_bdrk_"),
        "{body}"
    );
    let sent = &h.mock.requests()[0];
    assert_eq!(
        sent.path_and_query,
        "/model/anthropic.claude-haiku-4-5-20251001-v1%3A0/invoke"
    );
    let upstream = sent.json.as_ref().unwrap();
    assert_eq!(upstream["anthropic_version"], "bedrock-2023-05-31");
    assert!(
        upstream.get("model").is_none() && upstream.get("stream").is_none(),
        "{upstream}"
    );

    let mut stream = msg.clone();
    stream["stream"] = json!(true);
    let text = h.messages(stream).await.text().await.unwrap();
    assert_eq!(anthropic_stream_text(&text), INVOKE_TEXT, "{text}");
    assert!(text.contains("event: message_stop"), "{text}");
    assert!(!text.contains("amazon-bedrock-invocationMetrics"), "{text}");
    assert!(h.mock.requests()[1]
        .path_and_query
        .ends_with("/invoke-with-response-stream"));

    let r = h
        .post(json!({"model": "invoke", "stream": true, "messages": common::user("hi")}))
        .await;
    let text = r.text().await.unwrap();
    assert_eq!(common::sse_text(&text), INVOKE_TEXT);
    assert!(text.ends_with("data: [DONE]\n\n"));
    assert_eq!(h.mock.sigv4_verified(), 3);
}

#[tokio::test]
async fn counting_tokens_asks_bedrock() {
    let h = common::start(BEDROCK).await;
    for route in ["chat", "invoke"] {
        let body = json!({"model": route, "messages": [{"role": "user", "content": "count these words please"}]});
        let r = reqwest::Client::new()
            .post(h.url("/v1/messages/count_tokens"))
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{route}");
        let v: Value = r.json().await.unwrap();
        assert!(v["input_tokens"].as_u64().unwrap() > 0, "{route}: {v}");
        let sent = h.mock.requests().last().unwrap().clone();
        assert!(sent.path_and_query.ends_with("/count-tokens"), "{route}");
        let input = &sent.json.as_ref().unwrap()["input"];
        assert!(
            input.get("converse").is_some() || input.get("invokeModel").is_some(),
            "{input}"
        );
    }
}

/// A signature the mock cannot verify is the gateway's credentials'
/// fault: `auth_failed`, and the secret appears nowhere.
#[tokio::test]
async fn a_wrong_secret_is_refused_and_never_shown() {
    let h = common::start(&BEDROCK.replace("MOCK_AWS", "WRONG_AWS")).await;
    let r = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    let text = r.text().await.unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["error"]["code"], "auth_failed", "{v}");
    assert!(!text.contains("not-the-secret"), "{text}");
    assert!(h.mock.sigv4_rejected() >= 1);
    assert_eq!(h.mock.sigv4_verified(), 0);
}

#[tokio::test]
async fn throttling_is_retried_and_each_error_class_keeps_its_code() {
    let h = common::start(BEDROCK).await;
    h.mock
        .script(vec![Behavior::status(429, ""), Behavior::default()]);
    let r = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200, "retried after the throttle");
    assert_eq!(h.mock.request_count(), 2);
    for (status, code) in [
        (400, "invalid_request"),
        (403, "forbidden"),
        (404, "model_not_found"),
        (503, "overloaded"),
    ] {
        h.mock.set_default(Behavior::status(status, ""));
        let r = h
            .post(json!({"model": "chat", "messages": common::user("hi")}))
            .await;
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], code, "{status}: {v}");
    }
    h.mock.set_default(Behavior::fixture(
        "bedrock/error_400_validation_input_too_long",
    ));
    let v: Value = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["error"]["code"], "context_too_long", "{v}");
}

/// An exception frame after the stream started ends the client's stream
/// with an error event; a stream cut mid-frame is interrupted.
#[tokio::test]
async fn a_broken_stream_ends_with_an_error_not_a_clean_finish() {
    let h = common::start(BEDROCK).await;
    for fault in [Fault::MidstreamError, Fault::Cut] {
        let mut b = Behavior::fault(fault);
        b.after_events = 3;
        h.mock.set_default(b);
        let r = h
            .post(json!({"model": "chat", "stream": true, "messages": common::user("hi")}))
            .await;
        let text = r.text().await.unwrap();
        assert!(!text.ends_with("data: [DONE]\n\n"), "{fault:?}: {text}");
        assert!(text.contains("\"error\""), "{fault:?}: {text}");
    }
}
