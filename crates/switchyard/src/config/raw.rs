//! The typed mirror of the YAML: shapes, scalar types, units and enum names are
//! checked here; cross-references and ranges in `validate`. Every field is
//! optional so that a bad value drops only itself (reported) and the rest of the
//! file is still checked; required keys are enforced in `validate`.

use std::time::Duration;

use super::fields::{self as f, fields, items, map_entries, Fields};
use super::model::*;
use super::node::{At, Node, Sp};
use super::Diags;

type Opt<T> = Option<Sp<T>>;
/// A small mapping of three optional numbers, with where it sits.
/// Three numbers with where they sit (`weights: { health, latency, cost }`).
pub type Trio = (At, Opt<f64>, Opt<f64>, Opt<f64>);
/// `pricing: { input, output, cached_input, cache_write }`, with where it sits.
pub type RawPricing = (At, Opt<f64>, Opt<f64>, Opt<f64>, Opt<f64>);
/// `retry: { attempts, base, max }`, with where it sits.
pub type RawRetry = (At, Opt<u32>, Opt<Duration>, Opt<Duration>);

#[derive(Debug, Default)]
pub struct RawConfig {
    pub server: RawServer,
    pub clients: Option<Vec<RawClient>>,
    pub providers: Vec<(Sp<String>, RawProvider)>,
    pub models: Vec<RawModel>,
    pub routes: Vec<(Sp<String>, RawRoute)>,
    pub task_rules: Vec<RawTaskRule>,
    pub cache: RawCache,
    pub state: RawState,
    pub usage: RawUsage,
    pub observability: RawObservability,
    pub degraded: RawDegraded,
    pub reload: RawReload,
    pub shadow: RawShadow,
}

#[derive(Debug, Default)]
pub struct RawServer {
    pub listen: Opt<String>,
    pub admin_listen: Opt<String>,
    pub max_body: Opt<u64>,
    pub sse_keepalive: Opt<Duration>,
    pub body_timeout: Opt<Duration>,
    pub max_connections: Opt<u64>,
    pub admin_key_env: Opt<String>,
    pub region: Opt<String>,
}

#[derive(Debug, Default)]
pub struct RawClient {
    pub at: At,
    pub id: Opt<String>,
    pub key_sha256: Opt<String>,
    pub key_env: Opt<String>,
    pub routes: Opt<Vec<Sp<String>>>,
    pub rpm: Opt<u32>,
    pub tpm: Opt<u64>,
    pub budget: Option<(At, Opt<f64>, Opt<BudgetPeriod>)>,
    /// `private | shared` (the response cache; refused until it exists).
    pub cache: Opt<&'static str>,
    /// May ask for its bodies in the log (`x-switchyard-debug: 1`).
    pub debug: Opt<bool>,
}

