//! OpenAI responses and stream chunks: peeking (for usage, finish and text
//! without re-encoding), IR → OpenAI encoding, and OpenAI chunks → IR events.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use memchr::memmem::Finder;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::wire::WireUsage;
use crate::ir::{self, FinishReason, StreamEvent};

/// What the gateway reads from a non-streamed answer it forwards unchanged.
#[derive(Debug, Deserialize)]
pub struct ResponsePeek<'a> {
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub model: Option<Cow<'a, str>>,
    #[serde(default)]
    pub created: Option<u64>,
    /// `null` on MiniMax's in-band errors (HTTP 200 with `base_resp`).
    #[serde(default, borrow, deserialize_with = "null_as_empty")]
    pub choices: Vec<PeekChoice<'a>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
pub struct PeekChoice<'a> {
    #[serde(default, borrow)]
    pub message: Option<PeekMessage<'a>>,
    #[serde(default, borrow)]
    pub delta: Option<PeekMessage<'a>>,
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Default, Deserialize)]
pub struct PeekMessage<'a> {
    #[serde(default, borrow)]
    pub content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// Some compatible servers (vLLM, OpenRouter) say `reasoning`.
    #[serde(default, borrow)]
    pub reasoning: Option<Cow<'a, str>>,
    /// MiniMax (`reasoning_split`) and OpenRouter: reasoning as a list of
    /// `{"type": "reasoning.text", "text": …}`.
    #[serde(default, borrow)]
    pub reasoning_details: Option<Vec<ReasoningDetail<'a>>>,
    #[serde(default, borrow)]
    pub refusal: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub tool_calls: Option<Vec<PeekToolCall<'a>>>,
}

#[derive(Debug, Deserialize)]
pub struct ReasoningDetail<'a> {
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
}

impl PeekMessage<'_> {
    /// The reasoning text, whichever field it came in.
    pub fn reasoning_text(&self) -> Option<Cow<'_, str>> {
        if let Some(r) = self
            .reasoning_content
            .as_deref()
            .or(self.reasoning.as_deref())
        {
            return Some(Cow::Borrowed(r));
        }
        let details = self.reasoning_details.as_ref()?;
        let texts: Vec<&str> = details.iter().filter_map(|d| d.text.as_deref()).collect();
        match texts.as_slice() {
            [] => None,
            [one] => Some(Cow::Borrowed(one)),
            many => Some(Cow::Owned(many.concat())),
        }
    }
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[derive(Debug, Deserialize)]
pub struct PeekToolCall<'a> {
    #[serde(default)]
    pub index: Option<u32>,
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub function: Option<PeekFunction<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct PeekFunction<'a> {
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub arguments: Option<Cow<'a, str>>,
}

/// One stream chunk, as much as the gateway needs of it.
#[derive(Debug, Deserialize)]
pub struct ChunkPeek<'a> {
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub model: Option<Cow<'a, str>>,
    #[serde(default)]
    pub created: Option<u64>,
    /// `null` on MiniMax's in-band errors (HTTP 200 with `base_resp`).
    #[serde(default, borrow, deserialize_with = "null_as_empty")]
    pub choices: Vec<PeekChoice<'a>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// An in-band error (`data: {"error": …}`).
    #[serde(default, borrow)]
    pub error: Option<&'a RawValue>,
}

/// One chunk of an OpenAI stream forwarded to an OpenAI client: only what
/// accounting and resume need (text, whether a tool call is under way, the
/// finish, usage, an in-band error). The envelope (`id`, `model`, `created`)
/// is read from the first chunk only, with [`ChunkPeek`]; every other key is
/// skipped without being built.
#[derive(Debug, Deserialize)]
pub struct PassChunk<'a> {
    #[serde(default, borrow)]
    pub choices: Vec<PassChoice<'a>>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// An in-band error (`data: {"error": …}`).
    #[serde(default, borrow)]
    pub error: Option<&'a RawValue>,
}

#[derive(Debug, Deserialize)]
pub struct PassChoice<'a> {
    #[serde(default, borrow)]
    pub delta: Option<PassDelta<'a>>,
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
pub struct PassDelta<'a> {
    #[serde(default, borrow)]
    pub content: Option<Cow<'a, str>>,
    /// DeepSeek-style reasoning text (billed as output).
    #[serde(default, borrow)]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// What a call cut short is billed for, and that a tool call is open.
    #[serde(default, borrow)]
    pub tool_calls: Option<Vec<PassToolCall<'a>>>,
}

/// A tool call's delta on the pass: its name and argument text only.
#[derive(Debug, Deserialize)]
pub struct PassToolCall<'a> {
    #[serde(default, borrow)]
    pub function: Option<PassFunction<'a>>,
}

