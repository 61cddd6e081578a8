//! Every metric of contract §6, declared once. Labels are small typed sets
//! whose values come from the config (route and deployment ids) or from enums
//! (`ErrorCode::as_str()`), never from free text a client sent.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
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

pub struct Metrics {
    pub requests: Family<RequestLabels, Counter>,
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
    registry: Registry,
}

fn latency_histogram() -> Histogram {
    // 1 ms … ~65 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let requests = Family::default();
        let duration = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        let ttft = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        let m = Metrics {
            requests,
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
            registry: Registry::default(),
        };
        // prometheus-client appends `_total` to counters itself.
        registry.register(
            "switchyard_requests",
            "Client requests answered",
            m.requests.clone(),
        );
        registry.register(
            "switchyard_request_duration_seconds",
            "Whole request duration",
            m.duration.clone(),
        );
        registry.register(
            "switchyard_time_to_first_token_seconds",
            "Time to the first answer byte from upstream",
            m.ttft.clone(),
        );
        registry.register(
            "switchyard_upstream_attempts",
            "Upstream attempts by outcome",
            m.attempts.clone(),
        );
        registry.register(
            "switchyard_fallbacks",
            "Requests served by other than the first choice",
            m.fallbacks.clone(),
        );
        registry.register(
            "switchyard_retries",
            "Retries on the same deployment",
            m.retries.clone(),
        );
        registry.register("switchyard_tokens", "Tokens by kind", m.tokens.clone());
        registry.register("switchyard_cost_usd", "Cost in USD", m.cost_usd.clone());
        registry.register(
            "switchyard_cache_requests",
            "Cache lookups",
            m.cache.clone(),
        );
        registry.register(
            "switchyard_circuit_state",
            "Circuit state per deployment (1 = in this state)",
            m.circuit_state.clone(),
        );
        registry.register(
            "switchyard_deployment_health_score",
            "Health score per deployment",
            m.health_score.clone(),
        );
        registry.register(
            "switchyard_stream_interruptions",
            "Streams interrupted after their first byte",
            m.stream_interruptions.clone(),
        );
        registry.register(
            "switchyard_ratelimit_rejections",
            "Requests refused by a gateway limit",
            m.ratelimit_rejections.clone(),
        );
        registry.register(
            "switchyard_inflight_requests",
            "Requests in flight",
            m.inflight.clone(),
        );
        registry.register(
            "switchyard_config_reloads",
            "Config reloads",
            m.config_reloads.clone(),
        );
        registry.register(
            "switchyard_upstream_events_skipped",
            "Unparsable upstream stream events skipped",
            m.events_skipped.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
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
