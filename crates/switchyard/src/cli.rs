//! What each command does, kept out of `main.rs` so tests can call it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::config::{self, LogFormat};
use crate::observe::decision_log::DecisionSink;
use crate::{demo, observe, server};

/// `switchyard check --config FILE`
pub fn check(path: &Path) -> ExitCode {
    match config::load_file(path) {
        Ok(cfg) => {
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

/// `switchyard serve [--config FILE]`
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
