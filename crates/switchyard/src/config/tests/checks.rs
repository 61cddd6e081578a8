//! Each check: the diagnostic's exact line, column, path and message.

use super::{errs, one};

/// A provider `p` and a deployment `p/a` (lines 1–4).
const PRE: &str = "providers:\n  p: { protocol: openai }\nmodels:\n  - { provider: p, model: a }\n";

fn pre(rest: &str) -> String {
    format!("{PRE}{rest}")
}

#[test]
fn yaml_syntax_error_is_one_diagnostic() {
    one(
        "server:\n  listen: [1, 2\n",
        2,
        11,
        "",
        "YAML syntax error: unclosed bracket",
    );
    one("a:\n  b: 1\n c: 2\n", 3, 2, "", "YAML syntax error");
}

#[test]
fn unknown_keys_list_the_allowed_ones() {
    one(
        "providers:\n  openai:\n    protocol: openai\n    timeouts:\n      conect: 5s\n",
        5,
        7,
        "providers.openai.timeouts.conect",
        "unknown key `conect`; allowed keys: connect, first_byte, total, stream_idle",
    );
    one(
        "providers:\n  o:\n    protocol: openai\n    timeouts: { conect: 5s }\n",
        4,
        17,
        "providers.o.timeouts.conect",
        "unknown key",
    );
    one(
        "servr:\n  listen: x\n",
        1,
        1,
        "servr",
        "allowed keys: server, clients, providers, models, routes, task_rules, cache",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], retries: 3 }\n"),
        6,
        24,
        "routes.r.retries",
        "allowed keys: strategy, targets,",
    );
    one(
        "server:\n  listen: 0.0.0.0:1\n  listen: 0.0.0.0:2\n",
        3,
        3,
        "server.listen",
        "duplicate key `listen`",
    );
}

#[test]
fn wrong_types() {
    one(
        "server: 5\n",
        1,
        9,
        "server",
        "expected a mapping, found the number `5`",
    );
    one(
        "server:\n  max_body: [1]\n",
        2,
        13,
        "server.max_body",
        "expected a string, found a list",
    );
    one(
        "clients:\n  - id: a\n    key_env: BOT_KEY\n    rpm: lots\n",
        4,
        10,
        "clients[0].rpm",
        "expected an integer, found the string `lots`",
    );
    one(
        "clients:\n  - { id: a, key_env: BOT_KEY, rpm: -3 }\n",
        2,
        37,
        "clients[0].rpm",
        "must be a non-negative integer",
    );
    one(
        "observability: { log_requests: yes }\n",
        1,
        32,
        "observability.log_requests",
        "expected true or false",
    );
    one(
        "models: { a: 1 }\n",
        1,
        9,
        "models",
        "expected a list, found a mapping",
    );
    one(
        &pre("  - { provider: p, model: b, context_window: 1.5 }\n"),
        5,
        46,
        "models[1].context_window",
        "expected an integer",
    );
    one(
        &pre("  - { provider: p, model: b, context_window: 5000000000 }\n"),
        5,
        46,
        "models[1].context_window",
        "too large",
    );
}

#[test]
fn bad_units() {
    one(
        "server:\n  sse_keepalive: 15\n",
        2,
        18,
        "server.sse_keepalive",
        "missing unit",
    );
    one(
        "server:\n  max_body: 20MB5\n",
        2,
        13,
        "server.max_body",
        "unknown unit `mb5`",
    );
    one(
        "cache: { ttl: 5 minutes }\n",
        1,
        15,
        "cache.ttl",
        "invalid duration `5 minutes`",
    );
}

