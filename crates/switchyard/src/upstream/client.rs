//! One pooled HTTP/1.1 + HTTP/2 client per distinct connect timeout, shared by
//! every provider and kept across config reloads (so reloads keep warm pools).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub type HttpClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

#[derive(Clone, Default)]
pub struct HttpClients {
    by_connect_timeout: Arc<Mutex<BTreeMap<Duration, HttpClient>>>,
}

impl HttpClients {
    /// Called when a config is built, never per request.
    pub fn get(&self, connect_timeout: Duration) -> Result<HttpClient, rustls::Error> {
        let mut map = self
            .by_connect_timeout
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(c) = map.get(&connect_timeout) {
            return Ok(c.clone());
        }
        let c = build(connect_timeout)?;
        map.insert(connect_timeout, c.clone());
        Ok(c)
    }
}

fn build(connect_timeout: Duration) -> Result<HttpClient, rustls::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(60)));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(provider)?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(1024)
        .pool_timer(TokioTimer::new())
        .timer(TokioTimer::new())
        .build(https))
}
