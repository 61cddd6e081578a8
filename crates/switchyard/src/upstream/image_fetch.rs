//! Fetching an image a client named by URL, for a provider that takes only
//! inline images (contract §9). The gateway must not become a way into the
//! networks it can reach, so a fetch:
//!
//! - takes `https` URLs only, without user info;
//! - resolves the host once and refuses it if *any* of its addresses is not
//!   public ([`is_public`]: loopback, RFC 1918, link-local with the cloud
//!   metadata address 169.254.169.254, CGNAT, unique-local, multicast,
//!   documentation and reserved ranges, and the IPv6 forms that carry such
//!   an IPv4 address);
//! - connects to those vetted addresses and no others (no second lookup a
//!   rebinding DNS server could answer differently), with TLS verified
//!   against the URL's host name;
//! - follows at most [`Limits::max_redirects`] redirects, each hop vetted
//!   the same way (a redirect to `http:` or to a private address is
//!   refused);
//! - is bounded in time (one bound over the whole fetch, redirects
//!   included) and in bytes (a [`Budget`] shared by a request's images: a
//!   declared length over it is refused before the body is read, and
//!   reading stops as soon as the body passes it);
//! - keeps only an image: the type its bytes' signature shows, else an
//!   `image/*` content type.
//!
//! The resolver, the trusted roots and addresses trusted despite not being
//! public are the builder's ([`ImageFetcher::builder`]); the gateway's own
//! fetcher ([`ImageFetcher::public`]) uses the system's resolver, the public
//! roots plus the system's store, and trusts no private address.

use std::fmt;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST, LOCATION, USER_AGENT};
use http::{Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::time::Instant;

/// What a fetch may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The whole fetch, connection, TLS, redirects and body included.
    pub timeout: Duration,
    /// Redirects followed at most.
    pub max_redirects: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(10),
            max_redirects: 3,
        }
    }
}

/// An image fetched: its MIME type and bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub mime: String,
    pub bytes: Bytes,
}

/// Why an image was not fetched; worded for the client whose URL it was.
/// A host's resolved addresses are never named (they would tell a client
/// what an internal name resolves to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchError {
    /// Not an absolute URL the fetcher can read.
    BadUrl,
    /// A scheme other than `https` (named).
    NotHttps(String),
    /// User info (`user:pass@`) in the URL.
    UserInfo,
    /// The host is, or resolves to, an address that is not public.
    NotPublic,
    /// The host could not be resolved.
    Resolve(String),
    /// No connection to any of its addresses.
    Connect(String),
    /// The TLS handshake failed (an untrusted or mismatched certificate).
    Tls(String),
    /// The HTTP exchange broke.
    Http(String),
    /// A status other than success or a followed redirect.
    Status(u16),
    /// More redirects than allowed.
    TooManyRedirects(usize),
    /// The body (or its declared length) passed the byte bound.
    TooLarge(usize),
    /// The answer is not an image (its content type, if it named one).
    NotAnImage(Option<String>),
    /// Not done within the time bound.
    TimedOut,
    /// The fetcher could not be set up (the gateway's fault, not the URL's).
    Setup(String),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::BadUrl => f.write_str("it is not an absolute https URL"),
            FetchError::NotHttps(s) => {
                write!(f, "only https image URLs are fetched, not {s}:")
            }
            FetchError::UserInfo => f.write_str("URLs with user info are not fetched"),
            FetchError::NotPublic => f.write_str(
                "its host is (or resolves to) a private, loopback, link-local or otherwise \
                 non-public address, which the gateway does not fetch from",
            ),
            FetchError::Resolve(e) => write!(f, "its host could not be resolved: {e}"),
            FetchError::Connect(e) => write!(f, "no connection to its host: {e}"),
            FetchError::Tls(e) => write!(f, "TLS with its host failed: {e}"),
            FetchError::Http(e) => write!(f, "the exchange with its host failed: {e}"),
            FetchError::Status(s) => write!(f, "its host answered HTTP {s}"),
            FetchError::TooManyRedirects(n) => write!(f, "more than {n} redirects"),
            FetchError::TooLarge(n) => {
                write!(f, "it is larger than the {n} bytes the gateway fetches")
            }
            FetchError::NotAnImage(Some(ct)) => write!(f, "it is not an image ({ct})"),
            FetchError::NotAnImage(None) => f.write_str("it is not an image"),
            FetchError::TimedOut => f.write_str("it was not fetched in time"),
            FetchError::Setup(e) => write!(f, "the image fetcher could not be set up: {e}"),
        }
    }
}

impl std::error::Error for FetchError {}

// === Addresses ===

