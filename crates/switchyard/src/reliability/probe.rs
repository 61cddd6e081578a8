//! Background probes (contract §10): what carries no traffic is checked
//! before a request needs it. For every provider with a `probe:` block:
//!
//! - a deployment no request has tried for `every` (an idle fallback, a
//!   target nobody asked for lately) is probed every `every`, jittered
//!   ±10% so that a fleet's and a provider's probes do not line up;
//! - an open circuit whose cooldown is over is tried by a probe, never by a
//!   client's request (`Breaker::claim_probe`; the request path treats a
//!   probed provider's open circuit as closed to it until then), and a
//!   probe that succeeds closes it;
//! - a parked key (`weight: 0`, a spare for when the others are set aside)
//!   is probed every `every`; one the upstream refuses is set aside, where
//!   `key_check` brings it back once the upstream takes it again.
//!
//! `kind: auth` lists models (costs nothing); `kind: completion` asks for
//! one token (a deployment its own model; a spare key the probe's `model`,
//! else the provider's cheapest deployment). A probe's outcome feeds the
//! deployment's health and circuit exactly as a request's attempt would, so
//! failures lower the health score and can open the circuit. Probes never
//! take more than `max_share` of a deployment's rpm (a floor on the time
//! between two), count against its rpm, and each becomes a record for the
//! sinks with client `_probe`: the usage store (with its cost), the
//! decision log, `switchyard_probes_total{deployment,result}`.
//!
//! In a fleet one instance probes a deployment at a time (`Shared::claim`
//! on the fleet's Redis); the circuit transition it causes reaches every
//! instance as any transition does, and its last probe is a shared note
//! every instance shows in `/admin/state`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::adapters::deployment::DeploymentRt;
use crate::adapters::{key_check, Answer, CallInfo};
use crate::config::{Probe, ProbeKind, ProviderKey};
use crate::doors::Door;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::live::{Live, SharedLive};
use crate::observe::record::{cost_usd, ProbeTag, Record};
use crate::observe::sink::Sinks;
use crate::registry::circuit::CircuitState;
use crate::registry::health::SetAside;
use crate::registry::limits::Reservation;
use crate::registry::probe_log::LastProbe;
use switchyard_protocol::ir::Usage;

/// How often the prober looks for what is due: a fraction of the
/// shortest `every` (1 s), so a probe is late by at most this.
const TICK: Duration = Duration::from_millis(250);
/// The longest a probe may take.
const PROBE_TIMEOUT: Duration = key_check::CHECK_TIMEOUT;
/// The client every probe's record names.
pub const CLIENT: &str = "_probe";

/// The background task, until `stop`.
pub fn spawn(
    live: SharedLive,
    sinks: Sinks,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut schedule = Schedule::default();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => round(&live.load_full(), &sinks, &mut schedule).await,
            }
        }
    })
}

/// What one probe is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    /// No request tried the deployment for `every`.
    Idle,
    /// Its circuit is open and its cooldown over: this probe is the
    /// half-open trial (claimed).
    Circuit,
    /// A parked key of the provider.
    SpareKey,
}

impl Why {
    fn as_str(self) -> &'static str {
        match self {
            Why::Idle => "idle",
            Why::Circuit => "circuit",
            Why::SpareKey => "spare_key",
        }
    }
}

/// When each deployment and key is probed next, and was last.
#[derive(Debug, Default)]
pub struct Schedule {
    next: HashMap<String, Instant>,
    last: HashMap<String, Instant>,
}

impl Schedule {
    /// Whether `id` is due at `now` for a probe every `every`; its next is
    /// then set, jittered ±10%. A name seen for the first time is spread
    /// over its first period, so that a start-up does not probe all at once.
    fn due(&mut self, id: &str, now: Instant, every: Duration) -> bool {
        let mut rng = rand::rng();
        let next = self
            .next
            .entry(id.to_owned())
            .or_insert_with(|| now + every.mul_f64(rng.random_range(0.0..1.0)));
        if *next > now {
            return false;
        }
        *next = now + every.mul_f64(rng.random_range(0.9..1.1));
        true
    }

    /// `max_share`: the floor between two probes of a deployment with an
    /// rpm, so probes stay under that share of it.
    fn spaced(&self, id: &str, now: Instant, gap: Duration) -> bool {
        self.last.get(id).is_none_or(|t| now >= *t + gap)
    }

    fn sent(&mut self, id: &str, now: Instant) {
        self.last.insert(id.to_owned(), now);
    }
}

