//! REGISTRY: each deployment's and client's runtime state, kept across
//! config reloads — circuit (`circuit`), health and provider keys
//! (`health`), concurrency, queue and rpm/tpm (`limits`; a provider's
//! deployments together in its `pool`), the share of them used and the
//! routing weight that follows (`quota`), the retry budget
//! (`retry_budget`), what a served stream holds (`held`) — plus the
//! response cache handle and what is shared with the fleet
//! (`state::shared`). Every number lives behind `state::store::StateStore`;
//! routing reads it, reliability writes it. Budgets and issued keys are
//! governance's (`governance::Governance`, held by `live::Live`).

pub mod circuit;
pub mod health;
pub mod held;
pub mod limits;
pub mod pool;
pub mod probe_log;
pub mod quota;
pub mod retry_budget;

use crate::state::cache::ResponseCache;
use crate::state::fleet::SharedCircuit;
use crate::state::shared::{Alone, Shared};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::Serialize;
use tokio::time::Instant;

use crate::config::Config;
use crate::error::{ErrorCode, GatewayError};
use crate::state::store::StateStore;
use circuit::{Breaker, CircuitState, Outcome, Transition};
use health::{Health, KeyState, KeyTracker};
use limits::{
    DeploymentLimits, LimitRejection, Permit, QuotaHeaders, RateCounter, Reservation, Scope,
};
use pool::Pool;
use quota::{Clock, Dim, Quota, Standing};
use retry_budget::RetryBudget;

/// One deployment's reliability state.
pub struct DeploymentState {
    pub id: String,
    pub circuit: Breaker,
    pub health: Health,
    /// Its own limits (`models[].limits`) and the upstream's block.
    pub limits: DeploymentLimits,
    /// Its provider's pool (`providers.<p>.limits`), shared with the
    /// provider's other deployments; swapped when a reload moves it.
    pool: ArcSwap<Pool>,
    /// The share of its rpm/tpm used and its routing weight.
    pub quota: Quota,
    pub retry_budget: RetryBudget,
    pub keys: KeyTracker,
    /// The last probes of it and its provider's keys.
    pub probes: probe_log::ProbeLog,
    /// What this deployment's circuit and health are shared with.
    shared: Arc<dyn Shared>,
    /// Its rpm and tpm windows' names on the fleet's Redis (made once).
    pub shared_windows: Option<(Arc<str>, Arc<str>)>,
}

/// `/admin/state` `deployments[]` entry (contract §5).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeploymentAdmin {
    pub id: String,
    pub circuit: &'static str,
    pub health_score: f64,
    pub error_rate: f64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    pub inflight: i64,
    pub rpm_used: u64,
    pub tpm_used: u64,
    /// The share of its rpm and tpm used (contract §10): the largest of its
    /// own counts, its provider pool's and the upstream's headers.
    pub quota_used: QuotaUsed,
    /// Its routing weight from that share: 1 below `quota.shift`, 0 past
    /// `quota.stop`.
    pub quota_weight: f64,
    /// Seconds left of a rest the upstream asked for (429s, a spent
    /// per-day quota, remaining-quota headers at 0); null when none.
    pub resting_for_s: Option<f64>,
    pub keys: Vec<KeyState>,
    /// The last background probe (contract §10), when it has been probed.
    pub last_probe: Option<probe_log::LastProbe>,
}

/// `/admin/state` `quota_used`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QuotaUsed {
    pub rpm: f64,
    pub tpm: f64,
}

