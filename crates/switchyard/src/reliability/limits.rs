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
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use http::HeaderMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::adapters::retry_after::go_duration;
use crate::config::Limits;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::state::store::{Record, StateStore};

pub const RATE_WINDOW: Duration = Duration::from_secs(60);
/// Longest block taken from an upstream's reset header (a misread header
/// must not take a deployment out for an hour).
pub const MAX_UPSTREAM_BLOCK: Duration = Duration::from_secs(60);

/// `switchyard_ratelimit_rejections_total{scope}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Client,
    Deployment,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Client => "client",
            Scope::Deployment => "deployment",
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
    /// The metric label.
    pub fn rejections_scope(&self) -> &'static str {
        self.scope.as_str()
    }

    /// Contract §4 `gateway_rate_limited`, with Retry-After.
    pub fn to_error(&self) -> GatewayError {
        let who = match self.scope {
            Scope::Client => "your key's",
            Scope::Deployment => "the deployment's",
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
    rpm_key: Box<str>,
    tpm_key: Arc<str>,
}

/// Tokens taken before a call; settled with the real usage after it.
/// Dropped unsettled, the estimate stays counted (the safe side).
#[must_use = "settle the reservation with the real token usage"]
pub struct Reservation {
    store: Arc<dyn StateStore>,
    key: Option<Arc<str>>,
    estimate: u64,
}

impl Reservation {
    pub fn settle(self, actual: u64) {
        if let Some(key) = &self.key {
            let delta = actual as i64 - self.estimate as i64;
            if delta != 0 {
                self.store
                    .incr(key, RATE_WINDOW, Instant::now(), &[(0, delta)]);
            }
        }
    }
}

/// A rejection's wait: about one bucket, when the oldest counts slide out.
fn window_retry() -> Duration {
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
        if let Some(rpm) = rpm {
            // Add first, then compare: two racing requests cannot both slip in.
            if s.incr(&self.rpm_key, RATE_WINDOW, now, &[(0, 1)]) > i64::from(rpm) {
                s.incr(&self.rpm_key, RATE_WINDOW, now, &[(0, -1)]);
                return Err(self.reject("rpm", window_retry()));
            }
        }
        let Some(tpm) = tpm else {
            return Ok(Reservation {
                store: s.clone(),
                key: None,
                estimate,
            });
        };
        let est = estimate as i64;
        let total = s.incr(&self.tpm_key, RATE_WINDOW, now, &[(0, est)]);
        // One request larger than the whole budget may still run alone.
        if total > tpm as i64 && total > est {
            s.incr(&self.tpm_key, RATE_WINDOW, now, &[(0, -est)]);
            if rpm.is_some() {
                s.incr(&self.rpm_key, RATE_WINDOW, now, &[(0, -1)]);
            }
            return Err(self.reject("tpm", window_retry()));
        }
        Ok(Reservation {
            store: s.clone(),
            key: Some(self.tpm_key.clone()),
            estimate,
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

/// Held for the duration of an upstream call.
pub struct Permit {
    _permit: Option<OwnedSemaphorePermit>,
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
        let l = DeploymentLimits {
            cfg: ArcSwap::from_pointee(cfg),
            rate: RateCounter::new(store, Scope::Deployment, scope),
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
        if let Some(wait) = self.blocked_for(Instant::now()) {
            if wait > self.cfg.load().queue_timeout {
                return Err(self.reject("upstream_quota", wait));
            }
            tokio::time::sleep(wait).await;
        }
        let reservation = self.check_rate(Instant::now(), estimate)?;
        let permit = self.acquire().await?;
        Ok((reservation, permit))
    }

    /// A concurrency slot: at once if free, else a FIFO wait of at most
    /// `queue_timeout`; a full waiting room refuses at once, so a fallback
    /// target fails fast instead of piling up.
    pub async fn acquire(&self) -> Result<Permit, LimitRejection> {
        let Some(sem) = self.sem.load_full().as_ref().clone() else {
            return Ok(Permit { _permit: None });
        };
        if let Ok(p) = sem.clone().try_acquire_owned() {
            return Ok(Permit { _permit: Some(p) });
        }
        let cfg = **self.cfg.load();
        let retry = cfg.queue_timeout.max(Duration::from_secs(1));
        if self.queued.fetch_add(1, Ordering::AcqRel) >= cfg.queue {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(self.reject("queue_full", retry));
        }
        let _waiting = Queued(&self.queued);
        match tokio::time::timeout(cfg.queue_timeout, sem.acquire_owned()).await {
            Ok(Ok(p)) => Ok(Permit { _permit: Some(p) }),
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

    /// Read the upstream's remaining-quota headers; when requests or tokens
    /// are at 0, refuse (or briefly hold) calls until the upstream's reset.
    pub fn observe_headers(&self, now: Instant, h: &HeaderMap) {
        let Some(wait) = exhausted_for(h, SystemTime::now()) else {
            return;
        };
        let wait = wait.min(MAX_UPSTREAM_BLOCK);
        let until = self.rate.store.millis(now) + wait.as_millis() as u64;
        let rec = Record([until, 0, 0, 0]);
        self.rate
            .store
            .put(&self.block_key, Some(rec), Some(wait), now);
    }
}

/// How long until the exhausted upstream budget resets, if one is exhausted.
pub fn exhausted_for(h: &HeaderMap, wall_now: SystemTime) -> Option<Duration> {
    let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let mut wait: Option<Duration> = None;
    for kind in ["requests", "tokens"] {
        // OpenAI: Go durations.
        let openai = (text(&format!("x-ratelimit-remaining-{kind}")) == Some("0"))
            .then(|| text(&format!("x-ratelimit-reset-{kind}")).and_then(go_duration))
            .flatten();
        // Anthropic: RFC 3339 timestamps.
        let anthropic = (text(&format!("anthropic-ratelimit-{kind}-remaining")) == Some("0"))
            .then(|| text(&format!("anthropic-ratelimit-{kind}-reset")).and_then(parse_rfc3339))
            .flatten()
            .map(|at| at.duration_since(wall_now).unwrap_or_default());
        for d in openai.into_iter().chain(anthropic) {
            wait = Some(wait.map_or(d, |w| w.max(d)));
        }
    }
    wait.filter(|d| !d.is_zero())
}

/// `2024-05-01T12:30:05Z`, `…05.123Z`, `…05+02:00`.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut frac = 0.0;
    if let Some(r) = rest.strip_prefix('.') {
        let n = r.bytes().take_while(u8::is_ascii_digit).count();
        frac = format!("0.{}", &r[..n]).parse().ok()?;
        rest = &r[n..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && matches!(&o[..1], "+" | "-") && &o[3..4] == ":" => {
            let hours: i64 = o[1..3].parse().ok()?;
            let mins: i64 = o[4..6].parse().ok()?;
            let sign = if &o[..1] == "-" { -1 } else { 1 };
            sign * (hours * 3600 + mins * 60)
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + hh * 3600 + mm * 60 + ss - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_secs_f64(frac))
}

/// Days since 1970-01-01 (Howard Hinnant's civil-from-days inverse).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
}