/// The least time between two probes of a deployment allowed `rpm` so
/// that probes take at most `max_share` of it.
pub fn min_gap(rpm: Option<u32>, max_share: f64) -> Duration {
    match rpm {
        Some(rpm) if rpm > 0 => Duration::from_secs_f64(60.0 / (max_share * f64::from(rpm))),
        _ => Duration::ZERO,
    }
}

/// One probe to send.
struct Job {
    dep: Arc<DeploymentRt>,
    why: Why,
    kind: ProbeKind,
    /// The key to send; `None` for a provider that takes none.
    key: Option<ProviderKey>,
    /// Every deployment of the provider, for a key's result.
    siblings: Vec<Arc<DeploymentRt>>,
    /// Its request in the deployment's rpm window.
    reservation: Option<Reservation>,
}

/// Probe everything due, all at once.
async fn round(live: &Live, sinks: &Sinks, schedule: &mut Schedule) {
    let now = Instant::now();
    let mut jobs = Vec::new();
    let mut by_provider: HashMap<&str, Vec<Arc<DeploymentRt>>> = HashMap::new();
    for d in live.deployments.values() {
        if d.provider.cfg.probe.is_some() {
            by_provider
                .entry(&d.provider.name)
                .or_default()
                .push(d.clone());
        }
    }
    for deps in by_provider.values() {
        for d in deps {
            if let Some(job) = deployment_job(d, now, schedule).await {
                jobs.push(job);
            }
        }
        jobs.extend(spare_key_jobs(deps, now, schedule).await);
    }
    let runs = jobs.into_iter().map(|j| run(j, live, sinks));
    futures_util::future::join_all(runs).await;
    let notes = by_provider.values().flatten().map(|d| read_note(d));
    futures_util::future::join_all(notes).await;
}

/// Another instance's probe of `dep`, as the last probe here too.
async fn read_note(dep: &DeploymentRt) {
    let shared = dep.state.shared();
    if !shared.is_up() {
        return;
    }
    let note = shared.note(&format!("probe:last:{}", dep.name)).await;
    if let Some(p) = note.and_then(|n| serde_json::from_str::<LastProbe>(&n).ok()) {
        dep.state.probes.set(p);
    }
}

/// The deployment's probe when it is due.
async fn deployment_job(dep: &Arc<DeploymentRt>, now: Instant, s: &mut Schedule) -> Option<Job> {
    let cfg = dep.provider.cfg.probe.as_ref()?;
    let st = &dep.state;
    let why = if st.circuit.state() != CircuitState::Closed {
        // Tried as soon as its cooldown allows (`claim_probe` says).
        Why::Circuit
    } else if st.health.idle_for(now).is_none_or(|i| i >= cfg.every)
        && s.due(&dep.name, now, cfg.every)
    {
        Why::Idle
    } else {
        return None;
    };
    let gap = min_gap(st.rate_bounds().0, cfg.max_share);
    if !s.spaced(&dep.name, now, gap) {
        return None;
    }
    if why == Why::Circuit && !st.circuit.is_probe_due(now) {
        return None;
    }
    // One instance of a fleet probes it this period.
    let claim_for = cfg.every.mul_f64(0.9).max(gap);
    if !st
        .shared()
        .claim(&format!("probe:{}", dep.name), claim_for)
        .await
    {
        return None;
    }
    // It counts against the deployment's rpm (and its provider pool's) like
    // a request: a full window has no room for a probe.
    let reservation = st.check_rate(now, 1).ok()?;
    if why == Why::Circuit && !st.circuit.claim_probe(now) {
        reservation.cancel();
        return None;
    }
    s.sent(&dep.name, now);
    Some(Job {
        key: first_usable_key(dep),
        dep: dep.clone(),
        why,
        kind: cfg.kind,
        siblings: Vec::new(),
        reservation: Some(reservation),
    })
}

/// Probes of the provider's parked keys that are due.
async fn spare_key_jobs(deps: &[Arc<DeploymentRt>], now: Instant, s: &mut Schedule) -> Vec<Job> {
    let Some(first) = deps.first() else {
        return Vec::new();
    };
    let Some(cfg) = first.provider.cfg.probe.as_ref() else {
        return Vec::new();
    };
    let via = probe_target(deps, cfg);
    let mut jobs = Vec::new();
    for key in &first.provider.cfg.keys {
        let id = format!("key:{}:{}", first.provider.name, key.label);
        // Set-aside keys are `key_check`'s; keys with a weight carry traffic.
        if key.weight > 0
            || !first
                .state
                .keys
                .usable_keys(std::slice::from_ref(key), |k| k.label.as_str())
                .any(|_| true)
        {
            continue;
        }
        if !s.due(&id, now, cfg.every)
            || !first
                .state
                .shared()
                .claim(&format!("probe:{id}"), cfg.every.mul_f64(0.9))
                .await
        {
            continue;
        }
        let Ok(reservation) = via.state.check_rate(now, 1) else {
            continue;
        };
        s.sent(&id, now);
        jobs.push(Job {
            dep: via.clone(),
            why: Why::SpareKey,
            kind: cfg.kind,
            key: Some(key.clone()),
            siblings: deps.to_vec(),
            reservation: Some(reservation),
        });
    }
    jobs
}

