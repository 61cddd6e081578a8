//! Answer content: tool calls and results, prefill continuation, reasoning, chunks.

mod common;

use common::*;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockServer};

#[tokio::test]
async fn tool_call_then_result_openai() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let mut req = fixture_json("openai/chat_tool_call.request.json");
    let r = call(m.addr(), "/v1/chat/completions", &[], &req).await;
    let v = r.json();
    let fix = fixture_json("openai/chat_tool_call.response.json");
    assert_eq!(
        key_paths(&v["choices"]),
        key_paths(&{
            let mut c = fix["choices"].clone();
            c[0]["message"]["annotations"] = json!([]);
            c
        })
    );
    let call0 = &v["choices"][0]["message"]["tool_calls"][0];
    assert!(call0["id"].as_str().unwrap().starts_with("call_mock_"));
    assert_eq!(call0["function"]["name"], "get_weather");
    assert_eq!(
        call0["function"]["arguments"],
        r#"{"city":"mock","state":"mock"}"#
    );
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");

    // streamed: shaped like stream_tool_call.sse
    req["stream"] = json!(true);
    req["stream_options"] = json!({"include_usage": true});
    let r = call(m.addr(), "/v1/chat/completions", &[], &req).await;
    let ours = sse_json(&r.text());
    let fix = sse_json(&fixture("openai/stream_tool_call.sse"));
    let choices = |evs: &[Value]| evs.iter().map(|e| e["choices"].clone()).collect::<Vec<_>>();
    assert_eq!(shapes(&choices(&ours)), shapes(&choices(&fix)));
    let args: String = ours
        .iter()
        .filter_map(|e| {
            e.pointer("/choices/0/delta/tool_calls/0/function/arguments")?
                .as_str()
        })
        .collect();
    assert_eq!(args, r#"{"city":"mock","state":"mock"}"#);

    // tool result → text
    let req = fixture_json("openai/chat_tool_result.request.json");
    let v = call(m.addr(), "/v1/chat/completions", &[], &req)
        .await
        .json();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        r#"Tool result received: {"temperature_c":18,"condition":"fog"}"#
    );
    // named tool_choice and "none"
    let mut req = fixture_json("openai/chat_tool_call.request.json");
    req["tools"].as_array_mut().unwrap().push(json!({"type": "function", "function": {"name": "count", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}, "b": {"type": "boolean"}}}}}));
    req["tool_choice"] = json!({"type": "function", "function": {"name": "count"}});
    let v = call(m.addr(), "/v1/chat/completions", &[], &req)
        .await
        .json();
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        r#"{"n":1,"b":true}"#
    );
    req["tool_choice"] = json!("none");
    let v = call(m.addr(), "/v1/chat/completions", &[], &req)
        .await
        .json();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Hello from the mock openai provider."
    );
}

#[tokio::test]
async fn tool_call_then_result_anthropic() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let mut req = fixture_json("anthropic/messages_tool_use.request.json");
    let v = call(m.addr(), "/v1/messages", &[], &req).await.json();
    assert_eq!(
        key_paths(&v),
        key_paths(&fixture_json("anthropic/messages_tool_use.response.json"))
    );
    assert_eq!(v["stop_reason"], "tool_use");
    assert!(v["content"][0]["id"]
        .as_str()
        .unwrap()
        .starts_with("toolu_mock_"));
    assert_eq!(
        v["content"][0]["input"],
        json!({"location": "mock", "units": "c"})
    );

    req["stream"] = json!(true);
    let body = call(m.addr(), "/v1/messages", &[], &req).await.text();
    let ours = sse_json(&body);
    assert_eq!(
        shapes(&ours),
        shapes(&sse_json(&fixture("anthropic/stream_tool_use.sse")))
    );
    let partial: String = ours
        .iter()
        .filter_map(|e| e.pointer("/delta/partial_json")?.as_str())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        json!({"location": "mock", "units": "c"})
    );

    let req = fixture_json("anthropic/messages_tool_result.request.json");
    let v = call(m.addr(), "/v1/messages", &[], &req).await.json();
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(
        v["content"][0]["text"],
        "Tool result received: {\"location\": \"SF\", \"temperature\": \"20\\u00b0C\", \"condition\": \"Sunny\"}"
    );
}

#[tokio::test]
async fn tool_call_then_result_gemini() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let req = fixture_json("gemini/generate_function_call.request.json");
    let v = call(m.addr(), GEM, &[], &req).await.json();
    let part = &v["candidates"][0]["content"]["parts"][0];
    assert_eq!(
        part["functionCall"],
        json!({"name": "get_weather", "args": {"location": "mock", "unit": "c"}})
    );
    assert_eq!(v["candidates"][0]["finishReason"], "STOP");
    let body = call(m.addr(), GEM_STREAM, &[], &req).await.text();
    let ours = sse_json(&body);
    assert_eq!(ours.len(), 1);
    assert_eq!(
        ours[0]["candidates"][0]["content"]["parts"][0]["functionCall"]["name"],
        "get_weather"
    );

    let req = fixture_json("gemini/generate_function_response.request.json");
    let v = call(m.addr(), GEM, &[], &req).await.json();
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0]["text"],
        r#"Tool result received: {"location":"San Francisco","temperature_c":18,"condition":"fog"}"#
    );
}

