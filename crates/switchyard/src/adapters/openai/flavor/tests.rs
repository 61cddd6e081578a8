//! Each flavor's rules against the recorded and constructed fixtures
//! (`fixtures/providers/{deepseek,qwen,zhipu,moonshot,volcengine,minimax}`).

use serde_json::{json, Value};
use switchyard_protocol::ir::ReasoningConfig;

use super::*;
use crate::adapters::errors::fixture;
use crate::config::Flavor as Name;
use crate::error::ErrorCode;

fn read_fixture(name: &str) -> Value {
    let path = format!(
        "{}/../../fixtures/providers/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `name`'s error envelope classified by the flavor's rules over OpenAI's.
fn classify(flavor: Name, name: &str) -> GatewayError {
    let (status, headers, body) = fixture(name);
    let mut r = crate::adapters::openai::errors::read(&body);
    for_name(flavor).read_error(status, &body, &mut r);
    crate::adapters::errors::classify(status, &headers, r, &[])
}

/// One request's body through a flavor.
struct Call {
    flavor: Name,
    model: &'static str,
    stream: bool,
    reasoning: Option<ReasoningConfig>,
    cap: Option<u32>,
    replay: ReasoningReplay,
}

impl Call {
    fn new(flavor: Name, model: &'static str) -> Call {
        Call {
            flavor,
            model,
            stream: false,
            reasoning: None,
            cap: None,
            replay: ReasoningReplay::Auto,
        }
    }

    fn effort(mut self, e: &str) -> Call {
        self.reasoning = Some(ReasoningConfig {
            effort: Some(e.into()),
            budget_tokens: None,
        });
        self
    }

    fn run(&self, store: &ReplayStore, body: &Value) -> Value {
        let f = for_name(self.flavor);
        let facts = Facts {
            model: self.model,
            body_model: Some(self.model),
            stream: self.stream,
            reasoning: self.reasoning.as_ref(),
            max_output_tokens: self.cap,
            replay: self.replay,
        };
        let out = apply(&*f, facts, store, serde_json::to_vec(body).unwrap());
        serde_json::from_slice(&out).unwrap()
    }
}

/// An OpenAI client's turn 2 of DeepSeek's recorded thinking tool loop:
/// the client does not send `reasoning_content` back.
fn turn2_as_a_client_sends_it() -> Value {
    let mut body = read_fixture("deepseek/thinking_tool_loop_turn2.request.json");
    for m in body["messages"].as_array_mut().unwrap() {
        m.as_object_mut().unwrap().remove("reasoning_content");
    }
    body
}

#[test]
fn deepseek_gets_back_the_reasoning_that_made_its_tool_calls() {
    let store = ReplayStore::default();
    // Turn 1's answer, as the gateway decoded it.
    let answer = read_fixture("deepseek/thinking_tool_loop_turn1.response.json");
    let mut ir = crate::adapters::openai::decode(answer.to_string().as_bytes()).unwrap();
    settle(&*for_name(Name::DeepSeek), &store, &mut ir);
    let sent =
        Call::new(Name::DeepSeek, "deepseek-reasoner").run(&store, &turn2_as_a_client_sends_it());
    let recorded = read_fixture("deepseek/thinking_tool_loop_turn2.request.json");
    // Every assistant turn with tool calls carries it again, exactly as
    // DeepSeek accepted it; one the gateway never saw gets an empty one.
    assert_eq!(sent["messages"], recorded["messages"]);
}

#[test]
fn deepseek_legacy_r1_never_gets_reasoning_and_developer_is_system() {
    let store = ReplayStore::default();
    let body = json!({"model": "x", "messages": [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "a", "reasoning_content": "thought"},
        {"role": "user", "content": "more"}
    ]});
    let sent = Call::new(Name::DeepSeek, "deepseek-r1-0528").run(&store, &body);
    assert_eq!(sent["messages"][0]["role"], "system");
    assert_eq!(sent["messages"][2].get("reasoning_content"), None);
    // `never` on a current model strips it too; `always` adds one to every turn.
    let mut c = Call::new(Name::DeepSeek, "deepseek-chat");
    c.replay = ReasoningReplay::Never;
    assert_eq!(
        c.run(&store, &body)["messages"][2].get("reasoning_content"),
        None
    );
    let mut plain = body.clone();
    plain["messages"][2]
        .as_object_mut()
        .unwrap()
        .remove("reasoning_content");
    c.replay = ReasoningReplay::Always;
    assert_eq!(
        c.run(&store, &plain)["messages"][2]["reasoning_content"],
        ""
    );
    // Asked to think: the thinking switch, unless the client set it.
    let sent = Call::new(Name::DeepSeek, "deepseek-chat")
        .effort("high")
        .run(&store, &body);
    assert_eq!(sent["thinking"], json!({"type": "enabled"}));
    let mut own = body.clone();
    own["thinking"] = json!({"type": "disabled"});
    let sent = Call::new(Name::DeepSeek, "deepseek-chat")
        .effort("high")
        .run(&store, &own);
    assert_eq!(sent["thinking"], json!({"type": "disabled"}));
}

#[test]
fn a_body_no_rule_touches_is_the_same_bytes() {
    let store = ReplayStore::default();
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"x_unknown":{"a":1}}"#;
    for flavor in [Name::Generic, Name::Vllm, Name::DeepSeek, Name::Zhipu] {
        let f = for_name(flavor);
        let facts = Facts {
            model: "m",
            body_model: Some("m"),
            stream: true,
            reasoning: None,
            max_output_tokens: None,
            replay: ReasoningReplay::Auto,
        };
        assert_eq!(apply(&*f, facts, &store, body.to_vec()), body, "{flavor:?}");
    }
    // A generic server still follows a deployment's explicit setting.
    let mut c = Call::new(Name::Generic, "m");
    c.replay = ReasoningReplay::Never;
    let replayed = json!({"model": "m", "messages": [{"role": "assistant", "content": "a", "reasoning_content": "r"}]});
    assert_eq!(
        c.run(&store, &replayed)["messages"][0].get("reasoning_content"),
        None
    );
}

