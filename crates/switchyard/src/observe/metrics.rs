//! Every metric of contract §6, declared once. Labels are small typed sets
//! whose values come from the config (route and deployment ids) or from enums
//! (`ErrorCode::as_str()`), never from free text a client sent.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::TypedMetric;
use prometheus_client::registry::Registry;
use std::fmt::Write as _;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

/// A label value from the config (route, deployment, provider id): shared,
/// so recording a metric clones a pointer rather than a string.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Name(pub Arc<str>);

impl EncodeLabelValue for Name {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, &self.0)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub route: Name,
    pub deployment: Name,
    /// HTTP status, or the §4 code when it failed.
    pub status: &'static str,
    pub stream: &'static str,
}

/// A request's task (scene) and where it came from.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TaskLabels {
    pub route: Name,
    pub task: String,
    /// `header`, `rule` or `classifier`.
    pub source: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ContractLabels {
    pub route: Name,
    pub deployment: Name,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub route: Name,
    pub stream: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DeploymentLabels {
    pub deployment: Name,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AttemptLabels {
    pub deployment: Name,
    pub provider: Name,
    pub code: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabels {
    pub reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    pub deployment: Name,
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StateLabels {
    pub deployment: Name,
    pub state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ScopeLabels {
    pub scope: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClientLabels {
    pub client: Name,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProbeLabels {
    pub deployment: Name,
    pub result: &'static str,
}

/// A route's shadow traffic to its shadow target (contract §11).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    pub route: Name,
    pub target: Name,
    /// `ok`, `error` (sent, failed) or `skipped` (not sent: the target's
    /// circuit or limits, or a request that could not be copied).
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowRouteLabels {
    pub route: Name,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DimensionLabels {
    pub deployment: Name,
    /// `rpm` or `tpm`.
    pub dimension: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OpLabels {
    pub op: &'static str,
}

pub struct Metrics {
    pub requests: Family<RequestLabels, Counter>,
    /// Requests by task (scene), when they had one.
    pub tasks: Family<TaskLabels, Counter>,
    /// Answers that did not satisfy their request's schema (contract §11).
    pub contract_violations: Family<ContractLabels, Counter>,
    pub duration: Family<RouteLabels, Histogram>,
    pub ttft: Family<DeploymentLabels, Histogram>,
    pub attempts: Family<AttemptLabels, Counter>,
    pub fallbacks: Family<ReasonLabels, Counter>,
    pub retries: Family<DeploymentLabels, Counter>,
    pub tokens: Family<TokenLabels, Counter>,
    pub cost_usd: Family<DeploymentLabels, Counter<f64, AtomicU64>>,
    pub cache: Family<ResultLabels, Counter>,
    pub circuit_state: Family<StateLabels, Gauge>,
    pub health_score: Family<DeploymentLabels, Gauge<f64, AtomicU64>>,
    pub stream_interruptions: Family<DeploymentLabels, Counter>,
    pub ratelimit_rejections: Family<ScopeLabels, Counter>,
    pub inflight: Gauge,
    pub config_reloads: Family<ResultLabels, Counter>,
    pub events_skipped: Family<DeploymentLabels, Counter>,
    /// Budgets and the usage store report here; the shared state backend
    /// and the response cache (later issues) are declared now so that every
    /// family of contract §6 is there from start-up.
    pub budget_spent_usd: Family<ClientLabels, Gauge<f64, AtomicU64>>,
    pub budget_rejections: Family<ClientLabels, Counter>,
    pub usage_store_writes: Family<ResultLabels, Counter>,
    pub state_backend_errors: Family<OpLabels, Counter>,
    pub cache_entries: Gauge,
    /// Trace spans not exported: the export queue was full, or the
    /// collector did not take them (not in contract §6's list: ours).
    pub trace_spans_dropped: Counter,
    /// Background probes (contract §10) by deployment and result.
    pub probes: Family<ProbeLabels, Counter>,
    /// Each client's budget limit in USD (beside its spend: the alert on
    /// spend past 80% of the window divides the two).
    pub budget_limit_usd: Family<ClientLabels, Gauge<f64, AtomicU64>>,
    /// Billed ÷ estimated input tokens per answered request.
    pub token_estimate_ratio: Family<DeploymentLabels, Histogram>,
    /// The share of each deployment's rpm and tpm used (contract §10).
    pub quota_used_ratio: Family<DimensionLabels, Gauge<f64, AtomicU64>>,
    /// Shadow copies of requests by route, target and result (contract §11).
    pub shadow_requests: Family<ShadowLabels, Counter>,
    /// Shadow copies dropped because the shadow queue was full, by route.
    pub shadow_dropped: Family<ShadowRouteLabels, Counter>,
    registry: Registry,
    /// Every family declared, for the ones with no series yet.
    families: Vec<Declared>,
}

/// A family's name (as registered, without `_total`), help and type.
struct Declared {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
}

/// Register a metric and remember its declaration.
fn declare<M: prometheus_client::registry::Metric + TypedMetric>(
    registry: &mut Registry,
    families: &mut Vec<Declared>,
    name: &'static str,
    help: &'static str,
    metric: M,
) {
    families.push(Declared {
        name,
        help,
        kind: M::TYPE.as_str(),
    });
    registry.register(name, help, metric);
}

/// Around 1 (the estimate right), finer where the alert looks (1.3).
const ESTIMATE_RATIO_BUCKETS: [f64; 12] =
    [0.5, 0.7, 0.8, 0.9, 0.95, 1.05, 1.1, 1.2, 1.3, 1.5, 2.0, 3.0];

fn estimate_ratio_histogram() -> Histogram {
    Histogram::new(ESTIMATE_RATIO_BUCKETS.iter().copied())
}

fn latency_histogram() -> Histogram {
    // 1 ms … ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let mut families = Vec::new();
        let requests = Family::default();
        let duration = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        let ttft = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        let m = Metrics {
            requests,
            tasks: Family::default(),
            contract_violations: Family::default(),
            duration,
            ttft,
            attempts: Family::default(),
            fallbacks: Family::default(),
            retries: Family::default(),
            tokens: Family::default(),
            cost_usd: Family::default(),
            cache: Family::default(),
            circuit_state: Family::default(),
            health_score: Family::default(),
            stream_interruptions: Family::default(),
            ratelimit_rejections: Family::default(),
            inflight: Gauge::default(),
            config_reloads: Family::default(),
            events_skipped: Family::default(),
            budget_spent_usd: Family::default(),
            budget_rejections: Family::default(),
            usage_store_writes: Family::default(),
            state_backend_errors: Family::default(),
            cache_entries: Gauge::default(),
            trace_spans_dropped: Counter::default(),
            probes: Family::default(),
            budget_limit_usd: Family::default(),
            token_estimate_ratio: Family::new_with_constructor(
                estimate_ratio_histogram as fn() -> Histogram,
            ),
            quota_used_ratio: Family::default(),
            shadow_requests: Family::default(),
            shadow_dropped: Family::default(),
            registry: Registry::default(),
            families: Vec::new(),
        };
        // prometheus-client appends `_total` to counters itself.
        declare(
            &mut registry,
            &mut families,
            "switchyard_requests",
            "Client requests answered",
            m.requests.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_task_requests",
            "Client requests by task (scene) and where it came from: header, rule or classifier",
            m.tasks.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_contract_violations",
            "Answers that did not satisfy the JSON Schema their request gave, by route and deployment",
            m.contract_violations.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_request_duration_seconds",
            "Whole request duration",
            m.duration.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_time_to_first_token_seconds",
            "Time to the first answer byte from upstream",
            m.ttft.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_upstream_attempts",
            "Upstream attempts by outcome",
            m.attempts.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_fallbacks",
            "Requests served by other than the first choice",
            m.fallbacks.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_retries",
            "Retries on the same deployment",
            m.retries.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_tokens",
            "Tokens by kind",
            m.tokens.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_cost_usd",
            "Cost in USD",
            m.cost_usd.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_cache_requests",
            "Cache lookups",
            m.cache.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_circuit_state",
            "Circuit state per deployment (1 = in this state)",
            m.circuit_state.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_deployment_health_score",
            "Health score per deployment",
            m.health_score.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_stream_interruptions",
            "Streams interrupted after their first byte",
            m.stream_interruptions.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_ratelimit_rejections",
            "Requests refused by a gateway limit",
            m.ratelimit_rejections.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_inflight_requests",
            "Requests in flight",
            m.inflight.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_config_reloads",
            "Config reloads: ok, error (refused), rolled_back (a canary that did worse)",
            m.config_reloads.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_upstream_events_skipped",
            "Unparsable upstream stream events skipped",
            m.events_skipped.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_budget_spent_usd",
            "Spend of each client with a budget in its current window",
            m.budget_spent_usd.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_budget_rejections",
            "Requests refused because a client's budget was spent",
            m.budget_rejections.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_usage_store_writes",
            "Usage rows written to the store or dropped",
            m.usage_store_writes.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_state_backend_errors",
            "Shared state backend operations that failed",
            m.state_backend_errors.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_cache_entries",
            "Entries in the response cache",
            m.cache_entries.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_trace_spans_dropped",
            "Trace spans dropped: export queue full or collector unreachable",
            m.trace_spans_dropped.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_probes",
            "Background probes by deployment and result",
            m.probes.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_budget_limit_usd",
            "Budget limit of each client with a budget",
            m.budget_limit_usd.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_token_estimate_ratio",
            "Billed input tokens divided by the gateway's estimate, per request",
            m.token_estimate_ratio.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_quota_used_ratio",
            "Share of each deployment's rpm and tpm used: its own counts, its provider pool's or the upstream's headers, the largest",
            m.quota_used_ratio.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_shadow_requests",
            "Shadow copies of requests by route, shadow target and result: ok, error or skipped",
            m.shadow_requests.clone(),
        );
        declare(
            &mut registry,
            &mut families,
            "switchyard_shadow_dropped",
            "Shadow copies dropped because the shadow queue was full, by route",
            m.shadow_dropped.clone(),
        );
        for result in ["hit", "miss"] {
            drop(m.cache.get_or_create(&ResultLabels { result }));
        }
        for result in ["ok", "error", "rolled_back"] {
            drop(m.config_reloads.get_or_create(&ResultLabels { result }));
        }
        for result in ["ok", "dropped"] {
            drop(m.usage_store_writes.get_or_create(&ResultLabels { result }));
        }
        for scope in ["client", "deployment"] {
            drop(m.ratelimit_rejections.get_or_create(&ScopeLabels { scope }));
        }
        Metrics {
            registry,
            families,
            ..m
        }
    }

    /// Zero-valued series for each deployment, so a dashboard sees every
    /// deployment's counters before their first event (and after a reload
    /// adds one).
    pub fn prime<'a>(&self, deployments: impl Iterator<Item = &'a Arc<str>>) {
        for d in deployments {
            let dep = DeploymentLabels {
                deployment: Name(d.clone()),
            };
            drop(self.retries.get_or_create(&dep));
            drop(self.cost_usd.get_or_create(&dep));
            drop(self.stream_interruptions.get_or_create(&dep));
            drop(self.events_skipped.get_or_create(&dep));
            for kind in ["input", "output", "cached_input"] {
                drop(self.tokens.get_or_create(&TokenLabels {
                    deployment: Name(d.clone()),
                    kind,
                }));
            }
        }
    }

    /// The exposition: OpenMetrics when the scraper asks for it, else the
    /// Prometheus text format 0.0.4 (what every scraper reads).
    pub fn render(&self, openmetrics: bool) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        // prometheus-client leaves out a family with no series; a scraper
        // (and a dashboard) should see every family from start-up.
        let body_end = out.strip_suffix("# EOF\n").map_or(out.len(), str::len);
        let mut missing = String::new();
        for f in &self.families {
            if !out.contains(&format!("# TYPE {} ", f.name)) {
                let _ = writeln!(missing, "# HELP {} {}.", f.name, f.help);
                let _ = writeln!(missing, "# TYPE {} {}", f.name, f.kind);
            }
        }
        out.insert_str(body_end, &missing);
        if openmetrics {
            out
        } else {
            to_prometheus_text(&out)
        }
    }
}

/// OpenMetrics text → Prometheus text 0.0.4. prometheus-client writes only
/// OpenMetrics; the two differ, for what we expose, in three ways: a
/// counter family is named with its `_total` in HELP/TYPE, `unknown` is
/// `untyped`, and there is no `# EOF`. Samples are the same lines.
fn to_prometheus_text(om: &str) -> String {
    let counters: std::collections::HashSet<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len() + counters.len() * 12);
    for line in om.lines() {
        if line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(if tail == "unknown" { "untyped" } else { tail });
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_text_names_counters_with_total_and_has_no_eof() {
        let m = Metrics::new();
        m.prime([Arc::from("p/m")].iter());
        let text = m.render(false);
        assert!(!text.contains("# EOF"), "{text}");
        assert!(
            text.contains("# TYPE switchyard_requests_total counter\n"),
            "{text}"
        );
        assert!(text.contains("# HELP switchyard_retries_total "), "{text}");
        assert!(
            text.contains("# TYPE switchyard_inflight_requests gauge\n"),
            "{text}"
        );
        assert!(text.contains("# TYPE switchyard_request_duration_seconds histogram\n"));
        assert!(
            text.contains("switchyard_retries_total{deployment=\"p/m\"} 0\n"),
            "{text}"
        );
        let om = m.render(true);
        assert!(om.ends_with("# EOF\n"), "{om}");
        assert!(om.contains("# TYPE switchyard_requests counter\n"), "{om}");
    }
}
