//! Every (client dialect × upstream protocol) pair over real HTTP: a client
//! speaking OpenAI or Anthropic reaches OpenAI, Anthropic and Gemini mock
//! deployments and cannot tell which it got — text, tool-use loops, usage,
//! streams split at random byte boundaries, and errors in its own envelope.

mod common;

use async_openai::config::OpenAIConfig;
use async_openai::types::chat::{ChatCompletionMessageToolCalls, CreateChatCompletionRequest};
use futures_util::StreamExt;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use switchyard_mock::Behavior;

const THREE: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
  an: { protocol: anthropic, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  gm: { protocol: gemini, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  az: { protocol: azure, base_url: "{mock}", api_version: 2024-10-21, keys: [{ env: TEST_KEY }] }
models:
  - { id: oa/gpt, provider: oa, model: gpt-4o-mini, max_output_tokens: 1000 }
  - { id: az/gpt, provider: az, model: my-gpt4o, max_output_tokens: 1000 }
  - { id: an/claude, provider: an, model: claude-sonnet-4-5, max_output_tokens: 2048 }
  - { id: gm/gemini, provider: gm, model: gemini-2.5-flash, max_output_tokens: 4096 }
routes:
  chat: { targets: [an/claude] }
  an-once: { targets: [an/claude], retry: { attempts: 1 } }
  gm-once: { targets: [gm/gemini], retry: { attempts: 1 } }
"#;

/// Every upstream protocol: (deployment, the mock's word for it, upstream model).
const LANES: [(&str, &str, &str); 4] = [
    ("oa/gpt", "openai", "gpt-4o-mini"),
    ("an/claude", "anthropic", "claude-sonnet-4-5"),
    ("gm/gemini", "gemini", "gemini-2.5-flash"),
    ("az/gpt", "openai", "my-gpt4o"),
];

fn answer(provider: &str) -> String {
    format!("Hello from the mock {provider} provider.")
}

fn openai_client(h: &common::Harness) -> async_openai::Client<OpenAIConfig> {
    async_openai::Client::with_config(
        OpenAIConfig::new()
            .with_api_base(h.url("/v1"))
            .with_api_key("x"),
    )
}

fn req(v: Value) -> CreateChatCompletionRequest {
    serde_json::from_value(v).unwrap()
}

fn weather_tool_openai() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
}

// === OpenAI client ===

#[tokio::test]
async fn openai_client_gets_the_same_answer_from_every_upstream() {
    let h = common::start(THREE).await;
    for (dep, provider, model) in LANES {
        let r = openai_client(&h)
            .chat()
            .create(req(json!({"model": dep, "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]})))
            .await
            .unwrap_or_else(|e| panic!("{dep}: {e}"));
        assert_eq!(
            r.choices[0].message.content.as_deref(),
            Some(answer(provider).as_str()),
            "{dep}"
        );
        assert_eq!(r.model, model, "{dep}");
        assert_eq!(r.usage.unwrap().completion_tokens, 6, "{dep}");
        assert!(r.created > 0, "{dep}");
    }
    // What the upstreams got: the system prompt hoisted, max_tokens filled in.
    let reqs = h.mock.requests();
    let an = reqs
        .iter()
        .find(|r| r.path_and_query == "/v1/messages")
        .unwrap();
    let body = an.json.as_ref().unwrap();
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["max_tokens"], 2048);
    assert!(body["system"].to_string().contains("Be brief."));
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(an.header("x-api-key"), Some("sk-test-secret-value-1234"));
    assert_eq!(an.header("anthropic-version"), Some("2023-06-01"));
    let gm = reqs
        .iter()
        .find(|r| r.path_and_query.contains(":generateContent"))
        .unwrap();
    assert_eq!(
        gm.path_and_query,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
    let body = gm.json.as_ref().unwrap();
    assert!(body["systemInstruction"].to_string().contains("Be brief."));
    assert_eq!(body["generationConfig"]["maxOutputTokens"], 4096);
    assert_eq!(
        gm.header("x-goog-api-key"),
        Some("sk-test-secret-value-1234")
    );
}

#[tokio::test]
async fn openai_client_streams_from_every_upstream() {
    let h = common::start(THREE).await;
    for (dep, provider, model) in LANES {
        let mut s = openai_client(&h)
            .chat()
            .create_stream(req(json!({"model": dep, "messages": common::user("Hi"), "stream": true, "stream_options": {"include_usage": true}})))
            .await
            .unwrap();
        let (mut text, mut usage, mut finish) = (String::new(), None, None);
        while let Some(chunk) = s.next().await {
            let chunk = chunk.unwrap_or_else(|e| panic!("{dep}: {e}"));
            assert_eq!(chunk.model, model);
            for c in chunk.choices {
                text.push_str(c.delta.content.as_deref().unwrap_or(""));
                finish = finish.or(c.finish_reason);
            }
            usage = usage.or(chunk.usage);
        }
        assert_eq!(text, answer(provider), "{dep}");
        assert_eq!(usage.expect("usage").completion_tokens, 6, "{dep}");
        assert_eq!(format!("{finish:?}"), "Some(Stop)", "{dep}");
    }
}

#[tokio::test]
async fn openai_client_tool_loop_across_every_upstream() {
    let h = common::start(THREE).await;
    for (dep, _, _) in LANES {
        let first = openai_client(&h)
            .chat()
            .create(req(json!({"model": dep, "messages": common::user("Weather in Paris?"), "tools": weather_tool_openai()})))
            .await
            .unwrap_or_else(|e| panic!("{dep}: {e}"));
        let ChatCompletionMessageToolCalls::Function(call) =
            &first.choices[0].message.tool_calls.as_ref().expect(dep)[0]
        else {
            panic!("{dep}: not a function call")
        };
        assert_eq!(call.function.name, "get_weather", "{dep}");
        assert_eq!(
            serde_json::from_str::<Value>(&call.function.arguments).unwrap(),
            json!({"city": "mock"}),
            "{dep}"
        );
        assert_eq!(
            format!("{:?}", first.choices[0].finish_reason),
            "Some(ToolCalls)",
            "{dep}"
        );
        let second = openai_client(&h)
            .chat()
            .create(req(json!({
                "model": dep,
                "tools": weather_tool_openai(),
                "messages": [
                    {"role": "user", "content": "Weather in Paris?"},
                    {"role": "assistant", "content": null, "tool_calls": [{"id": call.id, "type": "function", "function": {"name": "get_weather", "arguments": call.function.arguments}}]},
                    {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"}
                ]
            })))
            .await
            .unwrap_or_else(|e| panic!("{dep}: {e}"));
        assert_eq!(
            second.choices[0].message.content.as_deref(),
            Some("Tool result received: 18C and sunny"),
            "{dep}"
        );
    }
    // The tool result reached Anthropic as a tool_result block in a user turn,
    // and Gemini as a functionResponse.
    let reqs = h.mock.requests();
    let an = reqs
        .iter()
        .filter(|r| r.path_and_query == "/v1/messages")
        .nth(1)
        .unwrap()
        .json
        .clone()
        .unwrap();
    let last = an["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    let gm = reqs
        .iter()
        .filter(|r| r.path_and_query.contains("gemini"))
        .nth(1)
        .unwrap()
        .json
        .clone()
        .unwrap();
    assert!(
        gm["contents"].to_string().contains("functionResponse"),
        "{gm}"
    );
}

#[tokio::test]
async fn streamed_tool_calls_translate_with_ids_and_whole_arguments() {
    let h = common::start(THREE).await;
    for (dep, _, _) in [LANES[1], LANES[2]] {
        let body = json!({"model": dep, "messages": common::user("Weather?"), "tools": weather_tool_openai(), "stream": true});
        let text = h.post(body).await.text().await.unwrap();
        let (mut ids, mut args) = (Vec::new(), String::new());
        for d in common::sse_data(&text).iter().filter(|d| *d != "[DONE]") {
            let v: Value = serde_json::from_str(d).unwrap();
            for tc in v["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(id) = tc["id"].as_str() {
                    ids.push(id.to_owned());
                }
                args.push_str(tc["function"]["arguments"].as_str().unwrap_or(""));
            }
        }
        assert_eq!(ids.len(), 1, "{dep}: {text}");
        assert_eq!(
            serde_json::from_str::<Value>(&args).unwrap(),
            json!({"city": "mock"}),
            "{dep}"
        );
        assert!(text.contains("\"finish_reason\":\"tool_calls\""), "{dep}");
    }
}

// === Anthropic client ===

/// Anthropic SSE body → (event names, concatenated text, stop_reason, output_tokens).
fn anthropic_stream(body: &str) -> (Vec<String>, String, String, u64) {
    let (mut names, mut text, mut stop, mut out) = (Vec::new(), String::new(), String::new(), 0);
    for ev in body.split("\n\n").filter(|e| !e.trim().is_empty()) {
        let name = ev
            .lines()
            .find_map(|l| l.strip_prefix("event: "))
            .unwrap_or_default()
            .to_owned();
        let data: Value = ev
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .unwrap_or_default();
        if name == "content_block_delta" {
            text.push_str(data["delta"]["text"].as_str().unwrap_or(""));
        }
        if name == "message_delta" {
            stop = data["delta"]["stop_reason"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            out = data["usage"]["output_tokens"].as_u64().unwrap_or_default();
        }
        names.push(name);
    }
    (names, text, stop, out)
}

#[tokio::test]
async fn anthropic_client_reaches_every_upstream() {
    let h = common::start(THREE).await;
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/providers/anthropic/messages_text.response.json"
        ))
        .unwrap(),
    )
    .unwrap();
    for (dep, provider, model) in LANES {
        let resp = h.messages(json!({"model": dep, "max_tokens": 100, "system": "Be brief.", "messages": [{"role": "user", "content": "Hi"}]})).await;
        assert_eq!(resp.status(), 200, "{dep}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["content"][0]["text"], answer(provider), "{dep}");
        assert_eq!(body["model"], model);
        assert_eq!(body["stop_reason"], "end_turn");
        assert_eq!(body["usage"]["output_tokens"], 6);
        // The same top-level shape as a real Anthropic answer.
        for key in fixture
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| !["container", "context_management"].contains(&k.as_str()))
        {
            assert!(body.get(key).is_some(), "{dep}: missing `{key}` in {body}");
        }
        let resp = h.messages(json!({"model": dep, "max_tokens": 100, "stream": true, "messages": [{"role": "user", "content": "Hi"}]})).await;
        let (names, text, stop, out) = anthropic_stream(&resp.text().await.unwrap());
        assert_eq!(
            names.first().map(String::as_str),
            Some("message_start"),
            "{dep}: {names:?}"
        );
        assert_eq!(
            names.last().map(String::as_str),
            Some("message_stop"),
            "{dep}: {names:?}"
        );
        assert!(
            names.contains(&"content_block_start".to_owned())
                && names.contains(&"content_block_stop".to_owned())
        );
        assert_eq!(
            (text.as_str(), stop.as_str(), out),
            (answer(provider).as_str(), "end_turn", 6),
            "{dep}"
        );
    }
}

#[tokio::test]
async fn anthropic_to_anthropic_passes_the_body_through() {
    let h = common::start(THREE).await;
    let body = json!({"model": "an/claude", "max_tokens": 77, "metadata": {"user_id": "u-1"}, "service_tier": "auto", "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}]}]});
    assert_eq!(h.messages(body).await.status(), 200);
    let sent = h.mock.requests()[0].json.clone().unwrap();
    assert_eq!(sent["model"], "claude-sonnet-4-5");
    // Everything the IR would not carry is still there.
    assert_eq!(sent["service_tier"], "auto");
    assert_eq!(
        sent["messages"][0]["content"][0]["cache_control"]["type"],
        "ephemeral"
    );
    assert_eq!(sent["max_tokens"], 77);
}

#[tokio::test]
async fn anthropic_client_tool_loop_across_every_upstream() {
    let h = common::start(THREE).await;
    let tools = json!([{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
    for (dep, _, _) in LANES {
        let first: Value = h.messages(json!({"model": dep, "max_tokens": 100, "tools": tools, "messages": [{"role": "user", "content": "Weather in Paris?"}]}))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(first["stop_reason"], "tool_use", "{dep}: {first}");
        let tool_use = first["content"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["type"] == "tool_use")
            .unwrap()
            .clone();
        assert_eq!(tool_use["name"], "get_weather");
        assert_eq!(tool_use["input"], json!({"city": "mock"}), "{dep}");
        let second: Value = h.messages(json!({
            "model": dep, "max_tokens": 100, "tools": tools,
            "messages": [
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": [tool_use]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool_use["id"], "content": "18C and sunny"}]}
            ]
        }))
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(
            second["content"][0]["text"], "Tool result received: 18C and sunny",
            "{dep}: {second}"
        );
    }
    // OpenAI got a `tool` role message with the same id.
    let oa = h
        .mock
        .requests()
        .into_iter()
        .filter(|r| r.path_and_query == "/v1/chat/completions")
        .nth(1)
        .unwrap()
        .json
        .unwrap();
    let msgs = oa["messages"].as_array().unwrap();
    assert_eq!(msgs[2]["role"], "tool");
    assert_eq!(msgs[2]["tool_call_id"], msgs[1]["tool_calls"][0]["id"]);
}

/// The finish reason survives every stream translation (PITFALLS #8): an
/// Anthropic client streaming a tool call gets `stop_reason: tool_use` from
/// every upstream, and an upstream that ends with its finish reason but no
/// terminator is a complete stream, not a broken one.
#[tokio::test]
async fn anthropic_client_streams_tool_calls_with_tool_use_from_every_upstream() {
    let h = common::start(THREE).await;
    let tools = json!([{"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]);
    for (dep, _, _) in LANES {
        for fault in [None, Some(switchyard_mock::Fault::NoTerminator)] {
            if let Some(f) = fault {
                h.mock.script(vec![Behavior::fault(f)]);
            }
            let resp = h.messages(json!({"model": dep, "max_tokens": 100, "stream": true, "tools": tools, "messages": [{"role": "user", "content": "Weather in Paris?"}]})).await;
            let body = resp.text().await.unwrap();
            let (names, _, stop, _) = anthropic_stream(&body);
            assert_eq!(stop, "tool_use", "{dep} {fault:?}: {body}");
            assert_eq!(
                names.last().map(String::as_str),
                Some("message_stop"),
                "{dep} {fault:?}: {body}"
            );
            assert!(
                !names.iter().any(|n| n == "error"),
                "{dep} {fault:?}: {body}"
            );
            assert!(body.contains(r#""type":"tool_use""#), "{dep}: {body}");
        }
    }
    // A plain text answer without the upstream's terminator is complete too.
    for (dep, provider, _) in LANES {
        h.mock
            .script(vec![Behavior::fault(switchyard_mock::Fault::NoTerminator)]);
        let resp = h.messages(json!({"model": dep, "max_tokens": 100, "stream": true, "messages": [{"role": "user", "content": "Hi"}]})).await;
        let (names, text, stop, _) = anthropic_stream(&resp.text().await.unwrap());
        assert_eq!(
            (text.as_str(), stop.as_str()),
            (answer(provider).as_str(), "end_turn"),
            "{dep}"
        );
        assert!(!names.iter().any(|n| n == "error"), "{dep}: {names:?}");
    }
}

/// A request Claude Code really sent (`fixtures/agents/claude_code/`).
fn claude_code(name: &str) -> (Value, Value) {
    let path = format!(
        "{}/../../fixtures/agents/claude_code/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let rec: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    (rec["headers"].clone(), rec["body"].clone())
}

async fn send_as_claude_code(h: &common::Harness, headers: &Value, body: &Value) -> String {
    let mut req = reqwest::Client::new().post(h.url("/v1/messages?beta=true"));
    for name in ["anthropic-version", "anthropic-beta", "x-app", "user-agent"] {
        req = req.header(name, headers[name].as_str().unwrap());
    }
    let resp = req.json(body).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

/// Claude Code's own requests (a `system` message mid-conversation, adaptive
/// thinking, `context_management`, `output_config`, `cache_control` on
/// blocks, `?beta=true`, its betas) complete a tool loop through every
/// upstream protocol (PITFALLS #7); to Anthropic they go as they came.
#[tokio::test]
async fn claude_code_requests_complete_a_tool_loop_through_every_upstream() {
    let h = common::start(THREE).await;
    let (headers, first) = claude_code("tool_loop_01_messages_tool_use");
    let (_, second) = claude_code("tool_loop_02_messages_tool_result");
    for (dep, _, _) in LANES {
        let mut body = first.clone();
        body["model"] = json!(dep);
        let sse = send_as_claude_code(&h, &headers, &body).await;
        let (names, _, stop, _) = anthropic_stream(&sse);
        assert_eq!(stop, "tool_use", "{dep}: {sse}");
        assert_eq!(names.last().map(String::as_str), Some("message_stop"));
        let mut body = second.clone();
        body["model"] = json!(dep);
        let sse = send_as_claude_code(&h, &headers, &body).await;
        let (_, text, stop, _) = anthropic_stream(&sse);
        assert_eq!(
            (text.as_str(), stop.as_str()),
            ("Tool result received: switchyard-tool-ok", "end_turn"),
            "{dep}: {sse}"
        );
    }
    // To Anthropic: the body as it came (model aside) and the client's betas.
    let reqs = h.mock.requests();
    let an = reqs
        .iter()
        .filter(|r| r.path_and_query.starts_with("/v1/messages"))
        .nth(1)
        .unwrap();
    let sent = an.json.clone().unwrap();
    for key in [
        "context_management",
        "output_config",
        "thinking",
        "metadata",
        "system",
    ] {
        assert_eq!(sent[key], second[key], "{key}");
    }
    assert_eq!(sent["messages"], second["messages"]);
    assert_eq!(
        an.header("anthropic-beta"),
        headers["anthropic-beta"].as_str()
    );
    // To OpenAI: the mid-conversation system message stays in place.
    let oa = reqs
        .iter()
        .find(|r| r.path_and_query == "/v1/chat/completions")
        .unwrap()
        .json
        .clone()
        .unwrap();
    let roles: Vec<&str> = oa["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    let first_user = roles.iter().position(|r| *r == "user").unwrap();
    assert!(roles[first_user..].contains(&"system"), "{roles:?}");
}

/// `n` > 1: forwarded as it came on the OpenAI passthrough, sent as
/// `candidateCount` to Gemini (each candidate one choice), refused where
/// the upstream cannot answer several.
#[tokio::test]
async fn several_choices_where_the_upstream_can_and_a_clear_400_where_not() {
    let h = common::start(THREE).await;
    let resp = h
        .post(json!({"model": "oa/gpt", "n": 2, "messages": common::user("Hi")}))
        .await;
    assert_eq!(resp.status(), 200);
    assert_eq!(
        h.mock.requests().last().unwrap().json.as_ref().unwrap()["n"],
        2
    );
    let two = json!({
        "candidates": [
            {"content": {"parts": [{"text": "one"}], "role": "model"}, "finishReason": "STOP", "index": 0},
            {"content": {"parts": [{"text": "two"}], "role": "model"}, "finishReason": "MAX_TOKENS", "index": 1}
        ],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4, "totalTokenCount": 7},
        "modelVersion": "gemini-2.5-flash"
    });
    h.mock.script(vec![Behavior::status(200, two.to_string())]);
    let resp = h
        .post(json!({"model": "gm/gemini", "n": 2, "messages": common::user("Hi")}))
        .await;
    assert_eq!(resp.status(), 200);
    let body: Value = resp.json().await.unwrap();
    let choices = body["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 2, "{body}");
    assert_eq!(
        (
            choices[0]["index"].as_u64(),
            choices[0]["message"]["content"].as_str()
        ),
        (Some(0), Some("one"))
    );
    assert_eq!(
        (
            choices[1]["index"].as_u64(),
            choices[1]["message"]["content"].as_str()
        ),
        (Some(1), Some("two"))
    );
    assert_eq!(choices[1]["finish_reason"], "length");
    assert_eq!(body["usage"]["completion_tokens"], 4);
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert_eq!(sent["generationConfig"]["candidateCount"], 2, "{sent}");
    for (model, stream) in [("an/claude", false), ("gm/gemini", true)] {
        let before = h.mock.request_count();
        let resp = h
            .post(json!({"model": model, "n": 3, "stream": stream, "messages": common::user("Hi")}))
            .await;
        assert_eq!(resp.status(), 400, "{model}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["param"], "n", "{model}: {body}");
        assert_eq!(h.mock.request_count(), before, "{model}: nothing sent");
    }
}

// === made-up ids ===

/// A Gemini answer without `responseId` with two calls of the same tool.
fn gemini_two_calls(stream: bool) -> Behavior {
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
            {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}
        ]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 4, "totalTokenCount": 7},
        "modelVersion": "gemini-2.5-flash"
    });
    if !stream {
        return Behavior::status(200, chunk.to_string());
    }
    let mut b = Behavior::status(200, format!("data: {chunk}\r\n\r\n"));
    b.headers
        .insert("content-type".into(), "text/event-stream".into());
    b
}

/// Gemini answers carry no ids of their own (no `responseId`, no call ids):
/// a deterministic upstream answering every turn alike must still give each
/// answer its own id and every tool call its own id — within an answer and
/// across the turns of one conversation, which an Anthropic client would
/// otherwise send back with duplicate `tool_use` ids.
#[tokio::test]
async fn made_up_ids_never_repeat_within_or_across_answers() {
    let h = common::start(THREE).await;
    let tools = json!([{"name": "get_weather", "description": "Weather",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    let mut conversation = vec![json!({"role": "user", "content": "Weather in Paris and Oslo?"})];
    let (mut message_ids, mut call_ids) = (Vec::new(), Vec::new());
    for stream in [false, true, false] {
        h.mock.script(vec![gemini_two_calls(stream)]);
        let body = json!({"model": "gm/gemini", "max_tokens": 100, "stream": stream,
            "tools": tools, "messages": conversation});
        let resp = h.messages(body).await;
        assert_eq!(resp.status(), 200);
        let text = resp.text().await.unwrap();
        let (id, uses) = if stream {
            let events: Vec<Value> = common::sse_data(&text)
                .iter()
                .map(|d| serde_json::from_str(d).unwrap())
                .collect();
            let id = events[0]["message"]["id"].as_str().unwrap().to_owned();
            let uses: Vec<Value> = events
                .iter()
                .filter(|e| e["type"] == "content_block_start")
                .map(|e| e["content_block"].clone())
                .collect();
            (id, uses)
        } else {
            let v: Value = serde_json::from_str(&text).unwrap();
            let uses = v["content"].as_array().unwrap().clone();
            (v["id"].as_str().unwrap().to_owned(), uses)
        };
        assert_eq!(uses.len(), 2, "{text}");
        message_ids.push(id);
        let results: Vec<Value> = uses
            .iter()
            .map(|u| {
                call_ids.push(u["id"].as_str().unwrap().to_owned());
                json!({"type": "tool_result", "tool_use_id": u["id"], "content": "sunny"})
            })
            .collect();
        let content: Vec<Value> = uses
            .iter()
            .map(|u| json!({"type": "tool_use", "id": u["id"], "name": u["name"], "input": {}}))
            .collect();
        conversation.push(json!({"role": "assistant", "content": content}));
        conversation.push(json!({"role": "user", "content": results}));
    }
    let distinct = |ids: &[String]| ids.iter().collect::<std::collections::HashSet<_>>().len();
    assert_eq!(distinct(&message_ids), 3, "{message_ids:?}");
    assert_eq!(distinct(&call_ids), 6, "{call_ids:?}");
    // The later turns sent every earlier call back as a function of its name.
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    let names: Vec<&str> = sent["contents"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["parts"].as_array().unwrap())
        .filter_map(|p| p["functionResponse"]["name"].as_str())
        .collect();
    assert_eq!(names, ["get_weather"; 4], "{sent}");

    // The OpenAI door: two alike answers, two ids, four call ids.
    let mut ids = Vec::new();
    for stream in [false, true] {
        h.mock.script(vec![gemini_two_calls(stream)]);
        let resp = h
            .post(
                json!({"model": "gm/gemini", "stream": stream, "tools": weather_tool_openai(),
                "messages": common::user("Weather?")}),
            )
            .await;
        let text = resp.text().await.unwrap();
        let docs: Vec<Value> = if stream {
            common::sse_data(&text)
                .iter()
                .filter_map(|d| serde_json::from_str(d).ok())
                .collect()
        } else {
            vec![serde_json::from_str(&text).unwrap()]
        };
        ids.push(docs[0]["id"].as_str().unwrap().to_owned());
        for d in &docs {
            let calls = d["choices"][0]["message"]["tool_calls"]
                .as_array()
                .or(d["choices"][0]["delta"]["tool_calls"].as_array());
            for c in calls.into_iter().flatten() {
                if let Some(id) = c["id"].as_str() {
                    call_ids.push(id.to_owned());
                }
            }
        }
    }
    assert_ne!(ids[0], ids[1]);
    assert_eq!(distinct(&call_ids), 10, "{call_ids:?}");
}

// === streams split anywhere ===

#[tokio::test]
async fn translated_streams_survive_random_byte_splits() {
    let h = common::start(THREE).await;
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for (dep, provider, _) in LANES {
        for _ in 0..4 {
            let drip = rng.random_range(1..24);
            let mock = json!({"chunks": 5, "fault": "drip", "drip_bytes": drip});
            let oa = h.post(json!({"model": dep, "messages": common::user("Hi"), "stream": true, "provider_options": {"mock": mock}})).await.text().await.unwrap();
            assert_eq!(
                common::sse_text(&oa),
                answer(provider),
                "{dep} drip {drip}: {oa}"
            );
            assert!(oa.ends_with("data: [DONE]\n\n"));
            let an = h.messages(json!({"model": dep, "max_tokens": 50, "stream": true, "provider_options": {"mock": mock}, "messages": [{"role": "user", "content": "Hi"}]})).await.text().await.unwrap();
            let (names, text, stop, _) = anthropic_stream(&an);
            assert_eq!(
                (text.as_str(), stop.as_str()),
                (answer(provider).as_str(), "end_turn"),
                "{dep} drip {drip}: {an}"
            );
            assert_eq!(names.last().map(String::as_str), Some("message_stop"));
        }
    }
}

// === errors ===

#[tokio::test]
async fn upstream_errors_arrive_in_the_clients_envelope() {
    let h = common::start(THREE).await;
    h.mock
        .set_default(Behavior::fixture("anthropic/error_529_overloaded"));
    let resp = h
        .post(json!({"model": "an-once", "messages": common::user("Hi")}))
        .await;
    assert_eq!(resp.status(), 503);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "overloaded");
    let resp = h.messages(json!({"model": "an-once", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]})).await;
    assert_eq!(resp.status(), 503);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        (body["type"].as_str(), body["error"]["type"].as_str()),
        (Some("error"), Some("overloaded_error"))
    );

    h.mock
        .set_default(Behavior::fixture("gemini/error_429_resource_exhausted"));
    let resp = h
        .post(json!({"model": "gm-once", "messages": common::user("Hi")}))
        .await;
    assert_eq!(resp.status(), 429);
    assert!(
        resp.headers().contains_key("retry-after"),
        "RetryInfo becomes Retry-After"
    );

    // A prompt Gemini blocks is content_filtered, not an empty answer.
    let blocked = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/providers/gemini/generate_prompt_blocked.response.json"
    ))
    .unwrap();
    h.mock.set_default(Behavior::status(200, blocked));
    let resp = h
        .post(json!({"model": "gm-once", "messages": common::user("Hi")}))
        .await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "content_filtered");
}

#[tokio::test]
async fn anthropic_door_rejects_bad_input_in_its_own_envelope() {
    let h = common::start(THREE).await;
    let resp = h
        .messages(json!({"model": "an/claude", "messages": [{"role": "user", "content": "Hi"}]}))
        .await;
    assert_eq!(resp.status(), 400);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_tokens"));
    let resp = h.messages(
        json!({"model": "nope", "max_tokens": 5, "messages": [{"role": "user", "content": "Hi"}]}),
    )
    .await;
    assert_eq!(resp.status(), 404);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["type"], "not_found_error");
    assert_eq!(h.mock.request_count(), 0);
}

#[tokio::test]
async fn mid_stream_errors_end_with_an_error_event_in_each_dialect() {
    let h = common::start(THREE).await;
    let mock = json!({"fault": "midstream_error", "after_events": 3});
    let oa = h.post(json!({"model": "an/claude", "messages": common::user("Hi"), "stream": true, "provider_options": {"mock": mock}})).await.text().await.unwrap();
    let last: Value = serde_json::from_str(&common::sse_data(&oa).pop().unwrap()).unwrap();
    assert_eq!(last["error"]["code"], "overloaded", "{oa}");
    let an = h.messages(json!({"model": "an/claude", "max_tokens": 5, "stream": true, "provider_options": {"mock": mock}, "messages": [{"role": "user", "content": "Hi"}]})).await.text().await.unwrap();
    let (names, _, _, _) = anthropic_stream(&an);
    assert_eq!(names.last().map(String::as_str), Some("error"), "{an}");
    assert!(!names.contains(&"message_stop".to_owned()));
}
