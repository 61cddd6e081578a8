//! The part of a chat request every front door shares: resolve `model`,
//! authorize, plan, execute, and deliver the answer in the client's dialect.

use std::sync::Arc;

use axum::response::Response;
use http::HeaderMap;
use tokio::time::Instant;

use super::respond::{self, ServedHeaders};
use super::sse_out;
use crate::adapters::{Answer, CallInfo};
use crate::app::App;
use crate::doors::{Door, Inbound};
use bytes::Bytes;

use super::cache::{self, CacheUse};
use crate::config::{DebugBodies, StreamInterrupt};
use crate::doors::normalize::{normalize, Normalized};
use crate::error::{ErrorCode, GatewayError};
use crate::governance::Principal;
use crate::live::{Live, Target};
use crate::observe::debug_bodies::Capture;
use crate::observe::record::CandidateLog;
use crate::reliability::ctx::{Answered, RequestCtx};
use crate::reliability::resume::Resume;
use crate::reliability::{self, Served};
use crate::route::{self, Facts};

/// One front door from the raw request to the response: authenticate, read
/// the body within `max_body`, `decode` it in the door's dialect, then route,
/// execute and deliver — or fail in the door's envelope. The decision-log
/// line is written when the reply (or its stream) ends.
pub async fn door(app: App, headers: HeaderMap, body: axum::body::Body, door: Door) -> Response {
    let live = app.serving();
    let rid = super::request_id(&headers);
    let mut ctx = app.request_ctx(&rid, &headers, &live);
    let result = async {
        let cache_on = live.cache.is_some();
        let (who, bytes, normalized) = admit(&live, &headers, body, cache_on, &mut ctx).await?;
        let mut inbound = door.decode(super::body::utf8(&bytes)?)?;
        if let Inbound::Responses(r) = &mut inbound {
            if let Some(key) = r.previous_key(ctx.client.as_deref()) {
                app.responses.load(&key).await;
            }
            // A `previous_response_id` not the caller's is refused before
            // the cache or any deployment could answer for it.
            r.prepare(&app.responses, ctx.client.as_deref())?;
        }
        // Shadow traffic (contract §11): drawn now, so that a stream keeps
        // its answer whole; sent once the answer is over.
        ctx.after = app.shadows.draw(&live, &inbound, &bytes);
        let cache = normalized
            .as_ref()
            .and_then(|n| cache::plan(&live, &headers, who.as_ref(), n, &inbound));
        let ask = Ask {
            who: who.as_ref(),
            inbound: &inbound,
            body: bytes.clone(),
            cache,
        };
        run(&live, &headers, ask, &mut ctx).await
    }
    .await;
    match result {
        Ok(Outcome::Served(ready)) => deliver(ready, ctx, &rid),
        Ok(Outcome::Cached(replayed)) => replayed.reply(ctx, &rid),
        Err(e) => fail(&live, door, &e, ctx, &rid),
    }
}

/// What every client request starts with: the caller authenticated, the
/// body read within `max_body` (and hashed when the log wants it).
/// The body is normalized (`doors::normalize`) when the log or the cache
/// (`for_cache`) wants it.
pub(crate) async fn admit<'l>(
    live: &'l Live,
    headers: &HeaderMap,
    body: axum::body::Body,
    for_cache: bool,
    ctx: &mut RequestCtx,
) -> Result<(Option<Principal<'l>>, Bytes, Option<Normalized>), GatewayError> {
    let who = match super::auth::authenticate(live, headers) {
        Err(e)
            if e.code == ErrorCode::AuthFailed
                && super::auth::learn_issued_key(live, headers).await =>
        {
            super::auth::authenticate(live, headers)?
        }
        r => r?,
    };
    if let Some(p) = &who {
        ctx.client = Some(p.id.clone());
        ctx.key_id = Some(p.key_id.clone());
    }
    let bytes = super::body::read(body, headers, &live.config.server).await?;
    if who.as_ref().is_some_and(|p| debugs(live, p, headers)) {
        ctx.debug = Some(Capture::new(&bytes, provider_keys(live)));
    }
    let normalized = (for_cache || ctx.wants_input_hash()).then(|| normalize(&bytes));
    if ctx.wants_input_hash() {
        ctx.input_hash = normalized.as_ref().map(Normalized::hex);
    }
    Ok((who, bytes, normalized))
}

