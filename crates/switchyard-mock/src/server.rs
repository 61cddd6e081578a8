//! The mock server object: listener, connections, recorder, scripted behaviors.

use crate::behavior::Behavior;
use crate::handler;
use crate::sigv4::AwsCredentials;
use crate::{sts, vertex};
use bytes::Bytes;
use http::{HeaderMap, Method, Uri};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// At most this many requests are kept by the recorder (the counter keeps counting).
pub const MAX_RECORDED: usize = 10_000;

/// A request as received by the mock.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path_and_query: String,
    /// Header names are lower-case, in arrival order.
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// The body parsed as JSON, if it is JSON.
    pub json: Option<serde_json::Value>,
}

impl RecordedRequest {
    /// First value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Raw parts kept on the hot path; converted to [`RecordedRequest`] on demand.
pub(crate) struct Raw {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Raw {
    fn to_recorded(&self) -> RecordedRequest {
        RecordedRequest {
            method: self.method.to_string(),
            path_and_query: self
                .uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| self.uri.path().to_string()),
            headers: self
                .headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: self.body.clone(),
            json: serde_json::from_slice(&self.body).ok(),
        }
    }
}

/// State shared by every connection.
pub(crate) struct Shared {
    pub seq: AtomicU64,
    count: AtomicUsize,
    recorded: Mutex<Vec<Raw>>,
    script: Mutex<VecDeque<Behavior>>,
    script_len: AtomicUsize,
    default: Mutex<Option<Arc<Behavior>>>,
    keys: Mutex<Arc<Vec<String>>>,
    shutdown: watch::Sender<bool>,
    /// Response bodies the client dropped before their end.
    abandoned: Arc<AtomicUsize>,
    /// The mock's clock: `(time, when it was set)`; `None` is the system clock.
    clock: Mutex<Option<(SystemTime, Instant)>>,
    aws: Mutex<Arc<AwsCredentials>>,
    pub sigv4_verified: AtomicUsize,
    pub sigv4_rejected: AtomicUsize,
    pub vertex: Mutex<vertex::State>,
    pub token_requests: AtomicUsize,
    /// Bedrock Converse cache prefixes already written (see the crate docs).
    pub cache_seen: Mutex<HashSet<u64>>,
    /// STS `AssumeRoleWithWebIdentity`: the token it takes, what it issued.
    pub sts: Mutex<sts::State>,
}

impl Shared {
    pub(crate) fn record(&self, raw: Raw) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut rec = self.recorded.lock().expect("recorder lock");
        if rec.len() < MAX_RECORDED {
            rec.push(raw);
        }
    }

    /// The next scripted behavior, if any.
    pub(crate) fn next_scripted(&self) -> Option<Behavior> {
        if self.script_len.load(Ordering::Acquire) == 0 {
            return None;
        }
        let mut q = self.script.lock().expect("script lock");
        let b = q.pop_front();
        self.script_len.store(q.len(), Ordering::Release);
        b
    }

    pub(crate) fn default_behavior(&self) -> Option<Arc<Behavior>> {
        self.default.lock().expect("default lock").clone()
    }

    pub(crate) fn valid_keys(&self) -> Arc<Vec<String>> {
        self.keys.lock().expect("keys lock").clone()
    }

    /// The mock's clock (SigV4 skew, JWT times, token expiry, Vertex `createTime`).
    pub(crate) fn now(&self) -> SystemTime {
        match *self.clock.lock().expect("clock lock") {
            Some((t, at)) => t + at.elapsed(),
            None => SystemTime::now(),
        }
    }

    /// The counters `GET /mock/stats` answers.
    pub(crate) fn stats(&self) -> serde_json::Value {
        let minted = self.vertex.lock().expect("vertex lock").minted;
        let (sts_requests, sts_issued) = {
            let st = self.sts.lock().expect("sts lock");
            (st.requests, st.count)
        };
        serde_json::json!({
            "requests": self.count.load(Ordering::Relaxed),
            "abandoned_bodies": self.abandoned.load(Ordering::Relaxed),
            "sigv4_verified": self.sigv4_verified.load(Ordering::Relaxed),
            "sigv4_rejected": self.sigv4_rejected.load(Ordering::Relaxed),
            "token_requests": self.token_requests.load(Ordering::Relaxed),
            "tokens_issued": minted,
            "sts_requests": sts_requests,
            "sts_credentials_issued": sts_issued
        })
    }

    pub(crate) fn aws_credentials(&self) -> Arc<AwsCredentials> {
        self.aws.lock().expect("aws lock").clone()
    }
}

/// An in-process mock provider server (OpenAI Chat and Responses, Azure, Anthropic, Gemini,
/// Bedrock and Vertex AI endpoints, Vertex's token endpoint, embeddings and token counting).
pub struct MockServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    accept: Mutex<Option<JoinHandle<()>>>,
}

