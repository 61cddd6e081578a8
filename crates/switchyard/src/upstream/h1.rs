//! HTTP/1.1 on one upstream connection, driven by the request's own task.
//!
//! Not hyper's client connection: that runs every connection as a task of
//! its own and hands each request to it over a channel, the response head
//! back over a oneshot and the body over another channel. Per proxied
//! request that was ~18k of the ~82k instructions callgrind counted, and
//! three task wake-ups. Here the task serving the request writes it, reads
//! the head (httparse, as hyper does) and reads the body as its consumer
//! polls it, with no task between them. HTTP/2 stays on hyper.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Version};
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// A connected socket, TLS or not, as the connector hands it over.
pub type Io = hyper_util::rt::TokioIo<
    hyper_rustls::MaybeHttpsStream<hyper_util::rt::TokioIo<tokio::net::TcpStream>>,
>;

/// A response head larger than this is refused.
const MAX_HEAD: usize = 64 * 1024;
// `parse_head` keeps offsets into a head as u16.
const _: () = assert!(MAX_HEAD <= u16::MAX as usize + 1);
const MAX_HEADERS: usize = 100;
/// Bytes asked of the socket per read, and the most for a long body.
const READ_CHUNK: usize = 8 * 1024;
const MAX_READ: usize = 64 * 1024;
/// A request body up to this size goes out in the same write as its head.
const INLINE_BODY: usize = 64 * 1024;
/// An idle connection's buffer larger than this is not kept.
const KEEP_BUFFER: usize = 2 * MAX_READ;

