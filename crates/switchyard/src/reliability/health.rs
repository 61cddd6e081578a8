//! Rolling per-deployment health for routing, and per-key status.
//!
//! Latency percentiles come from a windowed histogram (fixed log-spaced
//! buckets as counter fields in the store: no per-request allocation, and a
//! shared store merges instances by adding). The health score and latency
//! estimate are EWMAs, so one odd sample moves them a little, not a lot.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use serde::Serialize;
use tokio::time::Instant;

use super::circuit::CircuitState;
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
        }
    }

    pub fn start(&self) -> InflightGuard {
        self.store.gauge_add(&self.inflight_key, 1);
        InflightGuard {
            store: self.store.clone(),
            key: self.inflight_key.clone(),
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
}

/// A quarantined key (401, insufficient_quota) comes back on its own after
/// this, in case the account was fixed; a reload or restart also forgives it.
pub const QUARANTINE: Duration = Duration::from_secs(15 * 60);

/// Cooldown and quarantine of a provider's keys. Store keys are per provider
/// (`key:{provider}:{label}`): every deployment on the account sees the same.
pub struct KeyTracker {
    store: Arc<dyn StateStore>,
    /// (label, store key), rebuilt when the provider's keys change.
    keys: ArcSwap<Vec<(String, Box<str>)>>,
}

const COOLING: u64 = 1;
const QUARANTINED: u64 = 2;

impl KeyTracker {
    pub fn new<'a>(
        store: Arc<dyn StateStore>,
        provider: &str,
        labels: impl IntoIterator<Item = &'a str>,
    ) -> Self {
        let t = KeyTracker {
            store,
            keys: ArcSwap::from_pointee(Vec::new()),
        };
        t.set_keys(provider, labels);
        t
    }

    pub fn set_keys<'a>(&self, provider: &str, labels: impl IntoIterator<Item = &'a str>) {
        let keys = labels
            .into_iter()
            .map(|l| (l.to_owned(), format!("key:{provider}:{l}").into()))
            .collect();
        self.keys.store(Arc::new(keys));
    }

    fn mark(&self, label: &str, status: u64, ttl: Duration) {
        let keys = self.keys.load();
        if let Some((_, k)) = keys.iter().find(|(l, _)| l == label) {
            let now = Instant::now();
            self.store
                .put(k, Some(Record([status, 0, 0, 0])), Some(ttl), now);
        }
    }

    /// Upstream 401 or `insufficient_quota`: set the key aside.
    pub fn quarantine(&self, label: &str) {
        self.mark(label, QUARANTINED, QUARANTINE);
    }

    /// A key's own 429: skip it until `until` (never extends a quarantine).
    pub fn cool_down(&self, label: &str, until: Instant) {
        if self.status(label) != KeyStatus::Quarantined {
            let ttl = until.saturating_duration_since(Instant::now());
            if !ttl.is_zero() {
                self.mark(label, COOLING, ttl);
            }
        }
    }

    pub fn status(&self, label: &str) -> KeyStatus {
        let keys = self.keys.load();
        let rec = keys
            .iter()
            .find(|(l, _)| l == label)
            .and_then(|(_, k)| self.store.get(k, Instant::now()));
        match rec.map(|r| r.0[0]) {
            Some(QUARANTINED) => KeyStatus::Quarantined,
            Some(COOLING) => KeyStatus::CoolingDown,
            _ => KeyStatus::Active,
        }
    }

    /// The keys worth trying now. When every key is set aside this is empty,
    /// and the caller treats the deployment as exhausted.
    pub fn usable_keys<'a, K>(
        &'a self,
        keys: &'a [K],
        label: impl Fn(&K) -> &str + 'a,
    ) -> impl Iterator<Item = &'a K> + 'a {
        keys.iter()
            .filter(move |k| self.status(label(k)) == KeyStatus::Active)
    }

    pub fn states(&self) -> Vec<KeyState> {
        self.keys
            .load()
            .iter()
            .map(|(l, _)| KeyState {
                label: l.clone(),
                status: self.status(l),
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

    #[tokio::test(start_paused = true)]
    async fn key_cooldown_and_quarantine() {
        let t = KeyTracker::new(Arc::new(MemoryStore::new()), "p", ["a", "b", "c"]);
        t.quarantine("a");
        t.cool_down("b", Instant::now() + Duration::from_secs(5));
        t.cool_down("a", Instant::now() + Duration::from_secs(1));
        let keys = ["a", "b", "c"];
        let usable: Vec<_> = t.usable_keys(&keys, |k| k).collect();
        assert_eq!(usable, [&"c"]);
        let states: Vec<_> = t.states().into_iter().map(|k| k.status).collect();
        use KeyStatus::*;
        assert_eq!(states, [Quarantined, CoolingDown, Active]);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!((t.status("a"), t.status("b")), (Quarantined, Active));
        tokio::time::advance(QUARANTINE).await;
        assert_eq!(t.status("a"), Active);
        let json = serde_json::to_string(&t.states()[0]).unwrap();
        assert_eq!(json, r#"{"label":"a","status":"active"}"#);
    }
}
