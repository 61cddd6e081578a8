//! Deployment and client limits: rpm, tpm (reserve, then settle), a
//! concurrency cap with a bounded FIFO queue, and the upstream's own quota
//! headers, so we slow down before the upstream's 429 instead of after it.
//!
//! rpm/tpm and the upstream block are store state (shared across instances).
//! The concurrency cap is a local `Semaphore` on purpose: it guards this
//! process's connections, and its waiters are this process's tasks; a shared
//! count would leak permits whenever an instance died.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::config::Limits;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::state::redis::Adjust;
use crate::state::shared::Shared;
use crate::state::store::{Record, StateStore};
use crate::upstream::retry_after::jittered;

mod headers;
pub use headers::{exhausted_for, parse_rfc3339, QuotaHeaders, QuotaReading};

pub const RATE_WINDOW: Duration = Duration::from_secs(60);
/// Longest block taken from an upstream's reset header (a misread header
/// must not take a deployment out for an hour).
pub const MAX_UPSTREAM_BLOCK: Duration = Duration::from_secs(60);
/// An upstream block record `[until, streak, last rest, RESTING]` set by
/// a 429 rest (the quota headers' blocks have 0 there).
const RESTING: u64 = 1;
/// The longest a deployment rests for 429s that go on past their
/// Retry-After (each rest doubles the last).
pub const MAX_REST: Duration = Duration::from_secs(300);
/// The longest rest for a quota that resets at a known time (a day's
/// quota waits for the provider's midnight; a misread reset must not take
/// a deployment out for longer).
pub const MAX_QUOTA_REST: Duration = Duration::from_secs(26 * 3600);

/// Whose limit: a client's, a deployment's, or a provider's pool (its
/// deployments together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Client,
    Deployment,
    Provider,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Client => "client",
            Scope::Deployment => "deployment",
            Scope::Provider => "provider",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitRejection {
    pub scope: Scope,
    /// `rpm`, `tpm`, `queue_full`, `queue_timeout`, `upstream_quota`.
    pub reason: &'static str,
    pub retry_after: Duration,
}

impl LimitRejection {
    /// The metric label (`switchyard_ratelimit_rejections_total{scope}`:
    /// `client` or `deployment`; a provider's pool refuses for its
    /// deployments, so it counts as theirs).
    pub fn rejections_scope(&self) -> &'static str {
        match self.scope {
            Scope::Client => "client",
            Scope::Deployment | Scope::Provider => "deployment",
        }
    }

    /// Contract §4 `gateway_rate_limited`, with Retry-After.
    pub fn to_error(&self) -> GatewayError {
        let who = match self.scope {
            Scope::Client => "your key's",
            Scope::Deployment => "the deployment's",
            Scope::Provider => "the provider's (all its deployments together)",
        };
        let msg = format!("{who} {} limit is reached; retry later", self.reason);
        GatewayError::new(ErrorCode::GatewayRateLimited, Source::Gateway, msg)
            .with_retry_after(Some(self.retry_after.max(Duration::from_secs(1))))
    }
}

/// A sliding-window request and token counter for one subject (a deployment
/// or a client id).
pub struct RateCounter {
    store: Arc<dyn StateStore>,
    scope: Scope,
    rpm_key: Arc<str>,
    tpm_key: Arc<str>,
}

/// Tokens taken before a call; settled with the real usage after it.
/// Dropped unsettled, the estimate stays counted (the safe side).
#[must_use = "settle the reservation with the real token usage"]
pub struct Reservation {
    charge: Charge,
    estimate: u64,
    /// The same call counted in its provider's pool too (the pool's
    /// charge and the estimate it reserved there).
    also: Option<(Charge, u64)>,
    /// The window's requests and tokens with this request counted (0 where
    /// no limit asked for the sum), for the client's `x-ratelimit-*`.
    pub requests_used: u64,
    pub tokens_used: u64,
}

/// Where the request was counted: this instance's store, or the fleet's
/// shared windows (corrected by queued adjustments, never on the request's
/// time).
enum Charge {
    Local {
        store: Arc<dyn StateStore>,
        rpm_key: Arc<str>,
        key: Arc<str>,
    },
    Shared {
        shared: Arc<dyn Shared>,
        rpm: (Arc<str>, Option<u64>),
        tpm: (Arc<str>, Option<u64>),
    },
}

