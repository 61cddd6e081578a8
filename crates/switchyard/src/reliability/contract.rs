//! Response contracts on the request path (contract §11): on a route with
//! `contract:`, a request that asked for JSON with a schema (OpenAI
//! `response_format`, Responses `text.format`, Anthropic
//! `output_config.format`) gets an answer checked against that schema
//! (`crate::contract`) before the client sees a byte of it.
//!
//! A violation, by `on_violation`:
//! - `repair`: the same deployment is asked again, the bad answer and the
//!   validator's message appended to the conversation, up to
//!   `repair_attempts` times; then as `fallback`;
//! - `fallback`: `execute_op` moves on to the next candidate (checked the
//!   same way); when none is left, 502 `response_contract_violation`;
//! - `error`: 502 `response_contract_violation` at once;
//! - `pass`: the answer goes out as it is.
//!
//! Every check is in the decision log (`Record::contract`) and each
//! violation in `switchyard_contract_violations_total{route,deployment}`.
//! Every rejected answer is billed to the request: the provider charged
//! for it. Before a repair the budget hold grows to cover it.
//!
//! Streams: by default (`stream: hold`) a streaming request is asked of the
//! upstream whole, checked, and only then written to the client as a
//! stream (so it can still be repaired or fall back); with `stream: end`
//! it streams as it comes and the relay checks the text at its end, where
//! a violation ends the stream with an error event instead of its clean
//! end (nothing can be taken back by then). A stream of several choices is
//! not checked: their text interleaves, and a held answer is written back
//! as one choice. An answer that calls tools instead of answering, or that
//! cannot be read, is not checked. A whole answer with several choices has
//! its first checked.

use std::sync::{Arc, LazyLock};

use serde_json::Value;
use switchyard_protocol::ir::{ChatRequest, ContentPart, Message, ResponseFormat, Role};

use super::{on_deployment as attempts_on, Op};
use crate::adapters::{Answer, CallInfo, Inbound};
use crate::config::{Contract, ContractStream, OnViolation};
use crate::contract::{Schemas, Violation};
use crate::doors::{Door, Reshaped};
use crate::error::{ErrorCode, GatewayError, Source};
use crate::observe::record::ContractCheck;
use crate::reliability::ctx::RequestCtx;
use crate::route::{Candidate, Plan};

/// Compiled schemas, shared by every request (one per distinct schema).
static SCHEMAS: LazyLock<Schemas> = LazyLock::new(Schemas::default);

/// A request under its route's contract: the terms and the schema.
pub struct Bound<'r> {
    pub terms: Contract,
    pub schema: &'r Value,
    /// The client asked for a stream that is fetched whole first.
    held: bool,
}

/// The contract a request is under: its route has one and the request
/// asked for JSON with a schema.
pub fn bound<'r>(plan: &Plan, inbound: &'r Inbound<'_>) -> Option<Bound<'r>> {
    let terms = plan.contract?;
    let Some(ResponseFormat::JsonSchema { schema, .. }) = &inbound.ir().response_format else {
        return None;
    };
    if inbound.stream() && inbound.n() > 1 {
        return None;
    }
    let held = inbound.stream() && terms.stream == ContractStream::Hold;
    Some(Bound {
        terms,
        schema,
        held,
    })
}

/// A stream checked at its end (`stream: end`): what the relay needs.
#[derive(Clone)]
pub struct AtEnd {
    pub schema: Arc<Value>,
}

impl Bound<'_> {
    /// The relay's check for a stream that is not held.
    pub fn at_end(&self) -> Option<AtEnd> {
        (!self.held).then(|| AtEnd {
            schema: Arc::new(self.schema.clone()),
        })
    }

    fn mode(&self) -> &'static str {
        if self.held {
            "held"
        } else {
            "whole"
        }
    }
}

