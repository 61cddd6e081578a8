//! What an instance shares with the rest of its fleet, behind one interface
//! chosen at start-up: [`Alone`] (`state.backend: memory`: nothing is
//! shared, every answer is this instance's own) or the Redis-backed
//! [`Fleet`] (`state.backend: redis`, contract §7). The layers above call it
//! the same way whichever it is: sticky sessions, circuit transitions and
//! health, virtual keys, the fleet's budget counters, the response cache and
//! stored responses, a canary run's terms, counts and rollback, and what
//! `/admin/state` and `/metrics` say of it.
//!
//! Admission too: a request's shared windows are charged through
//! [`Shared::admit`]; alone there are none ([`Shared::counter`] names no
//! shared counter), so every request is decided on the instance's own
//! counters.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::cache::{MemoryCache, ResponseCache};
use super::fleet::{Fleet, FleetSink, Report, SharedCircuit, SharedKey, Unavailable};
use super::fleet_canary::{CanaryCounts, CanaryFleet, CanaryTerms};
use super::redis::{Adjust, Admission, Window};
use super::responses::ResponseStore;

/// The fleet's virtual keys, as [`Shared::all_keys`] finds them.
pub enum FleetKeys {
    /// Nothing is shared: the usage store's keys are all there are.
    NotShared,
    /// The fleet cannot be read now: keep the keys held.
    Unavailable,
    /// The live keys the fleet shares, and the ids revoked anywhere.
    Shared(Vec<SharedKey>, Vec<String>),
}

/// The fleet's budget counters read (micro-USD, in the order asked) and
/// what the other instances hold on them per client (USD).
pub type BudgetCounters = (Vec<Option<i64>>, HashMap<String, f64>);

/// What this instance says of itself in each heartbeat, made fresh each time.
pub type Reporter = Arc<dyn Fn() -> Report + Send + Sync>;

pub trait Shared: Send + Sync {
    /// The shared counts answer (`false` alone, or while Redis is away).
    fn is_up(&self) -> bool;

