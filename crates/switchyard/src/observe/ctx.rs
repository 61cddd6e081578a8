//! `RequestCtx` rides along a request from the door to the last stream byte
//! and writes its decision-log line exactly once: on `finish`, or on drop when
//! the client went away first.

use std::time::{Duration, SystemTime};

use serde::Serialize;
use switchyard_protocol::ir::Usage;
use tokio::time::Instant;

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use super::decision_log::DecisionSink;
use super::metrics::{
    AttemptLabels, DeploymentLabels, Metrics, Name, ReasonLabels, RequestLabels, RouteLabels,
    ScopeLabels, TokenLabels,
};
use crate::config::Pricing;
use crate::error::GatewayError;

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

#[derive(Debug, Default, Serialize)]
pub struct TokensLog {
    pub input: u64,
    pub output: u64,
    pub cached: u64,
}

/// The decision-log line (contract §6).
#[derive(Debug, Serialize)]
pub struct RequestCtx {
    /// When the request arrived (RFC 3339, formatted only when logged).
    #[serde(serialize_with = "rfc3339")]
    pub ts: SystemTime,
    pub request_id: String,
    pub trace_id: Option<String>,
    pub client: Option<String>,
    pub route: Option<Arc<str>>,
    /// The request's task (header or task rule), when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    pub model: Option<String>,
    pub config_version: Arc<str>,
    pub input_hash: Option<String>,
    pub candidates: Vec<CandidateLog>,
    pub skipped: Vec<(Arc<str>, &'static str)>,
    pub selected: Option<Arc<str>>,
    pub decision_reason: Option<&'static str>,
    pub attempts: Vec<AttemptLog>,
    pub stream: bool,
    pub tokens: TokensLog,
    pub cost_usd: Option<f64>,
    pub cache: &'static str,
    pub fallback_reason: Option<&'static str>,
    /// Tools the request offered that the serving deployment cannot see.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dropped_tools: Vec<String>,
    pub status: u16,
    pub error: Option<&'static str>,
    pub skipped_events: u32,
    /// Retries made on the same deployment.
    pub retries: u32,
    /// Circuit transitions this request caused.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transitions: Vec<String>,
    #[serde(skip)]
    pub limit_rejections: u32,
    /// Refused by the client's own rpm/tpm.
    #[serde(skip)]
    pub client_rejected: bool,
    pub duration_ms: f64,
    #[serde(skip)]
    started: Instant,
    #[serde(skip)]
    sink: DecisionSink,
    #[serde(skip)]
    emitted: bool,
    #[serde(skip)]
    metrics: Option<Arc<Metrics>>,
    /// The stream broke after its first byte reached the client.
    #[serde(skip)]
    pub interrupted: bool,
}

impl RequestCtx {
    pub fn new(
        request_id: String,
        trace_id: Option<String>,
        config_version: Arc<str>,
        sink: DecisionSink,
        metrics: Option<Arc<Metrics>>,
    ) -> Self {
        if let Some(m) = &metrics {
            m.inflight.inc();
        }
        RequestCtx {
            ts: SystemTime::now(),
            request_id,
            trace_id,
            client: None,
            route: None,
            task: None,
            model: None,
            config_version,
            input_hash: None,
            candidates: Vec::new(),
            skipped: Vec::new(),
            selected: None,
            decision_reason: None,
            attempts: Vec::new(),
            stream: false,
            tokens: TokensLog::default(),
            cost_usd: None,
            cache: "off",
            fallback_reason: None,
            dropped_tools: Vec::new(),
            status: 0,
            error: None,
            skipped_events: 0,
            retries: 0,
            transitions: Vec::new(),
            limit_rejections: 0,
            client_rejected: false,
            duration_ms: 0.0,
            started: Instant::now(),
            sink,
            emitted: false,
            metrics,
            interrupted: false,
        }
    }

    pub fn wants_input_hash(&self) -> bool {
        self.sink.is_on()
    }

    /// Record usage and price it.
    pub fn set_usage(&mut self, u: &Usage, pricing: Option<&Pricing>) {
        self.tokens = TokensLog {
            input: u.input_tokens,
            output: u.output_tokens,
            cached: u.cached_input_tokens,
        };
        self.cost_usd = pricing.map(|p| cost_usd(u, p));
    }

