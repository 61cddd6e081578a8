//! The OpenAI-compatible flavors over real HTTP (contract §9, MAPPING §18):
//! every door to DeepSeek, Qwen, GLM, Kimi, Ark and MiniMax, streamed and
//! not, against the mock's `/{flavor}/…` routes, which refuse what each
//! provider refuses (with its recorded error) and answer in its shape.

mod common;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};

const FLAVORS: &str = r#"
providers:
  deepseek: { protocol: openai, flavor: deepseek, base_url: "{mock}/deepseek/v1" }
  qwen: { protocol: openai, flavor: qwen, base_url: "{mock}/qwen/v1" }
  zhipu: { protocol: openai, flavor: zhipu, base_url: "{mock}/zhipu/v1" }
  moonshot: { protocol: openai, flavor: moonshot, base_url: "{mock}/moonshot/v1" }
  ark: { protocol: openai, flavor: ark, base_url: "{mock}/ark/v1" }
  minimax: { protocol: openai, flavor: minimax, base_url: "{mock}/minimax/v1" }
  minimax_inline:
    protocol: openai
    flavor: minimax
    base_url: "{mock}/minimax/v1"
    options: { reasoning_split: false }
models:
  - { id: deepseek/r, provider: deepseek, model: deepseek-reasoner, capabilities: [tools, streaming, reasoning], pricing: { input: 0.28, output: 0.42, cached_input: 0.028 } }
  - { id: deepseek/legacy, provider: deepseek, model: deepseek-r1, capabilities: [streaming] }
  - { id: qwen/q, provider: qwen, model: qwen3-32b, capabilities: [tools, streaming] }
  - { id: zhipu/g, provider: zhipu, model: glm-4.6, capabilities: [tools, streaming] }
  - { id: moonshot/k, provider: moonshot, model: kimi-k2.6, capabilities: [tools, streaming], pricing: { input: 0.6, output: 2.5, cached_input: 0.15 } }
  - { id: ark/d, provider: ark, model: ep-20250615-abcde, max_output_tokens: 32768, capabilities: [tools, streaming] }
  - { id: minimax/m, provider: minimax, model: MiniMax-M2, capabilities: [tools, streaming] }
  - { id: minimax_inline/m, provider: minimax_inline, model: MiniMax-M2, capabilities: [streaming] }
routes:
  deepseek: { targets: [deepseek/r], retry: { attempts: 1 } }
  legacy: { targets: [deepseek/legacy], retry: { attempts: 1 } }
  qwen: { targets: [qwen/q], retry: { attempts: 1 } }
  zhipu: { targets: [zhipu/g], retry: { attempts: 1 } }
  moonshot: { targets: [moonshot/k], retry: { attempts: 1 } }
  ark: { targets: [ark/d], retry: { attempts: 1 } }
  minimax: { targets: [minimax/m], retry: { attempts: 1 } }
  minimax_inline: { targets: [minimax_inline/m], retry: { attempts: 1 } }
"#;

const ROUTES: [&str; 7] = [
    "deepseek",
    "qwen",
    "zhipu",
    "moonshot",
    "ark",
    "minimax",
    "minimax_inline",
];
const ANSWER: &str = "The answer is four.";
const THOUGHT: &str = "Two plus two makes four.";

fn thinking() -> Behavior {
    let mut b = Behavior::text(ANSWER);
    b.reasoning = Some(THOUGHT.into());
    b
}

