//! Retrying one deployment: when (contract §4), how long to wait (the
//! upstream's Retry-After, else full-jitter backoff), and a retry budget per
//! deployment so a struggling provider does not get a retry storm.

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

use crate::config::Retry;
use crate::error::GatewayError;
use crate::state::store::StateStore;

/// The longest Retry-After honoured; past it the caller falls back.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Full jitter: uniform in [0, min(max, base·2^attempt)].
pub fn backoff(attempt: u32, base: Duration, max: Duration) -> Duration {
    let ceiling = base
        .checked_mul(1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(max)
        .min(max);
    let ms = ceiling.as_millis() as u64;
    Duration::from_millis(rand::rng().random_range(0..=ms))
}

/// The wait before retrying the same deployment, or `None` when the contract
/// says not to: the code is not retryable, the key's quota is spent (the key
/// is set aside, the next key/deployment tried), or `failed` attempts already
/// used up `policy.attempts`. `failed` counts failed attempts so far (≥ 1).
pub fn retry_delay(err: &GatewayError, failed: u32, policy: &Retry) -> Option<Duration> {
    if !err.code.retry_same() || err.quota_exhausted || failed >= policy.attempts {
        return None;
    }
    match err.retry_after {
        Some(wait) => Some(wait.min(MAX_RETRY_AFTER)),
        None => Some(backoff(failed.saturating_sub(1), policy.base, policy.max)),
    }
}

/// [`retry_delay`], kept only if the wait ends before the request's deadline;
/// `None` then means: fall back now rather than sleep into a 504.
pub fn retry_within(
    err: &GatewayError,
    failed: u32,
    policy: &Retry,
    remaining: Option<Duration>,
) -> Option<Duration> {
    retry_delay(err, failed, policy).filter(|d| remaining.is_none_or(|r| *d < r))
}

// === Budget ===

/// Window of the budget's counts.
pub const BUDGET_WINDOW: Duration = Duration::from_secs(10);
/// Retries allowed as a share of the window's requests.
pub const BUDGET_RATIO: f64 = 0.2;
/// Floor, so a quiet deployment can still retry: this many per second.
pub const BUDGET_MIN_PER_SEC: u32 = 1;

const DEPOSITS: usize = 0;
const WITHDRAWALS: usize = 1;

/// Retries of one deployment across requests: at most ~20% of its recent
/// requests (with a floor), except that a request's first retry always goes
/// (contract §4) — it is still counted, so it eats into later ones.
pub struct RetryBudget {
    store: Arc<dyn StateStore>,
    key: Box<str>,
}

impl RetryBudget {
    pub fn new(store: Arc<dyn StateStore>, scope: &str) -> Self {
        RetryBudget {
            store,
            key: format!("{scope}:retry_budget").into(),
        }
    }

    /// Once per request sent to the deployment.
    pub fn deposit(&self) {
        self.store
            .incr(&self.key, BUDGET_WINDOW, Instant::now(), &[(DEPOSITS, 1)]);
    }

    pub fn try_withdraw(&self, first_retry_of_request: bool) -> bool {
        let now = Instant::now();
        let taken = self
            .store
            .incr(&self.key, BUDGET_WINDOW, now, &[(WITHDRAWALS, 1)]);
        if first_retry_of_request {
            return true;
        }
        let mut c = [0i64; 2];
        self.store.sum(&self.key, BUDGET_WINDOW, now, &mut c);
        let floor = f64::from(BUDGET_MIN_PER_SEC) * BUDGET_WINDOW.as_secs_f64();
        let allowed = (BUDGET_RATIO * c[DEPOSITS] as f64).max(floor);
        if taken as f64 <= allowed {
            return true;
        }
        self.store
            .incr(&self.key, BUDGET_WINDOW, now, &[(WITHDRAWALS, -1)]);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
}
