//! What each command does, kept out of `main.rs` so tests can call it.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use crate::config::source::Source;
use crate::config::{self, LogFormat};
use crate::observe::decision_log::DecisionSink;
use crate::{demo, observe, server};

/// `switchyard check --config FILE|etcd://HOST:PORT/KEY`: every problem,
/// or `ok`; warnings (a key written in clear) are shown either way and do
/// not fail it.
pub async fn check(source: &Source) -> ExitCode {
    match load(source).await {
        Ok(cfg) => {
            for w in &cfg.warnings {
                eprintln!("{}", w.warning_line());
            }
            println!(
                "{source}: ok ({} providers, {} deployments, {} routes)",
                cfg.providers.len(),
                cfg.deployments.len(),
                cfg.routes.len()
            );
            ExitCode::SUCCESS
        }
        Err(problems) => {
            for p in &problems {
                eprintln!("{p}");
            }
            eprintln!("{} problem(s) found", problems.len());
            ExitCode::FAILURE
        }
    }
}

/// The config `source` names, read and validated (`${VAR}` from the
/// environment), or every problem as a line. A file that cannot be read,
/// or an etcd that does not answer, is one problem.
pub async fn load(source: &Source) -> Result<config::Config, Vec<String>> {
    let text = crate::admin::reload::read(source)
        .await
        .map_err(|e| vec![e])?;
    config::load_str(&text, &source.to_string(), &|var| std::env::var(var).ok())
        .map_err(|ds| ds.iter().map(ToString::to_string).collect())
}

/// `--config`: a file, else `./switchyard.yaml` if there is one.
fn or_local(source: Option<Source>) -> Option<Source> {
    source.or_else(|| {
        let local = Path::new("switchyard.yaml");
        local.exists().then(|| Source::File(Arc::from(local)))
    })
}

/// `serve --listen` / `--admin-listen`: they set `SWITCHYARD_LISTEN` /
/// `SWITCHYARD_ADMIN_LISTEN` for this process, which the config loader reads
/// in place of `server.listen` / `server.admin_listen` — at start-up, for the
/// demo and on every reload alike, and checked like the file's own values.
/// A flag thus wins over the variable, which wins over the file. Call it
/// before any other thread starts (the environment is process-wide).
pub fn listen_flags(listen: Option<&str>, admin_listen: Option<&str>) {
    for (var, value) in [
        (config::LISTEN_ENV, listen),
        (config::ADMIN_LISTEN_ENV, admin_listen),
    ] {
        if let Some(v) = value {
            std::env::set_var(var, v);
        }
    }
}

/// `switchyard serve [--config FILE|etcd://HOST:PORT/KEY] [--listen ADDR]
/// [--admin-listen ADDR]` (see [`listen_flags`] for the addresses). A config
/// in etcd must be read at start-up: there is no last good version to
/// serve yet, so an etcd that does not answer stops the start with an
/// error (and a non-zero exit, for the supervisor to try again).
pub async fn serve(source: Option<Source>) -> ExitCode {
    let source = or_local(source);
    let (config, _demo) = match &source {
        Some(s) => match load(s).await {
            Ok(c) => (c, None),
            Err(problems) => {
                for p in &problems {
                    eprintln!("{p}");
                }
                eprintln!("config rejected: {} problem(s)", problems.len());
                return ExitCode::FAILURE;
            }
        },
        None => match demo::start("127.0.0.1:8080", "127.0.0.1:9090").await {
            Ok(d) => (d.config.clone(), Some(d)),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::FAILURE;
            }
        },
    };
    observe::logging::init(config.observability.log_format);
    for w in &config.warnings {
        tracing::warn!("{}", w.warning_line());
    }
    let (decisions, writer) = if config.observability.log_requests {
        DecisionSink::stdout()
    } else {
        (DecisionSink::Off, None)
    };
    let json = config.observability.log_format == LogFormat::Json;
    let running = match server::start(
        config,
        server::Options {
            decisions,
            config_source: source.clone(),
            workers: server::Workers::PerCore(
                std::thread::available_parallelism().map_or(2, |n| n.get()),
            ),
        },
    )
    .await
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(listen = %running.addr, admin = %running.admin_addr, "switchyard is listening");
    if source.is_none() {
        println!("\nswitchyard demo is up: mock OpenAI, Anthropic and Gemini providers run in this process.");
        println!(
            "API  {}    admin {}\n",
            running.base_url(),
            running.admin_url()
        );
        println!("Try it:\n\n{}\n", demo::curl_line(&running.base_url()));
    } else if !json {
        println!(
            "switchyard listening on {} (admin {})",
            running.base_url(),
            running.admin_url()
        );
    }
    stop_signal().await;
    tracing::info!("shutting down: finishing in-flight requests");
    running.shutdown().await;
    // Every sink clone is gone with the server: the writer drains and exits.
    if let Some(w) = writer {
        let _ = tokio::task::spawn_blocking(move || w.join()).await;
    }
    ExitCode::SUCCESS
}

/// Ctrl-C, or SIGTERM: what `docker stop`, Kubernetes and systemd send. Both
/// stop the gateway the same way: in-flight requests finish and every
/// decision-log line is written before it exits.
async fn stop_signal() {
    #[cfg(unix)]
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// `switchyard mock --listen ADDR`
pub async fn mock(listen: &str) -> ExitCode {
    match switchyard_mock::run(listen).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mock providers stopped: {e}");
            ExitCode::FAILURE
        }
    }
}