    /// Charge `windows` (named by [`Shared::counter`]) on the shared
    /// counts: all or none (see [`Fleet::admit`]). `key_id`: a virtual key
    /// issued at run time, refused if revoked.
    fn admit<'a>(
        &'a self,
        windows: &'a [Window<'a>],
        key_id: Option<&'a str>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Admission, Unavailable>>;

    /// A correction to a shared window, after the answer.
    fn adjust(&self, a: Adjust);

    /// This instance's share of a shared limit while the shared counts
    /// cannot be reached (the whole limit alone).
    fn local_share(&self, limit: u64) -> u64;

    /// The fleet's name for a shared counter (`None`: counted here only).
    fn counter(&self, name: &str) -> Option<Arc<str>>;

    /// A circuit transition made here, for every other instance.
    fn publish_circuit(&self, deployment: &str, c: SharedCircuit);

    /// This instance's health score for `deployment` merged with the
    /// others' (a mean of the live instances').
    fn merged_health(&self, deployment: &str, local: f64) -> f64;

    /// Which deployment served a sticky session on another instance.
    fn recall_session<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<String>>;

    /// Bind a sticky session for every instance (waited for: the next turn
    /// may reach any of them).
    fn remember_session<'a>(
        &'a self,
        key: &'a str,
        deployment: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, ()>;

    /// Take `key` for one piece of work until `ttl` (a probe): `true` for
    /// exactly one instance of a fleet; always alone, or with Redis away.
    fn claim<'a>(&'a self, key: &'a str, ttl: Duration) -> BoxFuture<'a, bool>;

    /// A small note every instance may read (the last probe of a
    /// deployment), written in the background; gone after `ttl`.
    fn put_note(&self, key: &str, value: String, ttl: Duration);

    /// A note [`Shared::put_note`] wrote (`None` alone).
    fn note<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<String>>;

    /// A key issued on another instance a moment ago.
    fn find_key<'a>(&'a self, sha256: &'a str) -> BoxFuture<'a, Option<SharedKey>>;

    fn share_key_issued<'a>(&'a self, k: &'a SharedKey) -> BoxFuture<'a, Result<(), String>>;

    fn share_key_revoked<'a>(
        &'a self,
        client: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<(), String>>;

    fn all_keys(&self) -> BoxFuture<'_, FleetKeys>;

    /// The fleet's budget counters (micro-USD) named by `keys` (`None`:
    /// nothing shared, or Redis away — this instance's figures are all
    /// there is), and what the other instances hold on them per client.
    fn budget_counters(&self, keys: Vec<String>) -> BoxFuture<'_, Option<BudgetCounters>>;

    /// The response cache for `cfg` (`memory` or, shared, `redis`).
    fn response_cache(&self, cfg: &crate::config::Cache) -> Option<Arc<dyn ResponseCache>>;

    /// Stored Responses-API answers: `own` alone, shared in a fleet.
    fn responses(&self, own: Arc<dyn ResponseStore>, ttl: Duration) -> Arc<dyn ResponseStore>;

    /// `/admin/state`'s fleet fields (`None` alone).
    fn describe(&self) -> Option<serde_json::Value>;

    /// `switchyard_state_backend_errors_total{op}`.
    fn errors(&self) -> Vec<(&'static str, u64)>;

    /// The terms of the canary run `run` (`state::fleet_canary`):
    /// `proposed` when this instance is the first of its fleet to start it
    /// (and always alone, or with Redis away), else those the first
    /// recorded.
    fn canary_terms<'a>(
        &'a self,
        run: &'a str,
        proposed: CanaryTerms,
    ) -> BoxFuture<'a, CanaryTerms>;

    /// A judge tick of `run`: this instance's counts since its last tick
    /// (old version, new version) added to the fleet's, and the fleet's
    /// view back (`None` alone, or with Redis away: the run is judged on
    /// this instance's own counts).
    fn canary_tick<'a>(
        &'a self,
        run: &'a str,
        terms: CanaryTerms,
        added: [CanaryCounts; 2],
    ) -> BoxFuture<'a, Option<CanaryFleet>>;

    /// `run` rolled back here, for every instance of the fleet (each rolls
    /// it back at its next tick).
    fn canary_rolled_back<'a>(
        &'a self,
        run: &'a str,
        terms: CanaryTerms,
        why: &'a str,
    ) -> BoxFuture<'a, ()>;

    /// The background work sharing takes (heartbeats, events, renewals).
    fn run(
        &self,
        report: Reporter,
        sink: Arc<dyn FleetSink>,
        stop: CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>>;
}

/// One instance on its own (`state.backend: memory`).
pub struct Alone;

impl Shared for Alone {
    fn is_up(&self) -> bool {
        false
    }

