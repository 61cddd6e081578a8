//! Loader tests: whole configs through `load_str` with a fake environment.

mod adversarial;
mod checks;
mod clouds;
mod flavors;
mod references;
mod sections;
mod unsupported;

use std::time::Duration;

use super::*;

pub fn env(name: &str) -> Option<String> {
    let v = match name {
        "OPENAI_API_KEY" => "sk-openai",
        "ANTHROPIC_KEY" => "sk-ant",
        "BOT_KEY" => "bot-secret",
        "PG_URL" => "postgres://u:p@db/usage",
        "EMPTY" => "",
        "PORT" => "8181",
        "TEAM_A_AWS_ACCESS_KEY_ID" => "AKIDTEAMA",
        "TEAM_A_AWS_SECRET_ACCESS_KEY" => "team-a-secret",
        "TEAM_A_AWS_SESSION_TOKEN" => "team-a-token",
        "HALF_AWS_ACCESS_KEY_ID" => "AKIDHALF",
        _ => return None,
    };
    Some(v.to_string())
}

pub fn load(src: &str) -> Result<Config, Vec<Diagnostic>> {
    load_str(src, "t.yaml", &env)
}

/// All diagnostics as `(line, column, path, message)`.
pub fn errs(src: &str) -> Vec<(usize, usize, String, String)> {
    match load(src) {
        Ok(_) => panic!("expected diagnostics, config loaded"),
        Err(ds) => ds
            .into_iter()
            .map(|d| (d.line, d.column, d.path, d.message))
            .collect(),
    }
}

/// The whole pipeline without the final "any problem → no config" step: the
/// model built from `src` and every diagnostic, for values behind refused keys.
pub fn load_anyway(src: &str) -> (Config, Vec<(usize, usize, String, String)>) {
    let mut d = Diags::new("t.yaml");
    let mut root = node::parse(src, &mut d).expect("parses");
    let top = node::At::default();
    env::expand_tree(&mut root, &top, src, &env, &mut d);
    let raw = raw::decode(&mut d, &root);
    let c = validate::validate(&mut d, raw, &env, String::new());
    d.list.sort_by_key(|x| (x.line, x.column));
    let all = d.list.into_iter();
    (
        c,
        all.map(|x| (x.line, x.column, x.path, x.message)).collect(),
    )
}

/// The only diagnostic; its message must contain `needle`.
#[track_caller]
pub fn one(src: &str, line: usize, column: usize, path: &str, needle: &str) {
    let all = errs(src);
    assert_eq!(all.len(), 1, "{all:#?}");
    let (l, c, p, m) = &all[0];
    assert_eq!((*l, *c, p.as_str()), (line, column, path), "{m}");
    assert!(m.contains(needle), "`{m}` lacks `{needle}`");
}

const FULL: &str = r#"
server:
  listen: 0.0.0.0:${PORT}
  admin_listen: 127.0.0.1:9191
  max_body: 512KiB
  sse_keepalive: 1m30s

clients:
  - id: support-bot
    key_env: BOT_KEY
    routes: [chat, openai/gpt-4o]
    rpm: 600
    tpm: 200000
    budget: { usd: 50, per: month }
  - id: ops
    key_sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"

providers:
  openai:
    protocol: openai
    base_url: https://api.openai.com/v1/
    keys:
      - { env: OPENAI_API_KEY, weight: 3 }
      - { value: "inline-${ANTHROPIC_KEY}", weight: 0 }
    timeouts: { connect: 5s, first_byte: 30s, total: 120s, stream_idle: 60s }
    limits: { rpm: 3000, tpm: 500000, concurrency: 256, queue: 512, queue_timeout: 2s }
    circuit: { window: 60s, min_requests: 20, failure_rate: 0.25, consecutive_failures: 5, latency_p95: 10s, cooldown: 30s }
    headers: { x-org: acme }
    options: { service_tier: flex, n: 1, nested: { a: [1, 2.5, true] } }
  azure:
    protocol: azure
    base_url: https://acme.openai.azure.com
  anthropic:
    protocol: anthropic
    keys: [{ env: ANTHROPIC_KEY }]

models:
  - id: openai/gpt-4o
    provider: openai
    model: gpt-4o
    context_window: 128000
    max_output_tokens: 16384
    capabilities: [tools, vision, json_schema, streaming, prefill]
    pricing: { input: 2.50, output: 10.00, cached_input: 1.25 }
  - provider: anthropic
    model: claude-sonnet
  - provider: azure
    model: 4o
    pricing: { input: 1, output: 2 }