/// The client may have its bodies logged and asked for it on this request
/// (contract §11).
fn debugs(live: &Live, who: &Principal<'_>, headers: &HeaderMap) -> bool {
    who.client.debug
        && live.config.observability.debug_bodies == DebugBodies::Header
        && headers
            .get(&crate::names::DEBUG)
            .is_some_and(|v| v.as_bytes() == b"1")
}

/// Every configured provider key's value: what a logged body is masked
/// against beside the key shapes.
fn provider_keys(live: &Live) -> Vec<String> {
    live.config
        .providers
        .values()
        .flat_map(|p| &p.keys)
        .map(|k| k.secret.expose().clone())
        .collect()
}

/// A chat request as its door decoded it.
pub struct Ask<'a, 'l> {
    pub who: Option<&'a Principal<'l>>,
    pub inbound: &'a Inbound<'a>,
    /// The body as it came (a stream's continuation reads it again).
    pub body: Bytes,
    /// How it uses the response cache, if at all.
    pub cache: Option<CacheUse>,
}

/// Served by an upstream, or from the response cache.
#[expect(
    clippy::large_enum_variant,
    reason = "one per request, returned once; boxing would add an allocation to every served request"
)]
pub enum Outcome {
    Served(Ready),
    Cached(cache::Replayed),
}

pub struct Ready {
    pub served: Served,
    /// The client's own rpm/tpm grant, settled when the answer is done.
    pub client: Option<ClientGrant>,
    pub limits: crate::reliability::relay::StreamLimits,
    /// How to continue the stream if it breaks after its first byte.
    pub resume: Option<Resume>,
    /// Where the answer is kept when it ends well (the response cache).
    pub cache: Option<CacheUse>,
    /// A stream request answered whole (a response contract held it until
    /// it was checked): the answer as the client's stream.
    pub held: Option<Bytes>,
    /// A stream whose text the route's contract checks at its end.
    pub contract_end: Option<crate::reliability::contract::AtEnd>,
}

