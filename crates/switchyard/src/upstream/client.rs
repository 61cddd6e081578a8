//! Pooled HTTP/1.1 + HTTP/2 clients (rustls, TCP_NODELAY), one per thread and
//! connect timeout.
//!
//! Per thread, because the gateway runs one single-threaded runtime per core
//! (like nginx's workers): a connection's task lives on the runtime that
//! opened it, so a pool shared across threads would hand thread B a
//! connection whose task runs on thread A, and every request on it would
//! cost a cross-thread wake-up. Thread-local pools keep each request, its
//! upstream connection and its client connection on one thread.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

thread_local! {
    static CLIENTS: RefCell<Vec<(Duration, HttpClient)>> = const { RefCell::new(Vec::new()) };
}

/// Send a request on this thread's client for `connect_timeout`. Errs only
/// if TLS cannot be set up (`check` rules that out when a config loads).
pub fn request(
    connect_timeout: Duration,
    req: http::Request<Full<Bytes>>,
) -> Result<ResponseFuture, String> {
    CLIENTS.with(|cell| {
        let mut clients = cell.borrow_mut();
        if let Some((_, c)) = clients.iter().find(|(t, _)| *t == connect_timeout) {
            return Ok(c.request(req));
        }
        let client = build(connect_timeout).map_err(|e| format!("TLS setup failed: {e}"))?;
        let fut = client.request(req);
        clients.push((connect_timeout, client));
        Ok(fut)
    })
}

/// Fail at config load, not at the first request, if TLS cannot be set up.
pub fn check() -> Result<(), String> {
    build(Duration::from_secs(1))
        .map(|_| ())
        .map_err(|e| format!("TLS setup failed: {e}"))
}

fn connector(connect_timeout: Duration) -> HttpConnector {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Nagle + delayed ACK would add ~40 ms to small requests.
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(60)));
    http
}

fn build(connect_timeout: Duration) -> Result<HttpClient, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(provider)?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(connector(connect_timeout));
    Ok(finish(https))
}

fn finish(https: HttpsConnector<HttpConnector>) -> HttpClient {
    Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(1024)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        // Small requests: one copy into one buffer beats a two-part writev.
        .http1_writev(false)
        .build(https)
}
