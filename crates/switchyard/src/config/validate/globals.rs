//! `server`, `cache`, `state`, `usage`, `observability`, `degraded`,
//! `reload`, `shadow`.

use std::net::SocketAddr;
use std::time::Duration;

use super::super::fields as f;
use super::super::node::{At, Sp};
use super::super::raw::{
    section, RawCache, RawConfig, RawDegraded, RawObservability, RawReload, RawServer, RawShadow,
    RawState, RawUsage, UsageStore,
};
use super::super::Diags;
use super::{at_least_one, positive, url};
use crate::config::fields::Fields;
use crate::config::model::*;

pub const DEGRADED_MESSAGE: &str = "The assistant is busy, please try again shortly.";

/// Decodes the single-mapping sections other than `server` (read in `raw`).
pub fn decode(d: &mut Diags, top: &Fields, raw: &mut RawConfig) {
    let cache_keys = ["backend", "ttl", "max_entries", "max_bytes", "when"];
    if let Some(c) = section(d, top, "cache", &cache_keys) {
        let backends = [
            ("memory", CacheBackend::Memory),
            ("redis", CacheBackend::Redis),
            ("off", CacheBackend::Off),
        ];
        let when = [
            ("deterministic", CacheWhen::Deterministic),
            ("always", CacheWhen::Always),
            ("header", CacheWhen::Header),
        ];
        raw.cache = RawCache {
            backend: c.choice(d, "backend", &backends),
            ttl: c.get(d, "ttl", f::duration),
            max_entries: c.get(d, "max_entries", f::uint),
            when: c.choice(d, "when", &when),
            max_bytes: c.get(d, "max_bytes", f::size),
        };
    }
    let state_keys = [
        "backend",
        "redis_url",
        "cluster_urls",
        "key_prefix",
        "on_unavailable",
    ];
    if let Some(s) = section(d, top, "state", &state_keys) {
        let backends = [
            ("memory", StateBackend::Memory),
            ("redis", StateBackend::Redis),
        ];
        raw.state = RawState {
            backend: s.choice(d, "backend", &backends),
            redis_url: s.get(d, "redis_url", f::string),
            key_prefix: s.get(d, "key_prefix", f::string),
            on_unavailable: s.choice(
                d,
                "on_unavailable",
                &[
                    ("local", OnUnavailable::Local),
                    ("reject", OnUnavailable::Reject),
                ],
            ),
            cluster_urls: s.list(d, "cluster_urls", f::string),
        };
    }
    let usage_keys = ["store", "path", "url", "retention", "store_responses"];
    if let Some(u) = section(d, top, "usage", &usage_keys) {
        let stores = [
            ("sqlite", UsageStore::Sqlite),
            ("postgres", UsageStore::Postgres),
            ("off", UsageStore::Off),
        ];
        raw.usage = RawUsage {
            store: u.choice(d, "store", &stores),
            path: u.get(d, "path", f::string),
            url: u.get(d, "url", f::string),
            retention: u.get(d, "retention", f::duration),
            store_responses: u.get(d, "store_responses", f::duration),
        };
    }
    let keys = [
        "log_format",
        "log_requests",
        "otlp_endpoint",
        "otlp_protocol",
        "trace_sample",
        "trace_slow",
        "debug_bodies",
    ];
    if let Some(o) = section(d, top, "observability", &keys) {
        raw.observability = RawObservability {
            log_format: o.choice(
                d,
                "log_format",
                &[("json", LogFormat::Json), ("pretty", LogFormat::Pretty)],
            ),
            log_requests: o.get(d, "log_requests", f::boolean),
            otlp_endpoint: o.get(d, "otlp_endpoint", f::string),
            debug_bodies: o.choice(
                d,
                "debug_bodies",
                &[("off", DebugBodies::Off), ("header", DebugBodies::Header)],
            ),
            otlp_protocol: o.choice(
                d,
                "otlp_protocol",
                &[("grpc", OtlpProtocol::Grpc), ("http", OtlpProtocol::Http)],
            ),
            trace_sample: o.get(d, "trace_sample", f::float),
            trace_slow: o.get(d, "trace_slow", f::duration),
        };
    }
    if let Some(r) = section(d, top, "reload", &["canary", "for", "rollback_on"]) {
        raw.reload.canary = r.get(d, "canary", f::float);
        raw.reload.lasts = r.get(d, "for", f::duration);
        raw.reload.rollback_on = section(d, &r, "rollback_on", &["error_rate", "p95"]).map(|b| {
            (
                b.at.clone(),
                b.get(d, "error_rate", f::float),
                b.get(d, "p95", f::float),
            )
        });
    }
    if let Some(s) = section(d, top, "shadow", &["queue", "workers"]) {
        raw.shadow.queue = s.get(d, "queue", f::uint);
        raw.shadow.workers = s.get(d, "workers", f::uint);
    }
    if let Some(g) = section(d, top, "degraded", &["enabled", "message"]) {
        raw.degraded = RawDegraded {
            enabled: g.get(d, "enabled", f::boolean),
            message: g.get(d, "message", f::string),
        };
    }
}

