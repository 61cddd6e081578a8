//! IR → Gemini answers, for a Gemini front door (and round-trip tests):
//! whole responses and `alt=sse` frames.

use bytes::{Bytes, BytesMut};
use serde::Serialize;

use super::response::finish_reason;
use super::wire::*;
use crate::ir::{self, FinishReason, StreamEvent};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutResponse<'a> {
    candidates: [OutCandidate<'a>; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    usage_metadata: Option<UsageMetadata>,
    model_version: &'a str,
    response_id: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutCandidate<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<OutContent<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finish_reason: Option<&'a str>,
    index: u32,
}

fn candidate<'a>(parts: Vec<OutPart<'a>>, finish: Option<&'static str>) -> [OutCandidate<'a>; 1] {
    [OutCandidate {
        content: (!parts.is_empty()).then_some(OutContent {
            role: Some("model"),
            parts,
        }),
        finish_reason: finish,
        index: 0,
    }]
}

/// The Gemini value for a unified finish reason: the upstream's own value when
/// it maps to the same reason (`RECITATION` stays `RECITATION`), else the
/// canonical one (tool calls finish with `STOP`).
fn gemini_finish(reason: FinishReason, raw: Option<&str>) -> &'static str {
    const KNOWN: &[&str] = &[
        "STOP",
        "MAX_TOKENS",
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "OTHER",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MALFORMED_FUNCTION_CALL",
        "IMAGE_SAFETY",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "IMAGE_PROHIBITED_CONTENT",
        "NO_IMAGE",
        "IMAGE_RECITATION",
        "IMAGE_OTHER",
    ];
    let calls = reason == FinishReason::ToolCalls;
    if let Some(k) = raw.and_then(|r| KNOWN.iter().find(|k| **k == r)) {
        if finish_reason(k, calls) == reason {
            return k;
        }
    }
    match reason {
        FinishReason::Stop | FinishReason::ToolCalls => "STOP",
        FinishReason::Length => "MAX_TOKENS",
        FinishReason::ContentFilter => "SAFETY",
        FinishReason::Error => "MALFORMED_FUNCTION_CALL",
    }
}

fn call_part<'a>(name: &'a str, arguments: &'a str) -> OutPart<'a> {
    OutPart {
        function_call: Some(OutFunctionCall {
            name,
            // Arguments that are not a JSON object cannot be expressed.
            args: as_object(arguments).unwrap_or_else(|| empty_object()),
        }),
        ..Default::default()
    }
}

/// A whole `GenerateContentResponse` body. `reasoning_signature` goes on the
/// first function call, else on the text part, else on the thought part.
pub fn encode_response(r: &ir::ChatResponse) -> Vec<u8> {
    let mut parts = Vec::new();
    if let Some(t) = r.reasoning.as_deref().filter(|t| !t.is_empty()) {
        parts.push(OutPart::thought(t));
    }
    if let Some(t) = r.text.as_deref().or(r.refusal.as_deref()) {
        parts.push(OutPart::text(t));
    }
    let first_call = parts.len();
    parts.extend(
        r.tool_calls
            .iter()
            .map(|c| call_part(&c.name, &c.arguments)),
    );
    if let Some(sig) = r.reasoning_signature.as_deref() {
        let home = if first_call < parts.len() {
            first_call
        } else {
            parts.len().saturating_sub(1)
        };
        if let Some(p) = parts.get_mut(home) {
            p.thought_signature = Some(sig);
        }
    }
    let out = OutResponse {
        candidates: candidate(
            parts,
            Some(gemini_finish(
                r.finish_reason,
                r.raw_finish_reason.as_deref(),
            )),
        ),
        usage_metadata: Some(UsageMetadata::from_ir(&r.usage)),
        model_version: &r.model,
        response_id: &r.id,
    };
    serde_json::to_vec(&out).expect("serializable")
}

