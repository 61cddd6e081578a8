//! The address policy as a table, and the fetcher against a loopback HTTPS
//! origin (the test CA's `localhost` / `127.0.0.1` certificate) reached
//! through a resolver the test controls: 127.0.0.1 is trusted only where a
//! test says so, as a deployment would trust an internal range.

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use super::*;

const TLS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls");
const MIB: usize = 1024 * 1024;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn only_public_addresses_are_public() {
    let refused = [
        "0.0.0.0",
        "0.1.2.3",
        "10.0.0.1",
        "10.255.255.255",
        "100.64.0.1",
        "100.127.255.254",
        "127.0.0.1",
        "127.53.0.9",
        "169.254.169.254",
        "169.254.0.1",
        "172.16.0.1",
        "172.31.255.255",
        "192.0.0.8",
        "192.0.2.10",
        "192.88.99.1",
        "192.168.1.1",
        "198.18.0.1",
        "198.19.255.255",
        "198.51.100.7",
        "203.0.113.9",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "::127.0.0.1",
        "::ffff:127.0.0.1",
        "::ffff:10.1.2.3",
        "::ffff:169.254.169.254",
        "::ffff:0:0",
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",
        "64:ff9b:1::1",
        "100::1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "febf::1",
        "fec0::1",
        "ff02::1",
        "2001::1",
        "2001:0:4136:e378::1",
        "2001:2::1",
        "2001:db8::1",
        "2002:7f00:1::1",
        "3fff::1",
        "4000::1",
        "e000::1",
    ];
    for a in refused {
        assert!(!is_public(ip(a)), "{a} must not be public");
    }
    let public = [
        "1.1.1.1",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.0",
        "100.63.255.255",
        "100.128.0.0",
        "169.253.0.1",
        "172.15.255.255",
        "172.32.0.0",
        "192.0.1.1",
        "192.169.0.1",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "::ffff:8.8.8.8",
        "64:ff9b::808:808",
        "2001:200::1",
        "2001:4860:4860::8888",
        "2606:4700:4700::1111",
        "2a00:1450:4001::1",
        "3ffe::1",
        "3fff:1000::1",
    ];
    for a in public {
        assert!(is_public(ip(a)), "{a} must be public");
    }
}

#[test]
fn a_trusted_block_holds_its_addresses_and_their_mapped_forms() {
    let net = Net::new(ip("10.20.0.0"), 16).unwrap();
    assert!(net.contains(ip("10.20.3.4")));
    assert!(net.contains(ip("::ffff:10.20.3.4")));
    assert!(!net.contains(ip("10.21.0.1")));
    assert!(!net.contains(ip("fd00::1")));
    let one = Net::new(ip("127.0.0.1"), 32).unwrap();
    assert!(one.contains(ip("127.0.0.1")) && !one.contains(ip("127.0.0.2")));
    let v6 = Net::new(ip("fd00:1::"), 32).unwrap();
    assert!(v6.contains(ip("fd00:1:ffff::9")) && !v6.contains(ip("fd00:2::1")));
    assert!(Net::new(ip("0.0.0.0"), 0).unwrap().contains(ip("8.8.8.8")));
    assert_eq!(Net::new(ip("10.0.0.0"), 33), None);
    assert_eq!(Net::new(ip("::"), 129), None);
}

#[test]
fn image_types_come_from_their_bytes() {
    let cases: [(&[u8], Option<&str>); 8] = [
        (b"\x89PNG\r\n\x1a\n\0\0", Some("image/png")),
        (&[0xff, 0xd8, 0xff, 0xe0], Some("image/jpeg")),
        (b"GIF89a..", Some("image/gif")),
        (b"RIFF\x10\0\0\0WEBPVP8 ", Some("image/webp")),
        (b"\0\0\0\x18ftypheic\0\0", Some("image/heic")),
        (b"\0\0\0\x18ftypmif1\0\0", Some("image/heif")),
        (b"<html>", None),
        (b"", None),
    ];
    for (bytes, mime) in cases {
        assert_eq!(sniff(bytes), mime, "{bytes:?}");
    }
}

