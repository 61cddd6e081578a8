//! A Responses upstream's SSE stream → IR stream events (MAPPING §14.3
//! "Responses → unified").

use std::fmt;

use super::wire::{OutItem, WireEvent};
use super::UpstreamError;
use crate::ir::{StreamEvent, Usage};
use crate::sse::SseEvent;

/// Why [`StreamTranslator::push`] produced no events for an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The data was not a JSON event: count it and skip it.
    Unparsable(String),
    /// `error` or `response.failed` (HTTP status was already 200): the
    /// stream is over.
    Upstream(UpstreamError),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Unparsable(e) => write!(f, "unparsable stream event: {e}"),
            Problem::Upstream(e) => write!(f, "upstream {}: {}", e.code, e.message),
        }
    }
}

impl std::error::Error for Problem {}

#[derive(Debug)]
struct Call {
    item_id: Option<String>,
    output_index: Option<u32>,
    /// The IR tool-call index (running count, not `output_index`).
    index: u32,
    custom: bool,
    /// Some argument text was emitted.
    got_args: bool,
    /// Custom calls: the closing `"}` was emitted.
    closed: bool,
}

/// Turns one Responses stream into IR events: `Start` (from
/// `response.created`), `TextDelta` (`output_text` and `refusal` deltas),
/// `ReasoningDelta` (summary / reasoning text; the final `encrypted_content`
/// of a reasoning item as its signature), `ToolCallStart` / `ToolCallDelta`
/// per call item, then `Usage` and `Finish` from the terminal event.
///
/// Custom tool calls become calls with JSON arguments `{"input": "…"}`,
/// streamed as escaped fragments of that string.
#[derive(Debug, Default)]
pub struct StreamTranslator {
    started: bool,
    calls: Vec<Call>,
    refused: bool,
    failed: bool,
    finished: bool,
    usage: Option<Usage>,
    /// The response id (`response.created`) and the last sequence number
    /// seen: what a gateway writing into the same stream goes on from.
    id: String,
    last_sequence: Option<u64>,
}

impl StreamTranslator {
    pub fn new() -> Self {
        Self::default()
    }

    /// A terminal event (`response.completed` / `.incomplete`) was seen.
    /// EOF before that is a truncated stream.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The usage of the terminal event.
    /// The upstream's response id, once `response.created` came.
    pub fn response_id(&self) -> &str {
        &self.id
    }

    /// The sequence number the next event would carry.
    pub fn next_sequence(&self) -> u64 {
        self.last_sequence.map_or(0, |n| n.saturating_add(1))
    }

    pub fn usage(&self) -> Option<Usage> {
        self.usage
    }

    /// One decoded SSE event (comment-only events are ignored).
    pub fn push(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), Problem> {
        match &ev.data {
            Some(data) => self.push_data(ev.event_str(), data, out),
            None => Ok(()),
        }
    }

    /// One event by its `event:` name (used when the payload lacks `type`)
    /// and data.
    pub fn push_data(
        &mut self,
        name: Option<&str>,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), Problem> {
        let ev: WireEvent =
            serde_json::from_slice(data).map_err(|e| Problem::Unparsable(e.to_string()))?;
        let kind = ev.kind.as_deref().or(name).unwrap_or_default();
        if ev.sequence_number.is_some() {
            self.last_sequence = ev.sequence_number;
        }
        if let Some(id) = ev.response.as_ref().and_then(|r| r.id.as_deref()) {
            if self.id.is_empty() {
                self.id = id.to_owned();
            }
        }
        if kind != "error" && kind != "response.failed" {
            self.start(&ev, out);
        }
        match kind {
            "response.output_item.added" => {
                if let Some(item) = &ev.item {
                    self.item_added(item, ev.output_index, out);
                }
            }
            "response.output_text.delta" => push_text(ev.delta, out),
            "response.refusal.delta" => {
                self.refused = true;
                push_text(ev.delta, out);
            }
            "response.reasoning_summary_part.added" if ev.summary_index.unwrap_or(0) > 0 => {
                // A new paragraph of the same summary.
                out.push(StreamEvent::ReasoningDelta {
                    text: "\n\n".into(),
                    signature: None,
                });
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(text) = ev.delta.filter(|d| !d.is_empty()) {
                    out.push(StreamEvent::ReasoningDelta {
                        text,
                        signature: None,
                    });
                }
            }
            "response.function_call_arguments.delta" | "response.custom_tool_call_input.delta" => {
                if let Some(d) = ev.delta.as_deref().filter(|d| !d.is_empty()) {
                    if let Some(c) = self.call(&ev) {
                        c.got_args = true;
                        out.push(args(c, d));
                    }
                }
            }
            "response.function_call_arguments.done" | "response.custom_tool_call_input.done" => {
                // Use the whole value if the deltas were lost.
                let whole = ev.arguments.clone().or_else(|| ev.input.clone());
                if let (Some(c), Some(w)) = (self.call(&ev), whole) {
                    if !c.got_args && !w.is_empty() {
                        c.got_args = true;
                        out.push(args(c, &w));
                    }
                }
            }
            "response.output_item.done" => {
                if let Some(item) = &ev.item {
                    self.item_done(item, &ev, out);
                }
            }
            "response.completed" | "response.incomplete" => self.terminal(&ev, out),
            "error" => {
                self.failed = true;
                let e = ev.error.unwrap_or_default();
                return Err(Problem::Upstream(UpstreamError {
                    code: e
                        .code
                        .or(ev.code)
                        .or(e.kind)
                        .unwrap_or_else(|| "server_error".into()),
                    message: e.message.or(ev.message).unwrap_or_default(),
                }));
            }
            "response.failed" if !std::mem::replace(&mut self.failed, true) => {
                let e = ev.response.and_then(|r| r.error).unwrap_or_default();
                return Err(Problem::Upstream(UpstreamError {
                    code: e.code.unwrap_or_else(|| "server_error".into()),
                    message: e.message.unwrap_or_default(),
                }));
            }
            _ => {} // in_progress, content parts, annotations, hosted-tool progress
        }
        Ok(())
    }