pub async fn run(
    live: &Arc<Live>,
    headers: &HeaderMap,
    ask: Ask<'_, '_>,
    ctx: &mut RequestCtx,
) -> Result<Outcome, GatewayError> {
    let Ask {
        who,
        inbound,
        body,
        cache,
    } = ask;
    let model = inbound.model();
    ctx.model = Some(model.to_owned());
    ctx.stream = inbound.stream();
    let target = authorized(live, who, model)?;
    // After authorization: a shared cache never serves a route to a
    // client that may not use it.
    if let Some(c) = &cache {
        if let Some(hit) = c.lookup(ctx).await {
            return Ok(Outcome::Cached(cache::replayed(
                live, who, inbound, &hit, ctx,
            )));
        }
    }
    let mut facts = Facts::read(inbound, headers, &live.config.task_rules);
    if facts.task.is_none() {
        if let Target::Route(r) = &target {
            if r.classify {
                facts.task = Some(classified(inbound));
                facts.task_source = Some("classifier");
            }
        }
    }
    ctx.prompt_estimate = facts.prompt_tokens;
    ctx.input = facts.input;
    if let (Target::Route(r), Some(session)) = (&target, &facts.session) {
        if r.sticky {
            route::sticky::fetch(live, r, session).await;
        }
    }
    let planned = plan_target(live, who, target, &facts, facts.estimated_total(), ctx)?;
    let (plan, route) = (&planned.plan, planned.route);
    let contract_end = crate::reliability::contract::bound(plan, inbound)
        .filter(|_| inbound.stream())
        .and_then(|b| b.at_end());
    let started = Instant::now();
    let call = CallInfo {
        traceparent: headers.get(&crate::names::TRACEPARENT).cloned(),
        deadline: route.and_then(|r| r.deadline).map(|d| started + d),
        anthropic_beta: match inbound.door() {
            Door::AnthropicMessages => anthropic_beta(headers),
            Door::OpenAiChat | Door::Responses => None,
        },
        capture: (cache.is_some() || ctx.after.is_some()) && inbound.stream(),
    };
    let served = execute(
        plan,
        reliability::Op::Chat(inbound),
        &call,
        facts.estimated_total(),
        ctx,
    )
    .await?;
    if let (Some(r), Some(session)) = (route.filter(|r| r.sticky), &facts.session) {
        route::sticky::remember(live, r, session, &served.dep.cfg.id, Instant::now()).await;
    }
    ctx.served_by(&served.dep.name, &served.dep.model);
    if let Inbound::Responses(r) = inbound {
        if !crate::adapters::body::responses_pass(&served.dep, r) {
            let own_search = crate::adapters::body::runs_web_search(&served.dep, inbound.ir());
            ctx.dropped_tools = r.dropped_tools(own_search);
        }
    }
    ctx.fallback_reason = served.fallback_reason;
    let t = served.dep.provider.cfg.timeouts;
    let limits = crate::reliability::relay::StreamLimits {
        keepalive: live.config.server.sse_keepalive,
        idle: t.stream_idle,
        total_by: crate::adapters::earliest(started + t.total, call.deadline),
    };
    let resume_on = route.is_none_or(|r| r.on_stream_interrupt == StreamInterrupt::Resume);
    // Several choices interleave in one stream: no prefill can continue it.
    let resume = (inbound.stream() && resume_on && inbound.n() <= 1).then(|| Resume {
        body,
        door: inbound.door(),
        // The body gives the request back, unless history from the
        // response store was spliced into it.
        ir: match inbound {
            Inbound::Responses(r) if r.expanded => Some(Arc::new(inbound.ir().clone())),
            _ => None,
        },
        candidates: plan.candidates.iter().map(|c| c.dep.clone()).collect(),
        call: call.clone(),
        include_usage: inbound.include_usage(),
        estimate: facts.estimated_total(),
    });
    let held = match &served.answer {
        Answer::Json(j) if inbound.stream() => Some(held_stream(inbound, &j.body)),
        _ => None,
    };
    Ok(Outcome::Served(Ready {
        served,
        client: planned.client,
        limits,
        resume,
        cache,
        held,
        contract_end,
    }))
}

/// A whole answer (in the client's dialect) to a stream request, written
/// as the client's stream.
fn held_stream(inbound: &Inbound<'_>, body: &[u8]) -> Bytes {
    match inbound.door().read_answer(body) {
        Some(answer) => inbound.as_stream(&answer),
        None => {
            let e =
                GatewayError::upstream(ErrorCode::UpstreamError, "the answer could not be read");
            inbound.encoder().error(&e)
        }
    }
}

/// The scene classifier's label for the request's latest user message (a
/// conversation's earlier turns and pasted tool output would drown out
/// what is asked now).
fn classified(inbound: &Inbound<'_>) -> String {
    crate::classify::classify(&inbound.last_user_text())
        .as_str()
        .to_owned()
}

/// A request's plan, made under the client's own limits.
pub(crate) struct Planned<'l> {
    pub plan: route::Plan,
    pub route: Option<&'l crate::config::Route>,
    /// The client's rpm/tpm grant, held while the request is served.
    pub client: Option<ClientGrant>,
}

/// A client's admission under its own `rpm`/`tpm`: the reservation (settled
/// with the real tokens when the answer is done) and what its
/// `x-ratelimit-*` headers say.
pub struct ClientGrant {
    pub reservation: crate::registry::limits::Reservation,
    pub rate: respond::RateHeaders,
}

