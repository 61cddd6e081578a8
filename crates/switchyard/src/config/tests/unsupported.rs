//! Keys this build parses but does not act on: refused at their own position.

use std::time::Duration;

use super::*;

const CACHE_OFF: &str = "has no effect: the response cache is off";
const NO_SHARED: &str =
    "has no effect: there is no shared state; set `state.backend: redis` or remove it";

#[test]
fn every_refused_key_with_its_position() {
    let src = r#"clients:
  - id: a
    key_env: BOT_KEY
    budget: { usd: 5 }
cache:
  backend: redis
  ttl: 1m
  max_bytes: 1MiB
  when: always
state:
  backend: redis
  redis_url: redis+sentinel://s1:26379,s2:26379/main
usage:
  store: sqlite
  path: usage.db
observability:
  otlp_endpoint: http://otel:4317
  debug_bodies: header
  log_format: pretty
  log_requests: false
"#;
    let want = [
        (8, 14, "cache.max_bytes", "has no effect with `backend: redis` (Redis's own `maxmemory` bounds it); remove it".to_string()),
        (18, 17, "observability.debug_bodies", "has no effect: no client may ask for its bodies; give one `debug: true` or set `debug_bodies: off`".to_string()),
    ];
    let want: Vec<_> = want
        .into_iter()
        .map(|(l, c, p, m)| (l, c, p.to_string(), m))
        .collect();
    assert_eq!(errs(src), want);

    let shown = load(src).unwrap_err()[1].to_string();
    assert!(
        shown.starts_with("t.yaml:18:17: observability.debug_bodies: has no effect"),
        "{shown}"
    );
}

#[test]
fn a_debug_client_needs_the_log_to_take_bodies() {
    let client = "clients:\n  - { id: a, key_env: BOT_KEY, debug: true }\n";
    one(
        client,
        2,
        39,
        "clients[0].debug",
        "has no effect: bodies are never logged; set `observability.debug_bodies: header`",
    );
    // `debug: false` asks for nothing; with the log taking bodies, it loads.
    assert!(load("clients:\n  - { id: a, key_env: BOT_KEY, debug: false }\n").is_ok());
    let both = format!("{client}observability: {{ debug_bodies: header }}\n");
    assert!(load(&both).unwrap().clients.unwrap()[0].debug);
}

#[test]
fn postgres_and_keys_without_their_switch() {
    // A key that only makes sense with the feature claims it even when the
    // switch is left to its default.
    one(
        "cache: { ttl: 1m }\n",
        1,
        15,
        "cache.ttl",
        "has no effect: the response cache is off; set `cache.backend: memory`",
    );
    one(
        "state: { backend: memory, redis_url: \"redis://h\" }\n",
        1,
        38,
        "state.redis_url",
        NO_SHARED,
    );
}

#[test]
fn grammar_comes_first_one_message_per_key() {
    one(
        "cache: { ttl: 0s }\n",
        1,
        15,
        "cache.ttl",
        "must be greater than zero",
    );
    one(
        "state: { redis_url: \"http://x\" }\n",
        1,
        21,
        "state.redis_url",
        "expected redis://",
    );
    one(
        "observability: { otlp_endpoint: \"otel:4317\" }\n",
        1,
        33,
        "observability.otlp_endpoint",
        "not a valid URL",
    );
    one(
        "clients:\n  - { id: a, key_env: BOT_KEY, budget: { usd: -1 } }\n",
        2,
        47,
        "clients[0].budget.usd",
        "must not be negative",
    );
    // An unknown backend is reported as such; the cache keys beside it still
    // ask for a cache that does not exist.
    let all = errs("cache: { backend: disk, ttl: 1m }\n");
    let got: Vec<_> = all
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.split(';').next().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            (1, 19, "cache.backend", "unknown value `disk`"),
            (1, 30, "cache.ttl", CACHE_OFF)
        ]
    );
}