impl DeploymentState {
    fn new(
        store: &Arc<dyn StateStore>,
        id: &str,
        cfg: &Config,
        shared: Arc<dyn Shared>,
        pool: Arc<Pool>,
        clock: Clock,
    ) -> Self {
        let scope = format!("dep:{id}");
        let (provider, p) = provider_of(cfg, id);
        let keys = p.map_or(&[][..], |p| &p.keys[..]);
        let circuit = Breaker::new(
            store.clone(),
            &scope,
            p.map(|p| p.circuit).unwrap_or_default(),
        );
        circuit.set_probed(p.is_some_and(|p| p.probe.is_some()));
        DeploymentState {
            id: id.to_owned(),
            circuit,
            health: Health::new(store.clone(), &scope),
            limits: DeploymentLimits::new(store.clone(), &scope, own_limits(cfg, id)),
            pool: ArcSwap::new(pool),
            quota: Quota::new(
                clock,
                Instant::now(),
                p.map(|p| p.quota).unwrap_or_default(),
            ),
            retry_budget: RetryBudget::new(store.clone(), &scope),
            keys: KeyTracker::new(store.clone(), provider, keys),
            probes: probe_log::ProbeLog::default(),
            shared_windows: shared
                .counter(&format!("dep:{id}:rpm"))
                .zip(shared.counter(&format!("dep:{id}:tpm"))),
            shared,
        }
    }

    /// What this deployment's limits and circuit are shared with.
    pub fn shared(&self) -> &Arc<dyn Shared> {
        &self.shared
    }

    /// Tell the fleet about a transition made here.
    fn share(&self, t: Option<Transition>) -> Option<Transition> {
        if t.is_some() {
            self.shared.publish_circuit(&self.id, self.circuit.shared());
        }
        t
    }

    /// An operator's `open`, `close` or `reset` (shared with the fleet).
    pub fn force(&self, action: &str) -> Option<Transition> {
        let t = match action {
            "open" => self.circuit.force_open(),
            "close" => self.circuit.force_close(),
            "reset" => self.circuit.reset(),
            _ => return None,
        };
        self.share(Some(t))
    }

    fn update(&self, cfg: &Config, pool: Arc<Pool>) {
        let (provider, p) = provider_of(cfg, &self.id);
        self.limits.set_config(own_limits(cfg, &self.id));
        if !Arc::ptr_eq(&self.pool.load(), &pool) {
            self.pool.store(pool);
        }
        if let Some(p) = p {
            self.circuit.set_config(p.circuit);
            self.circuit.set_probed(p.probe.is_some());
            self.quota.set_settings(p.quota);
            // A key whose value changed is in use again.
            self.keys.set_keys(provider, &p.keys);
        }
    }

    /// Its provider's pool.
    pub fn pool(&self) -> arc_swap::Guard<Arc<Pool>> {
        self.pool.load()
    }

    /// Its rpm and tpm bounds: its own, or its pool's when tighter (or
    /// when it has none of its own).
    pub fn rate_bounds(&self) -> (Option<u32>, Option<u64>) {
        let own = self.limits.config();
        let pool = self.pool.load().limits.config();
        let tighter = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        (
            tighter(own.rpm.map(u64::from), pool.rpm.map(u64::from)).map(|r| r as u32),
            tighter(own.tpm, pool.tpm),
        )
    }

    // === Quota ===

    /// Its quota standing now: shares used, routing weight, held back.
    /// A few atomic loads (see `quota`).
    pub fn quota(&self, now: Instant) -> Standing {
        self.quota.standing(now, &self.pool.load().counts)
    }

    /// An answer's headers: the upstream's block when a budget is at 0,
    /// and the share of its quota used.
    pub fn observe_headers(&self, now: Instant, h: &http::HeaderMap) {
        let q = QuotaHeaders::read(h, std::time::SystemTime::now);
        if q == QuotaHeaders::default() {
            return;
        }
        self.limits.observe_headers(now, &q);
        self.quota
            .observe_headers(now, &self.pool.load().counts, &q);
    }