/// Whether `ip` is an address on the public internet. Everything the IANA
/// special-purpose registries set aside is not: for IPv4 "this network"
/// (0/8), RFC 1918 (10/8, 172.16/12, 192.168/16), CGNAT (100.64/10),
/// loopback (127/8), link-local (169.254/16, the cloud metadata service's
/// 169.254.169.254), the IETF and documentation blocks, benchmarking
/// (198.18/15), multicast, reserved and broadcast (224/3); for IPv6
/// anything outside global unicast 2000::/3 (unspecified, loopback,
/// unique-local fc00::/7, link-local fe80::/10, multicast ff00::/8, the
/// discard prefix…) and inside it the IETF block 2001::/23 (Teredo with
/// it), documentation (2001:db8::/32, 3fff::/20) and 6to4 (2002::/16). An
/// IPv4-mapped (`::ffff:a.b.c.d`) or NAT64 (`64:ff9b::a.b.c.d`) address is
/// judged by the IPv4 address it carries.
pub fn is_public(ip: IpAddr) -> bool {
    match ip.to_canonical() {
        IpAddr::V4(v4) => public_v4(v4),
        IpAddr::V6(v6) => public_v6(v6),
    }
}

fn public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let special = a == 0
        || a == 10
        || (a == 100 && (64..128).contains(&b))
        || a == 127
        || (a == 169 && b == 254)
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 192 && b == 88 && c == 99)
        || (a == 192 && b == 168)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 224;
    !special
}

fn public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., a, b, c, d] = ip.octets();
        return public_v4(Ipv4Addr::new(a, b, c, d));
    }
    if s[0] & 0xe000 != 0x2000 {
        return false;
    }
    // 2001::/23 (IETF, Teredo with it) and 2001:db8::/32 (documentation).
    let special = (s[0] == 0x2001 && (s[1] < 0x0200 || s[1] == 0x0db8))
        || s[0] == 0x2002
        || (s[0] == 0x3fff && s[1] < 0x1000);
    !special
}

/// A block of addresses (`addr/prefix`) trusted although not public.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    prefix: u8,
}

impl Net {
    /// `None` when `prefix` is longer than the address.
    pub fn new(addr: IpAddr, prefix: u8) -> Option<Net> {
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        (prefix <= bits).then_some(Net {
            addr: addr.to_canonical(),
            prefix,
        })
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let (ip, prefix) = (ip.to_canonical(), u32::from(self.prefix));
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

// === Resolution ===

/// A future a [`Resolve`] answers with.
pub type Resolving = Pin<Box<dyn Future<Output = std::io::Result<Vec<SocketAddr>>> + Send>>;

/// Host name → addresses (the system's resolver, or a test's).
pub trait Resolve: Send + Sync {
    fn resolve(&self, host: &str, port: u16) -> Resolving;
}

/// `getaddrinfo`, on tokio's blocking pool.
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str, port: u16) -> Resolving {
        let host = host.to_owned();
        Box::pin(async move {
            Ok(tokio::net::lookup_host((host.as_str(), port))
                .await?
                .collect())
        })
    }
}

// === Budget ===

/// Bytes a request's image fetches may still read, shared by its images.
#[derive(Debug)]
pub struct Budget {
    total: usize,
    used: AtomicUsize,
}

impl Budget {
    pub fn new(total: usize) -> Budget {
        Budget {
            total,
            used: AtomicUsize::new(0),
        }
    }

    pub fn total(&self) -> usize {
        self.total
    }

    pub fn left(&self) -> usize {
        self.total.saturating_sub(self.used.load(Ordering::Relaxed))
    }

    /// Takes `n` bytes; `false` (nothing taken) when fewer are left.
    fn take(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                used.checked_add(n).filter(|u| *u <= self.total)
            })
            .is_ok()
    }
}

// === The fetcher ===

/// Fetches images under the rules of the module docs.
pub struct ImageFetcher {
    tls: tokio_rustls::TlsConnector,
    resolver: Arc<dyn Resolve>,
    allow: Vec<Net>,
    limits: Limits,
}

/// How an [`ImageFetcher`] is made.
pub struct Builder {
    roots: Option<rustls::RootCertStore>,
    resolver: Arc<dyn Resolve>,
    allow: Vec<Net>,
    limits: Limits,
}

impl Builder {
    /// Trust only these roots (by default: the public roots and the
    /// system's store).
    pub fn roots(mut self, roots: rustls::RootCertStore) -> Self {
        self.roots = Some(roots);
        self
    }

