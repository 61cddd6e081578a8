//! Quota (contract §10): how much of its rpm and tpm a deployment has used,
//! and the routing weight that follows from it.
//!
//! The used share of a dimension (rpm, tpm) is the largest of what is
//! known of it: the deployment's own window (requests or tokens counted ÷
//! its `models[].limits`), its provider pool's (÷ `providers.<p>.limits`),
//! and the upstream's own quota headers (`x-ratelimit-limit-*` and
//! `-remaining-*`, Anthropic's `anthropic-ratelimit-*`). Each reading
//! holds until it is replaced or runs out: a window's count for the
//! window's length (a sliding window's count can only fall that long), a
//! header's until its reset (60 s when it names none).
//!
//! ```text
//! weight target  1 ─────────┐
//!                           │╲
//!                           │  ╲
//!                0          │    ╲────────
//!                  0      shift   stop    1   (share used)
//! ```
//!
//! The effective weight moves toward the target by at most 0.2 per 10 s, so
//! traffic leaves (and comes back) a fifth at a time, never all at once.
//! Past `stop` the deployment is held back at once, whatever its weight:
//! it serves only when nothing else can.
//!
//! Everything is atomics, updated when read with the request's `now`: a
//! read is a handful of loads, and at most one compare-and-swap per 100 ms
//! per deployment. No lock, no allocation, no background task.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use tokio::time::Instant;

use super::limits::{QuotaHeaders, RATE_WINDOW};
use crate::config::Quota as Settings;

/// The fastest the weight moves: this much per [`STEP_PERIOD`].
pub const MAX_STEP: f64 = 0.2;
pub const STEP_PERIOD: Duration = Duration::from_secs(10);
/// A header reading with no reset holds this long.
pub const HEADER_HOLD: Duration = Duration::from_secs(60);
/// The longest a header reading holds, whatever reset it names (a misread
/// header must not steer traffic for hours).
pub const MAX_HEADER_HOLD: Duration = Duration::from_secs(3600);
/// A read stores the weight it moved to at most this often.
const COMMIT_MS: u64 = 100;

/// A dimension of the quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Rpm = 0,
    Tpm = 1,
}

impl Dim {
    pub const ALL: [Dim; 2] = [Dim::Rpm, Dim::Tpm];

    pub fn as_str(self) -> &'static str {
        match self {
            Dim::Rpm => "rpm",
            Dim::Tpm => "tpm",
        }
    }
}

/// Milliseconds since a registry's start (never 0: 0 means "never").
/// Every deployment and pool of a registry reads the same clock, so their
/// readings' times compare.
#[derive(Debug, Clone, Copy)]
pub struct Clock(Instant);

impl Clock {
    pub fn new(start: Instant) -> Clock {
        Clock(start)
    }

    pub fn ms(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.0).as_millis() as u64 + 1
    }
}

/// One share reading, valid until a time on the [`Clock`].
#[derive(Debug, Default)]
struct Reading {
    share: AtomicU64,
    until: AtomicU64,
}

impl Reading {
    fn set(&self, share: f64, until: u64) {
        self.share.store(share.clamp(0.0, 1.0).to_bits(), Relaxed);
        self.until.store(until, Relaxed);
    }

    /// (share, until).
    fn load(&self) -> (f64, u64) {
        (
            f64::from_bits(self.share.load(Relaxed)),
            self.until.load(Relaxed),
        )
    }
}

/// The shares of a window's limits its own counts last showed (a
/// deployment's window, or its provider pool's): rpm and tpm.
#[derive(Debug, Default)]
pub struct Counts([Reading; 2]);

impl Counts {
    /// `used` of `limit` in `dim`'s window at `now` (no limit: nothing to
    /// tell). Holds for the window's length unless read again.
    pub fn observe(&self, clock: &Clock, now: Instant, dim: Dim, used: u64, limit: Option<u64>) {
        if let Some(limit) = limit.filter(|l| *l > 0) {
            let until = clock.ms(now) + RATE_WINDOW.as_millis() as u64;
            self.0[dim as usize].set(used as f64 / limit as f64, until);
        }
    }
}