    /// What a window said when it counted a request: `(rpm, tpm)` used,
    /// of this deployment's own window (`own`) and of its pool's, for the
    /// quota. Only dimensions with a limit tell anything.
    pub fn observe_counts(&self, now: Instant, own: Option<(u64, u64)>, pool: Option<(u64, u64)>) {
        let cfg = self.limits.config();
        let own = own.filter(|_| cfg.rpm.is_some() || cfg.tpm.is_some());
        if own.is_none() && pool.is_none() {
            // Nothing bounded was counted: nothing to tell (and nothing to
            // write on this admission).
            return;
        }
        let p = self.pool.load();
        self.quota.settle(now, &p.counts);
        let clock = *self.quota.clock();
        if let Some((r, t)) = own {
            self.quota
                .own
                .observe(&clock, now, Dim::Rpm, r, cfg.rpm.map(u64::from));
            self.quota.own.observe(&clock, now, Dim::Tpm, t, cfg.tpm);
        }
        if let Some((r, t)) = pool {
            let cfg = p.limits.config();
            p.counts
                .observe(&clock, now, Dim::Rpm, r, cfg.rpm.map(u64::from));
            p.counts.observe(&clock, now, Dim::Tpm, t, cfg.tpm);
        }
    }

    /// A window refused: that dimension is spent (for the quota).
    fn observe_refusal(&self, now: Instant, r: &LimitRejection) {
        let full = |limit: Option<u64>| limit.unwrap_or(1);
        let (own, pool) = (self.limits.config(), self.pool.load().limits.config());
        let (cfg, into_pool) = match r.scope {
            Scope::Provider => (pool, true),
            _ => (own, false),
        };
        let used = match r.reason {
            "rpm" => (full(cfg.rpm.map(u64::from)), 0),
            "tpm" => (0, full(cfg.tpm)),
            _ => return,
        };
        if into_pool {
            self.observe_counts(now, None, Some(used));
        } else {
            self.observe_counts(now, Some(used), None);
        }
    }

    // === Admission: its own limits, then its provider's pool ===

    /// rpm, tpm and the upstream's block, then the pool's rpm and tpm, in
    /// one step; no waiting. A refusal by either counts nothing.
    pub fn check_rate(&self, now: Instant, estimate: u64) -> Result<Reservation, LimitRejection> {
        let own = self.limits.check_rate(now, estimate);
        self.and_pool(now, estimate, own, None)
    }

    /// [`Self::check_rate`] after `limits.wait_out_block` (the block is
    /// looked at again only when it waited).
    pub fn check_rate_after(
        &self,
        waited: bool,
        now: Instant,
        estimate: u64,
    ) -> Result<Reservation, LimitRejection> {
        let own = self.limits.check_rate_after(waited, now, estimate);
        self.and_pool(now, estimate, own, None)
    }

    /// rpm/tpm against a share of the configured limits (this instance's,
    /// of a fleet's, while Redis is away): `share` maps a limit to it.
    pub fn check_rate_shared(
        &self,
        now: Instant,
        estimate: u64,
        share: &dyn Fn(u64) -> u64,
    ) -> Result<Reservation, LimitRejection> {
        let cfg = self.limits.config();
        let rpm = cfg.rpm.map(|r| share(u64::from(r)) as u32);
        let tpm = cfg.tpm.map(share);
        let own = self.limits.check_rate_with(now, estimate, rpm, tpm);
        self.and_pool(now, estimate, own, Some(share))
    }

    /// The pool's rpm/tpm after the deployment's own admitted `own`.
    fn and_pool(
        &self,
        now: Instant,
        estimate: u64,
        own: Result<Reservation, LimitRejection>,
        share: Option<&dyn Fn(u64) -> u64>,
    ) -> Result<Reservation, LimitRejection> {
        let own = own.inspect_err(|r| self.observe_refusal(now, r))?;
        let pool = self.pool.load();
        let counted = (own.requests_used, own.tokens_used);
        if !pool.bounds_rate() {
            self.observe_counts(now, Some(counted), None);
            return Ok(own);
        }
        let cfg = pool.limits.config();
        let (rpm, tpm) = match share {
            Some(f) => (cfg.rpm.map(|r| f(u64::from(r)) as u32), cfg.tpm.map(f)),
            None => (cfg.rpm, cfg.tpm),
        };
        match pool.limits.check_rate_with(now, estimate, rpm, tpm) {
            Ok(p) => {
                let in_pool = (p.requests_used, p.tokens_used);
                self.observe_counts(now, Some(counted), Some(in_pool));
                Ok(own.and(p))
            }
            Err(r) => {
                own.cancel();
                self.observe_refusal(now, &r);
                Err(r)
            }
        }
    }