    pub fn resolver(mut self, resolver: Arc<dyn Resolve>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Trust `net` although it is not public (images hosted internally).
    pub fn allow(mut self, net: Net) -> Self {
        self.allow.push(net);
        self
    }

    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    pub fn build(self) -> Result<ImageFetcher, String> {
        let roots = match self.roots {
            Some(r) => Arc::new(r),
            None => system_roots(),
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(ImageFetcher {
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            resolver: self.resolver,
            allow: self.allow,
            limits: self.limits,
        })
    }
}

/// The public roots (webpki) and the system's store, as the upstream client
/// trusts them (`super::client`), read once per process.
fn system_roots() -> Arc<rustls::RootCertStore> {
    static ROOTS: OnceLock<Arc<rustls::RootCertStore>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
            };
            roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
            Arc::new(roots)
        })
        .clone()
}

/// Where one hop goes.
struct Target {
    uri: Uri,
    host: Host,
    port: u16,
}

enum Host {
    Ip(IpAddr),
    Name(String),
}

/// What one hop answered.
enum Hop {
    Image(Fetched),
    Redirect(String),
}

impl Target {
    fn parse(url: &str) -> Result<Target, FetchError> {
        let url = url.split('#').next().unwrap_or(url);
        let uri: Uri = url.parse().map_err(|_| match url.split_once(':') {
            Some((scheme, _)) if !scheme.eq_ignore_ascii_case("https") && !scheme.is_empty() => {
                FetchError::NotHttps(scheme.to_ascii_lowercase())
            }
            _ => FetchError::BadUrl,
        })?;
        match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("https") => {}
            Some(s) => return Err(FetchError::NotHttps(s.to_ascii_lowercase())),
            None => return Err(FetchError::BadUrl),
        }
        let authority = uri.authority().ok_or(FetchError::BadUrl)?;
        if authority.as_str().contains('@') {
            return Err(FetchError::UserInfo);
        }
        let port = authority.port_u16().unwrap_or(443);
        let host = authority.host();
        let host = if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            Host::Ip(IpAddr::V6(v6.parse().map_err(|_| FetchError::BadUrl)?))
        } else if let Ok(v4) = host.parse::<Ipv4Addr>() {
            Host::Ip(IpAddr::V4(v4))
        } else if host.is_empty() {
            return Err(FetchError::BadUrl);
        } else {
            Host::Name(host.to_ascii_lowercase())
        };
        Ok(Target { uri, host, port })
    }

    /// The URL a `Location` names, relative to this one.
    fn join(&self, location: &str) -> String {
        let authority = self.uri.authority().map_or("", |a| a.as_str());
        if location.contains("://") {
            location.to_owned()
        } else if let Some(rest) = location.strip_prefix("//") {
            format!("https://{rest}")
        } else if location.starts_with('/') {
            format!("https://{authority}{location}")
        } else {
            let path = self.uri.path();
            let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
            format!("https://{authority}{dir}{location}")
        }
    }
}

impl ImageFetcher {
    pub fn builder() -> Builder {
        Builder {
            roots: None,
            resolver: Arc::new(SystemResolver),
            allow: Vec::new(),
            limits: Limits::default(),
        }
    }

    /// The gateway's fetcher: public addresses only, the system's resolver,
    /// the public roots and the system's store.
    pub fn public() -> Result<&'static ImageFetcher, FetchError> {
        static PUBLIC: OnceLock<Result<ImageFetcher, String>> = OnceLock::new();
        PUBLIC
            .get_or_init(|| ImageFetcher::builder().build())
            .as_ref()
            .map_err(|e| FetchError::Setup(e.clone()))
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Fetches the image at `url`, reading at most what `budget` has left,
    /// done by `by` (and within [`Limits::timeout`]).
    pub async fn fetch(
        &self,
        url: &str,
        budget: &Budget,
        by: Instant,
    ) -> Result<Fetched, FetchError> {
        let by = by.min(Instant::now() + self.limits.timeout);
        tokio::time::timeout_at(by, self.follow(url, budget))
            .await
            .unwrap_or(Err(FetchError::TimedOut))
    }

    async fn follow(&self, url: &str, budget: &Budget) -> Result<Fetched, FetchError> {
        let mut target = Target::parse(url)?;
        for _ in 0..=self.limits.max_redirects {
            match self.hop(&target, budget).await? {
                Hop::Image(f) => return Ok(f),
                Hop::Redirect(location) => target = Target::parse(&target.join(&location))?,
            }
        }
        Err(FetchError::TooManyRedirects(self.limits.max_redirects))
    }

    fn trusted(&self, ip: IpAddr) -> bool {
        is_public(ip) || self.allow.iter().any(|n| n.contains(ip))
    }

