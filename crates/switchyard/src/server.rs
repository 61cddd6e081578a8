//! Listeners and lifecycle.
//!
//! The client listener runs thread-per-core, like nginx's workers: each
//! worker thread owns a single-threaded runtime and its own `SO_REUSEPORT`
//! socket on the same address, so the kernel spreads connections across
//! workers and a request, its upstream connection (pools are per thread, see
//! `upstream::client`) and its client connection stay on one thread with no
//! cross-thread wake-ups. Tests run everything on their own runtime instead
//! (`Workers::Current`). TCP_NODELAY is set on every accepted socket.
//!
//! The admin listener, SIGHUP reload and shutdown live on the caller's runtime.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use axum::serve::ListenerExt;
use tokio::net::{TcpListener, TcpSocket};
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::config::Config;
use crate::live::Live;
use crate::observe::decision_log::DecisionSink;
use crate::registry::Registry;
use crate::state::memory::MemoryStore;
use crate::write_stall::WriteStall;

/// Where client connections are served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workers {
    /// On the caller's runtime (tests, embedding).
    Current,
    /// One single-threaded runtime per worker thread.
    PerCore(usize),
}

pub struct Options {
    pub decisions: DecisionSink,
    /// Where the config came from: reloaded from there, and watched.
    pub config_source: Option<crate::config::source::Source>,
    pub workers: Workers,
}