#[test]
fn the_fleet_says_what_it_needs() {
    one(
        "state: { backend: redis }\n",
        1,
        19,
        "state.backend",
        "`backend: redis` needs `state.redis_url`",
    );
    // The shared cache is the fleet's.
    one(
        "cache: { backend: redis }\n",
        1,
        19,
        "cache.backend",
        "`cache.backend: redis` is the fleet's shared cache: it needs `state.backend: redis`",
    );
    let c = load(concat!(
        "state: { backend: redis, redis_url: \"redis://r:6379/\", key_prefix: \"gw:\", on_unavailable: reject }\n",
        "cache: { backend: redis, ttl: 1m }\n",
    ))
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(
        (
            c.state.key_prefix.as_str(),
            c.state.on_unavailable,
            c.cache.backend
        ),
        ("gw:", OnUnavailable::Reject, CacheBackend::Redis)
    );
    let c = load(
        "state: { backend: redis, cluster_urls: [\"redis://a:7000\", \"redis://b:7000/\"] }\n",
    )
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(
        c.state.cluster_urls,
        Some(vec![
            "redis://a:7000".to_string(),
            "redis://b:7000".to_string()
        ])
    );
    one(
        "state: { backend: redis, redis_url: \"redis://r\", cluster_urls: [\"redis://a:7000\"] }\n",
        1,
        37,
        "state.redis_url",
        "give `redis_url` (one server) or `cluster_urls` (a Cluster), not both",
    );
    one(
        "state: { backend: redis, cluster_urls: [] }\n",
        1,
        40,
        "state.cluster_urls",
        "lists no node",
    );
    one(
        "state: { backend: redis, redis_url: \"redis+sentinel://s1:26379\" }\n",
        1,
        37,
        "state.redis_url",
        "expected redis+sentinel://host:port[,host:port…]/master-name",
    );
    one(
        "state: { backend: redis, redis_url: \"redis://r\", on_unavailable: maybe }\n",
        1,
        66,
        "state.on_unavailable",
        "unknown value `maybe`",
    );
}

#[test]
fn budgets_and_usage_stores_are_accepted() {
    let c = load(concat!(
        "clients:\n  - { id: a, key_env: BOT_KEY, budget: { usd: 5, per: month } }\n",
        "usage: { store: sqlite, path: u.db, retention: 7d, store_responses: 12h }\n",
    ))
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(
        c.clients.unwrap()[0].budget,
        Some(Budget {
            usd: 5.0,
            per: BudgetPeriod::Month
        })
    );
    assert!(matches!(&c.usage.store, UsageBackend::Sqlite { path } if path == "u.db"));
    assert_eq!(c.usage.retention, Duration::from_secs(7 * 86_400));
    assert_eq!(c.usage.store_responses, Duration::from_secs(12 * 3600));
    one(
        "usage: { retention: 12h }\n",
        1,
        21,
        "usage.retention",
        "must be at least 1d",
    );
    // PostgreSQL needs its URL.
    one(
        "usage: { store: postgres }\n",
        1,
        17,
        "usage.store",
        "`store: postgres` needs `usage.url`",
    );
}

#[test]
fn truthful_values_load() {
    let c = load(concat!(
        "cache: { backend: memory, ttl: 1m, max_entries: 5, when: header }\n",
        "state: { backend: memory }\n",
        "usage: { store: off }\n",
        "observability: { otlp_endpoint: \"${OTLP:-}\", debug_bodies: off, log_format: pretty, log_requests: false }\n",
        "clients:\n  - { id: a, key_env: BOT_KEY, rpm: 5 }\n",
    ))
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(
        c.cache,
        Cache {
            backend: CacheBackend::Memory,
            ttl: Duration::from_secs(60),
            max_entries: 5,
            max_bytes: 256 << 20,
            when: CacheWhen::Header
        }
    );
    assert_eq!(c.state.backend, StateBackend::Memory);
    assert!(matches!(c.usage.store, UsageBackend::Off));
    let o = &c.observability;
    assert_eq!(
        (
            o.otlp_endpoint.as_deref(),
            o.debug_bodies,
            o.log_format,
            o.log_requests
        ),
        (None, DebugBodies::Off, LogFormat::Pretty, false)
    );
    assert_eq!(c.clients.unwrap()[0].budget, None);
}

