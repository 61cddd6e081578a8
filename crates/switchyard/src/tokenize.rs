//! Local token counting with OpenAI's own BPE vocabularies (`tiktoken-rs`,
//! which ships them inside the crate: nothing is downloaded at run time),
//! for `POST /v1/messages/count_tokens` on deployments whose upstream has no
//! counting endpoint (OpenAI, Azure, and OpenAI-compatible others).
//!
//! Vocabulary: `cl100k_base` for the models tiktoken maps to it (gpt-3.5,
//! gpt-4, gpt-4-turbo, text-embedding-3/ada-002); `o200k_base` for
//! everything else — gpt-4o, gpt-4.1, gpt-5, the o-series, and, as the best
//! estimate available, models that are not OpenAI's.
//!
//! A chat request is counted the way it is sent (OpenAI cookbook,
//! "How to count tokens with tiktoken", which matches the API's
//! `prompt_tokens` for these models):
//! * every message: [`PER_MESSAGE`] (3: `<|start|>{role}\n … <|end|>`) + its
//!   role + its text (+ [`PER_NAME`] and the name when it has one); an
//!   assistant's tool calls add each call's name and arguments plus
//!   [`PER_TOOL_CALL`]; an image is [`IMAGE_TOKENS`] (a 1024×1024 image at
//!   high detail: 85 + 4 tiles × 170; low detail is 85);
//! * [`REPLY_PRIMING`] (3: `<|start|>assistant<|message|>`) once;
//! * tool definitions (the cookbook's `num_tokens_for_tools`, o200k figures):
//!   per function [`FUNC_INIT`] + `name:description`; when it has
//!   properties [`PROP_INIT`], and per property [`PROP_KEY`] +
//!   `name:type:description` (an `enum` adds `ENUM_INIT` and per item
//!   `ENUM_ITEM` + the item; a nested object or array schema adds its
//!   compact JSON); then [`FUNC_END`] once. cl100k models use `FUNC_INIT` 10.
//!
//! Reasoning text sent back to the model counts as text; opaque items
//! (redacted thinking, raw Responses items) count nothing.
//!
//! Cost, and why this does not replace the hot-path [`estimate`]
//! (context-window fit, tpm and budget reservations). Measured (release
//! build, one core of a shared 2-core box, warm vocabulary, a mixed
//! English/code/JSON agent prompt; scratch binary timing `encode_ordinary`):
//! * 2 KB prompt: o200k 0.08–0.11 ms (570 tokens), cl100k ~0.14 ms;
//! * 50 KB prompt: o200k 2.1–2.4 ms (14 398 tokens), cl100k 4.2–4.8 ms;
//! * first use parses the vocabulary once: o200k ~120–160 ms, cl100k
//!   ~50 ms; both loaded: ~70 MB resident.
//!
//! The estimate walks the same bytes once without a vocabulary. Measured
//! as thread CPU time on the same box under a load of ~10 (release, a
//! scratch binary, Claude Code's and Codex's recorded requests): 4.4–6.6
//! ns a byte, ~0.25 ms for a 50 KB agent request, where `encode_ordinary`
//! took 120–150 ns a byte (~7 ms) in the same run — about 25× the cost.
//! Per whole request (`examples/estimate_cost`, bench/README's "Input
//! estimate cost"; the agents' recorded 40–50 KB requests, a quieter run):
//! the estimate 68–185 µs, `count_chat` 0.5–1.1 ms, the door's own parse
//! 78–109 µs.
//! Its error (the tests in `doors::facts`): within 10% (or a few tokens on
//! tiny prompts) of what the upstreams billed on every recorded fixture
//! pair, 5% over them all; within 10% of `o200k_base` on the agents'
//! requests; CJK within 15% a passage, 10% over the set. Decision: the
//! estimate stays on the hot path; the tokenizer serves `count_tokens`
//! only (where exactness is the point).

pub mod estimate;

use serde_json::Value;
use switchyard_protocol::ir::{ChatRequest, ContentPart, Role, Tool};
use tiktoken_rs::tokenizer::{get_tokenizer, Tokenizer};
use tiktoken_rs::CoreBPE;

pub const PER_MESSAGE: u64 = 3;
pub const PER_NAME: u64 = 1;
pub const PER_TOOL_CALL: u64 = 3;
pub const REPLY_PRIMING: u64 = 3;
pub const IMAGE_TOKENS: u64 = 765;
pub const IMAGE_TOKENS_LOW: u64 = 85;
pub const FUNC_INIT: u64 = 7;
pub const FUNC_INIT_CL100K: u64 = 10;
pub const PROP_INIT: u64 = 3;
pub const PROP_KEY: u64 = 3;
pub const ENUM_INIT: i64 = -3;
pub const ENUM_ITEM: u64 = 3;
pub const FUNC_END: u64 = 12;

