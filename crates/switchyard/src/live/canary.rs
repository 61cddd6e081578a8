//! Canary reloads (contract §11): a new config serves a share of requests
//! beside the one in force, each version's outcomes are tallied apart, and
//! the new one is promoted after its time or rolled back at once when it
//! does worse than the old by `reload.rollback_on`'s margins.
//!
//! In a fleet (`state.backend: redis`) a run of the same version over the
//! same config is one run on every instance (`state::fleet_canary`): the
//! first to start it sets its share and deadline and the others adopt
//! them; each judge tick adds this instance's counts to the fleet's and
//! judges on the sum (error rates and p95 alike: the latency histograms
//! are added bucket by bucket); and a rollback decided anywhere rolls it
//! back everywhere at the next tick. Alone, or with Redis away, a run is
//! judged on this instance's counts.
//!
//! Which version serves is drawn per request ([`Canary::serving`]: one
//! atomic load when no canary runs). A finished request is tallied by its
//! record's `config_version` ([`Canary`] is a sink), so a stream counts when
//! it ends, with its whole duration. Both versions see the same mix of
//! requests, so errors the clients cause weigh on both alike; a verdict on
//! the margins waits until each version has [`MIN_REQUESTS`] requests.
//! The admin API (`admin::reload`) starts a run and acts on its verdicts.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use rand::Rng;
use tokio::time::Instant;

use super::{Live, SharedLive};
use crate::config::RollbackOn;
use crate::observe::record::Record;
use crate::observe::sink::Sink;
use crate::state::fleet::now_ms;
use crate::state::fleet_canary::{CanaryCounts, CanaryFleet, CanaryTerms};
use crate::state::shared::Shared;

/// Requests each version needs before its error rate or p95 decides.
pub const MIN_REQUESTS: u64 = 20;
/// A p95 worse by less than this is noise, whatever the factor says (a
/// 2 ms p95 against 1 ms is not a reason to roll back).
pub const P95_FLOOR: Duration = Duration::from_millis(25);

/// The canary slot: empty, or the one run in progress.
#[derive(Default)]
pub struct Canary {
    run: ArcSwapOption<Run>,
}

/// One canary: the new config, its share of requests, until when, and
/// both versions' tallies.
pub struct Run {
    pub live: Arc<Live>,
    /// The version in force when the canary began.
    pub old_version: Arc<str>,
    /// Share of requests the new config serves, in (0, 1).
    pub share: f64,
    pub started_at: Instant,
    /// Promoted at this instant unless rolled back first.
    pub until: Instant,
    /// The share and deadline as the fleet knows them (the deadline on
    /// the wall clock).
    pub terms: CanaryTerms,
    /// The fleet's name for this run: the new version over the old.
    pub fleet_run: String,
    /// This instance's counts (old, new) already added to the fleet's.
    pushed: Mutex<[CanaryCounts; 2]>,
    /// The fleet's counts at the last tick (`None` alone, or before one).
    fleet: Mutex<Option<CanaryFleet>>,
    /// The margins, from the config in force (a new config cannot loosen
    /// its own judge).
    pub rollback_on: RollbackOn,
    pub old: Tally,
    pub new: Tally,
}

/// What to do with a run now.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Continue,
    Promote,
    RollBack(String),
}

impl Canary {
    /// The snapshot a request is served by: the canary's for its share of
    /// requests, else the one in force.
    pub fn serving(&self, stable: &SharedLive) -> Arc<Live> {
        if let Some(run) = &*self.run.load() {
            if rand::rng().random::<f64>() < run.share {
                return run.live.clone();
            }
        }
        stable.load_full()
    }

    /// Begins `run` unless one is in progress (`None` then).
    pub fn start(&self, run: Run) -> Option<Arc<Run>> {
        let run = Arc::new(run);
        let prev = self
            .run
            .compare_and_swap(&None::<Arc<Run>>, Some(run.clone()));
        prev.is_none().then_some(run)
    }

    /// The run in progress, if any.
    pub fn current(&self) -> Option<Arc<Run>> {
        self.run.load_full()
    }

    /// Ends `run` if it is still the one in progress; whether it was.
    pub fn end(&self, run: &Arc<Run>) -> bool {
        let prev = self
            .run
            .compare_and_swap(&Some(run.clone()), None::<Arc<Run>>);
        prev.as_ref().is_some_and(|p| Arc::ptr_eq(p, run))
    }
}

impl Sink for Canary {
    fn finished(&self, r: &Record) {
        let guard = self.run.load();
        let Some(run) = &*guard else { return };
        // Probes are the gateway's own calls, not served requests.
        if r.probe.is_some() {
            return;
        }
        let tally = if *r.config_version == *run.live.version {
            &run.new
        } else if *r.config_version == *run.old_version {
            &run.old
        } else {
            return;
        };
        tally.add(r.status, r.duration_ms);
    }
}

