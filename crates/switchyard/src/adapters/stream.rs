//! An upstream event stream on its way to the client, one event at a time.
//!
//! `open` reads up to the first event worth forwarding inside the attempt's
//! first-byte timeout, so anything failing before it is still a clean,
//! retryable attempt (nothing has reached the client yet). After that, `next`
//! judges each event: forward (bytes as they came, or translated), skip
//! (keep-alives, our own usage chunk, unparsable events — counted), done, or
//! an in-band error.

use std::sync::Arc;
use std::time::Duration;

use crate::upstream::client::UpstreamBody;
use bytes::{Bytes, BytesMut};
use http::Response;
use switchyard_protocol::ir::{AnswerBuilder, FinishReason, StreamEvent, Usage};
use switchyard_protocol::openai::{peek_chunk, peek_pass_chunk};
use switchyard_protocol::sse::{data_frame, named_frame, SseEvent};
use tokio::time::Instant;

use super::silent;
use super::translate::{self, Decoded, Mode};
use crate::adapters::deployment::ProviderRt;
use crate::doors::{Door, Encoder, StreamPosition};
use crate::error::{ErrorCode, GatewayError};
use crate::upstream::events::{EventsError, Framing, UpstreamEvents};
use switchyard_protocol::responses::Problem;

/// What to do with one upstream event.
#[derive(Debug)]
pub enum Step {
    Forward(Bytes),
    Skip {
        unparsable: bool,
    },
    /// The upstream's terminator.
    Done,
    /// An in-band upstream error.
    Error(GatewayError),
}

/// What the stream has told us so far.
#[derive(Debug, Default)]
pub struct Seen {
    /// Where the client's stream stands (its envelope, Anthropic's open
    /// block), so a continuation can write into it.
    pub at: StreamPosition,
    pub finish: Option<FinishReason>,
    pub usage: Option<Usage>,
    /// Answer text forwarded so far (what a resume would prefill).
    pub text: String,
    /// The rest of the output forwarded so far — reasoning, tool names and
    /// arguments: what a call cut short is billed for beside `text`.
    pub other: String,
    pub in_tool_call: bool,
    /// OpenAI pass: the envelope has been read (from the first chunk).
    pub enveloped: bool,
    pub skipped: u32,
    /// The whole answer, put together as it streams (only when the
    /// response cache may keep it: `CallInfo::capture`).
    pub capture: Option<Box<Capture>>,
}

/// A streamed answer collected as the IR. An OpenAI passthrough forwards
/// bytes without decoding them; here they are decoded too.
#[derive(Debug, Default)]
pub struct Capture {
    pub answer: AnswerBuilder,
    openai: Option<Box<switchyard_protocol::openai::StreamTranslator>>,
}

impl Capture {
    /// An OpenAI chunk the passthrough forwarded, decoded for the answer.
    fn openai_chunk(&mut self, data: &[u8]) {
        let Ok(chunk) = peek_chunk(data) else { return };
        let mut events = Vec::new();
        self.openai
            .get_or_insert_default()
            .push(&chunk, &mut events);
        events.iter().for_each(|e| self.answer.push(e));
    }
}

impl Seen {
    /// Bytes of output relayed so far.
    pub fn relayed(&self) -> usize {
        self.text.len() + self.other.len()
    }

    /// Every output text relayed so far, in one piece (to count its tokens).
    pub fn relayed_text(&self) -> String {
        let mut all = String::with_capacity(self.relayed() + 1);
        all.push_str(&self.text);
        if !self.other.is_empty() {
            all.push('\n');
            all.push_str(&self.other);
        }
        all
    }

    fn observe(&mut self, ev: &StreamEvent) {
        match ev {
            StreamEvent::Start { model, id, created } if self.at.model.is_none() => {
                self.at.model = Some(model.clone()).filter(|m| !m.is_empty());
                self.at.id = Some(id.clone()).filter(|i| !i.is_empty());
                self.at.created = Some(*created).filter(|c| *c > 0);
            }
            StreamEvent::TextDelta(t) => self.text.push_str(t),
            StreamEvent::ReasoningDelta { text, .. } => self.other.push_str(text),
            StreamEvent::ToolCallStart { name, .. } => {
                self.in_tool_call = true;
                self.other.push_str(name);
            }
            StreamEvent::ToolCallDelta { arguments, .. } => self.other.push_str(arguments),
            StreamEvent::Usage(u) => self.usage = Some(*u),
            StreamEvent::Finish { reason, .. } => self.finish = Some(*reason),
            _ => {}
        }
        if let Some(c) = &mut self.capture {
            c.answer.push(ev);
        }
    }
}

