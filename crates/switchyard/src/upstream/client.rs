//! Upstream connections: per-thread pools of HTTP/1.1 and HTTP/2 connections
//! (rustls, TCP_NODELAY). HTTP/1.1 is our own inline client ([`h1`]),
//! HTTP/2 (negotiated by ALPN) hyper's connection API.
//!
//! Per thread, because the gateway runs one single-threaded runtime per core
//! (like nginx's workers): a request, its upstream connection and its client
//! connection stay on one thread with no cross-thread wake-ups.
//!
//! Not hyper-util's pooled client: per request it hashed the pool key,
//! cloned the connector into a lazy connect future, boxed the request future
//! and spawned a task to wait until the connection was free again (callgrind:
//! ~9k of the ~95k instructions a proxied request cost). Here an HTTP/1
//! connection goes back to its thread's idle list when the response body
//! ends ([`UpstreamBody`]) and a checkout pops the most recent one; an HTTP/2
//! connection is shared by the requests to its host, up to
//! `H2_STREAMS_PER_CONN` at once (then another is opened). Each worker sweeps
//! its idle connections every `SWEEP_EVERY` ([`sweep_idle`]): those the
//! upstream closed or that idled too long are let go. While an HTTPS
//! origin's first connection (or an HTTP/2 origin's next one) is being
//! opened, other requests to it wait for that one instead of each opening
//! their own: whether it will be shared is only known once TLS has
//! negotiated its protocol.

use std::cell::RefCell;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::uri::{Authority, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http2;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connection, HttpConnector};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tower_service::Service;

use super::h1;

type Connector = HttpsConnector<HttpConnector>;
type H2Sender = http2::SendRequest<Full<Bytes>>;

/// An idle connection older than this is closed instead of reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle connections kept per host and thread.
const MAX_IDLE_PER_HOST: usize = 1024;
/// How often each worker thread looks over its idle connections.
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);

thread_local! {
    static POOLS: RefCell<Vec<Pool>> = const { RefCell::new(Vec::new()) };
}

/// Why an upstream request got no response head.
#[derive(Debug)]
pub enum SendError {
    /// TLS could not be set up (`check` rules this out when a config loads).
    Setup(String),
    /// The URL has no scheme or host.
    Url,
    /// No connection: DNS, refused, connect timeout, TLS handshake.
    Connect(Box<dyn std::error::Error + Send + Sync>),
    /// The connection broke, or answered garbage, before a response head.
    Http(Box<dyn std::error::Error + Send + Sync>),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Setup(m) => write!(f, "TLS setup failed: {m}"),
            SendError::Url => f.write_str("upstream URL has no scheme or host"),
            SendError::Connect(e) => write!(f, "connect failed: {e}"),
            SendError::Http(e) => write!(f, "request failed: {e}"),
        }
    }
}

impl std::error::Error for SendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Connect(e) | SendError::Http(e) => e.source(),
            _ => None,
        }
    }
}

/// Send a request (absolute URL) on a pooled connection of this thread and
/// return the response head; the body streams in [`UpstreamBody`].
///
/// A request is not retried here: a connection the upstream closed just as
/// it was picked fails as a connection error, which the reliability layer
/// retries by its policy (sending a POST twice is its call, not ours).
pub async fn request(
    connect_timeout: Duration,
    req: Request<Bytes>,
) -> Result<Response<UpstreamBody>, SendError> {
    let key = Key::of(connect_timeout, req.uri())?;
    match checkout(&key).await? {
        Conn::H2(mut tx, slot) => {
            let resp = tx
                .send_request(req.map(Full::new))
                .await
                .map_err(|e| SendError::Http(Box::new(e)))?;
            Ok(resp.map(|body| UpstreamBody::h2(body, slot)))
        }
        Conn::H1(conn, host) => {
            let (head, reader) = conn
                .exchange(&req, &host)
                .await
                .map_err(|e| SendError::Http(Box::new(e)))?;
            Ok(head.map(|()| UpstreamBody::h1(reader, key)))
        }
    }
}

/// Fail at config load, not at the first request, if TLS cannot be set up.
pub fn check() -> Result<(), String> {
    connector(Duration::from_secs(1))
        .map(|_| ())
        .map_err(|e| format!("TLS setup failed: {e}"))
}

/// An upstream response body. An HTTP/1 connection goes back to the
/// thread's pool once its body has been read to the end. A body dropped
/// before its end (an SSE stream stops reading at `[DONE]`, before the
/// chunked terminator) is read out first, briefly and within a few KiB, so
/// its connection can still be reused; past that the connection closes.
pub struct UpstreamBody {
    inner: Inner,
    /// An HTTP/2 stream's place on its connection, held until the body is
    /// gone.
    _slot: Option<StreamSlot>,
}