#[test]
fn unknown_enum_values() {
    one(
        "providers:\n  p: { protocol: grpc }\n",
        2,
        18,
        "providers.p.protocol",
        "unknown value `grpc`; expected one of: openai, anthropic, gemini, azure",
    );
    let all = errs(&pre(concat!(
        "  - { provider: p, model: b, capabilities: [tools, telepathy] }\n",
        "routes:\n",
        "  r: { strategy: random, targets: [p/a], on_context_overflow: truncate }\n",
        "clients:\n",
        "  - { id: c, key_env: BOT_KEY, budget: { usd: 1, per: week } }\n",
        "cache: { backend: disk, when: never }\n",
        "state: { backend: etcd }\n",
        "usage: { store: mysql }\n",
        "observability: { log_format: xml, debug_bodies: all }\n",
    )));
    let got: Vec<_> = all
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.split(';').next().unwrap()))
        .collect();
    assert_eq!(
        got,
        [
            (
                5,
                52,
                "models[1].capabilities[1]",
                "unknown value `telepathy`"
            ),
            (7, 18, "routes.r.strategy", "unknown value `random`"),
            (
                7,
                63,
                "routes.r.on_context_overflow",
                "unknown value `truncate`"
            ),
            (9, 55, "clients[0].budget.per", "unknown value `week`"),
            (10, 19, "cache.backend", "unknown value `disk`"),
            (10, 31, "cache.when", "unknown value `never`"),
            (11, 19, "state.backend", "unknown value `etcd`"),
            (12, 17, "usage.store", "unknown value `mysql`"),
            (13, 30, "observability.log_format", "unknown value `xml`"),
            (13, 49, "observability.debug_bodies", "unknown value `all`"),
        ]
    );
    assert!(all[0].3.ends_with(
        "expected one of: tools, vision, json_schema, streaming, embeddings, prefill, reasoning"
    ));
}

#[test]
fn model_references_and_ids() {
    one(
        "models:\n  - { provider: nope, model: m }\n",
        2,
        17,
        "models[0].provider",
        "unknown provider `nope`; defined providers: (none)",
    );
    one(
        &pre("  - { provider: p, model: a }\n"),
        5,
        5,
        "models[1]",
        "duplicate deployment id `p/a` (from provider/model",
    );
    one(
        &pre("  - { id: p/a, provider: p, model: b }\n"),
        5,
        11,
        "models[1].id",
        "duplicate deployment id `p/a`",
    );
    one(
        &pre("  - { provider: p }\n"),
        5,
        5,
        "models[1].model",
        "missing `model`",
    );
    one(
        &pre("  - { provider: p, model: b, context_window: 0 }\n"),
        5,
        46,
        "models[1].context_window",
        "greater than zero",
    );
    one(
        &pre("  - { provider: p, model: b, context_window: 100, max_output_tokens: 200 }\n"),
        5,
        70,
        "models[1].max_output_tokens",
        "exceeds context_window (100)",
    );
    one(
        &pre("  - { provider: p, model: b, pricing: { input: -1, output: 2 } }\n"),
        5,
        48,
        "models[1].pricing.input",
        "must not be negative",
    );
    one(
        &pre("  - { provider: p, model: b, pricing: { input: .inf, output: 2 } }\n"),
        5,
        48,
        "models[1].pricing.input",
        "finite",
    );
    one(
        &pre("  - { provider: p, model: b, pricing: { input: 1 } }\n"),
        5,
        39,
        "models[1].pricing.output",
        "missing `output`",
    );
}

