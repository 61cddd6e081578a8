//! IR stream events → Responses SSE frames (for Responses clients), after
//! MAPPING §14.3 "Unified → Responses client" and the recorded
//! `stream_text.sse` / `stream_function_call.sse` / `stream_reasoning_summary.sse`.
//!
//! Every frame is `event: <type>\ndata: {json}\n\n` with `type` first and
//! `sequence_number` last (the 2026 key order). Items are sequential: the
//! open item is closed before the next starts, so `output_index` is the
//! position in the final `output`.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::extras::{Echo, ResponsesExtras};
use super::items::{self, item_id, Head};
use crate::ir::{FinishReason, StreamEvent, Usage};
use crate::sse::named_frame;

/// What kind of item is open, with what it has accumulated so far (the
/// `.done` events and the terminal Response repeat it whole).
#[derive(Debug, Clone, PartialEq)]
pub enum OpenKind {
    /// A message with one `output_text` part (`content_index` 0).
    Message { text: String },
    /// A reasoning item with one summary part (`summary_index` 0) once text
    /// came; `encrypted` is the latest signature.
    Reasoning {
        summary: String,
        part_open: bool,
        encrypted: Option<String>,
    },
    /// A function call (or an emulated custom tool call) for the IR tool
    /// call `index`.
    Call {
        index: u32,
        call_id: String,
        name: String,
        arguments: String,
        custom: bool,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct OpenItem {
    pub id: String,
    pub kind: OpenKind,
}

/// Where a Responses event stream stands: what a continuation needs to keep
/// writing into the same stream ([`StreamEncoder::continuing`]) — the
/// response id, the next `sequence_number`, the items done so far (as their
/// `output_item.done` sent them) and the item still open.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamCursor {
    pub id: String,
    pub model: String,
    pub created_at: u64,
    /// `response.created` / `response.in_progress` were sent.
    pub started: bool,
    pub sequence_number: u64,
    pub output: Vec<Value>,
    pub open: Option<OpenItem>,
}

/// Writes the Responses event sequence for one answer: `response.created`
/// (0) and `response.in_progress` (1), the items, then exactly one terminal
/// event (`response.completed`, or `response.incomplete` for Length /
/// ContentFilter) carrying every item and the usage. `Usage` and `Finish`
/// are held until [`end`](Self::end); nothing is written after the terminal
/// event (or after [`error`](Self::error)).
///
/// Deviations, all forced by the IR: a reasoning item has one summary part
/// (the IR has no paragraph index); a tool-call delta for a call that is no
/// longer open is dropped (items cannot reopen); an emulated custom tool
/// call streams its `input` as one `custom_tool_call_input.delta` when it
/// closes (its IR arguments are JSON `{"input": …}` fragments).
#[derive(Debug)]
pub struct StreamEncoder {
    echo: Echo,
    custom_tools: Vec<String>,
    encrypted: bool,
    st: StreamCursor,
    usage: Option<Usage>,
    finish: Option<FinishReason>,
    done: bool,
}

impl StreamEncoder {
    /// A new stream for response `id` (`resp_…`, issued by the gateway).
    /// `created_at` is used unless the IR `Start` carries one.
    pub fn new(id: &str, created_at: u64, extras: &ResponsesExtras) -> Self {
        Self::continuing(
            StreamCursor {
                id: id.to_owned(),
                created_at,
                ..StreamCursor::default()
            },
            extras,
        )
    }

    /// An encoder that continues a stream another wrote up to `at`: no
    /// second `response.created`, sequence numbers go on, text goes on in
    /// the message item left open, and the terminal event lists every item.
    pub fn continuing(at: StreamCursor, extras: &ResponsesExtras) -> Self {
        StreamEncoder {
            echo: extras.echo.clone(),
            custom_tools: extras.custom_tools.clone(),
            encrypted: extras.wants_encrypted_reasoning(),
            st: at,
            usage: None,
            finish: None,
            done: false,
        }
    }

