//! One shadow: the primary's answer read as the IR, the request copied and
//! sent to the shadow deployment (its circuit and limits permitting), the
//! two answers compared, and the shadow's usage row queued for the ledger.

use std::sync::Arc;
use std::time::SystemTime;

use switchyard_protocol::ir::{ChatRequest, ChatResponse, ResponseFormat};
use tokio::time::Instant;

use super::compare::Pair;
use super::{Inner, Job, Primary, Request, CLIENT};
use crate::adapters::{self, Answer, CallInfo, JsonAnswer};
use crate::doors::Door;
use crate::error::{ErrorCode, GatewayError};
use crate::observe::record::cost_usd;
use crate::reliability::ctx::Answered;
use crate::usage::record::{UsageRow, Write};

pub(super) async fn run(job: Job, inner: &Inner) {
    let Job {
        route,
        dep,
        request: copy,
        primary,
    } = job;
    let target = dep.name.clone();
    let skip = |why: &str| {
        tracing::debug!(%route, %target, why, "shadow skipped");
        inner.tally(&route, &target, |t| t.skipped += 1);
        inner.count(&route, &target, "skipped");
    };
    let answer = match &primary.answer {
        Answered::Ir(a) => Some((**a).clone()),
        Answered::Body(b) => copy.door.read_answer(b),
    };
    let (Some(answer), Some(ir)) = (answer, request(&copy)) else {
        return skip("the request or its answer could not be read again");
    };
    // A fresh OpenAI request rather than the client's own (reshaped):
    // answering through the client's door would write the shadow's answer
    // where the client's is kept (a Responses request's stored response).
    let body =
        switchyard_protocol::openai::encode_request(&ir, Some(&ir.model), &Default::default());
    let Ok(text) = String::from_utf8(body) else {
        return skip("the copy is not UTF-8");
    };
    let Ok(inbound) = Door::OpenAiChat.decode(&text) else {
        return skip("the copy does not decode");
    };
    let dep = &dep;
    let now = Instant::now();
    // Never the half-open trial: that is the prober's or a request's.
    if !dep.state.circuit.is_admissible(now) {
        return skip("the shadow target's circuit is open");
    }
    let Ok(reservation) = dep.state.check_rate(now, primary.tokens.max(1)) else {
        return skip("the shadow target's rpm/tpm is spent");
    };
    let key = match crate::reliability::pick_key(dep) {
        Ok(k) => k,
        Err(_) => {
            reservation.cancel();
            return skip("the shadow target has no usable key");
        }
    };
    let Ok(permit) = dep.state.acquire().await else {
        reservation.cancel();
        return skip("the shadow target's concurrency queue is full");
    };
    let inflight = dep.state.health.start();
    let call = CallInfo {
        traceparent: None,
        deadline: None,
        anthropic_beta: None,
        capture: false,
    };
    let sent_at = SystemTime::now();
    let started = Instant::now();
    let result = match adapters::chat(dep, key, &inbound, &call).await {
        Ok(Answer::Json(j)) => Ok(j),
        Ok(Answer::Stream(_)) => Err(GatewayError::upstream(
            ErrorCode::UpstreamError,
            "a stream answered a request that asked for none",
        )),
        Err(e) => Err(e),
    };
    let took = started.elapsed();
    drop((inflight, permit));
    let outcome = result.as_ref().map(|_| ());
    if let Some(t) = dep.state.observe(Instant::now(), outcome, took, false) {
        tracing::warn!(deployment = %dep.name, from = t.from.as_str(), to = t.to.as_str(), reason = t.reason, "shadow: circuit");
    }
    reservation.settle_used(result.as_ref().map_or(0, |j| j.usage.total()));
    let ms = took.as_secs_f64() * 1e3;
    let mut row = UsageRow {
        request_id: format!("shadow-{}", primary.request_id),
        ts_ms: crate::usage::query::to_ms(sent_at),
        client: Some(Arc::from(CLIENT)),
        key_id: None,
        route: Some(route.clone()),
        model: Some(dep.model.clone()),
        deployment: Some(target.clone()),
        status: 200,
        outcome: "ok",
        usage_estimated: false,
        stream: false,
        cache: "off",
        input_tokens: 0,
        output_tokens: 0,
        cached_input_tokens: 0,
        cost_usd: 0.0,
        latency_ms: ms,
        ttfb_ms: None,
        attempts: 1,
        task: None,
        shadow: true,
    };
    inner.tally(&route, &target, |t| t.requests += 1);
    match result {
        Ok(j) => {
            let cost = dep.cfg.pricing.map_or(0.0, |p| cost_usd(&j.usage, &p));
            row.input_tokens = j.usage.input_tokens;
            row.output_tokens = j.usage.output_tokens;
            row.cached_input_tokens = j.usage.cached_input_tokens;
            row.cost_usd = cost;
            row.ttfb_ms = Some(j.ttfb.as_secs_f64() * 1e3);
            if !j.model.is_empty() {
                row.model = Some(Arc::from(j.model.as_str()));
            }
            let shadow = Shadow { j: &j, ms, cost };
            compare(inner, (&route, &target), &ir, (&primary, &answer), shadow);
            inner.count(&route, &target, "ok");
        }
        Err(e) => {
            let e = crate::observe::redact::redact_error(e, &dep.provider.secret_refs());
            tracing::debug!(%route, %target, code = e.code.as_str(), error = %e.message, "shadow failed");
            row.status = e
                .upstream_status
                .unwrap_or_else(|| e.code.status().as_u16());
            row.outcome = e.code.as_str();
            inner.tally(&route, &target, |t| t.errors += 1);
            inner.count(&route, &target, "error");
        }
    }
    if let Some(u) = &inner.usage {
        u.send(Write::Row(row));
    }
}

