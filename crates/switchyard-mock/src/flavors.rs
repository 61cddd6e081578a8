//! The OpenAI-compatible providers' quirks (MAPPING §18), served under
//! `/{flavor}/v1/chat/completions` (and `/{flavor}/chat/completions`):
//! `deepseek`, `qwen`, `zhipu`, `moonshot`, `ark`, `minimax`. Each refuses
//! what its provider refuses, with the recorded error, and shapes answers
//! and streams as its provider does: where reasoning and cached tokens are
//! reported, where a stream's usage arrives, which keys a chunk leaves out.
//! Errors beyond the status (`fixture: "zhipu/error_429_1305_overloaded"`,
//! MiniMax's HTTP 200 `base_resp`) are the behaviors' `fixture`.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use crate::render::{Payload, Rendered};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    DeepSeek,
    Qwen,
    Zhipu,
    Moonshot,
    Ark,
    MiniMax,
}

const ALL: [(&str, Flavor); 6] = [
    ("deepseek", Flavor::DeepSeek),
    ("qwen", Flavor::Qwen),
    ("zhipu", Flavor::Zhipu),
    ("moonshot", Flavor::Moonshot),
    ("ark", Flavor::Ark),
    ("minimax", Flavor::MiniMax),
];

/// A flavored path's flavor and the OpenAI path under it.
pub fn split_path(path: &str) -> (Option<Flavor>, &str) {
    for (name, f) in ALL {
        if let Some(rest) = path
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(name))
            .filter(|r| r.starts_with('/'))
        {
            return (Some(f), rest);
        }
    }
    (None, path)
}

/// Why the provider refuses this request.
pub enum Refusal {
    /// Its recorded error envelope.
    Fixture(&'static str),
    /// A 400 in its envelope with this message.
    Message(String),
}

fn messages(json: &Value) -> impl Iterator<Item = &Map<String, Value>> {
    json.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
}

fn role(m: &Map<String, Value>) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or_default()
}

fn has_calls(m: &Map<String, Value>) -> bool {
    m.get("tool_calls")
        .and_then(Value::as_array)
        .is_some_and(|c| !c.is_empty())
}

/// The request's refusal by the flavor's rules, if it breaks one.
pub fn refusal(f: Flavor, json: &Value, stream: bool) -> Option<Refusal> {
    let model = json
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match f {
        Flavor::DeepSeek => {
            if messages(json).any(|m| role(m) == "developer") {
                return Some(Refusal::Fixture(
                    "deepseek/error_400_unknown_role_developer",
                ));
            }
            let legacy = model.starts_with("deepseek-r1");
            let replayed = |m: &Map<String, Value>| m.contains_key("reasoning_content");
            if legacy && messages(json).any(|m| role(m) == "assistant" && replayed(m)) {
                return Some(Refusal::Fixture(
                    "deepseek/error_400_reasoning_content_in_input_legacy_r1",
                ));
            }
            let thinking = model == "deepseek-reasoner"
                || model.starts_with("deepseek-v4")
                || json["thinking"]["type"] == "enabled";
            let missing =
                messages(json).any(|m| role(m) == "assistant" && has_calls(m) && !replayed(m));
            (!legacy && thinking && missing).then_some(Refusal::Fixture(
                "deepseek/error_400_missing_reasoning_content_v32",
            ))
        }
        Flavor::Qwen => {
            let off = json.get("enable_thinking") == Some(&Value::Bool(false));
            (!stream && model.starts_with("qwen3") && !off).then_some(Refusal::Fixture(
                "qwen/error_400_enable_thinking_non_streaming",
            ))
        }
        Flavor::Ark => {
            let cap = json.get("max_tokens").and_then(Value::as_u64);
            cap.filter(|n| *n > ARK_CAP).map(|n| {
                Refusal::Message(format!(
                    "The parameter `max_tokens` specified in the request are not valid: {n} exceeds the model's limit of {ARK_CAP}."
                ))
            })
        }
        Flavor::MiniMax => {
            let choice = json.get("tool_choice");
            let ok = choice.is_none_or(|c| c == "none" || c == "auto");
            (!ok).then(|| Refusal::Message("invalid params, tool_choice".into()))
        }
        Flavor::Zhipu | Flavor::Moonshot => None,
    }
}

/// The output cap Ark's coding-plan models enforce.
const ARK_CAP: u64 = 32768;

