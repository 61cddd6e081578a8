//! `routes:` and `task_rules:`.
//!
//! Extensions beyond CONTRACT §2: a `targets` entry is a deployment id or
//! `{ deployment: id, weight: N }` (weights only with `strategy: weighted`;
//! default 1, 0 parks a target, at least one > 0); `tasks: { code: [ids…] }`
//! prefers those deployments for requests of that task; top-level
//! `task_rules: [{ task, keywords: [..], regex: ".." }]` assigns tasks from the
//! request text. Defaults: `strategy: priority`, `sticky: false`,
//! `on_context_overflow: escalate`, `on_stream_interrupt: resume`; a written
//! `weights:` block is the whole mix (keys left out weigh 0), absent it is
//! health 0.5, latency 0.3, cost 0.2. `shadow: { target, share }` names a
//! known deployment and a share in (0, 1], both required.

use std::collections::{BTreeMap, BTreeSet};

use super::super::fields::{self as f, fields, Fields};
use super::super::node::{At, Kind, Node, Sp, Value};
use super::super::raw::{
    entries, section, RawContract, RawRetry, RawRoute, RawTarget, RawTaskRule,
};
use super::super::Diags;
use super::models::{capability, field_at, list};
use super::{non_negative, positive};
use crate::config::model::*;

const KEYS: &[&str] = &[
    "strategy",
    "targets",
    "weights",
    "fallbacks",
    "require",
    "max_cost_per_mtok",
    "retry",
    "deadline",
    "sticky",
    "on_context_overflow",
    "on_stream_interrupt",
    "tasks",
    "classify",
    "contract",
    "shadow",
];

fn target(d: &mut Diags, n: &Node, at: &At) -> Option<Sp<RawTarget>> {
    if let Value::Scalar(Kind::Str | Kind::Int | Kind::Float, _) = n.value {
        let s = f::string(d, n, at)?;
        return Some(Sp {
            value: RawTarget {
                deployment: s.value,
                weight: None,
            },
            at: s.at,
        });
    }
    let t = fields(d, n, at, &["deployment", "weight"])?;
    let Some(dep) = t.get(d, "deployment", f::string) else {
        d.missing(&field_at(&t.at, "deployment"), "missing `deployment`");
        return None;
    };
    // Point at the id, under the entry's path (`targets[0]`).
    let at = At {
        pos: dep.at.pos,
        path: t.at.path.clone(),
    };
    Some(Sp {
        value: RawTarget {
            deployment: dep.value,
            weight: t.get(d, "weight", f::uint32),
        },
        at,
    })
}

pub fn decode(d: &mut Diags, n: &Node, at: &At) -> Option<RawRoute> {
    let r = fields(d, n, at, KEYS)?;
    let strategies = [
        ("priority", Strategy::Priority),
        ("weighted", Strategy::Weighted),
        ("latency", Strategy::Latency),
        ("cost", Strategy::Cost),
        ("balanced", Strategy::Balanced),
    ];
    let weights = section(d, &r, "weights", &["health", "latency", "cost"]).map(|w| {
        (
            w.at.clone(),
            w.get(d, "health", f::float),
            w.get(d, "latency", f::float),
            w.get(d, "cost", f::float),
        )
    });
    let retry = match section(d, &r, "retry", &["attempts", "base", "max"]) {
        Some(t) => (
            t.at.clone(),
            t.get(d, "attempts", f::uint32),
            t.get(d, "base", f::duration),
            t.get(d, "max", f::duration),
        ),
        None => (r.at.clone(), None, None, None),
    };
    let contract = section(
        d,
        &r,
        "contract",
        &["on_violation", "repair_attempts", "stream"],
    )
    .map(|c| RawContract {
        on_violation: c.choice(
            d,
            "on_violation",
            &[
                ("repair", OnViolation::Repair),
                ("fallback", OnViolation::Fallback),
                ("error", OnViolation::Error),
                ("pass", OnViolation::Pass),
            ],
        ),
        repair_attempts: c.get(d, "repair_attempts", f::uint32),
        stream: c.choice(
            d,
            "stream",
            &[("hold", ContractStream::Hold), ("end", ContractStream::End)],
        ),
    });
    let mut tasks = Vec::new();
    for (name, tat, tn) in entries(d, &r, "tasks") {
        let ids = f::items(d, tn, &tat).unwrap_or_default();
        let ids = ids
            .into_iter()
            .filter_map(|(x, xat)| f::string(d, x, &xat))
            .collect();
        tasks.push((
            Sp {
                value: name.to_string(),
                at: tat,
            },
            ids,
        ));
    }
    let shadow = section(d, &r, "shadow", &["target", "share"]).map(|s| {
        (
            s.at.clone(),
            s.get(d, "target", f::string),
            s.get(d, "share", f::float),
        )
    });
    let strings = |d: &mut Diags, r: &Fields, key| {
        r.list(d, key, f::string)
            .map(|l| l.value)
            .unwrap_or_default()
    };
    Some(RawRoute {
        at: r.at.clone(),
        strategy: r.choice(d, "strategy", &strategies),
        targets: r.list(d, "targets", target),
        weights,
        fallbacks: strings(d, &r, "fallbacks"),
        require: r
            .list(d, "require", capability)
            .map(|l| l.value)
            .unwrap_or_default(),
        max_cost_per_mtok: r.get(d, "max_cost_per_mtok", f::float),
        retry,
        deadline: r.get(d, "deadline", f::duration),
        sticky: r.get(d, "sticky", f::boolean),
        classify: r.get(d, "classify", f::boolean),
        on_context_overflow: r.choice(
            d,
            "on_context_overflow",
            &[
                ("escalate", ContextOverflow::Escalate),
                ("reject", ContextOverflow::Reject),
            ],
        ),
        on_stream_interrupt: r.choice(
            d,
            "on_stream_interrupt",
            &[
                ("resume", StreamInterrupt::Resume),
                ("error", StreamInterrupt::Error),
            ],
        ),
        contract,
        tasks,
        shadow,
    })
}