pub fn server(d: &mut Diags, s: &RawServer, env: crate::config::env::Env) -> Server {
    let listen_at = listen_value(&s.listen, "listen", crate::config::LISTEN_ENV, env);
    let admin_at = listen_value(
        &s.admin_listen,
        "admin_listen",
        crate::config::ADMIN_LISTEN_ENV,
        env,
    );
    let addr = |d: &mut Diags, v: &Option<(Sp<String>, Option<&str>)>, default: &str| {
        let fallback: SocketAddr = default.parse().expect("default address");
        let Some((v, var)) = v else { return fallback };
        v.value.parse().unwrap_or_else(|_| {
            let from = var.map_or_else(String::new, |var| format!(" (from {var})"));
            d.err(
                &v.at,
                format!(
                    "`{}` is not a socket address (expected host:port, e.g. {default}){from}",
                    v.value
                ),
            );
            fallback
        })
    };
    let max_body = match &s.max_body {
        Some(v) if v.value == 0 => {
            d.err(&v.at, "must be greater than zero");
            0
        }
        Some(v) => usize::try_from(v.value).unwrap_or(usize::MAX),
        None => 20 << 20,
    };
    let server = Server {
        listen: addr(d, &listen_at, "0.0.0.0:8080"),
        admin_listen: addr(d, &admin_at, "127.0.0.1:9090"),
        max_body,
        sse_keepalive: positive(d, &s.sse_keepalive, Duration::from_secs(15)),
        body_timeout: positive(d, &s.body_timeout, Duration::from_secs(30)),
        max_connections: max_connections(d, &s.max_connections),
        admin_key: admin_key(d, &s.admin_key_env, env),
        region: region(&s.region),
    };
    let checked = [
        "server.listen",
        "server.admin_listen",
        "server.admin_key_env",
    ];
    if !checked.iter().any(|p| d.reported(p)) {
        for problem in listener_problems(&server) {
            // Blame the address that was written (the admin one if both were).
            let blamed = match problem {
                ListenerProblem::Shared if admin_at.is_none() && listen_at.is_some() => {
                    (&listen_at, "listen")
                }
                _ => (&admin_at, "admin_listen"),
            };
            let (at, from) = match blamed {
                (Some((v, var)), _) => (
                    v.at.clone(),
                    var.map_or_else(String::new, |var| format!(" (from {var})")),
                ),
                (None, key) => (
                    At {
                        path: format!("server.{key}"),
                        ..At::default()
                    },
                    String::new(),
                ),
            };
            d.err(&at, format!("{}{from}", problem.message(&server)));
        }
    }
    server
}

/// `server.<key>` as written, unless `var` (set and not empty) replaces it;
/// with the variable's name when it did.
fn listen_value<'v>(
    written: &Option<Sp<String>>,
    key: &str,
    var: &'v str,
    env: crate::config::env::Env,
) -> Option<(Sp<String>, Option<&'v str>)> {
    match env(var).filter(|v| !v.trim().is_empty()) {
        Some(value) => Some((
            Sp {
                value: value.trim().to_owned(),
                at: written.as_ref().map_or_else(
                    || At {
                        path: format!("server.{key}"),
                        ..At::default()
                    },
                    |w| w.at.clone(),
                ),
            },
            Some(var),
        )),
        None => written.clone().map(|w| (w, None)),
    }
}

