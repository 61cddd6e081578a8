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
//! Reliability owns this whole lifecycle (timeouts, resumes, the attempts
//! they make); the client's SSE writer (`ingress::sse_out`) only writes the
//! bytes.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{FutureExt, Stream};
use switchyard_protocol::sse::KEEPALIVE_FRAME;
use tokio::time::Instant;

use super::resume::{Resume, MAX_RESUMES};
use crate::adapters::{silent, Step, UpstreamStream};
use crate::error::{ErrorCode, GatewayError};
use crate::observe::ctx::RequestCtx;
use crate::state::live::DeploymentRt;
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
    pub client: Option<super::limits::Reservation>,
    pub limits: StreamLimits,
    /// Where the answer is kept when it ends well (the response cache).
    pub cache: Option<crate::state::cache::Slot>,
}

/// The client's stream: the held first frame, then every event to the end.
pub fn relay(
    mut upstream: Box<UpstreamStream>,
    served: Arc<DeploymentRt>,
    with: Relay,
    mut ctx: RequestCtx,
) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    let Relay {
        resume,
        client,
        limits,
        cache,
    } = with;
    async_stream::stream! {
        if let Some(first) = upstream.first.take() {
            yield Ok::<Bytes, Infallible>(first);
        }
        let mut served = served;
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
                    next = upstream.next() => Wake::Upstream(next),
                    () = &mut timer => Wake::Timer,
                };
                match woke {
                    Wake::Timer => {
                        let now = Instant::now();
                        if now >= limits.total_by {
                            break Err(silent("the stream outlasted the total timeout"));
                        }
                        if now >= last_event + limits.idle {
                            break Err(silent("no stream event within stream_idle"));
                        }
                        if now >= last_write + limits.keepalive {
                            yield Ok(Bytes::from_static(KEEPALIVE_FRAME));
                            last_write = now;
                        }
                        timer.as_mut().reset(wake_at(&limits, last_event, last_write));
                    }
                    Wake::Upstream(Err(e)) => break Err(e),
                    Wake::Upstream(Ok(None)) => break complete_or_cut(&upstream),
                    Wake::Upstream(Ok(Some(step))) => {
                        last_event = Instant::now();
                        match step {
                            Step::Forward(frame) => {
                                let (out, after) = coalesce(&mut upstream, frame).await;
                                yield Ok(out);
                                last_write = last_event;
                                match after {
                                    None | Some(Ok(Some(Step::Skip { .. }))) | Some(Ok(Some(Step::Forward(_)))) => {}
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
            let used = billed(&upstream.seen, ctx.prompt_estimate);
            if let Some(h) = upstream.hold.take() {
                h.settle(used.total());
            }
            let text = format!("{prior}{}", upstream.seen.text);
            let broken = ctx.attempts.len().saturating_sub(1);
            let next = match &resume {
                Some(r) if resumes < MAX_RESUMES => r.continue_stream(&e, &served, &text, upstream.position(), upstream.seen.in_tool_call, &mut ctx).await,
                _ => None,
            };
            let Some((mut next, dep)) = next else { break Err(e) };
            // The broken call was billed by its upstream too.
            ctx.add_usage_of(broken, &used, served.cfg.pricing.as_ref());
            resumes += 1;
            prior = text;
            if let Some(first) = next.first.take() {
                yield Ok(first);
            }
            upstream = next;
            served = dep;
            ctx.served_by(&served.name, &served.model);
        };
        let used = billed(&upstream.seen, ctx.prompt_estimate);
        if let Some(h) = upstream.hold.take() {
            h.settle(used.total());
        }
        ctx.add_usage(&used, served.cfg.pricing.as_ref());
        // The client's own tpm counts what the whole answer used.
        if let Some(r) = client {
            r.settle_used(ctx.tokens.input + ctx.tokens.output);
        }
        ctx.skipped_events = upstream.seen.skipped;
        match end {
            Ok(()) => {
                yield Ok(upstream.end_frames());
                // A continued answer was interrupted: never kept.
                if let (Some(c), false) = (&cache, ctx.interrupted) {
                    if let Some(answer) = upstream.seen.capture.take().and_then(|a| a.answer.finish()) {
                        c.keep(answer, &served.name, &served.provider.name);
                    }
                }
                ctx.finish(200, None);
            }
            Err(e) => {
                yield Ok(upstream.error_frame(&e));
                ctx.finish(200, Some(&e));
            }
        }
    }
}

/// What one upstream call of a stream used: its own usage when it sent it,
/// else (a stream cut before its usage, a server that sends none) the
/// prompt's estimate and ~4 characters a token of the text it streamed —
/// never nothing for a call the provider billed (PITFALLS #4).
fn billed(seen: &crate::adapters::stream::Seen, prompt_estimate: u64) -> Usage {
    seen.usage.unwrap_or_else(|| Usage {
        input_tokens: prompt_estimate,
        output_tokens: seen.text.len().div_ceil(4) as u64,
        ..Usage::default()
    })
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