/// A deployment's quota standing at one moment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Standing {
    /// The share used per dimension (rpm, tpm), 0 when nothing is known.
    pub used: [f64; 2],
    /// The routing weight in [0, 1]: 1 below `shift`; 0 past `stop`.
    pub weight: f64,
    /// Past `stop`: it serves only when nothing else can.
    pub stopped: bool,
}

impl Standing {
    /// Nothing known, or nothing near a limit.
    pub const FULL: Standing = Standing {
        used: [0.0; 2],
        weight: 1.0,
        stopped: false,
    };
}

/// One deployment's quota: its own counts, the upstream's headers, and its
/// weight as it moves.
#[derive(Debug)]
pub struct Quota {
    clock: Clock,
    shift: AtomicU64,
    stop: AtomicU64,
    /// Its own window's shares.
    pub own: Counts,
    headers: [Reading; 2],
    /// The weight (24 high bits, in 1/[`W_SCALE`]) and when it was last
    /// moved (40 low bits, [`Clock`] ms): one word, so a read that moves it
    /// never tears it.
    weight: AtomicU64,
}

const W_SCALE: f64 = ((1u64 << 24) - 1) as f64;
const MS_BITS: u32 = 40;
const MS_MASK: u64 = (1 << MS_BITS) - 1;

fn pack(weight: f64, ms: u64) -> u64 {
    let w = (weight.clamp(0.0, 1.0) * W_SCALE).round() as u64;
    (w << MS_BITS) | (ms & MS_MASK)
}

fn unpack(word: u64) -> (f64, u64) {
    ((word >> MS_BITS) as f64 / W_SCALE, word & MS_MASK)
}

