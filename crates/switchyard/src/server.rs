//! Listeners and lifecycle: the client and admin listeners (TCP_NODELAY on
//! every accepted socket), SIGHUP reload, and graceful shutdown on a token.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::serve::ListenerExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::app::{self, App};
use crate::config::Config;
use crate::observe::decision_log::DecisionSink;
use crate::state::live::Live;
use crate::upstream::HttpClients;

pub struct Options {
    pub decisions: DecisionSink,
    pub config_path: Option<PathBuf>,
}

/// A running gateway. Dropping it does not stop it; call `shutdown`.
pub struct Running {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub app: App,
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    /// Stop accepting, let in-flight requests finish.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin_addr)
    }
}

pub async fn start(config: Config, opts: Options) -> Result<Running, String> {
    let http = HttpClients::default();
    let listen = config.server.listen;
    let admin_listen = config.server.admin_listen;
    if config.clients.is_none() {
        tracing::warn!(
            "no `clients:` section: the gateway is open to anyone who can reach {listen}"
        );
    }
    let live = Live::build(config, &http)?;
    let app = App {
        live: Arc::new(ArcSwap::from_pointee(live)),
        decisions: opts.decisions,
        http,
        config_path: opts.config_path,
        metrics: Default::default(),
    };
    let client = bind(listen).await?;
    let admin = bind(admin_listen).await?;
    let addr = client.local_addr().map_err(|e| e.to_string())?;
    let admin_addr = admin.local_addr().map_err(|e| e.to_string())?;
    let shutdown = CancellationToken::new();
    let mut tasks = vec![
        serve(client, app::client_router(app.clone()), shutdown.clone()),
        serve(admin, app::admin_router(app.clone()), shutdown.clone()),
    ];
    tasks.push(sighup_reload(app.clone(), shutdown.clone()));
    Ok(Running {
        addr,
        admin_addr,
        app,
        shutdown,
        tasks,
    })
}

async fn bind(addr: SocketAddr) -> Result<TcpListener, String> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}

fn serve(
    listener: TcpListener,
    router: axum::Router,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    // Nagle + delayed ACK would add ~40 ms to every small response.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move {
        let result = axum::serve(listener, router)
            .with_graceful_shutdown(stop.cancelled_owned())
            .await;
        if let Err(e) = result {
            tracing::error!("listener stopped: {e}");
        }
    })
}

#[cfg(unix)]
fn sighup_reload(app: App, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            return;
        };
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                got = hup.recv() => {
                    if got.is_none() { return; }
                    let _ = crate::admin::reload::from_file(&app);
                }
            }
        }
    })
}

#[cfg(not(unix))]
fn sighup_reload(_app: App, _stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {})
}
