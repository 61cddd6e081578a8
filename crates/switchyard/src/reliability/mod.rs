//! RELIABILITY: walk the plan's candidates and make the attempts.
//!
//! Per candidate: the circuit admits (or a half-open probe), the deployment's
//! limits admit (a full queue fails fast, so the next candidate is tried
//! rather than the busy one melted), then attempts on that deployment: the
//! contract's table decides — retry the same deployment after the upstream's
//! Retry-After or a full-jitter backoff (within the route's `retry.attempts`,
//! the retry budget and the deadline), move to the next candidate, or return
//! at once. Keys (contract §8): an answer that says the key itself is bad
//! (`auth_failed` from the upstream) or spent quota sets that key aside and
//! tries the next key, then the next deployment; a 403 about one request
//! (`forbidden`) sets nothing aside. A key rejected as bad is checked again
//! in the background (`key_check`). A 429 with Retry-After cools its key
//! down for that long; while every key of the provider cools down, a request
//! moves on to its next candidate, or, on its last, waits for a key within
//! its deadline, else answers `rate_limited` with Retry-After — never
//! `auth_failed`. A `context_too_long` escalates to
//! a candidate with a larger window when the route allows it. Streams are
//! opened up to their first event inside the attempt, so everything here
//! happens before the client has seen a byte. Every attempt is logged.

pub mod client_side;
pub mod contract;
pub mod ctx;
pub mod key_check;
pub mod probe;
pub mod relay;
pub mod resume;
pub mod retry;
pub mod shared;

use std::sync::Arc;

use tokio::time::Instant;

use crate::adapters::deployment::DeploymentRt;
use crate::adapters::{self, Answer, CallInfo, Inbound};
use crate::config::{ContextOverflow, OnViolation, ProviderKey};
use crate::doors::embeddings::EmbeddingsRequest;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::governance::budget::worst_case;
use crate::observe::record::AttemptLog;
use crate::registry::circuit::Admit;
use crate::registry::health::{self, SetAside};
use crate::registry::held::Held;
use crate::registry::limits;
use crate::reliability::ctx::RequestCtx;
use crate::route::{Candidate, Plan};
use crate::upstream::retry_after::jittered;

pub struct Served {
    pub answer: Answer,
    pub dep: Arc<DeploymentRt>,
    pub attempts: usize,
    /// Why the first choice did not serve, when it did not.
    pub fallback_reason: Option<&'static str>,
}

/// What one attempt does: the walk over candidates, retries, circuits and
/// limits is the same for each.
#[derive(Clone, Copy)]
pub enum Op<'r, 'b> {
    /// A chat completion (either door), stream or not.
    Chat(&'r Inbound<'b>),
    /// `POST /v1/embeddings`.
    Embeddings(&'r EmbeddingsRequest<'b>),
    /// `POST /v1/messages/count_tokens` (an Anthropic `Inbound`).
    CountTokens(&'r Inbound<'b>),
}

