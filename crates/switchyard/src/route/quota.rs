//! Quota in the plan (contract §10): a deployment near its rpm/tpm gives
//! way. After the strategy has ordered the candidates, each one's quota
//! standing (`registry::quota`: its weight, 1 below `shift`, falling to 0
//! at `stop`, moving at most a fifth per 10 s) decides:
//!
//! - weight 1: it keeps its place;
//! - weight w < 1: with probability 1 − w (drawn per request) it is
//!   demoted behind the candidates of its kind (targets, or fallbacks)
//!   that keep theirs — so it keeps about w of the traffic it would have
//!   had, and targets stay ahead of fallbacks;
//! - past `stop`: it goes to the very end, behind the fallbacks too, and
//!   serves only when nothing else can.
//!
//! Each candidate with a weight below 1 carries `quota_used`,
//! `quota_weight` and `quota_demoted` or `quota_stop` in its parts (the
//! decision log). Nothing is allocated when every weight is 1.

use rand::Rng;
use tokio::time::Instant;

use super::Candidate;

/// A candidate's part when it was held back past `stop`.
pub const STOP: &str = "quota_stop";
/// A candidate's part when it was demoted by its weight's draw.
pub const DEMOTED: &str = "quota_demoted";
/// Why the first choice was passed over when it was held back.
pub const PASSED_OVER: &str = "quota";

/// Reorder `cands` by their quota. `Some(PASSED_OVER)` when the first
/// choice was held back past its `stop`.
pub fn apply(cands: &mut Vec<Candidate>, now: Instant) -> Option<&'static str> {
    let mut rng = rand::rng();
    apply_with(cands, now, || rng.random())
}

/// [`apply`] with the per-request draws (in [0, 1)) given.
pub fn apply_with(
    cands: &mut Vec<Candidate>,
    now: Instant,
    mut draw: impl FnMut() -> f64,
) -> Option<&'static str> {
    let standings = || cands.iter().map(|c| c.dep.state.quota(now));
    if standings().all(|s| s.weight >= 1.0) {
        return None;
    }
    let first_stopped = cands
        .first()
        .is_some_and(|c| c.dep.state.quota(now).stopped);
    // (rank, candidate): targets kept, targets demoted, fallbacks kept,
    // fallbacks demoted, held back; a stable sort keeps the order within.
    let mut ranked: Vec<(u8, Candidate)> = Vec::with_capacity(cands.len());
    for mut c in cands.drain(..) {
        let q = c.dep.state.quota(now);
        let fallback = u8::from(c.role == "fallback") * 2;
        let rank = if q.weight >= 1.0 {
            fallback
        } else {
            let used = q.used[0].max(q.used[1]);
            c.parts.push(("quota_used", round(used)));
            c.parts.push(("quota_weight", round(q.weight)));
            if q.stopped {
                c.parts.push((STOP, 1.0));
                4
            } else if draw() >= q.weight {
                c.parts.push((DEMOTED, 1.0));
                fallback + 1
            } else {
                fallback
            }
        };
        ranked.push((rank, c));
    }
    ranked.sort_by_key(|(rank, _)| *rank);
    cands.extend(ranked.into_iter().map(|(_, c)| c));
    first_stopped.then_some(PASSED_OVER)
}

/// Held back past its `stop` in this plan (a sticky session does not
/// bring it back to the front).
pub fn held_back(c: &Candidate) -> bool {
    c.parts.iter().any(|(k, _)| *k == STOP)
}

fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}