impl Reservation {
    /// A request the fleet counted in the shared windows `rpm` and `tpm`
    /// (full Redis keys, with the buckets it was charged in).
    pub fn shared(
        shared: Arc<dyn Shared>,
        rpm: (Arc<str>, Option<u64>),
        tpm: (Arc<str>, Option<u64>),
        estimate: u64,
        used: (u64, u64),
    ) -> Reservation {
        Reservation {
            charge: Charge::Shared { shared, rpm, tpm },
            estimate,
            also: None,
            requests_used: used.0,
            tokens_used: used.1,
        }
    }

    /// This reservation and `pool`'s (the same call counted in its
    /// provider's pool), settled and cancelled together. The counts a
    /// client's headers read stay this one's.
    pub fn and(mut self, pool: Reservation) -> Reservation {
        self.also = Some((pool.charge, pool.estimate));
        self
    }

    /// Settle with the tokens the call used, or keep the estimate when the
    /// upstream reported none (the safe side).
    pub fn settle_used(self, tokens: u64) {
        // No usage reported: every part keeps what it reserved.
        if tokens > 0 {
            self.settle(tokens);
        }
    }

    pub fn settle(self, actual: u64) {
        for (charge, estimate) in self.parts() {
            let delta = actual as i64 - estimate as i64;
            if delta != 0 {
                add(charge, false, delta);
            }
        }
    }

    /// The call never went out (e.g. no concurrency slot): give both back.
    pub fn cancel(self) {
        for (charge, estimate) in self.parts() {
            add(charge, false, -(estimate as i64));
            add(charge, true, -1);
        }
    }

    fn parts(&self) -> impl Iterator<Item = (&Charge, u64)> {
        let pool = self.also.as_ref().map(|(c, e)| (c, *e));
        std::iter::once((&self.charge, self.estimate)).chain(pool)
    }
}

/// Move one of a charge's counts (requests, else tokens) by `delta`.
fn add(charge: &Charge, requests: bool, delta: i64) {
    match charge {
        Charge::Local {
            store,
            rpm_key,
            key,
        } => {
            let key = if requests { rpm_key } else { key };
            store.add(key, RATE_WINDOW, Instant::now(), &[(0, delta)]);
        }
        Charge::Shared { shared, rpm, tpm } => {
            let (key, field) = if requests { rpm } else { tpm };
            shared.adjust(Adjust {
                key: key.clone(),
                field: *field,
                delta,
            });
        }
    }
}

/// A rejection's wait: about one bucket, when the oldest counts slide out.
pub fn window_retry() -> Duration {
    (RATE_WINDOW / 20).max(Duration::from_secs(1))
}

impl RateCounter {
    pub fn new(store: Arc<dyn StateStore>, scope: Scope, name: &str) -> Self {
        RateCounter {
            store,
            scope,
            rpm_key: format!("{name}:rpm").into(),
            tpm_key: format!("{name}:tpm").into(),
        }
    }

    fn reject(&self, reason: &'static str, retry_after: Duration) -> LimitRejection {
        LimitRejection {
            scope: self.scope,
            reason,
            retry_after,
        }
    }