    /// A concurrency slot of its own, then one of its pool's (each at once
    /// if free, else a FIFO wait of at most its `queue_timeout`).
    pub async fn acquire(&self) -> Result<Permit, LimitRejection> {
        let own = self.limits.acquire().await?;
        let pool = self.pool.load_full();
        if !pool.bounds_concurrency() {
            return Ok(own);
        }
        let pooled = pool.limits.acquire().await?;
        Ok(own.and(pooled))
    }

    /// Feeds one finished attempt to the breaker and the health stats.
    /// A 429 lowers health (steer away) but does not count against the
    /// circuit; client errors count against neither.
    pub fn observe(
        &self,
        now: Instant,
        result: Result<(), &GatewayError>,
        latency: Duration,
        probe: bool,
    ) -> Option<Transition> {
        let failure = result.is_err_and(circuit::counts_as_failure);
        let limited = result.is_err_and(|e| e.code == ErrorCode::RateLimited);
        self.health.record(now, !(failure || limited), latency);
        let outcome = Outcome {
            ok: !failure,
            latency,
            probe,
        };
        self.share(self.circuit.record(now, outcome))
    }

    /// The health as routing sees it: in a fleet, every instance's view
    /// of the deployment merged.
    pub fn health(&self, now: Instant) -> crate::registry::health::HealthSnapshot {
        self.health_in(now, self.circuit.state())
    }

    /// [`Self::health`] as a route weighs it: an open circuit whose
    /// cooldown is over counts as half-open, not as 0 — its probe is due, and
    /// a deployment scored 0 would never be offered the request that
    /// closes it.
    pub fn routing_health(&self, now: Instant) -> crate::registry::health::HealthSnapshot {
        let state = match self.circuit.state() {
            CircuitState::Open if self.circuit.is_admissible(now) => CircuitState::HalfOpen,
            s => s,
        };
        self.health_in(now, state)
    }

    fn health_in(
        &self,
        now: Instant,
        state: CircuitState,
    ) -> crate::registry::health::HealthSnapshot {
        let mut h = self.health.snapshot(now, state);
        h.health_score = self.shared.merged_health(&self.id, h.health_score);
        h
    }

    pub fn admin(&self, now: Instant) -> DeploymentAdmin {
        let circuit = self.circuit.state();
        let h = self.health(now);
        let (rpm_used, tpm_used) = self.limits.used(now);
        let q = self.quota(now);
        let round = |x: f64| (x * 1e4).round() / 1e4;
        DeploymentAdmin {
            id: self.id.clone(),
            circuit: circuit.as_str(),
            health_score: h.health_score,
            error_rate: h.error_rate,
            latency_p50_ms: h.latency_p50_ms,
            latency_p95_ms: h.latency_p95_ms,
            inflight: h.inflight,
            rpm_used,
            tpm_used,
            quota_used: QuotaUsed {
                rpm: round(q.used[0]),
                tpm: round(q.used[1]),
            },
            quota_weight: round(q.weight),
            resting_for_s: self.limits.blocked_for(now).map(|d| d.as_secs_f64()),
            keys: self
                .keys
                .states()
                .into_iter()
                .map(|mut k| {
                    k.last_probe = self.probes.last_key(&k.label);
                    k
                })
                .collect(),
            last_probe: self.probes.last(),
        }
    }
}

/// A deployment's own limits (`models[].limits`).
fn own_limits(cfg: &Config, id: &str) -> crate::config::Limits {
    cfg.deployments
        .get(id)
        .map(|d| d.limits)
        .unwrap_or_default()
}

fn provider_of<'a>(cfg: &'a Config, id: &str) -> (&'a str, Option<&'a crate::config::Provider>) {
    let name = cfg.deployments.get(id).map_or("", |d| d.provider.as_str());
    (name, cfg.providers.get(name))
}

/// A client's rpm/tpm (contract §2 `clients[].rpm|tpm`).
pub struct ClientLimits {
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub counter: RateCounter,
    /// Its rpm and tpm windows' names on the fleet's Redis (made once).
    pub shared_windows: Option<(Arc<str>, Arc<str>)>,
}