#[test]
fn urls_are_read_strictly() {
    let parse = |u: &str| Target::parse(u).map(|_| ());
    assert_eq!(
        parse("http://example.com/a.png"),
        Err(FetchError::NotHttps("http".into()))
    );
    assert_eq!(
        parse("HTTP://example.com/a.png"),
        Err(FetchError::NotHttps("http".into()))
    );
    assert_eq!(
        parse("ftp://example.com/a.png"),
        Err(FetchError::NotHttps("ftp".into()))
    );
    assert_eq!(
        parse("file:///etc/passwd"),
        Err(FetchError::NotHttps("file".into()))
    );
    assert_eq!(
        parse("gs://bucket/a.png"),
        Err(FetchError::NotHttps("gs".into()))
    );
    assert_eq!(
        parse("https://user:pw@example.com/a.png"),
        Err(FetchError::UserInfo)
    );
    assert_eq!(parse("not a url"), Err(FetchError::BadUrl));
    assert_eq!(parse("/relative.png"), Err(FetchError::BadUrl));
    assert!(parse("https://example.com/a.png?x=1#frag").is_ok());
    assert!(parse("HTTPS://Example.COM:8443/a.png").is_ok());
    let t = Target::parse("https://[::ffff:7f00:1]:9/a").unwrap();
    assert!(matches!(t.host, Host::Ip(IpAddr::V6(_))) && t.port == 9);
    let t = Target::parse("https://img.example.com/a/b/c.png?q=1").unwrap();
    assert_eq!(t.join("/x.png"), "https://img.example.com/x.png");
    assert_eq!(t.join("d.png"), "https://img.example.com/a/b/d.png");
    assert_eq!(
        t.join("//cdn.example.com/e.png"),
        "https://cdn.example.com/e.png"
    );
    assert_eq!(
        t.join("http://cdn.example.com/f.png"),
        "http://cdn.example.com/f.png"
    );
}

// === A loopback HTTPS origin ===

/// What the origin saw and did.
#[derive(Default)]
pub(crate) struct Seen {
    pub(crate) connections: AtomicUsize,
    paths: Mutex<Vec<String>>,
    /// Body bytes written by the streaming answers before the client let go.
    written: AtomicUsize,
    finished: AtomicBool,
    done: Notify,
}

pub(crate) struct Origin {
    pub(crate) port: u16,
    pub(crate) seen: Arc<Seen>,
}

impl Origin {
    pub(crate) fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.port)
    }

    pub(crate) fn paths(&self) -> Vec<String> {
        self.seen.paths.lock().unwrap().clone()
    }

    /// Waits until a streaming answer stopped writing (the client left).
    async fn stopped_writing(&self) -> usize {
        tokio::time::timeout(Duration::from_secs(10), async {
            while !self.seen.finished.load(Ordering::SeqCst) {
                self.seen.done.notified().await;
            }
        })
        .await
        .expect("the origin stops writing once the client is gone");
        self.seen.written.load(Ordering::SeqCst)
    }
}

pub(crate) fn png(len: usize) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    b.extend((0..len).map(|i| (i % 251) as u8));
    b
}

pub(crate) async fn origin() -> Origin {
    use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    let chain = vec![CertificateDer::from_pem_file(format!("{TLS_DIR}/server.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(format!("{TLS_DIR}/server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            s.connections.fetch_add(1, Ordering::SeqCst);
            let (acceptor, s) = (acceptor.clone(), s.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(sock).await {
                    answer(tls, port, &s).await;
                }
            });
        }
    });
    Origin { port, seen }
}

async fn answer<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut s: S,
    port: u16,
    seen: &Seen,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        if s.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
    seen.paths.lock().unwrap().push(path.clone());
    let reply = |status: &str, headers: &[(&str, String)], body: &[u8]| {
        let mut out = format!("HTTP/1.1 {status}\r\nconnection: close\r\n");
        for (k, v) in headers {
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        out.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        let mut out = out.into_bytes();
        out.extend_from_slice(body);
        out
    };
    let location = |to: String| [("location", to)];
    let out = match path.as_str() {
        "/cat.png" => reply(
            "200 OK",
            &[("content-type", "image/png".into())],
            &png(4000),
        ),
        "/photo" => reply(
            "200 OK",
            &[("content-type", "application/octet-stream".into())],
            &[0xff, 0xd8, 0xff, 0xe0, 1, 2, 3],
        ),
        "/page.html" => reply(
            "200 OK",
            &[("content-type", "text/html; charset=utf-8".into())],
            b"<html></html>",
        ),
        "/missing.png" => reply("404 Not Found", &[], b"no"),
        "/to-cat" => reply("302 Found", &location("/cat.png".into()), b""),
        "/to-intranet" => reply(
            "302 Found",
            &location("https://intranet.test/secret.png".into()),
            b"",
        ),
        "/to-metadata" => reply(
            "301 Moved Permanently",
            &location("https://169.254.169.254/latest/meta-data/".into()),
            b"",
        ),
        "/to-http" => reply(
            "307 Temporary Redirect",
            &location(format!("http://localhost:{port}/cat.png")),
            b"",
        ),
        "/loop" => reply("302 Found", &location("/loop".into()), b""),
        "/huge-declared" | "/huge-chunked" => {
            return stream_huge(s, path == "/huge-declared", seen).await;
        }
        "/slow" => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: image/png\r\ncontent-length: 10\r\n\r\n";
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.flush().await;
            tokio::time::sleep(Duration::from_secs(60)).await;
            return;
        }
        _ => reply("404 Not Found", &[], b""),
    };
    let _ = s.write_all(&out).await;
    let _ = s.shutdown().await;
}

