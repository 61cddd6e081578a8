//! What each command does, kept out of `main.rs` so tests can call it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::{self, LogFormat};
use crate::observe::decision_log::DecisionSink;
use crate::{demo, observe, server};

/// `switchyard check --config FILE`: every problem, or `ok`; warnings
/// (a key written in clear) are shown either way and do not fail it.
pub fn check(path: &Path) -> ExitCode {
    match config::load_file(path) {
        Ok(cfg) => {
            for w in &cfg.warnings {
                eprintln!("{}", w.warning_line());
            }
            println!(
                "{}: ok ({} providers, {} deployments, {} routes)",
                path.display(),
                cfg.providers.len(),
                cfg.deployments.len(),
                cfg.routes.len()
            );
            ExitCode::SUCCESS
        }
        Err(diags) => {
            for d in &diags {
                eprintln!("{d}");
            }
            eprintln!("{} problem(s) found", diags.len());
            ExitCode::FAILURE
        }
    }
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

/// `switchyard serve [--config FILE] [--listen ADDR] [--admin-listen ADDR]`
/// (see [`listen_flags`] for the addresses).
pub async fn serve(path: Option<PathBuf>) -> ExitCode {
    let path = path.or_else(|| {
        let local = PathBuf::from("switchyard.yaml");
        local.exists().then_some(local)
    });
    let (config, _demo) = match &path {
        Some(p) => match config::load_file(p) {
            Ok(c) => (c, None),
            Err(diags) => {
                for d in &diags {
                    eprintln!("{d}");
                }
                eprintln!("config rejected: {} problem(s)", diags.len());
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
            config_path: path.clone(),
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
    if path.is_none() {
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

/// `switchyard usage [--config FILE] [--since T] [--until T] [--group-by G] [--format F]`:
/// what `GET /admin/usage` answers, read straight from the store.
pub async fn usage(
    path: Option<PathBuf>,
    since: Option<String>,
    until: Option<String>,
    group_by: Option<String>,
    format: UsageFormat,
) -> ExitCode {
    let path = path.or_else(|| {
        let local = PathBuf::from("switchyard.yaml");
        local.exists().then_some(local)
    });
    // No config: the demo's store (`switchyard.db` here).
    let usage_cfg = match &path {
        Some(p) => match config::load_file(p) {
            Ok(c) => c.usage,
            Err(diags) => {
                for d in &diags {
                    eprintln!("{d}");
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