/// Resolve `model`, authorize the client for it, take the client's own
/// rpm/tpm (`estimate` tokens), and plan the candidates (logged in `ctx`).
pub(crate) fn prepare<'l>(
    live: &'l Live,
    who: Option<&Principal<'_>>,
    model: &str,
    facts: &Facts,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<Planned<'l>, GatewayError> {
    let target = authorized(live, who, model)?;
    plan_target(live, who, target, facts, estimate, ctx)
}

/// What `model` names, if the client may use it.
fn authorized<'l>(
    live: &'l Live,
    who: Option<&Principal<'_>>,
    model: &str,
) -> Result<Target<'l>, GatewayError> {
    let target = live.resolve(model).ok_or_else(|| {
        GatewayError::client(
            ErrorCode::ModelNotFound,
            format!("unknown model `{model}`: GET /v1/models lists the routes and deployments you can use"),
        )
    })?;
    super::auth::authorize(who, model, &target)?;
    Ok(target)
}

/// [`prepare`] for a target already resolved and authorized.
fn plan_target<'l>(
    live: &'l Live,
    who: Option<&Principal<'_>>,
    target: Target<'l>,
    facts: &Facts,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<Planned<'l>, GatewayError> {
    let client_reservation = client_limits(live, who, estimate, ctx)?;
    // The budget is held per attempt (`reliability`): here the hold opens.
    ctx.output_cap = facts.max_tokens;
    ctx.output_choices = facts.choices();
    if let Some((p, b)) = who.and_then(|p| Some((p, p.client.budget?))) {
        ctx.budget = Some(live.governance.budgets.hold(&p.id, b));
    }
    let planning = std::time::SystemTime::now();
    let plan = route::plan(live, &target, facts, Instant::now())?;
    ctx.planned(planning);
    ctx.route = plan.route.clone();
    ctx.decision_reason = Some(plan.reason);
    ctx.skipped = plan.skipped.clone();
    ctx.task = facts.task.clone();
    ctx.task_source = facts.task_source;
    ctx.candidates = plan
        .candidates
        .iter()
        .map(|c| CandidateLog {
            deployment: c.dep.name.clone(),
            role: c.role,
            score: c.score,
            parts: c.parts.clone(),
        })
        .collect();
    let route = match target {
        Target::Route(r) => Some(r),
        Target::Deployment(_) => None,
    };
    Ok(Planned {
        plan,
        route,
        client: client_reservation,
    })
}