    /// Count one request and reserve `estimate` tokens, or refuse both.
    pub fn check(
        &self,
        now: Instant,
        rpm: Option<u32>,
        tpm: Option<u64>,
        estimate: u64,
    ) -> Result<Reservation, LimitRejection> {
        let s = &self.store;
        // Counted with or without a limit: `/admin/state` reports usage.
        // Add first, then compare: two racing requests cannot both slip in.
        // Without a limit nothing reads the total back: no window sum.
        let count = |key: &str, n: i64, limited: bool| {
            if limited {
                s.incr(key, RATE_WINDOW, now, &[(0, n)])
            } else {
                s.add(key, RATE_WINDOW, now, &[(0, n)]);
                0
            }
        };
        let requests = count(&self.rpm_key, 1, rpm.is_some());
        if rpm.is_some_and(|rpm| requests > i64::from(rpm)) {
            s.add(&self.rpm_key, RATE_WINDOW, now, &[(0, -1)]);
            return Err(self.reject("rpm", window_retry()));
        }
        let est = estimate as i64;
        let tokens = count(&self.tpm_key, est, tpm.is_some());
        // One request larger than the whole budget may still run alone.
        if tpm.is_some_and(|tpm| tokens > tpm as i64 && tokens > est) {
            s.add(&self.tpm_key, RATE_WINDOW, now, &[(0, -est)]);
            s.add(&self.rpm_key, RATE_WINDOW, now, &[(0, -1)]);
            return Err(self.reject("tpm", window_retry()));
        }
        Ok(Reservation {
            charge: Charge::Local {
                store: s.clone(),
                rpm_key: self.rpm_key.clone(),
                key: self.tpm_key.clone(),
            },
            estimate,
            also: None,
            requests_used: requests.max(0) as u64,
            tokens_used: tokens.max(0) as u64,
        })
    }

    /// (requests, tokens) in the last minute, for `/admin/state`.
    pub fn used(&self, now: Instant) -> (u64, u64) {
        let mut r = [0i64; 1];
        let mut t = [0i64; 1];
        self.store.sum(&self.rpm_key, RATE_WINDOW, now, &mut r);
        self.store.sum(&self.tpm_key, RATE_WINDOW, now, &mut t);
        (r[0].max(0) as u64, t[0].max(0) as u64)
    }
}

// === Deployment limits ===

pub struct DeploymentLimits {
    cfg: ArcSwap<Limits>,
    rate: RateCounter,
    block_key: Box<str>,
    /// `None` without a concurrency limit. Swapped on reload; permits of the
    /// old semaphore drain on their own.
    sem: ArcSwap<Option<Arc<Semaphore>>>,
    queued: AtomicU32,
}

/// Held for the duration of an upstream call: the deployment's slot and,
/// with a pooled concurrency, its provider's.
pub struct Permit {
    _permit: Option<OwnedSemaphorePermit>,
    _pool: Option<OwnedSemaphorePermit>,
}

impl Permit {
    fn one(p: Option<OwnedSemaphorePermit>) -> Permit {
        Permit {
            _permit: p,
            _pool: None,
        }
    }

    /// This slot and the provider pool's, held together.
    pub fn and(mut self, pool: Permit) -> Permit {
        self._pool = pool._permit;
        self
    }
}

/// Decrements the waiting-room count however the wait ends.
struct Queued<'a>(&'a AtomicU32);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl DeploymentLimits {
    pub fn new(store: Arc<dyn StateStore>, scope: &str, cfg: Limits) -> Self {
        Self::scoped(store, Scope::Deployment, scope, cfg)
    }

    /// Limits of another subject than a deployment (a provider's pool,
    /// named `prov:{provider}`): its refusals name that scope.
    pub fn scoped(store: Arc<dyn StateStore>, who: Scope, scope: &str, cfg: Limits) -> Self {
        let l = DeploymentLimits {
            cfg: ArcSwap::from_pointee(cfg),
            rate: RateCounter::new(store, who, scope),
            block_key: format!("{scope}:upstream_block").into(),
            sem: ArcSwap::from_pointee(None),
            queued: AtomicU32::new(0),
        };
        l.set_config(cfg);
        l
    }

    pub fn set_config(&self, cfg: Limits) {
        let old = **self.cfg.load();
        if old.concurrency != cfg.concurrency || self.sem.load().is_none() {
            let sem = cfg
                .concurrency
                .map(|n| Arc::new(Semaphore::new(n as usize)));
            self.sem.store(Arc::new(sem));
        }
        self.cfg.store(Arc::new(cfg));
    }

    fn reject(&self, reason: &'static str, retry_after: Duration) -> LimitRejection {
        self.rate.reject(reason, retry_after)
    }

    pub fn config(&self) -> Limits {
        **self.cfg.load()
    }

    /// rpm/tpm against other limits than the configured ones (this
    /// instance's share of a fleet's, while Redis is away).
    pub fn check_rate_with(
        &self,
        now: Instant,
        estimate: u64,
        rpm: Option<u32>,
        tpm: Option<u64>,
    ) -> Result<Reservation, LimitRejection> {
        self.rate.check(now, rpm, tpm, estimate)
    }

