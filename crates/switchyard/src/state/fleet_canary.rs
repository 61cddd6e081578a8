//! A canary run as a fleet shares it (contract §11), so every instance runs
//! the same version alike: one deadline, one verdict on everyone's counts,
//! one rollback. What the counts mean, and the verdict, are
//! `live::canary`'s; here they are only stored and added up.
//!
//! Keys, under the fleet's prefix, for the run `{run}` (the new version
//! over the old one, so a later canary of the same text over another
//! config is a run of its own):
//! - `canary:{run}:terms`: `"{share} {until_ms}"`, set once (`SET NX`) by
//!   the first instance to start the run; the others adopt it.
//! - `canary:{run}:tally`: a hash of each version's counts (`old.requests`,
//!   `new.errors`, `new.b17` for latency bucket 17 …), added to with
//!   `HINCRBY` by each instance on its judge ticks.
//! - `canary:{run}:rolled_back`: why, set by the first instance to roll the
//!   run back; every instance reads it on its next tick and rolls back too.
//!
//! All three expire [`AFTER_THE_END`] past the run's deadline. Every call
//! is one round trip, bounded by [`WITHIN`] and counted like any read of the
//! shared state ([`Fleet::read_within`]); none is made on a request's path.

use std::collections::HashMap;
use std::time::Duration;

use super::fleet::{now_ms, Fleet};

/// How long a run's keys outlive its deadline: an instance that starts the
/// run late (its config source was slow to tell it) still finds the
/// fleet's terms and verdict, and promotes or rolls back with the others.
pub const AFTER_THE_END: Duration = Duration::from_secs(60);

/// How long a canary's call may wait for Redis: it is off the request path
/// (a reload, a judge tick), where 50 ms would take a busy moment for Redis
/// being away and leave the instance on terms of its own.
pub const WITHIN: Duration = Duration::from_secs(1);

/// What every instance runs a canary on: the share of requests the new
/// version serves, and when it is promoted (wall clock, ms since the Unix
/// epoch: instants do not travel between hosts).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CanaryTerms {
    pub share: f64,
    pub until_ms: u64,
}

/// One version's outcomes in a run, as instances add them up: requests,
/// errors, and a latency histogram's bucket counts (`live::canary`'s
/// buckets).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CanaryCounts {
    pub requests: u64,
    pub errors: u64,
    pub latency: Vec<u64>,
}

impl CanaryCounts {
    /// What `self` counted since `before` (both are running totals).
    pub fn since(&self, before: &CanaryCounts) -> CanaryCounts {
        CanaryCounts {
            requests: self.requests.saturating_sub(before.requests),
            errors: self.errors.saturating_sub(before.errors),
            latency: self
                .latency
                .iter()
                .enumerate()
                .map(|(i, n)| n.saturating_sub(before.latency.get(i).copied().unwrap_or(0)))
                .collect(),
        }
    }
}

/// The fleet's view of a run at a judge tick.
#[derive(Debug, Clone, PartialEq)]
pub struct CanaryFleet {
    /// Every instance's counts added up: the version in force's, the
    /// canary's.
    pub old: CanaryCounts,
    pub new: CanaryCounts,
    /// Why the run was rolled back, when an instance did.
    pub rolled_back: Option<String>,
}

impl Fleet {
    fn canary_key(&self, run: &str, part: &str) -> String {
        self.key(&format!("canary:{run}:{part}"))
    }