    /// Where the frames written so far leave the stream.
    pub fn cursor(&self) -> StreamCursor {
        self.st.clone()
    }

    /// Frames for one IR event (possibly none).
    pub fn push(&mut self, ev: &StreamEvent) -> Vec<Bytes> {
        let mut out = Vec::new();
        if self.done {
            return out;
        }
        match ev {
            StreamEvent::Start { model, created, .. } => {
                if !self.st.started {
                    if !model.is_empty() {
                        self.st.model.clone_from(model);
                    }
                    if *created != 0 {
                        self.st.created_at = *created;
                    }
                }
                self.start(&mut out);
            }
            StreamEvent::TextDelta(t) if t.is_empty() => {}
            StreamEvent::TextDelta(t) => self.text(t, &mut out),
            StreamEvent::ReasoningDelta { text, signature } => {
                self.reasoning(text, signature.as_deref(), &mut out)
            }
            StreamEvent::ToolCallStart { index, id, name } => {
                self.start(&mut out);
                self.close(&mut out, "completed");
                let custom = self.custom_tools.iter().any(|c| c == name);
                let n = self.st.output.len() as u32;
                let item = OpenItem {
                    id: item_id(&self.st.id, if custom { "ctc" } else { "fc" }, Some(n)),
                    kind: OpenKind::Call {
                        index: *index,
                        call_id: id.clone(),
                        name: name.clone(),
                        arguments: String::new(),
                        custom,
                    },
                };
                let added = call_value(&item, "in_progress", true);
                self.item_event("response.output_item.added", added, &mut out);
                self.st.open = Some(item);
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                self.call_delta(*index, arguments, &mut out)
            }
            StreamEvent::Usage(u) => self.usage = Some(*u),
            StreamEvent::Finish { reason, .. } => self.finish = Some(*reason),
        }
        out
    }

    /// Close the stream: the open item (`incomplete` when the answer was cut
    /// short), then the terminal event. Idempotent.
    pub fn end(&mut self) -> Vec<Bytes> {
        let mut out = Vec::new();
        if std::mem::replace(&mut self.done, true) {
            return out;
        }
        self.start(&mut out);
        let reason = self.finish.unwrap_or_default();
        let (status, incomplete) = items::status_of(reason, false);
        self.close(&mut out, status);
        let kind = if status == "incomplete" {
            "response.incomplete"
        } else {
            "response.completed"
        };
        let usage = self.usage.unwrap_or_default();
        let response = self.response(status, incomplete, None, Some(&usage));
        out.push(self.frame(kind, json!({ "response": response })));
        out
    }

    /// A failure after the stream started: `error` (nested `error` object
    /// with `type` = `code`, like the recorded stream) then `response.failed`
    /// (`status:"failed"`, `error:{code, message}`, the items done so far).
    /// Nothing is written afterwards.
    pub fn error(&mut self, code: &str, message: &str) -> Vec<Bytes> {
        let mut out = Vec::new();
        if std::mem::replace(&mut self.done, true) {
            return out;
        }
        self.start(&mut out);
        let error = json!({"type": code, "code": code, "message": message, "param": null});
        out.push(self.frame("error", json!({ "error": error })));
        let response = self.response("failed", None, Some((code, message)), None);
        out.push(self.frame("response.failed", json!({ "response": response })));
        out
    }

    fn response(
        &self,
        status: &str,
        incomplete: Option<&str>,
        error: Option<(&str, &str)>,
        usage: Option<&Usage>,
    ) -> Value {
        Value::Object(items::response_object(
            Head {
                id: &self.st.id,
                created_at: self.st.created_at,
                model: &self.st.model,
                status,
                incomplete,
                error,
                output: self.st.output.clone(),
                usage,
            },
            &self.echo,
        ))
    }

    /// `response.created` + `response.in_progress`, once.
    fn start(&mut self, out: &mut Vec<Bytes>) {
        if std::mem::replace(&mut self.st.started, true) {
            return;
        }
        for kind in ["response.created", "response.in_progress"] {
            let response = self.response("in_progress", None, None, None);
            out.push(self.frame(kind, json!({ "response": response })));
        }
    }

