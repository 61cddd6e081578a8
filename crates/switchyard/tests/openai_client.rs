//! The official-style OpenAI client (`async-openai`, written by others) against
//! the gateway: round trips, streaming, tools, usage.

mod common;

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::CreateChatCompletionRequest;
use async_openai::Client;
use futures_util::StreamExt;
use serde_json::json;

fn client(h: &common::Harness) -> Client<OpenAIConfig> {
    Client::with_config(
        OpenAIConfig::new()
            .with_api_base(h.url("/v1"))
            .with_api_key("unused"),
    )
}

fn request(v: serde_json::Value) -> CreateChatCompletionRequest {
    serde_json::from_value(v).unwrap()
}

#[tokio::test]
async fn non_stream_round_trip_with_usage_and_upstream_model() {
    let h = common::start(common::ONE_OPENAI).await;
    let resp = client(&h)
        .chat()
        .create(request(
            json!({"model": "chat", "messages": common::user("Hello")}),
        ))
        .await
        .unwrap();
    assert_eq!(
        resp.choices[0].message.content.as_deref(),
        Some("Hello from the mock openai provider.")
    );
    // The upstream's own model, never the route alias.
    assert_eq!(resp.model, "gpt-4o-mini");
    let usage = resp.usage.unwrap();
    assert!(usage.prompt_tokens >= 1);
    assert_eq!(usage.completion_tokens, 6);
    // The upstream got the deployment's model and the provider key.
    let sent = &h.mock.requests()[0];
    assert_eq!(sent.json.as_ref().unwrap()["model"], "gpt-4o-mini");
    assert_eq!(
        sent.header("authorization"),
        Some("Bearer sk-test-secret-value-1234")
    );
}

#[tokio::test]
async fn stream_round_trip_text_and_usage() {
    let h = common::start(common::ONE_OPENAI).await;
    // The typed client drops unknown body fields, so script the mock directly.
    h.mock
        .set_default(switchyard_mock::Behavior::default().chunks(12));
    let mut stream = client(&h)
        .chat()
        .create_stream(request(json!({
            "model": "chat",
            "messages": common::user("Hello"),
            "stream": true,
            "stream_options": {"include_usage": true}
        })))
        .await
        .unwrap();
    let mut text = String::new();
    let mut usage = None;
    let mut chunks = 0;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        chunks += 1;
        assert_eq!(chunk.model, "gpt-4o-mini");
        if let Some(c) = chunk.choices.first() {
            text.push_str(c.delta.content.as_deref().unwrap_or(""));
        }
        if chunk.usage.is_some() {
            usage = chunk.usage;
        }
    }
    assert_eq!(text.split_whitespace().count(), 12);
    assert!(
        chunks >= 14,
        "role chunk + 12 text chunks + finish: got {chunks}"
    );
    assert_eq!(
        usage
            .expect("usage chunk forwarded when asked")
            .completion_tokens,
        12
    );
    let d = h.decision(0).await;
    assert_eq!(d["stream"], true);
    assert_eq!(d["tokens"]["output"], 12);
}

#[tokio::test]
async fn tool_call_loop_passes_tools_and_results_through() {
    let h = common::start(common::ONE_OPENAI).await;
    let tools = json!([{
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
        }
    }]);
    let first = client(&h)
        .chat()
        .create(request(
            json!({"model": "chat", "messages": common::user("Weather in Paris?"), "tools": tools}),
        ))
        .await
        .unwrap();
    let msg = &first.choices[0].message;
    let calls = msg.tool_calls.as_ref().expect("tool call");
    let call = match &calls[0] {
        async_openai::types::chat::ChatCompletionMessageToolCalls::Function(f) => f,
        other => panic!("unexpected {other:?}"),
    };
    assert_eq!(call.function.name, "get_weather");
    let args: serde_json::Value = serde_json::from_str(&call.function.arguments).unwrap();
    assert_eq!(args["city"], "mock");
    // Tools reached the upstream exactly as sent.
    assert_eq!(h.mock.requests()[0].json.as_ref().unwrap()["tools"], tools);

    let second = client(&h)
        .chat()
        .create(request(json!({
            "model": "chat",
            "tools": tools,
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.function.arguments}}]},
                {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"}
            ]
        })))
        .await
        .unwrap();
    assert_eq!(
        second.choices[0].message.content.as_deref(),
        Some("Tool result received: 18C and sunny")
    );
}

#[tokio::test]
async fn streamed_tool_call_arrives_in_fragments_with_one_id() {
    let h = common::start(common::ONE_OPENAI).await;
    let tools = json!([{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "n": {"type": "integer"}}}}}]);
    let mut stream = client(&h)
        .chat()
        .create_stream(request(json!({"model": "chat", "messages": common::user("find"), "tools": tools, "stream": true})))
        .await
        .unwrap();
    let (mut ids, mut args, mut finish) = (Vec::new(), String::new(), None);
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.unwrap();
        for c in chunk.choices {
            for tc in c.delta.tool_calls.unwrap_or_default() {
                if let Some(id) = tc.id {
                    ids.push(id);
                }
                if let Some(f) = tc.function {
                    args.push_str(f.arguments.as_deref().unwrap_or(""));
                }
            }
            if c.finish_reason.is_some() {
                finish = c.finish_reason;
            }
        }
    }
    assert_eq!(ids.len(), 1);
    let parsed: serde_json::Value = serde_json::from_str(&args).unwrap();
    assert_eq!(parsed, json!({"q": "mock", "n": 1}));
    assert_eq!(format!("{finish:?}"), "Some(ToolCalls)");
}