impl Op<'_, '_> {
    /// GenAI `gen_ai.operation.name` (count_tokens has none of its own).
    fn name(&self) -> &'static str {
        match self {
            Op::Chat(_) => "chat",
            Op::Embeddings(_) => "embeddings",
            Op::CountTokens(_) => "count_tokens",
        }
    }

    /// Answered here without an upstream call (a token count on a
    /// deployment whose upstream has no counter): no circuit, limits or
    /// health stats are involved.
    fn is_local(&self, dep: &DeploymentRt) -> bool {
        matches!(self, Op::CountTokens(_)) && adapters::count_tokens::is_local(dep)
    }

    /// The local answer ([`Op::is_local`] ops only).
    async fn local(&self, dep: &Arc<DeploymentRt>) -> Result<Answer, GatewayError> {
        match self {
            Op::CountTokens(inbound) => {
                // Tokenizing is CPU work (~0.1 µs a byte, plus the
                // vocabulary's one-time load): off the async workers.
                let (dep, ir) = (dep.clone(), inbound.ir().clone());
                let counted =
                    tokio::task::spawn_blocking(move || adapters::count_tokens::local(&dep, &ir))
                        .await;
                counted.map(Answer::Json).map_err(|e| {
                    GatewayError::new(
                        ErrorCode::UpstreamError,
                        Source::Gateway,
                        format!("local token count failed: {e}"),
                    )
                })
            }
            _ => Err(GatewayError::new(
                ErrorCode::UpstreamError,
                Source::Gateway,
                "no local answer for this request",
            )),
        }
    }

    async fn send(
        &self,
        dep: &DeploymentRt,
        key: Option<&ProviderKey>,
        call: &CallInfo,
    ) -> Result<Answer, GatewayError> {
        let sent = match self {
            Op::Chat(inbound) => adapters::chat(dep, key, inbound, call).await,
            Op::Embeddings(req) => adapters::embeddings::embeddings(dep, key, req, call).await,
            Op::CountTokens(inbound) => {
                adapters::count_tokens::count_tokens(dep, key, inbound, call).await
            }
        };
        // What the upstream wrote may echo the provider's key, in any
        // shape: masked before it reaches a client, a log or a trace.
        match sent {
            Ok(Answer::Stream(mut s)) => {
                s.mask_keys_of(dep.provider.clone());
                Ok(Answer::Stream(s))
            }
            Ok(a) => Ok(a),
            Err(e) => Err(crate::observe::redact::redact_error(
                e,
                &dep.provider.secret_refs(),
            )),
        }
    }
}