/// 64 MiB of PNG, with its length declared or chunked, written until the
/// client goes away; how much got written is kept.
async fn stream_huge<S: tokio::io::AsyncWrite + Unpin>(mut s: S, declared: bool, seen: &Seen) {
    const TOTAL: usize = 64 * MIB;
    const CHUNK: usize = 64 * 1024;
    let framing = if declared {
        format!("content-length: {TOTAL}")
    } else {
        "transfer-encoding: chunked".to_owned()
    };
    let head = format!("HTTP/1.1 200 OK\r\ncontent-type: image/png\r\n{framing}\r\n\r\n");
    let mut ok = s.write_all(head.as_bytes()).await.is_ok();
    let data = png(CHUNK - 8);
    let mut sent = 0;
    while ok && sent < TOTAL {
        let r = if declared {
            s.write_all(&data).await
        } else {
            let mut c = format!("{:x}\r\n", data.len()).into_bytes();
            c.extend_from_slice(&data);
            c.extend_from_slice(b"\r\n");
            s.write_all(&c).await
        };
        ok = r.is_ok() && s.flush().await.is_ok();
        if ok {
            sent += data.len();
            seen.written.store(sent, Ordering::SeqCst);
        }
    }
    seen.finished.store(true, Ordering::SeqCst);
    seen.done.notify_one();
}

/// Names → addresses, each lookup counted.
#[derive(Default)]
pub(crate) struct Dns {
    names: HashMap<&'static str, Vec<IpAddr>>,
    lookups: Arc<Mutex<Vec<String>>>,
}

impl Resolve for Dns {
    fn resolve(&self, host: &str, port: u16) -> Resolving {
        self.lookups.lock().unwrap().push(host.to_owned());
        let found = self.names.get(host).cloned();
        let host = host.to_owned();
        Box::pin(async move {
            match found {
                Some(ips) => Ok(ips
                    .into_iter()
                    .map(|ip| SocketAddr::new(ip, port))
                    .collect()),
                None => Err(std::io::Error::other(format!("{host}: no such host"))),
            }
        })
    }
}

pub(crate) fn test_ca() -> rustls::RootCertStore {
    use rustls::pki_types::{pem::PemObject, CertificateDer};
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(format!("{TLS_DIR}/ca.pem")).unwrap())
        .unwrap();
    roots
}

pub(crate) fn dns() -> Dns {
    let mut names = HashMap::new();
    names.insert("localhost", vec![ip("127.0.0.1")]);
    // The origin's address, under a name its certificate does not carry.
    names.insert("wrong.test", vec![ip("127.0.0.1")]);
    names.insert("intranet.test", vec![ip("10.0.0.7")]);
    // One public address and one private: refused as a whole.
    names.insert("mixed.test", vec![ip("93.184.215.14"), ip("10.0.0.9")]);
    Dns {
        names,
        lookups: Arc::default(),
    }
}

/// A fetcher that trusts the test CA and, as an internal range, 127.0.0.1.
pub(crate) fn trusting(dns: Dns, limits: Limits) -> ImageFetcher {
    ImageFetcher::builder()
        .roots(test_ca())
        .resolver(Arc::new(dns))
        .allow(Net::new(ip("127.0.0.1"), 32).unwrap())
        .limits(limits)
        .build()
        .unwrap()
}

pub(crate) fn quick() -> Limits {
    Limits {
        timeout: Duration::from_secs(5),
        max_redirects: 3,
    }
}