    fn text(&mut self, t: &str, out: &mut Vec<Bytes>) {
        self.start(out);
        if !matches!(
            self.st.open,
            Some(OpenItem {
                kind: OpenKind::Message { .. },
                ..
            })
        ) {
            self.close(out, "completed");
            let id = item_id(&self.st.id, "msg", self.nth());
            let added = items::message_item(&id, "in_progress", Vec::new());
            self.item_event("response.output_item.added", added, out);
            let part = json!({"content_index": 0, "item_id": id, "output_index": self.index(),
                              "part": items::output_text("")});
            out.push(self.frame("response.content_part.added", part));
            self.st.open = Some(OpenItem {
                id,
                kind: OpenKind::Message {
                    text: String::new(),
                },
            });
        }
        let index = self.index();
        let Some(OpenItem {
            id,
            kind: OpenKind::Message { text },
        }) = &mut self.st.open
        else {
            return;
        };
        text.push_str(t);
        let delta = json!({"content_index": 0, "delta": t, "item_id": id, "logprobs": [],
                           "output_index": index});
        out.push(self.frame("response.output_text.delta", delta));
    }

    fn reasoning(&mut self, t: &str, signature: Option<&str>, out: &mut Vec<Bytes>) {
        let signature = signature.filter(|s| self.encrypted && !s.is_empty());
        if t.is_empty() && signature.is_none() {
            return;
        }
        self.start(out);
        if !matches!(
            self.st.open,
            Some(OpenItem {
                kind: OpenKind::Reasoning { .. },
                ..
            })
        ) {
            self.close(out, "completed");
            let id = item_id(&self.st.id, "rs", self.nth());
            let added = items::reasoning_item(&id, Vec::new(), signature);
            self.item_event("response.output_item.added", added, out);
            self.st.open = Some(OpenItem {
                id,
                kind: OpenKind::Reasoning {
                    summary: String::new(),
                    part_open: false,
                    encrypted: None,
                },
            });
        }
        let index = self.index();
        let mut frames = Vec::new();
        if let Some(OpenItem {
            id,
            kind:
                OpenKind::Reasoning {
                    summary,
                    part_open,
                    encrypted,
                },
        }) = &mut self.st.open
        {
            if let Some(s) = signature {
                *encrypted = Some(s.to_owned());
            }
            if !t.is_empty() {
                let at = json!({"item_id": id, "output_index": index, "summary_index": 0});
                if !std::mem::replace(part_open, true) {
                    let mut e = at.clone();
                    e["part"] = items::summary_text("");
                    frames.push(("response.reasoning_summary_part.added", e));
                }
                summary.push_str(t);
                let mut e = at;
                e["delta"] = t.into();
                frames.push(("response.reasoning_summary_text.delta", e));
            }
        }
        for (kind, e) in frames {
            out.push(self.frame(kind, e));
        }
    }

    fn call_delta(&mut self, index: u32, arguments: &str, out: &mut Vec<Bytes>) {
        let output_index = self.index();
        let Some(OpenItem {
            id,
            kind:
                OpenKind::Call {
                    index: open,
                    arguments: args,
                    custom,
                    ..
                },
        }) = &mut self.st.open
        else {
            return;
        };
        if *open != index || arguments.is_empty() {
            return;
        }
        args.push_str(arguments);
        if *custom {
            return; // sent whole on close
        }
        let e = json!({"delta": arguments, "item_id": id, "output_index": output_index});
        out.push(self.frame("response.function_call_arguments.delta", e));
    }

