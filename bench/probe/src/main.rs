//! A paired c=1 latency probe: compare two or more HTTP targets (two
//! builds of the gateway, the gateway and nginx…) at concurrency 1 in one
//! run, with the machine's noise landing on all of them alike.
//!
//! One request in flight at a time; the targets take turns, `--block N`
//! requests each (default 1), and every round takes them in another order
//! (all orders in rotation) so none always follows the same one. Why: on a
//! shared machine slow requests come in bursts of ~100 ms, and a c=1 p99 from
//! separate runs (oha, one target at a time) is mostly how many bursts each
//! run caught; taking turns every few requests, a burst hits every target.
//! `bench/README.md` ("Comparing two builds") shows it in use.
//!
//! Usage: `c1probe [--block N] WARMUP_S SECONDS OUT_DIR NAME=PORT=BODY...`
//! POSTs BODY as JSON to `127.0.0.1:PORT/v1/chat/completions` for each
//! target; after WARMUP_S seconds of unrecorded requests, records SECONDS.
//! Writes `OUT_DIR/lat-c1-NAME.txt` (each answered request's latency in ns,
//! from the request's first byte written to its answer's last byte read,
//! one a line) and prints one line per target:
//! `{"target":NAME,"ok":N,"errors":N,"p50_ms":X,"p99_ms":X,"p999_ms":X}`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Target {
    name: String,
    port: u16,
    request: Vec<u8>,
    conn: Option<Conn>,
    latencies_ns: Vec<u64>,
    errors: u64,
}

struct Conn {
    sock: TcpStream,
    /// Zeroed once; `filled` bytes of it hold the answer being read.
    buf: Vec<u8>,
    filled: usize,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("c1probe: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut block = 1;
    if args.first().is_some_and(|a| a == "--block") {
        block = args
            .get(1)
            .and_then(|b| b.parse().ok())
            .filter(|b| *b > 0)
            .ok_or("--block wants a number of requests > 0")?;
        args.drain(..2);
    }
    if args.len() < 4 {
        return Err("usage: c1probe [--block N] WARMUP_S SECONDS OUT_DIR NAME=PORT=BODY...".into());
    }
    let secs = |s: &str| {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| format!("not a number of seconds: {s}"))
    };
    let (warmup, measure, out_dir) = (secs(&args[0])?, secs(&args[1])?, &args[2]);
    let mut targets = args[3..]
        .iter()
        .map(|a| parse_target(a))
        .collect::<Result<Vec<_>, _>>()?;
    // All orders of up to 6 targets is at most 720 rounds to rotate through.
    if targets.len() > 6 {
        return Err("at most 6 targets".into());
    }
    let orders = permutations(targets.len());

    drive(&mut targets, &orders, block, warmup);
    for t in &mut targets {
        t.latencies_ns.clear();
        t.errors = 0;
    }
    drive(&mut targets, &orders, block, measure);

    for t in &mut targets {
        let path = format!("{out_dir}/lat-c1-{}.txt", t.name);
        let mut text = String::with_capacity(t.latencies_ns.len() * 7);
        for ns in &t.latencies_ns {
            text.push_str(&ns.to_string());
            text.push('\n');
        }
        std::fs::write(&path, text).map_err(|e| format!("{path}: {e}"))?;
        t.latencies_ns.sort_unstable();
        let ms = |q: f64| percentile(&t.latencies_ns, q).map_or(-1.0, |ns| ns as f64 / 1e6);
        println!(
            "{{\"target\":\"{}\",\"ok\":{},\"errors\":{},\"p50_ms\":{:.4},\"p99_ms\":{:.4},\"p999_ms\":{:.4}}}",
            t.name,
            t.latencies_ns.len(),
            t.errors,
            ms(0.5),
            ms(0.99),
            ms(0.999)
        );
    }
    Ok(())
}

/// The `q` quantile of sorted values (nearest rank).
fn percentile(sorted: &[u64], q: f64) -> Option<u64> {
    let i = ((sorted.len() as f64) * q) as usize;
    sorted.get(i.min(sorted.len().saturating_sub(1))).copied()
}

/// `NAME=PORT=BODY`: the body may hold `=` itself.
fn parse_target(arg: &str) -> Result<Target, String> {
    let mut parts = arg.splitn(3, '=');
    let (Some(name), Some(port), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("not NAME=PORT=BODY: {arg}"));
    };
    let port: u16 = port.parse().map_err(|_| format!("bad port in {arg}"))?;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes();
    Ok(Target {
        name: name.to_owned(),
        port,
        request,
        conn: None,
        latencies_ns: Vec::new(),
        errors: 0,
    })
}

/// Every order of `n` targets (Heap's algorithm), to take turns in.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    fn heap(k: usize, a: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if k <= 1 {
            out.push(a.clone());
            return;
        }
        for i in 0..k {
            heap(k - 1, a, out);
            // Heap: an even-sized prefix swaps its i-th element, an odd one its first.
            let j = if k & 1 == 0 { i } else { 0 };
            a.swap(j, k - 1);
        }
    }
    let mut out = Vec::new();
    heap(n, &mut (0..n).collect(), &mut out);
    out
}

