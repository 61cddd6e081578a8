//! The Prometheus metrics a finished request leaves (contract §6): the
//! common case through per-thread cached handles, everything else through
//! the labelled families.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;

use super::Sink;
use crate::observe::metrics::{
    AttemptLabels, ClientLabels, ContractLabels, DeploymentLabels, Metrics, Name, ProbeLabels,
    ReasonLabels, RequestLabels, ResultLabels, RouteLabels, ScopeLabels, TaskLabels, TokenLabels,
};
use crate::observe::record::Record;

/// The gateway's metrics as a sink: in flight while a request lives, its
/// counters and histograms once it is done.
pub struct MetricsSink(pub Arc<Metrics>);

impl Sink for MetricsSink {
    fn started(&self) {
        self.0.inflight.inc();
    }

    fn finished(&self, r: &Record) {
        record(r, &self.0);
    }
}

/// Billed ÷ estimated input, for requests the upstream counted itself.
fn estimate_ratio(r: &Record) -> Option<f64> {
    let billed = r.tokens.input;
    let counted = r.outcome == "ok" && r.cache != "hit" && !r.usage_estimated && billed > 0;
    let est = std::num::NonZeroU64::new(r.input_estimate).filter(|_| counted)?;
    Some(billed as f64 / est.get() as f64)
}

/// The request's contribution to the Prometheus metrics, written once.
fn record(r: &Record, m: &Arc<Metrics>) {
    if let Some(p) = r.probe {
        // A probe is not a client request: counted apart, never started.
        let deployment = Name(r.selected.clone().unwrap_or_else(|| Arc::from("")));
        let labels = ProbeLabels {
            deployment,
            result: p.result,
        };
        m.probes.get_or_create(&labels).inc();
        return;
    }
    m.inflight.dec();
    if let (Some(task), Some(source)) = (&r.task, r.task_source) {
        let route = Name(r.route.clone().unwrap_or_else(|| Arc::from("")));
        let labels = TaskLabels {
            route,
            task: task.clone(),
            source,
        };
        m.tasks.get_or_create(&labels).inc();
    }
    if let Some(c) = &r.contract {
        let route = Name(r.route.clone().unwrap_or_else(|| Arc::from("")));
        for check in c.checks.iter().filter(|c| !c.valid) {
            let labels = ContractLabels {
                route: route.clone(),
                deployment: Name(check.deployment.clone()),
            };
            m.contract_violations.get_or_create(&labels).inc();
        }
    }
    if let result @ ("hit" | "miss") = r.cache {
        m.cache.get_or_create(&ResultLabels { result }).inc();
    }
    if record_hot(r, m) {
        return;
    }
    let none = || Name(Arc::from(""));
    let route = r.route.clone().map_or_else(none, Name);
    let deployment = r.selected.clone().map_or_else(none, Name);
    let stream = if r.stream { "true" } else { "false" };
    let status = match (r.error, r.status) {
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
        .observe(r.duration_ms / 1e3);
    for a in r.attempts.iter().filter(|a| a.sent) {
        let labels = AttemptLabels {
            deployment: Name(a.deployment.clone()),
            provider: Name(a.provider.clone()),
            code: a.outcome,
        };
        m.attempts.get_or_create(&labels).inc();
    }
    if let (Some("budget_exceeded"), Some(client)) = (r.error, &r.client) {
        m.budget_rejections
            .get_or_create(&ClientLabels {
                client: Name(client.clone()),
            })
            .inc();
    }
    if r.client_rejected {
        m.ratelimit_rejections
            .get_or_create(&ScopeLabels { scope: "client" })
            .inc();
    }
    if r.limit_rejections > 0 {
        m.ratelimit_rejections
            .get_or_create(&ScopeLabels {
                scope: "deployment",
            })
            .inc_by(u64::from(r.limit_rejections));
    }
    // A retry is an attempt sent to the same deployment as the one before.
    for pair in r.attempts.windows(2) {
        if pair[1].sent && pair[0].sent && pair[0].deployment == pair[1].deployment {
            m.retries
                .get_or_create(&DeploymentLabels {
                    deployment: Name(pair[1].deployment.clone()),
                })
                .inc();
        }
    }
    if let Some(reason) = r.fallback_reason {
        m.fallbacks.get_or_create(&ReasonLabels { reason }).inc();
    }
    if deployment.0.is_empty() {
        return;
    }
    let dep = DeploymentLabels {
        deployment: deployment.clone(),
    };
    if let Some(ttfb) = r.attempts.iter().rev().find_map(|a| a.ttfb_ms) {
        m.ttft.get_or_create(&dep).observe(ttfb / 1e3);
    }
    for (kind, n) in [
        ("input", r.tokens.input),
        ("output", r.tokens.output),
        ("cached_input", r.tokens.cached),
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
    if let Some(c) = r.cost_usd {
        m.cost_usd.get_or_create(&dep).inc_by(c);
    }
    if r.skipped_events > 0 {
        m.events_skipped
            .get_or_create(&dep)
            .inc_by(u64::from(r.skipped_events));
    }
    if r.interrupted {
        m.stream_interruptions.get_or_create(&dep).inc();
    }
    if let Some(x) = estimate_ratio(r) {
        m.token_estimate_ratio.get_or_create(&dep).observe(x);
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
    estimate_ratio: Histogram,
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
            estimate_ratio: m.token_estimate_ratio.get_or_create(&d).clone(),
        }
    }
}

/// A request served by its first attempt with nothing unusual: recorded
/// through the thread's cached handles. False when it needs the full path.
fn record_hot(r: &Record, m: &Arc<Metrics>) -> bool {
    let ([a], Some(route), Some(dep)) = (&r.attempts[..], &r.route, &r.selected) else {
        return false;
    };
    let plain = r.error.is_none()
        && r.status == 200
        && a.sent
        && a.outcome == "ok"
        && !r.client_rejected
        && r.limit_rejections == 0
        && r.fallback_reason.is_none()
        && r.skipped_events == 0
        && !r.interrupted
        && Arc::ptr_eq(&a.deployment, dep);
    if !plain {
        return false;
    }
    let key = (
        Arc::as_ptr(m) as usize,
        Arc::as_ptr(route).cast::<u8>() as usize,
        Arc::as_ptr(dep).cast::<u8>() as usize,
        Arc::as_ptr(&a.provider).cast::<u8>() as usize,
        r.stream,
    );
    let hot = HOT.with_borrow_mut(|cache| {
        if let Some(h) = cache.get(&key) {
            return h.clone();
        }
        if cache.len() >= HOT_MAX {
            cache.clear();
        }
        let h = Rc::new(Hot::new(m, route, dep, &a.provider, r.stream));
        cache.insert(key, h.clone());
        h
    });
    hot.requests.inc();
    hot.duration.observe(r.duration_ms / 1e3);
    if let Some(x) = estimate_ratio(r) {
        hot.estimate_ratio.observe(x);
    }
    hot.attempt.inc();
    if let Some(ttfb) = a.ttfb_ms {
        hot.ttft.observe(ttfb / 1e3);
    }
    let t = &r.tokens;
    for (counter, n) in hot.tokens.iter().zip([t.input, t.output, t.cached]) {
        if n > 0 {
            counter.inc_by(n);
        }
    }
    if let Some(c) = r.cost_usd {
        hot.cost.inc_by(c);
    }
    true
}
