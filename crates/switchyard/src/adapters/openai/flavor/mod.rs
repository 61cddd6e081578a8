//! The OpenAI-compatible providers' own rules (contract §9, MAPPING §18):
//! one module per flavor behind [`Flavor`]. A flavor says how a request
//! body changes for its provider (thinking switches, fields it refuses,
//! reasoning sent back or not), whether its answers must be rewritten
//! before a client sees them, and how its errors read beyond the status.
//! [`for_name`] is where flavors are registered; generic and vLLM servers
//! follow OpenAI's rules and cost nothing extra.

mod ark;
mod deepseek;
mod minimax;
mod moonshot;
mod qwen;
pub mod replay;
mod zhipu;

use http::StatusCode;
use serde_json::value::RawValue;
use switchyard_protocol::ir::{ChatResponse, ReasoningConfig};
use switchyard_protocol::passthrough::{self, Fields, Splice};

use crate::adapters::errors::Reading;
use crate::config::{Flavor as Name, ReasoningReplay};
use crate::error::GatewayError;
pub use replay::{Replay, ReplayStore};

/// What a flavor knows of one request: the body about to go upstream (its
/// top-level fields) and what the client asked for in any door's words.
pub struct Request<'a> {
    /// The upstream model name.
    pub model: &'a str,
    pub stream: bool,
    /// The reasoning the client asked for (`reasoning_effort`, Anthropic
    /// `thinking`, Responses `reasoning`).
    pub reasoning: Option<&'a ReasoningConfig>,
    /// The deployment's `max_output_tokens`.
    pub max_output_tokens: Option<u32>,
    pub body: &'a Fields<'a>,
}

impl Request<'_> {
    /// The body has this top-level field (the client's or the provider's
    /// `options`: their choice wins over a flavor's default).
    pub fn has(&self, key: &str) -> bool {
        self.raw(key).is_some()
    }

    pub fn raw(&self, key: &str) -> Option<&RawValue> {
        self.body.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }

    /// Reasoning asked off (`reasoning_effort: none`), on, or not asked.
    pub fn thinking(&self) -> Option<bool> {
        let r = self.reasoning?;
        match r.effort.as_deref() {
            Some("none") => Some(false),
            Some(_) => Some(true),
            None => r.budget_tokens.map(|b| b > 0),
        }
    }
}

/// How a flavor changes the body.
#[derive(Debug, Default)]
pub struct Edits {
    /// Top-level fields set to this JSON (over the body's own).
    pub set: Vec<(&'static str, String)>,
    /// Top-level fields dropped.
    pub remove: Vec<&'static str>,
    /// How the conversation's messages change.
    pub messages: replay::Messages,
}

impl Edits {
    pub fn set(&mut self, key: &'static str, value: serde_json::Value) {
        self.set.push((key, value.to_string()));
    }

    /// `from` renamed `to` (its value kept) when the body has it.
    pub fn rename(&mut self, r: &Request<'_>, from: &'static str, to: &'static str) {
        if let Some(v) = r.raw(from) {
            if !r.has(to) {
                self.set.push((to, v.get().to_owned()));
            }
            self.remove.push(from);
        }
    }

    fn is_empty(&self) -> bool {
        self.set.is_empty() && self.remove.is_empty() && self.messages.is_empty()
    }
}

pub trait Flavor: Send + Sync {
    /// It may change request bodies (`false`: they go as they are, not even
    /// parsed again).
    fn touches_requests(&self) -> bool {
        true
    }