impl Quota {
    pub fn new(clock: Clock, now: Instant, settings: Settings) -> Quota {
        let q = Quota {
            clock,
            shift: AtomicU64::new(0),
            stop: AtomicU64::new(0),
            own: Counts::default(),
            headers: Default::default(),
            weight: AtomicU64::new(pack(1.0, clock.ms(now))),
        };
        q.set_settings(settings);
        q
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// `providers.<p>.quota` (again, on a reload).
    pub fn set_settings(&self, s: Settings) {
        self.shift.store(s.shift.to_bits(), Relaxed);
        self.stop.store(s.stop.to_bits(), Relaxed);
    }

    fn settings(&self) -> (f64, f64) {
        (
            f64::from_bits(self.shift.load(Relaxed)),
            f64::from_bits(self.stop.load(Relaxed)),
        )
    }

    /// The upstream's quota headers on an answer: the share used per
    /// dimension, when it sends both the limit and what is left.
    pub fn observe_headers(&self, now: Instant, pool: &Counts, h: &QuotaHeaders) {
        let t = self.clock.ms(now);
        let mut settled = false;
        for (reading, slot) in h.0.iter().zip(&self.headers) {
            let Some((share, r)) = reading.and_then(|r| Some((r.used_share()?, r))) else {
                continue;
            };
            if !settled {
                // The weight moved under the old readings until now.
                self.read(now, pool, 1);
                settled = true;
            }
            let hold = r.reset.unwrap_or(HEADER_HOLD).min(MAX_HEADER_HOLD);
            slot.set(share, t + hold.as_millis() as u64);
        }
    }

    /// Before a new count is stored: the weight moved under the old
    /// readings until now.
    pub fn settle(&self, now: Instant, pool: &Counts) {
        self.read(now, pool, 1);
    }

    /// The standing at `now` (`pool`: its provider pool's counts).
    pub fn standing(&self, now: Instant, pool: &Counts) -> Standing {
        self.read(now, pool, COMMIT_MS)
    }

    /// The standing at `now`, storing the moved weight when the last store
    /// is at least `commit_ms` old.
    fn read(&self, now: Instant, pool: &Counts, commit_ms: u64) -> Standing {
        let t = self.clock.ms(now);
        let (shift, stop) = self.settings();
        // Rpm readings first, then tpm: own, pool, headers.
        let readings: [(f64, u64); 6] = [
            self.own.0[0].load(),
            pool.0[0].load(),
            self.headers[0].load(),
            self.own.0[1].load(),
            pool.0[1].load(),
            self.headers[1].load(),
        ];
        let used_at = |at: u64| -> [f64; 2] {
            let max = |rs: &[(f64, u64)]| {
                rs.iter()
                    .filter(|(_, until)| *until > at)
                    .fold(0.0, |m: f64, (s, _)| m.max(*s))
            };
            [max(&readings[..3]), max(&readings[3..])]
        };
        let word = self.weight.load(Relaxed);
        let (mut w, from) = unpack(word);
        // The targets change when a reading runs out: move through each
        // stretch under the target it had (no allocation: six at most).
        let mut ends = readings.map(|(_, until)| until);
        ends.sort_unstable();
        let mut at = from;
        for end in ends.into_iter().filter(|e| *e > from && *e < t).chain([t]) {
            if end <= at {
                continue;
            }
            let [r, k] = used_at(at);
            w = step(w, target(r.max(k), shift, stop), end - at);
            at = end;
        }
        if t >= from + commit_ms {
            // Lost to a concurrent read: that one stored the same move.
            let _ = self
                .weight
                .compare_exchange(word, pack(w, t), Relaxed, Relaxed);
        }
        let used = used_at(t);
        let stopped = used[0].max(used[1]) >= stop;
        Standing {
            used,
            weight: if stopped { 0.0 } else { w },
            stopped,
        }
    }
}

/// The weight a share used asks for: 1 up to `shift`, falling linearly to
/// 0 at `stop`.
pub fn target(used: f64, shift: f64, stop: f64) -> f64 {
    if used <= shift {
        1.0
    } else if used >= stop {
        0.0
    } else {
        (stop - used) / (stop - shift)
    }
}

/// `w` moved toward `target` by what `ms` allows.
fn step(w: f64, target: f64, ms: u64) -> f64 {
    let most = MAX_STEP * ms as f64 / STEP_PERIOD.as_millis() as f64;
    if target < w {
        (w - most).max(target)
    } else {
        (w + most).min(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::limits::QuotaReading;
    use tokio::time::advance;

    const S: Duration = Duration::from_secs(1);

    fn quota() -> (Quota, Counts) {
        let now = Instant::now();
        let q = Quota::new(Clock::new(now), now, Settings::default());
        (q, Counts::default())
    }

    fn headers(limit: u64, remaining: u64, reset: Option<Duration>) -> QuotaHeaders {
        let r = QuotaReading {
            limit: Some(limit),
            remaining,
            reset,
        };
        QuotaHeaders([Some(r), None])
    }

    fn weight(q: &Quota, pool: &Counts) -> f64 {
        (q.standing(Instant::now(), pool).weight * 1e4).round() / 1e4
    }

    #[test]
    fn the_target_is_1_to_shift_then_falls_linearly_to_0_at_stop() {
        let (shift, stop) = (0.85, 0.97);
        assert_eq!(target(0.0, shift, stop), 1.0);
        assert_eq!(target(0.85, shift, stop), 1.0);
        assert!((target(0.91, shift, stop) - 0.5).abs() < 1e-9);
        assert_eq!(target(0.97, shift, stop), 0.0);
        assert_eq!(target(1.0, shift, stop), 0.0);
    }

    /// Headers saying 91% used ask for a weight of 0.5: it gets there a
    /// fifth per 10 s, not at once; recovered, it climbs back the same way.
    #[tokio::test(start_paused = true)]
    async fn the_weight_moves_at_most_a_fifth_per_ten_seconds_both_ways() {
        let (q, pool) = quota();
        advance(30 * S).await;
        assert_eq!(weight(&q, &pool), 1.0);
        // Each answer says 91% used; the reading holds for its reset.
        let answer = |q: &Quota| {
            q.observe_headers(Instant::now(), &pool, &headers(100, 9, Some(30 * S)));
        };
        answer(&q);
        assert_eq!(weight(&q, &pool), 1.0, "nothing has moved yet");
        let s = q.standing(Instant::now(), &pool);
        assert!((s.used[0] - 0.91).abs() < 1e-9 && s.used[1] == 0.0);
        advance(5 * S).await;
        assert_eq!(weight(&q, &pool), 0.9);
        answer(&q);
        advance(5 * S).await;
        assert_eq!(weight(&q, &pool), 0.8);
        answer(&q);
        advance(20 * S).await;
        answer(&q);
        assert_eq!(weight(&q, &pool), 0.5, "at the target, and no lower");
        advance(S).await;
        assert_eq!(weight(&q, &pool), 0.5);
        // Recovered: 10% used.
        q.observe_headers(Instant::now(), &pool, &headers(100, 90, Some(30 * S)));
        advance(10 * S).await;
        assert_eq!(weight(&q, &pool), 0.7);
        advance(15 * S).await;
        assert_eq!(weight(&q, &pool), 1.0);
    }

    /// A reading runs out at its reset: the weight climbs from then on,
    /// not from the last time it was read.
    #[tokio::test(start_paused = true)]
    async fn a_reading_that_runs_out_lets_the_weight_climb_from_then() {
        let (q, pool) = quota();
        q.observe_headers(Instant::now(), &pool, &headers(100, 3, Some(40 * S)));
        let s = q.standing(Instant::now(), &pool);
        assert!(s.stopped && s.weight == 0.0, "97% used: held back at once");
        advance(30 * S).await;
        assert_eq!(q.standing(Instant::now(), &pool).weight, 0.0);
        // Unread from 30 s; the reading ran out at 40 s, when the weight
        // had fallen to 0.2: a fifth back by 50 s.
        advance(20 * S).await;
        let s = q.standing(Instant::now(), &pool);
        assert!(!s.stopped);
        assert!((s.weight - 0.4).abs() < 1e-3, "{s:?}");
        // Headers without a reset hold for 60 s; without a limit, nothing.
        let (q, pool) = quota();
        q.observe_headers(Instant::now(), &pool, &headers(100, 2, None));
        advance(59 * S).await;
        assert!(q.standing(Instant::now(), &pool).stopped);
        advance(S).await;
        assert!(!q.standing(Instant::now(), &pool).stopped);
        let no_limit = QuotaHeaders([
            Some(QuotaReading {
                limit: None,
                remaining: 0,
                reset: None,
            }),
            None,
        ]);
        q.observe_headers(Instant::now(), &pool, &no_limit);
        assert_eq!(q.standing(Instant::now(), &pool).used, [0.0, 0.0]);
    }

    /// Own counts and the pool's count toward the share; the largest wins,
    /// each dimension apart; a count holds for the window's length.
    #[tokio::test(start_paused = true)]
    async fn own_counts_and_the_pools_count_the_largest_wins() {
        let (q, pool) = quota();
        let c = *q.clock();
        let now = Instant::now();
        q.own.observe(&c, now, Dim::Rpm, 45, Some(100));
        q.own.observe(&c, now, Dim::Tpm, 10, None);
        pool.observe(&c, now, Dim::Tpm, 880, Some(1000));
        let s = q.standing(now, &pool);
        assert!((s.used[0] - 0.45).abs() < 1e-9, "{s:?}");
        assert!((s.used[1] - 0.88).abs() < 1e-9, "{s:?}");
        assert!(!s.stopped);
        pool.observe(&c, now, Dim::Rpm, 99, Some(100));
        assert!(q.standing(now, &pool).stopped, "the pool is all but spent");
        advance(RATE_WINDOW).await;
        assert_eq!(q.standing(Instant::now(), &pool).used, [0.0, 0.0]);
        // Settings follow a reload.
        q.set_settings(Settings {
            shift: 0.2,
            stop: 0.4,
        });
        q.own.observe(&c, Instant::now(), Dim::Rpm, 50, Some(100));
        assert!(q.standing(Instant::now(), &pool).stopped);
    }

    #[test]
    fn the_packed_weight_round_trips() {
        for (w, ms) in [(0.0, 1), (1.0, MS_MASK), (0.5, 123_456), (0.123_456_7, 9)] {
            let (w2, ms2) = unpack(pack(w, ms));
            assert!((w - w2).abs() < 1e-7, "{w} {w2}");
            assert_eq!(ms, ms2);
        }
        assert_eq!(step(1.0, 0.0, 10_000), 0.8);
        assert_eq!(step(0.0, 1.0, 5_000), 0.1);
        assert_eq!(step(0.5, 0.55, 10_000), 0.55);
    }
}
