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
    // A lone CR ends a YAML line but no editor's: positions count `\n`.
    one("\r \r\0", 1, 4, "", "YAML syntax error");
    one(
        "server:\r\n  listen: [1, 2\r\n",
        2,
        11,
        "",
        "YAML syntax error: unclosed bracket",
    );
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
        "expected one of: tools, vision, json_schema, streaming, embeddings, prefill, reasoning, responses, search_with_tools"
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

// === config that would open a door ===

/// sha256 of the empty string.
const EMPTY_SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

#[test]
fn a_client_key_that_is_the_empty_string_is_refused() {
    one(
        &format!("clients:\n  - {{ id: a, key_sha256: \"{EMPTY_SHA}\" }}\n"),
        2,
        26,
        "clients[0].key_sha256",
        "is the sha256 of the empty string: an empty API key would authenticate as this client",
    );
    // Upper case hex is the same key.
    let upper = EMPTY_SHA.to_uppercase();
    one(
        &format!("clients:\n  - {{ id: a, key_sha256: \"{upper}\" }}\n"),
        2,
        26,
        "clients[0].key_sha256",
        "sha256 of the empty string",
    );
}

#[test]
fn the_admin_listener_never_shares_the_client_one() {
    one(
        "server:\n  listen: 127.0.0.1:8080\n  admin_listen: 127.0.0.1:8080\n",
        3,
        17,
        "server.admin_listen",
        "`admin_listen` is `listen` (127.0.0.1:8080): the admin API (reload, keys, usage) would be served to every client",
    );
    // Only `listen` written, onto the admin default.
    one(
        "server:\n  listen: 127.0.0.1:9090\n",
        2,
        11,
        "server.listen",
        "`admin_listen` is `listen`",
    );
    // Port 0 is a fresh port for each: what tests do.
    assert!(super::load("server: { listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0 }\n").is_ok());
}

#[test]
fn an_admin_listener_beyond_loopback_needs_a_key() {
    for addr in ["0.0.0.0:9090", "10.1.2.3:9090", "[::]:9090"] {
        one(
            &format!("server:\n  admin_listen: \"{addr}\"\n"),
            2,
            17,
            "server.admin_listen",
            "is not a loopback address and there is no `admin_key_env`: the admin API (reload, keys, usage) would be open to the network; set `admin_key_env` or listen on 127.0.0.1",
        );
    }
    let keyed = "server:\n  admin_listen: 0.0.0.0:9090\n  admin_key_env: BOT_KEY\n";
    assert!(super::load(keyed).is_ok());
    for local in ["127.0.0.1:9191", "127.0.0.2:9191", "[::1]:9191"] {
        assert!(
            super::load(&format!("server:\n  admin_listen: \"{local}\"\n")).is_ok(),
            "{local}"
        );
    }
    // A key variable that is not set is its own problem, said once.
    one(
        "server:\n  admin_listen: 0.0.0.0:9090\n  admin_key_env: NOPE\n",
        3,
        18,
        "server.admin_key_env",
        "`NOPE` is not set",
    );
}

/// `SWITCHYARD_LISTEN` / `SWITCHYARD_ADMIN_LISTEN` replace the file's
/// addresses, and the same checks hold for what they say.
#[test]
fn listen_variables_replace_the_file_and_are_checked() {
    let with = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
                .or_else(|| super::env(name))
        }
    };
    let src = "server:\n  listen: 127.0.0.1:8080\n  admin_listen: 127.0.0.1:9090\n";
    let env = with(&[
        ("SWITCHYARD_LISTEN", "127.0.0.1:18080"),
        ("SWITCHYARD_ADMIN_LISTEN", " 127.0.0.1:19090 "),
    ]);
    let c = super::load_str(src, "t.yaml", &env).unwrap();
    assert_eq!(
        (c.server.listen.port(), c.server.admin_listen.port()),
        (18080, 19090)
    );
    // Empty: the file's.
    let env = with(&[("SWITCHYARD_LISTEN", "")]);
    let c = super::load_str(src, "t.yaml", &env).unwrap();
    assert_eq!(c.server.listen.port(), 8080);
    // Not in the file: the variable still applies, and is named when wrong.
    let env = with(&[("SWITCHYARD_ADMIN_LISTEN", "0.0.0.0:9999")]);
    let ds = super::load_str("usage: { store: off }\n", "t.yaml", &env).unwrap_err();
    assert_eq!(ds.len(), 1, "{ds:#?}");
    assert_eq!(
        (ds[0].line, ds[0].path.as_str()),
        (0, "server.admin_listen")
    );
    assert!(
        ds[0].message.contains("not a loopback address")
            && ds[0].message.ends_with("(from SWITCHYARD_ADMIN_LISTEN)"),
        "{}",
        ds[0].message
    );
    let env = with(&[("SWITCHYARD_LISTEN", "somewhere")]);
    let ds = super::load_str(src, "t.yaml", &env).unwrap_err();
    assert_eq!(
        (ds[0].line, ds[0].column),
        (2, 11),
        "at the key it replaces"
    );
    assert!(
        ds[0]
            .message
            .starts_with("`somewhere` is not a socket address")
            && ds[0].message.ends_with("(from SWITCHYARD_LISTEN)"),
        "{}",
        ds[0].message
    );
    let env = with(&[("SWITCHYARD_ADMIN_LISTEN", "127.0.0.1:8080")]);
    let ds = super::load_str(src, "t.yaml", &env).unwrap_err();
    assert!(
        ds[0].message.contains("`admin_listen` is `listen`"),
        "{ds:#?}"
    );
}

