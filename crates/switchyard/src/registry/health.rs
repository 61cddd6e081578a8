//! Rolling per-deployment health for routing, and per-key status (cooling
//! down after a 429, set aside as rejected or spent).
//!
//! Latency percentiles come from a windowed histogram (fixed log-spaced
//! buckets as counter fields in the store: no per-request allocation, and a
//! shared store merges instances by adding). The health score and latency
//! estimate are EWMAs, so one odd sample moves them a little, not a lot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::Serialize;
use tokio::time::Instant;

use super::circuit::CircuitState;
use crate::config::ProviderKey;
use crate::state::store::{Record, StateStore};

/// The window for error rate and percentiles.
pub const HEALTH_WINDOW: Duration = Duration::from_secs(60);
/// Weight of one sample in the health score: a single failure from 1.0 moves
/// it to 0.9; ten in a row to ~0.35.
pub const SCORE_ALPHA: f64 = 0.1;
pub const LATENCY_ALPHA: f64 = 0.2;

/// Histogram bucket upper bounds (ms); one more bucket catches the rest.
const BOUNDS_MS: [u32; 22] = [
    10, 20, 35, 50, 75, 100, 150, 200, 300, 500, 750, 1_000, 1_500, 2_000, 3_000, 5_000, 7_500,
    10_000, 15_000, 30_000, 60_000, 120_000,
];
const REQ: usize = 0;
const ERR: usize = 1;
const LAT0: usize = 2;
const FIELDS: usize = LAT0 + BOUNDS_MS.len() + 1;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HealthSnapshot {
    /// In [0, 1]; 0 while the circuit is open, halved while half-open.
    pub health_score: f64,
    pub error_rate: f64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    /// Damped latency (EWMA of successful attempts), for latency routing.
    pub latency_ewma_ms: Option<f64>,
    pub inflight: i64,
}

pub struct Health {
    store: Arc<dyn StateStore>,
    win_key: Box<str>,
    score_key: Box<str>,
    lat_key: Box<str>,
    inflight_key: Arc<str>,
    /// When a request's attempt last started here (store ms; 0: never):
    /// what tells the prober the deployment carries no traffic.
    last_start: AtomicU64,
}

/// Counts one request in flight until dropped.
pub struct InflightGuard {
    store: Arc<dyn StateStore>,
    key: Arc<str>,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.store.gauge_add(&self.key, -1);
    }
}

impl Health {
    pub fn new(store: Arc<dyn StateStore>, scope: &str) -> Self {
        Health {
            store,
            win_key: format!("{scope}:h:win").into(),
            score_key: format!("{scope}:h:score").into(),
            lat_key: format!("{scope}:h:lat").into(),
            inflight_key: format!("{scope}:h:inflight").into(),
            last_start: AtomicU64::new(0),
        }
    }

    pub fn start(&self) -> InflightGuard {
        self.store.gauge_add(&self.inflight_key, 1);
        let now = self.store.millis(Instant::now());
        self.last_start.store(now, Ordering::Relaxed);
        InflightGuard {
            store: self.store.clone(),
            key: self.inflight_key.clone(),
        }
    }

    /// How long since a request's attempt last started here; `None`:
    /// never (since start-up).
    pub fn idle_for(&self, now: Instant) -> Option<Duration> {
        match self.last_start.load(Ordering::Relaxed) {
            0 => None,
            at => Some(Duration::from_millis(
                self.store.millis(now).saturating_sub(at),
            )),
        }
    }

    /// One finished attempt. Latency is kept for successes only: a refused
    /// connection is fast, and must not make a broken deployment look quick.
    pub fn record(&self, now: Instant, ok: bool, latency: Duration) {
        let ms = latency.as_secs_f64() * 1000.0;
        let mut deltas = [(REQ, 1), (ERR, i64::from(!ok)), (LAT0, 0)];
        if ok {
            deltas[2] = (LAT0 + bucket(ms), 1);
            // Clip a sample to 3× the estimate: an outlier nudges it, while
            // a real shift still gets through in a handful of samples.
            let damped = self
                .store
                .scalar(&self.lat_key)
                .map_or(ms, |e| ms.min(3.0 * e));
            self.store.ewma(&self.lat_key, damped, LATENCY_ALPHA, ms);
        }
        self.store.add(&self.win_key, HEALTH_WINDOW, now, &deltas);
        self.store
            .ewma(&self.score_key, f64::from(u8::from(ok)), SCORE_ALPHA, 1.0);
    }

