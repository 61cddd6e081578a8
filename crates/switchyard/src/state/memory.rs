//! `MemoryStore`: the default, in-process [`StateStore`].
//!
//! Three `DashMap`s (sharded: a request locks one shard briefly, never the
//! whole map), each entry holding its own small lock or atomic. Keys are
//! allocated once, on first use; the per-request path allocates nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use dashmap::DashMap;
use tokio::time::Instant;

use super::store::{Record, StateStore};

/// Buckets per window: a sliding window at 1/20 granularity (3 s of a minute).
const BUCKETS: u64 = 20;

/// Keys are our own (`dep:<id>:…`), never client input, so a fast
/// non-cryptographic hash is safe here; SipHash showed on the hot path.
type FastMap<V> = DashMap<Box<str>, V, foldhash::fast::RandomState>;

pub struct MemoryStore {
    epoch: Instant,
    windows: FastMap<Mutex<Window>>,
    records: FastMap<Slot>,
    scalars: FastMap<AtomicU64>,
}

struct Window {
    bucket_ms: u64,
    /// Ring of `BUCKETS` buckets; `idx` says which time bucket a slot holds.
    slots: Vec<Bucket>,
    /// Something was added since the last clear.
    dirty: bool,
}

#[derive(Clone, Default)]
struct Bucket {
    idx: u64,
    vals: Vec<i64>,
}

#[derive(Clone, Copy)]
struct Slot {
    rec: Record,
    /// Store milliseconds; `None` = no TTL.
    expires: Option<u64>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    pub fn new() -> Self {
        MemoryStore {
            epoch: Instant::now(),
            windows: DashMap::default(),
            records: DashMap::default(),
            scalars: DashMap::default(),
        }
    }

    /// Drops expired records (sticky sessions, key cooldowns); call now and then.
    pub fn sweep(&self, now: Instant) {
        let ms = self.millis(now);
        self.records.retain(|_, s| s.expires.is_none_or(|e| e > ms));
    }

    fn with_window<R>(&self, key: &str, window: Duration, f: impl FnOnce(&mut Window) -> R) -> R {
        let bucket_ms = (window.as_millis() as u64 / BUCKETS).max(1);
        if let Some(w) = self.windows.get(key) {
            let mut g = lock(&w);
            return f(g.fit(bucket_ms));
        }
        let entry = self
            .windows
            .entry(Box::from(key))
            .or_insert_with(|| Mutex::new(Window::new(bucket_ms)));
        let mut w = lock(&entry);
        f(w.fit(bucket_ms))
    }

    fn scalar_cell<R>(&self, key: &str, f: impl FnOnce(&AtomicU64) -> R, init: u64) -> R {
        if let Some(c) = self.scalars.get(key) {
            return f(&c);
        }
        let c = self
            .scalars
            .entry(Box::from(key))
            .or_insert_with(|| AtomicU64::new(init));
        f(&c)
    }

    fn live(&self, slot: Option<Slot>, ms: u64) -> Option<Record> {
        slot.filter(|s| s.expires.is_none_or(|e| e > ms))
            .map(|s| s.rec)
    }
}

/// A poisoned lock only means a panic elsewhere mid-update of plain counters.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Window {
    fn new(bucket_ms: u64) -> Self {
        Window {
            bucket_ms,
            slots: vec![Bucket::default(); BUCKETS as usize],
            dirty: false,
        }
    }

    /// A reload that changed the window size restarts the counts.
    fn fit(&mut self, bucket_ms: u64) -> &mut Self {
        if self.bucket_ms != bucket_ms {
            *self = Window::new(bucket_ms);
        }
        self
    }

    fn add(&mut self, ms: u64, deltas: &[(usize, i64)]) {
        self.dirty = true;
        let b = self.slot(ms);
        for &(field, n) in deltas {
            if field >= b.vals.len() {
                b.vals.resize(field + 1, 0);
            }
            b.vals[field] += n;
        }
    }

    fn slot(&mut self, ms: u64) -> &mut Bucket {
        let idx = ms / self.bucket_ms;
        let b = &mut self.slots[(idx % BUCKETS) as usize];
        // A caller whose `now` is a little behind adds to the newer bucket
        // rather than wiping it.
        if b.idx < idx {
            b.idx = idx;
            b.vals.iter_mut().for_each(|v| *v = 0);
        }
        b
    }

    fn total(&self, ms: u64, field: usize) -> i64 {
        let now_idx = ms / self.bucket_ms;
        self.slots
            .iter()
            .filter(|b| b.idx + BUCKETS > now_idx && b.idx <= now_idx)
            .map(|b| b.vals.get(field).copied().unwrap_or(0))
            .sum()
    }
}

