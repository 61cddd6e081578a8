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
//! The relay runs as its own task and hands the client's bytes over a small
//! channel, so its clocks run whatever the client does (contract §8):
//! ```text
//!  upstream ──► relay task ──(channel, a few frames)──► client body (hyper)
//!                 │  total_by: the stream ends, slot and reservation freed,
//!                 │            even when the client reads nothing
//!                 │  client reads nothing for stream_idle: cut off
//!                 └  client gone (body dropped): the upstream call stops
//!                    at once and what it produced is charged
//! ```
//! A stream that does not end well for the client's sake is charged all the
//! same: the upstream's own usage when it sent it, else the prompt's
//! estimate and the output relayed, counted with the tokenizer
//! (`usage_estimated`); the decision log and the usage row say
//! `client_closed`.
//!
//! Reliability owns this whole lifecycle (timeouts, resumes, the attempts
//! they make); the client's SSE writer (`ingress::sse_out`) only writes the
//! bytes.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{FutureExt, Stream};
use switchyard_protocol::sse::KEEPALIVE_FRAME;
use tokio::sync::mpsc;
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

/// Frames in flight between the relay task and the client's connection:
/// enough to keep both busy, few enough that a client that stops reading
/// holds almost nothing.
const IN_FLIGHT: usize = 4;

/// The client's stream: the held first frame, then every event to the end.
/// The relay runs on its own task (see the module doc); the body returned
/// here only hands its frames to the client.
pub fn relay(
    upstream: Box<UpstreamStream>,
    served: Arc<DeploymentRt>,
    with: Relay,
    ctx: RequestCtx,
) -> ClientBody {
    let (tx, rx) = mpsc::channel(IN_FLIGHT);
    let out = Out {
        tx,
        idle: with.limits.idle,
        total_by: with.limits.total_by,
    };
    tokio::spawn(run(upstream, served, with, ctx, out));
    ClientBody { rx, ended: false }
}

/// One frame for the client, or the mark of a stream that ended as it
/// should (the channel closing without it is a cut: the client's connection
/// is then closed mid-body, never ended cleanly).
enum Frame {
    Data(Bytes),
    End,
}

/// The client's side of the channel, as a response body.
pub struct ClientBody {
    rx: mpsc::Receiver<Frame>,
    ended: bool,
}

impl Stream for ClientBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.rx.poll_recv(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Frame::Data(b))) => Poll::Ready(Some(Ok(b))),
            Poll::Ready(Some(Frame::End)) => {
                self.ended = true;
                Poll::Ready(None)
            }
            Poll::Ready(None) => {
                self.ended = true;
                Poll::Ready(Some(Err(std::io::Error::other("the stream was cut off"))))
            }
        }
    }
}

/// Why the client stopped taking the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    /// The client closed its connection.
    Gone,
    /// It read nothing for `stream_idle`.
    Stalled,
    /// The total timeout passed while the client was not reading.
    PastTotal,
}

/// The sending half, with the clocks that bound a client that stops reading.
struct Out {
    tx: mpsc::Sender<Frame>,
    idle: Duration,
    total_by: Instant,
}

impl Out {
    /// Hand one frame over. Almost always there is room at once (no timer
    /// is armed); when the client has stopped reading, wait for room at most
    /// `stream_idle`, and never past the total timeout.
    async fn send(&self, b: Bytes) -> Result<(), Cut> {
        let b = match self.tx.try_send(Frame::Data(b)) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(Cut::Gone),
            Err(mpsc::error::TrySendError::Full(f)) => f,
        };
        let now = Instant::now();
        let by = (now + self.idle).min(self.total_by);
        match tokio::time::timeout_at(by, self.tx.send(b)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(Cut::Gone),
            Err(_) if Instant::now() >= self.total_by => Err(Cut::PastTotal),
            Err(_) => Err(Cut::Stalled),
        }
    }

    /// The stream ended as it should: the client's body ends cleanly.
    async fn end(&self) {
        let _ = self.send_end().await;
    }

    async fn send_end(&self) -> Result<(), Cut> {
        let by = (Instant::now() + self.idle).min(self.total_by);
        match tokio::time::timeout_at(by, self.tx.send(Frame::End)).await {
            Ok(Ok(())) => Ok(()),
            _ => Err(Cut::Stalled),
        }
    }
}