/// A running gateway. Dropping it does not stop it; call `shutdown`.
pub struct Running {
    pub addr: SocketAddr,
    pub admin_addr: SocketAddr,
    pub app: App,
    shutdown: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Stop accepting, let in-flight requests finish.
    pub async fn shutdown(self) {
        self.shutdown.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
        let threads = self.threads;
        let _ =
            tokio::task::spawn_blocking(move || threads.into_iter().for_each(|t| drop(t.join())))
                .await;
        // Every finished request's row is written before the process exits.
        if let Some(u) = &self.app.usage {
            if !u.flush(std::time::Duration::from_secs(10)).await {
                tracing::warn!(store = %u.name, "usage store: rows still queued at shutdown were not written");
            }
        }
        // And its spans are exported, within a bound (a collector that is
        // down does not hold the exit up).
        if let Some(t) = &self.app.traces {
            if !t.flush(std::time::Duration::from_secs(5)).await {
                tracing::warn!("trace export: spans still queued at shutdown were not exported");
            }
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
    let listen = config.server.listen;
    let admin_listen = config.server.admin_listen;
    if config.clients.is_none() {
        tracing::warn!(
            "no `clients:` section: the gateway is open to anyone who can reach {listen}"
        );
    }
    let store = Arc::new(MemoryStore::new());
    let shared = crate::state::shared::of(&config.state);
    let registry = Arc::new(Registry::with_shared(store.clone(), shared.clone()));
    let governance = Arc::new(crate::governance::Governance::default());
    let live = Live::build(config, &registry, &governance)?;
    let metrics: Arc<crate::observe::metrics::Metrics> = Default::default();
    let usage = open_usage(&live, &metrics).await?;
    let live_usage = live.config.usage.clone();
    let recent: Arc<crate::sinks::recent::Recent> = Default::default();
    let canary: Arc<crate::live::canary::Canary> = Default::default();
    let mut sinks: Vec<Arc<dyn crate::sinks::Sink>> = vec![
        canary.clone(),
        Arc::new(crate::sinks::metrics::MetricsSink(metrics.clone())),
        Arc::new(opts.decisions),
        Arc::new(crate::sinks::recent::RecentSink(recent.clone())),
    ];
    if let Some(u) = &usage {
        sinks.push(Arc::new(crate::sinks::usage::UsageSink(u.clone())));
    }
    let traces = open_traces(&live, &metrics)?;
    if let Some(t) = &traces {
        sinks.push(t.clone());
    }
    let shutdown = CancellationToken::new();
    let shadows = crate::shadow::Shadows::start(
        live.config.shadow,
        metrics.clone(),
        usage.clone(),
        shutdown.clone(),
    );
    let app = App {
        live: Arc::new(ArcSwap::from_pointee(live)),
        sinks: crate::sinks::Sinks::new(sinks),
        config_source: opts.config_source,
        metrics,
        responses: response_store(&usage, &live_usage, &*shared),
        usage,
        last_reload: Default::default(),
        recent,
        traces,
        canary,
        shadows,
    };
    let admin = bind(admin_listen, false).await?;
    let admin_addr = admin.local_addr().map_err(|e| e.to_string())?;
    let mut tasks = vec![
        serve(
            admin,
            crate::routes::admin_router(app.clone()),
            shutdown.clone(),
        ),
        sighup_reload(app.clone(), shutdown.clone()),
        sweep(store, shutdown.clone()),
        crate::reliability::key_check::spawn(app.live.clone(), shutdown.clone()),
        crate::reliability::probe::spawn(app.live.clone(), app.sinks.clone(), shutdown.clone()),
    ];
    tasks.extend(watch_source(&app, &shutdown));
    let live = app.live.clone();
    let report = Arc::new(move || {
        let l = live.load();
        crate::state::fleet::Report {
            config_version: l.version.to_string(),
            health: l.registry.local_health(),
            budget_held: l.governance.budgets.fleet_held(),
        }
    });
    let events = {
        let l = app.live.load();
        Arc::new(crate::live::FleetEvents {
            registry: l.registry.clone(),
            governance: l.governance.clone(),
        })
    };
    tasks.extend(shared.run(report, events, shutdown.clone()));
    if let Some(u) = &app.usage {
        tasks.push(sweep_usage(u.clone(), shutdown.clone()));
        tasks.push(sync_issued_keys(app.clone(), u.clone(), shutdown.clone()));
    }
    let mut threads = Vec::new();
    let open = OpenConnections::default();
    let addr = match opts.workers {
        Workers::Current => {
            let client = bind(listen, false).await?;
            let addr = client.local_addr().map_err(|e| e.to_string())?;
            tasks.push(tokio::spawn(serve_http1(
                client,
                ClientService::new(app.clone()),
                open,
                shutdown.clone(),
            )));
            addr
        }
        Workers::PerCore(n) => {
            let first = bind(listen, true).await?;
            let addr = first.local_addr().map_err(|e| e.to_string())?;
            let mut listeners = vec![first];
            for _ in 1..n.max(1) {
                listeners.push(bind(addr, true).await?);
            }
            for (i, l) in listeners.into_iter().enumerate() {
                threads.push(worker(i, l, app.clone(), open.clone(), shutdown.clone())?);
            }
            addr
        }
    };
    Ok(Running {
        addr,
        admin_addr,
        app,
        shutdown,
        tasks,
        threads,
    })
}

/// The config's source watched: a file's folder, or an etcd key.
fn watch_source(app: &App, stop: &CancellationToken) -> Option<tokio::task::JoinHandle<()>> {
    use crate::config::source::Source;
    match app.config_source.clone()? {
        Source::File(path) => crate::admin::watch::watch(app.clone(), path, stop.clone()),
        Source::Etcd(at) => Some(crate::admin::etcd_source::watch(
            app.clone(),
            at,
            stop.clone(),
        )),
    }
}

/// The OTLP trace export, when `observability.otlp_endpoint` is set. Built
/// once: a reload that moves it is refused (`admin::reload`).
fn open_traces(
    live: &Live,
    metrics: &crate::observe::metrics::Metrics,
) -> Result<Option<Arc<crate::sinks::trace::TraceSink>>, String> {
    let o = &live.config.observability;
    if o.otlp_endpoint.is_none() {
        return Ok(None);
    }
    crate::sinks::trace::TraceSink::start(o, metrics.trace_spans_dropped.clone()).map(Some)
}

async fn bind(addr: SocketAddr, reuse_port: bool) -> Result<TcpListener, String> {
    let err = |e: std::io::Error| format!("cannot listen on {addr}: {e}");
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(err)?;
    socket.set_reuseaddr(true).map_err(err)?;
    if reuse_port {
        socket.set_reuseport(true).map_err(err)?;
    }
    socket.bind(addr).map_err(err)?;
    socket.listen(1024).map_err(err)
}

/// A worker thread with its own single-threaded runtime.
fn worker(
    i: usize,
    listener: TcpListener,
    app: App,
    open: OpenConnections,
    stop: CancellationToken,
) -> Result<std::thread::JoinHandle<()>, String> {
    let listener = listener.into_std().map_err(|e| e.to_string())?;
    std::thread::Builder::new()
        .name(format!("switchyard-worker-{i}"))
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("worker {i} cannot start its runtime: {e}");
                    return;
                }
            };
            rt.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(l) => serve_http1(l, ClientService::new(app), open, stop).await,
                    Err(e) => tracing::error!("worker {i} cannot use its listener: {e}"),
                }
            });
        })
        .map_err(|e| format!("cannot start worker thread: {e}"))
}