pub fn decode_task_rule(d: &mut Diags, n: &Node, at: &At) -> Option<RawTaskRule> {
    let t = fields(d, n, at, &["task", "keywords", "regex"])?;
    Some(RawTaskRule {
        at: t.at.clone(),
        task: t.get(d, "task", f::string),
        keywords: t
            .list(d, "keywords", f::string)
            .map(|l| l.value)
            .unwrap_or_default(),
        regex: t.get(d, "regex", f::string),
    })
}

pub fn check(
    d: &mut Diags,
    raw: &[(Sp<String>, RawRoute)],
    deployments: &BTreeMap<String, Deployment>,
) -> BTreeMap<String, Route> {
    let known: Vec<&str> = deployments.keys().map(String::as_str).collect();
    let exists = |d: &mut Diags, id: &Sp<String>| {
        if !deployments.contains_key(&id.value) {
            d.err(
                &id.at,
                format!(
                    "unknown deployment `{}`; defined deployments: {}",
                    id.value,
                    list(&known)
                ),
            );
        }
    };
    let mut routes = BTreeMap::new();
    for (name, r) in raw {
        if name.value.contains('/') {
            d.err(
                &name.at,
                "a route name must not contain `/` (that form names a deployment)",
            );
        } else if deployments.contains_key(&name.value) {
            d.err(
                &name.at,
                format!("route `{}` has the same name as a deployment", name.value),
            );
        }
        let strategy = r.strategy.as_ref().map_or(Strategy::Priority, |s| s.value);
        let raw_targets = r.targets.as_ref().map_or(&[][..], |t| &t.value[..]);
        if raw_targets.is_empty() {
            let at = r
                .targets
                .as_ref()
                .map_or_else(|| field_at(&r.at, "targets"), |t| t.at.clone());
            d.err(&at, "a route needs at least one target");
        }
        let mut targets: Vec<Target> = Vec::new();
        for t in raw_targets {
            exists(
                d,
                &Sp {
                    value: t.value.deployment.clone(),
                    at: t.at.clone(),
                },
            );
            if targets.iter().any(|x| x.deployment == t.value.deployment) {
                d.err(&t.at, format!("`{}` is listed twice", t.value.deployment));
            }
            if let Some(w) = t
                .value
                .weight
                .as_ref()
                .filter(|_| strategy != Strategy::Weighted)
            {
                d.err(&w.at, "`weight` only applies to `strategy: weighted`");
            }
            let weight = t.value.weight.as_ref().map_or(1, |w| w.value);
            targets.push(Target {
                deployment: t.value.deployment.clone(),
                weight,
            });
        }
        if strategy == Strategy::Weighted
            && !targets.is_empty()
            && targets.iter().all(|t| t.weight == 0)
        {
            d.err(
                &raw_targets[0].at,
                "every target has weight 0; at least one must be > 0",
            );
        }
        for fb in &r.fallbacks {
            exists(d, fb);
        }
        let mut tasks = BTreeMap::new();
        for (task, ids) in &r.tasks {
            ids.iter().for_each(|id| exists(d, id));
            tasks.insert(
                task.value.clone(),
                ids.iter().map(|i| i.value.clone()).collect(),
            );
        }
        let shadow = r.shadow.as_ref().and_then(|(at, target, share)| {
            let Some(target) = target else {
                d.missing(&field_at(at, "target"), "missing `target`");
                return None;
            };
            exists(d, target);
            let Some(share) = share else {
                d.missing(&field_at(at, "share"), "missing `share`");
                return None;
            };
            if !(share.value > 0.0 && share.value <= 1.0) {
                d.err(
                    &share.at,
                    format!(
                        "a share of the route's requests: above 0 and at most 1, found {}",
                        share.value
                    ),
                );
            }
            Some(RouteShadow {
                target: target.value.clone(),
                share: share.value,
            })
        });
        let route = Route {
            name: name.value.clone(),
            strategy,
            targets,
            weights: weights(d, r, strategy),
            fallbacks: r.fallbacks.iter().map(|f| f.value.clone()).collect(),
            require: r.require.iter().map(|c| c.value).collect(),
            max_cost_per_mtok: non_negative(d, &r.max_cost_per_mtok),
            retry: retry(d, &r.retry),
            deadline: r
                .deadline
                .as_ref()
                .map(|v| positive(d, &Some(v.clone()), v.value)),
            sticky: r.sticky.as_ref().is_some_and(|s| s.value),
            classify: r.classify.as_ref().is_some_and(|s| s.value),
            on_context_overflow: r
                .on_context_overflow
                .as_ref()
                .map_or(ContextOverflow::Escalate, |v| v.value),
            on_stream_interrupt: r
                .on_stream_interrupt
                .as_ref()
                .map_or(StreamInterrupt::Resume, |v| v.value),
            contract: r.contract.as_ref().map(|c| contract(d, c)),
            tasks,
            shadow,
        };
        routes.insert(name.value.clone(), route);
    }
    routes
}

