//! ROUTE: `plan` is a pure function from (live config, what the request
//! names, what the request needs, current health) to an ordered candidate
//! list: no I/O, no awaits; every candidate carries its score parts and
//! every deployment left out carries why, for the decision log. The one
//! piece of I/O here is beside it: `sticky` fetches and remembers a
//! session's deployment in the fleet's Redis (before and after the plan).
//!
//! Order of work: constraints first (capabilities required by the route and
//! implied by the request, `max_cost_per_mtok`, context-window fit, open
//! circuits), then the route's strategy scores the rest, plus a bonus for
//! the request's task; targets in this instance's region (`server.region`)
//! and in good standing go ahead of the others; a deployment near its
//! rpm/tpm quota gives way (`quota`: demoted by chance as its weight falls,
//! last of all past `stop`); and a sticky session's deployment goes first
//! while it is healthy and not held back. Fallbacks follow the targets, in
//! config order.
//!
//! When no deployment is left, the reason decides the answer (CONTRACT §8):
//! every one ruled out by what the request needs (a capability, a context
//! window) is the client's 400 naming what is missing; 503
//! `no_healthy_deployment` only when one that could serve it is open.

pub mod quota;
pub mod sticky;
pub mod strategy;

use std::sync::Arc;

use tokio::time::Instant;

use crate::adapters::deployment::DeploymentRt;
use crate::config::{Capabilities, ContextOverflow, Contract, Retry, Strategy};
use crate::doors::facts::Renders;
use crate::doors::Door;
pub use crate::doors::Facts;
use crate::error::{ErrorCode, GatewayError};
use crate::live::{Live, Target};

pub struct Candidate {
    pub dep: Arc<DeploymentRt>,
    /// `target` or `fallback`.
    pub role: &'static str,
    pub score: f64,
    /// The parts of `score`, for the decision log.
    pub parts: Vec<(&'static str, f64)>,
    /// In this instance's region (`server.region`) and in good standing:
    /// ahead of the other targets.
    pub local: bool,
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
    /// Deployments that can never serve this request, and what it needs
    /// that they lack.
    pub unfit: Vec<(Arc<str>, Unfit)>,
    /// The route's response contract (contract §11), when it has one.
    pub contract: Option<Contract>,
}

/// What a request needs that a deployment lacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    /// Capabilities it does not declare.
    Lacks(Capabilities),
    /// Its context window, and the tokens the request needs in it.
    Window { window: u32, needs: u64 },
}

/// How `dep`'s upstream renders tool definitions into what it bills (for
/// the input estimate, `Facts::prompt_on`): OpenAI's own API (and Azure)
/// and Gemini compactly, Anthropic as JSON in a hidden system prompt, and
/// any other OpenAI-compatible server (DeepSeek, Qwen, vLLM, …) as JSON in
/// its chat template. Each provider's module says
/// ([`crate::adapters::provider::Provider::renders`]).
pub fn renders(dep: &DeploymentRt) -> Renders {
    dep.api().renders(&dep.endpoint.url)
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
    p.contract = route.contract;
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
    let region = live.config.server.region.as_deref();
    strategy::score(&mut p.candidates, route, facts, region, now);
    order(&mut p.candidates);
    if let Some(why) = quota::apply(&mut p.candidates, now) {
        p.passed_over = p.passed_over.or(Some(why));
    }
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
        unfit: Vec::new(),
        contract: None,
    }
}

fn reason(s: Strategy) -> &'static str {
    match s {
        Strategy::Priority => "priority: healthy targets in config order",
        Strategy::Weighted => "weighted: random by target weight",
        Strategy::Latency => "latency: random, weighted by speed and health",
        Strategy::Cost => "cost: cheapest estimated request first",
        Strategy::Balanced => "balanced: weighted health, latency and cost",
    }
}

/// Why a deployment that does not declare a capability the request's kind
/// needs (`embeddings`) is left out.
pub const NOT_DECLARED: &str = "capability_not_declared";