enum Inner {
    /// `None` once the body ended (its connection pooled) or failed.
    H1(Option<(h1::Reader, Key)>),
    H2(Incoming),
}

/// Streams one HTTP/2 connection carries at once; the next request opens
/// another connection. Providers cap the concurrent streams of a
/// connection (`SETTINGS_MAX_CONCURRENT_STREAMS`, commonly 100–256), and
/// hyper queues a request past the cap unseen and without a timeout until
/// an open stream ends: with long SSE streams, new requests would stall
/// behind them. hyper does not expose the peer's own value; 100 stays
/// under the usual caps.
const H2_STREAMS_PER_CONN: u32 = 100;

/// One request's place on an HTTP/2 connection, given back when dropped.
struct StreamSlot(Arc<AtomicU32>);

impl StreamSlot {
    /// Take a place if the connection has one.
    fn take(open: &Arc<AtomicU32>) -> Option<StreamSlot> {
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < H2_STREAMS_PER_CONN).then_some(n + 1)
        })
        .ok()
        .map(|_| StreamSlot(open.clone()))
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An origin's HTTP/2 connection and how many streams it carries now.
struct H2Conn {
    tx: H2Sender,
    open: Arc<AtomicU32>,
}

/// What a dropped body may still read to save its connection.
const DRAIN_BYTES: usize = 64 * 1024;
const DRAIN_WAIT: Duration = Duration::from_secs(1);

impl UpstreamBody {
    fn h1(reader: h1::Reader, key: Key) -> Self {
        let done = reader.is_done();
        let mut slot = Some((reader, key));
        // An empty body (204, content-length: 0) frees its connection now.
        if done {
            release(&mut slot);
        }
        UpstreamBody {
            inner: Inner::H1(slot),
            _slot: None,
        }
    }

    fn h2(inner: Incoming, slot: StreamSlot) -> Self {
        UpstreamBody {
            inner: Inner::H2(inner),
            _slot: Some(slot),
        }
    }
}

/// Pool an ended body's connection.
fn release(slot: &mut Option<(h1::Reader, Key)>) {
    if let Some((reader, key)) = slot.take() {
        if let Some(conn) = reader.into_reusable() {
            put_back(&key, conn);
        }
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        let Inner::H1(slot) = &mut self.inner else {
            return;
        };
        let Some((reader, key)) = slot.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut drain = Box::pin(tokio::time::timeout(DRAIN_WAIT, drain(reader, key)));
        // Usually the terminator has already arrived: done at once, no task.
        if futures_util::FutureExt::now_or_never(drain.as_mut()).is_none() {
            rt.spawn(drain);
        }
    }
}

/// Read the rest of a body, then pool its connection.
async fn drain(mut reader: h1::Reader, key: Key) {
    let mut budget = DRAIN_BYTES;
    loop {
        match std::future::poll_fn(|cx| reader.poll_data(cx)).await {
            Ok(Some(data)) if data.len() <= budget => budget -= data.len(),
            Ok(Some(_)) | Err(_) => return,
            Ok(None) => break,
        }
    }
    release(&mut Some((reader, key)));
}

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        match &mut self.inner {
            Inner::H1(slot) => {
                let Some((reader, _)) = slot.as_mut() else {
                    return Poll::Ready(None);
                };
                match std::task::ready!(reader.poll_data(cx)) {
                    Ok(Some(data)) => {
                        if reader.is_done() {
                            release(slot);
                        }
                        Poll::Ready(Some(Ok(Frame::data(data))))
                    }
                    Ok(None) => {
                        release(slot);
                        Poll::Ready(None)
                    }
                    Err(e) => {
                        *slot = None;
                        Poll::Ready(Some(Err(std::io::Error::other(e))))
                    }
                }
            }
            Inner::H2(body) => Pin::new(body).poll_frame(cx).map_err(std::io::Error::other),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::H1(slot) => slot.as_ref().is_none_or(|(r, _)| r.is_done()),
            Inner::H2(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::H1(slot) => match slot.as_ref().map_or(Some(0), |(r, _)| r.remaining()) {
                Some(n) => SizeHint::with_exact(n),
                None => SizeHint::default(),
            },
            Inner::H2(body) => body.size_hint(),
        }
    }
}

/// Which pool a connection belongs to.
#[derive(Clone)]
struct Key {
    connect_timeout: Duration,
    scheme: Scheme,
    authority: Authority,
}