impl StateStore for MemoryStore {
    fn millis(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.epoch).as_millis() as u64
    }

    fn incr(&self, key: &str, window: Duration, now: Instant, deltas: &[(usize, i64)]) -> i64 {
        let ms = self.millis(now);
        self.with_window(key, window, |w| {
            w.add(ms, deltas);
            deltas.first().map_or(0, |&(f, _)| w.total(ms, f))
        })
    }

    fn add(&self, key: &str, window: Duration, now: Instant, deltas: &[(usize, i64)]) {
        let ms = self.millis(now);
        self.with_window(key, window, |w| w.add(ms, deltas));
    }

    fn sum(&self, key: &str, window: Duration, now: Instant, out: &mut [i64]) {
        let ms = self.millis(now);
        out.iter_mut().for_each(|v| *v = 0);
        let Some(w) = self.windows.get(key) else {
            return;
        };
        let bucket_ms = (window.as_millis() as u64 / BUCKETS).max(1);
        let w = lock(&w);
        if w.bucket_ms != bucket_ms {
            return;
        }
        for (field, v) in out.iter_mut().enumerate() {
            *v = w.total(ms, field);
        }
    }

    fn clear(&self, key: &str) {
        if let Some(w) = self.windows.get(key) {
            // Zeroed in place: this runs on every successful attempt (the
            // breaker's consecutive-failure run), so it must not allocate,
            // and mostly finds the window clear already.
            let mut w = lock(&w);
            if w.dirty {
                w.dirty = false;
                for b in &mut w.slots {
                    b.vals.iter_mut().for_each(|v| *v = 0);
                }
            }
        }
    }

    fn get(&self, key: &str, now: Instant) -> Option<Record> {
        let slot = self.records.get(key).map(|s| *s);
        self.live(slot, self.millis(now))
    }

    fn put(&self, key: &str, rec: Option<Record>, ttl: Option<Duration>, now: Instant) {
        let ms = self.millis(now);
        match rec {
            Some(rec) => {
                let expires = ttl.map(|t| ms + t.as_millis() as u64);
                self.records.insert(Box::from(key), Slot { rec, expires });
            }
            None => {
                self.records.remove(key);
            }
        }
    }

    fn swap_if(
        &self,
        key: &str,
        expected: Option<Record>,
        new: Option<Record>,
        ttl: Option<Duration>,
        now: Instant,
    ) -> bool {
        let ms = self.millis(now);
        // The entry holds its shard's write lock: compare and set are one step.
        let mut entry = self.records.entry(Box::from(key));
        let current = match &entry {
            dashmap::Entry::Occupied(o) => self.live(Some(*o.get()), ms),
            dashmap::Entry::Vacant(_) => None,
        };
        if current != expected {
            return false;
        }
        match (new, &mut entry) {
            (Some(rec), _) => {
                let expires = ttl.map(|t| ms + t.as_millis() as u64);
                entry.insert(Slot { rec, expires });
            }
            (None, dashmap::Entry::Occupied(_)) => {
                if let dashmap::Entry::Occupied(o) = entry {
                    o.remove();
                }
            }
            (None, dashmap::Entry::Vacant(_)) => {}
        }
        true
    }

    fn ewma(&self, key: &str, sample: f64, alpha: f64, initial: f64) -> f64 {
        self.scalar_cell(
            key,
            |c| {
                let mut next = 0.0;
                // Lock-free read-modify-write; retried only under a race.
                let _ = c.fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| {
                    let prev = f64::from_bits(bits);
                    let prev = if prev.is_nan() { initial } else { prev };
                    next = prev + alpha * (sample - prev);
                    Some(next.to_bits())
                });
                next
            },
            f64::NAN.to_bits(),
        )
    }

    fn scalar(&self, key: &str) -> Option<f64> {
        let v = f64::from_bits(self.scalars.get(key)?.load(Ordering::Acquire));
        (!v.is_nan()).then_some(v)
    }

    fn gauge_add(&self, key: &str, delta: i64) -> i64 {
        self.scalar_cell(
            key,
            |c| (c.fetch_add(delta as u64, Ordering::AcqRel) as i64).wrapping_add(delta),
            0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[tokio::test(start_paused = true)]
    async fn windowed_counts_slide_out() {
        let s = MemoryStore::new();
        assert_eq!(s.incr("k", MIN, Instant::now(), &[(0, 1), (1, 5)]), 1);
        tokio::time::advance(Duration::from_secs(30)).await;
        assert_eq!(s.incr("k", MIN, Instant::now(), &[(0, 1)]), 2);
        let mut out = [0; 2];
        s.sum("k", MIN, Instant::now(), &mut out);
        assert_eq!(out, [2, 5]);
        tokio::time::advance(Duration::from_secs(31)).await;
        s.sum("k", MIN, Instant::now(), &mut out);
        assert_eq!(out, [1, 0], "the first add has left the window");
        s.clear("k");
        s.sum("k", MIN, Instant::now(), &mut out);
        assert_eq!(out, [0, 0]);
        // `add` counts like `incr`; a clear of a clear window is a no-op,
        // and counting starts again after it.
        s.add("k", MIN, Instant::now(), &[(1, 3)]);
        s.clear("k");
        s.clear("k");
        s.add("k", MIN, Instant::now(), &[(0, 2), (1, 1)]);
        s.sum("k", MIN, Instant::now(), &mut out);
        assert_eq!(out, [2, 1]);
    }

    #[tokio::test(start_paused = true)]
    async fn records_cas_and_ttl() {
        let s = MemoryStore::new();
        let now = Instant::now();
        let a = Record([1, 0, 0, 0]);
        assert!(s.swap_if("r", None, Some(a), Some(Duration::from_secs(5)), now));
        assert!(!s.swap_if("r", None, Some(a), None, now), "already set");
        assert_eq!(s.get("r", now), Some(a));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(s.get("r", Instant::now()), None, "expired");
        assert!(s.swap_if("r", None, Some(a), None, Instant::now()));
        s.sweep(Instant::now());
        assert_eq!(s.get("r", Instant::now()), Some(a), "no TTL: kept");
    }

    #[test]
    fn scalars() {
        let s = MemoryStore::new();
        assert_eq!(s.scalar("e"), None);
        assert_eq!(s.ewma("e", 0.0, 0.5, 1.0), 0.5);
        assert_eq!(s.ewma("e", 0.0, 0.5, 1.0), 0.25);
        assert_eq!(s.gauge_add("g", 2), 2);
        assert_eq!(s.gauge_add("g", -3), -1);
    }
}
