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
        "expected one of: tools, vision, json_schema, streaming, embeddings, prefill, reasoning, responses"
    ));
}

#[test]
fn embeddings_are_refused_on_anthropic() {
    let src = "providers:\n  a: { protocol: anthropic }\n  g: { protocol: gemini }\nmodels:\n  - { provider: a, model: c, capabilities: [tools, embeddings] }\n  - { provider: g, model: e, capabilities: [embeddings] }\n";
    let all = errs(src);
    assert_eq!(all.len(), 1, "{all:#?}");
    let (line, col, path, msg) = &all[0];
    assert_eq!((*line, *col), (5, 52), "{path}");
    assert!(path.starts_with("models[0].capabilities"), "{path}");
    assert!(
        msg.contains("not supported on `protocol: anthropic`"),
        "{msg}"
    );
}