#[derive(Debug, Deserialize)]
pub struct PassFunction<'a> {
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub arguments: Option<Cow<'a, str>>,
}

/// Just what a forwarded answer is accounted by: the upstream's model and
/// the usage.
#[derive(Debug, Default)]
pub struct UsagePeek<'a> {
    pub model: Option<Cow<'a, str>>,
    pub usage: Option<WireUsage>,
}

#[derive(Debug)]
pub struct NotAnObject;

impl std::fmt::Display for NotAnObject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the answer is not a whole JSON object")
    }
}

/// Reads `model` and `usage` of an answer forwarded byte for byte, without
/// parsing the choices in between (on a passthrough the full parse was the
/// gateway's single largest cost). A body that is not one whole object (a
/// cut answer, an HTML error page) is refused. Keys are found as `"name"`
/// followed by `:`; a string *value* never matches, since quotes inside JSON
/// strings are escaped. `model` is the first such key (it precedes the
/// choices in every OpenAI-compatible answer), `usage` the last (it follows
/// them); each value is then read by serde_json.
pub fn peek_usage(body: &[u8]) -> Result<UsagePeek<'_>, NotAnObject> {
    let trimmed = body.trim_ascii();
    if !(trimmed.starts_with(b"{") && trimmed.ends_with(b"}")) {
        return Err(NotAnObject);
    }
    // Built once: a finder's set-up costs more than a short search.
    static MODEL: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"model\""));
    static USAGE: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\"usage\""));
    let model = key_value(body, MODEL.find_iter(body));
    // The last `"usage"` key, found forward: memchr's reverse search has no
    // SIMD path, and it cost more than reading the usage itself.
    let usage = USAGE
        .find_iter(body)
        .filter_map(|at| value_after_key(body, at))
        .last()
        .and_then(read_value);
    Ok(UsagePeek { model, usage })
}

/// The text after `"key":` when the hit at `at` is a key.
fn value_after_key(body: &[u8], at: usize) -> Option<&[u8]> {
    body[at..].get(7..)?.trim_ascii_start().strip_prefix(b":")
}

/// The value after the first of `hits` that is a key, if it reads as `T`.
fn key_value<'a, T: Deserialize<'a>>(
    body: &'a [u8],
    mut hits: impl Iterator<Item = usize>,
) -> Option<T> {
    read_value(hits.find_map(|at| value_after_key(body, at))?)
}

/// The JSON value at the start of `value` (what follows it is ignored).
fn read_value<'a, T: Deserialize<'a>>(value: &'a [u8]) -> Option<T> {
    // Checked once as text: read from bytes, serde_json would check every
    // key and string on its own.
    let text = std::str::from_utf8(value).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    T::deserialize(&mut de).ok()
}

pub fn peek_response(body: &[u8]) -> Result<ResponsePeek<'_>, serde_json::Error> {
    serde_json::from_slice(body)
}

pub fn peek_chunk(data: &[u8]) -> Result<ChunkPeek<'_>, PeekError> {
    from_utf8_json(data)
}

/// The lean read of a chunk on the OpenAI→OpenAI stream pass.
pub fn peek_pass_chunk(data: &[u8]) -> Result<PassChunk<'_>, PeekError> {
    from_utf8_json(data)
}

/// Why a chunk could not be read.
#[derive(Debug)]
pub enum PeekError {
    NotUtf8,
    Json(serde_json::Error),
}

impl std::fmt::Display for PeekError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PeekError::NotUtf8 => f.write_str("not UTF-8"),
            PeekError::Json(e) => e.fmt(f),
        }
    }
}

/// Validate UTF-8 once for the whole text, then parse it as `str`: serde_json
/// re-validates every string it reads from a byte slice, which cost more
/// than the rest of a stream chunk's parse.
fn from_utf8_json<'a, T: Deserialize<'a>>(data: &'a [u8]) -> Result<T, PeekError> {
    let text = std::str::from_utf8(data).map_err(|_| PeekError::NotUtf8)?;
    serde_json::from_str(text).map_err(PeekError::Json)
}

