//! The client's event stream: every upstream event is written as soon as it is
//! judged (no buffering), `: keep-alive` comments fill idle gaps, and the end
//! follows contract §3: a finish reason then a clean end (with or without the
//! upstream's `[DONE]`) is complete and gets our `[DONE]`; anything else is an
//! interruption and ends with an error event, never a silent clean end.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use switchyard_protocol::sse::KEEPALIVE_FRAME;
use tokio::time::Instant;

use super::respond::{self, ServedHeaders};
use crate::adapters::{silent, Step, UpstreamStream};
use crate::config::Pricing;
use crate::error::{ErrorCode, GatewayError};
use crate::observe::ctx::RequestCtx;

pub struct StreamLimits {
    pub keepalive: Duration,
    pub idle: Duration,
    pub total_by: Instant,
}

pub fn stream(
    mut upstream: Box<UpstreamStream>,
    mut ctx: RequestCtx,
    limits: StreamLimits,
    pricing: Option<Pricing>,
    headers: &ServedHeaders<'_>,
) -> Response {
    let body = async_stream::stream! {
        if let Some(first) = upstream.first.take() {
            yield Ok::<Bytes, Infallible>(first);
        }
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
                            yield Ok(frame);
                            last_write = last_event;
                        }
                        Step::Skip { .. } => {}
                        Step::Done => break Ok(()),
                        Step::Error(e) => break Err(e),
                    }
                }
            }
        };
        if let Some(u) = &upstream.seen.usage {
            ctx.set_usage(u, pricing.as_ref());
        }
        ctx.skipped_events = upstream.seen.skipped;
        match end {
            Ok(()) => {
                yield Ok(upstream.end_frames());
                ctx.finish(200, None);
            }
            Err(e) => {
                if let Some(a) = ctx.attempts.last_mut() {
                    a.outcome = e.code.as_str();
                }
                ctx.interrupted = true;
                yield Ok(upstream.error_frame(&e));
                ctx.finish(200, Some(&e));
            }
        }
    };
    let mut resp = respond::reply(
        StatusCode::OK,
        "text/event-stream",
        axum::body::Body::from_stream(body),
        headers,
    );
    let h = resp.headers_mut();
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    // Tell nginx-style proxies in front of us not to buffer either.
    h.insert("x-accel-buffering", http::HeaderValue::from_static("no"));
    resp
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