/// The deployment a key is checked through: the probe's `model`, else the
/// cheapest by input price (unpriced last), else the first.
fn probe_target(deps: &[Arc<DeploymentRt>], cfg: &Probe) -> Arc<DeploymentRt> {
    if let Some(m) = &cfg.model {
        if let Some(d) = deps.iter().find(|d| d.cfg.model == *m) {
            return d.clone();
        }
    }
    let price = |d: &Arc<DeploymentRt>| d.cfg.pricing.map_or(f64::MAX, |p| p.input + p.output);
    deps.iter()
        .min_by(|a, b| {
            price(a)
                .total_cmp(&price(b))
                .then_with(|| a.name.cmp(&b.name))
        })
        .cloned()
        .unwrap_or_else(|| deps[0].clone())
}

/// The key a request would use now, preferring weighted ones.
fn first_usable_key(dep: &DeploymentRt) -> Option<ProviderKey> {
    let keys = &dep.provider.cfg.keys;
    let usable: Vec<&ProviderKey> = dep
        .state
        .keys
        .usable_keys(keys, |k| k.label.as_str())
        .collect();
    usable
        .iter()
        .find(|k| k.weight > 0)
        .or(usable.first())
        .map(|k| (*k).clone())
}

/// Send one probe and act on its outcome.
async fn run(mut job: Job, live: &Live, sinks: &Sinks) {
    let dep = job.dep.clone();
    let sent_at = SystemTime::now();
    let started = Instant::now();
    let (result, usage) = match job.kind {
        ProbeKind::Auth => (
            key_check::list_models(&dep.provider, job.key.as_ref()).await,
            None,
        ),
        ProbeKind::Completion => match one_token(&dep, job.key.as_ref()).await {
            Ok(u) => (Ok(()), Some(u)),
            Err(e) => (Err(e), None),
        },
    };
    if let Some(r) = job.reservation.take() {
        r.settle_used(usage.map_or(0, |u| u.input_tokens + u.output_tokens));
    }
    let latency = started.elapsed();
    let label = result_label(result.as_ref().err());
    let now = Instant::now();
    // Fed like an attempt: health always, the circuit for upstream faults;
    // the half-open trial settles here.
    let transition = (job.why != Why::SpareKey)
        .then(|| {
            let res = result.as_ref().map(|_| ());
            dep.state
                .observe(now, res, latency, job.why == Why::Circuit)
        })
        .flatten();
    if let (Err(e), Some(key)) = (&result, &job.key) {
        if e.code == ErrorCode::AuthFailed && e.source == Source::Upstream {
            dep.state.keys.set_aside(key, SetAside::Rejected);
            tracing::warn!(provider = %dep.provider.name, key = %key.label, "probe: the upstream refused the key; set aside");
        }
    }
    let last = LastProbe {
        at_ms: sent_at
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        kind: job.kind.as_str().to_owned(),
        result: label.to_owned(),
        reason: job.why.as_str().to_owned(),
        latency_ms: latency.as_millis() as u64,
        error: result
            .as_ref()
            .err()
            .map(|e| format!("{}: {}", e.code.as_str(), e.message)),
        instance: instance(dep.state.shared().as_ref()),
    };
    note(&job, last);
    let mut rec = record(&job, live, sent_at, result.as_ref().err(), label, usage);
    rec.duration_ms = latency.as_secs_f64() * 1e3;
    if let Some(t) = transition {
        let (from, to) = (t.from.as_str(), t.to.as_str());
        tracing::warn!(deployment = %dep.name, from, to, reason = t.reason, "probe: circuit");
        rec.transitions
            .push(format!("{}: {from} -> {to} ({})", dep.name, t.reason));
    }
    sinks.finished(&rec);
}

