//! Anthropic named SSE events (upstream) → IR stream events.

use std::fmt;

use super::stream_out::{BlockCursor, BlockType};
use super::wire::{finish_from_wire, Event};
use crate::ir::{self, FinishReason, StreamEvent};
use crate::sse::SseEvent;

/// An in-band `event: error` (HTTP status was already 200).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamError {
    /// `error.type`: `overloaded_error`, `api_error`, `rate_limit_error`…
    pub kind: String,
    pub message: String,
}

/// Why [`StreamTranslator::push`] produced no events for an input.
#[derive(Debug)]
pub enum PushError {
    /// The provider reported an error mid-stream; the stream is over.
    Upstream(StreamError),
    /// The data was not JSON: count it and skip it.
    BadJson(serde_json::Error),
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Upstream(e) => write!(f, "upstream {}: {}", e.kind, e.message),
            PushError::BadJson(e) => write!(f, "unparsable stream event: {e}"),
        }
    }
}

impl std::error::Error for PushError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BlockKind {
    Text,
    Thinking,
    Tool(u32),
    /// The JSON-mode forced tool: its input streams out as text.
    JsonTool,
    Other,
}

/// How far past the blocks seen a block's index may reach (the gap filled
/// with unknown blocks). Anthropic numbers blocks 0, 1, …; a start further
/// out is dropped: the index is the upstream's number, and 4294967295 must
/// not be a table of four billion blocks.
const MAX_BLOCK_GAP: usize = 16;

/// Turns one Anthropic stream into IR events. Feed every event with
/// [`push`](Self::push) (or [`push_sse`](Self::push_sse)); `Finish` is emitted
/// exactly once, as soon as `message_delta` carries a `stop_reason` (or at
/// `message_stop` if none did).
#[derive(Debug, Default)]
pub struct StreamTranslator {
    json_tool: Option<String>,
    started: bool,
    /// Per content-block index (blocks come numbered 0, 1, …; see
    /// [`MAX_BLOCK_GAP`]).
    blocks: Vec<BlockKind>,
    /// The JSON-mode tool's block was seen.
    saw_json_tool: bool,
    /// The block started and not yet stopped.
    open: Option<(u32, BlockType)>,
    next_tool: u32,
    usage: Option<ir::Usage>,
    finish: Option<(FinishReason, Option<String>)>,
    finish_emitted: bool,
    stopped: bool,
}

impl StreamTranslator {
    /// `json_tool`: [`super::Encoded::json_tool`] of the request, if any.
    pub fn new(json_tool: Option<&str>) -> Self {
        StreamTranslator {
            json_tool: json_tool.map(str::to_owned),
            ..Self::default()
        }
    }

    /// The finish reason seen so far (from `message_delta`), with the raw value.
    pub fn finish(&self) -> Option<(FinishReason, Option<&str>)> {
        self.finish.as_ref().map(|(r, raw)| (*r, raw.as_deref()))
    }

    /// The latest cumulative usage.
    pub fn usage(&self) -> Option<ir::Usage> {
        self.usage
    }

    /// `message_stop` was seen.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Where the events pushed so far leave the stream (the block still
    /// open, the next block's index): what a continuation of a forwarded
    /// stream must write into.
    pub fn cursor(&self) -> BlockCursor {
        BlockCursor {
            open: self.open,
            next_index: self.blocks.len() as u32,
        }
    }