/// The relay task: the stream from its held first frame to its end.
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
    } = with;
    macro_rules! send_or_cut {
        ($frame:expr) => {
            if let Err(cut) = out.send($frame).await {
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
                next = upstream.next() => Wake::Upstream(next),
                () = &mut timer => Wake::Timer,
                () = out.tx.closed() => Wake::ClientGone,
            };
            match woke {
                Wake::ClientGone => {
                    return charge_cut(Cut::Gone, upstream, &served, client, ctx).await;
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
        let reservation = upstream.hold.take().map(super::Held::release);
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
    let reservation = upstream.hold.take().map(super::Held::release);
    let (used, estimated) = billed(&upstream.seen, ctx.prompt_estimate, &served.model).await;
    ctx.usage_estimated |= estimated;
    if let Some(r) = reservation {
        r.settle_used(used.total());
    }
    settle(&upstream, &served, used, client, &mut ctx);
    match end {
        Ok(()) => {
            send_or_cut_end(&out, upstream.end_frames()).await;
            // A continued answer was interrupted: never kept.
            if let (Some(c), false) = (&cache, ctx.interrupted) {
                if let Some(answer) = upstream.seen.capture.take().and_then(|a| a.answer.finish()) {
                    c.keep(answer, &served.name, &served.provider.name);
                }
            }
            ctx.finish(200, None);
        }
        Err(e) => {
            let frame = upstream.error_frame(&e);
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
        out.end().await;
    }
}

/// Charge the stream's current call (`used`) to the request and the
/// client's own tpm.
fn settle(
    upstream: &UpstreamStream,
    served: &DeploymentRt,
    used: Usage,
    client: Option<super::limits::Reservation>,
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
    client: Option<super::limits::Reservation>,
    mut ctx: RequestCtx,
) {
    let seen = std::mem::take(&mut upstream.seen);
    // The slot is free at once; the tpm reservation waits for the count.
    let reservation = upstream.hold.take().map(super::Held::release);
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
    ClientGone,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn out(idle: Duration, total: Duration) -> (Out, ClientBody) {
        let (tx, rx) = mpsc::channel(IN_FLIGHT);
        let out = Out {
            tx,
            idle,
            total_by: Instant::now() + total,
        };
        (out, ClientBody { rx, ended: false })
    }

    async fn fill(out: &Out) {
        for _ in 0..IN_FLIGHT {
            out.send(Bytes::from_static(b"x")).await.unwrap();
        }
    }

    /// A client that reads nothing: cut off after `stream_idle`, no sooner.
    #[tokio::test(start_paused = true)]
    async fn a_client_that_reads_nothing_is_cut_after_stream_idle() {
        let (out, _body) = out(Duration::from_secs(3), Duration::from_secs(60));
        fill(&out).await;
        let started = Instant::now();
        assert_eq!(out.send(Bytes::from_static(b"y")).await, Err(Cut::Stalled));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    /// …and never past the total timeout.
    #[tokio::test(start_paused = true)]
    async fn the_total_timeout_bounds_a_client_that_reads_nothing() {
        let (out, _body) = out(Duration::from_secs(30), Duration::from_secs(2));
        fill(&out).await;
        let started = Instant::now();
        assert_eq!(
            out.send(Bytes::from_static(b"y")).await,
            Err(Cut::PastTotal)
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
    }

    /// A client that went away is seen at once; one that reads slowly but
    /// steadily is not cut.
    #[tokio::test(start_paused = true)]
    async fn a_gone_client_is_seen_at_once_and_a_slow_one_is_served() {
        use futures_util::StreamExt;
        let (out, body) = out(Duration::from_secs(3), Duration::from_secs(600));
        fill(&out).await;
        let reader = tokio::spawn(async move {
            let mut body = body;
            let mut got = 0;
            while let Some(Ok(_)) = body.next().await {
                got += 1;
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            got
        });
        for _ in 0..10 {
            out.send(Bytes::from_static(b"z"))
                .await
                .expect("a steady reader");
        }
        out.end().await;
        assert_eq!(reader.await.unwrap(), IN_FLIGHT + 10);
        let (out, body) = out_pair();
        drop(body);
        let started = Instant::now();
        assert_eq!(out.send(Bytes::from_static(b"y")).await, Err(Cut::Gone));
        assert_eq!(started.elapsed(), Duration::ZERO);
    }

    fn out_pair() -> (Out, ClientBody) {
        out(Duration::from_secs(3), Duration::from_secs(60))
    }

    /// A body whose relay stopped without its end mark is an error to the
    /// client's connection (closed mid-body), never a clean end.
    #[tokio::test]
    async fn a_cut_stream_is_not_a_clean_end() {
        use futures_util::StreamExt;
        let (out, mut body) = out_pair();
        out.send(Bytes::from_static(b"a")).await.unwrap();
        drop(out);
        assert_eq!(
            body.next().await.unwrap().unwrap(),
            Bytes::from_static(b"a")
        );
        assert!(body.next().await.unwrap().is_err());
        assert!(body.next().await.is_none());
        let (out, mut body) = out_pair();
        out.end().await;
        drop(out);
        assert!(body.next().await.is_none(), "ended as it should");
    }
}
