//! generateContent answer → IR (MAPPING.md §7, §9, §10).

use std::fmt;

use super::error::{parse_error, parse_status, GeminiError};
use super::wire::{InCandidate, InPart, InResponse};
use super::{compact_json, synth_call_id, synth_response_id};
use crate::ir::{self, FinishReason};

/// Why an answer body is not a normal response.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeError {
    /// Not a GenerateContentResponse.
    Json(String),
    /// HTTP 200 with `promptFeedback.blockReason` and no candidates: the
    /// contract reports this as `content_filtered` (HTTP 400).
    PromptBlocked {
        reason: String,
        message: Option<String>,
    },
    /// A `google.rpc.Status` body (`{"error": …}`).
    Upstream(GeminiError),
    /// No candidate and no block reason.
    NoCandidates,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Json(e) => write!(f, "unreadable Gemini response: {e}"),
            DecodeError::PromptBlocked { reason, message } => {
                write!(f, "prompt blocked by Gemini ({reason})")?;
                match message {
                    Some(m) => write!(f, ": {m}"),
                    None => Ok(()),
                }
            }
            DecodeError::Upstream(e) => {
                write!(f, "Gemini error {} {}: {}", e.code, e.status, e.message)
            }
            DecodeError::NoCandidates => f.write_str("Gemini returned no candidates"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// MAPPING.md §9. `STOP` becomes `ToolCalls` when the answer made calls.
pub fn finish_reason(raw: &str, made_calls: bool) -> FinishReason {
    match raw {
        "STOP" if made_calls => FinishReason::ToolCalls,
        "MAX_TOKENS" => FinishReason::Length,
        "SAFETY"
        | "RECITATION"
        | "BLOCKLIST"
        | "PROHIBITED_CONTENT"
        | "SPII"
        | "IMAGE_SAFETY"
        | "IMAGE_PROHIBITED_CONTENT"
        | "IMAGE_RECITATION" => FinishReason::ContentFilter,
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" | "TOO_MANY_TOOL_CALLS" => {
            FinishReason::Error
        }
        _ => FinishReason::Stop,
    }
}

/// A whole answer. Text parts are joined, thought parts become reasoning,
/// function calls get synthesized ids (see the module docs); the first
/// `thoughtSignature` on a function call (else the last one seen) becomes
/// `reasoning_signature`.
pub fn decode_response(body: &[u8]) -> Result<ir::ChatResponse, DecodeError> {
    let r: InResponse = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => {
            return Err(match parse_error(body) {
                Some(g) => DecodeError::Upstream(g),
                None => DecodeError::Json(e.to_string()),
            })
        }
    };
    if let Some(g) = r.error.and_then(|e| parse_status(e.get())) {
        return Err(DecodeError::Upstream(g));
    }
    if let Some((reason, message)) = r.blocked() {
        return Err(DecodeError::PromptBlocked { reason, message });
    }
    let cand = r.candidate().ok_or(DecodeError::NoCandidates)?;
    let id = r
        .response_id
        .as_deref()
        .map_or_else(synth_response_id, str::to_owned);
    Ok(candidate(&r, cand, id))
}

/// Every candidate of an answer (`candidateCount` > 1), in index order;
/// the usage, which covers them all, is on the first.
pub fn decode_candidates(body: &[u8]) -> Result<Vec<ir::ChatResponse>, DecodeError> {
    let first = decode_response(body)?;
    let r: InResponse =
        serde_json::from_slice(body).map_err(|e| DecodeError::Json(e.to_string()))?;
    let mut cands: Vec<&InCandidate<'_>> = r.candidates.iter().collect();
    cands.sort_by_key(|c| c.index.unwrap_or(0));
    // One answer, one id: the other candidates share the first's.
    let id = first.id.clone();
    let mut out = vec![first];
    for c in cands.into_iter().skip(1) {
        let mut one = candidate(&r, c, id.clone());
        one.usage = Default::default();
        out.push(one);
    }
    Ok(out)
}

/// One candidate; `id` is the answer's (its `responseId`, else a made-up one).
fn candidate(r: &InResponse<'_>, cand: &InCandidate<'_>, id: String) -> ir::ChatResponse {
    let mut acc = Collected::default();
    for p in cand.content.iter().flat_map(|c| &c.parts) {
        acc.part(p, &id);
    }
    let raw_finish = cand.finish_reason.as_deref();
    ir::ChatResponse {
        id,
        model: r.model_version.as_deref().unwrap_or_default().to_owned(),
        created: 0,
        text: acc.text,
        reasoning: acc.reasoning,
        reasoning_signature: acc.call_signature.or(acc.other_signature),
        finish_reason: raw_finish
            .map(|f| finish_reason(f, !acc.calls.is_empty()))
            .unwrap_or(if acc.calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            }),
        tool_calls: acc.calls,
        refusal: None,
        raw_finish_reason: raw_finish.map(str::to_owned),
        usage: r
            .usage_metadata
            .as_ref()
            .map(|u| u.to_ir())
            .unwrap_or_default(),
    }
}

#[derive(Default)]
struct Collected {
    text: Option<String>,
    reasoning: Option<String>,
    calls: Vec<ir::ToolCall>,
    call_signature: Option<String>,
    other_signature: Option<String>,
}

impl Collected {
    fn part(&mut self, p: &InPart, response_id: &str) {
        if let Some(fc) = &p.function_call {
            let name = fc.name.as_deref().unwrap_or_default();
            let n = self.calls.len();
            self.calls.push(ir::ToolCall {
                id: fc
                    .id
                    .as_deref()
                    .filter(|id| !id.is_empty())
                    .map(str::to_owned)
                    .unwrap_or_else(|| synth_call_id(n, response_id, name)),
                name: name.to_owned(),
                arguments: fc
                    .args
                    .map(|a| compact_json(a.get()))
                    .unwrap_or_else(|| "{}".to_owned()),
            });
            if self.call_signature.is_none() {
                self.call_signature = p.thought_signature.as_deref().map(str::to_owned);
            }
            return;
        }
        if let Some(sig) = p.thought_signature.as_deref().filter(|s| !s.is_empty()) {
            self.other_signature = Some(sig.to_owned());
        }
        let Some(t) = p.text.as_deref().filter(|t| !t.is_empty()) else {
            return;
        };
        let slot = if p.is_thought() {
            &mut self.reasoning
        } else {
            &mut self.text
        };
        slot.get_or_insert_with(String::new).push_str(t);
    }
}