/// The rendered OpenAI answer in the flavor's own shape. `reasoning`: the
/// behavior's, which a thinking model also gives before a tool call.
pub fn reshape(f: Flavor, rendered: &mut Rendered, request: &Value, reasoning: Option<&str>) {
    let split = request.get("reasoning_split") == Some(&Value::Bool(true));
    let reasoning = reasoning.filter(|r| !r.is_empty());
    match &mut rendered.payload {
        Payload::Full(body) => {
            if let Ok(mut v) = serde_json::from_slice::<Value>(body) {
                for c in v["choices"].as_array_mut().into_iter().flatten() {
                    let m = &mut c["message"];
                    if let (Some(r), true) = (reasoning, m["tool_calls"].is_array()) {
                        m["reasoning_content"] = json!(r);
                    }
                }
                whole(f, &mut v, split);
                *body = Bytes::from(format!("{v}\n"));
            }
        }
        Payload::Events(events) => {
            let mut all = std::mem::take(events);
            if let Some(r) = reasoning {
                think_before_calls(&mut all, r);
            }
            *events = stream(f, all, split);
            if f == Flavor::Zhipu {
                rendered.content_type = "text/event-stream;charset=UTF-8";
            }
        }
    }
}

/// A reasoning chunk before a streamed tool call's first chunk.
fn think_before_calls(events: &mut Vec<Bytes>, reasoning: &str) {
    let first = events.first().and_then(|e| {
        let data = std::str::from_utf8(e).ok()?.strip_prefix("data: ")?;
        serde_json::from_str::<Value>(data.trim_end()).ok()
    });
    let Some(mut c) = first.filter(|c| c["choices"][0]["delta"]["tool_calls"].is_array()) else {
        return;
    };
    c["choices"][0]["delta"] =
        json!({"role": "assistant", "content": null, "reasoning_content": reasoning});
    events.insert(0, Bytes::from(format!("data: {c}\n\n")));
}

fn whole(f: Flavor, v: &mut Value, split: bool) {
    for c in v["choices"].as_array_mut().into_iter().flatten() {
        reasoning(f, &mut c["message"], split, true);
    }
    usage(f, &mut v["usage"]);
    match f {
        Flavor::Zhipu => {
            v["request_id"] = v["id"].clone();
            if let Some(o) = v.as_object_mut() {
                o.remove("system_fingerprint");
            }
        }
        Flavor::MiniMax => {
            v["input_sensitive"] = json!(false);
            v["output_sensitive"] = json!(false);
            v["base_resp"] = json!({"status_code": 0, "status_msg": ""});
            for c in v["choices"].as_array_mut().into_iter().flatten() {
                c["message"]["name"] = json!("MiniMax AI");
                c["message"]["audio_content"] = json!("");
            }
        }
        _ => {}
    }
}

/// Where the flavor puts reasoning (`first`: the answer's first piece of
/// text, where MiniMax's inline `<think>` goes).
fn reasoning(f: Flavor, msg: &mut Value, split: bool, first: bool) {
    if f != Flavor::MiniMax {
        return;
    }
    let Some(o) = msg.as_object_mut() else { return };
    let Some(r) = o.remove("reasoning_content") else {
        return;
    };
    let r = r.as_str().unwrap_or_default().to_owned();
    if split {
        if !r.is_empty() {
            o.insert(
                "reasoning_details".into(),
                json!([{"type": "reasoning.text", "text": r}]),
            );
        }
    } else if first {
        let text = o.get("content").and_then(Value::as_str).unwrap_or_default();
        o.insert(
            "content".into(),
            json!(format!("<think>\n{r}\n</think>\n\n{text}")),
        );
    }
}