    /// Waits out a short upstream block (up to `queue_timeout`); a longer
    /// one refuses. `true`: it waited.
    pub async fn wait_out_block(&self) -> Result<bool, LimitRejection> {
        if let Some(wait) = self.blocked_for(Instant::now()) {
            if wait > self.cfg.load().queue_timeout {
                return Err(self.reject("upstream_quota", wait));
            }
            tokio::time::sleep(jittered(wait)).await;
            return Ok(true);
        }
        Ok(false)
    }

    /// rpm and tpm after [`Self::wait_out_block`]: the upstream's block is
    /// looked at again only when it waited (a new one may have been set
    /// meanwhile).
    pub fn check_rate_after(
        &self,
        waited: bool,
        now: Instant,
        estimate: u64,
    ) -> Result<Reservation, LimitRejection> {
        if waited {
            return self.check_rate(now, estimate);
        }
        let cfg = self.cfg.load();
        self.rate.check(now, cfg.rpm, cfg.tpm, estimate)
    }

    /// rpm, tpm and the upstream's quota, in one step; no waiting.
    pub fn check_rate(&self, now: Instant, estimate: u64) -> Result<Reservation, LimitRejection> {
        if let Some(wait) = self.blocked_for(now) {
            return Err(self.reject("upstream_quota", wait));
        }
        let cfg = self.cfg.load();
        self.rate.check(now, cfg.rpm, cfg.tpm, estimate)
    }

    /// While the upstream said it has nothing left: how long until its reset.
    pub fn blocked_for(&self, now: Instant) -> Option<Duration> {
        let rec = self.rate.store.get(&self.block_key, now)?;
        let left = rec.0[0].saturating_sub(self.rate.store.millis(now));
        (left > 0).then(|| Duration::from_millis(left))
    }

    /// Everything before an upstream call: waits out a short upstream block
    /// (up to `queue_timeout`), checks rpm/tpm, then takes a concurrency slot.
    pub async fn admit(&self, estimate: u64) -> Result<(Reservation, Permit), LimitRejection> {
        let blocked = self.blocked_for(Instant::now());
        if let Some(wait) = blocked {
            if wait > self.cfg.load().queue_timeout {
                return Err(self.reject("upstream_quota", wait));
            }
            tokio::time::sleep(jittered(wait)).await;
        }
        let reservation = if blocked.is_some() {
            // The upstream may have set a new block while we waited.
            self.check_rate(Instant::now(), estimate)?
        } else {
            let cfg = self.cfg.load();
            self.rate
                .check(Instant::now(), cfg.rpm, cfg.tpm, estimate)?
        };
        match self.acquire().await {
            Ok(permit) => Ok((reservation, permit)),
            Err(e) => {
                reservation.cancel();
                Err(e)
            }
        }
    }

    /// A concurrency slot: at once if free, else a FIFO wait of at most
    /// `queue_timeout`; a full waiting room refuses at once, so a fallback
    /// target fails fast instead of piling up.
    pub async fn acquire(&self) -> Result<Permit, LimitRejection> {
        let Some(sem) = self.sem.load_full().as_ref().clone() else {
            return Ok(Permit::one(None));
        };
        if let Ok(p) = sem.clone().try_acquire_owned() {
            return Ok(Permit::one(Some(p)));
        }
        let cfg = **self.cfg.load();
        let retry = cfg.queue_timeout.max(Duration::from_secs(1));
        if self.queued.fetch_add(1, Ordering::AcqRel) >= cfg.queue {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(self.reject("queue_full", retry));
        }
        let _waiting = Queued(&self.queued);
        match tokio::time::timeout(cfg.queue_timeout, sem.acquire_owned()).await {
            Ok(Ok(p)) => Ok(Permit::one(Some(p))),
            _ => Err(self.reject("queue_timeout", retry)),
        }
    }

    /// Callers waiting for a slot now.
    pub fn queued(&self) -> u32 {
        self.queued.load(Ordering::Acquire)
    }

    pub fn used(&self, now: Instant) -> (u64, u64) {
        self.rate.used(now)
    }

