//! ROUTE: a pure function from (live config, what the request names, what
//! the request needs, current health) to an ordered candidate list. No I/O,
//! no awaits; every candidate carries its score parts and every deployment
//! left out carries why, for the decision log.
//!
//! Order of work: constraints first (capabilities required by the route and
//! implied by the request, `max_cost_per_mtok`, context-window fit, open
//! circuits), then the route's strategy scores the rest, plus a bonus for
//! the request's task, and a sticky session's deployment goes first while it
//! is healthy. Fallbacks follow the targets, in config order.

pub mod sticky;
pub mod strategy;

use std::sync::Arc;

use tokio::time::Instant;

use crate::adapters::Adapter;
use crate::config::{Capabilities, ContextOverflow, Retry, Strategy};
use crate::doors::facts::Renders;
pub use crate::doors::Facts;
use crate::error::{ErrorCode, GatewayError};
use crate::state::live::{DeploymentRt, Live, Target};

pub struct Candidate {
    pub dep: Arc<DeploymentRt>,
    /// `target` or `fallback`.
    pub role: &'static str,
    pub score: f64,
    /// The parts of `score`, for the decision log.
    pub parts: Vec<(&'static str, f64)>,
}

pub struct Plan {
    pub route: Option<Arc<str>>,
    pub candidates: Vec<Candidate>,
    /// Deployments left out, with why.
    pub skipped: Vec<(Arc<str>, &'static str)>,
    /// Why a deployment ahead of every candidate (in config order) was left
    /// out for this request or this moment (open circuit, too small a window,
    /// cannot serve it): whoever serves is then a fallback. Static mismatches
    /// (a route's `require`, its price cap) are not: they never change.
    pub passed_over: Option<&'static str>,
    pub reason: &'static str,
    pub retry: Retry,
    pub overflow: ContextOverflow,
}

/// How `dep`'s upstream renders tool definitions into what it bills (for
/// the input estimate, `Facts::prompt_on`): OpenAI's own API (and Azure)
/// and Gemini compactly, Anthropic as JSON in a hidden system prompt, and
/// any other OpenAI-compatible server (DeepSeek, Qwen, vLLM, …) as JSON in
/// its chat template.
pub fn renders(dep: &DeploymentRt) -> Renders {
    match dep.provider.adapter {
        Adapter::Anthropic => Renders::Anthropic,
        Adapter::Azure | Adapter::Gemini => Renders::Compact,
        Adapter::OpenAi => {
            let host = dep.endpoint.url.host().unwrap_or_default();
            if host == "openai.com" || host.ends_with(".openai.com") || host.ends_with(".azure.com")
            {
                Renders::Compact
            } else {
                Renders::Template
            }
        }
    }
}

pub fn plan(
    live: &Live,
    target: &Target<'_>,
    facts: &Facts,
    now: Instant,
) -> Result<Plan, GatewayError> {
    let route = match target {
        Target::Deployment(d) => {
            let mut p = empty(
                None,
                "deployment named directly",
                Retry::default(),
                ContextOverflow::Reject,
            );
            consider(&mut p, d, "target", Capabilities::default(), None, facts);
            return finish(p, facts);
        }
        Target::Route(r) => *r,
    };
    let mut p = empty(
        live.route_names.get(&route.name).cloned(),
        reason(route.strategy),
        route.retry,
        route.on_context_overflow,
    );
    let ids = route
        .targets
        .iter()
        .map(|t| (t.deployment.as_str(), "target"));
    let fallbacks = route.fallbacks.iter().map(|f| (f.as_str(), "fallback"));
    for (id, role) in ids.chain(fallbacks) {
        if p.candidates.iter().any(|c| &*c.dep.name == id) {
            continue;
        }
        match live.deployments.get(id) {
            Some(d) => consider(
                &mut p,
                d,
                role,
                route.require,
                route.max_cost_per_mtok,
                facts,
            ),
            None => p.skipped.push((Arc::from(id), "unknown_deployment")),
        }
    }
    strategy::score(&mut p.candidates, route, facts, now);
    order(&mut p.candidates);
    if route.sticky {
        if let Some(session) = &facts.session {
            sticky::apply(live, route, session, &mut p, now);
        }
    }
    finish(p, facts)
}

fn empty(
    route: Option<Arc<str>>,
    reason: &'static str,
    retry: Retry,
    overflow: ContextOverflow,
) -> Plan {
    Plan {
        route,
        candidates: Vec::new(),
        skipped: Vec::new(),
        passed_over: None,
        reason,
        retry,
        overflow,
    }
}

fn reason(s: Strategy) -> &'static str {
    match s {
        Strategy::Priority => "priority: targets in config order",
        Strategy::Weighted => "weighted: random by target weight",
        Strategy::Latency => "latency: lowest damped latency first",
        Strategy::Cost => "cost: cheapest estimated request first",
        Strategy::Balanced => "balanced: weighted health, latency and cost",
    }
}

/// Why a deployment that does not declare a capability the request's kind
/// needs (`embeddings`) is left out.
pub const NOT_DECLARED: &str = "capability_not_declared";

/// Apply the hard constraints to one deployment.
fn consider(
    p: &mut Plan,
    d: &Arc<DeploymentRt>,
    role: &'static str,
    require: Capabilities,
    max_cost: Option<f64>,
    facts: &Facts,
) {
    let caps = d.cfg.capabilities;
    // A deployment that declares no capabilities is not constrained by them.
    let declared = caps != Capabilities::default();
    let why = if !caps.contains_all(facts.must_declare) {
        Some(NOT_DECLARED)
    } else if declared && !caps.contains_all(require) {
        Some("missing_required_capability")
    } else if declared && !caps.contains_all(facts.needs) {
        Some("cannot_serve_request")
    } else if max_cost
        .zip(d.cfg.pricing)
        .is_some_and(|(cap, price)| price.input.max(price.output) > cap)
    {
        Some("over_max_cost_per_mtok")
    } else if d.cfg.context_window.is_some_and(|w| {
        facts.prompt_on(renders(d)) + u64::from(facts.max_tokens.unwrap_or(0)) > u64::from(w)
    }) {
        Some("context_window_too_small")
    } else if !d.state.circuit.is_admissible(Instant::now()) {
        Some("circuit_open")
    } else {
        None
    };
    match why {
        Some(w) => {
            let dynamic = matches!(
                w,
                "cannot_serve_request" | "context_window_too_small" | "circuit_open"
            );
            if dynamic && p.candidates.is_empty() && p.passed_over.is_none() {
                p.passed_over = Some(w);
            }
            p.skipped.push((d.name.clone(), w));
        }
        None => p.candidates.push(Candidate {
            dep: d.clone(),
            role,
            score: 0.0,
            parts: Vec::new(),
        }),
    }
}

/// Targets by score (stable, so ties keep config order), then fallbacks in order.
fn order(c: &mut [Candidate]) {
    c.sort_by(|a, b| {
        let rank = |x: &Candidate| u8::from(x.role == "fallback");
        rank(a).cmp(&rank(b)).then(
            b.score
                .partial_cmp(&a.score)
                .unwrap_or(std::cmp::Ordering::Equal),
        )
    });
}

/// No candidate left: say why in the contract's terms.
fn finish(p: Plan, facts: &Facts) -> Result<Plan, GatewayError> {
    if !p.candidates.is_empty() {
        return Ok(p);
    }
    let all_too_small = !p.skipped.is_empty()
        && p.skipped
            .iter()
            .all(|(_, w)| *w == "context_window_too_small");
    if all_too_small {
        return Err(GatewayError::client(
            ErrorCode::ContextTooLong,
            format!(
                "the prompt (~{} tokens) does not fit any candidate's context window",
                facts.prompt_tokens
            ),
        ));
    }
    if !p.skipped.is_empty() && p.skipped.iter().all(|(_, w)| *w == NOT_DECLARED) {
        let caps: Vec<&str> = facts.must_declare.iter().map(|c| c.as_str()).collect();
        let deps: Vec<&str> = p.skipped.iter().map(|(d, _)| &**d).collect();
        return Err(GatewayError::invalid(
            Some("model".into()),
            format!(
                "no deployment behind this model serves {}: {} do not declare the `{}` capability",
                caps.join(", "),
                deps.join(", "),
                caps.join("`, `")
            ),
        ));
    }
    let list: Vec<String> = p.skipped.iter().map(|(d, w)| format!("{d}: {w}")).collect();
    let why = if list.is_empty() {
        "the route has no targets".to_owned()
    } else {
        format!("no usable deployment ({})", list.join(", "))
    };
    Err(GatewayError::new(
        ErrorCode::NoHealthyDeployment,
        crate::error::Source::Gateway,
        why,
    ))
}