impl MockServer {
    /// Bind `addr` (`"127.0.0.1:0"` for an ephemeral port) and start serving.
    pub async fn start(addr: &str) -> std::io::Result<MockServer> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let (shutdown, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            seq: AtomicU64::new(0),
            count: AtomicUsize::new(0),
            recorded: Mutex::new(Vec::new()),
            script: Mutex::new(VecDeque::new()),
            script_len: AtomicUsize::new(0),
            default: Mutex::new(None),
            keys: Mutex::new(Arc::new(Vec::new())),
            shutdown,
            abandoned: Arc::default(),
            clock: Mutex::new(None),
            aws: Mutex::new(Arc::new(AwsCredentials::default())),
            sigv4_verified: AtomicUsize::new(0),
            sigv4_rejected: AtomicUsize::new(0),
            vertex: Mutex::new(vertex::State::default()),
            token_requests: AtomicUsize::new(0),
            cache_seen: Mutex::new(HashSet::new()),
            sts: Mutex::new(sts::State::default()),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(MockServer {
            shared,
            addr,
            accept: Mutex::new(Some(accept)),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://IP:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received (up to [`MAX_RECORDED`]), in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        let rec = self.shared.recorded.lock().expect("recorder lock");
        rec.iter().map(Raw::to_recorded).collect()
    }

    /// Number of requests received since start (or the last [`clear_requests`](Self::clear_requests)).
    pub fn request_count(&self) -> usize {
        self.shared.count.load(Ordering::Relaxed)
    }

    /// Responses whose client went away before their body ended (a gateway
    /// that stopped an upstream call mid-stream).
    pub fn abandoned_bodies(&self) -> usize {
        self.shared.abandoned.load(Ordering::Relaxed)
    }

    /// Forget recorded requests and reset the counters ([`request_count`](Self::request_count),
    /// [`sigv4_verified`](Self::sigv4_verified), [`sigv4_rejected`](Self::sigv4_rejected),
    /// [`token_requests`](Self::token_requests); [`tokens_issued`](Self::tokens_issued)
    /// counts on, it numbers the tokens).
    pub fn clear_requests(&self) {
        let mut rec = self.shared.recorded.lock().expect("recorder lock");
        rec.clear();
        self.shared.count.store(0, Ordering::Relaxed);
        self.shared.sigv4_verified.store(0, Ordering::Relaxed);
        self.shared.sigv4_rejected.store(0, Ordering::Relaxed);
        self.shared.token_requests.store(0, Ordering::Relaxed);
        self.shared.sts.lock().expect("sts lock").requests = 0;
    }

    /// Run the mock's clock from `t` on (`None`: the system clock). It is what the SigV4
    /// check compares `X-Amz-Date` with (±5 minutes), what the token endpoint checks a JWT's
    /// `iat`/`exp` against and dates a token's expiry from, and Vertex's `createTime`.
    pub fn set_clock(&self, t: Option<SystemTime>) {
        *self.shared.clock.lock().expect("clock lock") = t.map(|t| (t, Instant::now()));
    }

    /// The AWS credentials (and region) the Bedrock routes verify SigV4 signatures with.
    /// Default: [`AwsCredentials::default`] (`AKIDEXAMPLE` /
    /// `wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY`, no session token, `us-east-1`).
    pub fn set_aws_credentials(&self, creds: AwsCredentials) {
        *self.shared.aws.lock().expect("aws lock") = Arc::new(creds);
    }

    /// Bedrock requests whose SigV4 signature verified.
    pub fn sigv4_verified(&self) -> usize {
        self.shared.sigv4_verified.load(Ordering::Relaxed)
    }

    /// Bedrock requests refused with a 403 (bad, missing or stale signature, unknown key,
    /// wrong session token).
    pub fn sigv4_rejected(&self) -> usize {
        self.shared.sigv4_rejected.load(Ordering::Relaxed)
    }

    /// The service account the token endpoint (`POST /token`) accepts assertions from: a
    /// service-account key file (`client_email`, `private_key`, optional `private_key_id`,
    /// `token_uri`). Default: `vertex/oauth/service_account.test.json`. Tokens already
    /// minted stay valid.
    pub fn set_service_account(&self, json: &str) -> Result<(), String> {
        let account = vertex::ServiceAccount::from_json(json)?;
        self.shared.vertex.lock().expect("vertex lock").account = Some(Arc::new(account));
        Ok(())
    }

    /// `expires_in` of the tokens minted from now on (default 3599 seconds); a token is
    /// refused once the mock's clock reaches its expiry.
    pub fn set_token_lifetime(&self, secs: u64) {
        self.shared
            .vertex
            .lock()
            .expect("vertex lock")
            .lifetime_secs = secs;
    }

    /// Invalidate every token minted so far (Vertex calls carrying one get a 401).
    pub fn revoke_tokens(&self) {
        self.shared
            .vertex
            .lock()
            .expect("vertex lock")
            .tokens
            .clear();
    }

    /// Requests to the token endpoint (`POST /token`), granted or not.
    pub fn token_requests(&self) -> usize {
        self.shared.token_requests.load(Ordering::Relaxed)
    }

    /// Access tokens minted since start (`ya29.mock-1`, `ya29.mock-2`, …).
    pub fn tokens_issued(&self) -> usize {
        let minted = self.shared.vertex.lock().expect("vertex lock").minted;
        usize::try_from(minted).unwrap_or(usize::MAX)
    }

    /// The web identity token STS `AssumeRoleWithWebIdentity` (`POST /`) accepts (default
    /// [`DEFAULT_WEB_IDENTITY_TOKEN`](crate::DEFAULT_WEB_IDENTITY_TOKEN); `None`: any
    /// non-empty token). Others get a 400 `InvalidIdentityToken`.
    pub fn set_web_identity_token(&self, token: Option<&str>) {
        self.shared.sts.lock().expect("sts lock").web_identity_token = token.map(str::to_owned);
    }

    /// How long the credentials STS issues from now on live, in seconds (default
    /// [`DEFAULT_STS_LIFETIME_SECS`](crate::DEFAULT_STS_LIFETIME_SECS)); the Bedrock routes
    /// refuse them (403 `ExpiredTokenException`) once the mock's clock reaches their
    /// `Expiration`.
    pub fn set_sts_lifetime(&self, secs: u64) {
        self.shared.sts.lock().expect("sts lock").lifetime_secs = secs;
    }

    /// STS `AssumeRoleWithWebIdentity` requests, granted or not (since start or the last
    /// [`clear_requests`](Self::clear_requests)).
    pub fn sts_requests(&self) -> usize {
        self.shared.sts.lock().expect("sts lock").requests
    }

    /// Every set of temporary credentials STS issued, in order (access key ids
    /// `ASIAMOCK000000000001`, …; each with its secret and session token).
    pub fn sts_credentials(&self) -> Vec<AwsCredentials> {
        let st = self.shared.sts.lock().expect("sts lock");
        let mut all: Vec<AwsCredentials> = st
            .issued
            .values()
            .map(|i| (*i.credentials).clone())
            .collect();
        all.sort_by(|a, b| a.access_key_id.cmp(&b.access_key_id));
        all
    }

    /// Queue behaviors for the next requests (consumed in order, before any other source).
    pub fn script(&self, behaviors: Vec<Behavior>) {
        let mut q = self.shared.script.lock().expect("script lock");
        q.extend(behaviors);
        self.shared.script_len.store(q.len(), Ordering::Release);
    }

    /// Behavior for requests that select none.
    pub fn set_default(&self, b: Behavior) {
        *self.shared.default.lock().expect("default lock") = Some(Arc::new(b));
    }

    /// When non-empty, requests must carry one of these keys (`Authorization: Bearer`,
    /// `x-api-key`, `x-goog-api-key`, `api-key` or `?key=`), else they get the protocol's
    /// auth error fixture.
    pub fn set_valid_keys(&self, keys: Vec<String>) {
        *self.shared.keys.lock().expect("keys lock") = Arc::new(keys);
    }

    /// Close the listener: new connections are refused; open ones may finish.
    pub async fn stop_listening(&self) {
        let handle = self.accept.lock().expect("accept lock").take();
        if let Some(h) = handle {
            h.abort();
            let _ = h.await;
        }
    }

    /// Bind the same address again after [`stop_listening`](Self::stop_listening).
    pub async fn resume_listening(&self) -> std::io::Result<()> {
        self.stop_listening().await;
        let listener = TcpListener::bind(self.addr).await?;
        let h = tokio::spawn(accept_loop(listener, self.shared.clone()));
        *self.accept.lock().expect("accept lock") = Some(h);
        Ok(())
    }

    /// Stop listening and close every open connection.
    pub fn shutdown(self) {
        drop(self)
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(h) = self.accept.lock().map(|mut a| a.take()).ok().flatten() {
            h.abort();
        }
        let _ = self.shared.shutdown.send(true);
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::debug!(error = %e, "mock accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let conn_shared = shared.clone();
        let mut shutdown = shared.shutdown.subscribe();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let shared = conn_shared.clone();
                async move {
                    let abandoned = shared.abandoned.clone();
                    let resp = handler::handle(shared, req).await?;
                    Ok::<_, std::io::Error>(resp.map(|b| crate::tracked::tracked(b, abandoned)))
                }
            });
            let conn = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                res = conn => {
                    if let Err(e) = res {
                        tracing::trace!(error = %e, "mock connection ended");
                    }
                }
                _ = shutdown.wait_for(|stop| *stop) => {}
            }
        });
    }
}