/// Listener addresses that would open a door.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListenerProblem {
    /// `admin_listen` is `listen`: the admin API served with the client API.
    Shared,
    /// `admin_listen` reachable beyond this host with no admin key.
    OpenAdmin,
}

impl ListenerProblem {
    fn message(self, s: &Server) -> String {
        match self {
            ListenerProblem::Shared => format!(
                "`admin_listen` is `listen` ({}): the admin API (reload, keys, usage) would be served to every client; give it its own port",
                s.admin_listen
            ),
            ListenerProblem::OpenAdmin => format!(
                "`{}` is not a loopback address and there is no `admin_key_env`: the admin API (reload, keys, usage) would be open to the network; set `admin_key_env` or listen on 127.0.0.1",
                s.admin_listen
            ),
        }
    }
}

/// What is wrong with these listeners (port 0 is a fresh port each time,
/// never shared).
fn listener_problems(s: &Server) -> Vec<ListenerProblem> {
    let mut out = Vec::new();
    if s.listen == s.admin_listen && s.listen.port() != 0 {
        out.push(ListenerProblem::Shared);
    }
    if !s.admin_listen.ip().is_loopback() && s.admin_key.is_none() {
        out.push(ListenerProblem::OpenAdmin);
    }
    out
}

/// `region`: a name compared with deployments' `region`; empty (as an unset
/// `${REGION:-}` expands) means none.
fn region(v: &Option<Sp<String>>) -> Option<String> {
    v.as_ref()
        .map(|r| r.value.trim().to_owned())
        .filter(|r| !r.is_empty())
}

/// `max_connections`: at least 1 (default 10 000).
fn max_connections(d: &mut Diags, v: &Option<Sp<u64>>) -> usize {
    match v {
        Some(v) if v.value == 0 => {
            d.err(&v.at, "must be greater than zero");
            1
        }
        Some(v) => usize::try_from(v.value).unwrap_or(usize::MAX),
        None => 10_000,
    }
}

/// `admin_key_env`: empty means no admin key; a named variable must be set.
fn admin_key(
    d: &mut Diags,
    var: &Option<Sp<String>>,
    env: crate::config::env::Env,
) -> Option<crate::secret::Secret<String>> {
    let var = var.as_ref().filter(|v| !v.value.is_empty())?;
    match env(&var.value).filter(|v| !v.is_empty()) {
        Some(key) => Some(crate::secret::Secret::new(key)),
        None => {
            d.err(
                &var.at,
                format!("environment variable `{}` is not set or empty", var.value),
            );
            None
        }
    }
}