routes:
  chat:
    strategy: balanced
    targets: [openai/gpt-4o, anthropic/claude-sonnet]
    weights: { health: 0.6, latency: 0.2, cost: 0.2 }
    fallbacks: [azure/4o]
    require: [tools]
    max_cost_per_mtok: 20
    retry: { attempts: 2, base: 250ms, max: 4s }
    deadline: 30s
    sticky: true
    on_context_overflow: reject
    on_stream_interrupt: error
    tasks: { code: [anthropic/claude-sonnet] }
  split:
    strategy: weighted
    targets:
      - { deployment: openai/gpt-4o, weight: 9 }
      - azure/4o

task_rules:
  - { task: code, keywords: [Rust, "stack trace"], regex: "fn \\w+\\(" }

cache: { backend: redis, ttl: 10m, max_entries: 50, when: always }
state: { backend: redis, redis_url: "redis://127.0.0.1:6379/" }
usage: { store: postgres, url: "${PG_URL}" }
observability: { log_format: pretty, log_requests: false, otlp_endpoint: "http://otel:4318", debug_bodies: off }
degraded: { enabled: true, message: "Busy." }
"#;

/// FULL with the keys this build refuses set to their truthful values.
fn full_truthful() -> String {
    let lines = [
        ("    budget: { usd: 50, per: month }\n", ""),
        ("cache: { backend: redis,", "cache: { backend: memory,"),
        (
            "state: { backend: redis, redis_url: \"redis://127.0.0.1:6379/\" }",
            "state: { backend: memory }",
        ),
        (
            "usage: { store: postgres, url: \"${PG_URL}\" }",
            "usage: { store: off }",
        ),
    ];
    lines.iter().fold(FULL.to_string(), |src, (from, to)| {
        assert!(src.contains(from), "{from}");
        src.replace(from, to)
    })
}

#[test]
fn full_config_loads_whole_now_that_the_fleet_is_built() {
    // The shared cache and state, PostgreSQL and traces: all of it acts.
    if let Err(e) = load(FULL) {
        panic!("{e:#?}");
    }
}

#[test]
fn the_full_config_lands_in_the_model() {
    let (c, refused) = load_anyway(FULL);
    assert!(refused.is_empty(), "{refused:#?}");
    assert_eq!(
        c.clients.as_ref().unwrap()[0].budget,
        Some(Budget {
            usd: 50.0,
            per: BudgetPeriod::Month
        })
    );
    assert_eq!(
        c.cache,
        Cache {
            backend: CacheBackend::Redis,
            ttl: Duration::from_secs(600),
            max_entries: 50,
            max_bytes: 256 << 20,
            when: CacheWhen::Always
        }
    );
    assert_eq!(
        (c.state.backend, c.state.redis_url.as_deref()),
        (StateBackend::Redis, Some("redis://127.0.0.1:6379"))
    );
    assert_eq!(
        (c.state.key_prefix.as_str(), c.state.on_unavailable),
        ("switchyard:", OnUnavailable::Local)
    );
    assert!(
        matches!(&c.usage.store, UsageBackend::Postgres { url } if url.expose() == "postgres://u:p@db/usage")
    );
    assert_eq!(
        c.observability.otlp_endpoint.as_deref(),
        Some("http://otel:4318")
    );
}

