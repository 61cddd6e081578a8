//! Hold many streaming requests open at once (`bench/streams.sh`).
//!
//! Opens `--n` HTTP/1.1 connections to `HOST:PORT`, each POSTing `--body` to
//! `--path` (a streaming request), at most `--concurrency` of them being set
//! up at a time. A stream counts as open once its answer's head (200) and its
//! first SSE event (a line starting `data:` or `event:`) have arrived; then it
//! is read to its end, the bytes discarded. One thread, one task per stream:
//! a few KiB each.
//!
//! Prints one JSON line a second to stdout:
//! `{"t_s":…,"started":…,"open":…,"opened":…,"failed":…,"ended":…,"flowing":…,"bytes":…}`
//! (`opened`: streams that got their first event, `open`: of those, still
//! open; `ended`: closed by the other side before the holder let go;
//! `flowing`: open streams that got more bytes after their first event), a
//! `{"event":"ramped",…}` line once every stream is open or has failed, and
//! on exit (SIGTERM, SIGINT or after `--secs`) a summary line
//! `{"event":"summary",…,"errors":{"reason":count,…}}`.
//!
//! Usage: `streamhold --n N --port PORT --body JSON [--host 127.0.0.1]
//! [--path /v1/chat/completions] [--concurrency 256] [--secs 300]
//! [--first-timeout 30]`

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};

struct Cfg {
    n: usize,
    addr: SocketAddr,
    request: Vec<u8>,
    concurrency: usize,
    secs: Duration,
    first_timeout: Duration,
}

#[derive(Default)]
struct Stats {
    started: AtomicUsize,
    open: AtomicUsize,
    opened: AtomicUsize,
    failed: AtomicUsize,
    ended: AtomicUsize,
    flowing: AtomicUsize,
    bytes: AtomicU64,
    errors: Mutex<BTreeMap<String, usize>>,
}

impl Stats {
    fn fail(&self, why: String) {
        self.failed.fetch_add(1, Relaxed);
        let mut e = self.errors.lock().expect("errors lock");
        if e.is_empty() {
            eprintln!("streamhold: first failure: {why}");
        }
        *e.entry(why).or_default() += 1;
    }

    fn line(&self, t0: Instant, event: Option<&str>) -> String {
        let mut s = format!(
            "{{{}\"t_s\":{:.3},\"started\":{},\"open\":{},\"opened\":{},\"failed\":{},\"ended\":{},\"flowing\":{},\"bytes\":{}",
            event.map_or(String::new(), |e| format!("\"event\":\"{e}\",")),
            t0.elapsed().as_secs_f64(),
            self.started.load(Relaxed),
            self.open.load(Relaxed),
            self.opened.load(Relaxed),
            self.failed.load(Relaxed),
            self.ended.load(Relaxed),
            self.flowing.load(Relaxed),
            self.bytes.load(Relaxed),
        );
        if event == Some("summary") {
            let e = self.errors.lock().expect("errors lock");
            let list: Vec<String> = e
                .iter()
                .map(|(k, v)| format!("\"{}\":{v}", k.replace(['"', '\\'], "'")))
                .collect();
            s.push_str(&format!(",\"errors\":{{{}}}", list.join(",")));
        }
        s.push('}');
        s
    }
}