impl Key {
    fn of(connect_timeout: Duration, uri: &Uri) -> Result<Key, SendError> {
        match (uri.scheme(), uri.authority()) {
            (Some(s), Some(a)) => Ok(Key {
                connect_timeout,
                scheme: s.clone(),
                authority: a.clone(),
            }),
            _ => Err(SendError::Url),
        }
    }
}

/// One connect timeout's connector and hosts, on one thread.
struct Pool {
    connect_timeout: Duration,
    connector: Connector,
    hosts: Vec<Host>,
}

/// One upstream origin's connections.
struct Host {
    scheme: Scheme,
    authority: Authority,
    /// The `Host` header HTTP/1 requests carry.
    host: HeaderValue,
    /// Free HTTP/1 connections, the most recently used last.
    idle: std::collections::VecDeque<Idle>,
    /// The origin's HTTP/2 connections, each shared by up to
    /// [`H2_STREAMS_PER_CONN`] requests at once.
    h2: Vec<H2Conn>,
    /// What the origin's last new connection negotiated (`None`: none yet).
    speaks_h2: Option<bool>,
    /// Set while a connection that may turn out shareable is being opened;
    /// notified when it is open or has failed.
    opening: Option<Arc<tokio::sync::Notify>>,
}

struct Idle {
    conn: h1::Conn,
    since: Instant,
}

impl Idle {
    fn usable(&mut self, now: Instant) -> bool {
        now.duration_since(self.since) < IDLE_TIMEOUT && self.conn.is_open()
    }
}

enum Conn {
    H1(h1::Conn, HeaderValue),
    H2(H2Sender, StreamSlot),
}

enum Taken {
    Conn(Conn),
    /// Nothing idle: open a connection with this connector (holding the
    /// origin's opening gate, if it took it).
    None(Connector, HeaderValue, Option<Opening>),
    /// Another request is opening a connection that may be shared.
    Wait(Arc<tokio::sync::Notify>),
}

/// A ready connection to the key's origin.
async fn checkout(key: &Key) -> Result<Conn, SendError> {
    let mut may_wait = true;
    loop {
        match take_idle(key, may_wait)? {
            Taken::Conn(Conn::H2(mut tx, slot)) => {
                if tx.ready().await.is_ok() {
                    return Ok(Conn::H2(tx, slot));
                }
                forget_closed_h2(key);
            }
            Taken::Conn(conn) => return Ok(conn),
            Taken::None(connector, host, opening) => {
                // Boxed: the handshakes' futures are large, and a request's
                // future is moved whole; only new connections pay for it.
                let conn = Box::pin(connect(connector, key, host)).await;
                drop(opening);
                return conn;
            }
            Taken::Wait(opened) => {
                // Once only: should that connection fail or be HTTP/1.1,
                // this request opens its own rather than queue again.
                may_wait = false;
                let _ = tokio::time::timeout(key.connect_timeout, opened.notified()).await;
            }
        }
    }
}

/// The right to open an origin's possibly shared connection; dropping it
/// lets the requests waiting for that connection look again.
struct Opening {
    key: Key,
    notify: Arc<tokio::sync::Notify>,
}

impl Drop for Opening {
    fn drop(&mut self) {
        let _ = POOLS.try_with(|cell| {
            if let Ok(mut pools) = cell.try_borrow_mut() {
                if let Ok(host) = host_mut(&mut pools, &self.key) {
                    if host
                        .opening
                        .as_ref()
                        .is_some_and(|n| Arc::ptr_eq(n, &self.notify))
                    {
                        host.opening = None;
                    }
                }
            }
        });
        self.notify.notify_waiters();
    }
}

fn take_idle(key: &Key, may_wait: bool) -> Result<Taken, SendError> {
    POOLS.with_borrow_mut(|pools| {
        let host = host_mut(pools, key)?;
        host.h2.retain(|c| !c.tx.is_closed());
        for c in &host.h2 {
            if let Some(slot) = StreamSlot::take(&c.open) {
                return Ok(Taken::Conn(Conn::H2(c.tx.clone(), slot)));
            }
        }
        let now = Instant::now();
        while let Some(mut idle) = host.idle.pop_back() {
            if idle.usable(now) {
                return Ok(Taken::Conn(Conn::H1(idle.conn, host.host.clone())));
            }
        }
        // Only TLS can negotiate HTTP/2; an origin known to answer
        // HTTP/1.1 gets a connection per concurrent request at once.
        let gated = key.scheme == Scheme::HTTPS && host.speaks_h2 != Some(false);
        // A gate only this map still holds lost its opener without being
        // cleared: no one will open through it.
        if host
            .opening
            .as_ref()
            .is_some_and(|n| Arc::strong_count(n) == 1)
        {
            host.opening = None;
        }
        if let (true, true, Some(opened)) = (gated, may_wait, &host.opening) {
            return Ok(Taken::Wait(opened.clone()));
        }
        let take_gate = gated && host.opening.is_none();
        let header = host.host.clone();
        let connector = pool_mut(pools, key.connect_timeout)?.connector.clone();
        let opening = take_gate.then(|| {
            let notify = Arc::new(tokio::sync::Notify::new());
            if let Ok(h) = host_mut(pools, key) {
                h.opening = Some(notify.clone());
            }
            Opening {
                key: key.clone(),
                notify,
            }
        });
        Ok(Taken::None(connector, header, opening))
    })
}