#[test]
fn full_config_lands_in_the_right_fields() {
    let src = full_truthful();
    let c = load(&src).unwrap_or_else(|e| panic!("{e:#?}"));
    // Its inline key comes from `${ANTHROPIC_KEY}`: nothing is in clear.
    assert_eq!(c.warnings, []);
    assert_eq!(
        c.version,
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(&src))
    );
    assert_eq!(c.server.listen, "0.0.0.0:8181".parse().unwrap());
    assert_eq!(c.server.admin_listen, "127.0.0.1:9191".parse().unwrap());
    assert_eq!(c.server.max_body, 512 * 1024);
    assert_eq!(c.server.sse_keepalive, Duration::from_secs(90));

    let clients = c.clients.as_ref().unwrap();
    let bot = &clients[0];
    assert_eq!(bot.id, "support-bot");
    assert_eq!(
        bot.key_sha256,
        <[u8; 32]>::from(<sha2::Sha256 as sha2::Digest>::digest("bot-secret"))
    );
    assert_eq!(
        bot.routes.as_deref(),
        Some(&["chat".to_string(), "openai/gpt-4o".to_string()][..])
    );
    assert_eq!((bot.rpm, bot.tpm), (Some(600), Some(200_000)));
    assert_eq!(bot.budget, None);
    assert_eq!(
        hex::encode(clients[1].key_sha256),
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    assert_eq!(clients[1].routes, None);

    let o = &c.providers["openai"];
    assert_eq!(
        (o.protocol, o.base_url.as_str(), o.api_version.as_deref()),
        (Protocol::OpenAi, "https://api.openai.com/v1", None)
    );
    assert_eq!(o.keys.len(), 2);
    assert_eq!(
        (
            o.keys[0].label.as_str(),
            o.keys[0].secret.expose().as_str(),
            o.keys[0].weight
        ),
        ("env:OPENAI_API_KEY", "sk-openai", 3)
    );
    assert_eq!(
        (
            o.keys[1].label.as_str(),
            o.keys[1].secret.expose().as_str(),
            o.keys[1].weight
        ),
        ("inline#1", "inline-sk-ant", 0)
    );
    assert_eq!(o.timeouts, Timeouts::default());
    let limits = Limits {
        rpm: Some(3000),
        tpm: Some(500_000),
        concurrency: Some(256),
        queue: 512,
        queue_timeout: Duration::from_secs(2),
    };
    assert_eq!(o.limits, limits);
    assert_eq!(
        o.circuit,
        Circuit {
            latency_p95: Some(Duration::from_secs(10)),
            ..Circuit::default()
        }
    );
    assert_eq!(o.headers, [("x-org".to_string(), "acme".to_string())]);
    assert_eq!(
        serde_json::Value::Object(o.options.clone()),
        serde_json::json!({"service_tier": "flex", "n": 1, "nested": {"a": [1, 2.5, true]}})
    );
    let az = &c.providers["azure"];
    assert_eq!(
        (az.protocol, az.api_version.as_deref()),
        (Protocol::Azure, Some("2024-10-21"))
    );
    let an = &c.providers["anthropic"];
    assert_eq!(
        (an.base_url.as_str(), an.keys[0].weight),
        ("https://api.anthropic.com", 1)
    );
    assert_eq!(an.limits, Limits::default());

    assert_eq!(
        c.deployment_order,
        ["openai/gpt-4o", "anthropic/claude-sonnet", "azure/4o"]
    );
    let g = &c.deployments["openai/gpt-4o"];
    assert_eq!(
        (g.provider.as_str(), g.model.as_str()),
        ("openai", "gpt-4o")
    );
    assert_eq!(
        (g.context_window, g.max_output_tokens),
        (Some(128_000), Some(16_384))
    );
    assert!(
        g.capabilities.contains(Capability::Prefill)
            && !g.capabilities.contains(Capability::Embeddings)
    );
    assert_eq!(
        g.pricing,
        Some(Pricing {
            input: 2.5,
            output: 10.0,
            cached_input: Some(1.25),
            cache_write: None,
        })
    );
    assert_eq!(c.deployments["azure/4o"].model, "4o");
    assert_eq!(c.deployments["anthropic/claude-sonnet"].pricing, None);

    let chat = &c.routes["chat"];
    assert_eq!(chat.strategy, Strategy::Balanced);
    assert_eq!(
        chat.targets
            .iter()
            .map(|t| (t.deployment.as_str(), t.weight))
            .collect::<Vec<_>>(),
        [("openai/gpt-4o", 1), ("anthropic/claude-sonnet", 1)]
    );
    assert_eq!(
        chat.weights,
        BalancedWeights {
            health: 0.6,
            latency: 0.2,
            cost: 0.2
        }
    );
    assert_eq!(chat.fallbacks, ["azure/4o"]);
    assert_eq!(chat.require, [Capability::Tools].into_iter().collect());
    assert_eq!(chat.max_cost_per_mtok, Some(20.0));
    assert_eq!(
        chat.retry,
        Retry {
            attempts: 2,
            base: Duration::from_millis(250),
            max: Duration::from_secs(4)
        }
    );
    assert_eq!(
        (chat.deadline, chat.sticky),
        (Some(Duration::from_secs(30)), true)
    );
    assert_eq!(
        (chat.on_context_overflow, chat.on_stream_interrupt),
        (ContextOverflow::Reject, StreamInterrupt::Error)
    );
    assert_eq!(chat.tasks["code"], ["anthropic/claude-sonnet"]);
    let split = &c.routes["split"];
    assert_eq!(
        split.targets,
        [
            Target {
                deployment: "openai/gpt-4o".into(),
                weight: 9
            },
            Target {
                deployment: "azure/4o".into(),
                weight: 1
            }
        ]
    );
    assert_eq!(
        (split.retry, split.sticky, split.deadline),
        (Retry::default(), false, None)
    );
    assert_eq!(
        (split.on_context_overflow, split.on_stream_interrupt),
        (ContextOverflow::Escalate, StreamInterrupt::Resume)
    );

    let rule = &c.task_rules[0];
    assert_eq!(
        (rule.task.as_str(), &rule.keywords[..]),
        ("code", &["rust".to_string(), "stack trace".to_string()][..])
    );
    assert!(rule.regex.as_ref().unwrap().is_match("fn main("));

    assert_eq!(
        c.cache,
        Cache {
            backend: CacheBackend::Memory,
            ttl: Duration::from_secs(600),
            max_entries: 50,
            max_bytes: 256 << 20,
            when: CacheWhen::Always
        }
    );
    assert_eq!(
        (c.state.backend, c.state.redis_url.as_deref()),
        (StateBackend::Memory, None)
    );
    assert!(matches!(&c.usage.store, UsageBackend::Off));
    let obs = &c.observability;
    assert_eq!(
        (obs.log_format, obs.log_requests, obs.debug_bodies),
        (LogFormat::Pretty, false, DebugBodies::Off)
    );
    assert_eq!(obs.otlp_endpoint.as_deref(), Some("http://otel:4318"));
    assert_eq!(
        (c.degraded.enabled, c.degraded.message.as_str()),
        (true, "Busy.")
    );
}