/// Every attempt on one deployment, each answer checked; a violation is
/// repaired here when the terms say so, and otherwise (or once the repairs
/// are spent) comes back as `response_contract_violation` for `execute_op`
/// to fall back on or to return.
#[allow(clippy::too_many_arguments)]
pub(super) async fn on_deployment(
    bound: &Bound<'_>,
    cand: &Candidate,
    inbound: &Inbound<'_>,
    call: &CallInfo,
    estimate: u64,
    plan: &Plan,
    last: bool,
    ctx: &mut RequestCtx,
) -> Result<Answer, GatewayError> {
    let dep = &cand.dep;
    ctx.contract.get_or_insert_with(Default::default).mode = bound.mode();
    // What goes upstream: the client's request, or (held, repaired) its IR
    // reshaped, never as a stream.
    let mut reshaped = bound.held.then(|| reshape(whole(inbound.ir()), inbound));
    let mut repairs = 0;
    loop {
        let answer = attempts_on(
            cand,
            Op::Chat(reshaped.as_ref().unwrap_or(inbound)),
            call,
            estimate,
            plan,
            last,
            ctx,
        )
        .await?;
        // `stream: end`: the relay checks it.
        let Answer::Json(j) = answer else {
            return Ok(answer);
        };
        let Some((text, violation)) = check(bound.schema, inbound.door(), &j.body) else {
            log(ctx, &dep.name, None, None);
            return Ok(Answer::Json(j));
        };
        let then = next_step(bound.terms, repairs);
        log(ctx, &dep.name, Some(then), Some(&violation.message));
        if bound.terms.on_violation == OnViolation::Pass {
            return Ok(Answer::Json(j));
        }
        // The provider billed the rejected answer: so is the request.
        ctx.add_usage(&j.usage, dep.cfg.pricing.as_ref());
        if then != "repair" {
            return Err(violated(&dep.name, &violation));
        }
        repairs += 1;
        // The repair is one more call: the hold covers it on top of what
        // was spent.
        super::hold_budget(dep, Op::Chat(inbound), ctx)?;
        let base = match reshaped.take() {
            Some(Inbound::Reshaped(r)) => r.ir,
            _ => whole(inbound.ir()),
        };
        reshaped = Some(reshape(repair(base, &text, &violation), inbound));
    }
}

/// What a violation gets now: a repair while the terms allow one more.
fn next_step(terms: Contract, repairs: u32) -> &'static str {
    match terms.on_violation {
        OnViolation::Repair if repairs < terms.repair_attempts => "repair",
        OnViolation::Repair | OnViolation::Fallback => "fallback",
        OnViolation::Error => "error",
        OnViolation::Pass => "pass",
    }
}

/// The answer's text and why it violates `schema`; `None` when it
/// satisfies it or is not checked (tool calls, an unreadable body).
fn check(schema: &Value, door: Door, body: &[u8]) -> Option<(String, Violation)> {
    let answer = door.read_answer(body)?;
    let text = answer.text.unwrap_or_default();
    if text.trim().is_empty() && !answer.tool_calls.is_empty() {
        return None;
    }
    check_text(schema, &text).map(|v| (text, v))
}

/// Why `text` violates `schema`, if it does (a schema this gateway cannot
/// compile passes everything: its answers are not held hostage to it).
pub fn check_text(schema: &Value, text: &str) -> Option<Violation> {
    SCHEMAS.check(schema, text).err()
}

/// A check in the decision log.
fn log(ctx: &mut RequestCtx, dep: &Arc<str>, then: Option<&'static str>, error: Option<&str>) {
    let c = ctx.contract.get_or_insert_with(Default::default);
    c.checks.push(ContractCheck {
        deployment: dep.clone(),
        valid: then.is_none(),
        then,
        error: error.map(str::to_owned),
    });
}