fn main() {
    let cfg = match parse(std::env::args().skip(1).collect()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("streamhold: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(run(Arc::new(cfg)));
}

fn parse(args: Vec<String>) -> Result<Cfg, String> {
    let mut n = None;
    let mut port = None;
    let mut body = None;
    let mut host = "127.0.0.1".to_owned();
    let mut path = "/v1/chat/completions".to_owned();
    let mut concurrency = 256usize;
    let mut secs = 300f64;
    let mut first_timeout = 30f64;
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} wants a value"))?;
        let num = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0);
        match flag.as_str() {
            "--n" => n = value.parse::<usize>().ok().filter(|v| *v > 0),
            "--port" => port = value.parse::<u16>().ok(),
            "--body" => body = Some(value),
            "--host" => host = value,
            "--path" => path = value,
            "--concurrency" => {
                concurrency = value
                    .parse()
                    .ok()
                    .filter(|c| *c > 0)
                    .ok_or("--concurrency wants a number > 0")?
            }
            "--secs" => secs = num(&value).ok_or("--secs wants seconds > 0")?,
            "--first-timeout" => {
                first_timeout = num(&value).ok_or("--first-timeout wants seconds > 0")?
            }
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    let (Some(n), Some(port), Some(body)) = (n, port, body) else {
        return Err(
            "usage: streamhold --n N --port PORT --body JSON [--host H] [--path P] \
                    [--concurrency C] [--secs S] [--first-timeout S]"
                .into(),
        );
    };
    let addr: SocketAddr = format!("{host}:{port}")
        .parse()
        .map_err(|_| format!("not an IP address and port: {host}:{port}"))?;
    Ok(Cfg {
        n,
        addr,
        request: request(&host, port, &path, &body),
        concurrency,
        secs: Duration::from_secs_f64(secs),
        first_timeout: Duration::from_secs_f64(first_timeout),
    })
}

fn request(host: &str, port: u16, path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json\r\n\
         accept: text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn run(cfg: Arc<Cfg>) {
    let t0 = Instant::now();
    let stats = Arc::new(Stats::default());
    let (stop_tx, stop) = watch::channel(false);

    // Ramp up: at most `concurrency` streams being set up at a time.
    let ramp = {
        let (cfg, stats, stop) = (cfg.clone(), stats.clone(), stop.clone());
        tokio::spawn(async move {
            let gate = Arc::new(Semaphore::new(cfg.concurrency));
            for _ in 0..cfg.n {
                let Ok(permit) = gate.clone().acquire_owned().await else {
                    return;
                };
                if *stop.borrow() {
                    return;
                }
                stats.started.fetch_add(1, Relaxed);
                let (cfg, stats, stop) = (cfg.clone(), stats.clone(), stop.clone());
                tokio::spawn(async move {
                    let first = tokio::time::timeout(cfg.first_timeout, open(&cfg)).await;
                    drop(permit);
                    match first {
                        Ok(Ok(sock)) => hold(sock, &stats, stop).await,
                        Ok(Err(why)) => stats.fail(why),
                        Err(_) => stats.fail("no first event within --first-timeout".into()),
                    }
                });
            }
            // Every stream is set up once all permits are back.
            let _ = gate.acquire_many(cfg.concurrency as u32).await;
        })
    };

    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let deadline = tokio::time::sleep(cfg.secs);
    tokio::pin!(deadline, ramp);
    let mut ramped = false;
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("SIGINT handler");
    loop {
        tokio::select! {
            _ = tick.tick() => println!("{}", stats.line(t0, None)),
            r = &mut ramp, if !ramped => {
                ramped = true;
                let _ = r;
                println!("{}", stats.line(t0, Some("ramped")));
            }
            _ = &mut deadline => break,
            _ = term.recv() => break,
            _ = int.recv() => break,
        }
    }
    let _ = stop_tx.send(true);
    println!("{}", stats.line(t0, Some("summary")));
    // Exiting closes every socket at once.
    std::process::exit(0);
}

/// Connect, send the request, read up to the first SSE event.
async fn open(cfg: &Cfg) -> Result<TcpStream, String> {
    let mut sock = TcpStream::connect(cfg.addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = sock.set_nodelay(true);
    sock.write_all(&cfg.request)
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = vec![0u8; 4096];
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            if buf.len() >= 64 * 1024 {
                return Err("no first event in the first 64 KiB".into());
            }
            buf.resize(buf.len() * 2, 0);
        }
        let n = sock
            .read(&mut buf[filled..])
            .await
            .map_err(|e| format!("read: {e}"))?;
        if n == 0 {
            return Err("closed before the first event".into());
        }
        filled += n;
        match first_event(&buf[..filled]) {
            Ok(true) => return Ok(sock),
            Ok(false) => {}
            Err(why) => return Err(why),
        }
    }
}

/// Whether `raw` (the answer so far) holds a 200 head and an SSE event start;
/// an error for any other status.
fn first_event(raw: &[u8]) -> Result<bool, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let head = match resp.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(false),
        Err(e) => return Err(format!("bad response head: {e}")),
    };
    match resp.code {
        Some(200) => {}
        Some(code) => return Err(format!("status {code}")),
        None => return Err("no status".into()),
    }
    // Chunk-size lines are hex digits: an SSE line start inside the still
    // chunk-framed body is one.
    let body = &raw[head..];
    Ok(body
        .split(|b| *b == b'\n')
        .any(|l| l.starts_with(b"data:") || l.starts_with(b"event:")))
}