    /// Convenience over [`push`](Self::push) for a decoded SSE event
    /// (comment-only events are ignored).
    pub fn push_sse(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Result<(), PushError> {
        match &ev.data {
            Some(data) => self.push(ev.event_str(), data, out),
            None => Ok(()),
        }
    }

    /// One event: its `event:` name (used only when the payload lacks `type`)
    /// and its data.
    pub fn push(
        &mut self,
        name: Option<&str>,
        data: &[u8],
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), PushError> {
        let ev: Event = serde_json::from_slice(data).map_err(PushError::BadJson)?;
        let kind = ev.kind.as_deref().or(name).unwrap_or_default();
        match kind {
            "ping" => {}
            "error" => {
                let e = ev.error.as_ref();
                return Err(PushError::Upstream(StreamError {
                    kind: e
                        .and_then(|e| e.kind.as_deref())
                        .unwrap_or("api_error")
                        .to_owned(),
                    message: e
                        .and_then(|e| e.message.as_deref())
                        .unwrap_or_default()
                        .to_owned(),
                }));
            }
            "message_start" => {
                let m = ev.message.as_ref();
                self.start(
                    m.and_then(|m| m.id.as_deref()),
                    m.and_then(|m| m.model.as_deref()),
                    out,
                );
                if let Some(m) = m {
                    let u = m.usage.to_ir();
                    self.usage = Some(u);
                    out.push(StreamEvent::Usage(u));
                }
            }
            "content_block_start" => {
                self.start(None, None, out);
                self.block_start(&ev, out);
            }
            "content_block_delta" => {
                self.start(None, None, out);
                self.block_delta(&ev, out);
            }
            // The open block is closed (a stop for another index changes nothing).
            "content_block_stop"
                if ev
                    .index
                    .is_none_or(|i| self.open.is_some_and(|(o, _)| o == i)) =>
            {
                self.open = None;
            }
            "message_delta" => self.message_delta(&ev, out),
            "message_stop" => {
                self.stopped = true;
                self.emit_finish(out);
            }
            _ => {} // other block stops, future event types
        }
        Ok(())
    }

    fn start(&mut self, id: Option<&str>, model: Option<&str>, out: &mut Vec<StreamEvent>) {
        if !std::mem::replace(&mut self.started, true) {
            out.push(StreamEvent::Start {
                id: id.unwrap_or_default().to_owned(),
                model: model.unwrap_or_default().to_owned(),
                created: 0,
            });
        }
    }

    fn kind_at(&self, index: Option<u32>) -> BlockKind {
        index
            .and_then(|i| self.blocks.get(i as usize).copied())
            .unwrap_or(BlockKind::Other)
    }

    fn block_start(&mut self, ev: &Event, out: &mut Vec<StreamEvent>) {
        let Some(b) = &ev.content_block else {
            return;
        };
        let i = ev.index.map_or(self.blocks.len(), |i| i as usize);
        if i > self.blocks.len() + MAX_BLOCK_GAP {
            return;
        }
        let kind = match b.kind.as_ref() {
            "text" => BlockKind::Text,
            "thinking" => BlockKind::Thinking,
            "tool_use" => {
                let name = b.name.as_deref().unwrap_or_default();
                if self.json_tool.as_deref() == Some(name) {
                    BlockKind::JsonTool
                } else {
                    let index = self.next_tool;
                    self.next_tool += 1;
                    out.push(StreamEvent::ToolCallStart {
                        index,
                        id: b.id.as_deref().unwrap_or_default().to_owned(),
                        name: name.to_owned(),
                    });
                    BlockKind::Tool(index)
                }
            }
            _ => BlockKind::Other, // redacted_thinking, server tools
        };
        // A start's initial text (always "" on the wire) is not dropped.
        if kind == BlockKind::Text {
            if let Some(t) = b.text.as_deref().filter(|t| !t.is_empty()) {
                out.push(StreamEvent::TextDelta(t.to_owned()));
            }
        }
        if self.blocks.len() <= i {
            self.blocks.resize(i + 1, BlockKind::Other);
        }
        self.blocks[i] = kind;
        self.saw_json_tool |= kind == BlockKind::JsonTool;
        let open = match kind {
            BlockKind::Text => BlockType::Text,
            BlockKind::Thinking => BlockType::Thinking,
            BlockKind::Tool(_) | BlockKind::JsonTool => BlockType::ToolUse,
            BlockKind::Other => BlockType::Other,
        };
        self.open = Some((i as u32, open));
    }

    fn block_delta(&mut self, ev: &Event, out: &mut Vec<StreamEvent>) {
        let Some(d) = &ev.delta else {
            return;
        };
        let block = self.kind_at(ev.index);
        match d.kind.as_deref().unwrap_or_default() {
            "text_delta" => {
                if let Some(t) = d.text.as_deref().filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::TextDelta(t.to_owned()));
                }
            }
            "thinking_delta" => {
                if let Some(t) = d.thinking.as_deref().filter(|t| !t.is_empty()) {
                    out.push(StreamEvent::ReasoningDelta {
                        text: t.to_owned(),
                        signature: None,
                    });
                }
            }
            "signature_delta" => {
                if let Some(s) = &d.signature {
                    out.push(StreamEvent::ReasoningDelta {
                        text: String::new(),
                        signature: Some(s.to_string()),
                    });
                }
            }
            "input_json_delta" => {
                let Some(p) = d.partial_json.as_deref().filter(|p| !p.is_empty()) else {
                    return;
                };
                match block {
                    BlockKind::Tool(index) => out.push(StreamEvent::ToolCallDelta {
                        index,
                        arguments: p.to_owned(),
                    }),
                    BlockKind::JsonTool => out.push(StreamEvent::TextDelta(p.to_owned())),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn message_delta(&mut self, ev: &Event, out: &mut Vec<StreamEvent>) {
        if let Some(raw) = ev.delta.as_ref().and_then(|d| d.stop_reason.as_deref()) {
            let mut reason = finish_from_wire(raw);
            let only_json = self.next_tool == 0 && self.saw_json_tool;
            if reason == FinishReason::ToolCalls && only_json {
                reason = FinishReason::Stop;
            }
            if self.finish.is_none() {
                self.finish = Some((reason, Some(raw.to_owned())));
            }
            self.emit_finish(out);
        }
        if let Some(u) = &ev.usage {
            let mut usage = self.usage.unwrap_or_default();
            if u.has_input() {
                let fresh = u.to_ir();
                usage.input_tokens = fresh.input_tokens;
                usage.cached_input_tokens = fresh.cached_input_tokens;
                usage.cache_write_tokens = fresh.cache_write_tokens;
            }
            if let Some(o) = u.output_tokens {
                usage.output_tokens = o;
            }
            self.usage = Some(usage);
            out.push(StreamEvent::Usage(usage));
        }
    }

    fn emit_finish(&mut self, out: &mut Vec<StreamEvent>) {
        if std::mem::replace(&mut self.finish_emitted, true) {
            return;
        }
        let (reason, raw) = self.finish.clone().unwrap_or((FinishReason::Stop, None));
        out.push(StreamEvent::Finish { reason, raw });
    }
}