/// The two vocabularies the gateway counts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vocab {
    Cl100k,
    O200k,
}

impl Vocab {
    /// The vocabulary of an upstream model name (see the module doc).
    pub fn for_model(model: &str) -> Vocab {
        match get_tokenizer(model) {
            Some(Tokenizer::Cl100kBase) => Vocab::Cl100k,
            _ => Vocab::O200k,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Vocab::Cl100k => "cl100k_base",
            Vocab::O200k => "o200k_base",
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        match self {
            Vocab::Cl100k => tiktoken_rs::cl100k_base_singleton(),
            Vocab::O200k => tiktoken_rs::o200k_base_singleton(),
        }
    }

    /// Tokens of plain text (special-token text counts as ordinary text).
    pub fn count(self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        self.bpe().encode_ordinary(text).len() as u64
    }
}

/// The tokens of text a call of `model` took or produced (what a stream
/// cut short is billed for, the input of embeddings whose upstream reports
/// no usage). Counted on the blocking pool: the first count
/// loads the vocabulary (~100 ms), which must not stall the worker thread's
/// other requests. Only cut streams and usage-less answers come here.
pub async fn count_output(model: &str, text: String) -> u64 {
    if text.is_empty() {
        return 0;
    }
    let v = Vocab::for_model(model);
    let fallback = text.len().div_ceil(4) as u64;
    tokio::task::spawn_blocking(move || count_bounded(v, &text))
        .await
        .unwrap_or(fallback)
}

/// Bytes run through the BPE at most per count; past it the rest is
/// counted at the sample's tokens per byte.
const SAMPLE: usize = 64 * 1024;
/// The longest piece handed to the BPE at once. BPE merging is quadratic in
/// a piece's length, and a run with no space (`xxxx…`, base64) is one
/// piece: cut at this length it costs what ordinary text does (a 5 MB run
/// took minutes whole).
const PIECE: usize = 128;

/// [`Vocab::count`] with bounded work, whatever the text (an upstream's
/// output is not ours to trust): pieces cut at a space where there is one
/// (where the tokenizer cuts too, so ordinary text counts the same), else
/// every [`PIECE`] bytes; at most [`SAMPLE`] bytes counted, the rest
/// extrapolated.
pub fn count_bounded(v: Vocab, text: &str) -> u64 {
    let mut counted = 0usize;
    let mut tokens = 0u64;
    let mut rest = text;
    while !rest.is_empty() && counted < SAMPLE {
        let cut = piece_end(rest);
        tokens += v.count(&rest[..cut]);
        counted += cut;
        rest = &rest[cut..];
    }
    if rest.is_empty() {
        return tokens;
    }
    let per_byte = tokens as f64 / counted.max(1) as f64;
    tokens + (rest.len() as f64 * per_byte).ceil() as u64
}

/// Where the next piece of `s` ends: before the last space within
/// [`PIECE`] bytes, else at a character boundary near it.
fn piece_end(s: &str) -> usize {
    if s.len() <= PIECE {
        return s.len();
    }
    let mut end = PIECE;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    match s[..end].rfind(' ') {
        Some(at) if at > 0 => at,
        _ => end.max(1),
    }
}

/// The prompt tokens of `req` sent to `model`.
pub fn count_chat(req: &ChatRequest, model: &str) -> u64 {
    let v = Vocab::for_model(model);
    let mut n = REPLY_PRIMING;
    for m in &req.messages {
        n += PER_MESSAGE + v.count(role(m.role));
        if let Some(name) = &m.name {
            n += PER_NAME + v.count(name);
        }
        for p in &m.content {
            n += match p {
                ContentPart::Text(t) | ContentPart::Reasoning { text: t, .. } => v.count(t),
                ContentPart::Image { detail, .. } => {
                    if detail.as_deref() == Some("low") {
                        IMAGE_TOKENS_LOW
                    } else {
                        IMAGE_TOKENS
                    }
                }
                ContentPart::RedactedReasoning(_) | ContentPart::ResponsesItem(_) => 0,
            };
        }
        for c in &m.tool_calls {
            n += PER_TOOL_CALL + v.count(&c.name) + v.count(&c.arguments);
        }
    }
    n + count_tools(&req.tools, v)
}

fn role(r: Role) -> &'static str {
    match r {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// Tool definitions, as the cookbook's `num_tokens_for_tools` counts them.
pub fn count_tools(tools: &[Tool], v: Vocab) -> u64 {
    if tools.is_empty() {
        return 0;
    }
    let func_init = match v {
        Vocab::Cl100k => FUNC_INIT_CL100K,
        Vocab::O200k => FUNC_INIT,
    };
    let mut n: i64 = 0;
    for t in tools {
        n += func_init as i64;
        let desc = t.description.as_deref().unwrap_or("");
        let desc = desc.strip_suffix('.').unwrap_or(desc);
        n += v.count(&format!("{}:{desc}", t.name)) as i64;
        let Some(props) = t.parameters.get("properties").and_then(Value::as_object) else {
            continue;
        };
        if props.is_empty() {
            continue;
        }
        n += PROP_INIT as i64;
        for (key, schema) in props {
            n += PROP_KEY as i64;
            let ty = schema.get("type").map_or(String::new(), |t| match t {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
            let pdesc = schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("");
            let pdesc = pdesc.strip_suffix('.').unwrap_or(pdesc);
            if let Some(items) = schema.get("enum").and_then(Value::as_array) {
                n += ENUM_INIT;
                for item in items {
                    n += ENUM_ITEM as i64;
                    n += match item {
                        Value::String(s) => v.count(s),
                        other => v.count(&other.to_string()),
                    } as i64;
                }
            }
            n += v.count(&format!("{key}:{ty}:{pdesc}")) as i64;
            for nested in ["properties", "items", "anyOf", "oneOf"] {
                if let Some(s) = schema.get(nested) {
                    n += v.count(&s.to_string()) as i64;
                }
            }
        }
    }
    (n + FUNC_END as i64).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::ir::Message;

    #[test]
    fn vocabularies_by_model() {
        for m in ["gpt-4o", "gpt-4o-mini", "gpt-4.1", "gpt-5", "o3-mini", "o1"] {
            assert_eq!(Vocab::for_model(m), Vocab::O200k, "{m}");
        }
        for m in [
            "gpt-4",
            "gpt-4-turbo",
            "gpt-3.5-turbo",
            "text-embedding-3-small",
        ] {
            assert_eq!(Vocab::for_model(m), Vocab::Cl100k, "{m}");
        }
        for m in ["deepseek-chat", "claude-sonnet-4", "gemini-2.5-flash"] {
            assert_eq!(Vocab::for_model(m), Vocab::O200k, "{m}");
        }
    }

    #[test]
    fn known_counts() {
        // tiktoken: "hello world" is [24912, 2375] in o200k_base and
        // [15339, 1917] in cl100k_base.
        assert_eq!(Vocab::O200k.count("hello world"), 2);
        assert_eq!(Vocab::Cl100k.count("hello world"), 2);
        assert_eq!(Vocab::O200k.count(""), 0);
        // Special-token text is ordinary text, never a control token.
        assert!(Vocab::O200k.count("<|endoftext|>") > 1);
    }

    #[test]
    fn bounded_counts_match_ordinary_text_and_stay_cheap_on_hostile_text() {
        let prose = "The quick brown fox jumps over the lazy dog; 東京は晴れです。 ".repeat(40);
        let exact = Vocab::O200k.count(&prose);
        let bounded = count_bounded(Vocab::O200k, &prose);
        assert!(
            exact.abs_diff(bounded) * 100 <= exact,
            "exact {exact}, bounded {bounded}"
        );
        // One 2 MB word (BPE's quadratic case) and 2 MB of text past the
        // sample: both finish, and neither is counted as nothing.
        let run = "x".repeat(2 << 20);
        let n = count_bounded(Vocab::O200k, &run);
        assert!(n > (2 << 20) / 64, "{n}");
        let long = prose.repeat(1_000);
        let n = count_bounded(Vocab::O200k, &long);
        let per_copy = exact as f64;
        assert!(
            ((n as f64) / 1_000.0 - per_copy).abs() <= per_copy * 0.02,
            "{n} for 1000 × {exact}"
        );
    }

    #[test]
    fn a_chat_request_counts_messages_and_tools() {
        let mut req = ChatRequest {
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentPart::Text("hello world".into())],
                ..Message::default()
            }],
            ..ChatRequest::default()
        };
        // 3 (message) + 1 ("user") + 2 ("hello world") + 3 (reply priming).
        assert_eq!(count_chat(&req, "gpt-4o"), 9);
        req.tools.push(Tool {
            name: "get_weather".into(),
            description: Some("Get the weather".into()),
            parameters: serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            strict: None,
        });
        let with_tool = count_chat(&req, "gpt-4o");
        assert!(with_tool > 9 + FUNC_INIT + FUNC_END, "{with_tool}");
    }
}
