use serde_json::{json, Value};

use super::*;
use crate::ir::{ContentPart, ImageSource, Role, ToolChoice};

#[test]
fn text_request_matches_the_golden_body() {
    let mut req = ir::ChatRequest {
        messages: vec![
            msg(Role::System, "You are a concise geography assistant."),
            user("Where is Google's headquarters?"),
        ],
        temperature: Some(0.7),
        top_p: Some(0.95),
        top_k: Some(40),
        max_tokens: Some(256),
        stop: vec!["END".into()],
        ..Default::default()
    };
    req.provider_options.insert(
        "safetySettings".into(),
        json!([{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "threshold": "BLOCK_MEDIUM_AND_ABOVE"}]),
    );
    let mut golden = json_fixture("gemini/generate_text.request.json");
    // candidateCount is never sent: 1 is the default.
    golden["generationConfig"]
        .as_object_mut()
        .unwrap()
        .remove("candidateCount");
    assert_eq!(encode(&req), golden);
}

#[test]
fn openai_text_request_hoists_the_system_prompt() {
    let body = encode(&openai_ir("openai/chat_text.request.json"));
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "You are a helpful assistant."}]})
    );
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": "Hello"}]}])
    );
    assert!(body.get("generationConfig").is_none());
    assert!(body.get("model").is_none(), "the model goes in the URL");
}

#[test]
fn function_declarations_match_the_golden_body() {
    let req = ir::ChatRequest {
        messages: vec![user("What's the weather in San Francisco?")],
        tools: vec![ir::Tool {
            name: "get_weather".into(),
            description: Some("Get the current weather for a city".into()),
            parameters: json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "title": "Weather",
                "properties": {
                    "location": {"type": "string", "description": "City name, e.g. San Francisco"},
                    "unit": {"type": "string", "enum": ["c", "f"], "default": "c"}
                },
                "required": ["location"],
                "additionalProperties": false
            }),
            strict: Some(true),
        }],
        tool_choice: Some(ToolChoice::Auto),
        ..Default::default()
    };
    assert_eq!(
        encode(&req),
        json_fixture("gemini/generate_function_call.request.json")
    );
}

#[test]
fn openai_tool_call_request_is_sanitised() {
    let body = encode(&openai_ir("openai/chat_tool_call.request.json"));
    let decls = body["tools"][0]["functionDeclarations"].as_array().unwrap();
    assert_eq!(body["tools"].as_array().unwrap().len(), 1);
    assert_eq!(decls[0]["name"], "get_weather");
    assert_eq!(decls[0]["parameters"]["required"], json!(["city", "state"]));
    assert_no_keys(
        &body,
        &["additionalProperties", "$schema", "strict", "title"],
    );
    assert!(
        body.get("toolConfig").is_none(),
        "no tool_choice, no toolConfig"
    );
}

/// The golden follow-up body, rebuilt from the decoded call answer: the
/// synthesized id finds its name, the signature rides on the call.
#[test]
fn function_response_matches_the_golden_body() {
    let answer =
        decode_response(fixture("gemini/generate_function_call.response.json").as_bytes()).unwrap();
    let call = &answer.tool_calls[0];
    let req = ir::ChatRequest {
        messages: vec![
            user("What's the weather in San Francisco?"),
            ir::Message {
                role: Role::Assistant,
                content: vec![ContentPart::Reasoning {
                    text: String::new(),
                    signature: answer.reasoning_signature.clone(),
                }],
                tool_calls: answer.tool_calls.clone(),
                ..Default::default()
            },
            ir::Message {
                role: Role::Tool,
                tool_call_id: Some(call.id.clone()),
                ..msg(
                    Role::Tool,
                    r#"{"location": "San Francisco", "temperature_c": 18, "condition": "fog"}"#,
                )
            },
        ],
        tools: vec![ir::Tool {
            name: "weather".into(),
            description: Some("Get the weather in a location".into()),
            parameters: json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
            strict: None,
        }],
        ..Default::default()
    };
    assert_eq!(
        encode(&req),
        json_fixture("gemini/generate_function_response.request.json")
    );
}

#[test]
fn openai_tool_result_request_pairs_calls_and_responses() {
    let body = encode(&openai_ir("openai/chat_tool_result.request.json"));
    let contents = body["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user"]);
    let count = |c: &Value, key: &str| {
        c["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p.get(key).is_some())
            .count()
    };
    assert_eq!(count(&contents[1], "functionCall"), 1);
    assert_eq!(
        count(&contents[2], "functionResponse"),
        count(&contents[1], "functionCall")
    );
    assert_eq!(
        contents[1]["parts"][0]["functionCall"],
        json!({"name": "get_weather", "args": {"city": "San Francisco", "state": "CA"}})
    );
    assert_eq!(
        contents[2]["parts"][0]["functionResponse"],
        json!({"name": "get_weather", "response": {"temperature_c": 18, "condition": "fog"}})
    );
}