/// Open a connection, HTTP/2 when TLS negotiated it, else HTTP/1.1.
async fn connect(
    mut connector: Connector,
    key: &Key,
    host: HeaderValue,
) -> Result<Conn, SendError> {
    let uri = Uri::builder()
        .scheme(key.scheme.clone())
        .authority(key.authority.clone())
        .path_and_query("/")
        .build()
        .map_err(|_| SendError::Url)?;
    std::future::poll_fn(|cx| connector.poll_ready(cx))
        .await
        .map_err(SendError::Connect)?;
    let io = connector.call(uri).await.map_err(SendError::Connect)?;
    let h2 = io.connected().is_negotiated_h2();
    POOLS.with_borrow_mut(|pools| {
        if let Ok(h) = host_mut(pools, key) {
            h.speaks_h2 = Some(h2);
        }
    });
    if !h2 {
        return Ok(Conn::H1(h1::Conn::new(TokioIo::new(io)), host));
    }
    let (tx, conn) = http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .handshake(io)
        .await
        .map_err(|e| SendError::Http(Box::new(e)))?;
    // The connection's own errors end it; requests on it see them.
    tokio::spawn(async move { drop(conn.await) });
    let open = Arc::new(AtomicU32::new(0));
    let slot = StreamSlot::take(&open).expect("a new connection has room");
    let shared = H2Conn {
        tx: tx.clone(),
        open,
    };
    POOLS.with_borrow_mut(|pools| {
        if let Ok(h) = host_mut(pools, key) {
            h.h2.push(shared);
        }
    });
    Ok(Conn::H2(tx, slot))
}

fn put_back(key: &Key, conn: h1::Conn) {
    // A body finishing while the thread's pools are in use or gone (thread
    // exit) just closes its connection.
    let _ = POOLS.try_with(|cell| {
        let Ok(mut pools) = cell.try_borrow_mut() else {
            return;
        };
        let Ok(host) = host_mut(&mut pools, key) else {
            return;
        };
        let now = Instant::now();
        // Drop a dead or stale connection from the cold end now and then.
        if host.idle.front_mut().is_some_and(|i| !i.usable(now)) {
            host.idle.pop_front();
        }
        if host.idle.len() < MAX_IDLE_PER_HOST {
            host.idle.push_back(Idle { conn, since: now });
        }
    });
}

/// Close this thread's idle connections that the upstream has closed or
/// that have idled past `IDLE_TIMEOUT`. Without it, after a burst they would
/// hold the upstream's connection slots (or sit in CLOSE_WAIT) until traffic
/// came back to find them.
pub fn sweep_idle() {
    let _ = POOLS.try_with(|cell| {
        if let Ok(mut pools) = cell.try_borrow_mut() {
            let now = Instant::now();
            for host in pools.iter_mut().flat_map(|p| p.hosts.iter_mut()) {
                host.idle.retain_mut(|i| i.usable(now));
            }
        }
    });
}

fn forget_closed_h2(key: &Key) {
    POOLS.with_borrow_mut(|pools| {
        if let Ok(h) = host_mut(pools, key) {
            h.h2.retain(|c| !c.tx.is_closed());
        }
    });
}

fn pool_mut(pools: &mut Vec<Pool>, connect_timeout: Duration) -> Result<&mut Pool, SendError> {
    if let Some(i) = pools
        .iter()
        .position(|p| p.connect_timeout == connect_timeout)
    {
        return Ok(&mut pools[i]);
    }
    let connector = connector(connect_timeout).map_err(|e| SendError::Setup(e.to_string()))?;
    pools.push(Pool {
        connect_timeout,
        connector,
        hosts: Vec::new(),
    });
    Ok(pools.last_mut().expect("just pushed"))
}

