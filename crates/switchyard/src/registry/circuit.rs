//! Per-deployment circuit breaker.
//!
//! ```text
//!            failure rate / consecutive failures / slow p95
//!   closed ───────────────────────────────────────────────► open
//!     ▲                                                   │  ▲
//!     │ probe ok (window reset,                 cooldown  │  │ probe failed
//!     │ cooldown back to base)                  elapsed   ▼  │ (cooldown ×2, capped)
//!     └──────────────────────────────────────────────── half_open (one probe)
//! ```
//! All state lives in the [`StateStore`]: one record (mode, until, cooldown),
//! a windowed counter (requests, failures, slow) and a consecutive-failure
//! counter, so a shared store gives every gateway instance the same breaker.
//! The request path costs one record read (`admit`) and one counter add
//! (`record`); thresholds are only evaluated on a failure or a slow answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::time::Instant;

use crate::config::Circuit;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::state::store::{Record, StateStore};

/// How long a probe may stay out before another caller may probe instead
/// (a probe whose request was dropped must not wedge the breaker half-open).
pub const PROBE_LEASE: Duration = Duration::from_secs(30);

/// The longest cooldown after repeated failed probes: 3× the configured one,
/// but no more than 20 s, and never below the configured one. So a primary
/// that recovers is probed, and serves again, within max(cooldown, 20 s).
pub fn cooldown_cap(base: Duration) -> Duration {
    base.max((base * 3).min(Duration::from_secs(20)))
}

