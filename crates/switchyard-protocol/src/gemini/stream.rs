//! `streamGenerateContent?alt=sse` chunks → IR events (MAPPING.md §12).
//!
//! Every chunk is a whole `GenerateContentResponse` fragment: parts are
//! deltas, `usageMetadata` is cumulative, `finishReason` comes once on the
//! last candidate chunk, and there is no terminator — finish + EOF is a
//! complete stream, EOF without finish is a cut one ([`StreamTranslator::finished`]).

use serde_json::{Map, Value};

use super::error::{parse_error, parse_status, GeminiError};
use super::response::finish_reason;
use super::wire::{InFunctionCall, InPart, InResponse, PartialArg};
use super::{compact_json, synth_call_id, synth_response_id};
use crate::ir::{self, FinishReason, StreamEvent};
use crate::sse::SseEvent;

/// A chunk that yields no events but something the caller must act on.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamProblem {
    /// Not a GenerateContentResponse: count it and skip it.
    Unparsable(String),
    /// `promptFeedback.blockReason` with no candidates (HTTP 200): report
    /// `content_filtered`.
    PromptBlocked {
        reason: String,
        message: Option<String>,
    },
    /// An error object inside the stream (`data: {"error": …}` or a bare
    /// `google.rpc.Status` body after the frames).
    StreamError(GeminiError),
}

/// Turns Gemini stream chunks into IR events, in order:
/// `Start` (first chunk) → per part `TextDelta` / `ReasoningDelta` /
/// `ToolCallStart` + one `ToolCallDelta` (whole arguments) → `Usage` (when it
/// changed) → `Finish` (once, on the chunk with `finishReason`).
///
/// A `thoughtSignature` on a non-thought part is emitted as a
/// `ReasoningDelta` with empty text just before that part's events.
#[derive(Debug, Default)]
pub struct StreamTranslator {
    started: bool,
    /// The answer's id, from the first chunk on.
    response_id: String,
    /// Tool calls started so far (the next call's index).
    calls: u32,
    partial: Option<PartialCall>,
    /// The mapped finish reason, once seen.
    pub finish: Option<FinishReason>,
    /// The latest (cumulative) usage.
    pub usage: Option<ir::Usage>,
}

/// A Vertex `partialArgs` call being assembled.
#[derive(Debug)]
struct PartialCall {
    index: u32,
    args: Value,
}

impl StreamTranslator {
    pub fn new() -> Self {
        Self::default()
    }

    /// True once a `finishReason` arrived: with EOF, the stream is complete.
    pub fn finished(&self) -> bool {
        self.finish.is_some()
    }

    /// One decoded SSE event. Events without `data:` are comments, or (as
    /// recorded from Vertex) a bare error body appended to the stream.
    pub fn push_event(
        &mut self,
        ev: &SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), StreamProblem> {
        if let Some(data) = &ev.data {
            return self.push(data, out);
        }
        if let Some(e) = parse_error(&ev.raw) {
            return Err(StreamProblem::StreamError(e));
        }
        let raw = ev.raw.trim_ascii();
        if raw.is_empty() || raw.starts_with(b":") || ev.event.is_some() {
            return Ok(());
        }
        Err(StreamProblem::Unparsable(
            "stream event without data".to_owned(),
        ))
    }

    /// One chunk's `data` payload.
    pub fn push(&mut self, data: &[u8], out: &mut Vec<StreamEvent>) -> Result<(), StreamProblem> {
        let chunk: InResponse = match serde_json::from_slice(data) {
            Ok(c) => c,
            Err(e) => {
                return Err(match parse_error(data) {
                    Some(g) => StreamProblem::StreamError(g),
                    None => StreamProblem::Unparsable(e.to_string()),
                })
            }
        };
        if let Some(err) = chunk.error {
            let e = parse_status(err.get()).unwrap_or_else(|| GeminiError {
                code: 0,
                status: String::new(),
                message: err.get().to_owned(),
                retry_delay: None,
                reason: None,
            });
            return Err(StreamProblem::StreamError(e));
        }
        if let Some((reason, message)) = chunk.blocked() {
            return Err(StreamProblem::PromptBlocked { reason, message });
        }
        if !self.started {
            self.started = true;
            // The first chunk names the answer; one without `responseId`
            // gets an id of its own, which its tool calls' ids derive from.
            let id = chunk
                .response_id
                .as_deref()
                .map_or_else(synth_response_id, str::to_owned);
            self.response_id = id.clone();
            out.push(StreamEvent::Start {
                id,
                model: chunk
                    .model_version
                    .as_deref()
                    .unwrap_or_default()
                    .to_owned(),
                created: 0,
            });
        }
        let cand = chunk.candidate();
        for p in cand
            .iter()
            .filter_map(|c| c.content.as_ref())
            .flat_map(|c| &c.parts)
        {
            self.part(p, out);
        }
        if let Some(u) = chunk.usage_metadata {
            let u = u.to_ir();
            if self.usage != Some(u) {
                self.usage = Some(u);
                out.push(StreamEvent::Usage(u));
            }
        }
        if let Some(raw) = cand.and_then(|c| c.finish_reason.as_deref()) {
            if self.finish.is_none() {
                self.close_partial(out);
                let reason = finish_reason(raw, self.calls > 0);
                self.finish = Some(reason);
                out.push(StreamEvent::Finish {
                    reason,
                    raw: Some(raw.to_owned()),
                });
            }
        }
        Ok(())
    }

