//! A served stream from its first upstream event to its end, as the bytes
//! the client gets: every upstream event is judged and written as soon as it
//! is (no buffering), `: keep-alive` comments fill idle gaps, and the end
//! follows contract §3: a finish reason then a clean end (with or without
//! the upstream's terminator) is complete and gets the client's terminator;
//! anything else is an interruption — continued on a prefill-capable
//! deployment when the request allows it (`resume`), else ended with an
//! error event in the client's dialect, never a silent clean end. The
//! request's decision-log line is written when the stream ends.
//!
//! The relay is driven by the client's response body, in the client's
//! connection task; `client_side` holds it to its clocks whatever the
//! client does (contract §8): a client that goes away or takes nothing for
//! `stream_idle` is cut, and the total ends the stream in any case.
//! A stream that does not end well for the client's sake is charged all the
//! same: the upstream's own usage when it sent it, else the prompt's
//! estimate and the output relayed, counted with the tokenizer
//! (`usage_estimated`); the decision log and the usage row say
//! `client_closed`.
//!
//! Reliability owns this whole lifecycle (timeouts, resumes, the attempts
//! they make); the client's SSE writer (`ingress::sse_out`) only writes the
//! bytes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use switchyard_protocol::sse::KEEPALIVE_FRAME;
use tokio::time::Instant;

use super::client_side::{self, ClientBody, Cut, Out};

use super::resume::{Resume, MAX_RESUMES};
use crate::adapters::deployment::DeploymentRt;
use crate::adapters::{silent, Step, UpstreamStream};
use crate::error::{ErrorCode, GatewayError};
use crate::reliability::ctx::RequestCtx;
use switchyard_protocol::ir::Usage;

pub struct StreamLimits {
    pub keepalive: Duration,
    pub idle: Duration,
    pub total_by: Instant,
}

/// What a served stream carries besides itself.
pub struct Relay {
    /// How to continue the answer if it breaks after its first byte.
    pub resume: Option<Resume>,
    /// The client's own rpm/tpm grant, settled with the real tokens.
    pub client: Option<crate::registry::limits::Reservation>,
    pub limits: StreamLimits,
    /// Where the answer is kept when it ends well (the response cache).
    pub cache: Option<crate::state::cache::Slot>,
    /// The route's response contract checks the text at the end.
    pub contract_end: Option<super::contract::AtEnd>,
}

/// The client's stream: the held first frame, then every event to the end.
/// The client's body drives the relay (see the module doc).
pub fn relay(
    upstream: Box<UpstreamStream>,
    served: Arc<DeploymentRt>,
    with: Relay,
    ctx: RequestCtx,
) -> ClientBody {
    let (idle, total_by) = (with.limits.idle, with.limits.total_by);
    client_side::drive(
        move |out| run(upstream, served, with, ctx, out),
        idle,
        total_by,
    )
}