/// An OpenAI stream's reasoning deltas, joined.
fn sse_reasoning(body: &str) -> String {
    common::sse_data(body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["reasoning_content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}

/// What the text deltas of an Anthropic or Responses stream say, joined.
fn stream_texts(body: &str, field: &str) -> String {
    common::sse_data(body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            let delta = if field == "text" {
                &v["delta"]["text"]
            } else {
                &v["delta"]
            };
            let typed =
                v["type"] == "content_block_delta" || v["type"] == "response.output_text.delta";
            typed.then(|| delta.as_str().map(str::to_owned)).flatten()
        })
        .collect()
}

/// Each flavor's answer reaches each door as that door's answer: the text
/// without any reasoning in it (MiniMax's `reasoning_details` and inline
/// `<think>` both split off), the reasoning where the door shows it, and
/// none of the provider's extras. The OpenAI client also sends a
/// `developer` turn, which DeepSeek refuses unless it becomes `system`,
/// and non-streamed Qwen calls are refused unless thinking is off.
#[tokio::test]
async fn every_door_reaches_every_flavor_whole_and_streamed() {
    let h = common::start(FLAVORS).await;
    h.mock.set_default(thinking());
    for route in ROUTES {
        let messages = json!([{"role": "developer", "content": "be brief"}, {"role": "user", "content": "2+2?"}]);
        // OpenAI, whole.
        let r = h.post(json!({"model": route, "messages": messages})).await;
        let text = r.text().await.unwrap();
        let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{route}: {text}"));
        let msg = &v["choices"][0]["message"];
        assert_eq!(msg["content"], ANSWER, "{route}: {v}");
        assert_eq!(msg["reasoning_content"], THOUGHT, "{route}: {v}");
        for extra in [
            "base_resp",
            "<think>",
            "reasoning_details",
            "output_sensitive",
        ] {
            assert!(!text.contains(extra), "{route}: {extra} in {text}");
        }
        // OpenAI, streamed.
        let r = h
            .post(json!({"model": route, "stream": true, "stream_options": {"include_usage": true}, "messages": messages}))
            .await;
        assert_eq!(r.status(), 200, "{route}");
        let text = r.text().await.unwrap();
        assert_eq!(common::sse_text(&text), ANSWER, "{route}: {text}");
        assert_eq!(sse_reasoning(&text), THOUGHT, "{route}: {text}");
        assert!(text.ends_with("data: [DONE]\n\n"), "{route}: {text}");
        assert!(
            !text.contains("<think>") && !text.contains("base_resp"),
            "{route}: {text}"
        );
        let data = common::sse_data(&text);
        let last: Value = serde_json::from_str(&data[data.len() - 2]).unwrap();
        assert!(
            last["usage"]["completion_tokens"].as_u64().unwrap() > 0,
            "{route}: usage last: {text}"
        );

        // Anthropic, whole and streamed: a thinking block, then the text.
        let msg = json!({"model": route, "max_tokens": 64, "messages": [{"role": "user", "content": "2+2?"}]});
        let v: Value = h.messages(msg.clone()).await.json().await.unwrap();
        let blocks = v["content"]
            .as_array()
            .unwrap_or_else(|| panic!("{route}: {v}"));
        assert_eq!(blocks.last().unwrap()["text"], ANSWER, "{route}: {v}");
        assert!(
            blocks.iter().any(|b| b["thinking"] == THOUGHT),
            "{route}: {v}"
        );
        let mut stream = msg.clone();
        stream["stream"] = json!(true);
        let text = h.messages(stream).await.text().await.unwrap();
        assert_eq!(stream_texts(&text, "text"), ANSWER, "{route}: {text}");
        assert!(text.contains("event: message_stop"), "{route}: {text}");

        // Responses, whole and streamed.
        let r = h.responses(json!({"model": route, "input": "2+2?"})).await;
        let v: Value = r.json().await.unwrap();
        let said = v["output"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["type"] == "message")
            .map(|o| {
                o["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect::<String>();
        assert_eq!(said, ANSWER, "{route}: {v}");
        let r = h
            .responses(json!({"model": route, "input": "2+2?", "stream": true}))
            .await;
        let text = r.text().await.unwrap();
        assert_eq!(stream_texts(&text, "delta"), ANSWER, "{route}: {text}");
        assert!(text.contains("response.completed"), "{route}: {text}");
    }
    // Every request was one upstream call, none refused by a provider's rule.
    assert_eq!(h.mock.request_count(), ROUTES.len() * 6);
    let upstream: Vec<Value> = h
        .mock
        .requests()
        .iter()
        .filter_map(|r| r.json.clone())
        .collect();
    for sent in &upstream {
        let roles: Vec<&str> = sent["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["role"].as_str())
            .collect();
        if sent["model"] == "deepseek-reasoner" {
            assert!(!roles.contains(&"developer"), "{sent}");
        }
        if sent["model"] == "qwen3-32b" && sent["stream"] != json!(true) {
            assert_eq!(sent["enable_thinking"], json!(false), "{sent}");
        }
        if sent["model"] == "MiniMax-M2" {
            assert!(sent.get("reasoning_split").is_some(), "{sent}");
        }
    }
}

/// The second turn of a thinking-mode tool loop, as OpenAI and Responses
/// clients send it (without the reasoning, which they never keep), gets
/// its reasoning back from the first turn, whole or streamed; DeepSeek
/// refuses it otherwise. The legacy reasoner, which refuses replayed
/// reasoning, gets none.
#[tokio::test]
async fn a_deepseek_tool_loop_gets_its_reasoning_back() {
    let h = common::start(FLAVORS).await;
    let tools = json!([{"type": "function", "function": {"name": "roll_dice",
        "parameters": {"type": "object", "properties": {"sides": {"type": "integer"}}}}}]);
    for stream in [false, true] {
        let thought = format!("I should roll the dice (stream={stream}).");
        h.mock.set_default(Behavior {
            reasoning: Some(thought.clone()),
            ..Behavior::default()
        });
        let r = h
            .post(
                json!({"model": "deepseek", "stream": stream, "tools": tools,
                         "messages": common::user("roll for me")}),
            )
            .await;
        assert_eq!(r.status(), 200);
        let text = r.text().await.unwrap();
        let (id, args) = if stream {
            let chunks: Vec<Value> = common::sse_data(&text)
                .iter()
                .filter_map(|d| serde_json::from_str(d).ok())
                .collect();
            let id = chunks
                .iter()
                .find_map(|c| c["choices"][0]["delta"]["tool_calls"][0]["id"].as_str())
                .unwrap()
                .to_owned();
            assert_eq!(sse_reasoning(&text), thought, "{text}");
            (id, "{}".to_owned())
        } else {
            let v: Value = serde_json::from_str(&text).unwrap();
            let call = &v["choices"][0]["message"]["tool_calls"][0];
            assert_eq!(
                v["choices"][0]["message"]["reasoning_content"],
                thought.as_str(),
                "{v}"
            );
            (
                call["id"].as_str().unwrap().to_owned(),
                call["function"]["arguments"].as_str().unwrap().to_owned(),
            )
        };
        h.mock.set_default(Behavior::text("You rolled a 4."));
        let r = h
            .post(json!({"model": "deepseek", "tools": tools, "messages": [
                {"role": "user", "content": "roll for me"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
                    "function": {"name": "roll_dice", "arguments": args}}]},
                {"role": "tool", "tool_call_id": id, "content": "4"}
            ]}))
            .await;
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(status, 200, "stream={stream}: {v}");
        let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
        assert_eq!(
            sent["messages"][1]["reasoning_content"],
            thought.as_str(),
            "{sent}"
        );

        // A Responses client (Codex) replays the call as items.
        let r = h.responses(json!({"model": "deepseek", "tools": [{"type": "function",
            "name": "roll_dice", "parameters": {"type": "object", "properties": {}}}], "input": [
            {"role": "user", "content": "roll for me"},
            {"type": "function_call", "call_id": id, "name": "roll_dice", "arguments": args},
            {"type": "function_call_output", "call_id": id, "output": "4"}
        ]}))
        .await;
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(status, 200, "responses, stream={stream}: {v}");
        let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
        let assistant = sent["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "assistant")
            .unwrap()
            .clone();
        assert_eq!(assistant["reasoning_content"], thought.as_str(), "{sent}");
    }
    // A call the gateway never saw still goes, with an empty reasoning.
    let r = h
        .post(json!({"model": "deepseek", "tools": tools, "messages": [
            {"role": "user", "content": "roll"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_elsewhere", "type": "function",
                "function": {"name": "roll_dice", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_elsewhere", "content": "2"}
        ]}))
        .await;
    assert_eq!(r.status(), 200);
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert_eq!(sent["messages"][1]["reasoning_content"], "", "{sent}");
    // The legacy reasoner gets the client's replayed reasoning stripped.
    let r = h
        .post(json!({"model": "legacy", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello", "reasoning_content": "they greeted me"},
            {"role": "user", "content": "how are you?"}
        ]}))
        .await;
    assert_eq!(r.status(), 200);
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert!(
        sent["messages"][1].get("reasoning_content").is_none(),
        "{sent}"
    );
}

/// Errors that need more than the status, through the OpenAI door: the
/// client sees the contract's code, and quota is told from a throttle.
#[tokio::test]
async fn each_flavors_errors_keep_their_meaning() {
    let h = common::start(FLAVORS).await;
    let cases = [
        (
            "zhipu",
            "zhipu/error_429_1113_insufficient_balance",
            "rate_limited",
        ),
        ("zhipu", "zhipu/error_429_1305_overloaded", "overloaded"),
        (
            "zhipu",
            "zhipu/error_400_1261_context_length",
            "context_too_long",
        ),
        ("zhipu", "zhipu/error_401_1001_missing_token", "auth_failed"),
        (
            "moonshot",
            "moonshot/error_429_engine_overloaded",
            "overloaded",
        ),
        (
            "moonshot",
            "moonshot/error_404_resource_not_found",
            "model_not_found",
        ),
        (
            "moonshot",
            "moonshot/error_400_context_length",
            "context_too_long",
        ),
        ("qwen", "qwen/error_400_context_length", "context_too_long"),
        (
            "qwen",
            "qwen/error_429_throttling_allocation_quota",
            "rate_limited",
        ),
        (
            "ark",
            "volcengine/error_401_authentication_format",
            "auth_failed",
        ),
        (
            "ark",
            "volcengine/error_400_missing_parameter",
            "invalid_request",
        ),
        (
            "deepseek",
            "deepseek/error_400_context_length",
            "context_too_long",
        ),
        (
            "deepseek",
            "deepseek/error_402_insufficient_balance",
            "rate_limited",
        ),
    ];
    for (route, fixture, code) in cases {
        h.mock.set_default(Behavior::fixture(fixture));
        let r = h
            .post(json!({"model": route, "messages": common::user("hi")}))
            .await;
        let status = r.status();
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], code, "{fixture}: {status} {v}");
    }
    // MiniMax's HTTP 200 with a non-zero `base_resp`, whole and streamed:
    // an error, not an empty answer.
    let whole = json!({"choices": null, "base_resp": {"status_code": 1008, "status_msg": "insufficient balance"}});
    h.mock.set_default(Behavior::status(200, whole.to_string()));
    let r = h
        .post(json!({"model": "minimax", "messages": common::user("hi")}))
        .await;
    let status = r.status();
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (status.as_u16(), v["error"]["code"].as_str()),
        (429, Some("rate_limited")),
        "{v}"
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("insufficient balance"),
        "{v}"
    );
    h.mock.set_default(Behavior::fixture(
        "minimax/error_200_base_resp_insufficient_balance",
    ));
    let r = h
        .post(json!({"model": "minimax", "stream": true, "messages": common::user("hi")}))
        .await;
    let status = r.status();
    let text = r.text().await.unwrap();
    // Before any answer went out: the client gets the error as a status.
    assert_eq!(status, 429, "{text}");
    assert!(
        text.contains("rate_limited") && text.contains("insufficient balance"),
        "{text}"
    );
    assert!(!text.contains("[DONE]"), "{text}");
}

/// Cached prompt tokens, wherever each flavor reports them (DeepSeek's
/// `prompt_cache_hit_tokens`, Kimi's top-level `cached_tokens`), are
/// priced at the cached rate, streamed or not; a stream's usage counts
/// whether it comes on the finish chunk or after it.
#[tokio::test]
async fn cached_tokens_are_read_where_each_flavor_puts_them() {
    let h = common::start(FLAVORS).await;
    h.mock.set_default(Behavior::text(ANSWER).cached(8));
    let long = "word ".repeat(100);
    let mut n = 0;
    for (route, input, cached, output) in [
        ("deepseek", 0.28, 0.028, 0.42),
        ("moonshot", 0.6, 0.15, 2.5),
    ] {
        for stream in [false, true] {
            let r = h
                .post(json!({"model": route, "stream": stream, "messages": common::user(&long)}))
                .await;
            assert_eq!(r.status(), 200);
            r.text().await.unwrap();
            let d = h.decision(n).await;
            n += 1;
            let t = &d["tokens"];
            assert_eq!(t["cached"], 8, "{route} stream={stream}: {d}");
            let (i, o) = (t["input"].as_f64().unwrap(), t["output"].as_f64().unwrap());
            assert!(o > 0.0, "{d}");
            let want = ((i - 8.0) * input + 8.0 * cached + o * output) / 1e6;
            let got = d["cost_usd"].as_f64().unwrap();
            assert!(
                (got - want).abs() < 1e-12,
                "{route} stream={stream}: {got} vs {want}: {d}"
            );
        }
    }
    // Qwen (usage after the finish) and GLM (on it): streamed usage counts.
    for route in ["qwen", "zhipu"] {
        let r = h
            .post(json!({"model": route, "stream": true, "messages": common::user("hi")}))
            .await;
        r.text().await.unwrap();
        let d = h.decision(n).await;
        n += 1;
        assert!(d["tokens"]["output"].as_u64().unwrap() > 0, "{route}: {d}");
    }
}

/// A stream cut mid-way ends with an error for the client, whatever the
/// flavor (a rewriting one included), and the request runs once.
#[tokio::test]
async fn a_broken_flavored_stream_ends_with_an_error() {
    let h = common::start(FLAVORS).await;
    for route in ["deepseek", "qwen", "minimax"] {
        for fault in [Fault::Cut, Fault::MidstreamError] {
            let mut b = thinking().chunks(6);
            b.fault = Some(fault);
            b.after_events = 3;
            h.mock.set_default(b);
            let before = h.mock.request_count();
            let r = h
                .post(json!({"model": route, "stream": true, "messages": common::user("hi")}))
                .await;
            let text = r.text().await.unwrap();
            assert!(
                !text.ends_with("data: [DONE]\n\n"),
                "{route} {fault:?}: {text}"
            );
            assert!(text.contains("\"error\""), "{route} {fault:?}: {text}");
            assert_eq!(
                h.mock.request_count(),
                before + 1,
                "{route}: a cut stream is not retried"
            );
        }
    }
}

/// Ark's output cap is clamped to the deployment's (the mock refuses
/// more, as Ark's coding plan does); MiniMax's forced tool choice becomes
/// `auto`; Kimi gets `max_tokens`.
#[tokio::test]
async fn each_flavor_gets_the_fields_it_takes() {
    let h = common::start(FLAVORS).await;
    h.mock.set_default(Behavior::text(ANSWER));
    let r = h
        .post(json!({"model": "ark", "max_tokens": 100000, "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert_eq!(sent["max_tokens"], 32768);
    let tools =
        json!([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]);
    let r = h
        .post(json!({"model": "minimax", "tools": tools, "tool_choice": "required", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert_eq!(sent["tool_choice"], "auto");
    let r = h
        .post(json!({"model": "moonshot", "max_completion_tokens": 500, "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    assert_eq!(
        (
            sent["max_tokens"].as_u64(),
            sent.get("max_completion_tokens")
        ),
        (Some(500), None)
    );
    // `n` > 1 cannot be served where answers are rewritten.
    let r = h
        .post(json!({"model": "deepseek", "n": 50, "messages": common::user("hi")}))
        .await;
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "invalid_request", "{v}");
    assert_eq!(v["error"]["param"], "n", "{v}");
}