    pub fn finish(&mut self, status: u16, error: Option<&GatewayError>) {
        if self.emitted {
            return;
        }
        self.emitted = true;
        self.status = status;
        self.error = error.map(|e| e.code.as_str());
        self.duration_ms = ms(self.started.elapsed());
        if let Some(m) = self.metrics.take() {
            self.record(&m);
        }
        if self.sink.is_on() {
            let this = &*self;
            this.sink.write_with(|buf| {
                this.write_line(buf);
                Ok::<(), std::convert::Infallible>(())
            });
        }
    }
}

impl RequestCtx {
    /// The request's contribution to the Prometheus metrics, written once.
    fn record(&self, m: &Arc<Metrics>) {
        m.inflight.dec();
        if self.record_hot(m) {
            return;
        }
        let none = || Name(Arc::from(""));
        let route = self.route.clone().map_or_else(none, Name);
        let deployment = self.selected.clone().map_or_else(none, Name);
        let stream = if self.stream { "true" } else { "false" };
        let status = match (self.error, self.status) {
            (Some(code), _) => code,
            (None, 200) => "200",
            (None, 499) => "499",
            (None, _) => "other",
        };
        m.requests
            .get_or_create(&RequestLabels {
                route: route.clone(),
                deployment: deployment.clone(),
                status,
                stream,
            })
            .inc();
        m.duration
            .get_or_create(&RouteLabels { route, stream })
            .observe(self.duration_ms / 1e3);
        for a in self.attempts.iter().filter(|a| a.sent) {
            let labels = AttemptLabels {
                deployment: Name(a.deployment.clone()),
                provider: Name(a.provider.clone()),
                code: a.outcome,
            };
            m.attempts.get_or_create(&labels).inc();
        }
        if self.client_rejected {
            m.ratelimit_rejections
                .get_or_create(&ScopeLabels { scope: "client" })
                .inc();
        }
        if self.limit_rejections > 0 {
            m.ratelimit_rejections
                .get_or_create(&ScopeLabels {
                    scope: "deployment",
                })
                .inc_by(u64::from(self.limit_rejections));
        }
        // A retry is an attempt sent to the same deployment as the one before.
        for pair in self.attempts.windows(2) {
            if pair[1].sent && pair[0].sent && pair[0].deployment == pair[1].deployment {
                m.retries
                    .get_or_create(&DeploymentLabels {
                        deployment: Name(pair[1].deployment.clone()),
                    })
                    .inc();
            }
        }
        if let Some(reason) = self.fallback_reason {
            m.fallbacks.get_or_create(&ReasonLabels { reason }).inc();
        }
        if deployment.0.is_empty() {
            return;
        }
        let dep = DeploymentLabels {
            deployment: deployment.clone(),
        };
        if let Some(ttfb) = self.attempts.iter().rev().find_map(|a| a.ttfb_ms) {
            m.ttft.get_or_create(&dep).observe(ttfb / 1e3);
        }
        for (kind, n) in [
            ("input", self.tokens.input),
            ("output", self.tokens.output),
            ("cached_input", self.tokens.cached),
        ] {
            if n > 0 {
                m.tokens
                    .get_or_create(&TokenLabels {
                        deployment: deployment.clone(),
                        kind,
                    })
                    .inc_by(n);
            }
        }
        if let Some(c) = self.cost_usd {
            m.cost_usd.get_or_create(&dep).inc_by(c);
        }
        if self.skipped_events > 0 {
            m.events_skipped
                .get_or_create(&dep)
                .inc_by(u64::from(self.skipped_events));
        }
        if self.interrupted {
            m.stream_interruptions.get_or_create(&dep).inc();
        }
    }
}

/// One plain success's metric handles (requests, duration, the attempt,
/// ttft, tokens, cost) for a (gateway, route, deployment, provider, stream),
/// cached per thread: the common case records without hashing label sets or
/// taking the families' locks. The entry holds the `Arc`s its key is made of,
/// so their addresses cannot be reused for other names while it lives.
struct Hot {
    _pins: (Arc<Metrics>, Arc<str>, Arc<str>, Arc<str>),
    requests: Counter,
    duration: Histogram,
    attempt: Counter,
    ttft: Histogram,
    tokens: [Counter; 3],
    cost: Counter<f64, AtomicU64>,
}

type HotKey = (usize, usize, usize, usize, bool);

thread_local! {
    static HOT: RefCell<HashMap<HotKey, Rc<Hot>, foldhash::fast::FixedState>> =
        RefCell::new(HashMap::default());
}

/// Entries per thread before the cache starts over (reloads leave old ones).
const HOT_MAX: usize = 512;

impl Hot {
    fn new(
        m: &Arc<Metrics>,
        route: &Arc<str>,
        dep: &Arc<str>,
        provider: &Arc<str>,
        stream: bool,
    ) -> Hot {
        let stream = if stream { "true" } else { "false" };
        let d = DeploymentLabels {
            deployment: Name(dep.clone()),
        };
        let token = |kind| {
            m.tokens
                .get_or_create(&TokenLabels {
                    deployment: Name(dep.clone()),
                    kind,
                })
                .clone()
        };
        Hot {
            _pins: (m.clone(), route.clone(), dep.clone(), provider.clone()),
            requests: m
                .requests
                .get_or_create(&RequestLabels {
                    route: Name(route.clone()),
                    deployment: Name(dep.clone()),
                    status: "200",
                    stream,
                })
                .clone(),
            duration: m
                .duration
                .get_or_create(&RouteLabels {
                    route: Name(route.clone()),
                    stream,
                })
                .clone(),
            attempt: m
                .attempts
                .get_or_create(&AttemptLabels {
                    deployment: Name(dep.clone()),
                    provider: Name(provider.clone()),
                    code: "ok",
                })
                .clone(),
            ttft: m.ttft.get_or_create(&d).clone(),
            tokens: [token("input"), token("output"), token("cached_input")],
            cost: m.cost_usd.get_or_create(&d).clone(),
        }
    }
}

impl RequestCtx {
    /// A request served by its first attempt with nothing unusual: recorded
    /// through the thread's cached handles. False when it needs the full path.
    fn record_hot(&self, m: &Arc<Metrics>) -> bool {
        let ([a], Some(route), Some(dep)) = (&self.attempts[..], &self.route, &self.selected)
        else {
            return false;
        };
        let plain = self.error.is_none()
            && self.status == 200
            && a.sent
            && a.outcome == "ok"
            && !self.client_rejected
            && self.limit_rejections == 0
            && self.fallback_reason.is_none()
            && self.skipped_events == 0
            && !self.interrupted
            && Arc::ptr_eq(&a.deployment, dep);
        if !plain {
            return false;
        }
        let key = (
            Arc::as_ptr(m) as usize,
            Arc::as_ptr(route).cast::<u8>() as usize,
            Arc::as_ptr(dep).cast::<u8>() as usize,
            Arc::as_ptr(&a.provider).cast::<u8>() as usize,
            self.stream,
        );
        let hot = HOT.with_borrow_mut(|cache| {
            if let Some(h) = cache.get(&key) {
                return h.clone();
            }
            if cache.len() >= HOT_MAX {
                cache.clear();
            }
            let h = Rc::new(Hot::new(m, route, dep, &a.provider, self.stream));
            cache.insert(key, h.clone());
            h
        });
        hot.requests.inc();
        hot.duration.observe(self.duration_ms / 1e3);
        hot.attempt.inc();
        if let Some(ttfb) = a.ttfb_ms {
            hot.ttft.observe(ttfb / 1e3);
        }
        let t = &self.tokens;
        for (counter, n) in hot.tokens.iter().zip([t.input, t.output, t.cached]) {
            if n > 0 {
                counter.inc_by(n);
            }
        }
        if let Some(c) = self.cost_usd {
            hot.cost.inc_by(c);
        }
        true
    }
}

impl Drop for RequestCtx {
    fn drop(&mut self) {
        // The client hung up before we finished: nginx's 499.
        self.finish(499, None);
    }
}

/// The decision log's `input_hash`: sha256 of the request body, in hex
/// (`encode_to_slice`: `hex::encode` builds the string a char at a time).
pub fn input_hash(body: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut out = [0u8; 64];
    let _ = hex::encode_to_slice(Sha256::digest(body), &mut out);
    // Hex digits are ASCII: always valid UTF-8.
    std::str::from_utf8(&out).unwrap_or_default().to_owned()
}

/// USD for the usage under the deployment's per-million-token prices.
pub fn cost_usd(u: &Usage, p: &Pricing) -> f64 {
    let cached = u.cached_input_tokens.min(u.input_tokens);
    let fresh = u.input_tokens - cached;
    let cached_price = p.cached_input.unwrap_or(p.input);
    (fresh as f64 * p.input + cached as f64 * cached_price + u.output_tokens as f64 * p.output)
        / 1e6
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_rfc3339(*t))
}

/// RFC 3339 UTC with milliseconds, without pulling in a date crate. The
/// seconds part is formatted once per second per thread (it is on every
/// decision-log line).
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

/// `YYYY-MM-DDTHH:MM:SS` for Unix seconds.
fn format_second(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Howard Hinnant's days→civil algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_counts_cached_tokens_at_their_price() {
        let p = Pricing {
            input: 2.5,
            output: 10.0,
            cached_input: Some(1.25),
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
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
    }
}
