//! An OpenAI upstream stream forwarded to an OpenAI client, event by event.
//!
//! Each event's bytes go out as they came; the gateway only peeks at them for
//! usage, finish reason, streamed text and in-band errors. The usage chunk the
//! gateway asked for on its own account is dropped when the client did not.

use std::time::Duration;

use bytes::Bytes;
use switchyard_protocol::ir::{FinishReason, Usage};
use switchyard_protocol::openai::peek_chunk;
use switchyard_protocol::sse::{data_frame, SseEvent};
use tokio::time::Instant;

use super::silent;
use crate::error::{ErrorCode, GatewayError};
use crate::upstream::events::{EventsError, UpstreamEvents};

/// What to do with one upstream event.
#[derive(Debug)]
pub enum Step {
    Forward(Bytes),
    /// Keep-alive comments, our own usage chunk, unparsable events.
    Skip {
        unparsable: bool,
    },
    /// `[DONE]`.
    Done,
    /// An in-band upstream error.
    Error(GatewayError),
}

/// What the stream has told us so far.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    pub model: Option<String>,
    pub finish: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// Characters of answer text forwarded (what a resume would prefill).
    pub text: String,
    pub in_tool_call: bool,
    pub skipped: u32,
}

pub struct OpenAiStream {
    events: UpstreamEvents,
    include_usage: bool,
    pub seen: Seen,
    /// The first forwarded frame, held until the client response starts.
    pub first: Option<Bytes>,
    pub ttfb: Duration,
}

impl OpenAiStream {
    /// Read up to the first forwardable event before `first_byte_by`, so that
    /// anything failing before it is still a clean, retryable attempt.
    pub async fn open(
        events: UpstreamEvents,
        include_usage: bool,
        first_byte_by: Instant,
        started: Instant,
    ) -> Result<OpenAiStream, GatewayError> {
        let mut s = OpenAiStream {
            events,
            include_usage,
            seen: Seen::default(),
            first: None,
            ttfb: Duration::ZERO,
        };
        loop {
            let ev = match tokio::time::timeout_at(first_byte_by, s.events.next()).await {
                Err(_) => return Err(silent("no stream event before the first-byte timeout")),
                Ok(r) => r.map_err(events_error)?,
            };
            let Some(ev) = ev else {
                return Err(GatewayError::upstream(
                    ErrorCode::UpstreamError,
                    "upstream stream ended before its first event",
                ));
            };
            match s.step(&ev) {
                Step::Forward(b) => {
                    s.first = Some(b);
                    s.ttfb = started.elapsed();
                    return Ok(s);
                }
                Step::Skip { .. } => continue,
                Step::Done => {
                    return Err(GatewayError::upstream(
                        ErrorCode::UpstreamError,
                        "upstream stream ended before its first event",
                    ))
                }
                Step::Error(e) => return Err(e),
            }
        }
    }

    /// The next upstream event, already judged. `Ok(None)` = clean EOF.
    pub async fn next(&mut self) -> Result<Option<Step>, GatewayError> {
        match self.events.next().await.map_err(events_error)? {
            None => Ok(None),
            Some(ev) => Ok(Some(self.step(&ev))),
        }
    }

    fn step(&mut self, ev: &SseEvent) -> Step {
        let Some(data) = &ev.data else {
            return Step::Skip { unparsable: false };
        };
        if ev.is_done_sentinel() {
            return Step::Done;
        }
        let chunk = match peek_chunk(data) {
            Ok(c) => c,
            Err(_) => {
                self.seen.skipped += 1;
                return Step::Skip { unparsable: true };
            }
        };
        if let Some(err) = chunk.error {
            return Step::Error(in_band_error(err.get()));
        }
        if self.seen.model.is_none() {
            self.seen.model = chunk.model.as_deref().map(str::to_owned);
        }
        for c in &chunk.choices {
            if let Some(d) = &c.delta {
                if let Some(t) = &d.content {
                    self.seen.text.push_str(t);
                }
                if d.tool_calls.is_some() {
                    self.seen.in_tool_call = true;
                }
            }
            if let Some(f) = &c.finish_reason {
                self.seen.finish = Some(FinishReason::from_openai(f));
            }
        }
        if let Some(u) = &chunk.usage {
            self.seen.usage = Some(u.to_ir());
            if chunk.choices.is_empty() && !self.include_usage {
                return Step::Skip { unparsable: false };
            }
        }
        Step::Forward(frame_of(ev, data))
    }
}

/// The event's own bytes when they are a complete frame; a fresh frame for a
/// trailing event that arrived without its blank line.
fn frame_of(ev: &SseEvent, data: &Bytes) -> Bytes {
    if ev.raw.ends_with(b"\n\n") || ev.raw.ends_with(b"\r\n\r\n") || ev.raw.ends_with(b"\r\r") {
        ev.raw.clone()
    } else {
        data_frame(data)
    }
}

fn in_band_error(raw: &str) -> GatewayError {
    #[derive(serde::Deserialize)]
    struct E {
        #[serde(default)]
        message: Option<String>,
    }
    let msg = serde_json::from_str::<E>(raw)
        .ok()
        .and_then(|e| e.message)
        .unwrap_or_else(|| raw.to_owned());
    GatewayError::upstream(
        ErrorCode::UpstreamError,
        crate::observe::redact::redact(&msg, &[]),
    )
}

fn events_error(e: EventsError) -> GatewayError {
    match e {
        EventsError::Body(m) => GatewayError::upstream(
            ErrorCode::ConnectionError,
            format!("upstream stream broke: {m}"),
        ),
        EventsError::TooLarge => GatewayError::upstream(
            ErrorCode::UpstreamError,
            "upstream sent an oversized stream event",
        ),
    }
}