/// The most repairs a contract may ask of one deployment: each is a whole
/// upstream call the client pays for.
const MAX_REPAIRS: u32 = 3;

/// `contract:` — defaults `on_violation: repair`, `repair_attempts: 1`,
/// `stream: hold`.
fn contract(d: &mut Diags, c: &RawContract) -> Contract {
    let on_violation = c
        .on_violation
        .as_ref()
        .map_or(OnViolation::Repair, |v| v.value);
    let repair_attempts = match &c.repair_attempts {
        Some(a) if on_violation != OnViolation::Repair => {
            d.err(
                &a.at,
                "`repair_attempts` only applies to `on_violation: repair`",
            );
            0
        }
        Some(a) if !(1..=MAX_REPAIRS).contains(&a.value) => {
            d.err(
                &a.at,
                format!("must be between 1 and {MAX_REPAIRS}, found {}", a.value),
            );
            1
        }
        Some(a) => a.value,
        None if on_violation == OnViolation::Repair => 1,
        None => 0,
    };
    Contract {
        on_violation,
        repair_attempts,
        stream: c.stream.as_ref().map_or(ContractStream::Hold, |v| v.value),
    }
}

fn weights(d: &mut Diags, r: &RawRoute, strategy: Strategy) -> BalancedWeights {
    let Some((at, health, latency, cost)) = &r.weights else {
        return BalancedWeights::default();
    };
    if strategy != Strategy::Balanced {
        d.err(at, "`weights` only applies to `strategy: balanced`");
    }
    // A written `weights:` block is the whole mix: keys left out weigh 0.
    let w = BalancedWeights {
        health: non_negative(d, health).unwrap_or(0.0),
        latency: non_negative(d, latency).unwrap_or(0.0),
        cost: non_negative(d, cost).unwrap_or(0.0),
    };
    if w.health.max(0.0) + w.latency.max(0.0) + w.cost.max(0.0) <= 0.0 {
        d.err(at, "the weights are all zero; at least one must be > 0");
    }
    w
}

fn retry(d: &mut Diags, (at, attempts, base, max): &RawRetry) -> Retry {
    let def = Retry::default();
    let attempts = match attempts {
        Some(a) if !(1..=6).contains(&a.value) => {
            d.err(
                &a.at,
                format!("must be between 1 and 6 (tries in all), found {}", a.value),
            );
            def.attempts
        }
        Some(a) => a.value,
        None => def.attempts,
    };
    let out = Retry {
        attempts,
        base: positive(d, base, def.base),
        max: positive(d, max, def.max),
    };
    if out.base > out.max {
        let at = base.as_ref().or(max.as_ref()).map_or(at, |v| &v.at);
        d.err(
            at,
            format!("base ({:?}) must not exceed max ({:?})", out.base, out.max),
        );
    }
    out
}

pub fn check_task_rules(d: &mut Diags, raw: &[RawTaskRule]) -> Vec<TaskRule> {
    let mut out = Vec::new();
    for t in raw {
        let Some(task) = &t.task else {
            d.missing(&field_at(&t.at, "task"), "missing `task`");
            continue;
        };
        if t.keywords.is_empty() && t.regex.is_none() {
            d.err(&t.at, "a task rule needs `keywords` or `regex`");
        }
        let regex = t
            .regex
            .as_ref()
            .and_then(|r| match regex::Regex::new(&r.value) {
                Ok(re) => Some(re),
                Err(e) => {
                    d.err(
                        &r.at,
                        format!(
                            "invalid regex: {}",
                            e.to_string().lines().last().unwrap_or_default()
                        ),
                    );
                    None
                }
            });
        let keywords: BTreeSet<String> =
            t.keywords.iter().map(|k| k.value.to_lowercase()).collect();
        out.push(TaskRule {
            task: task.value.clone(),
            keywords: keywords.into_iter().collect(),
            regex,
        });
    }
    out
}