#[test]
fn a_provider_url_has_no_query_or_fragment() {
    for (url, col) in [
        ("https://api.example.com/v1?key=sk-secret", 36),
        ("https://api.example.com/v1#frag", 36),
        ("https://api.example.com/v1?", 36),
    ] {
        let src = format!("providers:\n  p: {{ protocol: openai, base_url: \"{url}\" }}\n");
        let all = errs(&src);
        assert_eq!(all.len(), 1, "{all:#?}");
        let (l, c, p, m) = &all[0];
        assert_eq!(
            (*l, *c, p.as_str()),
            (2, col, "providers.p.base_url"),
            "{m}"
        );
        assert!(
            m.starts_with("must not have a query string or a fragment"),
            "{m}"
        );
        assert!(!m.contains("sk-secret"), "the URL is not echoed: {m}");
    }
}

#[test]
fn a_provider_key_in_clear_is_a_warning() {
    let src = "providers:\n  p:\n    protocol: openai\n    keys:\n      - { value: sk-live-123 }\n      - { value: \"${OPENAI_API_KEY}\" }\n      - { env: OPENAI_API_KEY }\n";
    let c = super::load(src).expect("a warning does not refuse the config");
    assert_eq!(c.providers["p"].keys.len(), 3);
    assert_eq!(c.warnings.len(), 1, "{:#?}", c.warnings);
    let w = &c.warnings[0];
    assert_eq!(
        (w.line, w.column, w.path.as_str()),
        (5, 18, "providers.p.keys[0].value")
    );
    assert_eq!(
        w.warning_line(),
        "t.yaml:5:18: warning: providers.p.keys[0].value: the key is written in clear in the config: anyone who can read the file has it; use `env: VAR` (or `value: ${VAR}`)"
    );
    assert!(!w.to_string().contains("sk-live-123"));
}

// === hostile files ===