pub struct UpstreamStream {
    /// The deployment's concurrency slot, in-flight count and tpm
    /// reservation, held until the stream ends (or is dropped).
    pub hold: Option<crate::registry::held::Held>,
    events: UpstreamEvents,
    mode: Mode,
    door: Door,
    pub seen: Seen,
    /// The first forwarded frame, held until the client response starts.
    pub first: Option<Bytes>,
    pub ttfb: Duration,
    scratch: Vec<StreamEvent>,
    /// Whose keys are masked in the errors this stream reports (the
    /// upstream may echo one back in an in-band error).
    keys_of: Option<Arc<ProviderRt>>,
}

impl UpstreamStream {
    pub async fn open(
        resp: Response<UpstreamBody>,
        framing: Option<Box<dyn Framing>>,
        mode: Mode,
        door: Door,
        capture: Option<Box<Capture>>,
        first_byte_by: Instant,
        started: Instant,
    ) -> Result<UpstreamStream, GatewayError> {
        let want = framing
            .as_ref()
            .map_or("text/event-stream", |f| f.content_type());
        let is_stream = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(want));
        if !is_stream {
            return Err(GatewayError::upstream(
                ErrorCode::UpstreamError,
                "upstream answered a stream request without an event stream",
            ));
        }
        let events = UpstreamEvents::new(resp.into_body(), framing);
        let seen = Seen {
            capture,
            ..Seen::default()
        };
        let mut s = UpstreamStream {
            hold: None,
            events,
            mode,
            door,
            seen,
            first: None,
            ttfb: Duration::ZERO,
            scratch: Vec::new(),
            keys_of: None,
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

    /// The next upstream event, judged. `Ok(None)` = clean end of body.
    pub async fn next(&mut self) -> Result<Option<Step>, GatewayError> {
        let next = self.events.next().await;
        match next.map_err(|e| self.redacted(events_error(e)))? {
            None => Ok(None),
            Some(ev) => Ok(Some(match self.step(&ev) {
                Step::Error(e) => Step::Error(self.redacted(e)),
                step => step,
            })),
        }
    }

    /// Mask `provider`'s key values in every error this stream reports
    /// from now on (what it reported while opening is masked by the caller).
    pub fn mask_keys_of(&mut self, provider: Arc<ProviderRt>) {
        self.keys_of = Some(provider);
    }

    fn redacted(&self, e: GatewayError) -> GatewayError {
        match &self.keys_of {
            Some(p) => crate::observe::redact::redact_error(e, &p.secret_refs()),
            None => e,
        }
    }

    /// The client's terminator, after a complete stream.
    pub fn end_frames(&mut self) -> Bytes {
        match &mut self.mode {
            Mode::OpenAiPass { .. } | Mode::AnthropicPass { .. } | Mode::ResponsesPass(_) => {
                self.door.pass_end()
            }
            Mode::Translate { to, .. } => to.end(),
        }
    }

    /// The error event(s) that end an interrupted stream, its message
    /// masked against the provider's keys (whatever built it).
    pub fn error_frame(&mut self, e: &GatewayError) -> Bytes {
        let e = &self.redacted(e.clone());
        match &mut self.mode {
            Mode::Translate { to, .. } => to.error(e),
            Mode::ResponsesPass(p) => {
                crate::doors::responses::stream_error_after(p.response_id(), p.next_sequence(), e)
            }
            Mode::OpenAiPass { .. } | Mode::AnthropicPass { .. } => self.door.stream_error(e),
        }
    }

    /// Where the client's stream stands, for a continuation.
    pub fn position(&self) -> StreamPosition {
        let mut at = self.seen.at.clone();
        if let Mode::Translate { to, .. } = &self.mode {
            to.position(&mut at);
        }
        at
    }

    fn step(&mut self, ev: &SseEvent) -> Step {
        let step = match &mut self.mode {
            Mode::OpenAiPass { include_usage } => openai_pass(ev, *include_usage, &mut self.seen),
            Mode::AnthropicPass { peek } => {
                self.scratch.clear();
                match translate::anthropic_push(peek, ev, &mut self.scratch) {
                    Decoded::Done => Step::Done,
                    Decoded::Unparsable => Step::Skip { unparsable: true },
                    Decoded::Error(e) => Step::Error(e),
                    Decoded::Events => {
                        self.scratch.iter().for_each(|e| self.seen.observe(e));
                        self.seen.at.blocks = peek.cursor();
                        match &ev.data {
                            Some(data) => Step::Forward(frame_of(ev, data, ev.event.as_deref())),
                            None => Step::Skip { unparsable: false },
                        }
                    }
                }
            }
            Mode::ResponsesPass(peek) => {
                self.scratch.clear();
                match peek.push(ev, &mut self.scratch) {
                    Err(Problem::Unparsable(_)) => Step::Skip { unparsable: true },
                    Err(Problem::Upstream(e)) => {
                        Step::Error(crate::adapters::openai::errors::responses_failure(&e))
                    }
                    Ok(()) => {
                        self.scratch.iter().for_each(|e| self.seen.observe(e));
                        match &ev.data {
                            Some(data) => Step::Forward(frame_of(ev, data, ev.event.as_deref())),
                            None => Step::Skip { unparsable: false },
                        }
                    }
                }
            }
            Mode::Translate { from, to } => {
                self.scratch.clear();
                match from.push(ev, &mut self.scratch) {
                    Decoded::Done => Step::Done,
                    Decoded::Unparsable => Step::Skip { unparsable: true },
                    Decoded::Error(e) => Step::Error(e),
                    Decoded::Events => {
                        let mut out = BytesMut::new();
                        for e in &self.scratch {
                            self.seen.observe(e);
                            to.encode(e, &mut out);
                        }
                        if let Encoder::Anthropic(a) = to {
                            self.seen.at.blocks = a.cursor();
                        }
                        if out.is_empty() {
                            Step::Skip { unparsable: false }
                        } else {
                            Step::Forward(out.freeze())
                        }
                    }
                }
            }
        };
        if matches!(step, Step::Skip { unparsable: true }) {
            self.seen.skipped += 1;
        }
        step
    }
}

/// OpenAI → OpenAI: forward the event's own bytes; peek for usage, finish,
/// text and errors; drop the usage chunk the gateway asked for on its own.
fn openai_pass(ev: &SseEvent, include_usage: bool, seen: &mut Seen) -> Step {
    let Some(data) = &ev.data else {
        return Step::Skip { unparsable: false };
    };
    if ev.is_done_sentinel() {
        return Step::Done;
    }
    if !seen.enveloped {
        // The first chunk carries the envelope a continuation reuses.
        if let Ok(first) = peek_chunk(data) {
            seen.enveloped = first.error.is_none();
            seen.at.model = first.model.as_deref().map(str::to_owned);
            seen.at.id = first.id.as_deref().map(str::to_owned);
            seen.at.created = first.created;
        }
    }
    let Ok(chunk) = peek_pass_chunk(data) else {
        return Step::Skip { unparsable: true };
    };
    if let Some(c) = &mut seen.capture {
        if chunk.error.is_none() {
            c.openai_chunk(data);
        }
    }
    if let Some(err) = chunk.error {
        return Step::Error(translate::openai_in_band(err.get()));
    }
    for c in &chunk.choices {
        if let Some(d) = &c.delta {
            if let Some(t) = &d.content {
                seen.text.push_str(t);
            }
            if let Some(t) = &d.reasoning_content {
                seen.other.push_str(t);
            }
            if let Some(calls) = &d.tool_calls {
                seen.in_tool_call = true;
                for f in calls.iter().filter_map(|c| c.function.as_ref()) {
                    seen.other.push_str(f.name.as_deref().unwrap_or_default());
                    seen.other
                        .push_str(f.arguments.as_deref().unwrap_or_default());
                }
            }
        }
        if let Some(f) = &c.finish_reason {
            seen.finish = Some(FinishReason::from_openai(f));
        }
    }
    if let Some(u) = &chunk.usage {
        seen.usage = Some(u.to_ir());
        if chunk.choices.is_empty() && !include_usage {
            return Step::Skip { unparsable: false };
        }
    }
    Step::Forward(frame_of(ev, data, None))
}

/// The event's own bytes when they form a complete frame; a fresh frame for
/// a trailing event that arrived without its blank line.
fn frame_of(ev: &SseEvent, data: &Bytes, name: Option<&[u8]>) -> Bytes {
    if ev.raw.ends_with(b"\n\n") || ev.raw.ends_with(b"\r\n\r\n") || ev.raw.ends_with(b"\r\r") {
        return ev.raw.clone();
    }
    match name.and_then(|n| std::str::from_utf8(n).ok()) {
        Some(n) => named_frame(n, data),
        None => data_frame(data),
    }
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
        EventsError::Broken(m) => GatewayError::upstream(
            ErrorCode::UpstreamError,
            format!("upstream stream framing broke: {m}"),
        ),
        EventsError::Upstream(e) => e,
    }
}