pub(crate) fn later() -> Instant {
    Instant::now() + Duration::from_secs(60)
}

#[tokio::test]
async fn an_image_is_fetched_from_its_vetted_address_with_its_type() {
    let o = origin().await;
    let d = dns();
    let lookups = d.lookups.clone();
    let f = trusting(d, quick());
    let budget = Budget::new(MIB);
    let got = f
        .fetch(&o.url("localhost", "/cat.png"), &budget, later())
        .await
        .unwrap();
    assert_eq!(got.mime, "image/png");
    assert_eq!(got.bytes, Bytes::from(png(4000)));
    assert_eq!(budget.left(), MIB - got.bytes.len());
    // One lookup: the connection went to the address vetted then, with no
    // second lookup a rebinding DNS server could answer differently.
    assert_eq!(*lookups.lock().unwrap(), ["localhost"]);
    // A generic content type: the bytes say what it is.
    let got = f
        .fetch(&o.url("localhost", "/photo"), &budget, later())
        .await
        .unwrap();
    assert_eq!(got.mime, "image/jpeg");
    // A redirect is followed, re-vetted (a second lookup, for the new hop).
    let got = f
        .fetch(&o.url("localhost", "/to-cat"), &budget, later())
        .await
        .unwrap();
    assert_eq!(got.mime, "image/png");
    assert_eq!(o.paths(), ["/cat.png", "/photo", "/to-cat", "/cat.png"]);
    assert_eq!(lookups.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn what_is_not_an_image_or_not_there_is_refused() {
    let o = origin().await;
    let f = trusting(dns(), quick());
    let budget = Budget::new(MIB);
    let fetch = |path: &'static str| f.fetch_owned(o.url("localhost", path), &budget);
    assert_eq!(
        fetch("/page.html").await,
        Err(FetchError::NotAnImage(Some("text/html".into())))
    );
    assert_eq!(fetch("/missing.png").await, Err(FetchError::Status(404)));
}

#[tokio::test]
async fn a_declared_length_over_the_budget_is_refused_before_the_body_is_read() {
    let o = origin().await;
    let f = trusting(dns(), quick());
    let budget = Budget::new(MIB);
    let r = f
        .fetch(&o.url("localhost", "/huge-declared"), &budget, later())
        .await;
    assert_eq!(r, Err(FetchError::TooLarge(MIB)));
    assert_eq!(budget.left(), MIB, "nothing was taken from the budget");
    let written = o.stopped_writing().await;
    assert!(
        written < 16 * MIB,
        "the origin wrote {written} bytes of 64 MiB"
    );
}

#[tokio::test]
async fn a_body_past_the_budget_stops_being_read() {
    let o = origin().await;
    let f = trusting(dns(), quick());
    let budget = Budget::new(MIB);
    let r = f
        .fetch(&o.url("localhost", "/huge-chunked"), &budget, later())
        .await;
    assert_eq!(r, Err(FetchError::TooLarge(MIB)));
    let written = o.stopped_writing().await;
    assert!(
        (MIB..16 * MIB).contains(&written),
        "the origin wrote {written} bytes of 64 MiB"
    );
}

#[tokio::test]
async fn one_budget_bounds_all_of_a_requests_images() {
    let o = origin().await;
    let f = trusting(dns(), quick());
    let budget = Budget::new(6000);
    let url = o.url("localhost", "/cat.png");
    assert!(f.fetch(&url, &budget, later()).await.is_ok());
    assert_eq!(
        f.fetch(&url, &budget, later()).await,
        Err(FetchError::TooLarge(6000))
    );
}

#[tokio::test]
async fn a_slow_host_is_given_up_on_at_the_time_bound_or_the_deadline() {
    let o = origin().await;
    let limits = Limits {
        timeout: Duration::from_millis(300),
        max_redirects: 3,
    };
    let f = trusting(dns(), limits);
    let budget = Budget::new(MIB);
    let started = Instant::now();
    let r = f
        .fetch(&o.url("localhost", "/slow"), &budget, later())
        .await;
    assert_eq!(r, Err(FetchError::TimedOut));
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(3),
        "{took:?}"
    );
    // An earlier deadline (the route's) wins over the fetcher's bound.
    let f = trusting(dns(), quick());
    let started = Instant::now();
    let by = started + Duration::from_millis(200);
    assert_eq!(
        f.fetch(&o.url("localhost", "/slow"), &budget, by).await,
        Err(FetchError::TimedOut)
    );
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn redirects_are_vetted_hop_by_hop_and_counted() {
    let o = origin().await;
    let d = dns();
    let lookups = d.lookups.clone();
    let f = trusting(d, quick());
    let budget = Budget::new(MIB);
    let fetch = |path: &'static str| f.fetch_owned(o.url("localhost", path), &budget);
    assert_eq!(fetch("/to-intranet").await, Err(FetchError::NotPublic));
    assert!(lookups
        .lock()
        .unwrap()
        .contains(&"intranet.test".to_owned()));
    assert_eq!(fetch("/to-metadata").await, Err(FetchError::NotPublic));
    assert_eq!(
        fetch("/to-http").await,
        Err(FetchError::NotHttps("http".into()))
    );
    assert_eq!(fetch("/loop").await, Err(FetchError::TooManyRedirects(3)));
    let loops = o.paths().iter().filter(|p| *p == "/loop").count();
    assert_eq!(loops, 4, "the first request and three redirects");
    // Neither the intranet nor the metadata address was asked for anything.
    let paths = o.paths();
    assert!(!paths
        .iter()
        .any(|p| p.contains("secret") || p.contains("meta-data")));
}

#[tokio::test]
async fn private_hosts_are_refused_before_any_connection() {
    let o = origin().await;
    // The gateway's policy: nothing private trusted (the system's resolver
    // for `localhost`, whichever of 127.0.0.1 and ::1 it gives).
    let strict = ImageFetcher::builder()
        .roots(test_ca())
        .limits(quick())
        .build()
        .unwrap();
    let budget = Budget::new(MIB);
    for url in [
        o.url("localhost", "/cat.png"),
        o.url("127.0.0.1", "/cat.png"),
        o.url("[::1]", "/cat.png"),
        o.url("[::ffff:127.0.0.1]", "/cat.png"),
        "https://169.254.169.254/latest/meta-data/iam".to_owned(),
        "https://10.0.0.1/a.png".to_owned(),
        "https://[fd00::1]/a.png".to_owned(),
        "https://0.0.0.0/a.png".to_owned(),
    ] {
        assert_eq!(
            strict.fetch(&url, &budget, later()).await,
            Err(FetchError::NotPublic),
            "{url}"
        );
    }
    assert_eq!(
        strict
            .fetch(
                &o.url("localhost", "/cat.png").replace("https", "http"),
                &budget,
                later()
            )
            .await,
        Err(FetchError::NotHttps("http".into()))
    );
    // A name with any untrusted address is refused whole, even beside a
    // public one, and even where another private address is trusted.
    let f = trusting(dns(), quick());
    assert_eq!(
        f.fetch("https://mixed.test/a.png", &budget, later()).await,
        Err(FetchError::NotPublic)
    );
    assert_eq!(
        f.fetch("https://intranet.test/a.png", &budget, later())
            .await,
        Err(FetchError::NotPublic)
    );
    assert_eq!(o.seen.connections.load(Ordering::SeqCst), 0);
    assert_eq!(budget.left(), MIB);
}

#[tokio::test]
async fn tls_is_verified_against_the_urls_host_name() {
    let o = origin().await;
    let f = trusting(dns(), quick());
    let budget = Budget::new(MIB);
    // The right address, but a name the certificate does not carry.
    let r = f
        .fetch(&o.url("wrong.test", "/cat.png"), &budget, later())
        .await;
    assert!(matches!(r, Err(FetchError::Tls(_))), "{r:?}");
    // A CA the fetcher does not trust: the gateway's own roots.
    let public_roots = ImageFetcher::builder()
        .resolver(Arc::new(dns()))
        .allow(Net::new(ip("127.0.0.1"), 32).unwrap())
        .limits(quick())
        .build()
        .unwrap();
    let r = public_roots
        .fetch(&o.url("localhost", "/cat.png"), &budget, later())
        .await;
    assert!(matches!(r, Err(FetchError::Tls(_))), "{r:?}");
    assert!(
        o.paths().is_empty(),
        "no request went over either connection"
    );
    assert_eq!(o.seen.connections.load(Ordering::SeqCst), 2);
}

impl ImageFetcher {
    /// [`ImageFetcher::fetch`] of an owned URL (for closures in tests).
    async fn fetch_owned(&self, url: String, budget: &Budget) -> Result<Fetched, FetchError> {
        self.fetch(&url, budget, later()).await
    }
}
