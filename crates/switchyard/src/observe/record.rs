//! `Record`: the one record of a request — who, route, candidates, every
//! attempt, tokens, cost, cache, outcome, timings — as the sinks read it
//! (the decision-log line, the metrics, the usage row, the trace). It is
//! plain data: what the request holds while it runs (its budget hold, the
//! fleet's charges, where the record goes) is its scope,
//! `reliability::ctx::Record`, which hands the record to every sink once.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use switchyard_protocol::ir::Usage;
use tokio::time::Instant;

use std::sync::Arc;

use crate::config::Pricing;
use crate::error::GatewayError;
use crate::observe::trace::TraceCtx;

#[derive(Debug, Serialize)]
pub struct AttemptLog {
    pub deployment: Arc<str>,
    #[serde(skip)]
    pub provider: Arc<str>,
    /// False for a candidate that was not sent (open circuit, full queue).
    #[serde(skip)]
    pub sent: bool,
    /// `ok` or a contract §4 code.
    pub outcome: &'static str,
    pub status: Option<u16>,
    pub latency_ms: f64,
    pub ttfb_ms: Option<f64>,
    pub resumed: bool,
    /// What this upstream call used and cost (a resumed stream has several).
    #[serde(rename = "tokens", skip_serializing_if = "Option::is_none")]
    pub usage: Option<AttemptUsage>,
    /// What its trace span shows besides the above.
    #[serde(skip)]
    pub span: AttemptSpan,
}

/// An attempt's trace span: when it began, its id (given before the call
/// went out, so the upstream's `traceparent` names it) and its GenAI facts.
#[derive(Debug, Clone)]
pub struct AttemptSpan {
    pub started: SystemTime,
    /// 0 when the request was not traced as it was sent (not sampled in:
    /// the tail rule may still export it, with an id drawn then).
    pub span_id: u64,
    /// GenAI `gen_ai.operation.name`: `chat`, `embeddings`, `count_tokens`.
    pub operation: &'static str,
    /// GenAI `gen_ai.provider.name` of the wire protocol (`openai`, …).
    pub provider: &'static str,
    /// GenAI `gen_ai.request.model`: the upstream model asked for (the
    /// deployment's `model`).
    pub request_model: Option<Arc<str>>,
    /// GenAI `gen_ai.response.model`: the model the upstream reported in
    /// its answer (a stream's first event).
    pub model: Option<Arc<str>>,
}