/// The client listener: plain HTTP/1.1 connections (what OpenAI and Anthropic
/// SDKs speak) served straight by hyper. axum's own `serve` adds HTTP/2
/// prior-knowledge detection to every connection, a cost measured on the
/// hot path for a protocol the clients do not use.
/// The client listener's service: `POST /v1/chat/completions` goes straight
/// to its handler (the hot path skips the router's boxing, its extractors and
/// their header-map clone); every other request goes through axum.
#[derive(Clone)]
struct ClientService {
    app: App,
    router: hyper_util::service::TowerToHyperService<axum::Router>,
}

type Reply = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<http::Response<axum::body::Body>, Infallible>>
            + Send,
    >,
>;

impl ClientService {
    fn new(app: App) -> Self {
        let router = hyper_util::service::TowerToHyperService::new(crate::routes::client_router(
            app.clone(),
        ));
        ClientService { app, router }
    }
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for ClientService {
    type Response = http::Response<axum::body::Body>;
    type Error = Infallible;
    type Future = Reply;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Reply {
        if req.method() == http::Method::POST && req.uri().path() == "/v1/chat/completions" {
            let app = self.app.clone();
            let (parts, body) = req.into_parts();
            let body = axum::body::Body::new(body);
            return Box::pin(async move {
                Ok(crate::ingress::openai::chat(app, parts.headers, body).await)
            });
        }
        Box::pin(self.router.call(req))
    }
}

/// The open client connections of every worker thread, bounded by
/// `server.max_connections` (contract §8): one atomic step per connection,
/// none per request.
#[derive(Clone, Default)]
struct OpenConnections(Arc<std::sync::atomic::AtomicUsize>);

/// One counted connection; uncounted when it ends.
struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl OpenConnections {
    /// A place for one more connection, unless `max` are open already.
    fn take(&self, max: usize) -> Option<Counted> {
        use std::sync::atomic::Ordering;
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Counted(self.0.clone()))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// How long a client's connection may read nothing before it is closed:
/// the longest `stream_idle` of any provider, so a stream is never cut for
/// a gap its own upstream may take (contract §8), plus a second so that a
/// stream's own clock (`reliability::client_side`) cuts and charges it
/// first; this then closes the connection its writes are stuck on.
fn stall_limit(live: &Live) -> std::time::Duration {
    live.config
        .providers
        .values()
        .map(|p| p.timeouts.stream_idle)
        .max()
        .unwrap_or(std::time::Duration::from_secs(60))
        + std::time::Duration::from_secs(1)
}

/// What a connection past `server.max_connections` gets, at once: 503 in
/// the OpenAI envelope, and the connection closed.
const TOO_MANY_CONNECTIONS: &str = r#"{"error":{"message":"the gateway has too many open connections (server.max_connections)","type":"service_unavailable_error","code":"overloaded","param":null}}"#;

/// Answer a connection past the bound and close it. The request's head is
/// read first (briefly: a client that sends nothing gets the answer
/// anyway), so HTTP clients see an answer to their request; after it,
/// whatever else the client sends is read and dropped for a moment
/// (closing a socket with unread bytes resets it, and the client could lose
/// the answer). A second at most, so refused connections never pile up.
async fn refuse(mut tcp: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = [0u8; 4096];
    let head = async {
        let mut seen: Vec<u8> = Vec::new();
        while seen.len() < 16 * 1024 && memchr::memmem::find(&seen, b"\r\n\r\n").is_none() {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_millis(250), head).await;
    let answer = async {
        let head = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
            TOO_MANY_CONNECTIONS.len()
        );
        tcp.write_all(head.as_bytes()).await?;
        tcp.write_all(TOO_MANY_CONNECTIONS.as_bytes()).await?;
        tcp.shutdown().await?;
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match tcp.read(&mut buf).await? {
                0 => break,
                n => left = left.saturating_sub(n),
            }
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), answer).await;
}

async fn serve_http1(
    listener: TcpListener,
    service: ClientService,
    open: OpenConnections,
    stop: CancellationToken,
) {
    tokio::spawn(sweep_upstream_idle(stop.clone()));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (tcp, _) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and friends: back off briefly rather than spin.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Nagle + delayed ACK would add ~40 ms to every small response.
        let _ = tcp.set_nodelay(true);
        // One snapshot read per connection (not a copy of the server section).
        let live = service.app.live.load();
        let (max, body_timeout, stall) = (
            live.config.server.max_connections,
            live.config.server.body_timeout,
            stall_limit(&live),
        );
        drop(live);
        let Some(counted) = open.take(max) else {
            tokio::spawn(refuse(tcp));
            continue;
        };
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(hyper_util::rt::TokioTimer::new())
            // Headers dribbled byte by byte hold the connection no longer
            // than a body may take (contract §8).
            .header_read_timeout(body_timeout)
            // A connection's buffers, and so the largest request head, at
            // 64 KiB (hyper's default is ~400 KiB): headers past it get 431,
            // and 10 000 connections with hostile heads hold 640 MiB, not 4 GiB.
            .max_buf_size(64 * 1024)
            // Small answers: one copy into one buffer beats a two-part writev.
            .writev(false)
            .serve_connection(
                hyper_util::rt::TokioIo::new(WriteStall::new(tcp, stall)),
                service.clone(),
            );
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(counted);
        });
    }
    // New connections are refused (the listening socket closes now, not
    // after the drain); requests in flight finish.
    drop(listener);
    graceful.shutdown().await;
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