    /// The upstream answered 429 asking for `asked`: the deployment rests
    /// that long (requests wait a short rest out or go elsewhere). One
    /// that answers 429 again soon after a rest ended — it keeps refusing
    /// past its Retry-After — rests twice as long as the last time, up to
    /// [`MAX_REST`]; a 429 during a rest (a request already in flight)
    /// changes nothing. The streak is forgotten a rest's length after the
    /// rest ends. Returns the rest now in force.
    pub fn rest_after_429(&self, now: Instant, asked: Duration) -> Duration {
        let store = &self.rate.store;
        let now_ms = store.millis(now);
        let last = store.get(&self.block_key, now);
        let (rest, streak) = match last {
            // Still resting: an answer to a request sent before it began.
            Some(r) if r.0[3] == RESTING && r.0[0] > now_ms => {
                return Duration::from_millis(r.0[0] - now_ms);
            }
            // Refused again right after resting: twice as long.
            Some(r) if r.0[1] > 0 => {
                let doubled = Duration::from_millis(r.0[2].saturating_mul(2));
                (doubled.max(asked).min(MAX_REST), r.0[1] + 1)
            }
            _ => (asked.min(MAX_REST), 1),
        };
        // A block the quota headers set (a record without a streak) may
        // already run longer.
        let blocked = last.map_or(0, |r| r.0[0].saturating_sub(now_ms));
        let rest = rest.max(Duration::from_millis(blocked));
        if rest.is_zero() {
            return rest;
        }
        let rest_ms = rest.as_millis() as u64;
        let rec = Record([now_ms + rest_ms, streak, rest_ms, RESTING]);
        store.put(&self.block_key, Some(rec), Some(rest * 2), now);
        rest
    }

    /// A quota that resets at a known time is spent (a per-day quota): the
    /// deployment rests until then (at most [`MAX_QUOTA_REST`]), or longer
    /// if a longer rest is in force. No streak: the first 429 after the
    /// reset starts afresh. Returns the rest now in force.
    pub fn rest_until_reset(&self, now: Instant, rest: Duration) -> Duration {
        let store = &self.rate.store;
        let now_ms = store.millis(now);
        let rest = rest.min(MAX_QUOTA_REST);
        let blocked = store
            .get(&self.block_key, now)
            .map_or(0, |r| r.0[0].saturating_sub(now_ms));
        if blocked >= rest.as_millis() as u64 {
            return Duration::from_millis(blocked);
        }
        if rest.is_zero() {
            return rest;
        }
        let rec = Record([now_ms + rest.as_millis() as u64, 0, 0, RESTING]);
        store.put(&self.block_key, Some(rec), Some(rest), now);
        rest
    }