    /// Close the open item: its `.done` events, then `output_item.done`
    /// with `status` (message and call items; reasoning items have none).
    fn close(&mut self, out: &mut Vec<Bytes>, status: &str) {
        let Some(item) = self.st.open.take() else {
            return;
        };
        let index = self.index();
        let at = |extra: Value| {
            let mut e = json!({"item_id": item.id, "output_index": index});
            if let (Value::Object(e), Value::Object(x)) = (&mut e, extra) {
                e.extend(x);
            }
            e
        };
        let done = match &item.kind {
            OpenKind::Message { text } => {
                let done = at(json!({"content_index": 0, "logprobs": [], "text": text}));
                out.push(self.frame("response.output_text.done", done));
                let part = at(json!({"content_index": 0, "part": items::output_text(text)}));
                out.push(self.frame("response.content_part.done", part));
                items::message_item(&item.id, status, vec![items::output_text(text)])
            }
            OpenKind::Reasoning {
                summary,
                part_open,
                encrypted,
            } => {
                if *part_open {
                    let e = at(json!({"summary_index": 0, "text": summary}));
                    out.push(self.frame("response.reasoning_summary_text.done", e));
                    let e = at(json!({"summary_index": 0, "part": items::summary_text(summary)}));
                    out.push(self.frame("response.reasoning_summary_part.done", e));
                }
                let summary = if summary.is_empty() {
                    Vec::new()
                } else {
                    vec![items::summary_text(summary)]
                };
                items::reasoning_item(&item.id, summary, encrypted.as_deref())
            }
            OpenKind::Call {
                arguments, custom, ..
            } => {
                if *custom {
                    let input = items::custom_input(arguments);
                    let e = at(json!({ "delta": input }));
                    out.push(self.frame("response.custom_tool_call_input.delta", e));
                    let e = at(json!({ "input": input }));
                    out.push(self.frame("response.custom_tool_call_input.done", e));
                } else {
                    let e = at(json!({ "arguments": arguments }));
                    out.push(self.frame("response.function_call_arguments.done", e));
                }
                call_value(&item, status, false)
            }
        };
        let e = json!({"item": done, "output_index": index});
        out.push(self.frame("response.output_item.done", e));
        self.st.output.push(done);
    }

    /// `output_index` of the open (or next) item.
    fn index(&self) -> u32 {
        self.st.output.len() as u32
    }

    /// The id counter of the next item: none at output index 0 (`msg_X`,
    /// `rs_X`), the index after that (`msg_X_2`), so ids stay unique.
    fn nth(&self) -> Option<u32> {
        match self.index() {
            0 => None,
            n => Some(n),
        }
    }

    fn item_event(&mut self, kind: &str, item: Value, out: &mut Vec<Bytes>) {
        let e = json!({"item": item, "output_index": self.index()});
        out.push(self.frame(kind, e));
    }

    /// One frame: `type` first, the fields, `sequence_number` last.
    fn frame(&mut self, kind: &str, fields: Value) -> Bytes {
        let seq = self.st.sequence_number;
        self.st.sequence_number += 1;
        frame(kind, fields, seq)
    }
}

fn frame(kind: &str, fields: Value, seq: u64) -> Bytes {
    let mut o = Map::new();
    o.insert("type".into(), kind.into());
    let mut body = serde_json::to_string(&Value::Object(o)).unwrap_or_default();
    body.pop(); // the closing brace
    if let Value::Object(m) = &fields {
        if !m.is_empty() {
            let inner = serde_json::to_string(&fields).unwrap_or_default();
            body.push(',');
            body.push_str(&inner[1..inner.len() - 1]);
        }
    }
    body.push_str(",\"sequence_number\":");
    body.push_str(&seq.to_string());
    body.push('}');
    named_frame(kind, body.as_bytes())
}

/// A call item: `added` = the in-progress shape (empty arguments / input).
fn call_value(item: &OpenItem, status: &str, added: bool) -> Value {
    let OpenKind::Call {
        call_id,
        name,
        arguments,
        custom,
        ..
    } = &item.kind
    else {
        return Value::Null;
    };
    let args = if added { "" } else { arguments.as_str() };
    items::call_item(&item.id, call_id, name, args, status, *custom)
}