/// This thread's idle upstream connections (pools are per thread), looked
/// over now and then: closed or stale ones are let go.
async fn sweep_upstream_idle(stop: CancellationToken) {
    let mut tick = tokio::time::interval(crate::upstream::client::SWEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {
                crate::upstream::client::sweep_idle();
            }
        }
    }
}

/// The usage store, migrated, its writer running; budgets and issued keys
/// restored from it.
async fn open_usage(
    live: &Live,
    metrics: &crate::observe::metrics::Metrics,
) -> Result<Option<Arc<crate::usage::UsageStore>>, String> {
    use crate::observe::metrics::ResultLabels;
    let counter = |result| {
        metrics
            .usage_store_writes
            .get_or_create(&ResultLabels { result })
            .clone()
    };
    let outcome = crate::usage::writer::Outcome::new(counter("ok"), counter("dropped"));
    let Some(store) = crate::usage::UsageStore::open(&live.config.usage, outcome).await? else {
        tracing::warn!(
            "usage.store is off: no usage rows, spend is not kept across restarts, the keys API is unavailable, and stored Responses-API answers live in memory only"
        );
        return Ok(None);
    };
    crate::governance::restore::restore(live.clients(), live.governed(), &store)
        .await
        .map_err(|e| format!("usage store ({}): {e}", store.name))?;
    tracing::info!(store = %store.name, "usage store ready");
    Ok(Some(Arc::new(store)))
}

/// Stored Responses-API answers: in the usage store when there is one,
/// else in memory only (the start-up log says so).
fn response_store(
    usage: &Option<Arc<crate::usage::UsageStore>>,
    cfg: &crate::config::Usage,
    shared: &dyn crate::state::shared::Shared,
) -> Arc<dyn crate::state::responses::ResponseStore> {
    use crate::state::responses::{LedgerResponses, MemoryResponses, ResponseStore};
    let own: Arc<dyn ResponseStore> = match usage {
        Some(u) => Arc::new(LedgerResponses::new(u.clone())),
        None => Arc::new(MemoryResponses::new(cfg.store_responses, 10_000, 256 << 20)),
    };
    // A fleet shares them: any instance continues any conversation.
    shared.responses(own, cfg.store_responses)
}

/// How often an instance re-reads the issued keys from the usage store.
pub const KEY_SYNC: std::time::Duration = std::time::Duration::from_secs(2);

/// Issued keys as the store has them: instances sharing a store (PostgreSQL)
/// see each other's new and revoked keys within [`KEY_SYNC`].
fn sync_issued_keys(
    app: App,
    store: Arc<crate::usage::UsageStore>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(KEY_SYNC);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {
                    let live = app.live.load_full();
                    match crate::governance::restore::sync_keys(live.governed(), &store).await {
                        Ok(()) => failing = false,
                        Err(e) if !failing => {
                            failing = true;
                            tracing::warn!(store = %store.name, "issued keys not refreshed from the usage store: {e}");
                        }
                        Err(_) => {}
                    }
                }
            }
        }
    })
}

/// Retention: request rows and stored responses past their time, hourly.
fn sweep_usage(
    store: Arc<crate::usage::UsageStore>,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => store.sweep(),
            }
        }
    })
}

/// Expired store records (old windows, sessions) are dropped now and then.
fn sweep(store: Arc<MemoryStore>, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(30));
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => store.sweep(tokio::time::Instant::now()),
            }
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
                    let _ = crate::admin::reload::from_source(&app).await;
                }
            }
        }
    })
}

#[cfg(not(unix))]
fn sighup_reload(_app: App, _stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {})
}