    fn part(&mut self, p: &InPart, out: &mut Vec<StreamEvent>) {
        let signature = p
            .thought_signature
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        if let Some(fc) = &p.function_call {
            self.function_call(fc, signature, out);
            return;
        }
        self.close_partial(out);
        let text = p.text.as_deref().unwrap_or_default();
        if p.is_thought() {
            if !text.is_empty() || signature.is_some() {
                out.push(StreamEvent::ReasoningDelta {
                    text: text.to_owned(),
                    signature,
                });
            }
            return;
        }
        if signature.is_some() {
            out.push(StreamEvent::ReasoningDelta {
                text: String::new(),
                signature,
            });
        }
        if !text.is_empty() {
            out.push(StreamEvent::TextDelta(text.to_owned()));
        }
    }

    fn function_call(
        &mut self,
        fc: &InFunctionCall,
        signature: Option<String>,
        out: &mut Vec<StreamEvent>,
    ) {
        let streamed = !fc.partial_args.is_empty() || fc.will_continue == Some(true);
        if let Some(name) = fc.name.as_deref() {
            self.close_partial(out);
            if signature.is_some() {
                out.push(StreamEvent::ReasoningDelta {
                    text: String::new(),
                    signature,
                });
            }
            let index = self.calls;
            self.calls += 1;
            let id = fc
                .id
                .as_deref()
                .filter(|id| !id.is_empty())
                .map(str::to_owned)
                .unwrap_or_else(|| synth_call_id(index as usize, &self.response_id, name));
            out.push(StreamEvent::ToolCallStart {
                index,
                id,
                name: name.to_owned(),
            });
            if !streamed {
                let arguments = fc
                    .args
                    .map(|a| compact_json(a.get()))
                    .unwrap_or_else(|| "{}".to_owned());
                out.push(StreamEvent::ToolCallDelta { index, arguments });
                return;
            }
            self.partial = Some(PartialCall {
                index,
                args: Value::Object(Map::new()),
            });
        }
        if let Some(p) = &mut self.partial {
            for a in &fc.partial_args {
                p.apply(a);
            }
        }
        // `functionCall: {}` (or a fragment that does not continue) closes it.
        if fc.will_continue != Some(true) {
            self.close_partial(out);
        }
    }

    fn close_partial(&mut self, out: &mut Vec<StreamEvent>) {
        if let Some(p) = self.partial.take() {
            out.push(StreamEvent::ToolCallDelta {
                index: p.index,
                arguments: p.args.to_string(),
            });
        }
    }
}

impl PartialCall {
    /// Set (or, for continued strings, extend) the value at `jsonPath`.
    fn apply(&mut self, a: &PartialArg) {
        let Some(slot) = slot(&mut self.args, &a.json_path) else {
            return;
        };
        if let Some(s) = a.string_value.as_deref() {
            match slot {
                Value::String(prev) => prev.push_str(s),
                other => *other = Value::String(s.to_owned()),
            }
        } else if let Some(n) = a.number_value {
            *slot = serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number);
        } else if let Some(b) = a.bool_value {
            *slot = Value::Bool(b);
        } else if a.null_value.is_some() {
            *slot = Value::Null;
        }
    }
}

/// Most segments a `jsonPath` may have. The arguments are built as a
/// `Value`, written and dropped recursively: a path 20 000 segments deep
/// would overflow the stack (JSON parsers stop at 128 levels anyway).
const MAX_PATH_DEPTH: usize = 64;

/// How far past an array's end a path may reach, the gap filled with nulls:
/// `$[4294967295]` must not allocate four billion of them.
const MAX_ARRAY_GAP: usize = 16;

/// The value at a `$.a.b[0]` / `$['a']` path, created as needed; `None`
/// for a path that is not one, too deep, or past an array's end by more
/// than [`MAX_ARRAY_GAP`].
fn slot<'v>(root: &'v mut Value, path: &str) -> Option<&'v mut Value> {
    let mut rest = path.strip_prefix('$')?;
    let mut cur = root;
    for _ in 0..=MAX_PATH_DEPTH {
        if rest.is_empty() {
            return Some(cur);
        }
        if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            cur = object_entry(cur, &r[..end]);
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let i: usize = r[..end].parse().ok()?;
            if !cur.is_array() {
                *cur = Value::Array(Vec::new());
            }
            let arr = cur.as_array_mut()?;
            if i > arr.len() + MAX_ARRAY_GAP {
                return None;
            }
            if arr.len() <= i {
                arr.resize(i + 1, Value::Null);
            }
            cur = &mut arr[i];
            rest = &r[end + 1..];
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            cur = object_entry(cur, &r[..end]);
            rest = &r[end..];
        } else {
            return None;
        }
    }
    None
}

fn object_entry<'v>(v: &'v mut Value, key: &str) -> &'v mut Value {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m.entry(key.to_owned()).or_insert(Value::Null),
        _ => unreachable!("just made an object"),
    }
}