/// The fleet's name for the run of `new` over `old`.
pub fn fleet_run(new: &str, old: &str) -> String {
    format!("{new}:{old}")
}

/// The terms a run asks for when no instance has started it yet: `share`
/// of requests, promoted `lasts` from now.
pub fn proposed(share: f64, lasts: Duration) -> CanaryTerms {
    CanaryTerms {
        share,
        until_ms: now_ms() + lasts.as_millis() as u64,
    }
}

impl Run {
    /// `live` served beside `old` on `terms` (the fleet's, when it has
    /// them).
    pub fn new(live: Arc<Live>, old: &Live, terms: CanaryTerms) -> Run {
        let left = Duration::from_millis(terms.until_ms.saturating_sub(now_ms()));
        Run {
            fleet_run: fleet_run(&live.version, &old.version),
            live,
            old_version: old.version.clone(),
            share: terms.share,
            started_at: Instant::now(),
            until: Instant::now() + left,
            terms,
            rollback_on: old.config.reload.rollback_on,
            old: Tally::default(),
            new: Tally::default(),
            pushed: Mutex::default(),
            fleet: Mutex::default(),
        }
    }

    /// One judge tick (the only place a run touches the shared state, never
    /// a request): this instance's counts since its last tick go to the
    /// fleet, and the verdict is on the fleet's counts — or the fleet's
    /// rollback, when another instance decided one. A rollback decided here
    /// is published for the others. Alone, or with Redis away, the verdict
    /// is on this instance's counts. Either way: roll back when the new
    /// version does worse than the margins allow, promote when its time is
    /// up, else keep going.
    pub async fn judge(&self, shared: &dyn Shared, now: Instant) -> Verdict {
        let mine = [self.old.counts(), self.new.counts()];
        let added = {
            let pushed = lock(&self.pushed);
            [mine[0].since(&pushed[0]), mine[1].since(&pushed[1])]
        };
        let Some(fleet) = shared.canary_tick(&self.fleet_run, self.terms, added).await else {
            return verdict_of(&mine[0], &mine[1], self.rollback_on, now, self.until);
        };
        *lock(&self.pushed) = mine;
        let verdict = match &fleet.rolled_back {
            Some(why) => Verdict::RollBack(format!("rolled back by the fleet: {why}")),
            None => verdict_of(&fleet.old, &fleet.new, self.rollback_on, now, self.until),
        };
        if let (Verdict::RollBack(why), None) = (&verdict, &fleet.rolled_back) {
            shared
                .canary_rolled_back(&self.fleet_run, self.terms, why)
                .await;
        }
        *lock(&self.fleet) = Some(fleet);
        verdict
    }