impl AttemptSpan {
    /// A call that took `took` and is over now.
    fn ended(took: Duration) -> Self {
        let now = SystemTime::now();
        AttemptSpan {
            started: now.checked_sub(took).unwrap_or(now),
            span_id: 0,
            operation: "chat",
            provider: "",
            request_model: None,
            model: None,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct AttemptUsage {
    #[serde(rename = "input")]
    pub input_tokens: u64,
    #[serde(rename = "output")]
    pub output_tokens: u64,
    #[serde(skip)]
    pub cost_usd: f64,
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1e3
}

impl AttemptLog {
    pub fn ok(
        deployment: &Arc<str>,
        provider: &Arc<str>,
        latency: Duration,
        ttfb: Duration,
    ) -> Self {
        AttemptLog {
            deployment: deployment.clone(),
            provider: provider.clone(),
            sent: true,
            outcome: "ok",
            status: Some(200),
            latency_ms: ms(latency),
            ttfb_ms: Some(ms(ttfb)),
            resumed: false,
            usage: None,
            span: AttemptSpan::ended(latency),
        }
    }

    /// A candidate not tried (open circuit, full queue).
    pub fn skipped(deployment: &Arc<str>, provider: &Arc<str>, outcome: &'static str) -> Self {
        AttemptLog {
            deployment: deployment.clone(),
            provider: provider.clone(),
            sent: false,
            outcome,
            status: None,
            latency_ms: 0.0,
            ttfb_ms: None,
            resumed: false,
            usage: None,
            span: AttemptSpan::ended(Duration::ZERO),
        }
    }

    pub fn failed(
        deployment: &Arc<str>,
        provider: &Arc<str>,
        e: &GatewayError,
        latency: Duration,
    ) -> Self {
        AttemptLog {
            deployment: deployment.clone(),
            provider: provider.clone(),
            sent: true,
            outcome: e.code.as_str(),
            status: e.upstream_status,
            latency_ms: ms(latency),
            ttfb_ms: None,
            resumed: false,
            usage: None,
            span: AttemptSpan::ended(latency),
        }
    }
}

#[derive(Debug, Serialize)]
pub struct CandidateLog {
    pub deployment: Arc<str>,
    pub role: &'static str,
    pub score: f64,
    /// What the score is made of (health, latency, cost, task bonus, sticky).
    #[serde(serialize_with = "parts")]
    pub parts: Vec<(&'static str, f64)>,
}

fn parts<S: serde::Serializer>(p: &[(&'static str, f64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(p.len()))?;
    for (k, v) in p {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

/// The routing plan: when it began and how long it took (its trace span).
#[derive(Debug, Clone, Copy)]
pub struct PlanTiming {
    pub started: SystemTime,
    pub took: Duration,
}

/// The response-cache lookup: when it began and how long it took (its
/// result is `Record::cache`). A trace shows it as a span.
#[derive(Debug, Clone, Copy)]
pub struct CacheLookup {
    pub started: SystemTime,
    pub took: Duration,
}

#[derive(Debug, Default, Serialize)]
pub struct TokensLog {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
}

/// The decision-log line (contract §6).
#[derive(Debug, Serialize)]
pub struct Record {
    /// When the request arrived (RFC 3339, formatted only when logged).
    #[serde(serialize_with = "rfc3339")]
    pub ts: SystemTime,
    pub request_id: String,
    pub trace_id: Option<String>,
    pub client: Option<Arc<str>>,
    /// Which of the client's keys (never the key itself).
    #[serde(skip)]
    pub key_id: Option<Arc<str>>,
    /// What was left of the budget when the answer went out.
    #[serde(skip)]
    pub budget_remaining: Option<f64>,
    pub route: Option<Arc<str>>,
    /// The request's task (header or task rule), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Where the task came from: `header`, `rule` or `classifier`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_source: Option<&'static str>,
    pub model: Option<String>,
    pub config_version: Arc<str>,
    pub input_hash: Option<String>,
    pub candidates: Vec<CandidateLog>,
    pub skipped: Vec<(Arc<str>, &'static str)>,
    pub selected: Option<Arc<str>>,
    /// The upstream model of the deployment that served.
    #[serde(skip)]
    pub served_model: Option<Arc<str>>,
    pub decision_reason: Option<&'static str>,
    pub attempts: Vec<AttemptLog>,
    pub stream: bool,
    pub tokens: TokensLog,
    pub cost_usd: Option<f64>,
    pub cache: &'static str,
    #[serde(skip)]
    pub cache_lookup: Option<CacheLookup>,
    #[serde(skip)]
    pub plan_timing: Option<PlanTiming>,
    /// The trace this request is part of, when it is traced: sampled in
    /// at the start (the upstream gets a `traceparent` naming the attempt
    /// span) or, once closed, kept by the tail rule. What the trace sink
    /// exports.
    #[serde(skip)]
    pub trace: Option<TraceCtx>,
    /// A trace not sampled in, waiting for the end: `close` keeps it (moves
    /// it to `trace`) when the request erred or was slow.
    #[serde(skip)]
    pub tail: Option<Tail>,
    pub fallback_reason: Option<&'static str>,
    /// Tools the request offered that the serving deployment cannot see.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped_tools: Vec<String>,
    pub status: u16,
    pub error: Option<&'static str>,
    /// `ok`, a contract §4 code, or `client_closed` (the client went away
    /// before the answer was whole).
    pub outcome: &'static str,
    /// The tokens are the gateway's count, not the upstream's (a stream cut
    /// short, an upstream that reports no usage).
    pub usage_estimated: bool,
    pub skipped_events: u32,
    /// Retries made on the same deployment.
    pub retries: u32,
    /// Circuit transitions this request caused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transitions: Vec<String>,
    /// What the route's response contract found, when it checked an
    /// answer (contract §11).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub contract: Option<Box<ContractLog>>,
    #[serde(skip)]
    pub limit_rejections: u32,
    /// Refused by the client's own rpm/tpm.
    #[serde(skip)]
    pub client_rejected: bool,
    pub duration_ms: f64,
    #[serde(skip)]
    started: Instant,
    /// The stream broke after its first byte reached the client.
    #[serde(skip)]
    pub interrupted: bool,
    /// The input estimate of the attempt that served, as its upstream
    /// bills (tool definitions its way): against the billed input, the
    /// `switchyard_token_estimate_ratio`.
    #[serde(skip)]
    pub input_estimate: u64,
    /// A background probe's record (client `_probe`), not a request's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeTag>,
    /// The request's bodies, redacted, when its client asked for them
    /// (`observe::debug_bodies`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debug: Option<Box<super::debug_bodies::DebugBodies>>,
}

/// A response contract's checks of one request's answers (contract §11).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ContractLog {
    /// `whole` (a whole answer), `held` (a stream fetched whole and checked
    /// before its first byte went out) or `end` (a stream checked at its
    /// end).
    pub mode: &'static str,
    pub checks: Vec<ContractCheck>,
}

/// One answer checked against the request's schema.
#[derive(Debug, Clone, Serialize)]
pub struct ContractCheck {
    pub deployment: Arc<str>,
    pub valid: bool,
    /// What a violation got: `repair`, `fallback`, `error` or `pass`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub then: Option<&'static str>,
    /// The validator's message (which values failed, and why).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a probe's record says it was (contract §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProbeTag {
    /// `auth` or `completion`.
    pub kind: &'static str,
    /// Why: `idle`, `circuit`, `spare_key`.
    pub reason: &'static str,
    /// `ok`, `failed`, `key_rejected`, `rate_limited`, `error`: the
    /// `switchyard_probes_total{result}` label.
    pub result: &'static str,
}

impl Record {
    pub fn new(request_id: String, trace_id: Option<String>, config_version: Arc<str>) -> Self {
        Record {
            ts: SystemTime::now(),
            request_id,
            trace_id,
            client: None,
            key_id: None,
            budget_remaining: None,
            route: None,
            task: None,
            task_source: None,
            model: None,
            config_version,
            input_hash: None,
            candidates: Vec::new(),
            skipped: Vec::new(),
            selected: None,
            served_model: None,
            decision_reason: None,
            attempts: Vec::new(),
            stream: false,
            tokens: TokensLog::default(),
            cost_usd: None,
            cache: "off",
            cache_lookup: None,
            plan_timing: None,
            trace: None,
            tail: None,
            fallback_reason: None,
            dropped_tools: Vec::new(),
            status: 0,
            error: None,
            outcome: "ok",
            usage_estimated: false,
            skipped_events: 0,
            retries: 0,
            transitions: Vec::new(),
            contract: None,
            limit_rejections: 0,
            client_rejected: false,
            duration_ms: 0.0,
            started: Instant::now(),
            interrupted: false,
            input_estimate: 0,
            probe: None,
            debug: None,
        }
    }

    /// The routing plan began at `started` and is made now.
    pub fn planned(&mut self, started: SystemTime) {
        let took = started.elapsed().unwrap_or_default();
        self.plan_timing = Some(PlanTiming { started, took });
    }

    /// How long the request took (its `duration_ms`, to the microsecond).
    pub fn took(&self) -> Duration {
        Duration::from_secs_f64(self.duration_ms.max(0.0) / 1e3)
    }

    /// The deployment (id, upstream model) that served.
    pub fn served_by(&mut self, deployment: &Arc<str>, model: &Arc<str>) {
        self.selected = Some(deployment.clone());
        self.served_model = Some(model.clone());
    }

    /// Record usage and price it.
    pub fn set_usage(&mut self, u: &Usage, pricing: Option<&Pricing>) {
        self.tokens = TokensLog::default();
        self.cost_usd = None;
        self.attempts.iter_mut().for_each(|a| a.usage = None);
        self.add_usage(u, pricing);
    }

    /// Add one more upstream call's usage and cost (a resumed stream pays
    /// for every call it made, the broken one included): the last attempt's.
    pub fn add_usage(&mut self, u: &Usage, pricing: Option<&Pricing>) {
        let last = self.attempts.len().saturating_sub(1);
        self.add_usage_of(last, u, pricing);
    }

    /// [`Self::add_usage`] for the call of attempt `i`.
    pub fn add_usage_of(&mut self, i: usize, u: &Usage, pricing: Option<&Pricing>) {
        self.tokens.input += u.input_tokens;
        self.tokens.output += u.output_tokens;
        self.tokens.cached += u.cached_input_tokens;
        let cost = pricing.map(|p| cost_usd(u, p));
        if let Some(c) = cost {
            *self.cost_usd.get_or_insert(0.0) += c;
        }
        if let Some(a) = self.attempts.get_mut(i) {
            let mine = a.usage.get_or_insert_with(AttemptUsage::default);
            mine.input_tokens += u.input_tokens;
            mine.output_tokens += u.output_tokens;
            mine.cost_usd += cost.unwrap_or(0.0);
        }
    }

    /// The request is over: its status, error and outcome, and how long
    /// it took.
    pub fn close(&mut self, status: u16, error: Option<&GatewayError>) {
        self.status = status;
        self.error = error.map(|e| e.code.as_str());
        self.outcome = match (self.error, status) {
            (Some(code), _) => code,
            (None, 499) => "client_closed",
            (None, _) => "ok",
        };
        self.duration_ms = ms(self.started.elapsed());
        if let Some(tail) = self.tail.take().filter(|t| t.keeps(self)) {
            // The log names the trace it is exported under.
            self.trace_id = Some(tail.trace.trace_id_hex());
            self.trace = Some(tail.trace);
        }
    }
}

/// Tail-aware sampling (contract §10, `observability.trace_slow`): a
/// request's trace that was not sampled in at the start is exported all the
/// same when the request ended in an error — its decision-log `outcome` is
/// not `ok` (a §4 code, the gateway's own refusals included, or
/// `client_closed`) or its stream broke mid-way, even if a continuation
/// finished it — or when it took longer than `trace_slow` (a stream: until
/// it ended). Decided once, as the record closes, from what it holds: a
/// fast, successful request sampled out pays for nothing but its ids.
#[derive(Debug, Clone, Copy)]
pub struct Tail {
    pub trace: TraceCtx,
    /// `observability.trace_slow` as the request began; `None`: errors only.
    pub slow: Option<Duration>,
}

impl Tail {
    /// Whether the closed record `r` is kept.
    fn keeps(&self, r: &Record) -> bool {
        r.outcome != "ok" || r.interrupted || self.slow.is_some_and(|s| r.took() > s)
    }
}

/// USD for the usage under the deployment's per-million-token prices.
/// USD for `u` at `p` (per million tokens). Input counts every prompt token
/// (MAPPING §10): cache reads at `cached_input`, cache writes at
/// `cache_write`, the rest at `input`; reasoning tokens are output tokens.
pub fn cost_usd(u: &Usage, p: &Pricing) -> f64 {
    let cached = u.cached_input_tokens.min(u.input_tokens);
    let written = u.cache_write_tokens.min(u.input_tokens - cached);
    let fresh = u.input_tokens - cached - written;
    let cached_price = p.cached_input.unwrap_or(p.input);
    let write_price = p.cache_write.unwrap_or(p.input);
    (fresh as f64 * p.input
        + cached as f64 * cached_price
        + written as f64 * write_price
        + u.output_tokens as f64 * p.output)
        / 1e6
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_rfc3339(*t))
}

/// RFC 3339 UTC with milliseconds. The seconds part is formatted once per
/// second per thread (it is on every decision-log line).
pub(super) fn format_rfc3339(t: SystemTime) -> String {
    thread_local! {
        static SECOND: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((u64::MAX, String::new())) };
    }
    let now = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs();
    let mut out = SECOND.with_borrow_mut(|(at, text)| {
        if *at != secs {
            *at = secs;
            *text = format_second(secs);
        }
        let mut out = String::with_capacity(24);
        out.push_str(text);
        out
    });
    let ms = now.subsec_millis();
    out.push('.');
    for d in [ms / 100, ms / 10 % 10, ms % 10] {
        out.push(char::from(b'0' + d as u8));
    }
    out.push('Z');
    out
}

/// `YYYY-MM-DDTHH:MM:SS` for Unix seconds (the calendar from the `time`
/// crate, as the usage store's timestamps are).
fn format_second(secs: u64) -> String {
    let fmt = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    i64::try_from(secs)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(&fmt).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_counts_each_kind_of_token_at_its_price() {
        let p = Pricing {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
            cache_write: Some(3.75),
        };
        // Anthropic's figures in the unified sense: input includes the cache
        // read (200k) and the cache write (100k); output includes reasoning.
        let u = Usage {
            input_tokens: 1_000_000,
            cached_input_tokens: 200_000,
            cache_write_tokens: 100_000,
            output_tokens: 50_000,
            reasoning_tokens: 20_000,
        };
        let want = 0.7 * 3.0 + 0.2 * 0.3 + 0.1 * 3.75 + 0.05 * 15.0;
        assert!(
            (cost_usd(&u, &p) - want).abs() < 1e-9,
            "{}",
            cost_usd(&u, &p)
        );
        // Without their own prices cache reads and writes cost what input does.
        let plain = Pricing {
            cached_input: None,
            cache_write: None,
            ..p
        };
        assert!((cost_usd(&u, &plain) - (1.0 * 3.0 + 0.05 * 15.0)).abs() < 1e-9);
    }

    #[test]
    fn cost_counts_cached_tokens_at_their_price() {
        let p = Pricing {
            input: 2.5,
            output: 10.0,
            cached_input: Some(1.25),
            cache_write: None,
        };
        let u = Usage {
            input_tokens: 1_000_000,
            cached_input_tokens: 400_000,
            output_tokens: 100_000,
            ..Usage::default()
        };
        assert!((cost_usd(&u, &p) - (0.6 * 2.5 + 0.4 * 1.25 + 0.1 * 10.0)).abs() < 1e-9);
    }

    #[test]
    fn the_tail_keeps_errors_broken_streams_and_slow_requests_only() {
        use crate::observe::trace::TraceCtx;
        let tail = |slow_ms: Option<u64>| Tail {
            trace: TraceCtx {
                trace_id: 7,
                span_id: 9,
                parent: None,
            },
            slow: slow_ms.map(Duration::from_millis),
        };
        let rec = |outcome: &'static str, interrupted: bool, ms: f64| {
            let mut r = Record::new("r".into(), None, Arc::from("v"));
            (r.outcome, r.interrupted, r.duration_ms) = (outcome, interrupted, ms);
            r
        };
        let (t, off) = (tail(Some(200)), tail(None));
        assert!(!t.keeps(&rec("ok", false, 150.0)), "fast and fine");
        assert!(!t.keeps(&rec("ok", false, 200.0)), "not slower than");
        assert!(t.keeps(&rec("ok", false, 200.5)), "slow");
        assert!(!off.keeps(&rec("ok", false, 60_000.0)), "no latency rule");
        for (outcome, interrupted) in [
            ("upstream_error", false),
            ("rate_limited", false),
            ("client_closed", false),
            ("ok", true),
        ] {
            let r = rec(outcome, interrupted, 1.0);
            assert!(t.keeps(&r) && off.keeps(&r), "{outcome} {interrupted}");
        }
        // Closing moves a kept trace where the sinks read it, and names it.
        let mut r = rec("ok", false, 0.0);
        r.tail = Some(tail(None));
        let e = GatewayError::upstream(crate::error::ErrorCode::UpstreamError, "x");
        r.close(502, Some(&e));
        assert_eq!(r.trace.map(|t| t.trace_id), Some(7));
        assert_eq!(
            r.trace_id.as_deref(),
            Some("00000000000000000000000000000007")
        );
        let mut r = rec("ok", false, 0.0);
        r.tail = Some(tail(Some(60_000)));
        r.close(200, None);
        assert!(r.trace.is_none() && r.trace_id.is_none() && r.tail.is_none());
    }

    #[test]
    fn timestamps_keep_milliseconds_across_calls() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_796_000_000_007);
        assert_eq!(format_rfc3339(t), "2026-11-30T00:53:20.007Z");
        let t = t + Duration::from_millis(993);
        assert_eq!(format_rfc3339(t), "2026-11-30T00:53:21.000Z");
        assert_eq!(
            format_rfc3339(t + Duration::from_millis(456)),
            "2026-11-30T00:53:21.456Z"
        );
    }

    #[test]
    fn dates() {
        assert_eq!(format_second(0), "1970-01-01T00:00:00");
        assert_eq!(
            format_second(20_786 * 86_400 + 3_723),
            "2026-11-29T01:02:03"
        );
    }
}