    /// Never asked: alone, no window is shared.
    fn admit<'a>(
        &'a self,
        windows: &'a [Window<'a>],
        _: Option<&'a str>,
        _: u64,
    ) -> BoxFuture<'a, Result<Admission, Unavailable>> {
        Box::pin(async move { Ok(Admission::Admitted(vec![0; windows.len()])) })
    }

    fn adjust(&self, _: Adjust) {}

    fn local_share(&self, limit: u64) -> u64 {
        limit
    }

    fn counter(&self, _: &str) -> Option<Arc<str>> {
        None
    }

    fn publish_circuit(&self, _: &str, _: SharedCircuit) {}

    fn merged_health(&self, _: &str, local: f64) -> f64 {
        local
    }

    fn recall_session<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }

    fn remember_session<'a>(&'a self, _: &'a str, _: &'a str, _: Duration) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn claim<'a>(&'a self, _: &'a str, _: Duration) -> BoxFuture<'a, bool> {
        Box::pin(async { true })
    }

    fn put_note(&self, _: &str, _: String, _: Duration) {}

    fn note<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }

    fn find_key<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Option<SharedKey>> {
        Box::pin(async { None })
    }

    fn share_key_issued<'a>(&'a self, _: &'a SharedKey) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    fn share_key_revoked<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    fn all_keys(&self) -> BoxFuture<'_, FleetKeys> {
        Box::pin(async { FleetKeys::NotShared })
    }

    fn budget_counters(&self, _: Vec<String>) -> BoxFuture<'_, Option<BudgetCounters>> {
        Box::pin(async { None })
    }

    fn response_cache(&self, cfg: &crate::config::Cache) -> Option<Arc<dyn ResponseCache>> {
        // `check` refuses a Redis cache without a Redis state.
        (cfg.backend == crate::config::CacheBackend::Memory).then(|| {
            Arc::new(MemoryCache::new(cfg.ttl, cfg.max_entries, cfg.max_bytes))
                as Arc<dyn ResponseCache>
        })
    }

    fn responses(&self, own: Arc<dyn ResponseStore>, _: Duration) -> Arc<dyn ResponseStore> {
        own
    }

    fn describe(&self) -> Option<serde_json::Value> {
        None
    }

    fn errors(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    fn canary_terms<'a>(&'a self, _: &'a str, proposed: CanaryTerms) -> BoxFuture<'a, CanaryTerms> {
        Box::pin(async move { proposed })
    }

    fn canary_tick<'a>(
        &'a self,
        _: &'a str,
        _: CanaryTerms,
        _: [CanaryCounts; 2],
    ) -> BoxFuture<'a, Option<CanaryFleet>> {
        Box::pin(async { None })
    }

    fn canary_rolled_back<'a>(
        &'a self,
        _: &'a str,
        _: CanaryTerms,
        _: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    fn run(
        &self,
        _: Reporter,
        _: Arc<dyn FleetSink>,
        _: CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        Vec::new()
    }
}

/// The fleet shares through Redis: each call is [`Fleet`]'s own.
pub struct OnRedis(pub Arc<Fleet>);

impl Shared for OnRedis {
    fn is_up(&self) -> bool {
        self.0.is_up()
    }

