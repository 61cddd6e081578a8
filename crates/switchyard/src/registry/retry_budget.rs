//! A retry budget per deployment: retries across requests stay a share of
//! its recent requests, so a struggling provider does not get a retry storm.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::state::store::StateStore;

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
            .add(&self.key, BUDGET_WINDOW, Instant::now(), &[(DEPOSITS, 1)]);
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
            .add(&self.key, BUDGET_WINDOW, now, &[(WITHDRAWALS, -1)]);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::memory::MemoryStore;

    /// 100 failing requests, each wanting 5 retries: every first retry goes,
    /// the rest stay within ~20% of the requests plus the floor.
    #[tokio::test(start_paused = true)]
    async fn budget_bounds_a_storm_but_never_a_first_retry() {
        let b = RetryBudget::new(Arc::new(MemoryStore::new()), "dep:t");
        let mut retries = 0;
        for _ in 0..100 {
            b.deposit();
            for n in 0..5 {
                if !b.try_withdraw(n == 0) {
                    break;
                }
                retries += 1;
            }
        }
        let floor = (BUDGET_MIN_PER_SEC as f64 * BUDGET_WINDOW.as_secs_f64()) as i32;
        assert!(retries >= 100, "first retries always go: {retries}");
        assert!(
            retries <= 100 + 20 + floor,
            "bounded: {retries} of 500 wanted"
        );
        assert!(!b.try_withdraw(false));
        assert!(b.try_withdraw(true), "a first retry is never refused");
        // Once the storm has left the window, the floor lets a quiet deployment retry.
        tokio::time::advance(BUDGET_WINDOW).await;
        assert!(b.try_withdraw(false));
    }
}