    /// The addresses to connect to: all of them vetted, or none.
    async fn vet(&self, t: &Target) -> Result<Vec<SocketAddr>, FetchError> {
        let addrs = match &t.host {
            Host::Ip(ip) => vec![SocketAddr::new(*ip, t.port)],
            Host::Name(name) => self
                .resolver
                .resolve(name, t.port)
                .await
                .map_err(|e| FetchError::Resolve(e.to_string()))?,
        };
        if addrs.is_empty() {
            return Err(FetchError::Resolve("no addresses".into()));
        }
        if !addrs.iter().all(|a| self.trusted(a.ip())) {
            return Err(FetchError::NotPublic);
        }
        Ok(addrs
            .into_iter()
            .map(|a| SocketAddr::new(a.ip().to_canonical(), a.port()))
            .collect())
    }

    /// One request: vet, connect, TLS, GET, and read the answer.
    async fn hop(&self, t: &Target, budget: &Budget) -> Result<Hop, FetchError> {
        let addrs = self.vet(t).await?;
        let tcp = connect(&addrs).await?;
        let name = match &t.host {
            Host::Ip(ip) => ServerName::IpAddress((*ip).into()),
            Host::Name(n) => {
                ServerName::try_from(n.clone()).map_err(|e| FetchError::Tls(e.to_string()))?
            }
        };
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| FetchError::Tls(e.to_string()))?;
        let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| FetchError::Http(e.to_string()))?;
        let authority = t.uri.authority().map_or("", |a| a.as_str());
        let path = t.uri.path_and_query().map_or("/", |p| p.as_str());
        let req = Request::get(path)
            .header(HOST, authority)
            .header(USER_AGENT, "switchyard-image-fetch")
            .header(ACCEPT, "image/*")
            .body(Empty::<Bytes>::new())
            .map_err(|_| FetchError::BadUrl)?;
        let exchange = async move {
            let resp = tx
                .send_request(req)
                .await
                .map_err(|e| FetchError::Http(e.to_string()))?;
            read(resp, budget).await
        };
        // The connection is driven here, beside the exchange: no task is
        // left behind when the fetch ends or is dropped.
        tokio::pin!(exchange, conn);
        let mut conn_done = false;
        loop {
            tokio::select! {
                r = &mut exchange => return r,
                _ = &mut conn, if !conn_done => conn_done = true,
            }
        }
    }
}

async fn connect(addrs: &[SocketAddr]) -> Result<TcpStream, FetchError> {
    let mut last = None;
    for a in addrs {
        match TcpStream::connect(a).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(FetchError::Connect(
        last.map_or_else(|| "no addresses".into(), |e| e.to_string()),
    ))
}

/// Content types that say nothing about what the bytes are.
fn generic(ct: &str) -> bool {
    matches!(ct, "application/octet-stream" | "binary/octet-stream")
}

async fn read(
    resp: http::Response<hyper::body::Incoming>,
    budget: &Budget,
) -> Result<Hop, FetchError> {
    let status = resp.status();
    if status.is_redirection() && status != http::StatusCode::NOT_MODIFIED {
        return match resp.headers().get(LOCATION).and_then(|l| l.to_str().ok()) {
            Some(l) => Ok(Hop::Redirect(l.to_owned())),
            None => Err(FetchError::Status(status.as_u16())),
        };
    }
    if !status.is_success() {
        return Err(FetchError::Status(status.as_u16()));
    }
    let ct = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty());
    if let Some(ct) = ct
        .as_deref()
        .filter(|c| !c.starts_with("image/") && !generic(c))
    {
        return Err(FetchError::NotAnImage(Some(ct.to_owned())));
    }
    let declared = resp
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > budget.left() as u64) {
        return Err(FetchError::TooLarge(budget.total()));
    }
    let mut body = resp.into_body();
    let mut bytes = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| FetchError::Http(e.to_string()))?;
        if let Ok(data) = frame.into_data() {
            if !budget.take(data.len()) {
                return Err(FetchError::TooLarge(budget.total()));
            }
            bytes.extend_from_slice(&data);
        }
    }
    let mime = match (sniff(&bytes), ct) {
        (Some(m), _) => m.to_owned(),
        (None, Some(ct)) if ct.starts_with("image/") => ct,
        (None, ct) => return Err(FetchError::NotAnImage(ct)),
    };
    Ok(Hop::Image(Fetched {
        mime,
        bytes: bytes.freeze(),
    }))
}

/// The image type its first bytes show, for the types the inline-only
/// providers take (PNG, JPEG, GIF, WebP, HEIC/HEIF).
pub fn sniff(b: &[u8]) -> Option<&'static str> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if b.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        Some("image/webp")
    } else if b.len() >= 12 && &b[4..8] == b"ftyp" {
        match &b[8..12] {
            b"heic" | b"heix" | b"heim" | b"heis" => Some("image/heic"),
            b"mif1" | b"msf1" | b"hevc" | b"hevx" => Some("image/heif"),
            _ => None,
        }
    } else {
        None
    }
}

/// Also the loopback origin other modules' tests fetch from.
#[cfg(test)]
pub(crate) mod tests;