/// `reliability::execute_op`, with a route deadline that ran out reported
/// as the contract's 504 `timeout`.
pub(crate) async fn execute(
    plan: &route::Plan,
    op: reliability::Op<'_, '_>,
    call: &CallInfo,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<Served, GatewayError> {
    match reliability::execute_op(plan, op, call, estimate, ctx).await {
        Ok(s) => Ok(s),
        Err(e)
            if call.deadline.is_some_and(|d| Instant::now() >= d)
                && e.code != ErrorCode::Timeout =>
        {
            Err(GatewayError::upstream(
                ErrorCode::Timeout,
                format!("the route's deadline passed: {}", e.message),
            ))
        }
        Err(e) => Err(e),
    }
}

/// Every `anthropic-beta` value the client sent, as one comma-separated value.
pub(crate) fn anthropic_beta(headers: &HeaderMap) -> Option<http::HeaderValue> {
    let mut values = headers.get_all(&crate::names::ANTHROPIC_BETA).iter();
    let first = values.next()?;
    let rest: Vec<&http::HeaderValue> = values.collect();
    if rest.is_empty() {
        return Some(first.clone());
    }
    let joined = std::iter::once(first)
        .chain(rest)
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    http::HeaderValue::from_str(&joined).ok()
}

/// The client's own rpm/tpm (`clients[].rpm|tpm`): `gateway_rate_limited`
/// with Retry-After when spent.
fn client_limits(
    live: &Live,
    who: Option<&Principal<'_>>,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Result<Option<ClientGrant>, GatewayError> {
    let Some(c) = who
        .map(|p| p.client)
        .filter(|c| c.rpm.is_some() || c.tpm.is_some())
    else {
        return Ok(None);
    };
    let Some(limits) = live.registry.client(&c.id) else {
        return Ok(None);
    };
    // In a fleet the first attempt's admission charges the client's
    // windows along with the deployment's (one round trip).
    if let Some(ask) = crate::reliability::shared::ClientAsk::of(&limits) {
        ctx.shared.client = Some(ask);
        ctx.shared.local = Some(limits);
        return Ok(None);
    }
    match limits
        .counter
        .check(Instant::now(), limits.rpm, limits.tpm, estimate)
    {
        Ok(r) => Ok(Some(ClientGrant {
            rate: respond::RateHeaders {
                requests: limits.rpm.map(|l| (u64::from(l), r.requests_used)),
                tokens: limits.tpm.map(|l| (l, r.tokens_used)),
                reset: crate::registry::limits::window_retry(),
            },
            reservation: r,
        })),
        Err(rejection) => {
            ctx.client_rejected = true;
            Err(rejection.to_error())
        }
    }
}

/// The client's charge on the fleet, as a single gateway's grant.
fn shared_grant(ctx: &mut RequestCtx) -> Option<ClientGrant> {
    let g = ctx.shared.granted.take()?;
    Some(ClientGrant {
        rate: respond::RateHeaders {
            requests: g.rpm.map(|l| (u64::from(l), g.reservation.requests_used)),
            tokens: g.tpm.map(|l| (l, g.reservation.tokens_used)),
            reset: crate::registry::limits::window_retry(),
        },
        reservation: g.reservation,
    })
}

/// The answer, with the gateway's headers; the decision log is written when
/// the reply (or the stream) ends.
pub fn deliver(ready: Ready, mut ctx: RequestCtx, rid: &str) -> Response {
    let Ready {
        served,
        client,
        limits,
        resume,
        cache,
        held,
        contract_end,
    } = ready;
    let Served {
        answer,
        dep,
        attempts,
        fallback_reason,
    } = served;
    let dropped = (!ctx.dropped_tools.is_empty()).then(|| ctx.dropped_tools.join(","));
    let client = client.or_else(|| shared_grant(&mut ctx));
    let (reservation, rate) = client.map(|c| (c.reservation, c.rate)).unzip();
    let headers = ServedHeaders {
        request_id: rid,
        deployment: &dep.cfg.id,
        attempts,
        cache: ctx.cache,
        cost_usd: None,
        fallback_reason,
        dropped_tools: dropped.as_deref(),
        rate: rate.as_ref(),
        // A stream's cost is known only at its end: what is left now,
        // its own reservation taken out.
        budget_remaining: ctx.budget.as_ref().map(|h| h.remaining()),
    };
    match answer {
        Answer::Json(j) => {
            if let Some(r) = reservation {
                r.settle_used(j.usage.total());
            }
            if let Some(c) = &cache {
                c.keep_body(&j.body, &dep);
            }
            if ctx.after.is_some() {
                ctx.answered = Some(Answered::Body(j.body.clone()));
            }
            match held {
                Some(stream) => whole_as_stream(j, stream, &dep.cfg, headers, ctx),
                None => whole(j, &dep.cfg, headers, ctx),
            }
        }
        Answer::Stream(s) => {
            let relay = sse_out::Relay {
                resume,
                client: reservation,
                limits,
                cache: cache.as_ref().map(CacheUse::slot),
                contract_end,
            };
            sse_out::stream(s, dep.clone(), relay, ctx, &headers)
        }
    }
}

/// A whole JSON answer (embeddings, token counts: never a stream), its
/// usage priced and logged.
pub(crate) fn deliver_json(served: Served, ctx: RequestCtx, rid: &str, door: Door) -> Response {
    let Served {
        answer,
        dep,
        attempts,
        fallback_reason,
    } = served;
    let headers = ServedHeaders {
        request_id: rid,
        deployment: &dep.cfg.id,
        attempts,
        cache: "off",
        cost_usd: None,
        fallback_reason,
        dropped_tools: None,
        rate: None,
        budget_remaining: None,
    };
    match answer {
        Answer::Json(j) => whole(j, &dep.cfg, headers, ctx),
        Answer::Stream(_) => {
            let e = GatewayError::upstream(ErrorCode::UpstreamError, "unexpected stream");
            fail_plain(door, &e, ctx, rid)
        }
    }
}

fn whole(
    j: crate::adapters::JsonAnswer,
    dep: &crate::config::Deployment,
    mut headers: ServedHeaders<'_>,
    mut ctx: RequestCtx,
) -> Response {
    priced(&j, dep, &mut headers, &mut ctx);
    ctx.debug_response(&j.body);
    let resp = respond::json(j.body, &headers);
    ctx.finish(200, None);
    resp
}

/// A whole answer to a stream request, written as its stream at once.
fn whole_as_stream(
    j: crate::adapters::JsonAnswer,
    stream: Bytes,
    dep: &crate::config::Deployment,
    mut headers: ServedHeaders<'_>,
    mut ctx: RequestCtx,
) -> Response {
    priced(&j, dep, &mut headers, &mut ctx);
    ctx.debug_response(&stream);
    let resp = respond::event_stream(axum::body::Body::from(stream), &headers);
    ctx.finish(200, None);
    resp
}

/// The answer's usage and cost, added to what the request spent before it
/// (answers a response contract rejected), in the record and the headers.
fn priced(
    j: &crate::adapters::JsonAnswer,
    dep: &crate::config::Deployment,
    headers: &mut ServedHeaders<'_>,
    ctx: &mut RequestCtx,
) {
    ctx.add_usage(&j.usage, dep.pricing.as_ref());
    headers.cost_usd = ctx.cost_usd;
    if ctx.budget.is_some() {
        headers.budget_remaining = ctx.settle_budget();
    }
}

/// The error in the door's envelope, never a degraded answer (for
/// endpoints whose answer is not a chat message).
pub(crate) fn fail_plain(door: Door, e: &GatewayError, mut ctx: RequestCtx, rid: &str) -> Response {
    if ctx.debug.is_some() {
        ctx.debug_response(&door.error_body(e));
    }
    let mut resp = respond::error(door, e, rid);
    budget_header(&mut resp, &mut ctx);
    ctx.finish(e.code.status().as_u16(), Some(e));
    resp
}

/// A client with a budget learns what is left of it on errors too.
fn budget_header(resp: &mut Response, ctx: &mut RequestCtx) {
    if let Some(left) = ctx.settle_budget() {
        respond::budget_remaining(resp.headers_mut(), left);
    }
}

/// A request that could not be served: the degraded answer when enabled and
/// the failure was an outage, else the error in the client's envelope.
pub fn fail(live: &Live, door: Door, e: &GatewayError, mut ctx: RequestCtx, rid: &str) -> Response {
    let attempts = ctx.attempts.len();
    if let Some(mut resp) = super::degraded::reply(live, door, ctx.stream, e, rid, attempts) {
        ctx.fallback_reason = Some("degraded");
        budget_header(&mut resp, &mut ctx);
        ctx.finish(200, Some(e));
        return resp;
    }
    if ctx.debug.is_some() {
        ctx.debug_response(&door.error_body(e));
    }
    let mut resp = respond::error(door, e, rid);
    budget_header(&mut resp, &mut ctx);
    ctx.finish(e.code.status().as_u16(), Some(e));
    resp
}