/// Why a deployment that lacks a capability the request needs is left out.
pub const CANNOT_SERVE: &str = "cannot_serve_request";
/// Why a deployment whose context window cannot hold the request is left out.
pub const TOO_SMALL: &str = "context_window_too_small";

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
    // An Anthropic request to an Anthropic deployment goes as it came:
    // whatever it asks for, that protocol carries (CONTRACT §8).
    let passthrough = facts.door == Some(Door::AnthropicMessages)
        && crate::adapters::speaks(d.api(), Door::AnthropicMessages);
    let lacks: Capabilities = facts.needs.iter().filter(|c| !caps.contains(*c)).collect();
    let window_needs = facts.prompt_on(renders(d)) + u64::from(facts.max_tokens.unwrap_or(0));
    let why = if !caps.contains_all(facts.must_declare) {
        Some(NOT_DECLARED)
    } else if declared && !caps.contains_all(require) {
        Some("missing_required_capability")
    } else if declared && !passthrough && lacks != Capabilities::default() {
        p.unfit.push((d.name.clone(), Unfit::Lacks(lacks)));
        Some(CANNOT_SERVE)
    } else if max_cost
        .zip(d.cfg.pricing)
        .is_some_and(|(cap, price)| price.input.max(price.output) > cap)
    {
        Some("over_max_cost_per_mtok")
    } else if let Some(w) = d
        .cfg
        .context_window
        .filter(|w| window_needs > u64::from(*w))
    {
        p.unfit.push((
            d.name.clone(),
            Unfit::Window {
                window: w,
                needs: window_needs,
            },
        ));
        Some(TOO_SMALL)
    } else if !d.state.circuit.is_admissible(Instant::now()) {
        Some("circuit_open")
    } else {
        None
    };
    match why {
        Some(w) => {
            let dynamic = matches!(w, CANNOT_SERVE | TOO_SMALL | "circuit_open");
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
            local: false,
        }),
    }
}

/// Targets, local ones first, by score (stable, so ties keep config
/// order), then fallbacks in config order (CONTRACT §2: "tried after
/// targets, in order", whatever a strategy scored them).
fn order(c: &mut [Candidate]) {
    use std::cmp::Ordering::Equal;
    c.sort_by(|a, b| {
        let rank = |x: &Candidate| match x.role {
            "fallback" => (1, 0),
            _ => (0, u8::from(!x.local)),
        };
        rank(a).cmp(&rank(b)).then_with(|| match a.role {
            "fallback" => Equal,
            _ => b.score.partial_cmp(&a.score).unwrap_or(Equal),
        })
    });
}

