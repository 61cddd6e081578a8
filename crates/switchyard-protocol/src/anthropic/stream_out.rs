//! IR stream events → Anthropic named SSE frames (for Anthropic clients).

use bytes::Bytes;
use serde::Serialize;

use super::response::{message_id, OutUsage};
use super::wire::finish_to_wire;
use crate::ir::{self, FinishReason, StreamEvent};
use crate::sse::named_frame;

/// The type of an Anthropic content block, as far as continuing a stream
/// needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockType {
    Text,
    Thinking,
    ToolUse,
    /// `redacted_thinking`, server tools and anything newer.
    Other,
}

/// Where an Anthropic event stream stands: the content block still open (its
/// index and type), and the index the next block gets. What a continuation
/// needs to write into the same stream ([`StreamEncoder::continuing`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockCursor {
    pub open: Option<(u32, BlockType)>,
    pub next_index: u32,
}

/// Writes the Anthropic event sequence for one answer:
/// `message_start` → blocks (`content_block_start` / `_delta` / `_stop`,
/// increasing `index`) → `message_delta` → `message_stop`.
///
/// `message_start` is written lazily, before the first content frame, so a
/// `Usage` that arrives right after `Start` (Anthropic, Gemini upstreams)
/// fills its input tokens. `Finish` is held until a later `Usage` or
/// [`end`](Self::end), whichever comes first, so `message_delta` carries the
/// final usage; nothing is written after that.
#[derive(Debug, Default)]
pub struct StreamEncoder {
    id: String,
    model: String,
    message_started: bool,
    usage: Option<ir::Usage>,
    /// The open block and its index.
    open: Option<(BlockType, u32)>,
    next_index: u32,
    /// Block index of each IR tool-call index.
    tool_blocks: Vec<Option<u32>>,
    finish: Option<(FinishReason, Option<String>)>,
    done: bool,
}

#[derive(Serialize)]
struct MessageStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    message: Skeleton<'a>,
}

#[derive(Serialize)]
struct Skeleton<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    model: &'a str,
    content: [(); 0],
    stop_reason: Option<()>,
    stop_sequence: Option<()>,
    usage: OutUsage,
}

#[derive(Serialize)]
struct BlockStart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    content_block: StartBlock<'a>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StartBlock<'a> {
    Text {
        text: &'static str,
    },
    Thinking {
        thinking: &'static str,
        signature: &'static str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Empty,
    },
}

#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct BlockDelta<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
    delta: DeltaBody<'a>,
}