/// Where the probe's outcome is shown: the deployment's (or, for a key,
/// every sibling's) last probe, and the fleet's shared note.
fn note(job: &Job, last: LastProbe) {
    let dep = &job.dep;
    match (&job.key, job.why) {
        (Some(key), Why::SpareKey) => {
            for d in &job.siblings {
                d.state.probes.set_key(&key.label, last.clone());
            }
        }
        _ => {
            if let Ok(json) = serde_json::to_string(&last) {
                let ttl = dep
                    .provider
                    .cfg
                    .probe
                    .as_ref()
                    .map_or(Duration::from_secs(60), |p| p.every * 3);
                dep.state
                    .shared()
                    .put_note(&format!("probe:last:{}", dep.name), json, ttl);
            }
            dep.state.probes.set(last);
        }
    }
}

/// This instance's name in a fleet (none alone).
fn instance(shared: &dyn crate::state::shared::Shared) -> Option<String> {
    let d = shared.describe()?;
    d.get("instance")?.as_str().map(str::to_owned)
}

/// `switchyard_probes_total{result}`.
fn result_label(e: Option<&GatewayError>) -> &'static str {
    match e {
        None => "ok",
        Some(e) if e.code == ErrorCode::AuthFailed && e.source == Source::Upstream => {
            "key_rejected"
        }
        Some(e) if e.code == ErrorCode::RateLimited => "rate_limited",
        Some(e) if crate::registry::circuit::counts_as_failure(e) => "failed",
        Some(_) => "error",
    }
}

/// A one-token completion: the OpenAI-door request every provider's
/// adapter can translate.
async fn one_token(dep: &DeploymentRt, key: Option<&ProviderKey>) -> Result<Usage, GatewayError> {
    let body = serde_json::json!({
        "model": &*dep.model,
        "messages": [{"role": "user", "content": "ping"}],
        "max_tokens": 1,
    })
    .to_string();
    let inbound = Door::OpenAiChat.decode(&body)?;
    let call = CallInfo {
        traceparent: None,
        deadline: Some(Instant::now() + PROBE_TIMEOUT),
        anthropic_beta: None,
        capture: false,
    };
    match crate::adapters::chat(dep, key, &inbound, &call).await? {
        Answer::Json(j) => Ok(j.usage),
        Answer::Stream(_) => Err(GatewayError::upstream(
            ErrorCode::UpstreamError,
            "a stream answered a request that asked for none",
        )),
    }
}

/// The probe as a finished request's record (client `_probe`).
fn record(
    job: &Job,
    live: &Live,
    sent_at: SystemTime,
    err: Option<&GatewayError>,
    result: &'static str,
    usage: Option<Usage>,
) -> Record {
    let dep = &job.dep;
    let id = format!("probe-{:016x}", rand::rng().random::<u64>());
    let mut r = Record::new(id, None, live.version.clone());
    r.ts = sent_at;
    r.client = Some(Arc::from(CLIENT));
    r.selected = Some(dep.name.clone());
    r.served_model = Some(dep.model.clone());
    r.model = Some(dep.model.to_string());
    r.decision_reason = Some("probe");
    if let Some(u) = usage {
        r.tokens.input = u.input_tokens;
        r.tokens.output = u.output_tokens;
        r.tokens.cached = u.cached_input_tokens;
        r.cost_usd = dep.cfg.pricing.map(|p| cost_usd(&u, &p));
    }
    r.probe = Some(ProbeTag {
        kind: job.kind.as_str(),
        reason: job.why.as_str(),
        result,
    });
    let status = match err {
        None => 200,
        Some(e) => e
            .upstream_status
            .unwrap_or_else(|| e.code.status().as_u16()),
    };
    r.close(status, err);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_keep_within_their_share_of_an_rpm() {
        // 2% of 60 rpm: one probe every 50 s at most.
        assert_eq!(min_gap(Some(60), 0.02), Duration::from_secs(50));
        assert_eq!(min_gap(Some(6000), 0.02), Duration::from_millis(500));
        assert_eq!(min_gap(None, 0.02), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_schedule_spreads_its_start_and_jitters_each_period() {
        let mut s = Schedule::default();
        let t0 = Instant::now();
        let every = Duration::from_secs(10);
        let mut at = Vec::new();
        let mut t = t0;
        while t < t0 + Duration::from_secs(60) {
            if s.due("a", t, every) {
                at.push((t - t0).as_millis() as u64);
            }
            t += Duration::from_millis(100);
        }
        // First within the first period, then 9–11 s apart.
        assert!(at[0] < 10_000, "{at:?}");
        for w in at.windows(2) {
            let gap = w[1] - w[0];
            assert!((9_000..=11_100).contains(&gap), "{at:?}");
        }
        assert!((5..=7).contains(&at.len()), "{at:?}");
    }
}