/// Why a request got no response head, or its body broke.
#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    /// The connection closed before a whole head arrived.
    Closed,
    /// The upstream's bytes are not HTTP/1.1 as RFC 9112 writes it.
    Protocol(&'static str),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Closed => f.write_str("connection closed before a response arrived"),
            Error::Protocol(m) => write!(f, "invalid HTTP/1.1 response: {m}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// One HTTP/1.1 connection and its buffers, kept between requests. Boxed:
/// a TLS stream is over a kilobyte, and the connection moves from pool to
/// request future to body.
pub struct Conn(Box<ConnInner>);

struct ConnInner {
    io: Io,
    /// Bytes read and not yet handed out.
    buf: BytesMut,
    /// The request being written (reused: no allocation per request).
    out: Vec<u8>,
}

impl Conn {
    pub fn new(io: Io) -> Self {
        Conn(Box::new(ConnInner {
            io,
            buf: BytesMut::new(),
            out: Vec::new(),
        }))
    }

    /// Whether an idle connection can carry a request: polled once without
    /// waiting, so a close the reactor has seen shows; no system call when
    /// the socket has reported nothing since its last read.
    pub fn is_open(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        // Ready means end of file, an error, or bytes nobody asked for.
        self.0.poll_read_more(&mut cx, READ_CHUNK).is_pending()
    }

    /// Send the request; the response head, and its body to read.
    pub async fn exchange(
        mut self,
        req: &Request<Bytes>,
        host: &HeaderValue,
    ) -> Result<(Response<()>, Reader), Error> {
        let c = &mut *self.0;
        encode_head(&mut c.out, req, host);
        let body = req.body();
        let rest: &[u8] = if body.len() <= INLINE_BODY {
            c.out.extend_from_slice(body);
            &[]
        } else {
            body
        };
        let mut written = 0;
        let sent =
            std::future::poll_fn(|cx| c.poll_send(cx, rest, &mut written, req.method())).await?;
        let (head, framing, keep_alive) = match sent {
            Sent::All => {
                // TLS holds records until flushed; plain TCP makes this a no-op.
                c.io.flush().await?;
                std::future::poll_fn(|cx| c.poll_head(cx, req.method())).await?
            }
            // The rest of the body was never sent: no second request here.
            Sent::Early(head, framing) => (head, framing, false),
        };
        Ok((
            head,
            Reader {
                conn: self,
                framing,
                keep_alive,
            },
        ))
    }
}

/// A response head, how its body is framed, and whether the connection
/// can carry another request after it.
type Head = (Response<()>, Framing, bool);

/// How writing a request ended.
enum Sent {
    All,
    /// The upstream answered before it took the whole body (a 413, or a 401
    /// decided on the head alone): its answer, the rest of the body unsent.
    Early(Response<()>, Framing),
}

impl ConnInner {
    /// Read what the socket has into the buffer, room for `want` bytes
    /// made first when little is left.
    fn poll_read_more(&mut self, cx: &mut Context<'_>, want: usize) -> Poll<io::Result<usize>> {
        if self.buf.capacity() - self.buf.len() < READ_CHUNK / 8 {
            self.buf.reserve(want);
        }
        tokio_util::io::poll_read_buf(Pin::new(&mut self.io), cx, &mut self.buf)
    }

    /// Write `out`, then `body`, from byte `written` on. Whenever the
    /// upstream takes no more, look for an answer instead: a server may
    /// refuse a request on its head and never read the body, and waiting
    /// for the write would then end in a timeout or a reset, not its status.
    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        body: &[u8],
        written: &mut usize,
        method: &Method,
    ) -> Poll<Result<Sent, Error>> {
        loop {
            let head_len = self.out.len();
            let rest = match (*written).checked_sub(head_len) {
                None => &self.out[*written..],
                Some(i) if i < body.len() => &body[i..],
                Some(_) => return Poll::Ready(Ok(Sent::All)),
            };
            match Pin::new(&mut self.io).poll_write(cx, rest) {
                Poll::Ready(Ok(0)) => {
                    return Poll::Ready(Err(io::Error::from(io::ErrorKind::WriteZero).into()))
                }
                Poll::Ready(Ok(n)) => *written += n,
                // A server that answers and closes without reading the body
                // resets the connection: its answer may have come first.
                Poll::Ready(Err(e)) => {
                    let mut noop = Context::from_waker(Waker::noop());
                    return Poll::Ready(match self.poll_head(&mut noop, method) {
                        Poll::Ready(Ok((head, framing, _))) => Ok(Sent::Early(head, framing)),
                        _ => Err(e.into()),
                    });
                }
                Poll::Pending => {
                    let (head, framing, _) = std::task::ready!(self.poll_head(cx, method))?;
                    return Poll::Ready(Ok(Sent::Early(head, framing)));
                }
            }
        }
    }

    /// The response head: its status and headers, how its body is framed
    /// and whether the connection can carry another request.
    fn poll_head(&mut self, cx: &mut Context<'_>, method: &Method) -> Poll<Result<Head, Error>> {
        loop {
            if !self.buf.is_empty() {
                match parse_head(&mut self.buf, method)? {
                    Parsed::Head(head, framing, keep_alive) => {
                        return Poll::Ready(Ok((head, framing, keep_alive)))
                    }
                    // A 100 Continue or 103 Early Hints: the answer follows.
                    Parsed::Informational => continue,
                    Parsed::Partial if self.buf.len() >= MAX_HEAD => {
                        return Poll::Ready(Err(Error::Protocol("response head too large")));
                    }
                    Parsed::Partial => {}
                }
            }
            if std::task::ready!(self.poll_read_more(cx, READ_CHUNK))? == 0 {
                return Poll::Ready(Err(if self.buf.is_empty() {
                    Error::Closed
                } else {
                    Error::Protocol("connection closed inside the response head")
                }));
            }
        }
    }
}

/// `METHOD /path?query HTTP/1.1`, the headers, and the body's length.
fn encode_head(out: &mut Vec<u8>, req: &Request<Bytes>, host: &HeaderValue) {
    out.clear();
    out.extend_from_slice(req.method().as_str().as_bytes());
    out.push(b' ');
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(if target.is_empty() { "/" } else { target }.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !req.headers().contains_key(HOST) {
        header_line(out, b"host", host.as_bytes());
    }
    for (name, value) in req.headers() {
        // The body below is the one sent, whatever a header claims.
        if name != CONTENT_LENGTH && name != TRANSFER_ENCODING {
            header_line(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    let len = req.body().len();
    if len > 0 || !matches!(*req.method(), Method::GET | Method::HEAD) {
        let mut n = itoa::Buffer::new();
        header_line(out, b"content-length", n.format(len).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

fn header_line(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

enum Parsed {
    Partial,
    Informational,
    Head(Response<()>, Framing, bool),
}

/// Parse a head at the start of `buf` and take it out of the buffer; its
/// header values share the head's bytes rather than copy them.
fn parse_head(buf: &mut BytesMut, method: &Method) -> Result<Parsed, Error> {
    let mut slots = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    let len = match httparse::ParserConfig::default()
        .parse_response_with_uninit_headers(&mut res, buf, &mut slots)
    {
        // One read can bring more than MAX_HEAD: the bound holds either way.
        Ok(httparse::Status::Complete(n)) if n > MAX_HEAD => {
            return Err(Error::Protocol("response head too large"))
        }
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(Parsed::Partial),
        Err(httparse::Error::TooManyHeaders) => return Err(Error::Protocol("too many headers")),
        Err(_) => return Err(Error::Protocol("malformed response head")),
    };
    let status = res
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .ok_or(Error::Protocol("bad status code"))?;
    if status.is_informational() && status != StatusCode::SWITCHING_PROTOCOLS {
        buf.advance(len);
        return Ok(Parsed::Informational);
    }
    let version = if res.version == Some(0) {
        Version::HTTP_10
    } else {
        Version::HTTP_11
    };
    // Where each name and value sits in the head, to slice it once frozen.
    let base = buf.as_ptr() as usize;
    let count = res.headers.len();
    // u16 offsets: a head is at most MAX_HEAD (64 KiB) long; small, so the
    // array costs no 3 KiB memset per answer.
    let mut spans = [(0u16, 0u16, 0u16, 0u16); MAX_HEADERS];
    for (span, h) in spans.iter_mut().zip(res.headers.iter()) {
        let at = |s: &[u8]| (s.as_ptr() as usize - base) as u16;
        *span = (
            at(h.name.as_bytes()),
            h.name.len() as u16,
            at(h.value),
            h.value.len() as u16,
        );
    }
    let head = buf.split_to(len).freeze();
    let mut headers = HeaderMap::with_capacity(count);
    for &(ns, nl, vs, vl) in &spans[..count] {
        let (ns, nl, vs, vl) = (ns as usize, nl as usize, vs as usize, vl as usize);
        let name = HeaderName::from_bytes(&head[ns..ns + nl])
            .map_err(|_| Error::Protocol("bad header name"))?;
        let value = HeaderValue::from_maybe_shared(head.slice(vs..vs + vl))
            .map_err(|_| Error::Protocol("bad header value"))?;
        headers.append(name, value);
    }
    let (framing, keep_alive) = framing(status, method, version, &headers)?;
    let mut resp = Response::new(());
    *resp.status_mut() = status;
    *resp.version_mut() = version;
    *resp.headers_mut() = headers;
    Ok(Parsed::Head(resp, framing, keep_alive))
}

/// How the body is delimited (RFC 9112 §6.3), and whether the connection
/// can carry another request after it.
fn framing(
    status: StatusCode,
    method: &Method,
    version: Version,
    headers: &HeaderMap,
) -> Result<(Framing, bool), Error> {
    let token = |t: &str| {
        headers.get_all(CONNECTION).iter().any(|v| {
            v.to_str()
                .is_ok_and(|s| s.split(',').any(|p| p.trim().eq_ignore_ascii_case(t)))
        })
    };
    let keep_alive = if version == Version::HTTP_11 {
        !token("close")
    } else {
        token("keep-alive")
    };
    if *method == Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
    {
        return Ok((Framing::Done, keep_alive));
    }
    if let Some(te) = headers.get_all(TRANSFER_ENCODING).iter().next_back() {
        let chunked = te.to_str().is_ok_and(|s| {
            s.rsplit(',')
                .next()
                .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"))
        });
        // Any other coding last: the body runs to the connection's close.
        return Ok(if chunked {
            (Framing::Chunked(Chunk::Size), keep_alive)
        } else {
            (Framing::ToClose, false)
        });
    }
    let mut length = None;
    for v in headers.get_all(CONTENT_LENGTH) {
        let s = v
            .to_str()
            .map_err(|_| Error::Protocol("bad content-length"))?;
        for part in s.split(',') {
            let n: u64 = part
                .trim()
                .parse()
                .map_err(|_| Error::Protocol("bad content-length"))?;
            if length.is_some_and(|l| l != n) {
                return Err(Error::Protocol("conflicting content-length"));
            }
            length = Some(n);
        }
    }
    Ok(match length {
        Some(0) => (Framing::Done, keep_alive),
        Some(n) => (Framing::Length(n), keep_alive),
        None => (Framing::ToClose, false),
    })
}

/// Where the body decoder stands.
#[derive(Debug)]
pub enum Framing {
    /// This many bytes still to come.
    Length(u64),
    Chunked(Chunk),
    /// Everything until the upstream closes the connection.
    ToClose,
    Done,
}

#[derive(Debug)]
pub enum Chunk {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// Trailer lines after the last chunk, up to an empty line.
    Trailer,
}

/// What the decoder made of the buffer.
#[derive(Debug, PartialEq)]
pub enum Step {
    Data(Bytes),
    End,
    /// More bytes needed.
    More,
}

impl Framing {
    /// Take the next piece of body out of `buf`. Data is handed out as it
    /// arrives, a partial chunk included: an event stream is not held back.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, Error> {
        loop {
            match self {
                Framing::Done => return Ok(Step::End),
                Framing::Length(rem) => {
                    let Some(data) = take(buf, rem) else {
                        return Ok(Step::More);
                    };
                    if *rem == 0 {
                        *self = Framing::Done;
                    }
                    return Ok(Step::Data(data));
                }
                Framing::ToClose => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    return Ok(Step::Data(buf.split().freeze()));
                }
                Framing::Chunked(chunk) => match chunk {
                    Chunk::Size => match httparse::parse_chunk_size(buf) {
                        Ok(httparse::Status::Complete((used, size))) => {
                            buf.advance(used);
                            *chunk = if size == 0 {
                                Chunk::Trailer
                            } else {
                                Chunk::Data(size)
                            };
                        }
                        Ok(httparse::Status::Partial) if buf.len() < 4096 => {
                            return Ok(Step::More);
                        }
                        _ => return Err(Error::Protocol("bad chunk size")),
                    },
                    Chunk::Data(rem) => {
                        let Some(data) = take(buf, rem) else {
                            return Ok(Step::More);
                        };
                        if *rem == 0 {
                            *chunk = Chunk::DataEnd;
                        }
                        return Ok(Step::Data(data));
                    }
                    Chunk::DataEnd => {
                        if buf.len() < 2 {
                            return Ok(Step::More);
                        }
                        if &buf[..2] != b"\r\n" {
                            return Err(Error::Protocol("chunk data longer than its size"));
                        }
                        buf.advance(2);
                        *chunk = Chunk::Size;
                    }
                    Chunk::Trailer => match memchr::memmem::find(buf, b"\r\n") {
                        Some(0) => {
                            buf.advance(2);
                            *self = Framing::Done;
                        }
                        Some(i) => buf.advance(i + 2),
                        None if buf.len() < MAX_HEAD => return Ok(Step::More),
                        None => return Err(Error::Protocol("trailers too large")),
                    },
                },
            }
        }
    }
}

/// Up to `rem` bytes off the front of `buf`, counted off `rem`; `None`
/// when the buffer is empty.
fn take(buf: &mut BytesMut, rem: &mut u64) -> Option<Bytes> {
    if buf.is_empty() {
        return None;
    }
    let n = usize::try_from(*rem).unwrap_or(usize::MAX).min(buf.len());
    *rem -= n as u64;
    Some(buf.split_to(n).freeze())
}

/// A response body being read off its connection.
pub struct Reader {
    conn: Conn,
    framing: Framing,
    keep_alive: bool,
}

impl Reader {
    /// The next piece of body; `None` at its end.
    pub fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, Error>> {
        loop {
            match self.framing.decode(&mut self.conn.0.buf)? {
                Step::Data(data) => return Poll::Ready(Ok(Some(data))),
                Step::End => return Poll::Ready(Ok(None)),
                Step::More => {}
            }
            // A long body with a known length is read in larger pieces.
            let want = match self.framing {
                Framing::Length(n) => {
                    usize::try_from(n).map_or(MAX_READ, |n| n.clamp(READ_CHUNK, MAX_READ))
                }
                _ => READ_CHUNK,
            };
            if std::task::ready!(self.conn.0.poll_read_more(cx, want))? == 0 {
                if let Framing::ToClose = self.framing {
                    self.framing = Framing::Done;
                    return Poll::Ready(Ok(None));
                }
                return Poll::Ready(Err(Error::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "upstream closed the connection before the body's end",
                ))));
            }
        }
    }

    /// Whether the body has been read to its end.
    pub fn is_done(&self) -> bool {
        matches!(self.framing, Framing::Done)
    }

    /// Bytes of body known to be still to come.
    pub fn remaining(&self) -> Option<u64> {
        match self.framing {
            Framing::Length(n) => Some(n),
            Framing::Done => Some(0),
            _ => None,
        }
    }

    /// The connection, when the body ended cleanly and the connection may
    /// carry another request.
    pub fn into_reusable(self) -> Option<Conn> {
        let Reader {
            mut conn,
            framing,
            keep_alive,
        } = self;
        // Bytes past the body's end would be read as the next answer.
        let buf = &mut conn.0.buf;
        if !matches!(framing, Framing::Done) || !keep_alive || !buf.is_empty() {
            return None;
        }
        if buf.capacity() > KEEP_BUFFER {
            *buf = BytesMut::new();
        }
        Some(conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(raw: &str) -> Result<Head, Error> {
        let mut buf = BytesMut::from(raw);
        loop {
            match parse_head(&mut buf, &Method::POST)? {
                Parsed::Head(h, f, k) => return Ok((h, f, k)),
                Parsed::Informational => continue,
                Parsed::Partial => panic!("partial head"),
            }
        }
    }

    /// Feed `wire` to the decoder `step` bytes at a time; the body and
    /// what is left over.
    fn decode_in_steps(mut framing: Framing, wire: &[u8], step: usize) -> (Vec<u8>, Vec<u8>) {
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut fed = 0;
        loop {
            match framing.decode(&mut buf).unwrap() {
                Step::Data(d) => body.extend_from_slice(&d),
                Step::End => return (body, buf.to_vec()),
                Step::More => {
                    assert!(fed < wire.len(), "decoder wants more than the wire has");
                    let end = (fed + step).min(wire.len());
                    buf.extend_from_slice(&wire[fed..end]);
                    fed = end;
                }
            }
        }
    }

    #[test]
    fn chunked_bodies_decode_at_every_split() {
        let wire = b"5;ext=1\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";
        for step in 1..wire.len() {
            let (body, rest) = decode_in_steps(Framing::Chunked(Chunk::Size), wire, step);
            assert_eq!(body, b"helloabcdefghijklmnopqrstuvwxyz", "step {step}");
            // Bytes after the terminator are the next answer's, untouched.
            assert!(b"NEXT".starts_with(&rest), "step {step}: {rest:?}");
        }
    }

    #[test]
    fn length_bodies_stop_at_their_length() {
        for step in [1, 3, 100] {
            let (body, rest) = decode_in_steps(Framing::Length(5), b"hello", step);
            assert_eq!(body, b"hello");
            assert!(rest.is_empty());
        }
        let mut buf = BytesMut::from("helloEXTRA");
        let mut f = Framing::Length(5);
        assert_eq!(
            f.decode(&mut buf).unwrap(),
            Step::Data(Bytes::from("hello"))
        );
        assert_eq!(f.decode(&mut buf).unwrap(), Step::End);
        assert_eq!(&buf[..], b"EXTRA");
    }

    #[test]
    fn bad_chunks_are_errors_not_hangs() {
        for wire in [&b"zz\r\n"[..], b"5\r\nhelloXX", b"ffffffffffffffffff\r\n"] {
            let mut f = Framing::Chunked(Chunk::Size);
            let mut buf = BytesMut::from(wire);
            let mut out = Ok(Step::More);
            for _ in 0..4 {
                out = f.decode(&mut buf);
                if !matches!(out, Ok(Step::Data(_))) {
                    break;
                }
            }
            assert!(matches!(out, Err(Error::Protocol(_))), "{wire:?}: {out:?}");
        }
    }

    #[test]
    fn heads_give_status_headers_and_framing() {
        let (h, f, keep) = head(
            "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 7\r\nx-request-id: abc\r\ncontent-length: 12\r\n\r\n",
        )
        .unwrap();
        assert_eq!(h.status(), 429);
        assert_eq!(h.headers()["retry-after"], "7");
        assert_eq!(h.headers()["x-request-id"], "abc");
        assert!(matches!(f, Framing::Length(12)) && keep);

        let (_, f, keep) = head("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n").unwrap();
        assert!(matches!(f, Framing::Chunked(Chunk::Size)) && keep);
        let (_, f, keep) = head("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n").unwrap();
        assert!(matches!(f, Framing::ToClose) && !keep);
        let (_, f, keep) =
            head("HTTP/1.1 200 OK\r\ncontent-length: 3\r\nConnection: Close\r\n\r\n").unwrap();
        assert!(matches!(f, Framing::Length(3)) && !keep);
        let (_, f, keep) = head("HTTP/1.0 200 OK\r\ncontent-length: 3\r\n\r\n").unwrap();
        assert!(matches!(f, Framing::Length(3)) && !keep);
        let (_, f, _) = head("HTTP/1.1 204 No Content\r\n\r\n").unwrap();
        assert!(matches!(f, Framing::Done));
        // An interim answer is skipped; the final one is the head.
        let (h, _, _) =
            head("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 0\r\n\r\n")
                .unwrap();
        assert_eq!(h.status(), 201);
    }

    #[test]
    fn bad_heads_are_protocol_errors() {
        for raw in [
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ncontent-length: 4\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
            "HTTP/1.1 2000 OK\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            assert!(matches!(head(raw), Err(Error::Protocol(_))), "{raw}");
        }
        let mut buf = BytesMut::from("HTTP/1.1 200 OK\r\ncontent-le");
        assert!(matches!(
            parse_head(&mut buf, &Method::POST),
            Ok(Parsed::Partial)
        ));
    }

    /// Header offsets are kept as u16: a head just under the bound keeps
    /// every value in place, one over it is refused, even when it came in
    /// one read.
    #[test]
    fn heads_up_to_the_bound_parse_and_longer_ones_are_refused() {
        let build = |pad: usize| {
            format!(
                "HTTP/1.1 200 OK\r\nx-pad: {}\r\nx-last: tail\r\ncontent-length: 0\r\n\r\n",
                "p".repeat(pad)
            )
        };
        let fixed = build(0).len();
        let (h, _, _) = head(&build(MAX_HEAD - fixed)).unwrap();
        assert_eq!(h.headers()["x-pad"].len(), MAX_HEAD - fixed);
        assert_eq!(h.headers()["x-last"], "tail");
        assert_eq!(h.headers()["content-length"], "0");
        let err = head(&build(MAX_HEAD - fixed + 1)).unwrap_err();
        assert!(
            matches!(err, Error::Protocol("response head too large")),
            "{err:?}"
        );
    }

    #[test]
    fn the_request_head_names_host_and_length() {
        let req = Request::post("http://127.0.0.1:9/v1/x?y=1")
            .header("content-type", "application/json")
            .header("content-length", "999")
            .body(Bytes::from_static(b"{}"))
            .unwrap();
        let mut out = Vec::new();
        encode_head(&mut out, &req, &HeaderValue::from_static("127.0.0.1:9"));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /v1/x?y=1 HTTP/1.1\r\nhost: 127.0.0.1:9\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n"
        );
    }

    /// A client connection and the server's end of it, both with small
    /// socket buffers so a large body cannot fit in them.
    async fn small_buffered_pair() -> (Conn, tokio::net::TcpStream) {
        let listener = tokio::net::TcpSocket::new_v4().unwrap();
        listener.set_recv_buffer_size(16 * 1024).unwrap();
        listener.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let listener = listener.listen(1).unwrap();
        let client = tokio::net::TcpSocket::new_v4().unwrap();
        client.set_send_buffer_size(16 * 1024).unwrap();
        let client = client.connect(addr).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let io = hyper_util::rt::TokioIo::new(hyper_rustls::MaybeHttpsStream::Http(
            hyper_util::rt::TokioIo::new(client),
        ));
        (Conn::new(io), server)
    }

    /// Reads until the request head has arrived (the body is left unread)
    /// and answers 413.
    async fn refuse_on_the_head(server: &mut tokio::net::TcpStream) {
        use tokio::io::AsyncReadExt;
        let mut got = Vec::new();
        let mut byte = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            assert_eq!(server.read(&mut byte).await.unwrap(), 1);
            got.push(byte[0]);
        }
        server
            .write_all(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 9\r\n\r\ntoo large")
            .await
            .unwrap();
    }

    async fn early_answer(conn: Conn) -> (StatusCode, Vec<u8>, bool) {
        let req = Request::post("/v1/chat/completions")
            .body(Bytes::from(vec![b'x'; 4 << 20]))
            .unwrap();
        let host = HeaderValue::from_static("upstream");
        let call = async {
            let (head, mut reader) = conn.exchange(&req, &host).await.unwrap();
            let mut body = Vec::new();
            while let Some(data) = std::future::poll_fn(|cx| reader.poll_data(cx))
                .await
                .unwrap()
            {
                body.extend_from_slice(&data);
            }
            (head.status(), body, reader.into_reusable().is_some())
        };
        tokio::time::timeout(std::time::Duration::from_secs(10), call)
            .await
            .expect("the early answer was not taken: the write waited for a reader")
    }

    #[tokio::test]
    async fn an_answer_before_the_body_is_taken_while_the_upstream_stops_reading() {
        let (conn, mut server) = small_buffered_pair().await;
        let (done, hold) = tokio::sync::oneshot::channel::<()>();
        let upstream = tokio::spawn(async move {
            refuse_on_the_head(&mut server).await;
            // The connection stays open and its body unread.
            let _ = hold.await;
        });
        let (status, body, reusable) = early_answer(conn).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(body, b"too large");
        assert!(!reusable, "half a body was sent: the connection is spent");
        drop(done);
        upstream.await.unwrap();
    }

    #[tokio::test]
    async fn an_answer_before_a_reset_is_taken_not_the_reset() {
        let (conn, mut server) = small_buffered_pair().await;
        tokio::spawn(async move {
            refuse_on_the_head(&mut server).await;
            // Closed with the body unread: the kernel resets the connection.
        });
        let (status, body, reusable) = early_answer(conn).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert_eq!(body, b"too large");
        assert!(!reusable);
    }
}