fn host_mut<'a>(pools: &'a mut Vec<Pool>, key: &Key) -> Result<&'a mut Host, SendError> {
    let pool = pool_mut(pools, key.connect_timeout)?;
    if let Some(i) = pool
        .hosts
        .iter()
        .position(|h| h.authority == key.authority && h.scheme == key.scheme)
    {
        return Ok(&mut pool.hosts[i]);
    }
    pool.hosts.push(Host {
        scheme: key.scheme.clone(),
        authority: key.authority.clone(),
        host: host_header(&key.scheme, &key.authority)?,
        idle: std::collections::VecDeque::new(),
        h2: Vec::new(),
        speaks_h2: None,
        opening: None,
    });
    Ok(pool.hosts.last_mut().expect("just pushed"))
}

/// `host[:port]`, the port left out when it is the scheme's default.
fn host_header(scheme: &Scheme, authority: &Authority) -> Result<HeaderValue, SendError> {
    let default = match scheme.as_str() {
        "https" => 443,
        _ => 80,
    };
    let value = match authority.port_u16() {
        Some(p) if p != default => authority.as_str(),
        _ => authority.host(),
    };
    HeaderValue::from_str(value).map_err(|_| SendError::Url)
}

fn connector(connect_timeout: Duration) -> Result<Connector, rustls::Error> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    // Nagle + delayed ACK would add ~40 ms to small requests.
    http.set_nodelay(true);
    http.set_connect_timeout(Some(connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(60)));
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    // Loopback TLS tests trust their own CA instead of the webpki roots.
    #[cfg(test)]
    if let Some(config) = tests::TEST_TLS.with_borrow(Clone::clone) {
        return Ok(schemes(builder.with_tls_config(config), http));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots())
        .with_no_client_auth();
    Ok(schemes(builder.with_tls_config(config), http))
}

/// Whom an upstream's certificate may come from: the public roots (webpki)
/// and the system's store, where a private CA lives (a self-hosted vLLM, a
/// private endpoint; `SSL_CERT_FILE` / `SSL_CERT_DIR` name one, as for
/// curl). Read once per process: every worker's pools share it.
fn roots() -> Arc<rustls::RootCertStore> {
    static ROOTS: std::sync::OnceLock<Arc<rustls::RootCertStore>> = std::sync::OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            let native = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(native.certs);
            if !native.errors.is_empty() {
                tracing::warn!(
                    added,
                    errors = native.errors.len(),
                    "some of the system's CA certificates could not be read: upstreams signed by them will fail TLS"
                );
            }
            Arc::new(roots)
        })
        .clone()
}