#[test]
fn qwen_turns_thinking_off_for_whole_answers_and_on_for_streams_when_asked() {
    let store = ReplayStore::default();
    let body = read_fixture("qwen/chat_thinking_stream.request.json");
    let mut whole = body.clone();
    whole["stream"] = json!(false);
    let sent = Call::new(Name::Qwen, "qwen3-32b").run(&store, &whole);
    assert_eq!(sent["enable_thinking"], json!(false));
    let mut c = Call::new(Name::Qwen, "qwen-plus").effort("high");
    c.stream = true;
    let mut asked = json!({"model": "qwen-plus", "stream": true, "messages": []});
    let sent = c.run(&store, &asked);
    assert_eq!(sent["enable_thinking"], json!(true));
    // The client's own switch wins on a stream.
    asked["enable_thinking"] = json!(false);
    assert_eq!(c.run(&store, &asked)["enable_thinking"], json!(false));
    // A thinking-only model gets no switch.
    let sent = Call::new(Name::Qwen, "qwq-plus").run(&store, &whole);
    assert_eq!(sent.get("enable_thinking"), body.get("enable_thinking"));
}

#[test]
fn moonshot_takes_max_tokens_and_minimax_splits_reasoning_and_offers_tools() {
    let store = ReplayStore::default();
    let body = json!({"model": "m", "messages": [], "max_completion_tokens": 900});
    let sent = Call::new(Name::Moonshot, "kimi-k2.6")
        .effort("none")
        .run(&store, &body);
    assert_eq!(sent["max_tokens"], 900);
    assert_eq!(sent.get("max_completion_tokens"), None);
    assert_eq!(sent["thinking"], json!({"type": "disabled"}));
    // Partial mode: the prefill the answer continues, as Kimi documents it.
    let partial = read_fixture("moonshot/partial_mode.request.json");
    let mut plain = partial.clone();
    let last = plain["messages"]
        .as_array_mut()
        .unwrap()
        .last_mut()
        .unwrap();
    last.as_object_mut().unwrap().remove("partial");
    let sent = Call::new(Name::Moonshot, "kimi-k2.6").run(&store, &plain);
    assert_eq!(sent["messages"], partial["messages"]);

    let body = json!({"model": "m", "messages": [
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    ], "tool_choice": "required"});
    store.remember(["call_1"].into_iter(), "I should call f.");
    let sent = Call::new(Name::MiniMax, "MiniMax-M2").run(&store, &body);
    assert_eq!(sent["reasoning_split"], json!(true));
    assert_eq!(sent["tool_choice"], "auto");
    assert_eq!(
        sent["messages"][0]["reasoning_details"],
        json!([{"type": "reasoning.text", "text": "I should call f."}])
    );
}

