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

    let r = h.responses(json!({"model": "chat", "input": "hi"})).await;
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["output"][0]["content"][0]["text"], TEXT, "{body}");
    let r = h
        .responses(json!({"model": "chat", "input": "hi", "stream": true}))
        .await;
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

// === hostile clients and failing upstreams ===

/// A budgeted client on priced Converse and InvokeModel deployments.
const PRICED: &str = r#"
providers:
  bedrock:
    protocol: bedrock
    region: us-east-1
    base_url: "{mock}"
    credentials: { env_prefix: MOCK_AWS }
models:
  - { id: bedrock/claude, provider: bedrock, model: "anthropic.claude-sonnet-4-5-20250929-v1:0", capabilities: [streaming], pricing: { input: 100, output: 300 } }
  - { id: bedrock/claude-invoke, provider: bedrock, model: "anthropic.claude-haiku-4-5-20251001-v1:0", api: invoke, capabilities: [streaming], pricing: { input: 100, output: 300 } }
routes:
  chat: { targets: [bedrock/claude] }
  invoke: { targets: [bedrock/claude-invoke] }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 100, per: day } }
"#;

/// A client that leaves a ConverseStream (and an InvokeModel stream) after
/// the answer's text: the gateway stops the upstream call (the mock sees
/// its body dropped), and the client is charged what it received — the
/// decision line, the usage row and the budget agree, `client_closed`,
/// estimated. The stalled upstream would never end the stream by itself.
#[tokio::test]
async fn a_stream_the_client_leaves_is_charged_and_the_bedrock_call_stopped() {
    // ConverseStream: messageStart + 6 text deltas; InvokeModel:
    // message_start, content_block_start + 6 text deltas. Then nothing.
    for (route, events) in [("chat", 7), ("invoke", 8)] {
        let h = common::start(PRICED).await;
        h.mock.set_default(Behavior {
            chunk_delay_ms: 40,
            ..Behavior::fault(Fault::Stall).after(events)
        });
        let seen = common::charges::read_then_close(&h, route, |t| t.contains("provider.")).await;
        assert!(!seen.contains("[DONE]"), "{route}: {seen}");
        let d = h.decision(0).await;
        assert_eq!(d["outcome"], "client_closed", "{route}: {d}");
        assert_eq!(d["usage_estimated"], true, "{route}: {d}");
        assert_eq!(d["status"], 499, "{route}: {d}");
        let (input, output) = (
            d["tokens"]["input"].as_u64().unwrap(),
            d["tokens"]["output"].as_u64().unwrap(),
        );
        assert!(input >= 8, "{route}: the prompt is charged: {d}");
        // "Hello from the mock bedrock|anthropic provider.": about 7 tokens.
        assert!(
            (6..=9).contains(&output),
            "{route}: the text relayed is charged: {d}"
        );
        let cost = d["cost_usd"].as_f64().unwrap();
        let want = (input as f64 * 100.0 + output as f64 * 300.0) / 1e6;
        assert!((cost - want).abs() < 1e-9, "{route}: {cost} vs {want}: {d}");
        common::charges::closed_and_charged(&h, route, cost, output).await;
        // The gateway goes on serving.
        h.mock.set_default(Behavior::default());
        let r = reqwest::Client::new()
            .post(h.url("/v1/chat/completions"))
            .bearer_auth("client-secret")
            .json(&json!({"model": route, "messages": common::user("hi")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{route}");
    }
}

/// `n` > 1 through the OpenAI door: Bedrock answers one choice, so the
/// request is the client's 400 `invalid_request` naming `n`, whole or
/// streamed, Converse or InvokeModel — and nothing goes upstream.
#[tokio::test]
async fn several_choices_are_refused_naming_n_before_bedrock_is_called() {
    let h = common::start(BEDROCK).await;
    for route in ["chat", "invoke"] {
        for n in [2, 50] {
            for stream in [false, true] {
                let r = h
                    .post(json!({"model": route, "n": n, "stream": stream,
                                 "messages": common::user("hi")}))
                    .await;
                let status = r.status();
                let v: Value = r.json().await.unwrap();
                let what = format!("{route} n={n} stream={stream}: {v}");
                assert_eq!(status, 400, "{what}");
                assert_eq!(v["error"]["code"], "invalid_request", "{what}");
                assert_eq!(v["error"]["param"], "n", "{what}");
                let message = v["error"]["message"].as_str().unwrap();
                assert!(message.contains(&format!("n = {n}")), "{what}");
            }
        }
    }
    assert_eq!(h.mock.request_count(), 0, "nothing was sent");
    // n = 1 is one choice.
    let r = h
        .post(json!({"model": "chat", "n": 1, "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
}

/// Fields a client adds to choose another model, or to lift the output
/// cap it was metered for, never reach Converse that way: unknown
/// top-level fields (`modelId`, `inferenceConfig`,
/// `additionalModelRequestFields`, `extra_body`) are not sent; the
/// Converse keys that carry the model or the cap are refused in
/// `provider_options` like the gateway's own keys are (400 naming them,
/// nothing sent); a model-native field in `additionalModelRequestFields`
/// is added beside the gateway's own. The URL always names the route's
/// model.
#[tokio::test]
async fn smuggled_fields_never_choose_the_model_nor_lift_the_cap() {
    let h = common::start(BEDROCK).await;
    let other = "anthropic.claude-opus-4-1-20250805-v1:0";
    // Top-level fields the OpenAI door does not know, on every door.
    let smuggled = json!({
        "modelId": other,
        "inferenceConfig": {"maxTokens": 100000},
        "additionalModelRequestFields": {"model": other, "max_tokens": 100000},
        "extra_body": {"model": other, "modelId": other}
    });
    let mut chat = json!({"model": "chat", "max_tokens": 20, "messages": common::user("hi")});
    let mut messages =
        json!({"model": "chat", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]});
    let mut resp_body = json!({"model": "chat", "max_output_tokens": 20, "input": "hi"});
    for body in [&mut chat, &mut messages, &mut resp_body] {
        for (k, v) in smuggled.as_object().unwrap() {
            body[k] = v.clone();
        }
    }
    assert_eq!(h.post(chat).await.status(), 200);
    assert_eq!(h.messages(messages).await.status(), 200);
    assert_eq!(h.responses(resp_body).await.status(), 200);
    let sent = h.mock.requests();
    assert_eq!(sent.len(), 3);
    for r in &sent {
        assert_eq!(r.path_and_query, CONVERSE_PATH);
        let body = r.json.as_ref().unwrap();
        for key in ["modelId", "model", "extra_body"] {
            assert!(body.get(key).is_none(), "{key} sent: {body}");
        }
        assert_eq!(body["inferenceConfig"]["maxTokens"], 20, "{body}");
        assert!(
            body.get("additionalModelRequestFields")
                .is_none_or(|a| a.get("model").is_none() && a.get("max_tokens").is_none()),
            "{body}"
        );
    }

    // Through provider_options: refused, naming the key.
    for (options, param) in [
        (json!({"modelId": other}), "provider_options.modelId"),
        (
            json!({"inferenceConfig": {"maxTokens": 100000}}),
            "provider_options.inferenceConfig",
        ),
        (
            json!({"additionalModelRequestFields": {"model": other}}),
            "provider_options.additionalModelRequestFields.model",
        ),
        (
            json!({"additionalModelRequestFields": {"max_tokens": 100000}}),
            "provider_options.additionalModelRequestFields.max_tokens",
        ),
        (
            json!({"additionalModelRequestFields": {"inferenceConfig": {"maxTokens": 100000}}}),
            "provider_options.additionalModelRequestFields.inferenceConfig.maxTokens",
        ),
        (json!({"model": other}), "provider_options.model"),
    ] {
        for stream in [false, true] {
            let r = h
                .post(json!({"model": "chat", "max_tokens": 20, "stream": stream,
                             "messages": common::user("hi"), "provider_options": options}))
                .await;
            let status = r.status();
            let v: Value = r.json().await.unwrap();
            assert_eq!(status, 400, "{options}: {v}");
            assert_eq!(v["error"]["code"], "invalid_request", "{options}: {v}");
            assert_eq!(v["error"]["param"], param, "{options}: {v}");
        }
    }
    assert_eq!(h.mock.request_count(), 3, "nothing more was sent");

    // A model-native field is added beside the gateway's own (top_k from
    // an Anthropic client), which it does not replace.
    let r = h
        .messages(json!({"model": "chat", "max_tokens": 20, "top_k": 3,
                         "messages": [{"role": "user", "content": "hi"}],
                         "provider_options": {"additionalModelRequestFields": {"top_k": 40, "custom_native": {"a": 1}}}}))
        .await;
    assert_eq!(r.status(), 200);
    let sent = h.mock.requests().last().unwrap().clone();
    assert_eq!(sent.path_and_query, CONVERSE_PATH);
    let body = sent.json.unwrap();
    assert_eq!(
        body["additionalModelRequestFields"],
        json!({"top_k": 3, "custom_native": {"a": 1}}),
        "{body}"
    );
    assert_eq!(body["inferenceConfig"]["maxTokens"], 20, "{body}");
}

/// Throttling on one deployment: retried there (`attempts: 2`), then the
/// next target answers; with no other target the client gets 429
/// `rate_limited`.
#[tokio::test]
async fn a_throttled_bedrock_deployment_is_retried_then_falls_back() {
    let yaml = r#"
providers:
  throttled:
    protocol: bedrock
    region: us-east-1
    base_url: "{mock}"
    credentials: { env_prefix: MOCK_AWS }
    options: { mock: { fixture: "bedrock/error_429_throttling" } }
  healthy:
    protocol: bedrock
    region: us-east-1
    base_url: "{mock}"
    credentials: { env_prefix: MOCK_AWS }
models:
  - { id: throttled/claude, provider: throttled, model: "anthropic.claude-sonnet-4-5-20250929-v1:0", capabilities: [streaming] }
  - { id: healthy/nova, provider: healthy, model: "us.amazon.nova-micro-v1:0", capabilities: [streaming] }
routes:
  chat: { targets: [throttled/claude, healthy/nova], retry: { attempts: 2, base: 10ms, max: 20ms } }
  alone: { targets: [throttled/claude], retry: { attempts: 2, base: 10ms, max: 20ms } }
"#;
    let claude = CONVERSE_PATH;
    let nova = "/model/us.amazon.nova-micro-v1%3A0/converse";
    for stream in [false, true] {
        let h = common::start(yaml).await;
        let r = h
            .post(json!({"model": "chat", "stream": stream, "messages": common::user("hi")}))
            .await;
        assert_eq!(r.status(), 200, "stream={stream}");
        let text = r.text().await.unwrap();
        let answer = if stream {
            common::sse_text(&text)
        } else {
            serde_json::from_str::<Value>(&text).unwrap()["choices"][0]["message"]["content"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(answer, TEXT, "stream={stream}: {text}");
        let paths: Vec<String> = h
            .mock
            .requests()
            .iter()
            .map(|r| r.path_and_query.replace("/converse-stream", "/converse"))
            .collect();
        assert_eq!(paths, [claude, claude, nova], "stream={stream}");
        let d = h.decision(0).await;
        let attempts: Vec<(&str, &str)> = d["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| {
                (
                    a["deployment"].as_str().unwrap_or_default(),
                    a["outcome"].as_str().unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(
            attempts,
            [
                ("throttled/claude", "rate_limited"),
                ("throttled/claude", "rate_limited"),
                ("healthy/nova", "ok")
            ],
            "{d}"
        );

        let h = common::start(yaml).await;
        let r = h
            .post(json!({"model": "alone", "stream": stream, "messages": common::user("hi")}))
            .await;
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (status.as_u16(), v["error"]["code"].as_str()),
            (429, Some("rate_limited")),
            "stream={stream}: {v}"
        );
        assert_eq!(h.mock.request_count(), 2, "retried once, stream={stream}");
    }
}

/// Each exception frame after the stream started ends the client's
/// stream with the contract's error event carrying that exception's code
/// (OpenAI `data: {"error":…}`, no `[DONE]`; Anthropic `event: error`) —
/// "Input is too long" inside a stream is `context_too_long` too.
#[tokio::test]
async fn each_stream_exception_ends_the_stream_with_its_error_code() {
    let h = common::start(BEDROCK).await;
    for (exception, code) in [
        ("throttlingException", "rate_limited"),
        ("serviceUnavailableException", "overloaded"),
        ("validationException", "context_too_long"),
        ("modelStreamErrorException", "upstream_error"),
        ("internalServerException", "upstream_error"),
        ("modelTimeoutException", "timeout"),
    ] {
        let b = || Behavior {
            bedrock_exception: Some(exception.into()),
            ..Behavior::fault(Fault::MidstreamError).after(3)
        };
        h.mock.set_default(b());
        let text = h
            .post(json!({"model": "chat", "stream": true, "messages": common::user("hi")}))
            .await
            .text()
            .await
            .unwrap();
        let data = common::sse_data(&text);
        assert!(
            !common::sse_text(&text).is_empty(),
            "{exception}: text first: {text}"
        );
        assert!(!text.contains("[DONE]"), "{exception}: {text}");
        let last: Value = serde_json::from_str(data.last().unwrap()).unwrap();
        assert_eq!(last["error"]["code"], code, "{exception}: {text}");

        let text = h
            .messages(json!({"model": "chat", "stream": true, "max_tokens": 50,
                             "messages": [{"role": "user", "content": "hi"}]}))
            .await
            .text()
            .await
            .unwrap();
        assert!(text.contains("event: error"), "{exception}: {text}");
        assert!(!text.contains("event: message_stop"), "{exception}: {text}");
    }
}

/// Converse answers name no model: the gateway's answer names the model
/// that served (never an empty string, never the route), whole and in
/// every chunk, on the OpenAI and Anthropic doors.
#[tokio::test]
async fn the_answer_names_the_bedrock_model_that_served() {
    let h = common::start(BEDROCK).await;
    let model = "anthropic.claude-sonnet-4-5-20250929-v1:0";
    let v: Value = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["model"], model, "{v}");
    let text = h
        .post(json!({"model": "chat", "stream": true, "messages": common::user("hi")}))
        .await
        .text()
        .await
        .unwrap();
    let chunks: Vec<Value> = common::sse_data(&text)
        .iter()
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    assert!(!chunks.is_empty(), "{text}");
    for c in &chunks {
        assert_eq!(c["model"], model, "{c}");
    }
    let v: Value = h
        .messages(json!({"model": "chat", "max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(v["model"], model, "{v}");
    let d = h.decision(0).await;
    assert_eq!(d["attempts"][0]["deployment"], "bedrock/claude", "{d}");
}