/// A stream checked at its end: the check in the decision log, and the
/// error that ends the stream when it failed.
pub fn judge_end(
    at_end: &AtEnd,
    dep: &Arc<str>,
    text: &str,
    ctx: &mut RequestCtx,
) -> Option<GatewayError> {
    let c = ctx.contract.get_or_insert_with(Default::default);
    c.mode = "end";
    let Some(violation) = check_text(&at_end.schema, text) else {
        log(ctx, dep, None, None);
        return None;
    };
    log(ctx, dep, Some("error"), Some(&violation.message));
    Some(violated(dep, &violation))
}

fn violated(dep: &str, v: &Violation) -> GatewayError {
    GatewayError::new(
        ErrorCode::ResponseContractViolation,
        Source::Upstream,
        format!(
            "the answer from {dep} does not satisfy the request's JSON Schema: {}",
            v.message
        ),
    )
}

/// The request asked whole.
fn whole(ir: &ChatRequest) -> ChatRequest {
    ChatRequest {
        stream: false,
        include_usage: false,
        ..ir.clone()
    }
}

fn reshape<'a>(ir: ChatRequest, of: &'a Inbound<'a>) -> Inbound<'a> {
    Inbound::Reshaped(Box::new(Reshaped { ir, of }))
}

/// The conversation with the rejected answer and what was wrong with it.
fn repair(mut ir: ChatRequest, answer: &str, v: &Violation) -> ChatRequest {
    ir.messages.push(Message {
        role: Role::Assistant,
        content: vec![ContentPart::Text(answer.to_owned())],
        ..Message::default()
    });
    ir.messages.push(Message {
        role: Role::User,
        content: vec![ContentPart::Text(format!(
            "Your previous answer does not satisfy the required JSON Schema: {}. \
             Answer again with only the JSON value, satisfying the schema.",
            v.message
        ))],
        ..Message::default()
    });
    ir
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(on_violation: OnViolation, repair_attempts: u32) -> Contract {
        Contract {
            on_violation,
            repair_attempts,
            stream: ContractStream::Hold,
        }
    }

    #[test]
    fn repairs_run_out_then_fall_back() {
        let t = terms(OnViolation::Repair, 2);
        assert_eq!(next_step(t, 0), "repair");
        assert_eq!(next_step(t, 1), "repair");
        assert_eq!(next_step(t, 2), "fallback");
        assert_eq!(next_step(terms(OnViolation::Fallback, 0), 0), "fallback");
        assert_eq!(next_step(terms(OnViolation::Error, 0), 0), "error");
        assert_eq!(next_step(terms(OnViolation::Pass, 0), 0), "pass");
    }

    #[test]
    fn a_repair_appends_the_answer_and_the_validators_message() {
        let ir = ChatRequest {
            stream: true,
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentPart::Text("extract".into())],
                ..Message::default()
            }],
            ..ChatRequest::default()
        };
        let v = Violation {
            message: "at /total: \"x\" is not of type \"number\"".into(),
        };
        let out = repair(whole(&ir), "{\"total\":\"x\"}", &v);
        assert!(!out.stream);
        assert_eq!(out.messages.len(), 3);
        assert_eq!(out.messages[1].role, Role::Assistant);
        assert_eq!(out.messages[1].text(), "{\"total\":\"x\"}");
        assert!(out.messages[2].text().contains("is not of type"));
    }

    #[test]
    fn tool_calls_and_unreadable_answers_are_not_checked() {
        let schema = serde_json::json!({"type": "object", "required": ["a"]});
        let calls = br#"{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#;
        assert!(check(&schema, Door::OpenAiChat, calls).is_none());
        assert!(check(&schema, Door::OpenAiChat, b"not json").is_none());
        let bad = br#"{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"b\":1}"},"finish_reason":"stop"}]}"#;
        let (text, v) = check(&schema, Door::OpenAiChat, bad).expect("a violation");
        assert_eq!(text, "{\"b\":1}");
        assert!(v.message.contains("\"a\""), "{}", v.message);
    }
}