pub fn stores(d: &mut Diags, raw: &RawConfig) -> (Cache, State, Usage) {
    let c = &raw.cache;
    let cache = Cache {
        // Off unless asked for: a gateway that answers from memory is a
        // choice its operator makes (the section's keys need it on).
        backend: c.backend.as_ref().map_or(CacheBackend::Off, |b| b.value),
        ttl: positive(d, &c.ttl, Duration::from_secs(300)),
        max_entries: at_least_one(d, &c.max_entries).unwrap_or(10_000),
        max_bytes: at_least_one(d, &c.max_bytes).unwrap_or(256 << 20),
        when: c
            .when
            .as_ref()
            .map_or(CacheWhen::Deterministic, |w| w.value),
    };
    let s = &raw.state;
    let redis_url = s.redis_url.as_ref().and_then(|u| {
        if u.value.starts_with("redis+sentinel://") {
            // Several hosts and a master's name: not one URL's shape.
            if sentinel_parts(&u.value).is_none() {
                d.err(
                    &u.at,
                    "expected redis+sentinel://host:port[,host:port…]/master-name",
                );
                return None;
            }
            return Some(u.value.clone());
        }
        url(d, u, &["redis", "rediss", "redis+sentinel"])
    });
    let cluster_urls = s.cluster_urls.as_ref().and_then(|l| {
        if l.value.is_empty() {
            d.err(
                &l.at,
                "lists no node: give the Cluster's nodes (any few will do)",
            );
            return None;
        }
        let urls: Vec<String> = l
            .value
            .iter()
            .filter_map(|u| url(d, u, &["redis", "rediss"]))
            .collect();
        (urls.len() == l.value.len()).then_some(urls)
    });
    if let (Some(u), Some(_)) = (&s.redis_url, &s.cluster_urls) {
        d.err(
            &u.at,
            "give `redis_url` (one server) or `cluster_urls` (a Cluster), not both",
        );
    }
    let state = State {
        backend: s.backend.as_ref().map_or(StateBackend::Memory, |b| b.value),
        redis_url,
        cluster_urls,
        key_prefix: s
            .key_prefix
            .as_ref()
            .map_or_else(|| "switchyard:".to_owned(), |p| p.value.clone()),
        on_unavailable: s
            .on_unavailable
            .as_ref()
            .map_or_else(Default::default, |o| o.value),
    };
    let u = &raw.usage;
    let store = u.store.as_ref().map_or(UsageStore::Sqlite, |s| s.value);
    let misplaced = |d: &mut Diags, v: &Option<Sp<String>>, key: &str, owner: &str| {
        if let Some(v) = v {
            d.err(&v.at, format!("`{key}` only applies to `store: {owner}`"));
        }
    };
    let backend = match store {
        UsageStore::Off => UsageBackend::Off,
        UsageStore::Sqlite => {
            misplaced(d, &u.url, "url", "postgres");
            UsageBackend::Sqlite {
                path: u
                    .path
                    .as_ref()
                    .map_or("switchyard.db".into(), |p| p.value.clone()),
            }
        }
        UsageStore::Postgres => {
            misplaced(d, &u.path, "path", "sqlite");
            let url = match &u.url {
                Some(v)
                    if v.value.starts_with("postgres://")
                        || v.value.starts_with("postgresql://") =>
                {
                    v.value.clone()
                }
                Some(v) => {
                    // Not echoed: it may hold a password.
                    d.err(&v.at, "expected a postgres://… URL");
                    String::new()
                }
                None => String::new(),
            };
            UsageBackend::Postgres {
                url: crate::secret::Secret::new(url),
            }
        }
    };
    // Rollups are by UTC day: rows must outlive the day they belong to, or
    // today's totals (and a daily budget's spend) would lose them.
    if let Some(r) = u
        .retention
        .as_ref()
        .filter(|r| r.value < Duration::from_secs(86_400))
    {
        if !r.value.is_zero() {
            d.err(
                &r.at,
                "must be at least 1d (request rows are summed into daily rollups)",
            );
        }
    }
    let usage = Usage {
        store: backend,
        retention: positive(d, &u.retention, Duration::from_secs(90 * 86_400)),
        store_responses: positive(d, &u.store_responses, Duration::from_secs(30 * 86_400)),
    };
    (cache, state, usage)
}

/// What a refused feature would need besides itself (`redis_url`, `usage.url`).
/// Runs after [`super::unsupported::check`]: a key already refused there gets
/// no second message telling the user to complete what cannot work.
pub fn requirements(d: &mut Diags, raw: &RawConfig) {
    let (c, s, u) = (&raw.cache, &raw.state, &raw.usage);
    if let Some(b) = s
        .backend
        .as_ref()
        .filter(|b| b.value == StateBackend::Redis)
    {
        if s.redis_url.is_none() && s.cluster_urls.is_none() {
            d.missing(
                &b.at,
                "`backend: redis` needs `state.redis_url` (or `state.cluster_urls`)",
            );
        }
    }
    if let Some(b) = c
        .backend
        .as_ref()
        .filter(|b| b.value == CacheBackend::Redis)
    {
        let shared = s
            .backend
            .as_ref()
            .is_some_and(|b| b.value == StateBackend::Redis);
        if !shared {
            d.missing(
                &b.at,
                "`cache.backend: redis` is the fleet's shared cache: it needs `state.backend: redis`",
            );
        }
    }
    if let Some(st) = u.store.as_ref().filter(|s| s.value == UsageStore::Postgres) {
        if u.url.is_none() {
            d.missing(&st.at, "`store: postgres` needs `usage.url`");
        }
    }
}

