//! `RequestCtx`: a request's scope from the door to the last stream byte —
//! its record (`observe::record::Record`, which it derefs to), what it holds
//! while it runs (the client's budget hold, the fleet's pending charges,
//! the facts its reservations are made of) and where the record goes. On
//! `finish`, or on drop when the client went away first, the hold is
//! settled and the record handed once to every sink, then to what waits
//! for the request's end with its answer (`after`: shadow traffic).

use std::ops::{Deref, DerefMut};

use bytes::Bytes;
use switchyard_protocol::ir::{ChatResponse, Usage};

use crate::config::Pricing;
use crate::doors::facts::Input;
use crate::error::GatewayError;
use crate::governance::budget::Hold;
use crate::observe::debug_bodies::Capture;
use crate::observe::record::Record;
use crate::observe::sink::Sinks;

pub struct RequestCtx {
    /// What the sinks read.
    pub rec: Record,
    /// The prompt's estimated tokens (what a call that reported no usage is
    /// billed for its input).
    pub prompt_estimate: u64,
    /// What an upstream that renders tool definitions its own way adds to
    /// `prompt_estimate` (`doors::facts::Input::extra`).
    pub input: Input,
    /// The output cap the request asked for (`max_tokens`), if any: per
    /// choice.
    pub output_cap: Option<u32>,
    /// Choices the request asked for (`n`; at least 1): a budget
    /// reservation covers the output cap for each.
    pub output_choices: u32,
    /// The client's budget hold, settled to the real cost when the request
    /// ends (`governance::budget`).
    pub budget: Option<Hold>,
    /// What the fleet still has to charge, and the client's charge once
    /// made (`state.backend: redis`).
    pub shared: super::shared::Pending,
    /// An upstream call is out and its answer not yet in (its deployment's
    /// prices): if the client goes away now, the prompt was sent and is
    /// charged (contract §8).
    pub in_flight: Option<InFlight>,
    /// The bodies being kept for the log, when the client asked for them
    /// (`observe::debug_bodies`).
    pub debug: Option<Box<Capture>>,
    /// What runs once the request is over, with its record and its answer
    /// (a shadow copy of the request, `crate::shadow`).
    pub after: Option<Box<dyn After>>,
    /// The answer as the client got it, kept for `after` (only when there
    /// is one).
    pub answered: Option<Answered>,
    /// Where the finished record goes (decision log, metrics, …).
    sinks: Sinks,
    emitted: bool,
}

/// A whole answer the client got.
pub enum Answered {
    /// A JSON answer's body, in the client's dialect.
    Body(Bytes),
    /// A stream, put together as the IR as it went out.
    Ir(Box<ChatResponse>),
}

/// Work for after a request: handed its closed record and the answer (none
/// when the request failed, was cut, or its stream was continued).
pub trait After: Send {
    fn finished(self: Box<Self>, rec: &Record, answer: Option<Answered>);
}

/// An upstream call on its way (see [`RequestCtx::in_flight`]).
#[derive(Debug, Clone, Copy)]
pub struct InFlight {
    pub pricing: Option<Pricing>,
}

/// The scope reads and writes its record's fields as its own.
impl Deref for RequestCtx {
    type Target = Record;
    fn deref(&self) -> &Record {
        &self.rec
    }
}

impl DerefMut for RequestCtx {
    fn deref_mut(&mut self) -> &mut Record {
        &mut self.rec
    }
}

impl RequestCtx {
    /// Keeps `bytes` the client was sent, when its bodies are logged.
    #[inline]
    pub fn debug_response(&mut self, bytes: &[u8]) {
        if let Some(c) = &mut self.debug {
            c.response(bytes);
        }
    }

    pub fn new(rec: Record, sinks: Sinks) -> Self {
        sinks.started();
        RequestCtx {
            rec,
            prompt_estimate: 0,
            input: Input::default(),
            output_cap: None,
            output_choices: 1,
            budget: None,
            shared: Default::default(),
            in_flight: None,
            debug: None,
            after: None,
            answered: None,
            sinks,
            emitted: false,
        }
    }

    pub fn wants_input_hash(&self) -> bool {
        self.sinks.wants_input_hash()
    }

    /// Replace the budget reservation with the request's cost so far (the
    /// answer is complete); returns what is left of the budget.
    pub fn settle_budget(&mut self) -> Option<f64> {
        let hold = self.budget.take()?;
        self.rec.budget_remaining = Some(hold.settle(self.rec.cost_usd.unwrap_or(0.0)));
        self.rec.budget_remaining
    }

    /// The request is over: the hold settled, then every sink sees the
    /// whole record once (none blocks: the decision log is buffered,
    /// metrics are atomics).
    pub fn finish(&mut self, status: u16, error: Option<&GatewayError>) {
        if self.emitted {
            return;
        }
        self.emitted = true;
        self.settle_budget();
        if let Some(c) = self.debug.take() {
            self.rec.debug = Some(Box::new(c.done()));
        }
        self.rec.close(status, error);
        let sinks = std::mem::take(&mut self.sinks);
        sinks.finished(&self.rec);
        if let Some(after) = self.after.take() {
            after.finished(&self.rec, self.answered.take());
        }
    }

    /// Keep a streamed answer for `after`, when something waits for it.
    pub fn answered(&mut self, answer: &ChatResponse) {
        if self.after.is_some() {
            self.answered = Some(Answered::Ir(Box::new(answer.clone())));
        }
    }
}

impl Drop for RequestCtx {
    fn drop(&mut self) {
        if self.emitted {
            return;
        }
        // The client hung up before we finished: nginx's 499. A call that
        // was out is stopped with the request, but the provider read the
        // prompt: it is charged at the estimate.
        if let Some(call) = self.in_flight.take() {
            let sent = Usage {
                input_tokens: self.prompt_estimate,
                ..Usage::default()
            };
            // Not an attempt of the log yet: the request's totals only.
            let after = self.rec.attempts.len();
            self.rec.add_usage_of(after, &sent, call.pricing.as_ref());
            self.rec.usage_estimated = true;
        }
        self.finish(499, None);
    }
}