#[test]
fn ark_clamps_the_output_cap_and_zhipu_switches_thinking() {
    let store = ReplayStore::default();
    let body = read_fixture("volcengine/chat_thinking.request.json");
    let mut c = Call::new(Name::Ark, "ep-20250101000000-abcde");
    c.cap = Some(32768);
    let mut big = body.clone();
    big["max_tokens"] = json!(100000);
    assert_eq!(c.run(&store, &big)["max_tokens"], 32768);
    let sent = Call::new(Name::Zhipu, "glm-4.6")
        .effort("none")
        .run(&store, &json!({"model": "m", "messages": []}));
    assert_eq!(sent["thinking"], json!({"type": "disabled"}));
    // Preserved thinking keeps what the client sends back; otherwise it goes.
    let turn2 = read_fixture("zhipu/preserved_thinking_turn2.request.json");
    let sent = Call::new(Name::Zhipu, "glm-4.7").run(&store, &turn2);
    assert_eq!(sent["messages"], turn2["messages"]);
    let mut cleared = turn2.clone();
    cleared["thinking"]["clear_thinking"] = json!(true);
    let sent = Call::new(Name::Zhipu, "glm-4.7").run(&store, &cleared);
    assert_eq!(sent["messages"][1].get("reasoning_content"), None);
}