#[derive(Debug, Default)]
pub struct RawProvider {
    pub protocol: Opt<Protocol>,
    pub flavor: Opt<Flavor>,
    pub base_url: Opt<String>,
    pub keys: Vec<RawKey>,
    pub timeouts: RawTimeouts,
    pub limits: RawLimits,
    pub circuit: RawCircuit,
    /// `probe:` (contract §10); `None` when absent.
    pub probe: Option<RawProbe>,
    /// `quota:` (contract §10); `None` when absent.
    pub quota: Option<RawQuota>,
    pub headers: Vec<(Sp<String>, Sp<String>)>,
    pub options: serde_json::Map<String, serde_json::Value>,
    pub api_version: Opt<String>,
    pub region: Opt<String>,
    pub project: Opt<String>,
    pub location: Opt<String>,
    /// `default`, `{ env_prefix: NAME }` or `{ file: PATH }`.
    pub credentials: Option<Sp<RawCredentials>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RawCredentials {
    Default,
    EnvPrefix(Sp<String>),
    File(Sp<String>),
}

#[derive(Debug, Default)]
pub struct RawKey {
    pub at: At,
    pub env: Opt<String>,
    pub value: Opt<String>,
    /// `value` is written out in the file (no `${VAR}` in it).
    pub in_clear: bool,
    pub weight: Opt<u32>,
}

#[derive(Debug, Default)]
pub struct RawTimeouts {
    pub at: At,
    pub connect: Opt<Duration>,
    pub first_byte: Opt<Duration>,
    pub total: Opt<Duration>,
    pub stream_idle: Opt<Duration>,
}

#[derive(Debug, Default)]
pub struct RawLimits {
    pub rpm: Opt<u32>,
    pub tpm: Opt<u64>,
    pub concurrency: Opt<u32>,
    pub queue: Opt<u32>,
    pub queue_timeout: Opt<Duration>,
}

#[derive(Debug, Default)]
pub struct RawCircuit {
    pub window: Opt<Duration>,
    pub min_requests: Opt<u32>,
    pub failure_rate: Opt<f64>,
    pub consecutive_failures: Opt<u32>,
    pub latency_p95: Opt<Duration>,
    pub cooldown: Opt<Duration>,
}

/// `providers.<p>.probe` (contract §10).
#[derive(Debug, Default)]
pub struct RawProbe {
    pub at: At,
    pub every: Opt<Duration>,
    pub kind: Opt<crate::config::model::ProbeKind>,
    pub max_share: Opt<f64>,
    pub model: Opt<String>,
}

/// `providers.<p>.quota` (contract §10).
#[derive(Debug, Default)]
pub struct RawQuota {
    pub at: At,
    pub shift: Opt<f64>,
    pub stop: Opt<f64>,
}

#[derive(Debug, Default)]
pub struct RawModel {
    pub at: At,
    pub id: Opt<String>,
    pub provider: Opt<String>,
    pub model: Opt<String>,
    pub context_window: Opt<u32>,
    pub max_output_tokens: Opt<u32>,
    pub capabilities: Vec<Sp<Capability>>,
    pub pricing: Option<RawPricing>,
    pub region: Opt<String>,
    pub api: Opt<BedrockApi>,
    pub reasoning_replay: Opt<ReasoningReplay>,
    /// `limits:` of this deployment alone.
    pub limits: RawLimits,
}

#[derive(Debug, Default)]
pub struct RawRoute {
    pub at: At,
    pub strategy: Opt<Strategy>,
    pub targets: Opt<Vec<Sp<RawTarget>>>,
    /// `(at, health, latency, cost)`
    pub weights: Option<Trio>,
    pub fallbacks: Vec<Sp<String>>,
    pub require: Vec<Sp<Capability>>,
    pub max_cost_per_mtok: Opt<f64>,
    /// `(at, attempts, base, max)`
    pub retry: RawRetry,
    pub deadline: Opt<Duration>,
    pub sticky: Opt<bool>,
    pub classify: Opt<bool>,
    pub on_context_overflow: Opt<ContextOverflow>,
    pub on_stream_interrupt: Opt<StreamInterrupt>,
    pub contract: Option<RawContract>,
    pub tasks: Vec<(Sp<String>, Vec<Sp<String>>)>,
    /// `shadow: { target, share }`, with where it sits.
    pub shadow: Option<(At, Opt<String>, Opt<f64>)>,
}

/// `routes.<r>.contract: { on_violation, repair_attempts, stream }`.
#[derive(Debug, Default)]
pub struct RawContract {
    pub on_violation: Opt<OnViolation>,
    pub repair_attempts: Opt<u32>,
    pub stream: Opt<ContractStream>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawTarget {
    pub deployment: String,
    pub weight: Opt<u32>,
}

#[derive(Debug, Default)]
pub struct RawTaskRule {
    pub at: At,
    pub task: Opt<String>,
    pub keywords: Vec<Sp<String>>,
    pub regex: Opt<String>,
}

#[derive(Debug, Default)]
pub struct RawCache {
    pub backend: Opt<CacheBackend>,
    pub ttl: Opt<Duration>,
    pub max_entries: Opt<u64>,
    pub when: Opt<CacheWhen>,
    pub max_bytes: Opt<u64>,
}

#[derive(Debug, Default)]
pub struct RawState {
    pub backend: Opt<StateBackend>,
    pub redis_url: Opt<String>,
    pub key_prefix: Opt<String>,
    pub on_unavailable: Opt<OnUnavailable>,
    pub cluster_urls: Opt<Vec<Sp<String>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageStore {
    Sqlite,
    Postgres,
    Off,
}

#[derive(Debug, Default)]
pub struct RawUsage {
    pub store: Opt<UsageStore>,
    pub path: Opt<String>,
    pub url: Opt<String>,
    pub retention: Opt<Duration>,
    pub store_responses: Opt<Duration>,
}

#[derive(Debug, Default)]
pub struct RawObservability {
    pub log_format: Opt<LogFormat>,
    pub log_requests: Opt<bool>,
    pub otlp_endpoint: Opt<String>,
    pub debug_bodies: Opt<DebugBodies>,
    pub otlp_protocol: Opt<OtlpProtocol>,
    pub trace_sample: Opt<f64>,
    pub trace_slow: Opt<Duration>,
}

#[derive(Debug, Default)]
pub struct RawDegraded {
    pub enabled: Opt<bool>,
    pub message: Opt<String>,
}

/// `shadow: { queue, workers }`: how shadow traffic is sent.
#[derive(Debug, Default)]
pub struct RawShadow {
    pub queue: Opt<u64>,
    pub workers: Opt<u64>,
}

/// `reload: { canary, for, rollback_on: { error_rate, p95 } }`.
#[derive(Debug, Default)]
pub struct RawReload {
    pub canary: Opt<f64>,
    pub lasts: Opt<Duration>,
    pub rollback_on: Option<(At, Opt<f64>, Opt<f64>)>,
}

const TOP: &[&str] = &[
    "server",
    "clients",
    "providers",
    "models",
    "routes",
    "task_rules",
    "cache",
    "state",
    "usage",
    "observability",
    "degraded",
    "reload",
    "shadow",
];

/// Decodes the (env-expanded) tree; problems go to `d`, bad parts are left out.
pub fn decode(d: &mut Diags, root: &Node) -> RawConfig {
    let mut raw = RawConfig::default();
    let Some(top) = fields(d, root, &At::default(), TOP) else {
        return raw;
    };
    if let Some(s) = section(
        d,
        &top,
        "server",
        &[
            "listen",
            "admin_listen",
            "admin_key_env",
            "max_body",
            "sse_keepalive",
            "body_timeout",
            "max_connections",
            "region",
        ],
    ) {
        raw.server = RawServer {
            listen: s.get(d, "listen", f::string),
            admin_listen: s.get(d, "admin_listen", f::string),
            max_body: s.get(d, "max_body", f::size),
            sse_keepalive: s.get(d, "sse_keepalive", f::duration),
            body_timeout: s.get(d, "body_timeout", f::duration),
            max_connections: s.get(d, "max_connections", f::uint),
            admin_key_env: s.get(d, "admin_key_env", f::string),
            region: s.get(d, "region", f::string),
        };
    }
    // `clients:` present (even empty) closes the gateway; absent leaves it open.
    if top.has("clients") {
        let list = top
            .node("clients")
            .and_then(|(n, at)| items(d, n, &at))
            .unwrap_or_default();
        raw.clients = Some(
            list.into_iter()
                .filter_map(|(x, a)| client(d, x, &a))
                .collect(),
        );
    }
    for (name, at, n) in entries(d, &top, "providers") {
        if let Some(p) = super::validate::providers::decode(d, n, &at) {
            raw.providers.push((
                Sp {
                    value: name.to_string(),
                    at,
                },
                p,
            ));
        }
    }
    if let Some((n, at)) = top.node("models") {
        for (x, a) in items(d, n, &at).unwrap_or_default() {
            raw.models.extend(super::validate::models::decode(d, x, &a));
        }
    }
    for (name, at, n) in entries(d, &top, "routes") {
        if let Some(r) = super::validate::routes::decode(d, n, &at) {
            raw.routes.push((
                Sp {
                    value: name.to_string(),
                    at,
                },
                r,
            ));
        }
    }
    if let Some((n, at)) = top.node("task_rules") {
        for (x, a) in items(d, n, &at).unwrap_or_default() {
            raw.task_rules
                .extend(super::validate::routes::decode_task_rule(d, x, &a));
        }
    }
    super::validate::globals::decode(d, &top, &mut raw);
    raw
}

/// A sub-mapping of `parent` read as a struct with `allowed` keys.
pub fn section<'n>(
    d: &mut Diags,
    parent: &Fields<'n>,
    key: &str,
    allowed: &[&str],
) -> Option<Fields<'n>> {
    let (n, at) = parent.node(key)?;
    fields(d, n, &at, allowed)
}

/// The entries of a free-form mapping under `key`.
pub fn entries<'n>(d: &mut Diags, parent: &Fields<'n>, key: &str) -> Vec<(&'n str, At, &'n Node)> {
    parent
        .node(key)
        .and_then(|(n, at)| map_entries(d, n, &at))
        .unwrap_or_default()
}

fn client(d: &mut Diags, n: &Node, at: &At) -> Option<RawClient> {
    let c = fields(
        d,
        n,
        at,
        &[
            "id",
            "key_sha256",
            "key_env",
            "routes",
            "rpm",
            "tpm",
            "budget",
            "cache",
            "debug",
        ],
    )?;
    let budget = section(d, &c, "budget", &["usd", "per"]).map(|b| {
        let per = [
            ("hour", BudgetPeriod::Hour),
            ("day", BudgetPeriod::Day),
            ("month", BudgetPeriod::Month),
        ];
        (
            b.at.clone(),
            b.get(d, "usd", f::float),
            b.choice(d, "per", &per),
        )
    });
    Some(RawClient {
        at: c.at.clone(),
        id: c.get(d, "id", f::string),
        key_sha256: c.get(d, "key_sha256", f::string),
        key_env: c.get(d, "key_env", f::string),
        routes: c.list(d, "routes", f::string),
        rpm: c.get(d, "rpm", f::uint32),
        tpm: c.get(d, "tpm", f::uint),
        budget,
        cache: c.choice(d, "cache", &[("private", "private"), ("shared", "shared")]),
        debug: c.get(d, "debug", f::boolean),
    })
}