/// Whatever the file holds, the loader answers with diagnostics (or a
/// config), never a panic, and in bounded time.
#[test]
fn hostile_files_get_diagnostics_not_a_panic() {
    let deep_list = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
    let deep_map = format!("{}1{}", "{a: ".repeat(5000), "}".repeat(5000));
    let deep_block: String = (0..2000)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
        .collect();
    let many_providers: String = std::iter::once("providers:\n".to_string())
        .chain((0..5_000).map(|i| format!("  p{i}: {{ protocol: nope }}\n")))
        .collect();
    let long_string = format!("server:\n  listen: \"{}\"\n", "x".repeat(2 << 20));
    let aliases = "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";
    let binary: String = (0u8..=255).map(char::from).cycle().take(4096).collect();
    let cases: Vec<(&str, String)> = vec![
        ("deep list", deep_list),
        ("deep map", deep_map),
        ("deep block", deep_block),
        ("many providers", many_providers),
        ("long string", long_string),
        (
            "too many values",
            format!("a: [{}]\n", "1, ".repeat(100_000)),
        ),
        ("binary", binary),
        ("tabs", "server:\n\tlisten: x\n".into()),
        ("nul", "server: \0\n".into()),
        ("lone key", ":".into()),
        ("scalar", "42".into()),
        ("two documents", "a: 1\n---\nb: 2\n".into()),
        ("unclosed quote", "providers: { p: \"".into()),
        ("bom", "\u{feff}server: { listen: 1 }\n".into()),
    ];
    // Nesting past the limit is said as such, at the level that breaks it.
    for src in [
        (0..40)
            .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
            .collect::<String>(),
        format!("a: {}{}", "[".repeat(40), "]".repeat(40)),
    ] {
        let ds = super::load(&src).unwrap_err();
        assert_eq!(ds.len(), 1, "{ds:#?}");
        assert_eq!(
            ds[0].message,
            "YAML syntax error: nested deeper than 32 levels"
        );
    }
    let ds = super::load(aliases).unwrap_err();
    assert_eq!(
        ds[0].message,
        "YAML syntax error: more than 100000 values (aliases expanded)"
    );
    for (name, src) in cases {
        let started = std::time::Instant::now();
        let result = std::panic::catch_unwind(|| super::load(&src));
        let Ok(result) = result else {
            panic!("{name}: the loader panicked")
        };
        let ds = result.expect_err(name);
        assert!(!ds.is_empty(), "{name}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{name}: {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn probe_settings_are_checked() {
    let p = |probe: &str| {
        format!(
            "providers:\n  p: {{ protocol: openai, probe: {probe} }}\nmodels:\n  - {{ provider: p, model: a }}\n"
        )
    };
    one(
        &p("{ every: 500ms }"),
        2,
        42,
        "providers.p.probe.every",
        "at least 1s",
    );
    one(
        &p("{ max_share: 0 }"),
        2,
        46,
        "providers.p.probe.max_share",
        "(0, 1]",
    );
    one(
        &p("{ kind: ping }"),
        2,
        41,
        "providers.p.probe.kind",
        "auth, completion",
    );
    one(
        &p("{ kind: auth, model: a }"),
        2,
        54,
        "providers.p.probe.model",
        "no effect with `kind: auth`",
    );
    one(
        &p("{ kind: completion, model: b }"),
        2,
        60,
        "providers.p.probe.model",
        "no deployment of `p` serves `b` (its models: a)",
    );
    one(
        &p("{ sometimes: 1s }"),
        2,
        35,
        "providers.p.probe.sometimes",
        "unknown key",
    );
    // A free call needs a model list the gateway can sign for.
    let bedrock = "providers:\n  b: { protocol: bedrock, region: us-east-1, credentials: default, probe: { every: 5s } }\nmodels:\n  - { provider: b, model: m }\n";
    let all = errs(bedrock);
    assert!(
        all.iter()
            .any(|(_, _, path, m)| path == "providers.b.probe" && m.contains("not supported yet")),
        "{all:#?}"
    );
    // Accepted as written.
    let cfg = super::load(&p(
        "{ every: 2s, kind: completion, model: a, max_share: 0.5 }",
    ))
    .unwrap();
    let probe = cfg.providers["p"].probe.clone().unwrap();
    assert_eq!(
        (
            probe.every,
            probe.kind,
            probe.max_share,
            probe.model.as_deref()
        ),
        (
            std::time::Duration::from_secs(2),
            crate::config::ProbeKind::Completion,
            0.5,
            Some("a")
        )
    );
}

#[test]
fn reload_rollout_and_margins_are_checked() {
    let got = errs("reload: { canary: 0, for: 0s, rollback_on: { error_rate: 1.5, p95: 0.5 } }\n");
    let got: Vec<_> = got
        .iter()
        .map(|(l, c, p, m)| (*l, *c, p.as_str(), m.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                1,
                19,
                "reload.canary",
                "must be a percentage of requests above 0 and at most 100"
            ),
            (1, 27, "reload.for", "must be greater than zero"),
            (
                1,
                58,
                "reload.rollback_on.error_rate",
                "must be between 0 and 1 (a share of requests)"
            ),
            (
                1,
                68,
                "reload.rollback_on.p95",
                "must be at least 1 (the new config's p95 over the old one's)"
            ),
        ]
    );
    let c = super::load("reload: { canary: 10, for: 90s, rollback_on: { p95: 2 } }\n").unwrap();
    assert_eq!(c.reload.canary, Some(0.1));
    assert_eq!(c.reload.lasts, std::time::Duration::from_secs(90));
    assert_eq!(
        (c.reload.rollback_on.error_rate, c.reload.rollback_on.p95),
        (0.05, 2.0)
    );
    // 100%: at once; absent: at once, promoted after 10 minutes when asked.
    assert_eq!(
        super::load("reload: { canary: 100 }\n")
            .unwrap()
            .reload
            .canary,
        None
    );
    let d = super::load("server: {}\n").unwrap().reload;
    assert_eq!((d.canary, d.lasts.as_secs()), (None, 600));
}

#[test]
fn quota_settings_are_checked() {
    let p = |quota: &str| {
        format!(
            "providers:\n  p: {{ protocol: openai, quota: {quota} }}\nmodels:\n  - {{ provider: p, model: a }}\n"
        )
    };
    one(
        &p("{ shift: 0 }"),
        2,
        42,
        "providers.p.quota.shift",
        "must be in (0, 1), found 0",
    );
    one(
        &p("{ shift: 1 }"),
        2,
        42,
        "providers.p.quota.shift",
        "(0, 1)",
    );
    one(
        &p("{ stop: 1.5 }"),
        2,
        41,
        "providers.p.quota.stop",
        "must be in (0, 1], found 1.5",
    );
    one(
        &p("{ shift: 0.9, stop: 0.8 }"),
        2,
        42,
        "providers.p.quota.shift",
        "`shift` (0.9) must be below `stop` (0.8)",
    );
    // Against the other's default.
    one(
        &p("{ shift: 0.98 }"),
        2,
        42,
        "providers.p.quota.shift",
        "must be below `stop` (0.97)",
    );
    one(
        &p("{ stop: 0.5 }"),
        2,
        41,
        "providers.p.quota.stop",
        "`shift` (0.85) must be below `stop` (0.5)",
    );
    one(
        &p("{ shift: high }"),
        2,
        42,
        "providers.p.quota.shift",
        "number",
    );
    one(
        &p("{ start: 0.5 }"),
        2,
        35,
        "providers.p.quota.start",
        "unknown key `start`; allowed keys: shift, stop",
    );
    // Absent: the contract's defaults; a stop of 1 is allowed.
    let cfg = super::load(&p("{ shift: 0.5, stop: 1 }")).unwrap();
    let q = cfg.providers["p"].quota;
    assert_eq!((q.shift, q.stop), (0.5, 1.0));
    let plain = "providers:\n  p: { protocol: openai }\nmodels:\n  - { provider: p, model: a }\n";
    let q = super::load(plain).unwrap().providers["p"].quota;
    assert_eq!((q.shift, q.stop), (0.85, 0.97));
}

#[test]
fn a_models_limits_bound_that_deployment_and_are_checked_like_a_providers() {
    let m = |limits: &str| {
        format!(
            "providers:\n  p: {{ protocol: openai, limits: {{ rpm: 100 }} }}\nmodels:\n  - {{ provider: p, model: a, limits: {limits} }}\n"
        )
    };
    one(
        &m("{ rpm: 0 }"),
        4,
        45,
        "models[0].limits.rpm",
        "must be at least 1",
    );
    one(
        &m("{ queue: 2, queue_timeout: 0s }"),
        4,
        65,
        "models[0].limits.queue_timeout",
        "greater than zero",
    );
    one(
        &m("{ burst: 3 }"),
        4,
        40,
        "models[0].limits.burst",
        "allowed keys: rpm, tpm, concurrency, queue, queue_timeout",
    );
    let cfg = super::load(&m("{ rpm: 30, tpm: 9000, concurrency: 2, queue: 4 }")).unwrap();
    let l = cfg.deployments["p/a"].limits;
    assert_eq!(
        (l.rpm, l.tpm, l.concurrency, l.queue, l.queue_timeout),
        (
            Some(30),
            Some(9000),
            Some(2),
            4,
            std::time::Duration::from_secs(2)
        )
    );
    assert_eq!(cfg.providers["p"].limits.rpm, Some(100));
    // Absent: no bound of its own.
    let cfg = super::load(&m("{}")).unwrap();
    assert_eq!(
        cfg.deployments["p/a"].limits,
        crate::config::Limits::default()
    );
}

#[test]
fn a_routes_contract_takes_its_defaults_and_refuses_what_cannot_act() {
    let c = super::load(&pre("routes:\n  r: { targets: [p/a], contract: {} }\n")).unwrap();
    let want = crate::config::Contract {
        on_violation: crate::config::OnViolation::Repair,
        repair_attempts: 1,
        stream: crate::config::ContractStream::Hold,
    };
    assert_eq!(c.routes["r"].contract, Some(want));
    let c = super::load(&pre(
        "routes:\n  r: { targets: [p/a], contract: { on_violation: pass, stream: end } }\n",
    ))
    .unwrap();
    let got = c.routes["r"].contract.unwrap();
    assert_eq!(got.on_violation, crate::config::OnViolation::Pass);
    assert_eq!(got.stream, crate::config::ContractStream::End);
    assert_eq!(got.repair_attempts, 0);
    let c = super::load(&pre("routes:\n  r: { targets: [p/a] }\n")).unwrap();
    assert_eq!(c.routes["r"].contract, None);
    one(
        &pre("routes:\n  r: { targets: [p/a], contract: { repair_attempts: 0 } }\n"),
        6,
        53,
        "routes.r.contract.repair_attempts",
        "must be between 1 and 3, found 0",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], contract: { on_violation: error, repair_attempts: 2 } }\n"),
        6,
        74,
        "routes.r.contract.repair_attempts",
        "`repair_attempts` only applies to `on_violation: repair`",
    );
    one(
        &pre("routes:\n  r: { targets: [p/a], contract: { on_violation: retry } }\n"),
        6,
        50,
        "routes.r.contract.on_violation",
        "repair, fallback, error, pass",
    );
}