#[test]
fn vision_request_matches_the_golden_body() {
    let req = ir::ChatRequest {
        messages: vec![ir::Message {
            role: Role::User,
            content: vec![
                ContentPart::Text("What is in these images?".into()),
                ContentPart::Image {
                    source: ImageSource::Base64 {
                        media_type: "image/png".into(),
                        data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==".into(),
                    },
                    detail: Some("high".into()),
                },
                ContentPart::Image {
                    source: ImageSource::Url(
                        "https://generativelanguage.googleapis.com/v1beta/files/abc123".into(),
                    ),
                    detail: None,
                },
            ],
            ..Default::default()
        }],
        ..Default::default()
    };
    assert_eq!(
        encode(&req),
        json_fixture("gemini/generate_vision.request.json")
    );

    let body = encode(&openai_ir("openai/chat_vision.request.json"));
    let parts = &body["contents"][0]["parts"];
    assert_eq!(parts[1]["fileData"]["mimeType"], "image/png");
    assert!(parts[1]["fileData"]["fileUri"]
        .as_str()
        .unwrap()
        .starts_with("https://"));
    assert_eq!(parts[2]["inlineData"]["mimeType"], "image/png");
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 300);
}

#[test]
fn history_merges_turns_and_keeps_reasoning() {
    let call = |id: &str, name: &str| ir::ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: r#"{"q": 1}"#.into(),
    };
    let tool = |id: &str, text: &str, is_error| ir::Message {
        role: Role::Tool,
        tool_call_id: Some(id.into()),
        is_error,
        ..msg(Role::Tool, text)
    };
    let req = ir::ChatRequest {
        messages: vec![
            msg(Role::System, "sys1"),
            user("a"),
            user("b"),
            ir::Message {
                role: Role::Assistant,
                content: vec![
                    ContentPart::Reasoning {
                        text: "thinking".into(),
                        signature: Some("SIG".into()),
                    },
                    ContentPart::Text("let me look".into()),
                ],
                tool_calls: vec![call("x1", "f"), call("x2", "g")],
                ..Default::default()
            },
            // Answered out of order: put back in call order.
            tool("x2", "plain text", false),
            tool("x1", "boom", true),
            user("and?"),
            msg(Role::System, "sys2"),
            msg(Role::Assistant, "done"),
        ],
        ..Default::default()
    };
    let body = encode(&req);
    assert_eq!(
        body["systemInstruction"]["parts"],
        json!([{"text": "sys1"}, {"text": "sys2"}])
    );
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "a"}, {"text": "b"}]},
            {"role": "model", "parts": [
                {"text": "thinking", "thought": true},
                {"text": "let me look"},
                {"functionCall": {"name": "f", "args": {"q": 1}}, "thoughtSignature": "SIG"},
                {"functionCall": {"name": "g", "args": {"q": 1}}}
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "f", "response": {"error": "boom"}}},
                {"functionResponse": {"name": "g", "response": {"result": "plain text"}}},
                {"text": "and?"}
            ]},
            {"role": "model", "parts": [{"text": "done"}]}
        ])
    );
}

#[test]
fn missing_signatures_can_be_filled_in() {
    let mut req = openai_ir("openai/chat_tool_result.request.json");
    let target = Target {
        missing_signature: Some(SKIP_SIGNATURE_VALIDATOR),
        ..Default::default()
    };
    let body = encode_with(&req, &target);
    assert_eq!(
        body["contents"][1]["parts"][0]["thoughtSignature"],
        SKIP_SIGNATURE_VALIDATOR
    );
    // A tool result whose call is not in the history: the synthesized id
    // still names the function, but the pairing rule fails.
    req.messages.remove(1);
    req.messages[1].tool_call_id = Some("call_0_00000000_get_weather".into());
    let e = encode_request(&req, &Target::default()).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("messages[1]"));
}

#[test]
fn unconvertible_requests_are_errors() {
    let mut req = openai_ir("openai/chat_tool_result.request.json");
    req.messages[1].tool_calls[0].arguments = "[1, 2]".into();
    let e = encode_request(&req, &Target::default()).unwrap_err();
    assert_eq!(
        e.param.as_deref(),
        Some("messages[1].tool_calls[0].function.arguments")
    );

    let mut req = openai_ir("openai/chat_tool_result.request.json");
    req.messages[2].tool_call_id = Some("call_unknown".into());
    let e = encode_request(&req, &Target::default()).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("messages[2].tool_call_id"));

    // A call left unanswered before the next user message.
    let mut req = openai_ir("openai/chat_tool_result.request.json");
    req.messages[2] = user("never mind");
    let e = encode_request(&req, &Target::default()).unwrap_err();
    assert!(e.message.contains("1 call(s), 0 result(s)"), "{e}");
}
