//! The five strategies, each a score per candidate (higher first), plus a
//! task bonus, and which candidates are local (`server.region`). Inputs are
//! damped (health is an EWMA, latency an EWMA of successful attempts), so
//! one noisy sample does not swing traffic.
//!
//! - `priority`: config order while a target is in good standing (health at
//!   least [`HEALTHY`]). Below that it keeps a share of its traffic,
//!   (health / [`HEALTHY`])², drawn per request, and is otherwise demoted
//!   behind the targets kept in place. The share keeps it measured: one that
//!   keeps failing is tried less and less, one that recovers raises its
//!   health with each answer and takes its traffic back.
//! - `weighted`: a random order by target weight.
//! - `latency`: a random order by speed (fastest latency / own)² × health,
//!   at least [`EXPLORE`] of the fastest's: the fastest takes most traffic,
//!   a slow one a little, which keeps it measured, so when it is fast again
//!   its share comes back sample by sample rather than at once.
//! - `cost`, `balanced`: deterministic scores from price, health, latency.
//!
//! A target whose `region` is the instance's own and whose health is good
//! is marked local: `super::order` puts it ahead of the others.

use rand::Rng;
use tokio::time::Instant;

use super::{Candidate, Facts};
use crate::config::{Route, Strategy};

/// Added to a candidate the route prefers for the request's task.
pub const TASK_BONUS: f64 = 0.25;
/// Health at or above which a deployment is in good standing: `priority`
/// keeps it in place, and its region can put it ahead. Three failures in a
/// row from 1.0 leave it at 0.73: a blip does not move traffic.
pub const HEALTHY: f64 = 0.7;
/// A demoted `priority` target scores its config-order score times this:
/// at most 0.5, below every target kept in place (above 0.8, the config
/// order's lowest step).
const DEMOTED: f64 = 0.5;
/// The least relative weight `latency` gives a slow deployment (times its
/// health): its traffic share when much slower than the fastest.
pub const EXPLORE: f64 = 0.05;

/// What a strategy knows of one candidate.
#[derive(Clone, Copy)]
struct Stats {
    health: f64,
    latency: Option<f64>,
    cost: Option<f64>,
}

/// Unread: healthy, latency and price unknown.
const UNREAD: Stats = Stats {
    health: 1.0,
    latency: None,
    cost: None,
};

pub fn score(
    cands: &mut [Candidate],
    route: &Route,
    facts: &Facts,
    region: Option<&str>,
    now: Instant,
) {
    let n = cands.len().max(1) as f64;
    // A weighted order uses no statistics (unless a region needs health).
    let needs_stats = route.strategy != Strategy::Weighted || region.is_some();
    let stats: Vec<Stats> = if needs_stats {
        cands.iter().map(|c| read(c, facts, now)).collect()
    } else {
        Vec::new() // no allocation
    };
    let max_latency = stats.iter().filter_map(|s| s.latency).fold(0.0, f64::max);
    let fastest = stats
        .iter()
        .filter_map(|s| s.latency)
        .fold(f64::INFINITY, f64::min);
    let max_cost = stats.iter().filter_map(|s| s.cost).fold(0.0, f64::max);
    let mut rng = rand::rng();
    for (i, c) in cands.iter_mut().enumerate() {
        let s = stats.get(i).copied().unwrap_or(UNREAD);
        let mut parts = Vec::new();
        let base = match route.strategy {
            Strategy::Priority => priority(i as f64 / n, s.health, rng.random(), &mut parts),
            Strategy::Weighted => weighted(target_weight(route, c), rng.random()),
            Strategy::Latency => latency(s, fastest, rng.random(), &mut parts),
            Strategy::Cost => cost_score(s.cost, max_cost) * s.health.max(0.05),
            Strategy::Balanced => {
                let w = route.weights;
                w.health * s.health
                    + w.latency * latency_score(s.latency, max_latency)
                    + w.cost * cost_score(s.cost, max_cost)
            }
        };
        parts.insert(0, ("base", round(base)));
        if matches!(route.strategy, Strategy::Cost | Strategy::Balanced) {
            parts.extend([
                ("health", round(s.health)),
                (
                    "latency_score",
                    round(latency_score(s.latency, max_latency)),
                ),
                ("cost_score", round(cost_score(s.cost, max_cost))),
            ]);
        }
        if let Some(l) = s.latency {
            parts.push(("latency_ms", round(l)));
        }
        if let Some(usd) = s.cost {
            parts.push(("est_cost_usd", usd));
        }
        let bonus = facts
            .task
            .as_ref()
            .and_then(|t| route.tasks.get(t))
            .is_some_and(|ids| ids.iter().any(|id| *id == c.dep.cfg.id));
        if bonus {
            parts.push(("task_bonus", TASK_BONUS));
        }
        c.local = local(region, c, s.health, &mut parts);
        c.score = base + if bonus { TASK_BONUS } else { 0.0 };
        c.parts = parts;
    }
}

fn read(c: &Candidate, facts: &Facts, now: Instant) -> Stats {
    let h = c.dep.state.routing_health(now);
    Stats {
        health: h.health_score,
        latency: h.latency_ewma_ms,
        cost: estimated_cost(c, facts),
    }
}