#[test]
fn each_flavor_reads_its_errors_beyond_the_status() {
    let cases: &[(Name, &str, ErrorCode, bool)] = &[
        (
            Name::Zhipu,
            "zhipu/error_401_1001_missing_token",
            ErrorCode::AuthFailed,
            false,
        ),
        (
            Name::Zhipu,
            "zhipu/error_429_1113_insufficient_balance",
            ErrorCode::RateLimited,
            true,
        ),
        (
            Name::Zhipu,
            "zhipu/error_400_1210_invalid_parameter",
            ErrorCode::InvalidRequest,
            false,
        ),
        (
            Name::Zhipu,
            "zhipu/error_400_1261_context_length",
            ErrorCode::ContextTooLong,
            false,
        ),
        (
            Name::Zhipu,
            "zhipu/error_429_1302_rate_limit",
            ErrorCode::RateLimited,
            false,
        ),
        (
            Name::Zhipu,
            "zhipu/error_429_1305_overloaded",
            ErrorCode::Overloaded,
            false,
        ),
        (
            Name::Zhipu,
            "zhipu/error_429_1308_usage_cap",
            ErrorCode::RateLimited,
            true,
        ),
        (
            Name::Moonshot,
            "moonshot/error_400_context_length",
            ErrorCode::ContextTooLong,
            false,
        ),
        (
            Name::Moonshot,
            "moonshot/error_401_invalid_authentication",
            ErrorCode::AuthFailed,
            false,
        ),
        (
            Name::Moonshot,
            "moonshot/error_403_exceeded_current_quota",
            ErrorCode::RateLimited,
            true,
        ),
        (
            Name::Moonshot,
            "moonshot/error_404_resource_not_found",
            ErrorCode::ModelNotFound,
            false,
        ),
        (
            Name::Moonshot,
            "moonshot/error_429_rate_limit_rpm",
            ErrorCode::RateLimited,
            false,
        ),
        (
            Name::Moonshot,
            "moonshot/error_429_engine_overloaded",
            ErrorCode::Overloaded,
            false,
        ),
        (
            Name::Qwen,
            "qwen/error_429_throttling_allocation_quota",
            ErrorCode::RateLimited,
            false,
        ),
        (
            Name::Qwen,
            "qwen/error_400_context_length",
            ErrorCode::ContextTooLong,
            false,
        ),
        (
            Name::Qwen,
            "qwen/error_400_enable_thinking_non_streaming",
            ErrorCode::InvalidRequest,
            false,
        ),
        (
            Name::Ark,
            "volcengine/error_401_authentication_format",
            ErrorCode::AuthFailed,
            false,
        ),
        (
            Name::Ark,
            "volcengine/error_400_missing_parameter",
            ErrorCode::InvalidRequest,
            false,
        ),
        (
            Name::DeepSeek,
            "deepseek/error_400_context_length",
            ErrorCode::ContextTooLong,
            false,
        ),
        (
            Name::DeepSeek,
            "deepseek/error_402_insufficient_balance",
            ErrorCode::RateLimited,
            true,
        ),
        (
            Name::DeepSeek,
            "deepseek/error_400_missing_reasoning_content_v32",
            ErrorCode::InvalidRequest,
            false,
        ),
        (
            Name::DeepSeek,
            "deepseek/responses_api_error_400",
            ErrorCode::InvalidRequest,
            false,
        ),
    ];
    for (flavor, name, code, quota) in cases {
        let e = classify(*flavor, name);
        assert_eq!(
            (e.code, e.quota_exhausted),
            (*code, *quota),
            "{name}: {}",
            e.message
        );
    }
    // DashScope's quota is a throttle: wait a minute, keep the key, no
    // day's rest.
    let e = classify(Name::Qwen, "qwen/error_429_throttling_allocation_quota");
    assert_eq!(e.retry_after, Some(std::time::Duration::from_secs(60)));
    assert_eq!(e.rests_for, None);
    // Moonshot gives its wait only in prose.
    let e = classify(Name::Moonshot, "moonshot/error_429_rate_limit_rpm");
    assert_eq!(e.retry_after, Some(std::time::Duration::from_secs(1)));
    // The same Qwen body read as generic OpenAI is a spent balance: the
    // flavor is what changes it.
    let e = classify(Name::Generic, "qwen/error_429_throttling_allocation_quota");
    assert!(e.quota_exhausted);
}