    fn start(&mut self, ev: &WireEvent, out: &mut Vec<StreamEvent>) {
        if std::mem::replace(&mut self.started, true) {
            return;
        }
        let r = ev.response.as_ref();
        out.push(StreamEvent::Start {
            id: r.and_then(|r| r.id.clone()).unwrap_or_default(),
            model: r.and_then(|r| r.model.clone()).unwrap_or_default(),
            created: r.and_then(|r| r.created_at).unwrap_or(0),
        });
    }

    fn item_added(
        &mut self,
        item: &OutItem,
        output_index: Option<u32>,
        out: &mut Vec<StreamEvent>,
    ) {
        let custom = match item.kind.as_str() {
            "function_call" => false,
            "custom_tool_call" => true,
            _ => return,
        };
        let index = self.calls.len() as u32;
        out.push(StreamEvent::ToolCallStart {
            index,
            id: item.call_id.clone().unwrap_or_default(),
            name: item.name.clone().unwrap_or_default(),
        });
        let mut c = Call {
            item_id: item.id.clone(),
            output_index,
            index,
            custom,
            got_args: false,
            closed: false,
        };
        if custom {
            out.push(StreamEvent::ToolCallDelta {
                index,
                arguments: r#"{"input":""#.into(),
            });
        }
        let initial = if custom { &item.input } else { &item.arguments };
        if let Some(a) = initial.as_deref().filter(|a| !a.is_empty()) {
            c.got_args = true;
            out.push(args(&c, a));
        }
        self.calls.push(c);
    }

    fn item_done(&mut self, item: &OutItem, ev: &WireEvent, out: &mut Vec<StreamEvent>) {
        match item.kind.as_str() {
            "reasoning" => {
                if let Some(sig) = item.encrypted_content.clone() {
                    out.push(StreamEvent::ReasoningDelta {
                        text: String::new(),
                        signature: Some(sig),
                    });
                }
            }
            "function_call" | "custom_tool_call" => {
                let whole = if item.kind == "custom_tool_call" {
                    item.input.clone()
                } else {
                    item.arguments.clone()
                };
                let Some(c) = self.call(ev) else {
                    return;
                };
                if let Some(w) = whole.filter(|w| !w.is_empty() && !c.got_args) {
                    c.got_args = true;
                    out.push(args(c, &w));
                }
                close_custom(c, out);
            }
            _ => {}
        }
    }

    fn terminal(&mut self, ev: &WireEvent, out: &mut Vec<StreamEvent>) {
        if std::mem::replace(&mut self.finished, true) {
            return;
        }
        for c in &mut self.calls {
            close_custom(c, out);
        }
        let Some(r) = &ev.response else {
            out.push(StreamEvent::Finish {
                reason: Default::default(),
                raw: None,
            });
            return;
        };
        if let Some(u) = &r.usage {
            let u = u.to_ir();
            self.usage = Some(u);
            out.push(StreamEvent::Usage(u));
        }
        let has_calls = !self.calls.is_empty()
            || r.output
                .iter()
                .any(|i| i.kind == "function_call" || i.kind == "custom_tool_call");
        let (reason, raw) = r.finish(has_calls, self.refused);
        out.push(StreamEvent::Finish {
            reason,
            raw: Some(raw),
        });
    }

    /// The call an event is about: by `item_id`, else by `output_index`.
    fn call(&mut self, ev: &WireEvent) -> Option<&mut Call> {
        let item_id = ev
            .item_id
            .as_deref()
            .or(ev.item.as_ref().and_then(|i| i.id.as_deref()));
        let pos = self
            .calls
            .iter()
            .position(|c| item_id.is_some() && c.item_id.as_deref() == item_id)
            .or_else(|| {
                let oi = ev.output_index?;
                self.calls.iter().position(|c| c.output_index == Some(oi))
            })?;
        self.calls.get_mut(pos)
    }
}

fn push_text(delta: Option<String>, out: &mut Vec<StreamEvent>) {
    if let Some(t) = delta.filter(|t| !t.is_empty()) {
        out.push(StreamEvent::TextDelta(t));
    }
}

/// Argument text for a call: as it came, or (custom calls) escaped to
/// continue the JSON string opened by `{"input":"`.
fn args(c: &Call, text: &str) -> StreamEvent {
    let arguments = if c.custom {
        let quoted = serde_json::to_string(text).unwrap_or_default();
        quoted[1..quoted.len().saturating_sub(1).max(1)].to_owned()
    } else {
        text.to_owned()
    };
    StreamEvent::ToolCallDelta {
        index: c.index,
        arguments,
    }
}

fn close_custom(c: &mut Call, out: &mut Vec<StreamEvent>) {
    if c.custom && !std::mem::replace(&mut c.closed, true) {
        out.push(StreamEvent::ToolCallDelta {
            index: c.index,
            arguments: "\"}".into(),
        });
    }
}