#[test]
fn empty_file_is_a_valid_config_with_defaults() {
    for src in ["", "# nothing yet\n", "---\n"] {
        let c = load(src).unwrap_or_else(|e| panic!("{e:#?}"));
        assert!(c.providers.is_empty() && c.routes.is_empty() && c.deployments.is_empty());
        assert!(c.clients.is_none());
        assert_eq!(c.server.listen, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(c.server.admin_listen, "127.0.0.1:9090".parse().unwrap());
        assert_eq!(c.server.max_body, 20 << 20);
        assert_eq!(c.server.sse_keepalive, Duration::from_secs(15));
        // This build's truth, not the contract's defaults (memory, header):
        // there is no cache and no body logging yet.
        assert_eq!(
            c.cache,
            Cache {
                backend: CacheBackend::Off,
                ttl: Duration::from_secs(300),
                max_entries: 10_000,
                max_bytes: 256 << 20,
                when: CacheWhen::Deterministic
            }
        );
        assert_eq!(
            (c.state.backend, c.state.redis_url.clone()),
            (StateBackend::Memory, None)
        );
        // The contract's default: the embedded store, 90 days of rows.
        assert!(matches!(&c.usage.store, UsageBackend::Sqlite { path } if path == "switchyard.db"));
        assert_eq!(
            (c.usage.retention, c.usage.store_responses),
            (
                Duration::from_secs(90 * 86_400),
                Duration::from_secs(30 * 86_400)
            )
        );
        let o = &c.observability;
        assert_eq!(
            (
                o.log_format,
                o.log_requests,
                o.otlp_endpoint.clone(),
                o.debug_bodies
            ),
            (LogFormat::Json, true, None, DebugBodies::Off)
        );
        assert_eq!(
            (c.degraded.enabled, c.degraded.message.as_str()),
            (false, "The assistant is busy, please try again shortly.")
        );
        assert_eq!(c.version.len(), 64);
    }
}

#[test]
fn clients_empty_list_closes_the_gateway() {
    assert_eq!(
        load("clients: []\n").unwrap().clients.map(|c| c.len()),
        Some(0)
    );
    assert_eq!(
        load("clients:\n").unwrap().clients.map(|c| c.len()),
        Some(0)
    );
}

#[test]
fn defaults_per_provider_and_route() {
    let c = load("providers:\n  g: { protocol: gemini }\nmodels:\n  - { provider: g, model: flash }\nroutes:\n  r: { targets: [g/flash] }\nusage: { store: off }\nobservability: { otlp_endpoint: \"\" }\n").unwrap();
    let g = &c.providers["g"];
    assert_eq!(
        (g.base_url.as_str(), g.keys.len()),
        ("https://generativelanguage.googleapis.com", 0)
    );
    assert_eq!(
        (g.timeouts, g.circuit),
        (Timeouts::default(), Circuit::default())
    );
    let r = &c.routes["r"];
    assert_eq!(
        (r.strategy, r.weights, r.retry),
        (
            Strategy::Priority,
            BalancedWeights::default(),
            Retry::default()
        )
    );
    assert!(matches!(c.usage.store, UsageBackend::Off));
    assert_eq!(c.observability.otlp_endpoint, None);
}

#[test]
fn diagnostic_display() {
    let d = Diagnostic {
        file: "a.yaml".into(),
        line: 3,
        column: 5,
        path: "routes.chat".into(),
        message: "bad".into(),
    };
    assert_eq!(d.to_string(), "a.yaml:3:5: routes.chat: bad");
}

#[test]
fn load_file_reads_and_reports_the_path() {
    let dir = std::env::temp_dir().join(format!("switchyard-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(&file, "server:\n  lisen: x\n").unwrap();
    let ds = load_file(&file).unwrap_err();
    assert_eq!(ds[0].to_string(), format!("{}:2:3: server.lisen: unknown key `lisen`; allowed keys: listen, admin_listen, admin_key_env, max_body, sse_keepalive, body_timeout, max_connections, region", file.display()));
    assert!(load_file(&dir.join("missing.yaml")).unwrap_err()[0]
        .message
        .starts_with("cannot read"));
    std::fs::remove_dir_all(&dir).unwrap();
}
