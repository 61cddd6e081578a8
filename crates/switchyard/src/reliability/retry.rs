//! Retrying one deployment: when (contract §4) and how long to wait (the
//! upstream's Retry-After, else full-jitter backoff). The retry budget per
//! deployment, so a struggling provider does not get a retry storm, is
//! `registry::retry_budget`.

use std::time::Duration;

use rand::Rng;

use crate::config::Retry;
use crate::error::GatewayError;
use crate::upstream::retry_after::jittered;

/// The longest Retry-After honoured; past it the caller falls back.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The longest a key cools down for one 429, whatever the upstream says.
pub const MAX_COOLDOWN: Duration = Duration::from_secs(3600);

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
        // Never sooner than asked; a little later, so the requests a 429
        // turned away do not all come back at once.
        Some(wait) => Some(jittered(wait.min(MAX_RETRY_AFTER))),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ErrorCode, Source};

    const MS: Duration = Duration::from_millis(1);

    fn policy() -> Retry {
        Retry {
            attempts: 3,
            base: 500 * MS,
            max: 8_000 * MS,
        }
    }

    #[test]
    fn backoff_is_full_jitter_under_the_ceiling() {
        let (base, max) = (100 * MS, 1_000 * MS);
        for (attempt, ceiling) in [(0, 100), (1, 200), (3, 800), (4, 1_000), (200, 1_000)] {
            let samples: Vec<_> = (0..200).map(|_| backoff(attempt, base, max)).collect();
            assert!(
                samples.iter().all(|d| *d <= ceiling * MS),
                "attempt {attempt}"
            );
            assert!(
                samples.iter().any(|d| *d < ceiling * MS / 2),
                "jitter reaches low values"
            );
        }
    }

    #[test]
    fn decision_per_code() {
        for code in ErrorCode::ALL {
            let err = GatewayError::new(code, Source::Upstream, "x");
            let d = retry_delay(&err, 1, &policy());
            assert_eq!(d.is_some(), code.retry_same(), "{code}");
            if let Some(d) = d {
                assert!(d <= policy().base, "{code}: first retry waits up to base");
            }
        }
        let busy = GatewayError::upstream(ErrorCode::Overloaded, "x");
        assert!(retry_delay(&busy, 2, &policy()).is_some());
        assert_eq!(retry_delay(&busy, 3, &policy()), None, "3 attempts in all");
    }

    #[test]
    fn retry_after_is_honoured_capped_and_checked_against_the_deadline() {
        let limited = |s| {
            GatewayError::upstream(ErrorCode::RateLimited, "slow down")
                .with_retry_after(Some(Duration::from_secs(s)))
        };
        let p = policy();
        // Never sooner than asked, at most a tenth (a second at most) later.
        let within = |d: Option<Duration>, lo: u64, hi_ms: u64| {
            d.is_some_and(|d| d >= Duration::from_secs(lo) && d <= Duration::from_millis(hi_ms))
        };
        assert!(within(retry_delay(&limited(2), 1, &p), 2, 2_200));
        assert!(within(retry_delay(&limited(600), 1, &p), 60, 61_000));
        let secs = |s| Some(Duration::from_secs(s));
        assert!(within(retry_within(&limited(2), 1, &p, secs(5)), 2, 2_200));
        assert_eq!(
            retry_within(&limited(2), 1, &p, secs(1)),
            None,
            "fall back instead"
        );
        assert!(within(retry_within(&limited(2), 1, &p, None), 2, 2_200));
    }

    #[test]
    fn spent_quota_is_not_retried() {
        let mut err = GatewayError::upstream(ErrorCode::RateLimited, "insufficient_quota");
        err.quota_exhausted = true;
        assert_eq!(retry_delay(&err, 1, &policy()), None);
    }
}