    /// The body's changes for this provider.
    fn edits(&self, _r: &Request<'_>, _e: &mut Edits) {}

    /// `reasoning_replay: auto` for this request's model and settings:
    /// what happens to reasoning from earlier turns.
    fn replay(&self, _r: &Request<'_>) -> Replay {
        Replay::Leave
    }

    /// Its answers are decoded and written again for an OpenAI client, not
    /// passed on as they came (extras stripped, reasoning split off or kept
    /// for a later turn).
    fn rewrites_answers(&self) -> bool {
        false
    }

    /// Its answers carry an inline `<think>…</think>` prefix to split off.
    fn splits_think(&self) -> bool {
        false
    }

    /// A 200 answer (or a stream event) that is an error in disguise.
    fn error_in_answer(&self, _body: &[u8]) -> Option<GatewayError> {
        None
    }

    /// An error body read by its own rules, over what the OpenAI rules read.
    fn read_error(&self, _status: StatusCode, _body: &[u8], _r: &mut Reading) {}
}

/// OpenAI's own rules: generic servers and vLLM.
struct Plain;
impl Flavor for Plain {
    fn touches_requests(&self) -> bool {
        false
    }
}

pub fn for_name(name: Name) -> Box<dyn Flavor> {
    match name {
        Name::Generic | Name::Vllm => Box::new(Plain),
        Name::DeepSeek => Box::new(deepseek::DeepSeek),
        Name::Qwen => Box::new(qwen::Qwen),
        Name::Zhipu => Box::new(zhipu::Zhipu),
        Name::Moonshot => Box::new(moonshot::Moonshot),
        Name::Ark => Box::new(ark::Ark),
        Name::MiniMax => Box::new(minimax::MiniMax),
    }
}

/// The replay a deployment's setting and the flavor's rule give.
pub fn replay_for(flavor: &dyn Flavor, setting: ReasoningReplay, r: &Request<'_>) -> Replay {
    match setting {
        ReasoningReplay::Auto => flavor.replay(r),
        ReasoningReplay::Always => Replay::Every,
        ReasoningReplay::Never => Replay::Strip,
    }
}

/// `body` with the flavor's edits (unchanged, not copied, when it has
/// none). `model`: the body's model (`None`: it has none).
pub fn apply(flavor: &dyn Flavor, facts: Facts<'_>, store: &ReplayStore, body: Vec<u8>) -> Vec<u8> {
    if !flavor.touches_requests() && facts.replay == ReasoningReplay::Auto {
        return body;
    }
    let Ok(text) = std::str::from_utf8(&body) else {
        return body;
    };
    let Ok(fields) = passthrough::parse_object(text) else {
        return body;
    };
    let r = Request {
        model: facts.model,
        stream: facts.stream,
        reasoning: facts.reasoning,
        max_output_tokens: facts.max_output_tokens,
        body: &fields,
    };
    let mut e = Edits::default();
    flavor.edits(&r, &mut e);
    e.messages.replay = replay_for(flavor, facts.replay, &r);
    if e.is_empty() {
        return body;
    }
    if let Some(m) = r.raw("messages").and_then(|m| e.messages.rewrite(m, store)) {
        e.set.push(("messages", m));
    }
    if e.set.is_empty() && e.remove.is_empty() {
        return body;
    }
    let replace: Vec<(&str, &str)> = e.set.iter().map(|(k, v)| (*k, v.as_str())).collect();
    passthrough::write(
        &fields,
        &Splice {
            model: facts.body_model,
            replace: &replace,
            remove: &e.remove,
            ..Splice::default()
        },
    )
}

/// The request's facts [`apply`] needs.
pub struct Facts<'a> {
    pub model: &'a str,
    /// The model as the body names it (`None`: the URL does).
    pub body_model: Option<&'a str>,
    pub stream: bool,
    pub reasoning: Option<&'a ReasoningConfig>,
    pub max_output_tokens: Option<u32>,
    pub replay: ReasoningReplay,
}

/// After decoding: an inline `<think>` split off, and reasoning that made
/// tool calls kept for the turn that sends them back.
pub fn settle(flavor: &dyn Flavor, store: &ReplayStore, ir: &mut ChatResponse) {
    if flavor.splits_think() && ir.reasoning.is_none() {
        if let Some(text) = ir.text.take() {
            let (reasoning, answer) = switchyard_protocol::openai::think::split_whole(&text);
            ir.reasoning = reasoning;
            ir.text = Some(answer);
        }
    }
    if let Some(r) = &ir.reasoning {
        store.remember(ir.tool_calls.iter().map(|c| c.id.as_str()), r);
    }
}

#[cfg(test)]
mod tests;

/// An error body's `code` and `type`, wrapped in `error` or not (Zhipu and
/// Ark have been seen both ways), a number or a string.
pub fn error_fields(body: &[u8]) -> (String, String) {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Default::default();
    };
    let e = v.get("error").filter(|e| e.is_object()).unwrap_or(&v);
    let text = |k: &str| match e.get(k) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => String::new(),
    };
    (text("code"), text("type"))
}
