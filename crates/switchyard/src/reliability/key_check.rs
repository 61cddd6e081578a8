//! Keys set aside as bad come back by themselves (contract §8): a
//! background task checks each with an authenticated call that costs
//! nothing (`adapters::key_check`: listing models) and puts it back in use
//! as soon as the upstream takes it. The first check comes [`FIRST_CHECK`]
//! after the task sees the key aside, each next one twice as long after
//! the one before, up to [`MAX_INTERVAL`]. A check the upstream refuses
//! again keeps the key aside; one with no word on the key (unreachable, no
//! model list) changes nothing, and such a key comes back after
//! `health::QUARANTINE` as before. Spent keys are not checked: listing
//! models works with a spent key, so a free call cannot see the quota.
//!
//! Key status is per instance (the state store each deployment's
//! `KeyTracker` writes), so in a fleet each instance checks its own.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::adapters::deployment::DeploymentRt;
use crate::adapters::key_check::{self, Verdict};
use crate::live::{Live, SharedLive};

/// How long after a key is seen aside it is first checked.
pub const FIRST_CHECK: Duration = Duration::from_secs(2);
/// The longest time between two checks of one key.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// How often the task looks for keys that are due.
const TICK: Duration = Duration::from_millis(500);

/// One key set aside as bad, one case: set aside again after a restore is
/// a new case, checked from the start.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Case {
    pub provider: Arc<str>,
    pub label: String,
    /// When it was set aside (the store's ms).
    pub since: u64,
}

#[derive(Debug, Clone, Copy)]
struct Next {
    at: Instant,
    interval: Duration,
}

/// When each key set aside is checked next.
#[derive(Debug, Default)]
pub struct Schedule {
    next: HashMap<Case, Next>,
}

impl Schedule {
    /// Of the keys set aside now (`aside`), those due for a check at `now`
    /// (their next one is then scheduled, backing off); keys no longer
    /// aside are forgotten.
    pub fn due(&mut self, now: Instant, aside: impl IntoIterator<Item = Case>) -> Vec<Case> {
        let mut kept = HashMap::with_capacity(self.next.len());
        let mut due = Vec::new();
        for case in aside {
            let mut n = self.next.remove(&case).unwrap_or(Next {
                at: now + FIRST_CHECK,
                interval: FIRST_CHECK,
            });
            if n.at <= now {
                n.interval = (n.interval * 2).min(MAX_INTERVAL);
                n.at = now + n.interval;
                due.push(case.clone());
            }
            kept.insert(case, n);
        }
        self.next = kept;
        due
    }
}

/// The background task, until `stop`.
pub fn spawn(live: SharedLive, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut schedule = Schedule::default();
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => check_due(&live.load_full(), &mut schedule).await,
            }
        }
    })
}

/// Check every key that is due, all at once.
async fn check_due(live: &Live, schedule: &mut Schedule) {
    // Key records are per provider: any one deployment's tracker sees them.
    let mut providers: HashMap<&str, &Arc<DeploymentRt>> = HashMap::new();
    for d in live.deployments.values() {
        if !d.provider.cfg.keys.is_empty() {
            providers.entry(&d.provider.name).or_insert(d);
        }
    }
    let aside = providers.values().flat_map(|d| {
        d.state.keys.rejected().into_iter().map(|r| Case {
            provider: d.provider.name.clone(),
            label: r.label,
            since: r.since,
        })
    });
    let due = schedule.due(Instant::now(), aside);
    let checks = due.iter().filter_map(|c| {
        let dep = providers.get(&*c.provider)?;
        Some(check_one(dep, c))
    });
    futures_util::future::join_all(checks).await;
}

async fn check_one(dep: &DeploymentRt, case: &Case) {
    let Some(key) = dep.provider.cfg.keys.iter().find(|k| k.label == case.label) else {
        return;
    };
    let (provider, label) = (&*case.provider, &*case.label);
    match key_check::check(&dep.provider, key).await {
        Verdict::Works => {
            if dep.state.keys.restore_checked(label, case.since) {
                tracing::warn!(
                    provider,
                    key = label,
                    "the upstream takes the key again: back in use"
                );
            }
        }
        Verdict::Rejected => {
            dep.state.keys.still_rejected(label, case.since);
            tracing::debug!(
                provider,
                key = label,
                "key check: the upstream still rejects the key"
            );
        }
        Verdict::Unknown(why) => {
            tracing::debug!(
                provider,
                key = label,
                "key check: no word on the key ({why})"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(label: &str, since: u64) -> Case {
        Case {
            provider: Arc::from("p"),
            label: label.into(),
            since,
        }
    }

    /// A few seconds first, then backing off to a minute; a key restored
    /// and set aside again starts over.
    #[tokio::test(start_paused = true)]
    async fn checks_back_off_to_a_minute() {
        let mut s = Schedule::default();
        let t0 = Instant::now();
        let a = case("a", 1);
        let mut checked = Vec::new();
        let mut t = t0;
        while t < t0 + Duration::from_secs(300) {
            if !s.due(t, [a.clone()]).is_empty() {
                checked.push((t - t0).as_secs());
            }
            t += Duration::from_millis(500);
        }
        assert_eq!(&checked[..6], [2, 6, 14, 30, 62, 122], "{checked:?}");
        assert_eq!(checked[6], 182, "at most a minute apart: {checked:?}");

        // Restored (no longer aside): forgotten. Set aside anew: from the start.
        assert!(s.due(t, []).is_empty());
        let again = case("a", 2);
        assert!(s.due(t, [again.clone()]).is_empty());
        assert_eq!(s.due(t + FIRST_CHECK, [again.clone()]), [again]);
    }

    #[tokio::test(start_paused = true)]
    async fn keys_are_scheduled_apart() {
        let mut s = Schedule::default();
        let t0 = Instant::now();
        assert!(s.due(t0, [case("a", 1)]).is_empty());
        let later = t0 + Duration::from_secs(1);
        assert!(s.due(later, [case("a", 1), case("b", 1)]).is_empty());
        assert_eq!(
            s.due(t0 + FIRST_CHECK, [case("a", 1), case("b", 1)]),
            [case("a", 1)]
        );
        assert_eq!(
            s.due(later + FIRST_CHECK, [case("a", 1), case("b", 1)]),
            [case("b", 1)]
        );
    }
}