/// The client's request as the IR, not streamed.
fn request(r: &Request) -> Option<ChatRequest> {
    let mut ir = match &r.ir {
        Some(ir) => (**ir).clone(),
        None => r.door.reparse(std::str::from_utf8(&r.body).ok()?)?,
    };
    // A Responses request the IR cannot express decodes as an empty one.
    if ir.messages.is_empty() {
        return None;
    }
    ir.stream = false;
    Some(ir)
}

/// The shadow's answer, what it took and cost.
struct Shadow<'a> {
    j: &'a JsonAnswer,
    ms: f64,
    cost: f64,
}

/// The shadow's answer beside the primary's, into the route's figures.
fn compare(
    inner: &Inner,
    (route, target): (&Arc<str>, &Arc<str>),
    ir: &ChatRequest,
    (primary, answer): (&Primary, &ChatResponse),
    s: Shadow<'_>,
) {
    let Some(shadow) = Door::OpenAiChat.read_answer(&s.j.body) else {
        return;
    };
    let schema_valid = match &ir.response_format {
        Some(ResponseFormat::JsonSchema { schema, .. }) => {
            let text = shadow.text.as_deref().unwrap_or_default();
            Some(inner.schemas.check(schema, text).is_ok())
        }
        _ => None,
    };
    let pair = Pair {
        primary: answer,
        shadow: &shadow,
        primary_ms: primary.ms,
        shadow_ms: s.ms,
        primary_cost: primary.cost_usd,
        shadow_cost: s.cost,
        schema_valid,
    };
    inner.tally(route, target, |t| t.add(&pair));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a shadow sends: the client's request, not streamed, as an
    /// OpenAI chat request any provider module translates from.
    #[test]
    fn the_copy_is_the_request_without_its_stream() {
        let body = br#"{"model":"chat","stream":true,"max_tokens":7,"messages":[{"role":"user","content":"hi"}],
            "response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}}}"#;
        let ir = Door::OpenAiChat
            .reparse(std::str::from_utf8(body).unwrap())
            .unwrap();
        assert!(ir.stream);
        let mut copy = ir.clone();
        copy.stream = false;
        let text = String::from_utf8(switchyard_protocol::openai::encode_request(
            &copy,
            Some(&copy.model),
            &Default::default(),
        ))
        .unwrap();
        let again = Door::OpenAiChat.decode(&text).unwrap();
        assert!(!again.stream());
        assert_eq!(again.ir().messages, ir.messages);
        assert_eq!(again.ir().max_tokens, Some(7));
        assert_eq!(again.ir().response_format, ir.response_format);
    }
}