    /// The run's terms: `proposed` if this instance is the first to start
    /// it, else those recorded by the first (`proposed` with Redis away:
    /// this instance runs on its own terms).
    pub async fn canary_terms(&self, run: &str, proposed: CanaryTerms) -> CanaryTerms {
        let key = self.canary_key(run, "terms");
        let ttl = ttl_ms(proposed.until_ms);
        let value = format!("{} {}", proposed.share, proposed.until_ms);
        let recorded: Option<(Option<String>,)> = self
            .read_within(WITHIN, |r| async move {
                let mut c = r.conn();
                ::redis::pipe()
                    .cmd("SET")
                    .arg(&key)
                    .arg(value)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl)
                    .ignore()
                    .get(&key)
                    .query_async(&mut c)
                    .await
            })
            .await;
        recorded
            .and_then(|(got,)| got)
            .and_then(|s| parse_terms(&s))
            .unwrap_or(proposed)
    }

    /// One judge tick: `added` (this instance's counts since its last tick,
    /// for the old and the new version) goes into the run's tally, and the
    /// fleet's totals come back with its rollback, if any. `None` with
    /// Redis away (nothing was added).
    pub async fn canary_tick(
        &self,
        run: &str,
        terms: CanaryTerms,
        added: [CanaryCounts; 2],
    ) -> Option<CanaryFleet> {
        let tally = self.canary_key(run, "tally");
        let flag = self.canary_key(run, "rolled_back");
        let ttl = ttl_ms(terms.until_ms);
        let (all, why): (HashMap<String, u64>, Option<String>) = self
            .read_within(WITHIN, |r| async move {
                let mut c = r.conn();
                let mut pipe = ::redis::pipe();
                for (role, counts) in ["old", "new"].iter().zip(&added) {
                    for (field, n) in fields(role, counts) {
                        pipe.hincr(&tally, field, n).ignore();
                    }
                }
                pipe.cmd("PEXPIRE").arg(&tally).arg(ttl).ignore();
                pipe.hgetall(&tally).get(&flag);
                pipe.query_async(&mut c).await
            })
            .await?;
        Some(CanaryFleet {
            old: counts_of(&all, "old"),
            new: counts_of(&all, "new"),
            rolled_back: why,
        })
    }

    /// The run rolled back here, for every instance; the first reason
    /// stays.
    pub async fn canary_rolled_back(&self, run: &str, terms: CanaryTerms, why: &str) {
        let flag = self.canary_key(run, "rolled_back");
        let why = format!("{why} (on {})", self.instance);
        let ttl = ttl_ms(terms.until_ms);
        let _ = self
            .read_within(WITHIN, |r| async move {
                let mut c = r.conn();
                ::redis::cmd("SET")
                    .arg(flag)
                    .arg(why)
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl)
                    .query_async::<Option<String>>(&mut c)
                    .await
            })
            .await;
    }
}

/// Milliseconds from now until [`AFTER_THE_END`] past `until_ms`.
fn ttl_ms(until_ms: u64) -> u64 {
    (until_ms + AFTER_THE_END.as_millis() as u64)
        .saturating_sub(now_ms())
        .max(1)
}

fn parse_terms(s: &str) -> Option<CanaryTerms> {
    let (share, until) = s.split_once(' ')?;
    Some(CanaryTerms {
        share: share.parse().ok()?,
        until_ms: until.parse().ok()?,
    })
}

/// The tally's fields for one version's counts (only those that grew).
fn fields(role: &str, c: &CanaryCounts) -> Vec<(String, u64)> {
    let mut out = vec![
        (format!("{role}.requests"), c.requests),
        (format!("{role}.errors"), c.errors),
    ];
    out.extend(
        c.latency
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("{role}.b{i}"), *n)),
    );
    out.retain(|(_, n)| *n > 0);
    out
}

/// One version's counts, from the tally's fields.
fn counts_of(all: &HashMap<String, u64>, role: &str) -> CanaryCounts {
    let get = |f: &str| all.get(&format!("{role}.{f}")).copied().unwrap_or(0);
    let mut latency = Vec::new();
    for (field, n) in all {
        let bucket = field
            .strip_prefix(role)
            .and_then(|f| f.strip_prefix(".b"))
            .and_then(|i| i.parse::<usize>().ok());
        // A bound on what a stray field could make this allocate.
        if let Some(i) = bucket.filter(|i| *i < 1024) {
            if latency.len() <= i {
                latency.resize(i + 1, 0);
            }
            latency[i] = *n;
        }
    }
    CanaryCounts {
        requests: get("requests"),
        errors: get("errors"),
        latency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_go_into_the_tally_and_come_back_as_they_went() {
        let c = CanaryCounts {
            requests: 7,
            errors: 2,
            latency: vec![0, 3, 0, 4],
        };
        let all: HashMap<String, u64> = fields("new", &c).into_iter().collect();
        // Only what grew is sent.
        assert_eq!(all.len(), 4);
        let back = counts_of(&all, "new");
        assert_eq!((back.requests, back.errors), (7, 2));
        assert_eq!(back.latency, [0, 3, 0, 4]);
        assert_eq!(counts_of(&all, "old"), CanaryCounts::default());
    }

    #[test]
    fn since_is_what_grew() {
        let before = CanaryCounts {
            requests: 5,
            errors: 1,
            latency: vec![2, 3],
        };
        let now = CanaryCounts {
            requests: 9,
            errors: 1,
            latency: vec![4, 3, 1],
        };
        let d = now.since(&before);
        assert_eq!((d.requests, d.errors, d.latency), (4, 0, vec![2, 0, 1]));
    }

    #[test]
    fn terms_read_back() {
        assert_eq!(
            parse_terms("0.25 1700000000000"),
            Some(CanaryTerms {
                share: 0.25,
                until_ms: 1_700_000_000_000
            })
        );
        assert_eq!(parse_terms("garbage"), None);
    }
}
