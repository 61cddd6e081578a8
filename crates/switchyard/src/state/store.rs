//! The state store: every circuit, limit and health number lives behind
//! [`StateStore`], so one gateway or a fleet sharing Redis see the same
//! state. The in-memory [`MemoryStore`](super::memory::MemoryStore) is the
//! default; `registry::Registry` owns each deployment's reliability state
//! and keeps it across config reloads.
//!
//! Why a synchronous trait, and `Arc<dyn StateStore>`:
//! - `route::plan` is pure and sync, and the hot path must not wait on a
//!   network round trip per op. For a fleet, the decisions that must be
//!   exact across instances (rpm/tpm windows, budgets) are made on Redis in
//!   one round trip per request before the upstream call
//!   (`state::redis::RedisState::admit`); circuit transitions travel as
//!   versioned events (`state::redis`, a Redis Stream). The ops below map
//!   onto Redis as the right-hand column says for what stays local-first
//!   (health averages, in-flight gauges).
//! - One implementation today, each instance's own (`MemoryStore`); with
//!   `state.backend: redis` what a fleet must agree on goes through
//!   `state::fleet` beside it (admission, circuit events, sessions, keys).
//!   `dyn` keeps the registry's types plain, and one virtual call is noise
//!   next to hashing.
//!
//! | op | meaning | Redis |
//! |---|---|---|
//! | `incr`/`sum`/`clear` | sliding-window counters, a few fields per key | `HINCRBY key:{bucket} field n` + `PEXPIRE`; sum the buckets; `DEL` |
//! | `get`/`put`/`swap_if` | small records with TTL; compare-and-set | `GET`, `SET PX`, a Lua CAS (per instance when local-first) |
//! | `ewma`/`scalar` | damped averages | `SET` last value; readers average |
//! | `gauge_add` | in-flight counts | `INCRBY key:{instance}` with TTL; sum |

use std::time::Duration;

use tokio::time::Instant;

/// A small fixed record (what a breaker or a key status needs); callers give
/// the fields meaning. Fixed size: no allocation to read or compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record(pub [u64; 4]);

pub trait StateStore: Send + Sync {
    /// The store's clock in ms, for times kept inside records.
    fn millis(&self, now: Instant) -> u64;

    /// Adds each `(field, n)` to the current bucket of a sliding window over
    /// `window`; returns the window's total of the first field afterwards
    /// (so a limiter adds, then compares, then undoes: no check-then-act race).
    fn incr(&self, key: &str, window: Duration, now: Instant, deltas: &[(usize, i64)]) -> i64;
    /// [`StateStore::incr`] for a caller that does not read the total back
    /// (health and circuit counts, on every attempt): a store may skip
    /// summing the window.
    fn add(&self, key: &str, window: Duration, now: Instant, deltas: &[(usize, i64)]) {
        self.incr(key, window, now, deltas);
    }
    /// The window's total of fields `0..out.len()` into `out`.
    fn sum(&self, key: &str, window: Duration, now: Instant, out: &mut [i64]);
    fn clear(&self, key: &str);

    fn get(&self, key: &str, now: Instant) -> Option<Record>;
    /// `None` deletes.
    fn put(&self, key: &str, rec: Option<Record>, ttl: Option<Duration>, now: Instant);
    /// Sets `new` only if the current value is `expected`; true when it did.
    fn swap_if(
        &self,
        key: &str,
        expected: Option<Record>,
        new: Option<Record>,
        ttl: Option<Duration>,
        now: Instant,
    ) -> bool;

    /// `v += alpha·(sample − v)`, `v` starting at `initial`; returns the new `v`.
    fn ewma(&self, key: &str, sample: f64, alpha: f64, initial: f64) -> f64;
    fn scalar(&self, key: &str) -> Option<f64>;
    /// Adds `delta`; returns the new value.
    fn gauge_add(&self, key: &str, delta: i64) -> i64;
}