/// `priority` for the target at `at` (its index over the count, in [0, 1)):
/// config order in small steps (so the task bonus can lift a preferred
/// target over its neighbours), demoted by a `draw` past its share when
/// its health is below [`HEALTHY`].
fn priority(at: f64, health: f64, draw: f64, parts: &mut Vec<(&'static str, f64)>) -> f64 {
    let order = 1.0 - 0.2 * at;
    parts.push(("health", round(health)));
    if health >= HEALTHY {
        return order;
    }
    let keep = (health / HEALTHY).powi(2);
    parts.push(("keep_share", round(keep)));
    if draw < keep {
        return order;
    }
    parts.push(("demoted", 1.0));
    order * DEMOTED
}

/// Efraimidis–Spirakis: `draw`^(1/w) orders a weighted sample.
fn weighted(w: f64, draw: f64) -> f64 {
    if w <= 0.0 {
        0.0
    } else {
        draw.powf(1.0 / w)
    }
}

fn target_weight(route: &Route, c: &Candidate) -> f64 {
    let w = route
        .targets
        .iter()
        .find(|t| t.deployment == c.dep.cfg.id)
        .map_or(1, |t| t.weight);
    f64::from(w)
}

/// `latency`: a weighted draw by speed² × health. Unknown latency counts
/// as the fastest: a new deployment gets explored.
fn latency(s: Stats, fastest: f64, draw: f64, parts: &mut Vec<(&'static str, f64)>) -> f64 {
    let speed = match s.latency {
        Some(l) if l > 0.0 && fastest.is_finite() => (fastest / l).min(1.0),
        _ => 1.0,
    };
    let weight = speed.powi(2).max(EXPLORE) * s.health;
    parts.extend([
        ("health", round(s.health)),
        ("speed", round(speed)),
        ("weight", round(weight)),
    ]);
    weighted(weight, draw)
}

/// 1 for the fastest, 0 for the slowest (`balanced`). Unknown latency
/// scores as fast: a new deployment gets explored.
fn latency_score(latency: Option<f64>, max_latency: f64) -> f64 {
    match latency {
        Some(l) if max_latency > 0.0 => 1.0 - l / max_latency,
        _ => 1.0,
    }
}

/// 1 for the cheapest, 0 for the dearest. Unknown price scores as dearest.
fn cost_score(cost: Option<f64>, max_cost: f64) -> f64 {
    match cost {
        Some(c) if max_cost > 0.0 => 1.0 - c / max_cost,
        Some(_) => 1.0,
        None => 0.0,
    }
}

/// With `server.region` set: is `c` in it (`same_region` 1 or 0 in the
/// parts when the deployment names a region), and in good standing?
fn local(
    region: Option<&str>,
    c: &Candidate,
    health: f64,
    parts: &mut Vec<(&'static str, f64)>,
) -> bool {
    let (Some(here), Some(its)) = (region, c.dep.cfg.region.as_deref()) else {
        return false;
    };
    let same = here == its;
    parts.push(("same_region", f64::from(u8::from(same))));
    same && health >= HEALTHY
}

/// USD for the request's estimated tokens at the deployment's prices.
fn estimated_cost(c: &Candidate, facts: &Facts) -> Option<f64> {
    let p = c.dep.cfg.pricing?;
    let out = facts.output_worst(crate::doors::facts::DEFAULT_OUTPUT) as f64;
    Some((facts.prompt_tokens as f64 * p.input + out * p.output) / 1e6)
}

fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts_of(f: impl FnOnce(&mut Vec<(&'static str, f64)>) -> f64) -> (f64, Vec<&'static str>) {
        let mut parts = Vec::new();
        let score = f(&mut parts);
        (score, parts.into_iter().map(|(k, _)| k).collect())
    }

    #[test]
    fn a_healthy_priority_target_keeps_its_place_whatever_the_draw() {
        let (first, parts) = parts_of(|p| priority(0.0, 0.85, 0.999, p));
        assert_eq!(first, 1.0);
        assert_eq!(parts, ["health"]);
        let second = priority(0.5, 1.0, 0.0, &mut Vec::new());
        assert!(second < first && second > 0.8);
    }

    #[test]
    fn an_unhealthy_priority_target_keeps_a_share_by_health_and_is_demoted_past_it() {
        // Health 0.35: it keeps (0.35 / 0.7)² = a quarter of its draws.
        let (kept, parts) = parts_of(|p| priority(0.0, 0.35, 0.2, p));
        assert_eq!((kept, &parts[..]), (1.0, &["health", "keep_share"][..]));
        let (demoted, parts) = parts_of(|p| priority(0.0, 0.35, 0.3, p));
        assert_eq!(parts, ["health", "keep_share", "demoted"]);
        // Behind the last healthy target of a long list.
        assert!(demoted < priority(0.99, 1.0, 0.0, &mut Vec::new()));
        // Its share rises with its health.
        let keep = |h: f64| {
            let mut p = Vec::new();
            priority(0.0, h, 0.0, &mut p);
            p.iter().find(|(k, _)| *k == "keep_share").map(|p| p.1)
        };
        assert!(keep(0.2) < keep(0.5) && keep(0.5) < keep(0.65));
        assert_eq!(keep(0.7), None);
    }

    #[test]
    fn latency_weighs_by_speed_squared_with_a_floor_and_explores_the_unknown() {
        let at = |ms: Option<f64>, health: f64| {
            let mut p = Vec::new();
            let s = Stats {
                health,
                latency: ms,
                cost: None,
            };
            latency(s, 100.0, 0.5, &mut p);
            p.iter().find(|(k, _)| *k == "weight").unwrap().1
        };
        assert_eq!(at(Some(100.0), 1.0), 1.0);
        assert_eq!(at(Some(200.0), 1.0), 0.25);
        assert_eq!(at(Some(10_000.0), 1.0), EXPLORE);
        assert_eq!(at(Some(200.0), 0.5), 0.125);
        assert_eq!(at(None, 1.0), 1.0);
        // A larger weight draws a larger key from the same draw.
        assert!(weighted(1.0, 0.5) > weighted(0.25, 0.5));
        assert_eq!(weighted(0.0, 0.9), 0.0);
    }
}
