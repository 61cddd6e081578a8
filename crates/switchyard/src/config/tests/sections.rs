//! Keys, clients, stores, task rules, env expansion, and many problems at once.

use super::{errs, one};

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
        "state: { redis_url: \"http://x\" }\n",
        1,
        21,
        "state.redis_url",
        "expected redis:// or rediss:// or redis+sentinel://",
    );
    // The URL is checked, and not echoed (it may hold a password).
    let pg = errs("usage: { store: postgres, url: \"mysql://u:secret@h\" }\n");
    assert_eq!(
        (pg[0].0, pg[0].1, pg[0].2.as_str()),
        (1, 32, "usage.url"),
        "{pg:#?}"
    );
    assert!(pg[0].3.contains("expected a postgres://"), "{pg:#?}");
    assert!(pg.iter().all(|e| !e.3.contains("secret")));
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