/// The relay: the stream from its held first frame to its end.
async fn run(
    mut upstream: Box<UpstreamStream>,
    mut served: Arc<DeploymentRt>,
    with: Relay,
    mut ctx: RequestCtx,
    out: Out,
) {
    let Relay {
        resume,
        client,
        limits,
        cache,
        contract_end,
    } = with;
    macro_rules! send_or_cut {
        ($frame:expr) => {
            let frame = $frame;
            ctx.debug_response(&frame);
            if let Err(cut) = out.send(frame).await {
                return charge_cut(cut, upstream, &served, client, ctx).await;
            }
        };
    }
    if let Some(first) = upstream.first.take() {
        send_or_cut!(first);
    }
    let mut resumes = 0;
    // Text already sent before the current upstream took over.
    let mut prior = String::new();
    let end: Result<(), GatewayError> = loop {
        let mut last_event = Instant::now();
        let mut last_write = last_event;
        // One timer, re-armed only when it fires: arming a fresh timeout for
        // every event would cost a timer-wheel insert and remove per chunk.
        let timer = tokio::time::sleep_until(wake_at(&limits, last_event, last_write));
        tokio::pin!(timer);
        let end: Result<(), GatewayError> = loop {
            let woke = tokio::select! {
                biased;
                cut = out.cut() => Wake::Cut(cut),
                next = upstream.next() => Wake::Upstream(next),
                () = &mut timer => Wake::Timer,
            };
            match woke {
                Wake::Cut(cut) => {
                    return charge_cut(cut, upstream, &served, client, ctx).await;
                }
                Wake::Timer => {
                    let now = Instant::now();
                    if now >= limits.total_by {
                        break Err(silent("the stream outlasted the total timeout"));
                    }
                    if now >= last_event + limits.idle {
                        break Err(silent("no stream event within stream_idle"));
                    }
                    if now >= last_write + limits.keepalive {
                        send_or_cut!(Bytes::from_static(KEEPALIVE_FRAME));
                        last_write = now;
                    }
                    timer
                        .as_mut()
                        .reset(wake_at(&limits, last_event, last_write));
                }
                Wake::Upstream(Err(e)) => break Err(e),
                Wake::Upstream(Ok(None)) => break complete_or_cut(&upstream),
                Wake::Upstream(Ok(Some(step))) => {
                    last_event = Instant::now();
                    // An upstream that never pauses never lets the timer
                    // win the select: the total is checked here too.
                    if last_event >= limits.total_by {
                        break Err(silent("the stream outlasted the total timeout"));
                    }
                    match step {
                        Step::Forward(frame) => {
                            let (frame, after) = coalesce(&mut upstream, frame).await;
                            send_or_cut!(frame);
                            last_write = last_event;
                            match after {
                                None
                                | Some(Ok(Some(Step::Skip { .. })))
                                | Some(Ok(Some(Step::Forward(_)))) => {}
                                Some(Ok(None)) => break complete_or_cut(&upstream),
                                Some(Ok(Some(Step::Done))) => break Ok(()),
                                Some(Ok(Some(Step::Error(e)))) | Some(Err(e)) => break Err(e),
                            }
                        }
                        Step::Skip { .. } => {}
                        Step::Done => break Ok(()),
                        Step::Error(e) => break Err(e),
                    }
                }
            }
        };
        let Err(e) = end else { break end };
        // Broken after the first byte: continue the answer if we can.
        let interrupted_at = e.code.as_str();
        if let Some(a) = ctx.attempts.last_mut() {
            a.outcome = interrupted_at;
        }
        ctx.interrupted = true;
        // The broken attempt is over: its slot is free (and its tokens
        // counted) before a continuation asks for one, possibly on the
        // same deployment.
        let reservation = upstream
            .hold
            .take()
            .map(crate::registry::held::Held::release);
        let (used, estimated) = billed(&upstream.seen, ctx.prompt_estimate, &served.model).await;
        if let Some(r) = reservation {
            r.settle_used(used.total());
        }
        let text = format!("{prior}{}", upstream.seen.text);
        let broken = ctx.attempts.len().saturating_sub(1);
        let next = match &resume {
            Some(r) if resumes < MAX_RESUMES => {
                r.continue_stream(
                    &e,
                    &served,
                    &text,
                    upstream.position(),
                    upstream.seen.in_tool_call,
                    &mut ctx,
                )
                .await
            }
            _ => None,
        };
        let Some((next, dep)) = next else {
            break Err(e);
        };
        // The broken call was billed by its upstream too.
        ctx.usage_estimated |= estimated;
        ctx.add_usage_of(broken, &used, served.cfg.pricing.as_ref());
        resumes += 1;
        prior = text;
        upstream = next;
        served = dep;
        ctx.served_by(&served.name, &served.model);
        if let Some(first) = upstream.first.take() {
            send_or_cut!(first);
        }
    };
    // The current call's tokens (a broken one that was not continued is
    // counted here, once: its hold was settled above).
    let reservation = upstream
        .hold
        .take()
        .map(crate::registry::held::Held::release);
    let (used, estimated) = billed(&upstream.seen, ctx.prompt_estimate, &served.model).await;
    ctx.usage_estimated |= estimated;
    if let Some(r) = reservation {
        r.settle_used(used.total());
    }
    settle(&upstream, &served, used, client, &mut ctx);
    // A contract checked at the end: the text is whole now, and a
    // violation ends the stream with its error instead of the clean end.
    let end = match (end, &contract_end) {
        (Ok(()), Some(at_end)) => {
            let text = format!("{prior}{}", upstream.seen.text);
            match super::contract::judge_end(at_end, &served.name, &text, &mut ctx) {
                Some(e) => Err(e),
                None => Ok(()),
            }
        }
        (end, _) => end,
    };
    match end {
        Ok(()) => {
            let last = upstream.end_frames();
            ctx.debug_response(&last);
            send_or_cut_end(&out, last).await;
            // A continued answer was interrupted: never kept (nor shadowed).
            let whole = if ctx.interrupted {
                None
            } else {
                upstream.seen.capture.take().and_then(|a| a.answer.finish())
            };
            if let Some(answer) = whole {
                ctx.answered(&answer);
                if let Some(c) = &cache {
                    c.keep(answer, &served.name, &served.provider.name);
                }
            }
            ctx.finish(200, None);
        }
        Err(e) => {
            let frame = upstream.error_frame(&e);
            ctx.debug_response(&frame);
            send_or_cut_end(&out, frame).await;
            ctx.finish(200, Some(&e));
        }
    }
}