    pub fn snapshot(&self, now: Instant, circuit: CircuitState) -> HealthSnapshot {
        let mut c = [0i64; FIELDS];
        self.store.sum(&self.win_key, HEALTH_WINDOW, now, &mut c);
        let penalty = match circuit {
            CircuitState::Closed => 1.0,
            CircuitState::HalfOpen => 0.5,
            CircuitState::Open => 0.0,
        };
        let score = self.store.scalar(&self.score_key).unwrap_or(1.0);
        let hist = &c[LAT0..];
        HealthSnapshot {
            health_score: (score * penalty).clamp(0.0, 1.0),
            error_rate: if c[REQ] > 0 {
                c[ERR] as f64 / c[REQ] as f64
            } else {
                0.0
            },
            latency_p50_ms: quantile(hist, 0.50),
            latency_p95_ms: quantile(hist, 0.95),
            latency_ewma_ms: self.store.scalar(&self.lat_key),
            inflight: self.store.gauge_add(&self.inflight_key, 0),
        }
    }
}

fn bucket(ms: f64) -> usize {
    BOUNDS_MS
        .iter()
        .position(|&b| ms <= f64::from(b))
        .unwrap_or(BOUNDS_MS.len())
}

/// Linear interpolation inside the bucket holding the q-th sample.
fn quantile(hist: &[i64], q: f64) -> Option<f64> {
    let n: i64 = hist.iter().sum();
    if n <= 0 {
        return None;
    }
    let rank = (q * n as f64).ceil().max(1.0);
    let mut seen = 0.0;
    for (i, &count) in hist.iter().enumerate() {
        let count = count as f64;
        if count > 0.0 && seen + count >= rank {
            let lo = if i == 0 {
                0.0
            } else {
                f64::from(BOUNDS_MS[i - 1])
            };
            let hi = BOUNDS_MS.get(i).map_or(lo * 2.0, |&b| f64::from(b));
            return Some(lo + (hi - lo) * (rank - seen) / count);
        }
        seen += count;
    }
    None
}

// === Keys ===

/// `/admin/state` status of one provider key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyStatus {
    Active,
    CoolingDown,
    Quarantined,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyState {
    pub label: String,
    pub status: KeyStatus,
    /// Why a quarantined key is set aside: `rejected` (the upstream said
    /// the key is bad; checked again in the background) or
    /// `quota_exhausted`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'static str>,
    /// The key's last background probe (contract §10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_probe: Option<super::probe_log::LastProbe>,
}

/// Why a key is set aside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetAside {
    /// The upstream said the key itself is bad (401, `invalid_api_key`,
    /// `API_KEY_INVALID`, …). A background check (an authenticated call
    /// that costs nothing) restores it as soon as the upstream takes it.
    Rejected,
    /// Its quota or billing is spent (`insufficient_quota`). A call that
    /// costs nothing cannot tell when that ends (listing models works with a
    /// spent key), so it comes back after [`QUARANTINE`].
    Spent,
}

/// How long a spent key stays aside; also how long a rejected key does
/// when its background checks get no conclusive answer (a provider with no
/// model list). A check that says the key is still bad starts it again; an
/// admin reset, or a reload that changes the key, ends it at once.
pub const QUARANTINE: Duration = Duration::from_secs(15 * 60);

const COOLING: u64 = 1;
const REJECTED: u64 = 2;
const SPENT: u64 = 3;

/// A key set aside as bad, for the background check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectedKey {
    pub label: String,
    /// When it was set aside (store ms): a key set aside again after a
    /// restore is a new case, checked from the start.
    pub since: u64,
}

/// Why no key of a provider is usable right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Standing {
    /// The soonest a cooling-down key is usable again.
    pub cooling: Option<Duration>,
    /// Some key is set aside as bad.
    pub rejected: bool,
    /// The soonest a spent key comes back.
    pub spent: Option<Duration>,
}