impl ResponsePeek<'_> {
    pub fn to_ir(&self) -> ir::ChatResponse {
        let choice = self.choices.first();
        let msg = choice.and_then(|c| c.message.as_ref());
        let raw_finish = choice.and_then(|c| c.finish_reason.as_deref());
        ir::ChatResponse {
            id: self.id.as_deref().unwrap_or_default().to_owned(),
            model: self.model.as_deref().unwrap_or_default().to_owned(),
            created: self.created.unwrap_or_default(),
            text: msg.and_then(|m| m.content.as_deref()).map(str::to_owned),
            reasoning: msg.and_then(|m| m.reasoning_text()).map(Cow::into_owned),
            reasoning_signature: None,
            tool_calls: msg
                .and_then(|m| m.tool_calls.as_ref())
                .into_iter()
                .flatten()
                .map(|c| ir::ToolCall {
                    // Some OpenAI-compatible servers send calls without ids.
                    id: crate::ids::or_new(c.id.as_deref(), "call"),
                    name: c
                        .function
                        .as_ref()
                        .and_then(|f| f.name.as_deref())
                        .unwrap_or_default()
                        .to_owned(),
                    arguments: c
                        .function
                        .as_ref()
                        .and_then(|f| f.arguments.as_deref())
                        .unwrap_or_default()
                        .to_owned(),
                })
                .collect(),
            refusal: msg.and_then(|m| m.refusal.as_deref()).map(str::to_owned),
            finish_reason: raw_finish
                .map(FinishReason::from_openai)
                .unwrap_or_default(),
            raw_finish_reason: raw_finish.map(str::to_owned),
            usage: self
                .usage
                .as_ref()
                .map(WireUsage::to_ir)
                .unwrap_or_default(),
        }
    }
}

// === IR → OpenAI ===

#[derive(Serialize)]
struct OutResponse<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<OutChoice<'a>>,
    usage: WireUsage,
}

#[derive(Serialize)]
struct OutChoice<'a> {
    index: u32,
    message: OutMessage<'a>,
    logprobs: Option<()>,
    finish_reason: &'static str,
}

#[derive(Serialize)]
struct OutMessage<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutToolCall<'a>>,
    refusal: Option<&'a str>,
}

#[derive(Serialize)]
struct OutToolCall<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    function: OutFunction<'a>,
}

#[derive(Serialize)]
struct OutFunction<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    arguments: &'a str,
}

/// A whole `chat.completion` body.
pub fn encode_response(r: &ir::ChatResponse) -> Vec<u8> {
    encode_choices(std::slice::from_ref(r))
}

/// A `chat.completion` body with one choice per answer (`n` > 1); the
/// envelope and usage are the first's.
pub fn encode_choices(rs: &[ir::ChatResponse]) -> Vec<u8> {
    let Some(r) = rs.first() else {
        return Vec::new();
    };
    let out = OutResponse {
        id: &r.id,
        object: "chat.completion",
        created: r.created,
        model: &r.model,
        choices: rs
            .iter()
            .enumerate()
            .map(|(i, r)| choice(i as u32, r))
            .collect(),
        usage: WireUsage::from_ir(&r.usage),
    };
    serde_json::to_vec(&out).unwrap_or_default()
}

fn choice(index: u32, r: &ir::ChatResponse) -> OutChoice<'_> {
    OutChoice {
        index,
        message: OutMessage {
            role: "assistant",
            content: r.text.as_deref(),
            reasoning_content: r.reasoning.as_deref(),
            tool_calls: r
                .tool_calls
                .iter()
                .map(|c| OutToolCall {
                    index: None,
                    id: Some(&c.id),
                    kind: Some("function"),
                    function: OutFunction {
                        name: Some(&c.name),
                        arguments: &c.arguments,
                    },
                })
                .collect(),
            refusal: r.refusal.as_deref(),
        },
        logprobs: None,
        finish_reason: r.finish_reason.openai(),
    }
}

#[derive(Serialize)]
struct OutChunk<'a> {
    id: &'a str,
    object: &'static str,
    created: u64,
    model: &'a str,
    choices: Vec<OutChunkChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<WireUsage>,
}

#[derive(Serialize)]
struct OutChunkChoice<'a> {
    index: u32,
    delta: OutDelta<'a>,
    logprobs: Option<()>,
    finish_reason: Option<&'static str>,
}

#[derive(Serialize, Default)]
struct OutDelta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<OutToolCall<'a>>,
}

/// Envelope values repeated on every chunk of one stream.
#[derive(Debug, Clone, Default)]
pub struct ChunkEnvelope {
    pub id: String,
    pub model: String,
    pub created: u64,
}