/// The last frames of a stream that ended (well or with its error event),
/// then the clean end of the body. A client that no longer reads misses
/// them; the request is settled already.
async fn send_or_cut_end(out: &Out, frame: Bytes) {
    if out.send(frame).await.is_ok() {
        out.end();
    }
}

/// Charge the stream's current call (`used`) to the request and the
/// client's own tpm.
fn settle(
    upstream: &UpstreamStream,
    served: &DeploymentRt,
    used: Usage,
    client: Option<crate::registry::limits::Reservation>,
    ctx: &mut RequestCtx,
) {
    ctx.add_usage(&used, served.cfg.pricing.as_ref());
    ctx.skipped_events = upstream.seen.skipped;
    // The client's own tpm counts what the whole answer used.
    if let Some(r) = client {
        r.settle_used(ctx.tokens.input + ctx.tokens.output);
    }
}

/// The client stopped taking the stream: stop the upstream call at once
/// (dropping its body closes the connection, so the provider stops
/// generating), then charge what it produced (contract §8).
async fn charge_cut(
    cut: Cut,
    mut upstream: Box<UpstreamStream>,
    served: &DeploymentRt,
    client: Option<crate::registry::limits::Reservation>,
    mut ctx: RequestCtx,
) {
    let seen = std::mem::take(&mut upstream.seen);
    // The slot is free at once; the tpm reservation waits for the count.
    let reservation = upstream
        .hold
        .take()
        .map(crate::registry::held::Held::release);
    drop(upstream);
    let (used, _) = billed(&seen, ctx.prompt_estimate, &served.model).await;
    if let Some(r) = reservation {
        r.settle_used(used.total());
    }
    ctx.add_usage(&used, served.cfg.pricing.as_ref());
    ctx.skipped_events = seen.skipped;
    if let Some(r) = client {
        r.settle_used(ctx.tokens.input + ctx.tokens.output);
    }
    // Whatever the upstream reported, the call was stopped before its end:
    // the figures are the gateway's.
    ctx.usage_estimated = true;
    match cut {
        Cut::Gone => ctx.finish(499, None),
        Cut::Stalled => ctx.finish(
            200,
            Some(&GatewayError::client(
                ErrorCode::RequestTimeout,
                "the client read nothing for stream_idle",
            )),
        ),
        Cut::PastTotal => ctx.finish(
            200,
            Some(&GatewayError::client(
                ErrorCode::Timeout,
                "the stream outlasted the total timeout while the client was not reading",
            )),
        ),
    }
}