/// One provider key as the tracker knows it.
struct Tracked {
    label: String,
    /// `key:{provider}:{label}`.
    store_key: Box<str>,
    /// Of the key's value: a set-aside record for another value is stale.
    fingerprint: u64,
}

/// Cooldown and set-aside of a provider's keys. Store keys are per provider
/// (`key:{provider}:{label}`): every deployment on the account sees the
/// same. A record is `[status, until_ms, fingerprint, since_ms]`: the
/// fingerprint of the key's value when it was set aside, so a reload that
/// changes the value restores the key, and one that keeps it does not.
pub struct KeyTracker {
    store: Arc<dyn StateStore>,
    /// Rebuilt when the provider's keys change.
    keys: ArcSwap<Vec<Tracked>>,
}

/// A short digest of a key's value (never the value itself).
fn fingerprint(key: &ProviderKey) -> u64 {
    use sha2::{Digest, Sha256};
    let d = Sha256::digest(key.secret.expose().as_bytes());
    u64::from_le_bytes(d[..8].try_into().unwrap_or_default())
}

impl KeyTracker {
    pub fn new(store: Arc<dyn StateStore>, provider: &str, keys: &[ProviderKey]) -> Self {
        let t = KeyTracker {
            store,
            keys: ArcSwap::from_pointee(Vec::new()),
        };
        t.set_keys(provider, keys);
        t
    }

    /// The provider's keys (again, on a reload). A key whose value is not
    /// the one it was set aside or cooled down with is restored.
    pub fn set_keys(&self, provider: &str, keys: &[ProviderKey]) {
        let now = Instant::now();
        let tracked: Vec<Tracked> = keys
            .iter()
            .map(|k| Tracked {
                label: k.label.clone(),
                store_key: format!("key:{provider}:{}", k.label).into(),
                fingerprint: fingerprint(k),
            })
            .collect();
        for t in &tracked {
            let rec = self.store.get(&t.store_key, now);
            if rec.is_some_and(|r| r.0[2] != t.fingerprint) {
                tracing::info!(provider, key = %t.label, "the key's value changed: it is in use again");
                self.store.swap_if(&t.store_key, rec, None, None, now);
            }
        }
        self.keys.store(Arc::new(tracked));
    }

    /// The tracked key `key` names, if `key` still has the value tracked
    /// (an attempt that began before a reload changed it says nothing
    /// about the new value).
    fn current(&self, key: &ProviderKey) -> Option<Box<str>> {
        let fp = fingerprint(key);
        let keys = self.keys.load();
        keys.iter()
            .find(|t| t.label == key.label && t.fingerprint == fp)
            .map(|t| t.store_key.clone())
    }

    /// `f` on the tracked key named `label` (no copy of its store key: this
    /// runs per request).
    fn with<R>(&self, label: &str, f: impl FnOnce(&str) -> R) -> Option<R> {
        let keys = self.keys.load();
        keys.iter()
            .find(|t| t.label == label)
            .map(|t| f(&t.store_key))
    }

    /// The upstream rejected `key`, or its quota is spent: set it aside. A
    /// key already set aside keeps its `since` (its checks go on).
    pub fn set_aside(&self, key: &ProviderKey, why: SetAside) {
        let Some(k) = self.current(key) else { return };
        let now = Instant::now();
        let status = match why {
            SetAside::Rejected => REJECTED,
            SetAside::Spent => SPENT,
        };
        let ms = self.store.millis(now);
        let since = match self.store.get(&k, now) {
            Some(r) if r.0[0] == status => r.0[3],
            _ => ms,
        };
        let until = ms + QUARANTINE.as_millis() as u64;
        let rec = Record([status, until, fingerprint(key), since]);
        self.store.put(&k, Some(rec), Some(QUARANTINE), now);
    }