/// IR events → `data: {…}\r\n\r\n` frames, one `GenerateContentResponse`
/// each. Function calls go out whole: fragments are held until a non-tool
/// event (or the end) shows the calls are complete. The finish reason and the
/// final usage go on a last frame written by [`StreamEncoder::finish`], so a
/// `Usage` event after `Finish` (OpenAI's order) still lands on it.
#[derive(Debug, Default)]
pub struct StreamEncoder {
    id: String,
    model: String,
    /// Held calls: (name, arguments so far), by tool-call index.
    calls: Vec<(String, String)>,
    /// A signature waiting for the next part (from an empty `ReasoningDelta`).
    signature: Option<String>,
    usage: Option<ir::Usage>,
    finish: Option<(FinishReason, Option<String>)>,
    done: bool,
}

impl StreamEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Frames for one event (often none).
    pub fn push(&mut self, ev: &StreamEvent, out: &mut Vec<Bytes>) {
        match ev {
            StreamEvent::Start { id, model, .. } => {
                self.id.clone_from(id);
                self.model.clone_from(model);
            }
            StreamEvent::TextDelta(t) => {
                self.flush_calls(out);
                let sig = self.signature.take();
                let mut p = OutPart::text(t);
                p.thought_signature = sig.as_deref();
                out.push(self.frame(vec![p], None));
            }
            StreamEvent::ReasoningDelta { text, signature } if text.is_empty() => {
                if signature.is_some() {
                    self.signature.clone_from(signature);
                }
            }
            StreamEvent::ReasoningDelta { text, signature } => {
                self.flush_calls(out);
                let mut p = OutPart::thought(text);
                p.thought_signature = signature.as_deref();
                out.push(self.frame(vec![p], None));
            }
            StreamEvent::ToolCallStart { index, name, .. } => {
                let slot = self.call_slot(*index);
                slot.0.clone_from(name);
            }
            StreamEvent::ToolCallDelta { index, arguments } => {
                self.call_slot(*index).1.push_str(arguments);
            }
            StreamEvent::Usage(u) => self.usage = Some(*u),
            StreamEvent::Finish { reason, raw } => {
                self.flush_calls(out);
                self.finish = Some((*reason, raw.clone()));
            }
        }
    }

    /// At end of stream: held calls, then the last frame with `finishReason`
    /// and the final `usageMetadata`. Idempotent.
    pub fn finish(&mut self, out: &mut Vec<Bytes>) {
        if self.done {
            return;
        }
        self.done = true;
        self.flush_calls(out);
        // A signature nothing followed rides on an empty text part, as
        // Gemini 3 itself sends it.
        let sig = self.signature.take();
        let parts = match sig.as_deref() {
            Some(s) => vec![OutPart {
                text: Some(""),
                thought_signature: Some(s),
                ..Default::default()
            }],
            None => Vec::new(),
        };
        let finish = self
            .finish
            .take()
            .map(|(reason, raw)| gemini_finish(reason, raw.as_deref()));
        if finish.is_some() || self.usage.is_some() || !parts.is_empty() {
            out.push(self.frame(parts, finish));
        }
    }

    fn call_slot(&mut self, index: u32) -> &mut (String, String) {
        let i = index as usize;
        if self.calls.len() <= i {
            self.calls.resize(i + 1, Default::default());
        }
        &mut self.calls[i]
    }

    fn flush_calls(&mut self, out: &mut Vec<Bytes>) {
        if self.calls.iter().all(|(name, _)| name.is_empty()) {
            return;
        }
        let calls = std::mem::take(&mut self.calls);
        let sig = self.signature.take();
        let mut parts: Vec<OutPart> = calls
            .iter()
            .filter(|(name, _)| !name.is_empty())
            .map(|(name, args)| call_part(name, args))
            .collect();
        if let Some(first) = parts.first_mut() {
            first.thought_signature = sig.as_deref();
        }
        out.push(self.frame(parts, None));
    }

    fn frame(&self, parts: Vec<OutPart<'_>>, finish: Option<&'static str>) -> Bytes {
        let chunk = OutResponse {
            candidates: candidate(parts, finish),
            usage_metadata: self.usage.as_ref().map(UsageMetadata::from_ir),
            model_version: &self.model,
            response_id: &self.id,
        };
        let json = serde_json::to_vec(&chunk).expect("serializable");
        let mut b = BytesMut::with_capacity(json.len() + 10);
        b.extend_from_slice(b"data: ");
        b.extend_from_slice(&json);
        b.extend_from_slice(b"\r\n\r\n");
        b.freeze()
    }
}