#[test]
fn route_references() {
    let src = pre("routes:\n  chat:\n    targets: [p/a, p/b]\n    fallbacks: [p/c]\n    tasks: { code: [p/d] }\n");
    let all = errs(&src);
    let got: Vec<_> = all
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                7,
                20,
                "routes.chat.targets[1]",
                "unknown deployment `p/b`; defined deployments: p/a"
            ),
            (
                8,
                17,
                "routes.chat.fallbacks[0]",
                "unknown deployment `p/c`; defined deployments: p/a"
            ),
            (
                9,
                21,
                "routes.chat.tasks.code[0]",
                "unknown deployment `p/d`; defined deployments: p/a"
            ),
        ]
    );
    one(
        &pre("routes:\n  a/b: { targets: [p/a] }\n"),
        6,
        3,
        "routes.a/b",
        "must not contain `/`",
    );
    one(
        &pre("routes:\n  r: { strategy: cost }\n"),
        6,
        6,
        "routes.r.targets",
        "at least one target",
    );
    one(
        &pre("routes:\n  r: { targets: [] }\n"),
        6,
        17,
        "routes.r.targets",
        "at least one target",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a, p/a] }\n"),
        6,
        23,
        "routes.r.targets[1]",
        "listed twice",
    );
    one(
        &pre("routes:\n  r: { targets: [{ deployment: p/a, weight: 2 }] }\n"),
        6,
        45,
        "routes.r.targets[0].weight",
        "only applies to `strategy: weighted`",
    );
    one(
        &pre("routes:\n  r: { strategy: weighted, targets: [{ deployment: p/a, weight: 0 }] }\n"),
        6,
        52,
        "routes.r.targets[0]",
        "at least one must be > 0",
    );
    one(&pre("routes:\n  r: { strategy: balanced, targets: [p/a], weights: { health: 0, latency: 0, cost: 0 } }\n"), 6, 53, "routes.r.weights", "all zero");
    one(&pre("routes:\n  r: { strategy: balanced, targets: [p/a], weights: { health: -1, cost: 1 } }\n"), 6, 63, "routes.r.weights.health", "must not be negative");
    one(
        &pre("routes:\n  r: { targets: [p/a], weights: { health: 1 } }\n"),
        6,
        33,
        "routes.r.weights",
        "only applies to `strategy: balanced`",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], max_cost_per_mtok: -2 }\n"),
        6,
        43,
        "routes.r.max_cost_per_mtok",
        "must not be negative",
    );
    one(
        &pre("routes:\n  p/a: { targets: [p/a] }\n"),
        6,
        3,
        "routes.p/a",
        "must not contain",
    );
    one("providers:\n  p: { protocol: openai }\nmodels:\n  - { id: fast, provider: p, model: a }\nroutes:\n  fast: { targets: [fast] }\n", 6, 3, "routes.fast", "same name as a deployment");
}

#[test]
fn retry_deadline_and_timeouts() {
    one(
        &pre("routes:\n  r: { targets: [p/a], retry: { attempts: 7 } }\n"),
        6,
        43,
        "routes.r.retry.attempts",
        "between 1 and 6",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], retry: { attempts: 0 } }\n"),
        6,
        43,
        "routes.r.retry.attempts",
        "between 1 and 6",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], retry: { base: 2s, max: 1s } }\n"),
        6,
        39,
        "routes.r.retry.base",
        "base (2s) must not exceed max (1s)",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], deadline: 0s }\n"),
        6,
        34,
        "routes.r.deadline",
        "greater than zero",
    );
    let p = "providers:\n  p:\n    protocol: openai\n";
    one(
        &format!("{p}    timeouts: {{ first_byte: 60s, total: 30s }}\n"),
        4,
        29,
        "providers.p.timeouts.first_byte",
        "must not exceed total",
    );
    one(
        &format!("{p}    timeouts: {{ stream_idle: 0ms }}\n"),
        4,
        30,
        "providers.p.timeouts.stream_idle",
        "greater than zero",
    );
    one(
        &format!("{p}    timeouts: {{ total: 10s }}\n"),
        4,
        24,
        "providers.p.timeouts.total",
        "first_byte (30s) must not exceed total (10s)",
    );
}

#[test]
fn limits_and_circuit() {
    let p = "providers:\n  p:\n    protocol: openai\n";
    let all = errs(&format!(
        "{p}    limits: {{ rpm: 0, tpm: 0, concurrency: 0, queue: 5, queue_timeout: 0s }}\n"
    ));
    let got: Vec<_> = all
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (4, 20, "providers.p.limits.rpm", "must be at least 1"),
            (4, 28, "providers.p.limits.tpm", "must be at least 1"),
            (
                4,
                44,
                "providers.p.limits.concurrency",
                "must be at least 1"
            ),
            (
                4,
                72,
                "providers.p.limits.queue_timeout",
                "must be greater than zero when `queue` > 0"
            ),
        ]
    );
    let all = errs(&format!(
        "{p}    circuit: {{ failure_rate: 0, min_requests: 0, window: 0s }}\n"
    ));
    let got: Vec<_> = all
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                4,
                30,
                "providers.p.circuit.failure_rate",
                "must be in (0, 1], found 0"
            ),
            (
                4,
                47,
                "providers.p.circuit.min_requests",
                "must be at least 1"
            ),
            (
                4,
                58,
                "providers.p.circuit.window",
                "must be greater than zero"
            ),
        ]
    );
    one(
        &format!("{p}    circuit: {{ failure_rate: 1.5 }}\n"),
        4,
        30,
        "providers.p.circuit.failure_rate",
        "(0, 1]",
    );
}