/// Per-deployment and per-client state, published as `ArcSwap` maps: a
/// request does one lock-free load and a hash lookup.
pub struct Registry {
    store: Arc<dyn StateStore>,
    deployments: ArcSwap<HashMap<String, Arc<DeploymentState>>>,
    /// Each provider's pool, by provider name.
    pools: ArcSwap<HashMap<String, Arc<Pool>>>,
    clients: ArcSwap<HashMap<String, Arc<ClientLimits>>>,
    /// The clock every quota reading is timed on.
    clock: Clock,
    /// Serialises reconciles (reloads), never requests.
    reconciling: Mutex<()>,
    /// The response cache and the settings it was built with: kept across
    /// reloads that leave `cache` alone, built anew when they change it.
    cache: Mutex<Option<(crate::config::Cache, Arc<dyn ResponseCache>)>>,
    /// What is shared with the rest of the fleet (nothing, alone).
    pub shared: Arc<dyn Shared>,
}

impl Registry {
    pub fn new(store: Arc<dyn StateStore>) -> Self {
        Self::with_shared(store, Arc::new(Alone))
    }

    pub fn with_shared(store: Arc<dyn StateStore>, shared: Arc<dyn Shared>) -> Self {
        Registry {
            shared,
            store,
            deployments: ArcSwap::from_pointee(HashMap::new()),
            pools: ArcSwap::from_pointee(HashMap::new()),
            clients: ArcSwap::from_pointee(HashMap::new()),
            clock: Clock::new(Instant::now()),
            reconciling: Mutex::new(()),
            cache: Mutex::new(None),
        }
    }

    /// The response cache `cfg` asks for (`None` when it is off). Called per
    /// config, never per request: the `Live` snapshot keeps the handle.
    pub fn response_cache(&self, cfg: &crate::config::Cache) -> Option<Arc<dyn ResponseCache>> {
        let mut held = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((was, cache)) = held.as_ref() {
            if was == cfg {
                return Some(cache.clone());
            }
        }
        let Some(cache) = self.shared.response_cache(cfg) else {
            *held = None;
            return None;
        };
        *held = Some((*cfg, cache.clone()));
        Some(cache)
    }

    pub fn store(&self) -> &Arc<dyn StateStore> {
        &self.store
    }

    /// Adds new deployments, drops removed ones, keeps the state of the rest
    /// (with their new limits and circuit settings). Counts of a removed
    /// deployment stay in the store: re-adding it resumes them.
    pub fn reconcile(&self, cfg: &Config) {
        let _one_at_a_time = self.reconciling.lock().unwrap_or_else(|p| p.into_inner());
        // Pools first: a provider's keeps its counts and slots, with its
        // new limits.
        let old_pools = self.pools.load();
        let mut pools = HashMap::with_capacity(cfg.providers.len());
        for (name, p) in &cfg.providers {
            let pool = match old_pools.get(name) {
                Some(pool) => {
                    pool.limits.set_config(p.limits);
                    pool.clone()
                }
                None => Arc::new(Pool::new(self.store.clone(), &*self.shared, name, p.limits)),
            };
            pools.insert(name.clone(), pool);
        }
        let pool_of = |id: &str| {
            let (name, _) = provider_of(cfg, id);
            pools.get(name).cloned().unwrap_or_else(|| {
                Arc::new(Pool::new(
                    self.store.clone(),
                    &*self.shared,
                    name,
                    Default::default(),
                ))
            })
        };
        let old = self.deployments.load();
        let mut next = HashMap::with_capacity(cfg.deployments.len());
        for id in cfg.deployments.keys() {
            let dep = match old.get(id) {
                Some(d) => {
                    d.update(cfg, pool_of(id));
                    d.clone()
                }
                None => Arc::new(DeploymentState::new(
                    &self.store,
                    id,
                    cfg,
                    self.shared.clone(),
                    pool_of(id),
                    self.clock,
                )),
            };
            next.insert(id.clone(), dep);
        }
        self.deployments.store(Arc::new(next));
        self.pools.store(Arc::new(pools));

        // A client's counts live in the store under its id, so a fresh
        // counter object after a reload picks them up where they were.
        let clients = cfg
            .clients
            .iter()
            .flatten()
            .map(|c| (c.id.clone(), Arc::new(self.client_limits(c))));
        self.clients.store(Arc::new(clients.collect()));
    }