#[tokio::test]
async fn prefill_continuation_all_protocols() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let mut req = openai_req(true);
    req["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "assistant", "content": "Hello from the"}));
    let ours = sse_json(
        &call(m.addr(), "/v1/chat/completions", &[], &req)
            .await
            .text(),
    );
    let text: String = ours
        .iter()
        .filter_map(|e| e.pointer("/choices/0/delta/content")?.as_str())
        .collect();
    assert_eq!(text, " mock openai provider.");
    assert_eq!(ours.last().unwrap()["usage"]["completion_tokens"], 3);

    let mut req = anthropic_req(false);
    req["messages"].as_array_mut().unwrap().push(
        json!({"role": "assistant", "content": [{"type": "text", "text": "Hello from the mo"}]}),
    );
    let v = call(m.addr(), "/v1/messages", &[], &req).await.json();
    assert_eq!(v["content"][0]["text"], "ck anthropic provider.");

    let mut req = gemini_req();
    req["contents"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "model", "parts": [{"text": "Hello from"}]}));
    let ours = sse_json(&call(m.addr(), GEM_STREAM, &[], &req).await.text());
    let text: String = ours
        .iter()
        .filter_map(|e| e.pointer("/candidates/0/content/parts/0/text")?.as_str())
        .collect();
    assert_eq!(text, " the mock gemini provider.");

    // not a prefix: full answer
    let mut req = openai_req(false);
    req["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "assistant", "content": "Something else"}));
    let v = call(m.addr(), "/v1/chat/completions", &[], &req)
        .await
        .json();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Hello from the mock openai provider."
    );
}

#[tokio::test]
async fn reasoning_all_protocols() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let b = r#"{"reasoning":"Let me think.","text":"Yes."}"#;
    let h = [("x-mock-behavior", b)];
    let v = call(m.addr(), "/v1/chat/completions", &h, &openai_req(false))
        .await
        .json();
    assert_eq!(
        v["choices"][0]["message"]["reasoning_content"],
        "Let me think."
    );
    assert_eq!(
        v["usage"]["completion_tokens_details"]["reasoning_tokens"],
        3
    );
    let ours = sse_json(
        &call(m.addr(), "/v1/chat/completions", &h, &openai_req(true))
            .await
            .text(),
    );
    let fix = sse_json(&fixture("deepseek/stream_reasoning.sse"));
    let deltas = |evs: &[Value]| {
        evs.iter()
            .filter(|e| !e["choices"].as_array().unwrap().is_empty())
            .map(|e| e["choices"][0]["delta"].clone())
            .collect::<Vec<_>>()
    };
    let fix_shapes = shapes(&deltas(&fix));
    for s in shapes(&deltas(&ours)) {
        assert!(fix_shapes.contains(&s) || s.is_empty(), "{s:?}");
    }
    let reasoning: String = ours
        .iter()
        .filter_map(|e| e.pointer("/choices/0/delta/reasoning_content")?.as_str())
        .collect();
    assert_eq!(reasoning, "Let me think.");

    let v = call(m.addr(), "/v1/messages", &h, &anthropic_req(false))
        .await
        .json();
    assert_eq!(v["content"][0]["type"], "thinking");
    assert_eq!(v["content"][0]["thinking"], "Let me think.");
    assert_eq!(v["content"][1]["text"], "Yes.");
    let ours = sse_json(
        &call(m.addr(), "/v1/messages", &h, &anthropic_req(true))
            .await
            .text(),
    );
    assert_eq!(ours[1]["content_block"]["type"], "thinking");
    assert!(ours
        .iter()
        .any(|e| e.pointer("/delta/type") == Some(&json!("signature_delta"))));
    assert!(ours
        .iter()
        .any(|e| e["index"] == 1 && e["type"] == "content_block_start"));

    let v = call(m.addr(), GEM, &h, &gemini_req()).await.json();
    assert_eq!(
        v["candidates"][0]["content"]["parts"][0],
        json!({"text": "Let me think.", "thought": true})
    );
    assert_eq!(
        v["candidates"][0]["content"]["parts"][1],
        json!({"text": "Yes."})
    );
    assert_eq!(v["usageMetadata"]["thoughtsTokenCount"], 3);
}

#[tokio::test]
async fn chunks_behavior() {
    let m = MockServer::start("127.0.0.1:0").await.unwrap();
    let h = [("x-mock-behavior", r#"{"chunks":3}"#)];
    let ours = sse_json(
        &call(m.addr(), "/v1/chat/completions", &h, &openai_req(true))
            .await
            .text(),
    );
    let pieces: Vec<&str> = ours
        .iter()
        .skip(1)
        .filter_map(|e| e.pointer("/choices/0/delta/content")?.as_str())
        .collect();
    assert_eq!(pieces, ["Hello from", " the mock", " openai provider."]);
    let h = [("x-mock-behavior", r#"{"chunks":10,"text":"short"}"#)];
    let v = call(m.addr(), "/v1/messages", &h, &anthropic_req(false))
        .await
        .json();
    assert_eq!(
        v["content"][0]["text"],
        "word1 word2 word3 word4 word5 word6 word7 word8 word9 word10"
    );
    assert_eq!(v["usage"]["output_tokens"], 10);
    m.set_default(Behavior::default().chunks(2));
    let ours = sse_json(&call(m.addr(), GEM_STREAM, &[], &gemini_req()).await.text());
    assert_eq!(ours.len(), 2);
}