#[test]
fn provider_keys_and_urls() {
    let p = "providers:\n  p:\n    protocol: openai\n";
    one(
        &format!("{p}    keys:\n      - env: NOPE\n"),
        5,
        14,
        "providers.p.keys[0].env",
        "environment variable `NOPE` is not set or empty",
    );
    one(
        &format!("{p}    keys:\n      - env: EMPTY\n"),
        5,
        14,
        "providers.p.keys[0].env",
        "`EMPTY` is not set or empty",
    );
    one(
        &format!("{p}    keys: [{{ env: BOT_KEY, value: x }}]\n"),
        4,
        12,
        "providers.p.keys[0]",
        "exactly one of `env` or `value`",
    );
    one(
        &format!("{p}    keys: [{{ env: BOT_KEY, weight: 0 }}]\n"),
        4,
        36,
        "providers.p.keys[0].weight",
        "at least one must be > 0",
    );
    one(
        &format!("{p}    base_url: ftp://x\n"),
        4,
        15,
        "providers.p.base_url",
        "`ftp://x` is not a valid URL (expected http:// or https://",
    );
    one(
        &format!("{p}    base_url: not a url\n"),
        4,
        15,
        "providers.p.base_url",
        "not a valid URL",
    );
    one(
        &format!("{p}    api_version: 2024-10-21\n"),
        4,
        18,
        "providers.p.api_version",
        "only applies to `protocol: azure`",
    );
    one(
        &format!("{p}    headers: {{ \"bad header\": x }}\n"),
        4,
        16,
        "providers.p.headers.bad header",
        "not a valid header name",
    );
    one(
        &format!("{p}    options: [1]\n"),
        4,
        14,
        "providers.p.options",
        "expected a mapping",
    );
    one(
        "providers:\n  az: { protocol: azure }\n",
        2,
        3,
        "providers.az.base_url",
        "missing `base_url`",
    );
    one(
        "providers:\n  p: { base_url: \"http://h\" }\n",
        2,
        3,
        "providers.p.protocol",
        "missing `protocol`",
    );
}

#[test]
fn clients() {
    one(
        "clients:\n  - id: a\n    key_env: NOPE\n",
        3,
        14,
        "clients[0].key_env",
        "`NOPE` is not set or empty",
    );
    one(
        "clients:\n  - id: a\n    key_sha256: \"ab\"\n    key_env: BOT_KEY\n",
        3,
        17,
        "clients[0].key_sha256",
        "only one of",
    );
    one(
        "clients:\n  - id: a\n",
        2,
        5,
        "clients[0]",
        "needs `key_sha256` or `key_env`",
    );
    one(
        "clients:\n  - { id: a, key_sha256: abc }\n",
        2,
        26,
        "clients[0].key_sha256",
        "64 hex characters",
    );
    one(
        "clients:\n  - { id: a, key_env: BOT_KEY, routes: [nope] }\n",
        2,
        41,
        "clients[0].routes[0]",
        "unknown route or deployment `nope`",
    );
    one(
        "clients:\n  - { id: a, key_env: BOT_KEY }\n  - { id: a, key_env: ANTHROPIC_KEY }\n",
        3,
        11,
        "clients[1].id",
        "duplicate client id `a`",
    );
    one(
        "clients:\n  - { id: a, key_env: BOT_KEY }\n  - { id: b, key_env: BOT_KEY }\n",
        3,
        23,
        "clients[1].key_env",
        "same key as client `a`",
    );
    one(
        "clients:\n  - { id: a, key_env: BOT_KEY, budget: { per: day } }\n",
        2,
        40,
        "clients[0].budget.usd",
        "missing `usd`",
    );
    one(
        "clients:\n  - { id: a, key_env: BOT_KEY, tpm: 0 }\n",
        2,
        37,
        "clients[0].tpm",
        "at least 1",
    );
}