fn usage(f: Flavor, u: &mut Value) {
    if !u.is_object() {
        return;
    }
    let cached = u["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    let prompt = u["prompt_tokens"].as_u64().unwrap_or(0);
    let o = u.as_object_mut().expect("checked");
    match f {
        Flavor::DeepSeek => {
            o.insert("prompt_cache_hit_tokens".into(), json!(cached));
            o.insert(
                "prompt_cache_miss_tokens".into(),
                json!(prompt - cached.min(prompt)),
            );
        }
        Flavor::Moonshot => {
            o.insert("cached_tokens".into(), json!(cached));
            o.remove("prompt_tokens_details");
        }
        Flavor::Qwen => {
            o.insert(
                "prompt_tokens_details".into(),
                json!({"cached_tokens": cached}),
            );
        }
        _ => {}
    }
}

fn stream(f: Flavor, events: Vec<Bytes>, split: bool) -> Vec<Bytes> {
    let mut chunks: Vec<Option<Value>> = events
        .iter()
        .map(|e| {
            let data = std::str::from_utf8(e)
                .ok()?
                .strip_prefix("data: ")?
                .trim_end();
            (data != "[DONE]").then(|| serde_json::from_str(data).ok())?
        })
        .collect();
    // DeepSeek and GLM report usage on the finish chunk, with no
    // `choices: []` chunk after it.
    if matches!(f, Flavor::DeepSeek | Flavor::Zhipu) {
        let last_usage = chunks.iter().rposition(|c| {
            c.as_ref().is_some_and(|c| {
                c["choices"].as_array().is_some_and(Vec::is_empty) && c["usage"].is_object()
            })
        });
        if let Some(at) = last_usage {
            let u = chunks[at].as_ref().map(|c| c["usage"].clone());
            chunks.remove(at);
            let finish = chunks
                .iter_mut()
                .rev()
                .flatten()
                .find(|c| c["choices"][0]["finish_reason"].is_string());
            if let (Some(c), Some(u)) = (finish, u) {
                c["usage"] = u;
            }
        }
    }
    let mut think_open = false;
    let mut first_text = true;
    let mut out = Vec::with_capacity(events.len() + 2);
    for (raw, chunk) in events.iter().zip(chunks.iter_mut().map(Option::take)) {
        let Some(mut c) = chunk else {
            out.push(raw.clone());
            continue;
        };
        usage(f, &mut c["usage"]);
        for choice in c["choices"].as_array_mut().into_iter().flatten() {
            let d = &mut choice["delta"];
            match f {
                Flavor::MiniMax if !split => {
                    // Inline: `<think>` opens with the first reasoning,
                    // `</think>` closes before the first answer text.
                    let r = d
                        .get("reasoning_content")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    let t = d.get("content").and_then(Value::as_str).map(str::to_owned);
                    let mut text = String::new();
                    if let Some(r) = r.filter(|r| !r.is_empty()) {
                        if !think_open {
                            text.push_str("<think>\n");
                            think_open = true;
                        }
                        text.push_str(&r);
                    }
                    if let Some(t) = t.filter(|t| !t.is_empty()) {
                        if think_open && first_text {
                            text.push_str("\n</think>\n\n");
                        }
                        first_text = false;
                        text.push_str(&t);
                    }
                    if let Some(o) = d.as_object_mut() {
                        o.remove("reasoning_content");
                        o.insert("content".into(), json!(text));
                    }
                }
                Flavor::MiniMax => {
                    if let Some(o) = d.as_object_mut() {
                        if let Some(r) = o.remove("reasoning_content") {
                            if r.as_str().is_some_and(|r| !r.is_empty()) {
                                o.insert(
                                    "reasoning_details".into(),
                                    json!([{"type": "reasoning.text", "text": r}]),
                                );
                            }
                        }
                    }
                }
                Flavor::Zhipu => {
                    // Every delta repeats the role; no `finish_reason` key
                    // until the last chunk.
                    d["role"] = json!("assistant");
                    if choice["finish_reason"].is_null() {
                        if let Some(o) = choice.as_object_mut() {
                            o.remove("finish_reason");
                        }
                    }
                }
                _ => {}
            }
        }
        out.push(Bytes::from(format!("data: {c}\n\n")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavored_paths_are_recognised_and_stripped() {
        assert_eq!(
            split_path("/deepseek/v1/chat/completions"),
            (Some(Flavor::DeepSeek), "/v1/chat/completions")
        );
        assert_eq!(
            split_path("/minimax/chat/completions"),
            (Some(Flavor::MiniMax), "/chat/completions")
        );
        assert_eq!(split_path("/deepseekx/v1"), (None, "/deepseekx/v1"));
        assert_eq!(split_path("/v1/chat/completions").0, None);
    }

    #[test]
    fn deepseek_refuses_as_recorded() {
        let tool_turn = json!({"role": "assistant", "content": null,
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]});
        let body = json!({"model": "deepseek-reasoner", "messages": [tool_turn]});
        assert!(matches!(
            refusal(Flavor::DeepSeek, &body, false),
            Some(Refusal::Fixture(
                "deepseek/error_400_missing_reasoning_content_v32"
            ))
        ));
        let body = json!({"model": "deepseek-chat", "messages": [tool_turn]});
        assert!(refusal(Flavor::DeepSeek, &body, false).is_none());
        let body = json!({"model": "deepseek-r1", "messages": [{"role": "assistant", "content": "a", "reasoning_content": ""}]});
        assert!(matches!(
            refusal(Flavor::DeepSeek, &body, false),
            Some(Refusal::Fixture(
                "deepseek/error_400_reasoning_content_in_input_legacy_r1"
            ))
        ));
    }
}