    /// A key's own 429: skip it until `until` (never shortens a set-aside).
    pub fn cool_down(&self, key: &ProviderKey, until: Instant) {
        let Some(k) = self.current(key) else { return };
        let now = Instant::now();
        let ttl = until.saturating_duration_since(now);
        let current = self.store.get(&k, now);
        if ttl.is_zero() || current.is_some_and(|r| r.0[0] != COOLING) {
            return;
        }
        let until_ms = self.store.millis(now) + ttl.as_millis() as u64;
        let rec = Record([COOLING, until_ms, fingerprint(key), 0]);
        self.store.put(&k, Some(rec), Some(ttl), now);
    }

    /// Back in use at once (an operator's reset). False for an unknown label.
    pub fn restore(&self, label: &str) -> bool {
        self.with(label, |k| self.store.put(k, None, None, Instant::now()))
            .is_some()
    }

    /// The background check got the key through: back in use, unless it
    /// was restored or set aside anew meanwhile.
    pub fn restore_checked(&self, label: &str, since: u64) -> bool {
        let now = Instant::now();
        self.with(label, |k| {
            let rec = self.store.get(k, now);
            rec.is_some_and(|r| r.0[0] == REJECTED && r.0[3] == since)
                && self.store.swap_if(k, rec, None, None, now)
        })
        .unwrap_or(false)
    }

    /// The background check was refused again: the key stays aside for
    /// another [`QUARANTINE`].
    pub fn still_rejected(&self, label: &str, since: u64) {
        let now = Instant::now();
        self.with(label, |k| match self.store.get(k, now) {
            Some(rec) if rec.0[0] == REJECTED && rec.0[3] == since => {
                let mut again = rec;
                again.0[1] = self.store.millis(now) + QUARANTINE.as_millis() as u64;
                self.store
                    .swap_if(k, Some(rec), Some(again), Some(QUARANTINE), now);
            }
            _ => {}
        });
    }

    pub fn status(&self, label: &str) -> KeyStatus {
        let now = Instant::now();
        match self
            .with(label, |k| self.store.get(k, now))
            .flatten()
            .map(|r| r.0[0])
        {
            Some(REJECTED | SPENT) => KeyStatus::Quarantined,
            Some(COOLING) => KeyStatus::CoolingDown,
            _ => KeyStatus::Active,
        }
    }