#[test]
fn stores_and_listen_addresses() {
    one(
        "server:\n  listen: localhost\n",
        2,
        11,
        "server.listen",
        "not a socket address",
    );
    one(
        "server:\n  admin_listen: 127.0.0.1:99999\n",
        2,
        17,
        "server.admin_listen",
        "not a socket address",
    );
    one(
        "server:\n  max_body: 0\n",
        2,
        13,
        "server.max_body",
        "greater than zero",
    );
    one(
        "state: { backend: redis }\n",
        1,
        19,
        "state.backend",
        "needs `state.redis_url`",
    );
    one(
        "state: { redis_url: \"http://x\" }\n",
        1,
        21,
        "state.redis_url",
        "expected redis:// or rediss://",
    );
    one(
        "cache: { backend: redis }\n",
        1,
        19,
        "cache.backend",
        "`cache.backend: redis` needs `state.redis_url`",
    );
    one(
        "usage: { store: postgres }\n",
        1,
        17,
        "usage.store",
        "needs `usage.url`",
    );
    one(
        "usage: { store: postgres, url: \"mysql://u:secret@h\" }\n",
        1,
        32,
        "usage.url",
        "expected a postgres://",
    );
    one(
        "usage: { url: \"postgres://h\" }\n",
        1,
        15,
        "usage.url",
        "only applies to `store: postgres`",
    );
    one(
        "observability: { otlp_endpoint: \"otel:4317\" }\n",
        1,
        33,
        "observability.otlp_endpoint",
        "not a valid URL",
    );
    assert!(
        !errs("usage: { store: postgres, url: \"mysql://u:secret@h\" }\n")[0]
            .3
            .contains("secret")
    );
}

#[test]
fn task_rules() {
    one(
        "task_rules:\n  - { task: code, regex: \"fn (\" }\n",
        2,
        26,
        "task_rules[0].regex",
        "invalid regex",
    );
    one(
        "task_rules:\n  - { keywords: [x] }\n",
        2,
        5,
        "task_rules[0].task",
        "missing `task`",
    );
    one(
        "task_rules:\n  - { task: code }\n",
        2,
        5,
        "task_rules[0]",
        "needs `keywords` or `regex`",
    );
}

#[test]
fn env_expansion_in_values() {
    one(
        "server:\n  listen: \"0.0.0.0:${NOPE}\"\n",
        2,
        20,
        "server.listen",
        "environment variable `NOPE` is not set",
    );
    one(
        "server:\n  listen: ${NOPE}\n",
        2,
        11,
        "server.listen",
        "`NOPE` is not set",
    );
    one(
        "degraded:\n  message: |\n    Busy, $${literal}\n    call ${NOPE}\n",
        4,
        10,
        "degraded.message",
        "`NOPE` is not set",
    );
    let c = super::load("server:\n  listen: \"${HOST:-127.0.0.1}:${PORT}\"\ndegraded: { message: \"$${X} ${EMPTY:-d}\" }\n").unwrap();
    assert_eq!(c.server.listen, "127.0.0.1:8181".parse().unwrap());
    assert_eq!(c.degraded.message, "${X} d");
    // Numbers through env: `rpm: ${RPM:-60}`.
    let c =
        super::load("clients:\n  - { id: a, key_env: BOT_KEY, rpm: \"${RPM:-60}\" }\n").unwrap();
    assert_eq!(c.clients.unwrap()[0].rpm, Some(60));
}

#[test]
fn many_problems_in_one_file_are_all_reported() {
    let src = concat!(
        "server:\n",
        "  listen: nowhere\n",
        "  max_bdy: 1MiB\n",
        "providers:\n",
        "  p:\n",
        "    protocol: openai\n",
        "    keys: [{ env: NOPE }]\n",
        "    timeouts: { conect: 1s, total: 0s }\n",
        "models:\n",
        "  - { provider: q, model: m }\n",
        "routes:\n",
        "  chat: { targets: [q/x], retry: { attempts: 9 } }\n",
    );
    let got: Vec<_> = errs(src)
        .into_iter()
        .map(|(l, c, p, _)| (l, c, p))
        .collect();
    let want = [
        (2, 11, "server.listen"),
        (3, 3, "server.max_bdy"),
        (7, 19, "providers.p.keys[0].env"),
        (8, 17, "providers.p.timeouts.conect"),
        (8, 36, "providers.p.timeouts.total"),
        (10, 17, "models[0].provider"),
        (12, 21, "routes.chat.targets[0]"),
        (12, 46, "routes.chat.retry.attempts"),
    ];
    assert_eq!(got, want.map(|(l, c, p)| (l, c, p.to_string())));
}