/// Does this error count against the deployment's circuit? Only upstream
/// faults: a client error is the client's, and a 429 means back off, not down.
pub fn counts_as_failure(err: &GatewayError) -> bool {
    err.source == Source::Upstream
        && matches!(
            err.code,
            ErrorCode::Overloaded
                | ErrorCode::UpstreamError
                | ErrorCode::Timeout
                | ErrorCode::ConnectionError
        )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CircuitState {
    Closed,
    Open,
    HalfOpen,
}

impl CircuitState {
    /// `/admin/state` `circuit` and the `switchyard_circuit_state{state}` label.
    pub fn as_str(self) -> &'static str {
        match self {
            CircuitState::Closed => "closed",
            CircuitState::Open => "open",
            CircuitState::HalfOpen => "half_open",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Allowed,
    /// The one trial request of a half-open breaker; report it with `probe: true`.
    Probe,
    Rejected {
        retry_in: Duration,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// `false` when [`counts_as_failure`] said so.
    pub ok: bool,
    pub latency: Duration,
    /// This was the request [`Admit::Probe`] let through.
    pub probe: bool,
}

/// A state change, for the decision log and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: CircuitState,
    pub to: CircuitState,
    pub reason: &'static str,
}

// Record layout: [mode, until_ms, cooldown_ms, 0]. No record = closed, base cooldown.
const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
const FORCED_OPEN: u64 = 3;
// Windowed counter fields.
const REQ: usize = 0;
const FAIL: usize = 1;
const SLOW: usize = 2;

pub struct Breaker {
    store: Arc<dyn StateStore>,
    cfg: ArcSwap<Circuit>,
    /// The provider is probed (`probe:`): the half-open trial is the
    /// prober's ([`Breaker::claim_probe`]), never a client's request.
    probed: AtomicBool,
    rec_key: Box<str>,
    win_key: Box<str>,
    run_key: Box<str>,
}

impl Breaker {
    /// `scope` names the deployment in the store (e.g. `dep:openai/gpt-4o`).
    pub fn new(store: Arc<dyn StateStore>, scope: &str, cfg: Circuit) -> Self {
        Breaker {
            store,
            cfg: ArcSwap::from_pointee(cfg),
            probed: AtomicBool::new(false),
            rec_key: format!("{scope}:cb").into(),
            win_key: format!("{scope}:cb:win").into(),
            run_key: format!("{scope}:cb:run").into(),
        }
    }

    /// A reload's new settings; the state itself is kept.
    pub fn set_config(&self, cfg: Circuit) {
        self.cfg.store(Arc::new(cfg));
    }

    /// Whether background probes, not client requests, try the deployment
    /// once its cooldown is over.
    pub fn set_probed(&self, probed: bool) {
        self.probed.store(probed, Ordering::Relaxed);
    }

    fn probed(&self) -> bool {
        self.probed.load(Ordering::Relaxed)
    }

    fn base(&self) -> Duration {
        self.cfg.load().cooldown
    }

    fn read(&self, now: Instant) -> Option<Record> {
        self.store.get(&self.rec_key, now)
    }

    fn mode(rec: Option<Record>) -> u64 {
        rec.map_or(CLOSED, |r| r.0[0])
    }

    fn cooldown_of(&self, rec: Option<Record>) -> Duration {
        match rec {
            Some(r) if r.0[2] > 0 => Duration::from_millis(r.0[2]),
            _ => self.base(),
        }
    }

    fn rec(&self, mode: u64, until_ms: u64, cooldown: Duration) -> Record {
        Record([mode, until_ms, cooldown.as_millis() as u64, 0])
    }

    /// Would `admit` let a request through now? (Read-only: for planning,
    /// which must not claim the half-open probe.)
    pub fn is_admissible(&self, now: Instant) -> bool {
        let rec = self.read(now);
        let until = rec.map_or(0, |r| r.0[1]);
        match Self::mode(rec) {
            CLOSED => true,
            FORCED_OPEN => false,
            _ if self.probed() => false,
            _ => self.store.millis(now) >= until,
        }
    }

    pub fn admit(&self, now: Instant) -> Admit {
        let rec = self.read(now);
        let now_ms = self.store.millis(now);
        let until = rec.map_or(0, |r| r.0[1]);
        let wait = Duration::from_millis(until.saturating_sub(now_ms));
        match Self::mode(rec) {
            CLOSED => Admit::Allowed,
            FORCED_OPEN => Admit::Rejected {
                retry_in: self.cooldown_of(rec),
            },
            // Cooldown or the probe's lease still running.
            _ if now_ms < until => Admit::Rejected { retry_in: wait },
            // The prober tries it; a request waits for its word.
            _ if self.probed() => Admit::Rejected {
                retry_in: self.cooldown_of(rec),
            },
            _ => self.claim(rec, now_ms, now),
        }
    }

    /// Open (or half-open with its trial's lease run out) and past its
    /// cooldown: the prober may try it (read-only).
    pub fn is_probe_due(&self, now: Instant) -> bool {
        let rec = self.read(now);
        matches!(Self::mode(rec), OPEN | HALF_OPEN)
            && self.store.millis(now) >= rec.map_or(0, |r| r.0[1])
    }

    /// The prober's half-open trial: `true` when the cooldown is over and
    /// this caller (of every instance sharing the store) won the trial;
    /// report its outcome with `probe: true`.
    pub fn claim_probe(&self, now: Instant) -> bool {
        let rec = self.read(now);
        let now_ms = self.store.millis(now);
        match Self::mode(rec) {
            OPEN | HALF_OPEN if now_ms >= rec.map_or(0, |r| r.0[1]) => {
                self.claim(rec, now_ms, now) == Admit::Probe
            }
            _ => false,
        }
    }

    /// Half-open, leased to one caller: the swap picks exactly one.
    fn claim(&self, rec: Option<Record>, now_ms: u64, now: Instant) -> Admit {
        let lease = now_ms + PROBE_LEASE.as_millis() as u64;
        let claim = self.rec(HALF_OPEN, lease, self.cooldown_of(rec));
        // Exactly one caller wins the swap; the rest see the lease.
        if self
            .store
            .swap_if(&self.rec_key, rec, Some(claim), None, now)
        {
            Admit::Probe
        } else {
            Admit::Rejected {
                retry_in: PROBE_LEASE,
            }
        }
    }

    pub fn state(&self) -> CircuitState {
        match Self::mode(self.read(Instant::now())) {
            CLOSED => CircuitState::Closed,
            HALF_OPEN => CircuitState::HalfOpen,
            _ => CircuitState::Open,
        }
    }

    pub fn record(&self, now: Instant, outcome: Outcome) -> Option<Transition> {
        let cfg = **self.cfg.load();
        if outcome.probe {
            return self.settle_probe(now, outcome.ok);
        }
        let slow = cfg.latency_p95.is_some_and(|t| outcome.latency > t);
        let fail = !outcome.ok;
        self.store.add(
            &self.win_key,
            cfg.window,
            now,
            &[(REQ, 1), (FAIL, i64::from(fail)), (SLOW, i64::from(slow))],
        );
        let run = if fail {
            self.store.incr(&self.run_key, cfg.window, now, &[(0, 1)])
        } else {
            self.store.clear(&self.run_key);
            0
        };
        if !fail && !slow {
            return None;
        }
        let rec = self.read(now);
        if Self::mode(rec) != CLOSED {
            return None;
        }
        let reason = self.trip_reason(&cfg, now, run)?;
        let cooldown = self.cooldown_of(rec);
        let open = self.rec(
            OPEN,
            self.store.millis(now) + cooldown.as_millis() as u64,
            cooldown,
        );
        // Lost race: someone else already moved it; their transition is logged.
        self.store
            .swap_if(&self.rec_key, rec, Some(open), None, now)
            .then_some(Transition {
                from: CircuitState::Closed,
                to: CircuitState::Open,
                reason,
            })
    }

    fn trip_reason(&self, cfg: &Circuit, now: Instant, run: i64) -> Option<&'static str> {
        if cfg.consecutive_failures > 0 && run >= i64::from(cfg.consecutive_failures) {
            return Some("consecutive_failures");
        }
        let mut c = [0i64; 3];
        self.store.sum(&self.win_key, cfg.window, now, &mut c);
        if c[REQ] < i64::from(cfg.min_requests.max(1)) {
            return None;
        }
        if c[FAIL] as f64 >= cfg.failure_rate * c[REQ] as f64 {
            return Some("failure_rate");
        }
        // p95 > limit exactly when more than 5% of the samples are over it.
        if cfg.latency_p95.is_some() && c[SLOW] * 20 > c[REQ] {
            return Some("latency_p95");
        }
        None
    }

    fn settle_probe(&self, now: Instant, ok: bool) -> Option<Transition> {
        let rec = self.read(now);
        if Self::mode(rec) != HALF_OPEN {
            return None;
        }
        let (next, to, reason) = if ok {
            // Recovered: fresh window, and the cooldown growth is forgotten.
            (None, CircuitState::Closed, "probe_ok")
        } else {
            let grown = (self.cooldown_of(rec) * 2).min(cooldown_cap(self.base()));
            let until = self.store.millis(now) + grown.as_millis() as u64;
            (
                Some(self.rec(OPEN, until, grown)),
                CircuitState::Open,
                "probe_failed",
            )
        };
        if !self.store.swap_if(&self.rec_key, rec, next, None, now) {
            return None;
        }
        if ok {
            self.clear_counts();
        }
        Some(Transition {
            from: CircuitState::HalfOpen,
            to,
            reason,
        })
    }

    fn clear_counts(&self) {
        self.store.clear(&self.win_key);
        self.store.clear(&self.run_key);
    }

    fn set(&self, next: Option<Record>, to: CircuitState, reason: &'static str) -> Transition {
        let now = Instant::now();
        let from = self.state();
        self.store.put(&self.rec_key, next, None, now);
        Transition { from, to, reason }
    }

    /// Operator: open until [`Breaker::force_close`] or [`Breaker::reset`].
    pub fn force_open(&self) -> Transition {
        let cd = self.cooldown_of(self.read(Instant::now()));
        self.set(
            Some(self.rec(FORCED_OPEN, 0, cd)),
            CircuitState::Open,
            "forced_open",
        )
    }

    /// Operator: closed with fresh counts; a grown cooldown is remembered
    /// (an operator's word is not proof of recovery).
    pub fn force_close(&self) -> Transition {
        let cd = self.cooldown_of(self.read(Instant::now()));
        self.clear_counts();
        self.set(
            Some(self.rec(CLOSED, 0, cd)),
            CircuitState::Closed,
            "forced_close",
        )
    }

    /// The breaker's record as it travels to the other instances of a
    /// fleet: mode, time left (ms) and cooldown.
    pub fn shared(&self) -> crate::state::fleet::SharedCircuit {
        let now = Instant::now();
        let rec = self.read(now);
        let until = rec.map_or(0, |r| r.0[1]);
        crate::state::fleet::SharedCircuit {
            mode: Self::mode(rec),
            left_ms: until.saturating_sub(self.store.millis(now)),
            cooldown_ms: self.cooldown_of(rec).as_millis() as u64,
        }
    }

    /// Another instance's transition, `age_ms` after it was made: the same
    /// mode here, for what is left of its time. A half-open state travels
    /// as open (each instance runs its own probe once the time is up).
    pub fn apply_shared(&self, c: crate::state::fleet::SharedCircuit, age_ms: u64) {
        let now = Instant::now();
        let cooldown = Duration::from_millis(c.cooldown_ms);
        let until = self.store.millis(now) + c.left_ms.saturating_sub(age_ms);
        let rec = match c.mode {
            CLOSED => {
                self.clear_counts();
                Some(self.rec(CLOSED, 0, cooldown))
            }
            FORCED_OPEN => Some(self.rec(FORCED_OPEN, 0, cooldown)),
            _ => Some(self.rec(OPEN, until, cooldown)),
        };
        self.store.put(&self.rec_key, rec, None, now);
    }

    /// Operator: forget everything, as if the deployment were new.
    pub fn reset(&self) -> Transition {
        self.clear_counts();
        self.set(None, CircuitState::Closed, "reset")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::memory::MemoryStore;
    use tokio::time::advance;

    const S: Duration = Duration::from_secs(1);

    fn cfg() -> Circuit {
        Circuit {
            window: Duration::from_secs(60),
            min_requests: 20,
            failure_rate: 0.25,
            consecutive_failures: 0,
            latency_p95: None,
            cooldown: Duration::from_secs(10),
        }
    }

    fn breaker(cfg: Circuit) -> Breaker {
        Breaker::new(Arc::new(MemoryStore::new()), "dep:t", cfg)
    }

    fn rec(b: &Breaker, ok: bool, latency: Duration) -> Option<Transition> {
        b.record(
            Instant::now(),
            Outcome {
                ok,
                latency,
                probe: false,
            },
        )
    }

    fn probe(b: &Breaker, ok: bool) -> Option<Transition> {
        b.record(
            Instant::now(),
            Outcome {
                ok,
                latency: S,
                probe: true,
            },
        )
    }

    fn trip(b: &Breaker) {
        let reason = (0..100).find_map(|_| rec(b, false, S)).map(|t| t.to);
        assert_eq!(reason, Some(CircuitState::Open));
    }

    fn retry_in(b: &Breaker) -> Duration {
        match b.admit(Instant::now()) {
            Admit::Rejected { retry_in } => retry_in,
            other => panic!("expected rejection, got {other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failure_rate_waits_for_min_requests() {
        let b = breaker(cfg());
        for _ in 0..19 {
            assert_eq!(rec(&b, false, S), None, "under min_requests: no verdict");
        }
        let t = rec(&b, false, S).unwrap();
        assert_eq!(
            (t.from, t.to, t.reason),
            (CircuitState::Closed, CircuitState::Open, "failure_rate")
        );
        assert_eq!(b.state(), CircuitState::Open);
        assert_eq!(retry_in(&b), Duration::from_secs(10));

        // 15 ok + 4 failed is 21% (closed); the 5th failure makes 25% of 20.
        let b = breaker(cfg());
        (0..15).for_each(|_| assert_eq!(rec(&b, true, S), None));
        (0..4).for_each(|_| assert_eq!(rec(&b, false, S), None));
        assert_eq!(rec(&b, false, S).unwrap().reason, "failure_rate");
    }

    #[tokio::test(start_paused = true)]
    async fn old_failures_leave_the_window() {
        let b = breaker(cfg());
        (0..19).for_each(|_| assert_eq!(rec(&b, false, S), None));
        advance(Duration::from_secs(61)).await;
        assert_eq!(rec(&b, false, S), None, "the 19 earlier ones have slid out");
        assert_eq!(b.admit(Instant::now()), Admit::Allowed);
    }

    #[tokio::test(start_paused = true)]
    async fn consecutive_failures_trip_before_min_requests() {
        let b = breaker(Circuit {
            consecutive_failures: 3,
            ..cfg()
        });
        assert_eq!(rec(&b, false, S), None);
        assert_eq!(rec(&b, false, S), None);
        assert_eq!(rec(&b, true, S), None, "a success breaks the run");
        assert_eq!(rec(&b, false, S), None);
        assert_eq!(rec(&b, false, S), None);
        assert_eq!(rec(&b, false, S).unwrap().reason, "consecutive_failures");
    }

    #[tokio::test(start_paused = true)]
    async fn slow_p95_trips() {
        let c = Circuit {
            latency_p95: Some(Duration::from_secs(2)),
            ..cfg()
        };
        let b = breaker(c);
        (0..19).for_each(|_| assert_eq!(rec(&b, true, S), None));
        assert_eq!(
            rec(&b, true, 3 * S),
            None,
            "1 slow in 20 is exactly 5%: p95 still fast"
        );
        let t = rec(&b, true, 3 * S).unwrap();
        assert_eq!(t.reason, "latency_p95");
        // Without min_requests samples, slow answers alone do not trip.
        let b = breaker(c);
        (0..19).for_each(|_| assert_eq!(rec(&b, true, 5 * S), None));
    }

    #[tokio::test(start_paused = true)]
    async fn half_open_admits_one_probe_under_concurrency() {
        let b = breaker(cfg());
        trip(&b);
        advance(Duration::from_secs(9)).await;
        assert_eq!(retry_in(&b), S);
        advance(S).await;
        let now = Instant::now();
        let probes = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        if b.admit(now) == Admit::Probe {
                            probes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert_eq!(probes.into_inner(), 1);
        assert_eq!(b.state(), CircuitState::HalfOpen);
        // A probe that never reports gives way after its lease.
        advance(PROBE_LEASE).await;
        assert_eq!(b.admit(Instant::now()), Admit::Probe);
    }

    #[tokio::test(start_paused = true)]
    async fn probe_success_closes_with_a_fresh_window() {
        let b = breaker(cfg());
        trip(&b);
        advance(Duration::from_secs(10)).await;
        assert_eq!(b.admit(Instant::now()), Admit::Probe);
        assert_eq!(
            rec(&b, true, S),
            None,
            "a late non-probe answer settles nothing"
        );
        let t = probe(&b, true).unwrap();
        assert_eq!(
            (t.from, t.to, t.reason),
            (CircuitState::HalfOpen, CircuitState::Closed, "probe_ok")
        );
        assert_eq!(b.admit(Instant::now()), Admit::Allowed);
        (0..19).for_each(|_| assert_eq!(rec(&b, false, S), None, "old failures forgotten"));
    }

    #[tokio::test(start_paused = true)]
    async fn failed_probes_grow_the_cooldown_to_a_cap() {
        assert_eq!(
            cooldown_cap(Duration::from_secs(5)),
            Duration::from_secs(15)
        );
        assert_eq!(
            cooldown_cap(Duration::from_secs(10)),
            Duration::from_secs(20)
        );
        assert_eq!(
            cooldown_cap(Duration::from_secs(60)),
            Duration::from_secs(60)
        );
        let b = breaker(Circuit {
            cooldown: Duration::from_secs(5),
            ..cfg()
        });
        trip(&b);
        let mut seen = vec![retry_in(&b).as_secs()];
        for _ in 0..4 {
            advance(retry_in(&b)).await;
            assert_eq!(b.admit(Instant::now()), Admit::Probe);
            let t = probe(&b, false).unwrap();
            assert_eq!((t.to, t.reason), (CircuitState::Open, "probe_failed"));
            seen.push(retry_in(&b).as_secs());
        }
        assert_eq!(seen, [5, 10, 15, 15, 15]);
        // Success forgets the growth: the next trip uses the configured cooldown.
        advance(retry_in(&b)).await;
        assert_eq!(b.admit(Instant::now()), Admit::Probe);
        probe(&b, true).unwrap();
        trip(&b);
        assert_eq!(retry_in(&b), Duration::from_secs(5));
    }

    /// Probes once a second is what a busy route does; the primary recovers
    /// at an awkward moment (just after a failed probe) and must serve again
    /// within 30 s.
    #[tokio::test(start_paused = true)]
    async fn recovered_primary_serves_again_within_30s() {
        for cooldown in [5, 10, 30] {
            let b = breaker(Circuit {
                cooldown: Duration::from_secs(cooldown),
                ..cfg()
            });
            trip(&b);
            let start = Instant::now();
            let mut recovered_at = None;
            let mut failed_probes = 0;
            let served_at = loop {
                match b.admit(Instant::now()) {
                    Admit::Allowed => panic!("closed without a probe"),
                    Admit::Probe if recovered_at.is_none() && failed_probes < 6 => {
                        probe(&b, false).unwrap();
                        failed_probes += 1;
                        if failed_probes == 6 {
                            recovered_at = Some(Instant::now() + Duration::from_millis(1));
                        }
                    }
                    Admit::Probe => {
                        probe(&b, true).unwrap();
                        break Instant::now();
                    }
                    Admit::Rejected { .. } => {}
                }
                advance(Duration::from_millis(100)).await;
                assert!(start.elapsed() < Duration::from_secs(600));
            };
            assert_eq!(b.admit(Instant::now()), Admit::Allowed);
            let waited = served_at - recovered_at.unwrap();
            assert!(
                waited <= Duration::from_secs(30),
                "cooldown {cooldown}s: served again after {waited:?}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn manual_open_close_reset() {
        let b = breaker(cfg());
        let t = b.force_open();
        assert_eq!(
            (t.from, t.to, t.reason),
            (CircuitState::Closed, CircuitState::Open, "forced_open")
        );
        advance(Duration::from_secs(3600)).await;
        assert!(
            matches!(b.admit(Instant::now()), Admit::Rejected { .. }),
            "forced open stays open"
        );
        assert_eq!(b.state(), CircuitState::Open);
        assert_eq!(b.force_close().to, CircuitState::Closed);
        assert_eq!(b.admit(Instant::now()), Admit::Allowed);

        // close keeps a grown cooldown, reset forgets it.
        trip(&b);
        advance(Duration::from_secs(10)).await;
        assert_eq!(b.admit(Instant::now()), Admit::Probe);
        probe(&b, false);
        b.force_close();
        trip(&b);
        assert_eq!(retry_in(&b), Duration::from_secs(20));
        let t = b.reset();
        assert_eq!((t.from, t.to), (CircuitState::Open, CircuitState::Closed));
        trip(&b);
        assert_eq!(retry_in(&b), Duration::from_secs(10));
    }

    #[test]
    fn what_counts_as_failure() {
        use ErrorCode::*;
        for code in [Overloaded, UpstreamError, Timeout, ConnectionError] {
            assert!(
                counts_as_failure(&GatewayError::upstream(code, "x")),
                "{code}"
            );
            assert!(
                !counts_as_failure(&GatewayError::new(code, Source::Gateway, "x")),
                "{code}"
            );
        }
        for code in [
            RateLimited,
            InvalidRequest,
            ContextTooLong,
            ContentFiltered,
            AuthFailed,
        ] {
            assert!(
                !counts_as_failure(&GatewayError::upstream(code, "x")),
                "{code}"
            );
        }
    }
}