    fn admit<'a>(
        &'a self,
        windows: &'a [Window<'a>],
        key_id: Option<&'a str>,
        now_ms: u64,
    ) -> BoxFuture<'a, Result<Admission, Unavailable>> {
        Box::pin(self.0.admit(windows, key_id, now_ms))
    }

    fn adjust(&self, a: Adjust) {
        self.0.adjust(a);
    }

    fn local_share(&self, limit: u64) -> u64 {
        self.0.local_share(limit)
    }

    fn counter(&self, name: &str) -> Option<Arc<str>> {
        Some(self.0.key(name).into())
    }

    fn publish_circuit(&self, deployment: &str, c: SharedCircuit) {
        self.0.publish(deployment, c);
    }

    fn merged_health(&self, deployment: &str, local: f64) -> f64 {
        self.0.merged_health(deployment, local)
    }

    fn recall_session<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.0.get(self.0.key(key)))
    }

    fn remember_session<'a>(
        &'a self,
        key: &'a str,
        deployment: &'a str,
        ttl: Duration,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.0.set(self.0.key(key), deployment.to_owned(), ttl))
    }

    fn claim<'a>(&'a self, key: &'a str, ttl: Duration) -> BoxFuture<'a, bool> {
        Box::pin(self.0.claim(self.0.key(key), ttl))
    }

    fn put_note(&self, key: &str, value: String, ttl: Duration) {
        self.0.set_later(self.0.key(key), value, ttl);
    }

    fn note<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(self.0.get(self.0.key(key)))
    }

    fn find_key<'a>(&'a self, sha256: &'a str) -> BoxFuture<'a, Option<SharedKey>> {
        Box::pin(self.0.find_key(sha256))
    }

    fn share_key_issued<'a>(&'a self, k: &'a SharedKey) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(self.0.share_key_issued(k))
    }

    fn share_key_revoked<'a>(
        &'a self,
        client: &'a str,
        id: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(self.0.share_key_revoked(client, id))
    }

    fn all_keys(&self) -> BoxFuture<'_, FleetKeys> {
        Box::pin(async {
            match self.0.all_keys().await {
                Some((live, revoked)) => FleetKeys::Shared(live, revoked),
                None => FleetKeys::Unavailable,
            }
        })
    }

    fn budget_counters(&self, keys: Vec<String>) -> BoxFuture<'_, Option<BudgetCounters>> {
        Box::pin(async move {
            if !self.0.is_up() || keys.is_empty() {
                return None;
            }
            let counters: Vec<Option<i64>> = self
                .0
                .read(|r| async move {
                    let mut c = r.conn();
                    ::redis::cmd("MGET").arg(&keys).query_async(&mut c).await
                })
                .await?;
            Some((counters, self.0.peers_budget_held()))
        })
    }

    fn response_cache(&self, cfg: &crate::config::Cache) -> Option<Arc<dyn ResponseCache>> {
        if cfg.backend != crate::config::CacheBackend::Redis {
            return Alone.response_cache(cfg);
        }
        Some(Arc::new(super::redis_cache::RedisCache::new(
            self.0.clone(),
            cfg.ttl,
            cfg.max_entries,
        )))
    }

    fn responses(&self, own: Arc<dyn ResponseStore>, ttl: Duration) -> Arc<dyn ResponseStore> {
        Arc::new(super::redis_responses::FleetResponses::new(
            own,
            self.0.clone(),
            ttl,
        ))
    }

    fn describe(&self) -> Option<serde_json::Value> {
        let f = &self.0;
        let (renewals, leased) = f.lease_counts();
        Some(serde_json::json!({
            "instance": &*f.instance,
            "shared_state": if f.is_up() { "redis" } else { "local" },
            "instances": f.live_peers(),
            // Leased admission at work: how many requests this instance
            // admitted from its slices, and how many renewals that took.
            "leases": {
                "windows": f.lease_windows(),
                "renewals": renewals,
                "admitted_from_slices": leased,
            },
        }))
    }

    fn errors(&self) -> Vec<(&'static str, u64)> {
        self.0.errors().collect()
    }

    fn canary_terms<'a>(
        &'a self,
        run: &'a str,
        proposed: CanaryTerms,
    ) -> BoxFuture<'a, CanaryTerms> {
        Box::pin(self.0.canary_terms(run, proposed))
    }

    fn canary_tick<'a>(
        &'a self,
        run: &'a str,
        terms: CanaryTerms,
        added: [CanaryCounts; 2],
    ) -> BoxFuture<'a, Option<CanaryFleet>> {
        Box::pin(self.0.canary_tick(run, terms, added))
    }

    fn canary_rolled_back<'a>(
        &'a self,
        run: &'a str,
        terms: CanaryTerms,
        why: &'a str,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.0.canary_rolled_back(run, terms, why))
    }

    fn run(
        &self,
        report: Reporter,
        sink: Arc<dyn FleetSink>,
        stop: CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        self.0.run(report, sink, stop)
    }
}

/// The sharing `state` asks for, chosen at start-up: on Redis with
/// `backend: redis`, else alone.
pub fn of(state: &crate::config::State) -> Arc<dyn Shared> {
    match fleet_of(state) {
        Some(f) => Arc::new(OnRedis(f)),
        None => Arc::new(Alone),
    }
}

/// The fleet this instance joins, with `state.backend: redis`.
fn fleet_of(s: &crate::config::State) -> Option<Arc<Fleet>> {
    if s.backend != crate::config::StateBackend::Redis {
        return None;
    }
    use crate::state::redis::Endpoint;
    let at = match (&s.redis_url, &s.cluster_urls) {
        (_, Some(urls)) => Endpoint::Cluster(urls.clone()),
        (Some(url), None) => Endpoint::One(url.clone()),
        (None, None) => return None,
    };
    // The Redis client's TLS (`rediss://`) takes rustls's process-wide
    // provider: the same ring one the upstream client uses. (Already set:
    // fine.)
    let _ = rustls::crypto::ring::default_provider().install_default();
    let reject = s.on_unavailable == crate::config::OnUnavailable::Reject;
    Some(Fleet::new(at, &s.key_prefix, reject))
}