/// Read an open stream to its end, discarding it, until told to stop.
async fn hold(mut sock: TcpStream, stats: &Stats, mut stop: watch::Receiver<bool>) {
    stats.opened.fetch_add(1, Relaxed);
    stats.open.fetch_add(1, Relaxed);
    let mut buf = [0u8; 2048];
    let mut flowing = false;
    loop {
        tokio::select! {
            r = sock.read(&mut buf) => match r {
                Ok(0) | Err(_) => {
                    stats.ended.fetch_add(1, Relaxed);
                    break;
                }
                Ok(n) => {
                    stats.bytes.fetch_add(n as u64, Relaxed);
                    if !flowing {
                        flowing = true;
                        stats.flowing.fetch_add(1, Relaxed);
                    }
                }
            },
            _ = stop.changed() => break,
        }
    }
    stats.open.fetch_sub(1, Relaxed);
    if flowing {
        stats.flowing.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_event_needs_a_200_head_and_an_sse_line() {
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        assert_eq!(first_event(b"HTTP/1.1 200 OK\r\n"), Ok(false));
        assert_eq!(first_event(head.as_bytes()), Ok(false));
        assert_eq!(
            first_event(format!("{head}1a\r\ndata: {{\"x\":1}}\n\n").as_bytes()),
            Ok(true)
        );
        assert_eq!(
            first_event(format!("{head}20\r\nevent: message_start\n").as_bytes()),
            Ok(true)
        );
        let e = first_event(b"HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\n\r\n");
        assert_eq!(e, Err("status 502".into()));
    }

    #[test]
    fn flags() {
        let args = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let c = parse(args(
            "--n 3 --port 18280 --body {} --concurrency 2 --secs 1.5",
        ))
        .unwrap();
        assert_eq!((c.n, c.addr.port(), c.concurrency), (3, 18280, 2));
        assert_eq!(c.secs, Duration::from_millis(1500));
        let req = String::from_utf8(c.request).unwrap();
        assert!(req.starts_with("POST /v1/chat/completions HTTP/1.1\r\n"));
        assert!(req.ends_with("content-length: 2\r\n\r\n{}"), "{req}");
        assert!(parse(args("--n 3 --port 1")).is_err(), "no body");
        assert!(parse(args("--n 0 --port 1 --body {}")).is_err());
        assert!(parse(args("--n 1 --port 1 --body {} --bogus 1")).is_err());
    }

    /// Streams against a tiny server that answers with a head and one event
    /// and then keeps the connection open: every one counts as open.
    #[test]
    fn holds_streams_open() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = l.local_addr().unwrap();
            tokio::spawn(async move {
                loop {
                    let (mut s, _) = l.accept().await.unwrap();
                    tokio::spawn(async move {
                        let mut b = [0u8; 1024];
                        let _ = s.read(&mut b).await;
                        let _ = s
                            .write_all(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n8\r\ndata: 1\n\r\n")
                            .await;
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let _ = s.write_all(b"8\r\ndata: 2\n\r\n").await;
                        tokio::time::sleep(Duration::from_secs(5)).await;
                    });
                }
            });
            let cfg = Cfg {
                n: 5,
                addr,
                request: request("127.0.0.1", addr.port(), "/", "{}"),
                concurrency: 2,
                secs: Duration::from_secs(5),
                first_timeout: Duration::from_secs(2),
            };
            let stats = Arc::new(Stats::default());
            let (_stop_tx, stop) = watch::channel(false);
            for _ in 0..cfg.n {
                let sock = open(&cfg).await.unwrap();
                let (stats, stop) = (stats.clone(), stop.clone());
                tokio::spawn(async move { hold(sock, &stats, stop).await });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            assert_eq!(stats.open.load(Relaxed), 5);
            assert_eq!(stats.flowing.load(Relaxed), 5);
            assert_eq!(stats.failed.load(Relaxed), 0);
        });
    }
}