    /// The keys worth trying now. When this is empty, [`KeyTracker::standing`]
    /// says why.
    pub fn usable_keys<'a, K>(
        &'a self,
        keys: &'a [K],
        label: impl Fn(&K) -> &str + 'a,
    ) -> impl Iterator<Item = &'a K> + 'a {
        keys.iter()
            .filter(move |k| self.status(label(k)) == KeyStatus::Active)
    }

    /// Why the keys that are not usable are not, and for how long.
    pub fn standing(&self) -> Standing {
        let now = Instant::now();
        let ms = self.store.millis(now);
        let mut s = Standing::default();
        let soonest = |a: Option<Duration>, until: u64| {
            let d = Duration::from_millis(until.saturating_sub(ms));
            Some(a.map_or(d, |a| a.min(d)))
        };
        for t in self.keys.load().iter() {
            match self.store.get(&t.store_key, now).map(|r| r.0) {
                Some([COOLING, until, ..]) => s.cooling = soonest(s.cooling, until),
                Some([REJECTED, ..]) => s.rejected = true,
                Some([SPENT, until, ..]) => s.spent = soonest(s.spent, until),
                _ => {}
            }
        }
        s
    }

    /// The keys set aside as bad, for the background check.
    pub fn rejected(&self) -> Vec<RejectedKey> {
        let now = Instant::now();
        self.keys
            .load()
            .iter()
            .filter_map(|t| match self.store.get(&t.store_key, now)?.0 {
                [REJECTED, _, _, since] => Some(RejectedKey {
                    label: t.label.clone(),
                    since,
                }),
                _ => None,
            })
            .collect()
    }

    pub fn states(&self) -> Vec<KeyState> {
        let now = Instant::now();
        self.keys
            .load()
            .iter()
            .map(|t| {
                let status = self.store.get(&t.store_key, now).map(|r| r.0[0]);
                let (status, reason) = match status {
                    Some(REJECTED) => (KeyStatus::Quarantined, Some("rejected")),
                    Some(SPENT) => (KeyStatus::Quarantined, Some("quota_exhausted")),
                    Some(COOLING) => (KeyStatus::CoolingDown, None),
                    _ => (KeyStatus::Active, None),
                };
                KeyState {
                    label: t.label.clone(),
                    status,
                    reason,
                    last_probe: None,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::memory::MemoryStore;

    const MS: Duration = Duration::from_millis(1);

    fn health() -> Health {
        Health::new(Arc::new(MemoryStore::new()), "dep:t")
    }

    #[tokio::test(start_paused = true)]
    async fn one_bad_sample_moves_the_score_a_little() {
        let h = health();
        let now = Instant::now();
        assert_eq!(
            h.snapshot(now, CircuitState::Closed).health_score,
            1.0,
            "new: optimistic"
        );
        (0..20).for_each(|_| h.record(now, true, 100 * MS));
        h.record(now, false, 100 * MS);
        let s = h.snapshot(now, CircuitState::Closed);
        assert!(s.health_score >= 0.89, "{}", s.health_score);
        (0..20).for_each(|_| h.record(now, false, 100 * MS));
        let s = h.snapshot(now, CircuitState::Closed);
        assert!(
            s.health_score < 0.15,
            "a run of failures does sink it: {}",
            s.health_score
        );
        assert!((s.error_rate - 21.0 / 41.0).abs() < 1e-9);
        assert_eq!(h.snapshot(now, CircuitState::Open).health_score, 0.0);
    }

    #[tokio::test(start_paused = true)]
    async fn latency_percentiles_and_damped_estimate() {
        let h = health();
        let now = Instant::now();
        (0..90).for_each(|_| h.record(now, true, 80 * MS));
        (0..10).for_each(|_| h.record(now, true, 1_800 * MS));
        h.record(now, false, MS); // a fast refusal adds no latency sample
        let s = h.snapshot(now, CircuitState::Closed);
        let p50 = s.latency_p50_ms.unwrap();
        let p95 = s.latency_p95_ms.unwrap();
        assert!((75.0..=100.0).contains(&p50), "p50 {p50}");
        assert!((1_500.0..=2_000.0).contains(&p95), "p95 {p95}");

        let h = health();
        (0..20).for_each(|_| h.record(now, true, 100 * MS));
        h.record(now, true, 30_000 * MS);
        let est = h
            .snapshot(now, CircuitState::Closed)
            .latency_ewma_ms
            .unwrap();
        assert!(est < 200.0, "one outlier moves the estimate little: {est}");
        (0..30).for_each(|_| h.record(now, true, 2_000 * MS));
        let est = h
            .snapshot(now, CircuitState::Closed)
            .latency_ewma_ms
            .unwrap();
        assert!(est > 1_800.0, "a real shift is followed: {est}");

        tokio::time::advance(HEALTH_WINDOW).await;
        let s = h.snapshot(Instant::now(), CircuitState::Closed);
        assert_eq!((s.latency_p95_ms, s.error_rate), (None, 0.0), "window slid");
    }

    #[test]
    fn inflight_guard() {
        let h = health();
        let a = h.start();
        let b = h.start();
        assert_eq!(h.snapshot(Instant::now(), CircuitState::Closed).inflight, 2);
        drop((a, b));
        assert_eq!(h.snapshot(Instant::now(), CircuitState::Closed).inflight, 0);
    }

    fn key(label: &str, value: &str) -> ProviderKey {
        ProviderKey {
            label: label.into(),
            secret: crate::secret::Secret::new(value.into()),
            weight: 1,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn key_cooldown_and_set_aside() {
        let (a, b, c) = (key("a", "sk-a"), key("b", "sk-b"), key("c", "sk-c"));
        let t = KeyTracker::new(
            Arc::new(MemoryStore::new()),
            "p",
            &[a.clone(), b.clone(), c.clone()],
        );
        t.set_aside(&a, SetAside::Spent);
        t.cool_down(&b, Instant::now() + Duration::from_secs(5));
        t.cool_down(&a, Instant::now() + Duration::from_secs(1));
        let labels = ["a", "b", "c"];
        let usable: Vec<_> = t.usable_keys(&labels, |k| k).collect();
        assert_eq!(usable, [&"c"]);
        let states: Vec<_> = t.states().into_iter().map(|k| k.status).collect();
        use KeyStatus::*;
        assert_eq!(states, [Quarantined, CoolingDown, Active]);
        let s = t.standing();
        assert_eq!(s.cooling, Some(Duration::from_secs(5)));
        assert_eq!((s.rejected, s.spent), (false, Some(QUARANTINE)));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!((t.status("a"), t.status("b")), (Quarantined, Active));
        tokio::time::advance(QUARANTINE).await;
        assert_eq!(t.status("a"), Active, "a spent key comes back in time");
        let json = serde_json::to_string(&t.states()[0]).unwrap();
        assert_eq!(json, r#"{"label":"a","status":"active"}"#);
        t.set_aside(&c, SetAside::Rejected);
        let json = serde_json::to_string(&t.states()[2]).unwrap();
        assert_eq!(
            json,
            r#"{"label":"c","status":"quarantined","reason":"rejected"}"#
        );
        assert!(t.standing().rejected);
    }

    /// The background check restores only the case it checked; a check
    /// that is refused again keeps the key aside past [`QUARANTINE`].
    #[tokio::test(start_paused = true)]
    async fn checks_restore_the_case_they_checked() {
        let a = key("a", "sk-a");
        let t = KeyTracker::new(Arc::new(MemoryStore::new()), "p", std::slice::from_ref(&a));
        t.set_aside(&a, SetAside::Rejected);
        let [first] = &t.rejected()[..] else { panic!() };
        tokio::time::advance(Duration::from_secs(1)).await;
        t.set_aside(&a, SetAside::Rejected);
        assert_eq!(t.rejected()[0].since, first.since, "the same case goes on");
        tokio::time::advance(QUARANTINE - Duration::from_secs(2)).await;
        t.still_rejected("a", first.since);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(
            t.status("a"),
            KeyStatus::Quarantined,
            "a refused check extends it"
        );
        // Reset by hand, then set aside anew: the old check's word is stale.
        assert!(t.restore("a"));
        tokio::time::advance(Duration::from_secs(1)).await;
        t.set_aside(&a, SetAside::Rejected);
        assert!(!t.restore_checked("a", first.since));
        let now = t.rejected()[0].since;
        assert!(t.restore_checked("a", now));
        assert_eq!(t.status("a"), KeyStatus::Active);
        assert!(!t.restore("nope"));
    }

    /// A reload that changes a key's value brings it back; one that keeps
    /// the value keeps it aside. An attempt made with the old value after
    /// the reload sets nothing aside.
    #[tokio::test(start_paused = true)]
    async fn a_new_value_restores_the_key() {
        let store: Arc<dyn StateStore> = Arc::new(MemoryStore::new());
        let (a, b) = (key("a", "sk-a"), key("b", "sk-b"));
        let t = KeyTracker::new(store.clone(), "p", &[a.clone(), b.clone()]);
        t.set_aside(&a, SetAside::Rejected);
        t.cool_down(&b, Instant::now() + Duration::from_secs(30));
        // Another deployment of the provider sees the same records.
        let other = KeyTracker::new(store, "p", &[a.clone(), b.clone()]);
        assert_eq!(other.status("a"), KeyStatus::Quarantined);
        other.set_keys("p", &[a.clone(), b.clone()]);
        assert_eq!(
            t.status("a"),
            KeyStatus::Quarantined,
            "same value: still aside"
        );
        let a2 = key("a", "sk-a-rotated");
        t.set_keys("p", &[a2.clone(), b.clone()]);
        assert_eq!(t.status("a"), KeyStatus::Active, "new value: in use");
        assert_eq!(t.status("b"), KeyStatus::CoolingDown);
        t.set_aside(&a, SetAside::Rejected);
        t.cool_down(&a, Instant::now() + Duration::from_secs(30));
        assert_eq!(
            t.status("a"),
            KeyStatus::Active,
            "the old value's failure is stale"
        );
        t.set_aside(&a2, SetAside::Rejected);
        assert_eq!(t.status("a"), KeyStatus::Quarantined);
    }
}