#[derive(Serialize)]
#[serde(tag = "type")]
enum DeltaBody<'a> {
    #[serde(rename = "text_delta")]
    Text { text: &'a str },
    #[serde(rename = "thinking_delta")]
    Thinking { thinking: &'a str },
    #[serde(rename = "signature_delta")]
    Signature { signature: &'a str },
    #[serde(rename = "input_json_delta")]
    InputJson { partial_json: &'a str },
}

#[derive(Serialize)]
struct BlockStop {
    #[serde(rename = "type")]
    kind: &'static str,
    index: u32,
}

#[derive(Serialize)]
struct MessageDelta {
    #[serde(rename = "type")]
    kind: &'static str,
    delta: StopDelta,
    usage: OutUsage,
}

#[derive(Serialize)]
struct StopDelta {
    stop_reason: &'static str,
    stop_sequence: Option<()>,
}

fn frame<T: Serialize>(name: &str, payload: &T) -> Bytes {
    // Serializing these plain structs into a Vec cannot fail.
    named_frame(name, &serde_json::to_vec(payload).unwrap_or_default())
}

/// `event: error` with `{"type":"error","error":{"type":kind,"message":…}}`.
pub fn error_frame(kind: &str, message: &str) -> Bytes {
    #[derive(Serialize)]
    struct Body<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        error: Inner<'a>,
    }
    #[derive(Serialize)]
    struct Inner<'a> {
        #[serde(rename = "type")]
        kind: &'a str,
        message: &'a str,
    }
    frame(
        "error",
        &Body {
            kind: "error",
            error: Inner { kind, message },
        },
    )
}

impl StreamEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// An encoder that continues a stream another wrote up to `at`: its
    /// `message_start` was sent (a `Start` writes nothing), text goes on in
    /// the text block left open (same index), and a new block gets the next
    /// index. Used to resume an interrupted answer inside the client's stream.
    pub fn continuing(at: BlockCursor) -> Self {
        StreamEncoder {
            message_started: true,
            open: at.open.map(|(index, kind)| (kind, index)),
            next_index: at.next_index,
            ..Self::default()
        }
    }

    /// Where the frames written so far leave the stream.
    pub fn cursor(&self) -> BlockCursor {
        BlockCursor {
            open: self.open.map(|(kind, index)| (index, kind)),
            next_index: self.next_index,
        }
    }

    /// Frames for one IR event (possibly none).
    pub fn push(&mut self, ev: &StreamEvent) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        match ev {
            StreamEvent::Start { id, model, .. } => {
                self.id = message_id(id);
                self.model.clone_from(model);
            }
            StreamEvent::TextDelta(t) if t.is_empty() => {}
            StreamEvent::TextDelta(text) => {
                let index = self.ensure_open(BlockType::Text, &mut out);
                out.push(delta(index, DeltaBody::Text { text }));
            }
            StreamEvent::ReasoningDelta { text, signature } => {
                if text.is_empty() && signature.is_none() {
                    return out;
                }
                let index = self.ensure_open(BlockType::Thinking, &mut out);
                if !text.is_empty() {
                    out.push(delta(index, DeltaBody::Thinking { thinking: text }));
                }
                if let Some(signature) = signature {
                    out.push(delta(index, DeltaBody::Signature { signature }));
                }
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.message_start(&mut out);
                self.close(&mut out);
                let block = self.next_index;
                self.next_index += 1;
                self.open = Some((BlockType::ToolUse, block));
                let slot = *index as usize;
                if self.tool_blocks.len() <= slot {
                    self.tool_blocks.resize(slot + 1, None);
                }
                self.tool_blocks[slot] = Some(block);
                let content_block = StartBlock::ToolUse {
                    id,
                    name,
                    input: Empty {},
                };
                out.push(block_start(block, content_block));
                let partial_json = "";
                out.push(delta(block, DeltaBody::InputJson { partial_json }));
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                // Deltas go to their call's block even if another opened since.
                if let Some(Some(block)) = self.tool_blocks.get(*index as usize) {
                    let partial_json = arguments.as_str();
                    out.push(delta(*block, DeltaBody::InputJson { partial_json }));
                }
            }
            StreamEvent::Usage(u) => {
                self.usage = Some(*u);
                if self.finish.is_some() {
                    out.extend(self.end());
                }
            }
            StreamEvent::Finish { reason, raw } => {
                self.finish = Some((*reason, raw.clone()));
            }
        }
        out
    }

    /// Close the stream: the open block, `message_delta` (finish held so
    /// far, `end_turn` if none came) and `message_stop`. Idempotent.
    pub fn end(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        if std::mem::replace(&mut self.done, true) {
            return out;
        }
        self.message_start(&mut out);
        self.close(&mut out);
        let (reason, raw) = self.finish.take().unwrap_or((FinishReason::Stop, None));
        out.push(frame(
            "message_delta",
            &MessageDelta {
                kind: "message_delta",
                delta: StopDelta {
                    stop_reason: finish_to_wire(reason, raw.as_deref()),
                    stop_sequence: None,
                },
                usage: OutUsage::from_ir(&self.usage.unwrap_or_default()),
            },
        ));
        out.push(named_frame("message_stop", br#"{"type":"message_stop"}"#));
        out
    }

    fn message_start(&mut self, out: &mut Vec<Bytes>) {
        if std::mem::replace(&mut self.message_started, true) {
            return;
        }
        if self.id.is_empty() {
            self.id = message_id("");
        }
        let usage = OutUsage::from_ir(&self.usage.unwrap_or_default());
        let payload = MessageStart {
            kind: "message_start",
            message: Skeleton {
                id: &self.id,
                kind: "message",
                role: "assistant",
                model: &self.model,
                content: [],
                stop_reason: None,
                stop_sequence: None,
                usage,
            },
        };
        out.push(frame("message_start", &payload));
    }

    fn close(&mut self, out: &mut Vec<Bytes>) {
        if let Some((_, index)) = self.open.take() {
            let stop = BlockStop {
                kind: "content_block_stop",
                index,
            };
            out.push(frame("content_block_stop", &stop));
        }
    }

    /// The open block of `kind`, opening one (and closing another) if needed.
    fn ensure_open(&mut self, kind: BlockType, out: &mut Vec<Bytes>) -> u32 {
        self.message_start(out);
        if let Some((k, index)) = self.open {
            if k == kind {
                return index;
            }
        }
        self.close(out);
        let index = self.next_index;
        self.next_index += 1;
        self.open = Some((kind, index));
        let content_block = match kind {
            BlockType::Thinking => StartBlock::Thinking {
                thinking: "",
                signature: "",
            },
            _ => StartBlock::Text { text: "" },
        };
        out.push(block_start(index, content_block));
        index
    }
}

fn block_start(index: u32, content_block: StartBlock) -> Bytes {
    frame(
        "content_block_start",
        &BlockStart {
            kind: "content_block_start",
            index,
            content_block,
        },
    )
}

fn delta(index: u32, delta: DeltaBody) -> Bytes {
    frame(
        "content_block_delta",
        &BlockDelta {
            kind: "content_block_delta",
            index,
            delta,
        },
    )
}