/// http and https URLs; HTTP/2 when the server offers it by ALPN.
fn schemes(
    builder: hyper_rustls::HttpsConnectorBuilder<hyper_rustls::builderstates::WantsSchemes>,
    http: HttpConnector,
) -> Connector {
    builder
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use http_body_util::BodyExt;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    thread_local! {
        /// The client TLS config the pools of this test thread use.
        pub(super) static TEST_TLS: RefCell<Option<rustls::ClientConfig>> =
            const { RefCell::new(None) };
    }

    #[derive(Clone, Copy)]
    enum Mode {
        KeepAlive,
        /// Answers with `connection: close`.
        CloseHeader,
        /// Answers keep-alive, then closes the socket (an idle timeout).
        DropAfter,
        /// A chunked answer whose terminator comes 30 ms after its data (or
        /// with it), like an event stream's end after `[DONE]`.
        Chunked {
            late_end: bool,
        },
        /// A keep-alive answer larger than a dropped body may read out.
        Big,
        /// `204 No Content`: no body at all.
        NoContent,
    }

    struct Origin {
        url: String,
        accepted: Arc<AtomicUsize>,
        heads: Arc<Mutex<Vec<String>>>,
    }

    /// A loopback HTTP/1.1 server that counts connections and keeps each
    /// request head.
    async fn origin(mode: Mode) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/v1/chat/completions?x=1",
            listener.local_addr().unwrap()
        );
        let accepted = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (a, h) = (accepted.clone(), heads.clone());
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(sock, mode, h.clone()));
            }
        });
        Origin {
            url,
            accepted,
            heads,
        }
    }

    async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
        mut sock: S,
        mode: Mode,
        heads: Arc<Mutex<Vec<String>>>,
    ) {
        let mut buf = Vec::new();
        loop {
            let Some(end) = read_head(&mut sock, &mut buf).await else {
                return;
            };
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            while buf.len() < end + len {
                let mut chunk = [0u8; 1024];
                match sock.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            buf.drain(..end + len);
            heads.lock().unwrap().push(head);
            if let Mode::Chunked { late_end } = mode {
                let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n";
                let end = "0\r\n\r\n";
                let sent = if late_end {
                    let first = sock.write_all(head.as_bytes()).await;
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    first.and(sock.write_all(end.as_bytes()).await)
                } else {
                    sock.write_all(format!("{head}{end}").as_bytes()).await
                };
                if sent.is_err() {
                    return;
                }
                continue;
            }
            if let Mode::NoContent = mode {
                if sock
                    .write_all(b"HTTP/1.1 204 No Content\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                continue;
            }
            if let Mode::Big = mode {
                let body = "x".repeat(DRAIN_BYTES * 2);
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                if sock.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                continue;
            }
            let close = matches!(mode, Mode::CloseHeader);
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n{}\r\nok",
                if close { "connection: close\r\n" } else { "" }
            );
            if sock.write_all(answer.as_bytes()).await.is_err() || !matches!(mode, Mode::KeepAlive)
            {
                return;
            }
        }
    }

    /// Read until a blank line; the head's length with it.
    async fn read_head<S: AsyncRead + Unpin>(sock: &mut S, buf: &mut Vec<u8>) -> Option<usize> {
        loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                return Some(i + 4);
            }
            let mut chunk = [0u8; 1024];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    }

    fn post(url: &str) -> Request<Bytes> {
        Request::post(url)
            .header("content-type", "application/json")
            .body(Bytes::from_static(b"{}"))
            .unwrap()
    }

    async fn call(url: &str) -> Result<Response<UpstreamBody>, SendError> {
        request(Duration::from_secs(2), post(url)).await
    }

    async fn read(resp: Response<UpstreamBody>) -> Bytes {
        resp.into_body().collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn sequential_requests_reuse_one_connection_in_origin_form() {
        let o = origin(Mode::KeepAlive).await;
        for _ in 0..3 {
            let resp = call(&o.url).await.unwrap();
            assert_eq!(read(resp).await, "ok");
        }
        assert_eq!(o.accepted.load(Ordering::SeqCst), 1);
        let heads = o.heads.lock().unwrap();
        assert_eq!(heads.len(), 3);
        let port = o.url.split(':').nth(2).unwrap().split('/').next().unwrap();
        assert!(
            heads[0].starts_with("POST /v1/chat/completions?x=1 HTTP/1.1\r\n"),
            "{}",
            heads[0]
        );
        assert!(
            heads[0].contains(&format!("host: 127.0.0.1:{port}\r\n")),
            "{}",
            heads[0]
        );
    }

    #[tokio::test]
    async fn a_body_being_read_keeps_its_connection_until_it_ends() {
        let o = origin(Mode::KeepAlive).await;
        let first = call(&o.url).await.unwrap();
        let second = call(&o.url).await.unwrap();
        assert_eq!(o.accepted.load(Ordering::SeqCst), 2);
        assert_eq!(read(first).await, "ok");
        assert_eq!(read(second).await, "ok");
        for _ in 0..3 {
            let resp = call(&o.url).await.unwrap();
            assert_eq!(read(resp).await, "ok");
        }
        assert_eq!(o.accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_body_dropped_unread_is_read_out_and_its_connection_reused() {
        let o = origin(Mode::KeepAlive).await;
        drop(call(&o.url).await.unwrap());
        let resp = call(&o.url).await.unwrap();
        assert_eq!(read(resp).await, "ok");
        assert_eq!(o.accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_answer_without_a_body_frees_its_connection_at_once() {
        let o = origin(Mode::NoContent).await;
        for _ in 0..3 {
            let resp = call(&o.url).await.unwrap();
            assert_eq!(resp.status(), 204);
            assert!(resp.body().is_end_stream());
            // The connection is back in the pool before the body is read.
            let second = call(&o.url).await.unwrap();
            assert_eq!(read(second).await, "");
            assert_eq!(read(resp).await, "");
        }
        assert_eq!(o.accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_large_body_dropped_unread_closes_its_connection() {
        let o = origin(Mode::Big).await;
        drop(call(&o.url).await.unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
        let resp = call(&o.url).await.unwrap();
        assert_eq!(read(resp).await.len(), DRAIN_BYTES * 2);
        assert_eq!(o.accepted.load(Ordering::SeqCst), 2);
    }

    /// An event stream stops reading at `[DONE]`, before the chunked
    /// terminator: the dropped body is read out and its connection reused.
    #[tokio::test]
    async fn a_body_dropped_before_its_terminator_keeps_its_connection() {
        for late_end in [false, true] {
            let o = origin(Mode::Chunked { late_end }).await;
            for _ in 0..3 {
                let mut body = call(&o.url).await.unwrap().into_body();
                let first = body.frame().await.unwrap().unwrap();
                assert_eq!(first.into_data().unwrap(), "ok");
                drop(body);
                // A late terminator is waited for off the request's path.
                tokio::time::sleep(Duration::from_millis(60)).await;
            }
            assert_eq!(o.accepted.load(Ordering::SeqCst), 1, "late_end {late_end}");
        }
    }

    #[tokio::test]
    async fn connections_the_server_closes_are_replaced() {
        for mode in [Mode::CloseHeader, Mode::DropAfter] {
            let o = origin(mode).await;
            for _ in 0..3 {
                let resp = call(&o.url).await.unwrap();
                assert_eq!(read(resp).await, "ok");
                // Let the connection's task see the close, as an idle
                // timeout would long before the next request.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert_eq!(o.accepted.load(Ordering::SeqCst), 3);
        }
    }

    /// Idle connections to `url`'s origin in this thread's pool.
    fn idle_for(url: &str) -> usize {
        // The connect timeout `call` uses: one pool per timeout.
        let key = Key::of(Duration::from_secs(2), &url.parse().unwrap()).unwrap();
        POOLS.with_borrow_mut(|pools| host_mut(pools, &key).map_or(0, |h| h.idle.len()))
    }

    #[tokio::test]
    async fn idle_connections_the_upstream_closed_are_swept() {
        let (closing, open) = (origin(Mode::DropAfter).await, origin(Mode::KeepAlive).await);
        for o in [&closing, &open] {
            let resp = call(&o.url).await.unwrap();
            assert_eq!(read(resp).await, "ok");
            assert_eq!(idle_for(&o.url), 1);
        }
        // Let the reactor see the one origin's close.
        tokio::time::sleep(Duration::from_millis(50)).await;
        sweep_idle();
        assert_eq!(idle_for(&closing.url), 0, "closed by the upstream: gone");
        assert_eq!(idle_for(&open.url), 1, "still open: kept");
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        drop(listener);
        let err = call(&url).await.err().expect("nothing listens");
        assert!(matches!(err, SendError::Connect(_)), "{err}");
    }

    #[test]
    fn host_header_leaves_out_the_default_port() {
        let h = |s: &str, a: &str| {
            host_header(&s.parse().unwrap(), &a.parse().unwrap())
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        };
        assert_eq!(h("https", "api.openai.com"), "api.openai.com");
        assert_eq!(h("https", "api.openai.com:443"), "api.openai.com");
        assert_eq!(h("http", "localhost:80"), "localhost");
        assert_eq!(h("http", "127.0.0.1:8000"), "127.0.0.1:8000");
    }

    const TLS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls");

    fn ring() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// Trust the test CA on this thread (its pools are this test's own).
    fn trust_test_ca() {
        use rustls::pki_types::{pem::PemObject, CertificateDer};
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_file(format!("{TLS_DIR}/ca.pem")).unwrap())
            .unwrap();
        let config = rustls::ClientConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        TEST_TLS.set(Some(config));
    }

    /// A loopback TLS origin for `localhost` offering `alpn`, each
    /// connection handed to `serve`; its URL and a count of accepted
    /// connections.
    async fn tls_origin<F, Fut>(alpn: &[u8], serve: F) -> (String, Arc<AtomicUsize>)
    where
        F: Fn(tokio_rustls::server::TlsStream<tokio::net::TcpStream>) -> Fut
            + Send
            + Sync
            + 'static,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
        let chain = vec![CertificateDer::from_pem_file(format!("{TLS_DIR}/server.pem")).unwrap()];
        let key = PrivateKeyDer::from_pem_file(format!("{TLS_DIR}/server.key")).unwrap();
        let mut config = rustls::ServerConfig::builder_with_provider(ring())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        config.alpn_protocols = vec![alpn.to_vec()];
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "https://localhost:{}/v1/chat/completions",
            listener.local_addr().unwrap().port()
        );
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let accepted = Arc::new(AtomicUsize::new(0));
        let (a, serve) = (accepted.clone(), Arc::new(serve));
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                let (acceptor, serve) = (acceptor.clone(), serve.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(sock).await {
                        serve(tls).await;
                    }
                });
            }
        });
        (url, accepted)
    }

    #[tokio::test]
    async fn https_http1_goes_through_the_inline_client_and_reuses_its_connection() {
        trust_test_ca();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let h = heads.clone();
        let (url, accepted) = tls_origin(b"http/1.1", move |tls| {
            serve(tls, Mode::KeepAlive, h.clone())
        })
        .await;
        for _ in 0..3 {
            let resp = call(&url).await.unwrap();
            assert_eq!(resp.version(), http::Version::HTTP_11);
            assert_eq!(read(resp).await, "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        let heads = heads.lock().unwrap();
        assert!(
            heads[0].starts_with("POST /v1/chat/completions HTTP/1.1\r\n"),
            "{}",
            heads[0]
        );
        assert!(heads[0].contains("\r\nhost: localhost:"), "{}", heads[0]);
    }

    /// An HTTPS origin speaking HTTP/2 that answers `ok PATH`.
    async fn h2_origin() -> (String, Arc<AtomicUsize>) {
        tls_origin(b"h2", |tls| async move {
            let answer = hyper::service::service_fn(|req: Request<Incoming>| async move {
                let path = req.uri().path().to_owned();
                Ok::<_, std::convert::Infallible>(Response::new(Full::new(Bytes::from(format!(
                    "ok {path}"
                )))))
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), answer)
                .await;
        })
        .await
    }

    #[tokio::test]
    async fn https_http2_is_negotiated_and_one_connection_is_shared() {
        trust_test_ca();
        let (url, accepted) = h2_origin().await;
        let first = call(&url).await.unwrap();
        assert_eq!(first.version(), http::Version::HTTP_2);
        assert_eq!(read(first).await, "ok /v1/chat/completions");
        // Once open, the connection carries concurrent requests.
        let (second, third) = tokio::join!(call(&url), call(&url));
        for resp in [second.unwrap(), third.unwrap()] {
            assert_eq!(resp.version(), http::Version::HTTP_2);
            assert_eq!(read(resp).await, "ok /v1/chat/completions");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn concurrent_first_requests_to_an_http2_origin_wait_for_one_connection() {
        trust_test_ca();
        let (url, accepted) = h2_origin().await;
        let (a, b, c) = tokio::join!(call(&url), call(&url), call(&url));
        for resp in [a.unwrap(), b.unwrap(), c.unwrap()] {
            assert_eq!(resp.version(), http::Version::HTTP_2);
            assert_eq!(read(resp).await, "ok /v1/chat/completions");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "one handshake, shared");
    }

    /// An HTTPS origin speaking HTTP/2 with a provider's stream cap
    /// (`SETTINGS_MAX_CONCURRENT_STREAMS`), whose answers start and then
    /// stay open, like long SSE streams.
    async fn capped_h2_origin(cap: u32) -> (String, Arc<AtomicUsize>) {
        tls_origin(b"h2", move |tls| async move {
            let answer = hyper::service::service_fn(|_req: Request<Incoming>| async move {
                let first = futures_util::stream::once(async {
                    Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(
                        b"data: 1\n\n",
                    )))
                });
                let body = http_body_util::StreamBody::new(futures_util::StreamExt::chain(
                    first,
                    futures_util::stream::pending(),
                ));
                Ok::<_, std::convert::Infallible>(Response::new(body))
            });
            let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .max_concurrent_streams(cap)
                .serve_connection(TokioIo::new(tls), answer)
                .await;
        })
        .await
    }

    #[tokio::test]
    async fn streams_past_an_http2_connections_cap_open_another_connection_instead_of_queueing() {
        trust_test_ca();
        let (url, accepted) = capped_h2_origin(H2_STREAMS_PER_CONN).await;
        let mut open = Vec::new();
        for _ in 0..H2_STREAMS_PER_CONN {
            open.push(call(&url).await.unwrap());
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        // The first connection is full of open streams: the next request
        // gets a second connection rather than waiting for one to end.
        let next = tokio::time::timeout(Duration::from_secs(5), call(&url))
            .await
            .expect("a request past the cap waited behind the open streams")
            .unwrap();
        assert_eq!(next.version(), http::Version::HTTP_2);
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        // A stream that ends gives its place back: the next one takes it.
        drop(open.pop());
        let again = tokio::time::timeout(Duration::from_secs(5), call(&url))
            .await
            .expect("a freed place is used again")
            .unwrap();
        assert_eq!(again.version(), http::Version::HTTP_2);
        assert_eq!(accepted.load(Ordering::SeqCst), 2, "no third connection");
        let mut body = again.into_body();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "data: 1\n\n");
    }

    #[tokio::test]
    async fn concurrent_first_requests_to_an_https_http1_origin_each_get_a_connection() {
        trust_test_ca();
        let (url, accepted) = tls_origin(b"http/1.1", |tls| {
            serve(tls, Mode::KeepAlive, Arc::default())
        })
        .await;
        // The first waits for no one; the others wait for its handshake,
        // learn it is HTTP/1.1 and open their own.
        let (a, b, c) = tokio::join!(call(&url), call(&url), call(&url));
        for resp in [a.unwrap(), b.unwrap(), c.unwrap()] {
            assert_eq!(resp.version(), http::Version::HTTP_11);
            assert_eq!(read(resp).await, "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
    }
}