pub fn observability(d: &mut Diags, o: &RawObservability) -> Observability {
    let otlp = o.otlp_endpoint.as_ref().filter(|e| !e.value.is_empty());
    Observability {
        log_format: o.log_format.as_ref().map_or(LogFormat::Json, |v| v.value),
        log_requests: o.log_requests.as_ref().is_none_or(|v| v.value),
        otlp_endpoint: otlp.and_then(|e| otlp_endpoint(d, e)),
        otlp_protocol: o
            .otlp_protocol
            .as_ref()
            .map_or(OtlpProtocol::Grpc, |v| v.value),
        trace_sample: o.trace_sample.as_ref().map_or(1.0, |v| {
            if !(0.0..=1.0).contains(&v.value) {
                d.err(&v.at, format!("must be between 0 and 1, found {}", v.value));
            }
            v.value.clamp(0.0, 1.0)
        }),
        // Off unless set: a zero threshold would export every request,
        // which is `trace_sample: 1`.
        trace_slow: o.trace_slow.as_ref().and_then(|v| {
            if v.value.is_zero() {
                d.err(
                    &v.at,
                    "must be more than 0; leave it out to turn the slow-request rule off",
                );
            }
            (!v.value.is_zero()).then_some(v.value)
        }),
        debug_bodies: o
            .debug_bodies
            .as_ref()
            // The contract's default is header; this build never logs bodies.
            .map_or(DebugBodies::Off, |v| v.value),
    }
}

/// An http(s) URL without credentials: export errors are logged, and a
/// collector that needs a token takes it in a header, not in the URL.
fn otlp_endpoint(d: &mut Diags, e: &Sp<String>) -> Option<String> {
    if e.value.contains('@') {
        d.err(
            &e.at,
            "must not hold credentials (user:password@): the collector is reached without them",
        );
        return None;
    }
    url(d, e, &["http", "https"])
}

/// `reload.rollback_on`: an error-rate margin in [0, 1] and a p95 factor of
/// at least 1 (below 1 a canary as fast as the old config would be rolled
/// back).
pub fn reload(d: &mut Diags, r: &RawReload) -> Reload {
    let mut out = Reload::default();
    if let Some(c) = &r.canary {
        if c.value > 0.0 && c.value <= 100.0 {
            // 100%: every request on the new config, a reload like any other.
            out.canary = (c.value < 100.0).then_some(c.value / 100.0);
        } else {
            d.err(
                &c.at,
                "must be a percentage of requests above 0 and at most 100",
            );
        }
    }
    out.lasts = positive(d, &r.lasts, out.lasts);
    let Some((_, error_rate, p95)) = &r.rollback_on else {
        return out;
    };
    if let Some(e) = error_rate {
        if (0.0..=1.0).contains(&e.value) {
            out.rollback_on.error_rate = e.value;
        } else {
            d.err(&e.at, "must be between 0 and 1 (a share of requests)");
        }
    }
    if let Some(p) = p95 {
        if p.value >= 1.0 && p.value.is_finite() {
            out.rollback_on.p95 = p.value;
        } else {
            d.err(
                &p.at,
                "must be at least 1 (the new config's p95 over the old one's)",
            );
        }
    }
    out
}

/// `shadow`: the queue's bound and the workers that empty it (each at
/// least 1; defaults [`ShadowTraffic::default`]).
pub fn shadow(d: &mut Diags, s: &RawShadow) -> ShadowTraffic {
    let def = ShadowTraffic::default();
    let count = |v: Option<u64>, default: usize| v.map_or(default, |n| n as usize);
    ShadowTraffic {
        queue: count(at_least_one(d, &s.queue), def.queue),
        workers: count(at_least_one(d, &s.workers), def.workers),
    }
}

pub fn degraded(g: &RawDegraded) -> Degraded {
    Degraded {
        enabled: g.enabled.as_ref().is_some_and(|v| v.value),
        message: g
            .message
            .as_ref()
            .map_or(DEGRADED_MESSAGE.into(), |m| m.value.clone()),
    }
}