/// One IR event as a `chat.completion.chunk` JSON payload (without `data: `).
/// `Start` becomes the role chunk; `Usage` the `choices: []` usage chunk.
pub fn encode_chunk(env: &ChunkEnvelope, ev: &StreamEvent) -> Vec<u8> {
    let mut delta = OutDelta::default();
    let mut finish = None;
    let mut usage = None;
    let mut choices = true;
    match ev {
        StreamEvent::Start { .. } => {
            delta.role = Some("assistant");
            delta.content = Some("");
        }
        StreamEvent::TextDelta(t) => delta.content = Some(t),
        StreamEvent::ReasoningDelta { text, .. } => delta.reasoning_content = Some(text),
        StreamEvent::ToolCallStart { index, id, name } => delta.tool_calls.push(OutToolCall {
            index: Some(*index),
            id: Some(id),
            kind: Some("function"),
            function: OutFunction {
                name: Some(name),
                arguments: "",
            },
        }),
        StreamEvent::ToolCallDelta { index, arguments } => delta.tool_calls.push(OutToolCall {
            index: Some(*index),
            id: None,
            kind: None,
            function: OutFunction {
                name: None,
                arguments,
            },
        }),
        StreamEvent::Usage(u) => {
            usage = Some(WireUsage::from_ir(u));
            choices = false;
        }
        StreamEvent::Finish { reason, .. } => finish = Some(reason.openai()),
    }
    let out = OutChunk {
        id: &env.id,
        object: "chat.completion.chunk",
        created: env.created,
        model: &env.model,
        choices: if choices {
            vec![OutChunkChoice {
                index: 0,
                delta,
                logprobs: None,
                finish_reason: finish,
            }]
        } else {
            Vec::new()
        },
        usage,
    };
    serde_json::to_vec(&out).unwrap_or_default()
}

// === OpenAI chunks → IR ===

/// Turns OpenAI chunks into IR events, remembering which tool calls have
/// started so a Qwen-style `id: ""` on a later fragment never starts one again.
#[derive(Debug, Default)]
pub struct StreamTranslator {
    started: bool,
    /// Tool calls by the upstream's `index`: their IR index and whether
    /// their start went out. IR indices count calls in order of arrival
    /// (0, 1, …) whatever numbers the upstream sends, so an `index` of
    /// 4294967295 is one more call, not a table that long.
    calls: HashMap<u32, (u32, bool)>,
    pub finish: Option<FinishReason>,
    pub usage: Option<ir::Usage>,
}

impl StreamTranslator {
    pub fn push(&mut self, c: &ChunkPeek, out: &mut Vec<StreamEvent>) {
        if !self.started {
            self.started = true;
            out.push(StreamEvent::Start {
                id: c.id.as_deref().unwrap_or_default().to_owned(),
                model: c.model.as_deref().unwrap_or_default().to_owned(),
                created: c.created.unwrap_or_default(),
            });
        }
        for choice in &c.choices {
            if let Some(d) = &choice.delta {
                self.delta(d, out);
            }
            // The first finish reason is the answer's end: emitted at once
            // (usage may still follow), never twice (n > 1, Azure trailers).
            if let (Some(f), None) = (&choice.finish_reason, self.finish) {
                // Some OpenAI-compatible servers (vLLM, Ollama) end a tool
                // call with `stop`: a client must still hear it was a call.
                let reason = match FinishReason::from_openai(f) {
                    FinishReason::Stop if !self.calls.is_empty() => FinishReason::ToolCalls,
                    r => r,
                };
                self.finish = Some(reason);
                out.push(StreamEvent::Finish {
                    reason,
                    raw: Some(f.to_string()),
                });
            }
        }
        if let Some(u) = &c.usage {
            let u = u.to_ir();
            self.usage = Some(u);
            out.push(StreamEvent::Usage(u));
        }
    }

    fn delta(&mut self, d: &PeekMessage, out: &mut Vec<StreamEvent>) {
        if let Some(r) = d.reasoning_text() {
            if !r.is_empty() {
                out.push(StreamEvent::ReasoningDelta {
                    text: r.into_owned(),
                    signature: None,
                });
            }
        }
        for t in [&d.content, &d.refusal].into_iter().flatten() {
            if !t.is_empty() {
                out.push(StreamEvent::TextDelta(t.to_string()));
            }
        }
        for (pos, call) in d.tool_calls.iter().flatten().enumerate() {
            let wire = call.index.unwrap_or(pos as u32);
            let next = self.calls.len() as u32;
            let (index, started) = self.calls.entry(wire).or_insert((next, false));
            let index = *index;
            let fresh_id = call.id.as_deref().filter(|id| !id.is_empty());
            if !*started {
                let name = call
                    .function
                    .as_ref()
                    .and_then(|f| f.name.as_deref())
                    .filter(|n| !n.is_empty());
                // A call starts with its id, or with its name when the
                // server sends no ids (it gets one of its own).
                if fresh_id.is_some() || name.is_some() {
                    *started = true;
                    out.push(StreamEvent::ToolCallStart {
                        index,
                        id: crate::ids::or_new(fresh_id, "call"),
                        name: name.unwrap_or_default().to_owned(),
                    });
                }
            }
            if let Some(args) = call.function.as_ref().and_then(|f| f.arguments.as_deref()) {
                if !args.is_empty() {
                    out.push(StreamEvent::ToolCallDelta {
                        index,
                        arguments: args.to_owned(),
                    });
                }
            }
        }
    }
}