/// How `switchyard usage` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageFormat {
    Table,
    Csv,
    Json,
}

/// `switchyard usage [--config FILE|etcd://…] [--since T] [--until T] [--group-by G] [--format F]`:
/// what `GET /admin/usage` answers, read straight from the store.
pub async fn usage(
    source: Option<Source>,
    since: Option<String>,
    until: Option<String>,
    group_by: Option<String>,
    format: UsageFormat,
) -> ExitCode {
    // No config: the demo's store (`switchyard.db` here).
    let usage_cfg = match &or_local(source) {
        Some(s) => match load(s).await {
            Ok(c) => c.usage,
            Err(problems) => {
                for p in &problems {
                    eprintln!("{p}");
                }
                return ExitCode::FAILURE;
            }
        },
        None => config::Usage {
            store: config::UsageBackend::Sqlite {
                path: "switchyard.db".into(),
            },
            retention: std::time::Duration::from_secs(90 * 86_400),
            store_responses: std::time::Duration::from_secs(30 * 86_400),
        },
    };
    if let config::UsageBackend::Sqlite { path } = &usage_cfg.store {
        if !Path::new(path).exists() {
            eprintln!(
                "no usage store at {path} (has the gateway run here with `usage.store: sqlite`?)"
            );
            return ExitCode::FAILURE;
        }
    }
    let ask = match crate::admin::governance::usage_ask(
        group_by.as_deref(),
        since.as_deref(),
        until.as_deref(),
    ) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = crate::usage::writer::Outcome::new(Default::default(), Default::default());
    let store = match crate::usage::UsageStore::open(&usage_cfg, outcome).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            eprintln!("`usage.store` is off in this config: there is nothing to read");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let answer = match crate::admin::governance::usage_answer(&store, ask).await {
        Ok(a) => a,
        Err(e) => {
            eprintln!("the usage store did not answer: {e}");
            return ExitCode::FAILURE;
        }
    };
    print!("{}", render_usage(&answer, format));
    ExitCode::SUCCESS
}

const USAGE_COLUMNS: [&str; 7] = [
    "requests",
    "errors",
    "cache_hits",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cost_usd",
];

/// The `/admin/usage` answer as a table, CSV or JSON.
pub fn render_usage(answer: &serde_json::Value, format: UsageFormat) -> String {
    use std::fmt::Write;
    let group = answer["group_by"].as_str().unwrap_or("key");
    let rows = answer["rows"].as_array().cloned().unwrap_or_default();
    let key = |r: &serde_json::Value| r["key"].as_str().unwrap_or("-").to_string();
    let cell = |r: &serde_json::Value, c: &str| match c {
        "cost_usd" => format!("{:.6}", r[c].as_f64().unwrap_or(0.0)),
        _ => r[c].as_i64().unwrap_or(0).to_string(),
    };
    let mut out = String::new();
    match format {
        UsageFormat::Json => {
            let _ = writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(answer).unwrap_or_default()
            );
        }
        UsageFormat::Csv => {
            let _ = writeln!(out, "{group},{}", USAGE_COLUMNS.join(","));
            for r in &rows {
                let cells: Vec<String> = USAGE_COLUMNS.iter().map(|c| cell(r, c)).collect();
                let k = key(r);
                let k = if k.contains([',', '"']) {
                    format!("\"{}\"", k.replace('"', "\"\""))
                } else {
                    k
                };
                let _ = writeln!(out, "{k},{}", cells.join(","));
            }
        }
        UsageFormat::Table => {
            let mut table: Vec<Vec<String>> = vec![std::iter::once(group.to_uppercase())
                .chain(USAGE_COLUMNS.iter().map(|c| c.to_uppercase()))
                .collect()];
            for r in &rows {
                table.push(
                    std::iter::once(key(r))
                        .chain(USAGE_COLUMNS.iter().map(|c| cell(r, c)))
                        .collect(),
                );
            }
            let total = |c: &str| -> String {
                match c {
                    "cost_usd" => format!(
                        "{:.6}",
                        rows.iter().filter_map(|r| r[c].as_f64()).sum::<f64>()
                    ),
                    _ => rows
                        .iter()
                        .filter_map(|r| r[c].as_i64())
                        .sum::<i64>()
                        .to_string(),
                }
            };
            table.push(
                std::iter::once("TOTAL".to_string())
                    .chain(USAGE_COLUMNS.iter().map(|c| total(c)))
                    .collect(),
            );
            let widths: Vec<usize> = (0..table[0].len())
                .map(|i| table.iter().map(|r| r[i].len()).max().unwrap_or(0))
                .collect();
            let _ = writeln!(
                out,
                "{} to {}",
                answer["since"].as_str().unwrap_or(""),
                answer["until"].as_str().unwrap_or("")
            );
            for r in &table {
                let line: Vec<String> = r
                    .iter()
                    .enumerate()
                    .map(|(i, v)| {
                        if i == 0 {
                            format!("{v:<w$}", w = widths[i])
                        } else {
                            format!("{v:>w$}", w = widths[i])
                        }
                    })
                    .collect();
                let _ = writeln!(out, "{}", line.join("  ").trim_end());
            }
        }
    }
    out
}
