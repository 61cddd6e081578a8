//! The five strategies, each a score in [0, 1] per candidate (higher first),
//! plus a task bonus. Inputs are damped (health is an EWMA, latency an EWMA
//! of successful attempts), so one noisy sample does not swing traffic.

use rand::Rng;
use tokio::time::Instant;

use super::{Candidate, Facts};
use crate::config::{Route, Strategy};

/// Added to a candidate the route prefers for the request's task.
pub const TASK_BONUS: f64 = 0.25;

pub fn score(cands: &mut [Candidate], route: &Route, facts: &Facts, now: Instant) {
    let n = cands.len().max(1) as f64;
    // Priority and weighted orders use no statistics: don't read them.
    let needs_stats = matches!(
        route.strategy,
        Strategy::Latency | Strategy::Cost | Strategy::Balanced
    );
    let stats: Vec<(f64, Option<f64>, Option<f64>)> = if needs_stats {
        cands
            .iter()
            .map(|c| {
                let h = c.dep.state.health(now);
                (h.health_score, h.latency_ewma_ms, estimated_cost(c, facts))
            })
            .collect()
    } else {
        Vec::new() // no allocation
    };
    let max_latency = stats.iter().filter_map(|s| s.1).fold(0.0, f64::max);
    let max_cost = stats.iter().filter_map(|s| s.2).fold(0.0, f64::max);
    let mut rng = rand::rng();
    for (i, c) in cands.iter_mut().enumerate() {
        let (health, latency, cost) = stats.get(i).copied().unwrap_or((1.0, None, None));
        // Unknown latency scores as fast: a new deployment gets explored.
        let lat_score = match latency {
            Some(l) if max_latency > 0.0 => 1.0 - l / max_latency,
            _ => 1.0,
        };
        // Unknown price scores as dearest.
        let cost_score = match cost {
            Some(c) if max_cost > 0.0 => 1.0 - c / max_cost,
            Some(_) => 1.0,
            None => 0.0,
        };
        let base = match route.strategy {
            // Config order in small steps, so the task bonus can lift a
            // preferred target over its neighbours without making it a rule.
            Strategy::Priority => 1.0 - 0.2 * i as f64 / n,
            Strategy::Weighted => {
                // Efraimidis–Spirakis: u^(1/w) orders a weighted sample.
                let w = route
                    .targets
                    .iter()
                    .find(|t| t.deployment == c.dep.cfg.id)
                    .map_or(1, |t| t.weight);
                if w == 0 {
                    0.0
                } else {
                    rng.random::<f64>().powf(1.0 / f64::from(w))
                }
            }
            Strategy::Latency => lat_score * health.max(0.05),
            Strategy::Cost => cost_score * health.max(0.05),
            Strategy::Balanced => {
                let w = route.weights;
                w.health * health + w.latency * lat_score + w.cost * cost_score
            }
        };
        let bonus = facts
            .task
            .as_ref()
            .and_then(|t| route.tasks.get(t))
            .is_some_and(|ids| ids.iter().any(|id| *id == c.dep.cfg.id));
        c.score = base + if bonus { TASK_BONUS } else { 0.0 };
        c.parts = vec![("base", round(base))];
        if needs_stats {
            c.parts.extend([
                ("health", round(health)),
                ("latency_score", round(lat_score)),
                ("cost_score", round(cost_score)),
            ]);
        }
        if let Some(l) = latency {
            c.parts.push(("latency_ms", round(l)));
        }
        if let Some(usd) = cost {
            c.parts.push(("est_cost_usd", usd));
        }
        if bonus {
            c.parts.push(("task_bonus", TASK_BONUS));
        }
    }
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