pub async fn execute(
    plan: &Plan,
    inbound: &Inbound<'_>,
    call: &CallInfo,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<Served, GatewayError> {
    execute_op(plan, Op::Chat(inbound), call, estimate, ctx).await
}

/// [`execute`] for any [`Op`].
pub async fn execute_op(
    plan: &Plan,
    op: Op<'_, '_>,
    call: &CallInfo,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<Served, GatewayError> {
    let mut errors: Vec<GatewayError> = Vec::new();
    // A route's response contract checks chat answers (contract §11).
    let bound = match op {
        Op::Chat(inbound) => contract::bound(plan, inbound).map(|b| (b, inbound)),
        Op::Embeddings(_) | Op::CountTokens(_) => None,
    };
    // Escalation: after a context_too_long, only larger windows are worth it.
    let mut min_window: Option<u32> = None;
    for (i, cand) in plan.candidates.iter().enumerate() {
        let last = i + 1 == plan.candidates.len();
        if past(call.deadline) {
            errors.push(GatewayError::upstream(
                ErrorCode::Timeout,
                "the route's deadline passed",
            ));
            break;
        }
        if min_window.is_some_and(|w| cand.dep.cfg.context_window.is_none_or(|cw| cw <= w)) {
            continue;
        }
        if let Err(e) = hold_budget(&cand.dep, op, ctx) {
            errors.push(e);
            continue;
        }
        if op.is_local(&cand.dep) {
            let dep = &cand.dep;
            shared::admit_client(dep.state.shared(), ctx).await?;
            let started = Instant::now();
            let answer = match op.local(dep).await {
                Ok(a) => a,
                Err(e) => {
                    ctx.attempts.push(AttemptLog::failed(
                        &dep.name,
                        &dep.provider.name,
                        &e,
                        started.elapsed(),
                    ));
                    errors.push(e);
                    continue;
                }
            };
            let took = started.elapsed();
            let mut log = AttemptLog::ok(&dep.name, &dep.provider.name, took, took);
            log.span.operation = op.name();
            log.span.provider = dep.api().gen_ai_name();
            log.span.request_model = Some(dep.model.clone());
            ctx.attempts.push(log);
            return Ok(Served {
                answer,
                dep: dep.clone(),
                attempts: ctx.attempts.len(),
                fallback_reason: errors.first().map(fallback_reason).or(plan.passed_over),
            });
        }
        let outcome = match &bound {
            Some((b, inbound)) => {
                contract::on_deployment(b, cand, inbound, call, estimate, plan, last, ctx).await
            }
            None => on_deployment(cand, op, call, estimate, plan, last, ctx).await,
        };
        match outcome {
            Ok(answer) => {
                let attempts = ctx.attempts.len();
                return Ok(Served {
                    answer,
                    dep: cand.dep.clone(),
                    attempts,
                    fallback_reason: errors.first().map(fallback_reason).or(plan.passed_over),
                });
            }
            Err(e) => {
                let escalate = e.code == ErrorCode::ContextTooLong
                    && plan.overflow == ContextOverflow::Escalate;
                if escalate {
                    min_window = Some(cand.dep.cfg.context_window.unwrap_or(0));
                }
                // Too long moves on only to escalate; a busy deployment (full
                // queue, quota rest) moves on; everything else per the table.
                // Busy or open-circuited right now (a full queue, a quota rest,
                // a probe another request holds): move on to the next candidate.
                let busy = matches!(
                    e.code,
                    ErrorCode::GatewayRateLimited | ErrorCode::NoHealthyDeployment
                ) && e.source == Source::Gateway;
                let over_budget =
                    e.code == ErrorCode::BudgetExceeded && e.source == Source::Gateway;
                // The contract's own word: `error` stops, the others go on.
                let unfit_answer = e.code == ErrorCode::ResponseContractViolation
                    && bound
                        .as_ref()
                        .is_some_and(|(b, _)| b.terms.on_violation != OnViolation::Error);
                let stop = if ctx.client_rejected {
                    true
                } else if e.code == ErrorCode::ContextTooLong {
                    !escalate
                } else {
                    !(e.fall_back() || busy || over_budget || unfit_answer)
                };
                errors.push(e);
                if stop {
                    break;
                }
            }
        }
    }
    Err(give_up(errors))
}

/// Cover the request's worst case on `dep` with the client's budget before
/// anything is sent there (a pricier fallback raises the hold), on top of
/// what the request has spent already (answers a response contract
/// rejected). A candidate that does not fit is skipped: a cheaper one
/// further down may.
fn hold_budget(
    dep: &DeploymentRt,
    op: Op<'_, '_>,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let input = input_on(dep, ctx);
    let Some(hold) = ctx.budget.as_mut() else {
        return Ok(());
    };
    let spent = ctx.rec.cost_usd.unwrap_or(0.0);
    let worst = spent
        + match op {
            Op::Chat(_) => worst_case(&dep.cfg, input, ctx.output_cap, ctx.output_choices),
            Op::Embeddings(_) => worst_case(&dep.cfg, ctx.prompt_estimate, None, 0),
            // Counting tokens costs nothing: a spent budget does not refuse it.
            Op::CountTokens(_) => return Ok(()),
        };
    // In a fleet the attempt's admission charges it on the shared counter
    // (one round trip with the rate windows).
    if dep.state.shared().is_up() {
        ctx.shared.budget = (hold.shared_more(worst) > 0).then_some(worst);
        return Ok(());
    }
    if hold.shared_key().is_some() || hold.cover(worst) {
        return Ok(());
    }
    ctx.rec.attempts.push(AttemptLog::skipped(
        &dep.name,
        &dep.provider.name,
        "budget_exceeded",
    ));
    let client = ctx.rec.client.as_deref().unwrap_or("this client");
    Err(GatewayError::new(
        ErrorCode::BudgetExceeded,
        Source::Gateway,
        format!(
            "{client}'s budget has ${:.6} left, and this request may cost up to ${worst:.6} on {}",
            hold.remaining(),
            dep.name
        ),
    ))
}

/// The request's input estimate as `dep`'s upstream bills it (tool
/// definitions rendered its way).
fn input_on(dep: &DeploymentRt, ctx: &RequestCtx) -> u64 {
    let extra = ctx.input.extra(crate::route::renders(dep));
    ctx.prompt_estimate.saturating_add_signed(extra)
}

/// Why the candidate before the one that served did not: its error's code,
/// or `circuit_open` when its circuit turned it away unasked.
fn fallback_reason(e: &GatewayError) -> &'static str {
    match (e.code, e.source) {
        (ErrorCode::NoHealthyDeployment, Source::Gateway) => "circuit_open",
        (code, _) => code.as_str(),
    }
}

/// The rest after a 429 that gave no Retry-After (Gemini without
/// `RetryInfo`).
const REST_UNSAID: std::time::Duration = std::time::Duration::from_secs(1);

/// Every attempt on one deployment: keys, retries, circuit and limits.
/// `last`: no candidate comes after this one (so it may wait for a key).
async fn on_deployment(
    cand: &Candidate,
    op: Op<'_, '_>,
    call: &CallInfo,
    estimate: u64,
    plan: &Plan,
    last: bool,
    ctx: &mut RequestCtx,
) -> Result<Answer, GatewayError> {
    let dep = &cand.dep;
    let st = &dep.state;
    let probe = admit_circuit(dep, ctx)?;
    st.retry_budget.deposit();
    let mut failed = 0u32;
    loop {
        // The key first: a request waiting for one holds no slot.
        let key = key_for_attempt(dep, call, last && !probe, ctx).await?;
        // Admitted per attempt: a request sleeping before its retry (e.g. a
        // 429's Retry-After) holds no concurrency slot, and rpm/tpm count
        // every request actually sent upstream.
        let slot = admit_attempt(dep, estimate, ctx).await?;
        let result = attempt(dep, key, op, call, probe, ctx).await;
        let e = match result {
            Ok(answer) => return Ok(slot.serve(answer)),
            Err(e) => e,
        };
        failed += 1;
        if set_key_aside(dep, key, &e) {
            // Another key may do (now, or once its cooldown ends): not a
            // retry of the same request shape.
            if !probe && keys_left(dep) {
                slot.settle(0);
                continue;
            }
            slot.cancel();
            return Err(e);
        }
        // The key cools down for exactly the wait the upstream asked for,
        // so the retry that wait was for finds it usable (§4), and other
        // requests wait for it or go elsewhere instead of meeting the same 429.
        if let Some(rest) = e.rests_for.filter(|_| e.code == ErrorCode::RateLimited) {
            // A quota that resets at a known time is spent (a per-day
            // quota): nothing is gained by asking again before the reset.
            // With another key, this key sits it out and the request goes
            // on at once with the next; with none, the deployment rests
            // until the reset (the key stays usable for the provider's
            // other models, whose quotas are their own).
            let other_key = dep
                .state
                .keys
                .usable_keys(&dep.provider.cfg.keys, |k| k.label.as_str())
                .any(|k| key.is_none_or(|used| used.label != k.label));
            if let (Some(k), true) = (key, other_key) {
                st.keys.cool_down(k, Instant::now() + rest);
                if !probe {
                    slot.settle(0);
                    continue;
                }
            } else {
                st.limits.rest_until_reset(Instant::now(), rest);
            }
            slot.cancel();
            return Err(e);
        }
        if e.code == ErrorCode::RateLimited {
            if let (Some(k), Some(wait)) = (key, e.retry_after) {
                let wait = wait.min(retry::MAX_COOLDOWN);
                st.keys.cool_down(k, Instant::now() + wait);
            }
            // And the deployment rests (contract §10): longer each time it
            // refuses again right after a rest, so a provider that keeps
            // answering 429 is not hit by every waiting request at once.
            // With another key usable now, only this key rests.
            let other_key = dep
                .state
                .keys
                .usable_keys(&dep.provider.cfg.keys, |k| k.label.as_str())
                .next()
                .is_some();
            if !other_key {
                let asked = e.retry_after.unwrap_or(REST_UNSAID);
                st.limits.rest_after_429(Instant::now(), asked);
            }
        }
        let remaining = call
            .deadline
            .map(|d| d.saturating_duration_since(Instant::now()));
        let delay = if probe {
            None
        } else {
            retry::retry_within(&e, failed, &plan.retry, remaining)
        };
        // The retry comes back after the deployment's rest (it is the one
        // request that asks again); a rest too long to wait within the
        // request's deadline sends it elsewhere with what it got.
        let resting = st.limits.blocked_for(Instant::now());
        let delay = delay
            .map(|d| resting.map_or(d, |r| d.max(jittered(r))))
            .filter(|d| *d <= retry::MAX_RETRY_AFTER && remaining.is_none_or(|left| *d < left));
        match delay {
            Some(d) if st.retry_budget.try_withdraw(failed == 1) => {
                ctx.retries += 1;
                // The attempt counts against rpm; its slot is free while we wait.
                slot.settle(0);
                tokio::time::sleep(d).await;
            }
            _ => {
                slot.cancel();
                return Err(e);
            }
        }
    }
}

/// The circuit's word on one deployment: `Ok(probe)` when it lets a request
/// through (`true` for the half-open probe); an open circuit is logged as a
/// skipped attempt and is a gateway-side `no_healthy_deployment`, so the
/// caller moves on to its next candidate.
pub(crate) fn admit_circuit(
    dep: &DeploymentRt,
    ctx: &mut RequestCtx,
) -> Result<bool, GatewayError> {
    match dep.state.circuit.admit(Instant::now()) {
        Admit::Allowed => Ok(false),
        Admit::Probe => Ok(true),
        Admit::Rejected { retry_in } => {
            ctx.attempts.push(AttemptLog::skipped(
                &dep.name,
                &dep.provider.name,
                "circuit_open",
            ));
            Err(GatewayError::new(
                ErrorCode::NoHealthyDeployment,
                Source::Gateway,
                format!("{} is open-circuited", dep.name),
            )
            .with_retry_after(Some(retry_in)))
        }
    }
}

/// One attempt's admission by the deployment's limits: rpm/tpm, then a
/// concurrency slot (waiting in its bounded queue at most `queue_timeout`),
/// and the in-flight count. Refused: logged as a skipped attempt, counted,
/// and a gateway-side busy error, so the caller moves on to its next
/// candidate rather than melting this one.
pub(crate) async fn admit_attempt(
    dep: &DeploymentRt,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<Slot, GatewayError> {
    let st = &dep.state;
    // The tokens as this upstream bills them (its way of rendering tools).
    let estimate = estimate.saturating_add_signed(ctx.input.extra(crate::route::renders(dep)));
    // The input alone, as this upstream bills it (`estimate` holds the
    // output's reservation too).
    ctx.rec.input_estimate = input_on(dep, ctx);
    let admitted = admit_limits(st.shared(), dep, estimate, ctx).await;
    match admitted {
        Ok((reservation, permit)) => Ok(Slot {
            reservation,
            permit,
            // In flight = actually being served upstream (not sleeping
            // before a retry).
            inflight: st.health.start(),
        }),
        Err(Refusal::Limit(rejection)) => {
            ctx.attempts.push(AttemptLog::skipped(
                &dep.name,
                &dep.provider.name,
                "gateway_rate_limited",
            ));
            ctx.limit_rejections += 1;
            // A busy deployment, not the client's fault.
            let mut e = rejection.to_error();
            e.source = Source::Gateway;
            Err(e)
        }
        Err(Refusal::Other(e)) => {
            let reason = if e.code == ErrorCode::BudgetExceeded {
                "budget_exceeded"
            } else {
                "gateway_rate_limited"
            };
            ctx.attempts
                .push(AttemptLog::skipped(&dep.name, &dep.provider.name, reason));
            if e.code == ErrorCode::GatewayRateLimited {
                ctx.limit_rejections += 1;
            }
            Err(e)
        }
    }
}

enum Refusal {
    Limit(limits::LimitRejection),
    /// Decided by the fleet: the client's limit, the budget, or no Redis.
    Other(GatewayError),
}

/// [`admit_attempt`]'s limits: the upstream's block and the concurrency
/// slots are this instance's; rpm/tpm (the deployment's own and its
/// provider pool's) and the budget are the fleet's when they are shared
/// (leased, or one round trip), this instance's share of them while Redis
/// is away, and this instance's own otherwise.
async fn admit_limits(
    shared: &Arc<dyn crate::state::shared::Shared>,
    dep: &DeploymentRt,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<(limits::Reservation, limits::Permit), Refusal> {
    let st = &dep.state;
    let waited = st.limits.wait_out_block().await.map_err(Refusal::Limit)?;
    let reservation = match shared::admit(shared, dep, estimate, ctx).await {
        shared::Verdict::Admitted(Some(r)) => r,
        shared::Verdict::Admitted(None) | shared::Verdict::Local => st
            .check_rate_after(waited, Instant::now(), estimate)
            .map_err(Refusal::Limit)?,
        shared::Verdict::Unavailable { reject: true } => {
            ctx.client_rejected = true;
            return Err(Refusal::Other(shared::unavailable()));
        }
        shared::Verdict::Unavailable { reject: false } => {
            local_share(&**shared, dep, estimate, ctx)?
        }
        shared::Verdict::Refused(e) => return Err(Refusal::Other(e)),
    };
    match st.acquire().await {
        Ok(permit) => Ok((reservation, permit)),
        Err(e) => {
            reservation.cancel();
            Err(Refusal::Limit(e))
        }
    }
}

/// Redis is away (`on_unavailable: local`): the client's, the deployment's
/// and its provider pool's limits on this instance's counters, each
/// divided by the instances last seen; the budget on this instance's own
/// account.
fn local_share(
    shared: &dyn crate::state::shared::Shared,
    dep: &DeploymentRt,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<limits::Reservation, Refusal> {
    let now = Instant::now();
    if let Some(c) = ctx.shared.client.take() {
        if let Some(limits) = ctx.shared.local.clone() {
            let rpm = c.rpm.map(|r| shared.local_share(u64::from(r)) as u32);
            let tpm = c.tpm.map(|t| shared.local_share(t));
            match limits.counter.check(now, rpm, tpm, estimate) {
                Ok(reservation) => {
                    ctx.shared.granted = Some(shared::ClientGranted {
                        reservation,
                        rpm,
                        tpm,
                    });
                }
                Err(r) => {
                    ctx.client_rejected = true;
                    return Err(Refusal::Other(r.to_error()));
                }
            }
        }
    }
    if let (Some(usd), Some(hold)) = (ctx.shared.budget.take(), ctx.budget.as_mut()) {
        if hold.shared_key().is_none() && !hold.cover(usd) {
            let client = ctx.client.as_deref().unwrap_or("this client");
            return Err(Refusal::Other(GatewayError::new(
                ErrorCode::BudgetExceeded,
                Source::Gateway,
                format!(
                    "{client}'s budget does not cover this request on {}",
                    dep.name
                ),
            )));
        }
    }
    dep.state
        .check_rate_shared(now, estimate, &|limit| shared.local_share(limit))
        .map_err(Refusal::Limit)
}

/// An admitted attempt: its rpm/tpm reservation, concurrency slot and
/// in-flight count.
pub(crate) struct Slot {
    reservation: limits::Reservation,
    permit: limits::Permit,
    inflight: health::InflightGuard,
}

impl Slot {
    /// The attempt answered. A whole answer settles tpm with the tokens it
    /// used and frees the slot now; a stream holds the slot, the in-flight
    /// count and the reservation until it ends (`Held::settle`).
    pub(crate) fn serve(self, answer: Answer) -> Answer {
        match answer {
            Answer::Stream(mut s) => {
                s.hold = Some(Held::new(self.permit, self.inflight, self.reservation));
                Answer::Stream(s)
            }
            Answer::Json(j) => {
                self.reservation.settle_used(j.usage.total());
                Answer::Json(j)
            }
        }
    }

    /// The attempt was sent and failed but counts against rpm.
    pub(crate) fn settle(self, actual: u64) {
        self.reservation.settle(actual);
    }

    /// The attempt does not count.
    pub(crate) fn cancel(self) {
        self.reservation.cancel();
    }
}

/// Send one admitted attempt; its outcome feeds the circuit and health
/// stats (transitions noted) and the decision log.
pub(crate) async fn attempt(
    dep: &DeploymentRt,
    key: Option<&ProviderKey>,
    op: Op<'_, '_>,
    call: &CallInfo,
    probe: bool,
    ctx: &mut RequestCtx,
) -> Result<Answer, GatewayError> {
    // The attempt's span id is known before the call goes out: the
    // upstream's `traceparent` names it as the parent.
    let span_id = ctx.trace.map(|_| crate::observe::trace::new_span_id());
    let traced = traced_call(ctx, span_id, call);
    let started = Instant::now();
    ctx.in_flight = Some(crate::reliability::ctx::InFlight {
        pricing: dep.cfg.pricing,
    });
    let result = op.send(dep, key, traced.as_ref().unwrap_or(call)).await;
    ctx.in_flight = None;
    let latency = started.elapsed();
    let st = &dep.state;
    if let Some(t) = st.observe(Instant::now(), result.as_ref().map(|_| ()), latency, probe) {
        ctx.transitions.push(format!(
            "{}: {} -> {} ({})",
            dep.name,
            t.from.as_str(),
            t.to.as_str(),
            t.reason
        ));
    }
    let mut log = match &result {
        Ok(answer) => AttemptLog::ok(&dep.name, &dep.provider.name, latency, answer.ttfb()),
        Err(e) => AttemptLog::failed(&dep.name, &dep.provider.name, e, latency),
    };
    log.span.span_id = span_id.unwrap_or(0);
    log.span.operation = op.name();
    log.span.provider = dep.api().gen_ai_name();
    log.span.request_model = Some(dep.model.clone());
    log.span.model = result.as_ref().ok().and_then(reported_model);
    ctx.attempts.push(log);
    result
}

/// The model the upstream named in its answer (a stream's, in its first
/// event, which `open` has read).
fn reported_model(answer: &Answer) -> Option<Arc<str>> {
    let m = match answer {
        Answer::Json(j) => Some(j.model.as_str()),
        Answer::Stream(s) => s.seen.at.model.as_deref(),
    };
    m.filter(|m| !m.is_empty()).map(Arc::from)
}

/// The call with a `traceparent` naming attempt span `span_id`, when the
/// request is traced (else the caller's goes upstream as it came).
fn traced_call(ctx: &RequestCtx, span_id: Option<u64>, call: &CallInfo) -> Option<CallInfo> {
    let (trace, span) = (ctx.trace?, span_id?);
    Some(CallInfo {
        traceparent: Some(trace.traceparent(span)),
        ..call.clone()
    })
}

/// Set aside a key the upstream said is bad, or whose quota is spent. Only
/// those answers do: a 403 about one request is `forbidden`, not
/// `auth_failed` (the adapters' `errors` modules decide).
fn set_key_aside(dep: &DeploymentRt, key: Option<&ProviderKey>, e: &GatewayError) -> bool {
    let why = if e.quota_exhausted {
        SetAside::Spent
    } else if e.code == ErrorCode::AuthFailed && e.source == Source::Upstream {
        SetAside::Rejected
    } else {
        return false;
    };
    if let Some(k) = key {
        tracing::error!(deployment = %dep.name, key = %k.label, "upstream rejected the gateway's key ({}); key set aside", e.code);
        dep.state.keys.set_aside(k, why);
    }
    true
}

/// Some key of the provider is usable now or after its cooldown.
fn keys_left(dep: &DeploymentRt) -> bool {
    let keys = &dep.state.keys;
    keys.usable_keys(&dep.provider.cfg.keys, |k| k.label.as_str())
        .next()
        .is_some()
        || keys.standing().cooling.is_some()
}

/// Why no key of a provider can be used now.
enum NoKey {
    /// Every usable key cools down after a 429; the first is back in this.
    Cooling(std::time::Duration),
    /// Some key was set aside as bad (and none cools down).
    Rejected,
    /// Every key's quota is spent; the first is tried again in this.
    Spent(std::time::Duration),
}

impl NoKey {
    /// Only keys set aside as bad answer `auth_failed`; keys that wait out
    /// a 429 or a spent quota answer `rate_limited` with Retry-After.
    fn error(&self, provider: &str) -> GatewayError {
        match *self {
            NoKey::Cooling(wait) => GatewayError::upstream(
                ErrorCode::RateLimited,
                format!(
                    "every key of provider {provider} is rate-limited by the upstream for {:.1} s more",
                    wait.as_secs_f64()
                ),
            )
            .with_retry_after(Some(wait)),
            NoKey::Rejected => GatewayError::upstream(
                ErrorCode::AuthFailed,
                format!("every key of provider {provider} is set aside: the upstream rejected it (it is checked again in the background)"),
            ),
            NoKey::Spent(wait) => {
                let mut e = GatewayError::upstream(
                    ErrorCode::RateLimited,
                    format!("every key of provider {provider} has spent its quota"),
                )
                .with_retry_after(Some(wait));
                e.quota_exhausted = true;
                e
            }
        }
    }
}

/// A usable key by weight; `None` when the provider needs none.
fn choose_key(dep: &DeploymentRt) -> Result<Option<&ProviderKey>, NoKey> {
    let keys = &dep.provider.cfg.keys;
    if keys.is_empty() {
        return Ok(None);
    }
    let usable: Vec<&ProviderKey> = dep
        .state
        .keys
        .usable_keys(keys, |k| k.label.as_str())
        .collect();
    if let Some(k) = crate::upstream::keys::pick_from(&usable) {
        return Ok(Some(k));
    }
    let standing = dep.state.keys.standing();
    Err(match standing {
        health::Standing {
            cooling: Some(wait),
            ..
        } => NoKey::Cooling(wait),
        health::Standing { rejected: true, .. } => NoKey::Rejected,
        health::Standing { spent, .. } => NoKey::Spent(spent.unwrap_or(health::QUARANTINE)),
    })
}

/// [`choose_key`], with its refusal as the error the client would see.
pub(crate) fn pick_key(dep: &DeploymentRt) -> Result<Option<&ProviderKey>, GatewayError> {
    choose_key(dep).map_err(|n| n.error(&dep.provider.name))
}

/// The key for the next attempt. While every key cools down after a 429,
/// a request that may wait (its last candidate) sleeps until the first is
/// back — plus a little jitter, so the waiters do not all meet the upstream
/// at once — if that is within its deadline and the provider's `total`;
/// otherwise the refusal is logged and returned, and the caller moves on.
async fn key_for_attempt<'d>(
    dep: &'d DeploymentRt,
    call: &CallInfo,
    may_wait: bool,
    ctx: &mut RequestCtx,
) -> Result<Option<&'d ProviderKey>, GatewayError> {
    let give_up_at = adapters::earliest(
        Instant::now() + dep.provider.cfg.timeouts.total,
        call.deadline,
    );
    loop {
        let no_key = match choose_key(dep) {
            Ok(k) => return Ok(k),
            Err(n) => n,
        };
        let wake = match no_key {
            NoKey::Cooling(wait) if may_wait => Instant::now() + wait + jitter(wait),
            _ => give_up_at,
        };
        if wake >= give_up_at {
            let e = no_key.error(&dep.provider.name);
            let outcome = e.code.as_str();
            ctx.attempts
                .push(AttemptLog::skipped(&dep.name, &dep.provider.name, outcome));
            return Err(e);
        }
        tokio::time::sleep_until(wake).await;
    }
}

/// Up to a tenth of a wait, at most 250 ms, on top of it (never less).
fn jitter(wait: std::time::Duration) -> std::time::Duration {
    use rand::Rng;
    let cap = (wait / 10).min(std::time::Duration::from_millis(250));
    let ms = rand::rng().random_range(0..=cap.as_millis() as u64);
    std::time::Duration::from_millis(ms)
}

fn past(deadline: Option<Instant>) -> bool {
    deadline.is_some_and(|d| Instant::now() >= d)
}

/// One failure: that error. Several alike: the shared code (a client can act
/// on a 429). Mixed: `no_healthy_deployment`.
fn give_up(mut errors: Vec<GatewayError>) -> GatewayError {
    let Some(last) = errors.pop() else {
        return GatewayError::new(
            ErrorCode::NoHealthyDeployment,
            Source::Gateway,
            "no candidate could be tried",
        );
    };
    if errors.is_empty() || errors.iter().all(|e| e.code == last.code) || !last.fall_back() {
        return last;
    }
    let retry_after = errors
        .iter()
        .chain(std::iter::once(&last))
        .filter_map(|e| e.retry_after)
        .min();
    GatewayError::new(
        ErrorCode::NoHealthyDeployment,
        Source::Gateway,
        format!(
            "every candidate failed; last: {}: {}",
            last.code, last.message
        ),
    )
    .with_retry_after(retry_after)
}