#[test]
fn minimax_errors_on_http_200_and_reasoning_details_are_read() {
    let (_, _, body) = fixture("minimax/error_200_base_resp_insufficient_balance");
    let data = String::from_utf8(body).unwrap();
    let event = data.trim().strip_prefix("data: ").unwrap();
    let e = for_name(Name::MiniMax)
        .error_in_answer(event.as_bytes())
        .unwrap();
    assert_eq!((e.code, e.quota_exhausted), (ErrorCode::RateLimited, true));
    assert!(e.message.contains("insufficient balance"), "{}", e.message);
    // A success with `base_resp.status_code: 0` is a success, its extras gone.
    let ok = read_fixture("minimax/chat_response_with_base_resp.json");
    assert!(for_name(Name::MiniMax)
        .error_in_answer(ok.to_string().as_bytes())
        .is_none());
    let ir = crate::adapters::openai::decode(ok.to_string().as_bytes()).unwrap();
    let written = String::from_utf8(switchyard_protocol::openai::encode_response(&ir)).unwrap();
    assert!(
        !written.contains("base_resp") && !written.contains("sensitive"),
        "{written}"
    );
    // `reasoning_split`'s answer: reasoning from `reasoning_details`.
    let msg = read_fixture("minimax/chat_reasoning_split.response_message.json");
    let answer = json!({"id": "x", "model": "MiniMax-M2", "choices": [{"index": 0, "message": msg["message"], "finish_reason": "stop"}]});
    let mut ir = crate::adapters::openai::decode(answer.to_string().as_bytes()).unwrap();
    settle(&*for_name(Name::MiniMax), &ReplayStore::default(), &mut ir);
    assert_eq!(
        ir.reasoning.as_deref(),
        Some("I need to check the weather for Beijing...")
    );
    assert_eq!(
        ir.text.as_deref(),
        Some("The weather in Beijing is sunny...")
    );
    // Inline `<think>` (without `reasoning_split`) is split off.
    let answer = json!({"choices": [{"message": {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello"}, "finish_reason": "stop"}]});
    let mut ir = crate::adapters::openai::decode(answer.to_string().as_bytes()).unwrap();
    settle(&*for_name(Name::MiniMax), &ReplayStore::default(), &mut ir);
    assert_eq!(
        (ir.reasoning.as_deref(), ir.text.as_deref()),
        (Some("hm"), Some("Hello"))
    );
}

/// A DashScope 429 that names a daily quota rests until the time it
/// states, else until midnight in Beijing; the per-minute throttle and
/// other 429s do not.
#[test]
fn a_daily_dashscope_quota_rests_until_its_reset() {
    use std::time::{Duration, UNIX_EPOCH};
    // 2026-05-01 12:00 UTC = 20:00 in Beijing.
    let now = UNIX_EPOCH + Duration::from_secs(1_777_636_800);
    let rest = |text: &str| super::qwen::daily_rest(text, now);
    let hours = |h: u64| Some(Duration::from_secs(h * 3600));
    assert_eq!(
        rest("Requests per day limit exceeded, please try again tomorrow."),
        hours(4)
    );
    assert_eq!(
        rest("You have exceeded the daily quota of this model"),
        hours(4)
    );
    assert_eq!(rest("今日免费额度已用完"), hours(4));
    // A stated reset (Beijing time) wins over midnight.
    assert_eq!(
        rest("每日调用次数已达上限，将在 2026-05-01 22:30:00 重置"),
        Some(Duration::from_secs(9000))
    );
    // One already past, or days away, is not believed.
    assert_eq!(rest("daily quota, resets 2026-05-01 10:00:00"), hours(4));
    assert_eq!(rest("daily quota, resets 2026-06-01 00:00:00"), hours(4));
    // The per-minute kinds.
    let (_, _, body) = fixture("qwen/error_429_throttling_allocation_quota");
    assert_eq!(rest(&String::from_utf8(body).unwrap()), None);
    for minute in [
        "Requests rate limit exceeded, please try again later.",
        "Allocated quota exceeded, please increase your quota limit.",
        "Request rate increased too quickly.",
    ] {
        assert_eq!(rest(minute), None, "{minute}");
    }
    // Through the flavor: a day's rest on the 429.
    let body = br#"{"error":{"code":"Throttling.AllocationQuota","message":"Free quota per day exceeded.","type":"insufficient_quota"}}"#;
    let mut r = crate::adapters::openai::errors::read(body);
    for_name(Name::Qwen).read_error(http::StatusCode::TOO_MANY_REQUESTS, body, &mut r);
    assert!(r
        .rests_for
        .is_some_and(|d| d > Duration::ZERO && d <= Duration::from_secs(86_400)));
    assert!(!r.quota);
    let e = crate::adapters::errors::classify(
        http::StatusCode::TOO_MANY_REQUESTS,
        &http::HeaderMap::new(),
        r,
        &[],
    );
    assert_eq!((e.code, e.quota_exhausted), (ErrorCode::RateLimited, false));
    assert_eq!(e.retry_after, e.rests_for);
}
