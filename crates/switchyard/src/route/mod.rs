//! ROUTE: a pure function from (live config, what the request names) to an
//! ordered candidate list. No I/O, no awaits; it records why each deployment
//! is in or out, for the decision log.
//!
//! This is the foundation's plan: route targets in config order, then
//! fallbacks, skipping deployments whose protocol has no adapter yet.

use std::sync::Arc;

use crate::state::live::{DeploymentRt, Live, Target};

pub struct Candidate {
    pub dep: Arc<DeploymentRt>,
    /// `target` or `fallback`.
    pub role: &'static str,
}

pub struct Plan {
    pub route: Option<std::sync::Arc<str>>,
    pub candidates: Vec<Candidate>,
    /// Deployments left out, with why.
    pub skipped: Vec<(std::sync::Arc<str>, &'static str)>,
    pub reason: &'static str,
}

pub fn plan(live: &Live, target: &Target<'_>) -> Plan {
    match target {
        Target::Deployment(d) => {
            let mut p = Plan {
                route: None,
                candidates: Vec::new(),
                skipped: Vec::new(),
                reason: "deployment named directly",
            };
            consider(&mut p, d, "target");
            p
        }
        Target::Route(r) => {
            let mut p = Plan {
                route: live.route_names.get(&r.name).cloned(),
                candidates: Vec::new(),
                skipped: Vec::new(),
                reason: "first usable target in priority order",
            };
            let ids = r.targets.iter().map(|t| (t.deployment.as_str(), "target"));
            let fallbacks = r.fallbacks.iter().map(|f| (f.as_str(), "fallback"));
            for (id, role) in ids.chain(fallbacks) {
                if p.candidates.iter().any(|c| c.dep.cfg.id == id) {
                    continue;
                }
                match live.deployments.get(id) {
                    Some(d) => consider(&mut p, d, role),
                    None => p
                        .skipped
                        .push((std::sync::Arc::from(id), "unknown_deployment")),
                }
            }
            p
        }
    }
}

fn consider(p: &mut Plan, d: &Arc<DeploymentRt>, role: &'static str) {
    if d.provider.adapter.is_supported() {
        p.candidates.push(Candidate {
            dep: d.clone(),
            role,
        });
    } else {
        p.skipped.push((d.name.clone(), "adapter_unavailable"));
    }
}