/// Rounds of `block` requests per target, each round in the next order,
/// until `length` has passed.
fn drive(targets: &mut [Target], orders: &[Vec<usize>], block: usize, length: Duration) {
    let end = Instant::now() + length;
    let mut round = 0usize;
    while Instant::now() < end {
        for &i in orders[round % orders.len()]
            .iter()
            .flat_map(|i| std::iter::repeat_n(i, block))
        {
            let t = &mut targets[i];
            match exchange(t) {
                Ok(ns) => t.latencies_ns.push(ns),
                Err(_) => {
                    t.errors += 1;
                    // A fresh connection next time; and no hot loop on a
                    // target that is down.
                    t.conn = None;
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
        round += 1;
    }
}

/// One request and its whole answer: the latency in ns, or why it failed.
fn exchange(t: &mut Target) -> io::Result<u64> {
    if t.conn.is_none() {
        let sock = TcpStream::connect(("127.0.0.1", t.port))?;
        sock.set_nodelay(true)?;
        sock.set_read_timeout(Some(Duration::from_secs(10)))?;
        t.conn = Some(Conn {
            sock,
            buf: vec![0; 64 * 1024],
            filled: 0,
        });
    }
    let conn = t.conn.as_mut().expect("connected above");
    let start = Instant::now();
    conn.sock.write_all(&t.request)?;
    read_answer(conn)?;
    Ok(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// Read one 200 answer off the connection (content-length or chunked).
fn read_answer(conn: &mut Conn) -> io::Result<()> {
    conn.filled = 0;
    let (head_len, status, length) = loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut headers);
        let head = resp
            .parse(&conn.buf[..conn.filled])
            .map_err(|_| bad("head"))?;
        if let httparse::Status::Complete(n) = head {
            let length = body_length(resp.headers)?;
            break (n, resp.code.unwrap_or(0), length);
        }
        fill(conn)?;
    };
    match length {
        Some(n) => {
            while conn.filled < head_len + n {
                fill(conn)?;
            }
        }
        None => read_chunked(conn, head_len)?,
    }
    if status == 200 {
        Ok(())
    } else {
        Err(bad("status not 200"))
    }
}

/// `Some(content-length)`, or `None` for a chunked body.
fn body_length(headers: &[httparse::Header<'_>]) -> io::Result<Option<usize>> {
    for h in headers {
        if h.name.eq_ignore_ascii_case("content-length") {
            let v = std::str::from_utf8(h.value).map_err(|_| bad("content-length"))?;
            return v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| bad("content-length"));
        }
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            return Ok(None);
        }
    }
    Err(bad("neither content-length nor chunked"))
}

fn read_chunked(conn: &mut Conn, mut at: usize) -> io::Result<()> {
    loop {
        let (used, size) = loop {
            let got = &conn.buf[at..conn.filled];
            match httparse::parse_chunk_size(got).map_err(|_| bad("chunk size"))? {
                httparse::Status::Complete((used, size)) => break (used, size),
                httparse::Status::Partial => fill(conn)?,
            }
        };
        let size = usize::try_from(size).map_err(|_| bad("chunk size"))?;
        // The data and its CRLF; the last chunk is followed by one CRLF
        // (no trailers from these servers).
        at += used + size + 2;
        while conn.filled < at {
            fill(conn)?;
        }
        if size == 0 {
            return Ok(());
        }
    }
}

/// Read more of the answer (the buffer grows only for a large one).
fn fill(conn: &mut Conn) -> io::Result<()> {
    if conn.filled == conn.buf.len() {
        conn.buf.resize(conn.buf.len() * 2, 0);
    }
    let n = conn.sock.read(&mut conn.buf[conn.filled..])?;
    if n == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    conn.filled += n;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_order_once() {
        for n in 1..=5 {
            let mut all = permutations(n);
            let count = all.len();
            all.sort();
            all.dedup();
            assert_eq!(all.len(), count, "no order twice");
            assert_eq!(count, (1..=n).product::<usize>(), "n! orders of {n}");
            assert!(all.iter().all(|p| {
                let mut q = p.clone();
                q.sort_unstable();
                q == (0..n).collect::<Vec<_>>()
            }));
        }
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 0.5), Some(51));
        assert_eq!(percentile(&v, 0.99), Some(100));
        assert_eq!(percentile(&v, 1.0), Some(100));
        assert_eq!(percentile(&[], 0.5), None);
    }

    #[test]
    fn targets_keep_an_equals_sign_in_the_body() {
        let t = parse_target(r#"a=18080={"x":"1=2"}"#).unwrap();
        assert_eq!((t.name.as_str(), t.port), ("a", 18080));
        let req = String::from_utf8(t.request).unwrap();
        assert!(
            req.ends_with("content-length: 11\r\n\r\n{\"x\":\"1=2\"}"),
            "{req}"
        );
        assert!(parse_target("a=notaport={}").is_err());
        assert!(parse_target("justaname").is_err());
    }
}