#[test]
fn the_fleets_keys_without_the_fleet_have_no_effect() {
    let src = r#"state:
  key_prefix: "switchyard:"
  on_unavailable: local
  cluster_urls: [redis://a:6379]
"#;
    let got: Vec<_> = errs(src)
        .into_iter()
        .map(|(l, c, p, m)| (l, c, p, m.split(' ').take(3).collect::<Vec<_>>().join(" ")))
        .collect();
    let want = [
        (2, 15, "state.key_prefix", "has no effect:"),
        (3, 19, "state.on_unavailable", "has no effect:"),
        (4, 17, "state.cluster_urls", "has no effect:"),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.to_string(), m.to_string()))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn the_memory_cache_and_its_keys_act() {
    let c = load(concat!(
        "cache: { backend: memory, max_bytes: 64MiB }\n",
        "clients:\n  - { id: a, key_env: BOT_KEY, cache: shared }\n  - { id: b, key_env: ANTHROPIC_KEY }\n",
    ))
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.cache.backend, CacheBackend::Memory);
    assert_eq!(c.cache.max_bytes, 64 << 20);
    let clients = c.clients.unwrap();
    assert!(clients[0].cache_shared && !clients[1].cache_shared);
    // With the cache off a client's `cache` would do nothing.
    one(
        "clients:\n  - { id: a, key_env: BOT_KEY, cache: shared }\n",
        2,
        39,
        "clients[0].cache",
        CACHE_OFF,
    );
}

#[test]
fn the_otlp_keys_are_taken_and_checked_at_their_position() {
    let c = load("observability: { otlp_endpoint: \"http://otel:4318/\", otlp_protocol: http, trace_sample: 0.25, trace_slow: 1500ms }\n").unwrap();
    let o = &c.observability;
    assert_eq!(o.otlp_endpoint.as_deref(), Some("http://otel:4318"));
    assert_eq!(
        (o.otlp_protocol, o.trace_sample, o.trace_slow),
        (
            OtlpProtocol::Http,
            0.25,
            Some(std::time::Duration::from_millis(1500))
        )
    );
    // The slow-request rule is off unless set.
    let d = load("observability: {}\n").unwrap().observability;
    assert_eq!(
        (
            d.otlp_endpoint,
            d.otlp_protocol,
            d.trace_sample,
            d.trace_slow
        ),
        (None, OtlpProtocol::Grpc, 1.0, None)
    );
    one(
        "observability: { otlp_protocol: thrift }\n",
        1,
        33,
        "observability.otlp_protocol",
        "unknown value `thrift`; expected one of: grpc, http",
    );
    one(
        "observability: { trace_sample: 1.5 }\n",
        1,
        32,
        "observability.trace_sample",
        "must be between 0 and 1, found 1.5",
    );
    one(
        "observability: { trace_slow: 0s }\n",
        1,
        30,
        "observability.trace_slow",
        "must be more than 0",
    );
    one(
        "observability: { trace_slow: 5 }\n",
        1,
        30,
        "observability.trace_slow",
        "invalid duration `5`",
    );
    one(
        "observability: { otlp_endpoint: \"http://u:secret@otel:4317\" }\n",
        1,
        33,
        "observability.otlp_endpoint",
        "must not hold credentials",
    );
    let shown =
        load("observability: { otlp_endpoint: \"http://u:secret@otel:4317\" }\n").unwrap_err();
    assert!(!shown[0].to_string().contains("secret"), "{}", shown[0]);
}

/// `region` on a deployment (a string: `no` is Norway, not false) and on
/// the server land in the model, where routing reads them; an empty
/// `server.region` (an unset `${REGION:-}`) is none.
#[test]
fn regions_of_the_server_and_of_deployments_land_in_the_model() {
    let c = load(
        "server: { region: eu }\nproviders:\n  p: { protocol: openai }\nmodels:\n  - { provider: p, model: a }\n  - { provider: p, model: b, region: no }\n",
    )
    .unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.server.region.as_deref(), Some("eu"));
    assert_eq!(c.deployments["p/b"].region.as_deref(), Some("no"));
    assert_eq!(c.deployments["p/a"].region, None);
    let c = load("server: { region: \"\" }\n").unwrap_or_else(|e| panic!("{e:#?}"));
    assert_eq!(c.server.region, None);
}