    fn client_limits(&self, c: &crate::config::Client) -> ClientLimits {
        let name = format!("client:{}", c.id);
        ClientLimits {
            rpm: c.rpm,
            tpm: c.tpm,
            counter: RateCounter::new(self.store.clone(), Scope::Client, &name),
            shared_windows: self
                .shared
                .counter(&format!("{name}:rpm"))
                .zip(self.shared.counter(&format!("{name}:tpm"))),
        }
    }

    /// A canary config beside the one in force: state for what only it
    /// names (deployments, clients' limits), while what both name keeps the
    /// settings in force until the canary is promoted ([`Self::reconcile`]).
    pub fn add_missing(&self, cfg: &Config) {
        let _one_at_a_time = self.reconciling.lock().unwrap_or_else(|p| p.into_inner());
        // Pools of providers only the canary names; the others keep theirs.
        let mut pools = (**self.pools.load()).clone();
        for (name, p) in &cfg.providers {
            pools.entry(name.clone()).or_insert_with(|| {
                Arc::new(Pool::new(self.store.clone(), &*self.shared, name, p.limits))
            });
        }
        let old = self.deployments.load();
        let mut next = (**old).clone();
        for id in cfg.deployments.keys().filter(|id| !old.contains_key(*id)) {
            let (provider, _) = provider_of(cfg, id);
            let pool = pools.get(provider).cloned().unwrap_or_else(|| {
                Arc::new(Pool::new(
                    self.store.clone(),
                    &*self.shared,
                    provider,
                    Default::default(),
                ))
            });
            let state =
                DeploymentState::new(&self.store, id, cfg, self.shared.clone(), pool, self.clock);
            next.insert(id.clone(), Arc::new(state));
        }
        self.pools.store(Arc::new(pools));
        self.deployments.store(Arc::new(next));
        let clients = self.clients.load();
        let mut next = (**clients).clone();
        for c in cfg.clients.iter().flatten() {
            next.entry(c.id.clone())
                .or_insert_with(|| Arc::new(self.client_limits(c)));
        }
        self.clients.store(Arc::new(next));
    }

    pub fn get(&self, id: &str) -> Option<Arc<DeploymentState>> {
        self.deployments.load().get(id).cloned()
    }

    pub fn client(&self, id: &str) -> Option<Arc<ClientLimits>> {
        self.clients.load().get(id).cloned()
    }

    /// This instance's own health score per deployment (for the fleet).
    pub fn local_health(&self) -> HashMap<String, f64> {
        let now = Instant::now();
        self.deployments
            .load()
            .values()
            .map(|d| {
                (
                    d.id.clone(),
                    d.health.snapshot(now, d.circuit.state()).health_score,
                )
            })
            .collect()
    }

    /// `/admin/state` `deployments`, sorted by id.
    pub fn admin_state(&self) -> Vec<DeploymentAdmin> {
        let now = Instant::now();
        let mut list: Vec<_> = self
            .deployments
            .load()
            .values()
            .map(|d| d.admin(now))
            .collect();
        list.sort_by(|a, b| a.id.cmp(&b.id));
        list
    }
}