/// No candidate left: say why in the contract's terms. A request that no
/// deployment could ever serve (every one lacks what it needs, or is left
/// out by the route's own settings) is the client's error; only a
/// deployment that could serve it but is open-circuited makes it an outage.
fn finish(p: Plan, facts: &Facts) -> Result<Plan, GatewayError> {
    if !p.candidates.is_empty() {
        return Ok(p);
    }
    let all = |why: &str| !p.skipped.is_empty() && p.skipped.iter().all(|(_, w)| *w == why);
    if all(TOO_SMALL) {
        return Err(GatewayError::client(
            ErrorCode::ContextTooLong,
            format!(
                "the prompt (~{} tokens) does not fit any candidate's context window",
                facts.prompt_tokens
            ),
        ));
    }
    if all(NOT_DECLARED) {
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
    let outage = p.skipped.iter().any(|(_, w)| *w == "circuit_open");
    if !p.unfit.is_empty() && !outage {
        return Err(GatewayError::invalid(None, unfit_message(&p)));
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

/// "no deployment of route `chat` supports json_schema", or what each
/// deployment lacks when they lack different things.
fn unfit_message(p: &Plan) -> String {
    let of = match &p.route {
        Some(r) => format!("of route `{r}`"),
        None => format!("`{}`", p.skipped.first().map_or("", |(d, _)| &**d)),
    };
    let names = |c: Capabilities| c.iter().map(|c| c.as_str()).collect::<Vec<_>>().join(", ");
    let common = p
        .unfit
        .iter()
        .try_fold(None, |acc: Option<Capabilities>, (_, u)| match u {
            Unfit::Lacks(c) => {
                Some(Some(acc.map_or(*c, |a| {
                    a.iter().filter(|x| c.contains(*x)).collect()
                })))
            }
            Unfit::Window { .. } => None,
        });
    // The others were left out by the route's own settings.
    let every_unfit = p.unfit.len() == p.skipped.len();
    if let (Some(Some(c)), true) = (common, every_unfit) {
        if c != Capabilities::default() {
            return format!("no deployment {of} supports {}", names(c));
        }
    }
    let mut parts: Vec<String> = p
        .unfit
        .iter()
        .map(|(d, u)| match u {
            Unfit::Lacks(c) => format!("{d} does not support {}", names(*c)),
            Unfit::Window { window, needs } => format!(
                "{d}'s context window ({window} tokens) cannot hold ~{needs} tokens (prompt and output cap)"
            ),
        })
        .collect();
    parts.extend(
        p.skipped
            .iter()
            .filter(|(d, _)| !p.unfit.iter().any(|(u, _)| u == d))
            .map(|(d, w)| format!("{d}: {w}")),
    );
    format!(
        "no deployment {of} can serve this request: {}",
        parts.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{load_str, Capability};
    use crate::registry::Registry;
    use crate::state::memory::MemoryStore;

    /// Three OpenAI deployments: `a` (tools, small window, pricey), `b`
    /// (tools, big window, cheap), `c` (no tools; the fallback).
    const CONFIG: &str = r#"
providers:
  p: { protocol: openai, base_url: "http://127.0.0.1:9/v1" }
models:
  - { id: a, provider: p, model: m, capabilities: [tools, streaming], context_window: 1000, pricing: { input: 5, output: 20 } }
  - { id: b, provider: p, model: m, capabilities: [tools, streaming], context_window: 100000, pricing: { input: 0.1, output: 0.4 } }
  - { id: c, provider: p, model: m, capabilities: [streaming], pricing: { input: 1, output: 1 } }
routes:
  chat: { strategy: priority, targets: [a, b], fallbacks: [c] }
  cheap: { strategy: cost, targets: [a, b] }
"#;

    fn live() -> Live {
        live_of(CONFIG)
    }

    fn live_of(src: &str) -> Live {
        let cfg = load_str(src, "test.yaml", &|_| None).expect("config");
        Live::build(
            cfg,
            &Arc::new(Registry::new(Arc::new(MemoryStore::new()))),
            &Default::default(),
        )
        .unwrap()
    }

    fn plan_for(live: &Live, model: &str, facts: &Facts) -> Result<Plan, GatewayError> {
        let target = live.resolve(model).expect("a route or a deployment");
        plan(live, &target, facts, Instant::now())
    }

    fn ids(p: &Plan) -> Vec<(&str, &str)> {
        p.candidates
            .iter()
            .map(|c| (&*c.dep.name, c.role))
            .collect()
    }

    fn skipped(p: &Plan) -> Vec<(&str, &str)> {
        p.skipped.iter().map(|(d, w)| (&**d, *w)).collect()
    }

    #[test]
    fn priority_keeps_config_order_and_marks_fallbacks() {
        let live = live();
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(
            ids(&p),
            [("a", "target"), ("b", "target"), ("c", "fallback")]
        );
        assert!(p.skipped.is_empty());
        assert_eq!(p.passed_over, None);
        assert_eq!(p.route.as_deref(), Some("chat"));
    }

    #[test]
    fn a_request_too_big_for_a_window_passes_that_deployment_over() {
        let live = live();
        let facts = Facts {
            prompt_tokens: 5_000,
            ..Facts::default()
        };
        let p = plan_for(&live, "chat", &facts).unwrap();
        assert_eq!(ids(&p), [("b", "target"), ("c", "fallback")]);
        assert_eq!(skipped(&p)[0], ("a", TOO_SMALL));
        assert_eq!(p.passed_over, Some(TOO_SMALL));
        // Past every window: the client's context_too_long, not an outage.
        let e = plan_for(&live, "a", &facts).err().expect("too long");
        assert_eq!(e.code, ErrorCode::ContextTooLong);
    }

    #[test]
    fn a_capability_nobody_has_is_the_clients_error_naming_it() {
        let live = live();
        let mut facts = Facts::default();
        facts.needs.insert(Capability::Tools);
        let p = plan_for(&live, "chat", &facts).unwrap();
        assert_eq!(ids(&p), [("a", "target"), ("b", "target")]);
        assert!(skipped(&p).contains(&("c", CANNOT_SERVE)));
        facts.needs.insert(Capability::Vision);
        let e = plan_for(&live, "chat", &facts)
            .err()
            .expect("nobody sees images");
        assert_eq!(e.code, ErrorCode::InvalidRequest);
        assert!(e.message.contains("vision"), "{}", e.message);
    }

    #[test]
    fn an_open_circuit_is_an_outage_only_when_nothing_else_is_left() {
        let live = live();
        live.deployments["a"].state.circuit.force_open();
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(ids(&p)[0], ("b", "target"));
        assert_eq!(p.passed_over, Some("circuit_open"));
        let e = plan_for(&live, "a", &Facts::default()).err().expect("open");
        assert_eq!(e.code, ErrorCode::NoHealthyDeployment);
    }

    #[test]
    fn the_cost_strategy_puts_the_cheapest_first_and_says_why() {
        let live = live();
        let facts = Facts {
            prompt_tokens: 100,
            max_tokens: Some(100),
            ..Facts::default()
        };
        let p = plan_for(&live, "cheap", &facts).unwrap();
        assert_eq!(ids(&p), [("b", "target"), ("a", "target")]);
        assert!(p.candidates[0].score > p.candidates[1].score);
        // b's estimate: 100 tokens in at $0.1/M, 100 out at $0.4/M.
        let est = |c: &Candidate| {
            c.parts
                .iter()
                .find(|(k, _)| *k == "est_cost_usd")
                .map(|p| p.1)
        };
        assert!((est(&p.candidates[0]).unwrap() - 5e-5).abs() < 1e-12);
        assert!(est(&p.candidates[1]).unwrap() > est(&p.candidates[0]).unwrap());
        assert_eq!(p.reason, "cost: cheapest estimated request first");
    }

    fn part(c: &Candidate, name: &str) -> Option<f64> {
        c.parts.iter().find(|(k, _)| *k == name).map(|p| p.1)
    }

    fn record(live: &Live, id: &str, ok: bool, times: usize) {
        let now = Instant::now();
        for _ in 0..times {
            live.deployments[id]
                .state
                .health
                .record(now, ok, std::time::Duration::from_millis(50));
        }
    }

    #[test]
    fn priority_demotes_an_unhealthy_first_choice_until_it_recovers() {
        let live = live();
        // One failure leaves it in good standing.
        record(&live, "a", false, 1);
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(ids(&p)[0], ("a", "target"));
        assert_eq!(part(&p.candidates[0], "demoted"), None);
        // A long run of failures: its share, (health / 0.7)², is ~1e-9.
        record(&live, "a", false, 100);
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(
            ids(&p),
            [("b", "target"), ("a", "target"), ("c", "fallback")]
        );
        let a = &p.candidates[1];
        assert_eq!(part(a, "demoted"), Some(1.0));
        assert!(part(a, "health").unwrap() < 0.01, "{:?}", a.parts);
        assert!(part(a, "keep_share").unwrap() < 1e-6, "{:?}", a.parts);
        // Answers again: its health climbs back past 0.7, and so does its place.
        record(&live, "a", true, 30);
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(ids(&p)[0], ("a", "target"));
        assert!(part(&p.candidates[0], "health").unwrap() >= strategy::HEALTHY);
    }

    /// `a` in another region, `b` in this instance's, `c` naming none.
    const REGIONS: &str = r#"
server: { region: eu }
providers:
  p: { protocol: openai, base_url: "http://127.0.0.1:9/v1" }
models:
  - { id: a, provider: p, model: m, region: us }
  - { id: b, provider: p, model: m, region: eu }
  - { id: c, provider: p, model: m }
routes:
  chat: { strategy: priority, targets: [a, c, b] }
"#;

    #[test]
    fn a_target_in_this_region_goes_first_while_it_is_healthy() {
        let live = live_of(REGIONS);
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(ids(&p), [("b", "target"), ("a", "target"), ("c", "target")]);
        let same = |c: &Candidate| part(c, "same_region");
        let marks: Vec<_> = p.candidates.iter().map(same).collect();
        assert_eq!(marks, [Some(1.0), Some(0.0), None]);
        // Not in good standing: it takes its config place among the others.
        record(&live, "b", false, 4);
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(ids(&p)[..2], [("a", "target"), ("c", "target")]);
        // Open: the other regions serve.
        live.deployments["b"].state.circuit.force_open();
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(ids(&p), [("a", "target"), ("c", "target")]);
        assert_eq!(skipped(&p), [("b", "circuit_open")]);
    }

    /// `a` and `b` may take 100 requests a minute each; `c` is the fallback.
    const QUOTAS: &str = r#"
providers:
  p: { protocol: openai, base_url: "http://127.0.0.1:9/v1" }
models:
  - { id: a, provider: p, model: m, limits: { rpm: 100 } }
  - { id: b, provider: p, model: m, limits: { rpm: 100 } }
  - { id: c, provider: p, model: m }
routes:
  chat: { strategy: priority, targets: [a, b], fallbacks: [c] }
"#;

    /// `id` has counted `n` of its 100 rpm.
    fn counted(live: &Live, id: &str, n: u64) {
        let st = &live.deployments[id].state;
        st.observe_counts(Instant::now(), Some((n, 0)), None);
    }

    #[tokio::test(start_paused = true)]
    async fn past_stop_a_deployment_goes_last_behind_the_fallbacks() {
        let live = live_of(QUOTAS);
        counted(&live, "a", 98);
        let p = plan_for(&live, "chat", &Facts::default()).unwrap();
        assert_eq!(
            ids(&p),
            [("b", "target"), ("c", "fallback"), ("a", "target")]
        );
        let a = &p.candidates[2];
        assert_eq!(part(a, quota::STOP), Some(1.0));
        assert_eq!(part(a, "quota_used"), Some(0.98));
        assert_eq!(part(a, "quota_weight"), Some(0.0));
        assert_eq!(p.passed_over, Some(quota::PASSED_OVER));
        assert!(quota::held_back(a));
        // The others carry no quota parts.
        assert_eq!(part(&p.candidates[0], "quota_weight"), None);
        // Named directly it is the only candidate: it still serves.
        let p = plan_for(&live, "a", &Facts::default()).unwrap();
        assert_eq!(ids(&p), [("a", "target")]);
    }

    /// Between `shift` and `stop` the weight falls a fifth per 10 s to
    /// its target; each request's draw keeps it in place with probability
    /// w, and otherwise demotes it behind the other targets (not behind
    /// the fallbacks).
    #[tokio::test(start_paused = true)]
    async fn between_shift_and_stop_a_deployment_is_demoted_by_chance() {
        let live = live_of(QUOTAS);
        let mut p = plan_for(&live, "chat", &Facts::default()).unwrap();
        // 91 of 100: its target weight is (0.97 - 0.91) / 0.12 = 0.5.
        counted(&live, "a", 91);
        tokio::time::advance(std::time::Duration::from_secs(10)).await;
        let w = live.deployments["a"].state.quota(Instant::now()).weight;
        assert!((w - 0.8).abs() < 1e-6, "a fifth in 10 s: {w}");
        tokio::time::advance(std::time::Duration::from_secs(15)).await;
        let now = Instant::now();
        assert!((live.deployments["a"].state.quota(now).weight - 0.5).abs() < 1e-6);
        // A draw of 0.7 (past its weight): behind b, ahead of c.
        assert_eq!(quota::apply_with(&mut p.candidates, now, || 0.7), None);
        assert_eq!(
            ids(&p),
            [("b", "target"), ("a", "target"), ("c", "fallback")]
        );
        let a = &p.candidates[1];
        assert_eq!(part(a, quota::DEMOTED), Some(1.0));
        assert_eq!(part(a, "quota_weight"), Some(0.5));
        assert_eq!(part(a, "quota_used"), Some(0.91));
        // A draw of 0.2 (within it): in place, its weight shown.
        let mut fresh = Vec::new();
        for id in ["a", "b", "c"] {
            fresh.push(Candidate {
                dep: live.deployments[id].clone(),
                role: if id == "c" { "fallback" } else { "target" },
                score: 0.0,
                parts: Vec::new(),
                local: false,
            });
        }
        assert_eq!(quota::apply_with(&mut fresh, now, || 0.2), None);
        let order: Vec<_> = fresh.iter().map(|c| &*c.dep.name).collect();
        assert_eq!(order, ["a", "b", "c"]);
        assert_eq!(part(&fresh[0], "quota_weight"), Some(0.5));
        assert_eq!(part(&fresh[0], quota::DEMOTED), None);
    }
}
