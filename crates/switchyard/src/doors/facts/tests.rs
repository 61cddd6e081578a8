//! The input estimate against what upstreams really billed (CONTRACT §10:
//! within 10%), and against `o200k_base` where no upstream counted.

use serde_json::Value;

use super::{Facts, Renders};
use crate::doors::Door;
use crate::tokenize::{self, estimate, Vocab};

fn fixture(path: &str) -> String {
    let full = format!("{}/../../fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The input an upstream billed, from its answer (JSON or a stream): every
/// kind of input token (Anthropic reports cache reads and writes apart).
fn billed(answer: &str) -> Option<u64> {
    let bodies: Vec<Value> = match serde_json::from_str::<Value>(answer) {
        Ok(v) => vec![v],
        Err(_) => answer
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect(),
    };
    let usage = bodies.iter().find_map(|b| {
        [
            "/usage",
            "/message/usage",
            "/response/usage",
            "/usageMetadata",
        ]
        .iter()
        .find_map(|p| b.pointer(p).filter(|u| u.is_object()))
        // A token count's answer is the usage itself.
        .or(b.get("input_tokens").map(|_| b))
        .cloned()
    });
    let u = usage?;
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    Some(
        n("prompt_tokens")
            + n("input_tokens")
            + n("cache_creation_input_tokens")
            + n("cache_read_input_tokens")
            + n("promptTokenCount"),
    )
}

fn facts_of(door: Door, body: &str) -> Facts {
    let inbound = door.decode(body).expect("the door decodes it");
    Facts::read(&inbound, &http::HeaderMap::new(), &[])
}

/// Every recorded request/answer pair a door can read, with the way its
/// upstream renders tools. Left out: pairs whose request was written by
/// hand for a recorded answer of another request (`deepseek/chat_text`,
/// `anthropic/messages_json_via_forced_tool`, `anthropic/messages_text`'s
/// is one too but kept: it is the shape every SDK sends).
const RECORDED: &[(&str, Door, Renders)] = &[
    ("openai/chat_text", Door::OpenAiChat, Renders::Compact),
    ("openai/chat_tool_call", Door::OpenAiChat, Renders::Compact),
    (
        "openai/chat_tool_result",
        Door::OpenAiChat,
        Renders::Compact,
    ),
    (
        "openai/chat_json_schema",
        Door::OpenAiChat,
        Renders::Compact,
    ),
    ("azure/chat_text", Door::OpenAiChat, Renders::Compact),
    (
        "deepseek/thinking_tool_loop_turn1",
        Door::OpenAiChat,
        Renders::Template,
    ),
    (
        "deepseek/thinking_tool_loop_turn2",
        Door::OpenAiChat,
        Renders::Template,
    ),
    (
        "deepseek/thinking_tool_loop_turn3",
        Door::OpenAiChat,
        Renders::Template,
    ),
    ("qwen/chat_tool_call", Door::OpenAiChat, Renders::Template),
    (
        "zhipu/chat_reasoning_effort",
        Door::OpenAiChat,
        Renders::Template,
    ),
    ("zhipu/chat_thinking", Door::OpenAiChat, Renders::Template),
    (
        "zhipu/preserved_thinking_turn1",
        Door::OpenAiChat,
        Renders::Template,
    ),
    (
        "zhipu/preserved_thinking_turn2",
        Door::OpenAiChat,
        Renders::Template,
    ),
    (
        "openai-responses/input_tokens",
        Door::Responses,
        Renders::Compact,
    ),
    (
        "openai-responses/responses_function_call",
        Door::Responses,
        Renders::Compact,
    ),
    (
        "openai-responses/responses_function_call_output",
        Door::Responses,
        Renders::Compact,
    ),
    (
        "openai-responses/responses_json_schema",
        Door::Responses,
        Renders::Compact,
    ),
    (
        "openai-responses/responses_reasoning_replay",
        Door::Responses,
        Renders::Compact,
    ),
    (
        "openai-responses/responses_text",
        Door::Responses,
        Renders::Compact,
    ),
    (
        "openai-responses/stream_function_call",
        Door::Responses,
        Renders::Compact,
    ),
    (
        "openai-responses/stream_text",
        Door::Responses,
        Renders::Compact,
    ),
    (
        "anthropic/messages_text",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
    (
        "anthropic/messages_tool_use",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
    (
        "anthropic/messages_tool_result",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
    (
        "anthropic/messages_structured_output",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
    (
        "anthropic/count_tokens",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
    (
        "anthropic/stream_text",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
    (
        "anthropic/stream_tool_use",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
    (
        "vertex/anthropic_rawpredict",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
    (
        "bedrock/invoke_anthropic",
        Door::AnthropicMessages,
        Renders::Anthropic,
    ),
];

/// A request as a door receives it: Vertex and Bedrock bodies name the
/// model in the URL (and some recorders left it out); a token count has no
/// `max_tokens`.
fn as_sent(door: Door, request: &str) -> String {
    let mut v: Value = serde_json::from_str(request).unwrap();
    let o = v.as_object_mut().unwrap();
    o.entry("model").or_insert("m".into());
    if door == Door::AnthropicMessages {
        o.remove("anthropic_version");
        o.entry("max_tokens").or_insert(1024.into());
    }
    v.to_string()
}

/// A few tokens either way on a prompt of a few dozen is each provider's
/// own framing (BOS, role markers, how it spells a tool without a
/// description), not the estimate's error: `tokenize::count_chat` itself is
/// 7 over on `responses_function_call`.
const SMALL: u64 = 8;

#[test]
fn the_estimate_is_within_ten_percent_of_what_upstreams_billed() {
    let (mut est_sum, mut real_sum) = (0, 0);
    let mut report = Vec::new();
    for (name, door, renders) in RECORDED {
        let request = fixture(&format!("providers/{name}.request.json"));
        let answer = std::fs::read_to_string(format!(
            "{}/../../fixtures/providers/{name}.response.json",
            env!("CARGO_MANIFEST_DIR")
        ))
        .or_else(|_| {
            std::fs::read_to_string(format!(
                "{}/../../fixtures/providers/{name}.sse",
                env!("CARGO_MANIFEST_DIR")
            ))
        })
        .unwrap();
        let real = billed(&answer).unwrap_or_else(|| panic!("{name}: no usage"));
        let est = facts_of(*door, &as_sent(*door, &request)).prompt_on(*renders);
        let err = (est as f64 - real as f64) / real as f64;
        report.push(format!(
            "{name}: billed {real}, estimated {est} ({err:+.3})"
        ));
        assert!(
            err.abs() <= 0.10 || est.abs_diff(real) <= SMALL,
            "{name}: billed {real}, estimated {est} ({err:+.3})"
        );
        est_sum += est;
        real_sum += real;
    }
    let overall = (est_sum as f64 - real_sum as f64) / real_sum as f64;
    println!("{}\noverall {overall:+.3}", report.join("\n"));
    assert!(
        overall.abs() <= 0.05,
        "{overall:+.3}\n{}",
        report.join("\n")
    );
}

/// Requests the agent CLIs really send (no upstream answered them): the
/// estimate against `tokenize::count_chat` (`o200k_base`, OpenAI's own
/// counting, which the recorded OpenAI pairs match).
#[test]
fn agent_requests_are_estimated_within_ten_percent_of_tiktoken() {
    for (name, door) in [
        ("claude_code/text_01_messages", Door::AnthropicMessages),
        (
            "claude_code/tool_loop_02_messages_tool_result",
            Door::AnthropicMessages,
        ),
        (
            "claude_code/sonnet45_02_messages_tool_result",
            Door::AnthropicMessages,
        ),
        (
            "claude_code/thinking_02_messages_thinking_replay",
            Door::AnthropicMessages,
        ),
        ("codex/text_01_responses", Door::Responses),
        (
            "codex/tool_loop_02_responses_function_call_output",
            Door::Responses,
        ),
    ] {
        let capture: Value =
            serde_json::from_str(&fixture(&format!("agents/{name}.json"))).unwrap();
        let body = capture["body"].to_string();
        let inbound = door.decode(&body).unwrap();
        let exact = tokenize::count_chat(inbound.ir(), "gpt-4o");
        let est = facts_of(door, &body).prompt_on(Renders::Compact);
        let err = (est as f64 - exact as f64) / exact as f64;
        assert!(
            err.abs() <= 0.10,
            "{name}: o200k {exact}, estimated {est} ({err:+.3})"
        );
    }
}

/// CJK text has no spaces to split on: the estimate goes by the character.
const CJK: &[&str] = &[
    "网关在把请求发送给上游之前，会先估算这次请求最多可能花费多少。估算包括系统提示、全部消息、工具定义和图片，以及输出上限乘以请求的候选数量。如果客户的预算不足以覆盖这个最坏情况，请求会在发送前被拒绝，而不是事后才发现已经超支。",
    "北京是中华人民共和国的首都，也是全国的政治、文化和国际交往中心。这座城市有三千多年的建城史，拥有故宫、天坛、颐和园等众多世界文化遗产。每年都有大量游客来到这里参观名胜古迹，品尝烤鸭和炸酱面等传统美食。",
    "请用 Python 写一个函数 `parse_config(path)`，读取 YAML 配置文件并返回字典。如果文件不存在，抛出 FileNotFoundError；如果格式错误，返回一个包含错误行号的异常信息，并在日志里记录文件路径。",
    "東京は日本の首都であり、世界でも有数の大都市です。渋谷や新宿などの繁華街には多くの人が集まり、夜遅くまでにぎわっています。一方で、浅草や上野には昔ながらの街並みが残っており、伝統的な文化に触れることができます。",
    "このゲートウェイは、クライアントの予算を超えないように、リクエストを送る前に最悪の場合の費用を予約します。応答が終わると、実際の使用量で精算され、余った分はすぐに戻ります。",
    "서울은 대한민국의 수도이며 정치, 경제, 문화의 중심지입니다. 한강을 따라 많은 공원이 있고, 경복궁과 같은 역사적인 궁궐도 도시 곳곳에 남아 있습니다. 최근에는 기술 산업이 빠르게 성장하고 있습니다.",
];

#[test]
fn cjk_text_is_estimated_by_the_character() {
    let (mut est_sum, mut real_sum) = (0, 0);
    for text in CJK {
        let (est, real) = (estimate::text(text), Vocab::O200k.count(text));
        let err = (est as f64 - real as f64) / real as f64;
        // One passage's own mix of common and rare characters moves it a
        // little; a conversation's worth averages out.
        assert!(
            err.abs() <= 0.15,
            "{text}: o200k {real}, estimated {est} ({err:+.3})"
        );
        est_sum += est;
        real_sum += real;
    }
    let overall = (est_sum as f64 - real_sum as f64) / real_sum as f64;
    assert!(overall.abs() <= 0.10, "{overall:+.3}");
}

#[test]
fn every_part_of_the_request_is_counted() {
    let base = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let plain = facts_of(Door::OpenAiChat, base).prompt_tokens;
    // Tool definitions: 400 KB of them is ~100k tokens, not nothing.
    let description = "Reads a file from the workspace and returns its lines. ".repeat(20);
    let tool = serde_json::json!({"type": "function", "function": {"name": "read_file", "description": description,
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": description}}}}});
    let tools: Vec<Value> = (0..200).map(|_| tool.clone()).collect();
    let body = serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools}).to_string();
    assert!(body.len() > 400_000);
    let f = facts_of(Door::OpenAiChat, &body);
    assert!(f.prompt_tokens > 80_000, "{}", f.prompt_tokens);
    // Anthropic bills the JSON and its tool prompt on top.
    assert!(f.prompt_on(Renders::Anthropic) > f.prompt_tokens);
    // An image, whatever its size, is one image.
    let data = "A".repeat(2_000_000);
    let image = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":[{{"type":"image_url","image_url":{{"url":"data:image/png;base64,{data}"}}}}]}}]}}"#
    );
    let f = facts_of(Door::OpenAiChat, &image);
    assert_eq!(
        f.prompt_tokens,
        plain - 1 + estimate::BINARY_TOKENS,
        "{}",
        f.prompt_tokens
    );
    // System prompts on the Messages door, instructions on the Responses door.
    let system = "You are a careful assistant. ".repeat(100);
    let an = format!(
        r#"{{"model":"m","max_tokens":5,"system":"{system}","messages":[{{"role":"user","content":"hi"}}]}}"#
    );
    assert!(facts_of(Door::AnthropicMessages, &an).prompt_tokens > 500);
    let rs = format!(r#"{{"model":"m","instructions":"{system}","input":"hi"}}"#);
    assert!(facts_of(Door::Responses, &rs).prompt_tokens > 500);
    // A Responses request only the passthrough can serve still counts.
    let opaque = format!(
        r#"{{"model":"m","input":[{{"type":"item_reference","id":"x"}},{{"role":"user","content":"{system}"}}]}}"#
    );
    assert!(facts_of(Door::Responses, &opaque).prompt_tokens > 500);
}

#[test]
fn output_is_the_cap_times_the_choices() {
    let body =
        r#"{"model":"m","n":50,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}"#;
    let f = facts_of(Door::OpenAiChat, body);
    assert_eq!(f.choices(), 50);
    assert_eq!(f.output_worst(256), 5000);
    assert_eq!(f.estimated_total(), f.prompt_tokens + 5000);
    // No cap: the default, for every choice.
    let body = r#"{"model":"m","n":4,"messages":[{"role":"user","content":"hi"}]}"#;
    assert_eq!(facts_of(Door::OpenAiChat, body).output_worst(256), 1024);
}

/// Documents, search results and server tool blocks reach an Anthropic
/// upstream only through the passthrough (a translation drops them): they
/// count there, and only there.
#[test]
fn what_only_the_anthropic_passthrough_carries_counts_on_anthropic() {
    let page = "The gateway reserves the worst case before it sends. ".repeat(200);
    let pdf = "JVBERi0xLjQK".repeat(50_000);
    let body = serde_json::json!({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": page}},
            {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}},
            {"type": "text", "text": "Summarise."}
        ]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "search_result", "source": "https://example.com", "title": "x", "content": [{"type": "text", "text": page}]}
        ]}]}
    ]})
    .to_string();
    let f = facts_of(Door::AnthropicMessages, &body);
    let page_tokens = estimate::text(&page);
    let extra = f.prompt_on(Renders::Anthropic) - f.prompt_tokens;
    assert!(
        extra >= 2 * page_tokens + estimate::BINARY_TOKENS
            && extra < 3 * page_tokens + 2 * estimate::BINARY_TOKENS,
        "{extra} for two {page_tokens}-token texts and a PDF"
    );
    assert!(
        f.prompt_tokens < page_tokens,
        "a translation carries none of it"
    );
}