    /// The upstream's remaining-quota headers, read: when requests or
    /// tokens are at 0, refuse (or briefly hold) calls until the
    /// upstream's reset.
    pub fn observe_headers(&self, now: Instant, q: &QuotaHeaders) {
        let Some(wait) = q.exhausted_for() else {
            return;
        };
        let wait = wait.min(MAX_UPSTREAM_BLOCK);
        let until = self.rate.store.millis(now) + wait.as_millis() as u64;
        // A longer rest after 429s stays; a shorter one keeps its streak
        // (the headers come with every 429).
        let last = self.rate.store.get(&self.block_key, now);
        if last.is_some_and(|r| r.0[0] >= until) {
            return;
        }
        let (streak, rest_ms) = last.map_or((0, 0), |r| (r.0[1], r.0[2]));
        let rec = Record([until, streak, rest_ms, 0]);
        let keep = wait.max(Duration::from_millis(rest_ms.saturating_mul(2)));
        self.rate
            .store
            .put(&self.block_key, Some(rec), Some(keep), now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::memory::MemoryStore;
    use http::HeaderMap;
    use std::time::SystemTime;
    use tokio::time::advance;

    const S: Duration = Duration::from_secs(1);

    fn limits(cfg: Limits) -> DeploymentLimits {
        DeploymentLimits::new(Arc::new(MemoryStore::new()), "dep:t", cfg)
    }

    fn reason(r: Result<Reservation, LimitRejection>) -> &'static str {
        r.err().map_or("ok", |e| e.reason)
    }

    #[tokio::test(start_paused = true)]
    async fn rpm_sliding_window() {
        let l = limits(Limits {
            rpm: Some(3),
            ..Limits::default()
        });
        for _ in 0..3 {
            assert_eq!(reason(l.check_rate(Instant::now(), 0)), "ok");
            advance(10 * S).await;
        }
        let r = l.check_rate(Instant::now(), 0).err().unwrap();
        assert_eq!(
            (r.scope, r.reason, r.rejections_scope()),
            (Scope::Deployment, "rpm", "deployment")
        );
        assert!(r.retry_after >= S);
        let e = r.to_error();
        assert_eq!(
            (e.code, e.retry_after.is_some()),
            (ErrorCode::GatewayRateLimited, true)
        );
        assert_eq!(l.used(Instant::now()).0, 3, "the refusal was not counted");
        advance(35 * S).await; // the first request is now 65 s old
        assert_eq!(reason(l.check_rate(Instant::now(), 0)), "ok");
    }

    #[tokio::test(start_paused = true)]
    async fn tpm_reserve_then_settle() {
        let l = limits(Limits {
            rpm: Some(100),
            tpm: Some(1_000),
            ..Limits::default()
        });
        let now = Instant::now();
        let first = l.check_rate(now, 600).ok().unwrap();
        assert_eq!(reason(l.check_rate(now, 600)), "tpm");
        assert_eq!(
            l.used(now),
            (1, 600),
            "the refused request gave back its rpm count too"
        );
        first.settle(100);
        assert_eq!(l.used(now).1, 100);
        l.check_rate(now, 600).ok().unwrap().settle(900);
        assert_eq!(l.used(now), (2, 1_000));
        // One request bigger than the budget may run when nothing else is counted.
        advance(61 * S).await;
        assert_eq!(reason(l.check_rate(Instant::now(), 5_000)), "ok");
    }

    #[tokio::test(start_paused = true)]
    async fn full_queue_rejects_at_once_and_the_queue_times_out() {
        let cfg = Limits {
            concurrency: Some(1),
            queue: 1,
            queue_timeout: 2 * S,
            ..Limits::default()
        };
        let l = Arc::new(limits(cfg));
        let held = l.acquire().await.ok().unwrap();
        let waiter = tokio::spawn({
            let l = l.clone();
            async move { l.acquire().await.map(|_| Instant::now()) }
        });
        tokio::task::yield_now().await;
        assert_eq!(l.queued(), 1);
        let t0 = Instant::now();
        let r = l.acquire().await.err().unwrap();
        assert_eq!((r.reason, t0.elapsed()), ("queue_full", Duration::ZERO));
        assert!(r.retry_after >= S);
        advance(S).await;
        drop(held);
        let served = waiter.await.unwrap().ok().unwrap();
        assert_eq!(served - t0, S, "FIFO waiter got the freed slot");
        assert_eq!(l.queued(), 0);

        let _held = l.acquire().await.ok().unwrap();
        let t0 = Instant::now();
        let r = l.admit(50).await.err().unwrap();
        assert_eq!((r.reason, t0.elapsed()), ("queue_timeout", 2 * S));
        assert_eq!(l.queued(), 0);
        assert_eq!(
            l.used(Instant::now()),
            (0, 0),
            "a call that never went out is not counted"
        );
    }

    /// Contract §10: a provider that keeps answering 429 past its
    /// Retry-After rests longer each time (doubling, capped); a 429 from a
    /// request already in flight during a rest changes nothing; the streak
    /// is forgotten once the provider has been quiet a rest's length.
    #[tokio::test(start_paused = true)]
    async fn rests_double_while_429s_go_on_and_are_forgotten_after() {
        let l = limits(Limits::default());
        let rest = |l: &DeploymentLimits, asked| l.rest_after_429(Instant::now(), asked);
        assert_eq!(rest(&l, 2 * S), 2 * S);
        assert_eq!(l.blocked_for(Instant::now()), Some(2 * S));
        advance(S).await;
        assert_eq!(rest(&l, 2 * S), S, "in flight during the rest");
        let mut seen = Vec::new();
        for _ in 0..9 {
            // The rest ends, the next call is refused again at once.
            let left = l.blocked_for(Instant::now()).unwrap_or_default();
            advance(left).await;
            assert_eq!(l.blocked_for(Instant::now()), None);
            seen.push(rest(&l, 2 * S).as_secs());
        }
        assert_eq!(seen, [4, 8, 16, 32, 64, 128, 256, 300, 300]);
        // Quiet for a rest's length after it ended: back to what is asked.
        advance(300 * S + 300 * S).await;
        assert_eq!(rest(&l, 2 * S), 2 * S);
    }

    /// A spent daily quota rests the deployment until its reset, far past
    /// the 429 rests' cap, and leaves no streak behind.
    #[tokio::test(start_paused = true)]
    async fn a_quota_reset_rest_runs_until_the_reset() {
        let l = limits(Limits {
            queue_timeout: 2 * S,
            ..Limits::default()
        });
        let day = 9 * 3600 * S;
        assert_eq!(l.rest_until_reset(Instant::now(), day), day);
        assert_eq!(l.blocked_for(Instant::now()), Some(day));
        let r = l.check_rate(Instant::now(), 0).err().unwrap();
        assert_eq!((r.reason, r.retry_after), ("upstream_quota", day));
        assert!(l.admit(0).await.is_err(), "not waited out in a queue");
        // A 429 in flight meanwhile changes nothing; a shorter reset neither.
        assert_eq!(l.rest_after_429(Instant::now(), S), day);
        assert_eq!(l.rest_until_reset(Instant::now(), S), day);
        // Bounded, whatever a misread reset says.
        let far = limits(Limits::default());
        assert_eq!(
            far.rest_until_reset(Instant::now(), 100 * day),
            MAX_QUOTA_REST
        );
        advance(day).await;
        assert_eq!(l.blocked_for(Instant::now()), None);
        assert_eq!(reason(l.check_rate(Instant::now(), 0)), "ok");
        // The next 429 is a first one.
        assert_eq!(l.rest_after_429(Instant::now(), 2 * S), 2 * S);
    }

    #[tokio::test(start_paused = true)]
    async fn upstream_remaining_zero_slows_down_until_reset() {
        let l = limits(Limits {
            queue_timeout: 2 * S,
            ..Limits::default()
        });
        let mut h = HeaderMap::new();
        h.insert("x-ratelimit-remaining-requests", "0".parse().unwrap());
        h.insert("x-ratelimit-reset-requests", "20s".parse().unwrap());
        h.insert("x-ratelimit-remaining-tokens", "5000".parse().unwrap());
        h.insert("x-ratelimit-reset-tokens", "1m0s".parse().unwrap());
        l.observe_headers(Instant::now(), &QuotaHeaders::read(&h, SystemTime::now));
        let r = l.check_rate(Instant::now(), 0).err().unwrap();
        assert_eq!((r.reason, r.retry_after), ("upstream_quota", 20 * S));
        assert!(l.admit(0).await.is_err(), "too long to wait in the queue");
        advance(19 * S).await;
        // A short remaining block is waited out rather than refused.
        let t0 = Instant::now();
        assert!(l.admit(0).await.is_ok());
        // Waited out, with at most a tenth more (jitter, contract §10).
        let waited = t0.elapsed();
        assert!(waited >= S && waited <= S + S / 10, "{waited:?}");
        // Remaining quota that is not zero changes nothing.
        h.insert("x-ratelimit-remaining-requests", "7".parse().unwrap());
        l.observe_headers(Instant::now(), &QuotaHeaders::read(&h, SystemTime::now));
        assert_eq!(reason(l.check_rate(Instant::now(), 0)), "ok");
    }

    #[tokio::test(start_paused = true)]
    async fn client_scope() {
        let c = RateCounter::new(Arc::new(MemoryStore::new()), Scope::Client, "client:bot");
        let now = Instant::now();
        assert!(c.check(now, Some(1), None, 0).is_ok());
        let r = c.check(now, Some(1), None, 0).err().unwrap();
        assert_eq!((r.rejections_scope(), r.reason), ("client", "rpm"));
    }
}