    /// The fleet's counts (old, new) at the last tick, when it shares them.
    pub fn fleet_counts(&self) -> Option<(CanaryCounts, CanaryCounts)> {
        lock(&self.fleet)
            .as_ref()
            .map(|f| (f.old.clone(), f.new.clone()))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn verdict_of(
    old: &CanaryCounts,
    new: &CanaryCounts,
    margin: RollbackOn,
    now: Instant,
    until: Instant,
) -> Verdict {
    if old.requests >= MIN_REQUESTS && new.requests >= MIN_REQUESTS {
        let (eo, en) = (error_rate(old), error_rate(new));
        if en > eo + margin.error_rate {
            return Verdict::RollBack(format!(
                "error rate {:.1}% against {:.1}% (margin {:.1} points)",
                en * 100.0,
                eo * 100.0,
                margin.error_rate * 100.0
            ));
        }
        let (po, pn) = (p95_ms(&old.latency), p95_ms(&new.latency));
        if pn > po * margin.p95 && pn - po > P95_FLOOR.as_secs_f64() * 1000.0 {
            return Verdict::RollBack(format!(
                "p95 {pn:.0} ms against {po:.0} ms (margin {}x)",
                margin.p95
            ));
        }
    }
    if now >= until {
        Verdict::Promote
    } else {
        Verdict::Continue
    }
}

/// Latency buckets: four to an octave of milliseconds, up to ~70 minutes.
const BUCKETS: usize = 88;

/// One version's outcomes: requests, errors (status 400 and up, a client
/// that went away excepted) and a latency histogram.
pub struct Tally {
    requests: AtomicU64,
    errors: AtomicU64,
    latency: [AtomicU64; BUCKETS],
}

impl Default for Tally {
    fn default() -> Self {
        Tally {
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl Tally {
    pub fn add(&self, status: u16, ms: f64) {
        self.requests.fetch_add(1, Relaxed);
        if status >= 400 && status != 499 {
            self.errors.fetch_add(1, Relaxed);
        }
        self.latency[bucket(ms)].fetch_add(1, Relaxed);
    }

    pub fn requests(&self) -> u64 {
        self.requests.load(Relaxed)
    }

    pub fn errors(&self) -> u64 {
        self.errors.load(Relaxed)
    }

    pub fn error_rate(&self) -> f64 {
        error_rate(&self.counts())
    }

    /// The 95th percentile's bucket's upper bound, in ms (0 with no
    /// requests).
    pub fn p95_ms(&self) -> f64 {
        p95_ms(&self.counts().latency)
    }

    /// The running totals, as the fleet adds them up.
    pub fn counts(&self) -> CanaryCounts {
        CanaryCounts {
            requests: self.requests(),
            errors: self.errors(),
            latency: self.latency.iter().map(|c| c.load(Relaxed)).collect(),
        }
    }
}

/// Errors per request (0 with none).
pub fn error_rate(c: &CanaryCounts) -> f64 {
    if c.requests == 0 {
        0.0
    } else {
        c.errors as f64 / c.requests as f64
    }
}

/// The 95th percentile's bucket's upper bound over a latency histogram's
/// buckets, in ms (0 when empty).
pub fn p95_ms(latency: &[u64]) -> f64 {
    let total: u64 = latency.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let rank = (total as f64 * 0.95).ceil() as u64;
    let mut seen = 0;
    for (i, c) in latency.iter().enumerate() {
        seen += c;
        if seen >= rank {
            return upper(i.min(BUCKETS - 1));
        }
    }
    upper(BUCKETS - 1)
}

fn bucket(ms: f64) -> usize {
    let ms = if ms.is_finite() { ms.max(0.0) } else { 0.0 };
    ((4.0 * (ms + 1.0).log2()) as usize).min(BUCKETS - 1)
}

/// The largest latency bucket `i` holds.
fn upper(i: usize) -> f64 {
    2f64.powf((i + 1) as f64 / 4.0) - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(n: u64, errors: u64, ms: f64) -> Tally {
        let t = Tally::default();
        for i in 0..n {
            t.add(if i < errors { 502 } else { 200 }, ms);
        }
        t
    }

    /// The verdict on given tallies with the default margins, before or
    /// past the run's end.
    fn verdict(old: Tally, new: Tally, past_end: bool) -> Verdict {
        let now = Instant::now();
        let until = if past_end {
            now
        } else {
            now + Duration::from_secs(60)
        };
        verdict_of(
            &old.counts(),
            &new.counts(),
            RollbackOn::default(),
            now,
            until,
        )
    }

    #[test]
    fn a_worse_error_rate_rolls_back_once_both_have_enough_requests() {
        // 10% errors against 0%: over the 5-point margin.
        assert!(matches!(
            verdict(tally(40, 0, 10.0), tally(40, 4, 10.0), false),
            Verdict::RollBack(m) if m.contains("error rate 10.0% against 0.0%")
        ));
        // Within the margin: keeps going, then promoted.
        assert_eq!(
            verdict(tally(40, 1, 10.0), tally(40, 3, 10.0), false),
            Verdict::Continue
        );
        assert_eq!(
            verdict(tally(40, 1, 10.0), tally(40, 3, 10.0), true),
            Verdict::Promote
        );
        // Too few requests on the new version to judge.
        assert_eq!(
            verdict(tally(40, 0, 10.0), tally(MIN_REQUESTS - 1, 10, 10.0), false),
            Verdict::Continue
        );
    }

    #[test]
    fn a_slower_p95_rolls_back_but_not_within_the_noise_floor() {
        assert!(matches!(
            verdict(tally(40, 0, 100.0), tally(40, 0, 400.0), false),
            Verdict::RollBack(m) if m.starts_with("p95")
        ));
        // Twice as slow, but 2 ms against 1 ms.
        assert_eq!(
            verdict(tally(40, 0, 1.0), tally(40, 0, 2.0), false),
            Verdict::Continue
        );
    }

    #[test]
    fn the_p95_is_read_from_the_histogram() {
        let t = Tally::default();
        for i in 0..100 {
            t.add(200, if i < 95 { 10.0 } else { 1000.0 });
        }
        let p = t.p95_ms();
        assert!((8.0..14.0).contains(&p), "{p}");
        t.add(200, 1000.0);
        t.add(200, 1000.0);
        assert!(t.p95_ms() > 800.0, "{}", t.p95_ms());
        // Odd inputs stay in range.
        t.add(200, f64::NAN);
        t.add(200, -5.0);
        t.add(200, 1e12);
        assert_eq!(t.requests(), 105);
    }

    #[test]
    fn a_client_that_went_away_is_not_an_error() {
        let t = Tally::default();
        t.add(499, 5.0);
        t.add(404, 5.0);
        t.add(200, 5.0);
        assert_eq!((t.requests(), t.errors()), (3, 1));
    }
}