/// What one upstream call of a stream used, and whether it is an estimate.
/// Its own usage when it sent it whole; else (a stream cut before its end, a
/// server that sends none) the upstream's partial figures where it gave
/// them (Anthropic reports the input at the start), the prompt's estimate
/// for the input otherwise, and the output relayed so far counted with the
/// tokenizer of the served model — never nothing for a call the provider
/// billed (PITFALLS #4).
async fn billed(
    seen: &crate::adapters::stream::Seen,
    prompt_estimate: u64,
    model: &str,
) -> (Usage, bool) {
    if seen.finish.is_some() {
        if let Some(u) = seen
            .usage
            .filter(|u| u.output_tokens > 0 || seen.relayed() == 0)
        {
            return (u, false);
        }
    }
    let reported = seen.usage.unwrap_or_default();
    let relayed = crate::tokenize::count_output(model, seen.relayed_text()).await;
    let input = if reported.input_tokens > 0 {
        reported.input_tokens
    } else {
        prompt_estimate
    };
    let usage = Usage {
        input_tokens: input,
        output_tokens: reported.output_tokens.max(relayed),
        ..reported
    };
    (usage, true)
}

/// Events that have already arrived go out in one write: each is still sent
/// as soon as nothing more is waiting (nothing waits for future data), but a
/// burst read in one network read costs one write instead of one per event.
/// hyper hands a body over one chunk at a time, so after an empty poll we
/// let its connection task run (`yield_now`, no syscall) to see whether
/// it holds more already-received bytes (it takes two polls to move a
/// chunk: one to see our demand, one to hand the chunk over). Returns the bytes and the first
/// step that is not a forward, if one was reached.
async fn coalesce(
    upstream: &mut UpstreamStream,
    first: Bytes,
) -> (Bytes, Option<Result<Option<Step>, GatewayError>>) {
    const CAP: usize = 64 * 1024;
    let mut buf: Option<bytes::BytesMut> = None;
    let mut yielded = 0u8;
    loop {
        let size = buf.as_ref().map_or(first.len(), |b| b.len());
        if size >= CAP {
            return (done(buf, first), None);
        }
        match upstream.next().now_or_never() {
            None if yielded >= 2 => return (done(buf, first), None),
            None => {
                tokio::task::yield_now().await;
                yielded += 1;
            }
            Some(Ok(Some(Step::Forward(more)))) => {
                buf.get_or_insert_with(|| bytes::BytesMut::from(&first[..]))
                    .extend_from_slice(&more);
                yielded = 0;
            }
            Some(Ok(Some(Step::Skip { .. }))) => yielded = 0,
            Some(other) => return (done(buf, first), Some(other)),
        }
    }
}

fn done(buf: Option<bytes::BytesMut>, first: Bytes) -> Bytes {
    buf.map_or(first, bytes::BytesMut::freeze)
}

enum Wake {
    Upstream(Result<Option<Step>, GatewayError>),
    Timer,
    Cut(Cut),
}

/// The next moment something may be due: idle timeout, keep-alive, or total.
fn wake_at(limits: &StreamLimits, last_event: Instant, last_write: Instant) -> Instant {
    (last_event + limits.idle)
        .min(last_write + limits.keepalive)
        .min(limits.total_by)
}

/// A clean end of body: complete if a finish reason came, else interrupted.
fn complete_or_cut(s: &UpstreamStream) -> Result<(), GatewayError> {
    if s.seen.finish.is_some() {
        Ok(())
    } else {
        Err(GatewayError::upstream(
            ErrorCode::UpstreamError,
            "upstream stream ended without a finish reason",
        ))
    }
}