impl Registry {
    /// Another instance's circuit transition, on this one's breaker.
    pub fn apply_shared_circuit(&self, deployment: &str, c: SharedCircuit, age_ms: u64) {
        if let Some(d) = self.get(deployment) {
            d.circuit.apply_shared(c, age_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Source;
    use crate::registry::circuit::{Admit, CircuitState};
    use crate::state::memory::MemoryStore;

    #[test]
    fn a_reload_keeps_the_cache_unless_its_settings_change() {
        use crate::config::{Cache, CacheBackend, CacheWhen};
        let reg = Registry::new(Arc::new(MemoryStore::new()));
        let cfg = Cache {
            backend: CacheBackend::Memory,
            ttl: Duration::from_secs(60),
            max_entries: 10,
            max_bytes: 1 << 20,
            when: CacheWhen::Always,
        };
        let first = reg.response_cache(&cfg).expect("memory cache");
        assert!(Arc::ptr_eq(&first, &reg.response_cache(&cfg).unwrap()));
        let longer = Cache {
            ttl: Duration::from_secs(120),
            ..cfg
        };
        let second = reg.response_cache(&longer).unwrap();
        assert!(!Arc::ptr_eq(&first, &second));
        let off = Cache {
            backend: CacheBackend::Off,
            ..cfg
        };
        assert!(reg.response_cache(&off).is_none());
        // Back on after off: a fresh, empty cache.
        assert!(!Arc::ptr_eq(&second, &reg.response_cache(&longer).unwrap()));
    }

    fn config(extra_model: &str, rpm: u32) -> Config {
        let src = format!(
            "providers:\n  p:\n    protocol: openai\n    base_url: http://127.0.0.1:1/v1\n    \
             keys: [{{ env: K1 }}, {{ env: K2 }}]\n    limits: {{ rpm: {rpm} }}\n    \
             circuit: {{ consecutive_failures: 2 }}\nmodels:\n  - {{ provider: p, model: a }}\n{extra_model}\
             clients:\n  - {{ id: bot, key_sha256: \"{}\", rpm: 1 }}\n",
            "ab".repeat(32)
        );
        // Only the keys' variables: `SWITCHYARD_LISTEN` & co. would move the listeners.
        let env = |name: &str| matches!(name, "K1" | "K2").then(|| "sk".to_owned());
        crate::config::load_str(&src, "t.yaml", &env).unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn reconcile_keeps_state_across_a_reload() {
        let reg = Registry::new(Arc::new(MemoryStore::new()));
        let first = config("  - { provider: p, model: b }\n", 100);
        reg.reconcile(&first);
        let a = reg.get("p/a").unwrap();
        let err = GatewayError::new(ErrorCode::UpstreamError, Source::Upstream, "boom");
        let now = Instant::now();
        let _inflight = a.health.start();
        assert_eq!(
            a.observe(now, Err(&err), Duration::from_millis(5), false),
            None
        );
        let t = a
            .observe(now, Err(&err), Duration::from_millis(5), false)
            .unwrap();
        assert_eq!(t.to, CircuitState::Open);
        a.check_rate(now, 10).ok().unwrap().settle(10);
        let k1 = &first.providers["p"].keys[0];
        assert_eq!(k1.label, "env:K1");
        a.keys
            .set_aside(k1, crate::registry::health::SetAside::Rejected);

        // Reload: `p/b` gone, `p/c` new, rpm lowered; `p/a` keeps everything.
        reg.reconcile(&config("  - { provider: p, model: c }\n", 1));
        assert!(reg.get("p/b").is_none());
        assert!(reg.get("p/c").is_some());
        let again = reg.get("p/a").unwrap();
        assert!(Arc::ptr_eq(&a, &again));
        assert!(matches!(again.circuit.admit(now), Admit::Rejected { .. }));
        let r = again.check_rate(now, 0).err().unwrap();
        assert_eq!(
            (r.scope, r.reason),
            (Scope::Provider, "rpm"),
            "the pool's new limit applies to the kept count"
        );

        let state = reg.admin_state();
        let ids: Vec<_> = state.iter().map(|d| d.id.as_str()).collect();
        assert_eq!(ids, ["p/a", "p/c"]);
        let json = serde_json::to_value(&state[0]).unwrap();
        assert_eq!(json["circuit"], "open");
        assert_eq!(json["error_rate"], 1.0);
        assert_eq!(json["inflight"], 1);
        assert_eq!(json["rpm_used"], 1);
        assert_eq!(json["tpm_used"], 10);
        assert_eq!(json["keys"][0]["status"], "quarantined");
        assert_eq!(json["keys"][1]["status"], "active");
        for field in ["health_score", "latency_p50_ms", "latency_p95_ms"] {
            assert!(json.get(field).is_some(), "{field}");
        }
    }

    /// `providers.p.limits` bound p's deployments together (one pool, kept
    /// across a reload); `models[].limits` bound one. A refusal by either
    /// counts nothing anywhere, and a spent pool is every deployment's
    /// quota.
    #[tokio::test(start_paused = true)]
    async fn a_providers_limits_pool_its_deployments_and_a_models_bound_it_alone() {
        let reg = Registry::new(Arc::new(MemoryStore::new()));
        let cfg = config("  - { provider: p, model: b, limits: { rpm: 1 } }\n", 3);
        reg.reconcile(&cfg);
        let (a, b) = (reg.get("p/a").unwrap(), reg.get("p/b").unwrap());
        assert!(
            Arc::ptr_eq(&a.pool(), &b.pool()),
            "one pool for the provider"
        );
        assert_eq!(b.rate_bounds(), (Some(1), None));
        assert_eq!(a.rate_bounds(), (Some(3), None));
        let now = Instant::now();
        let ok = |d: &DeploymentState| d.check_rate(now, 0).map(|r| r.settle(0)).err();
        assert_eq!(ok(&b), None);
        let own = ok(&b).unwrap();
        assert_eq!((own.scope, own.reason), (Scope::Deployment, "rpm"));
        assert_eq!(ok(&a), None);
        assert_eq!(ok(&a), None);
        // Three between them: the pool is spent, for both.
        let pooled = ok(&a).unwrap();
        assert_eq!((pooled.scope, pooled.reason), (Scope::Provider, "rpm"));
        let e = pooled.to_error();
        assert_eq!(e.code, ErrorCode::GatewayRateLimited);
        assert!(e.message.contains("provider"), "{}", e.message);
        assert_eq!(pooled.rejections_scope(), "deployment");
        assert_eq!(
            a.limits.used(now).0,
            2,
            "the refused request was given back"
        );
        assert_eq!(b.limits.used(now).0, 1);
        for d in [&a, &b] {
            let q = d.quota(now);
            assert!(q.stopped && q.used[0] == 1.0, "{}: {q:?}", d.id);
        }
        // A reload that raises the pool keeps its count: one more fits.
        reg.reconcile(&config(
            "  - { provider: p, model: b, limits: { rpm: 1 } }\n",
            4,
        ));
        assert!(Arc::ptr_eq(&reg.get("p/a").unwrap().pool(), &a.pool()));
        assert_eq!(ok(&a), None);
        assert!(ok(&a).is_some());
        let state = reg.admin_state();
        let json = serde_json::to_value(&state[0]).unwrap();
        assert_eq!(
            json["quota_used"],
            serde_json::json!({"rpm": 1.0, "tpm": 0.0})
        );
        assert_eq!(json["quota_weight"], 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_429_and_client_errors_do_not_open_the_circuit() {
        let reg = Registry::new(Arc::new(MemoryStore::new()));
        reg.reconcile(&config("", 100));
        let a = reg.get("p/a").unwrap();
        let now = Instant::now();
        for code in [
            ErrorCode::RateLimited,
            ErrorCode::InvalidRequest,
            ErrorCode::ContentFiltered,
        ] {
            let e = GatewayError::new(code, Source::Upstream, "x");
            for _ in 0..5 {
                assert_eq!(a.observe(now, Err(&e), Duration::ZERO, false), None);
            }
        }
        assert_eq!(a.circuit.state(), CircuitState::Closed);
        let s = a.health.snapshot(now, CircuitState::Closed);
        assert!(
            (s.error_rate - 5.0 / 15.0).abs() < 1e-9,
            "only the 429s steer routing away"
        );

        let bot = reg.client("bot").unwrap();
        let r = bot.counter.check(now, bot.rpm, bot.tpm, 0);
        assert!(r.is_ok());
        assert!(bot.counter.check(now, bot.rpm, bot.tpm, 0).is_err());
    }
}
