//! Incremental Server-Sent Events codec.
//!
//! The decoder follows the mini-redis frame pattern: bytes are appended to a
//! `BytesMut`; an event is only cut out once its terminating blank line is in
//! the buffer, so a network read that splits an event (or a CRLF pair) at any
//! byte just waits for more. Cut-out events are `Bytes` slices of the
//! original buffer: forwarding one downstream copies nothing.

use bytes::{Bytes, BytesMut};

/// One decoded event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The event exactly as received, terminator included.
    pub raw: Bytes,
    /// The `event:` field, if any.
    pub event: Option<Bytes>,
    /// The `data:` lines joined with `\n`; `None` for a comment-only event
    /// (such as `: keep-alive`).
    pub data: Option<Bytes>,
}

impl SseEvent {
    /// The data as UTF-8 text (`None` when absent or not UTF-8).
    pub fn data_str(&self) -> Option<&str> {
        self.data
            .as_deref()
            .and_then(|d| std::str::from_utf8(d).ok())
    }

    /// The event name as UTF-8 text.
    pub fn event_str(&self) -> Option<&str> {
        self.event
            .as_deref()
            .and_then(|d| std::str::from_utf8(d).ok())
    }

    /// True for OpenAI's `data: [DONE]` sentinel.
    pub fn is_done_sentinel(&self) -> bool {
        self.data.as_deref().map(|d| d.trim_ascii()) == Some(b"[DONE]")
    }
}

/// Incremental decoder. Feed it chunks with [`SseDecoder::push`], take events
/// with [`SseDecoder::next_event`], and call [`SseDecoder::finish`] at EOF.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: BytesMut,
    /// Where the line being scanned starts (an empty line ends the event).
    line_start: usize,
    /// How far the buffer was scanned without finding a line end: a long
    /// line arriving in small pieces is scanned once, not once per piece
    /// (a 1 MiB line read a byte at a time was 5·10^11 bytes of scanning).
    scanned: usize,
}

/// Largest event we accept before declaring the stream broken (a stuck upstream
/// must not grow our memory without bound).
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTooLarge;

impl SseDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes buffered but not yet returned as an event.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next complete event, if the buffer holds one.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, EventTooLarge> {
        loop {
            match self.find_event_end() {
                Some(end) => {
                    let raw = self.buf.split_to(end).freeze();
                    self.line_start = 0;
                    self.scanned = 0;
                    if let Some(ev) = parse_event(raw) {
                        return Ok(Some(ev));
                    }
                    // A lone blank line: nothing to report, keep going.
                }
                None if self.buf.len() > MAX_EVENT_BYTES => return Err(EventTooLarge),
                None => return Ok(None),
            }
        }
    }

    /// At end of stream: an unterminated trailing event, if any bytes remain.
    pub fn finish(&mut self) -> Option<SseEvent> {
        let raw = self.buf.split().freeze();
        // Reset on every path: a decoder asked again after its end must
        // not scan from offsets into bytes it no longer holds.
        self.line_start = 0;
        self.scanned = 0;
        if raw.iter().all(|b| b.is_ascii_whitespace()) {
            return None;
        }
        parse_event(raw)
    }

    /// Scan line by line from where the last scan stopped; an empty line
    /// ends the event. Returns the end offset (terminator included).
    fn find_event_end(&mut self) -> Option<usize> {
        let buf = &self.buf[..];
        loop {
            let Some(rel) = memchr::memchr2(b'\n', b'\r', &buf[self.scanned..]) else {
                self.scanned = buf.len();
                return None;
            };
            let eol = self.scanned + rel;
            let eol_len = if buf[eol] == b'\r' {
                match buf.get(eol + 1) {
                    Some(b'\n') => 2,
                    Some(_) => 1,
                    // A CR at the very end: it may be half of a CRLF.
                    None => {
                        self.scanned = eol;
                        return None;
                    }
                }
            } else {
                1
            };
            let next = eol + eol_len;
            if eol == self.line_start {
                return Some(next);
            }
            self.line_start = next;
            self.scanned = next;
        }
    }
}

/// Parse one event's lines. Returns `None` when the event has no fields at all
/// (blank lines only).
fn parse_event(raw: Bytes) -> Option<SseEvent> {
    let mut event = None;
    let mut data: Option<Bytes> = None;
    let mut joined: Option<BytesMut> = None;
    let mut saw_any = false;
    for (line_start, line_end) in lines(&raw) {
        let line = &raw[line_start..line_end];
        if line.is_empty() {
            continue;
        }
        saw_any = true;
        if line[0] == b':' {
            continue;
        }
        let (name, value_start) = match memchr::memchr(b':', line) {
            Some(i) => {
                let mut v = i + 1;
                if line.get(v) == Some(&b' ') {
                    v += 1;
                }
                (&line[..i], line_start + v)
            }
            None => (line, line_end),
        };
        let value = raw.slice(value_start..line_end);
        match name {
            b"event" => event = Some(value),
            b"data" => match (&mut joined, &data) {
                (Some(j), _) => {
                    j.extend_from_slice(b"\n");
                    j.extend_from_slice(&value);
                }
                (None, Some(first)) => {
                    let mut j = BytesMut::from(&first[..]);
                    j.extend_from_slice(b"\n");
                    j.extend_from_slice(&value);
                    joined = Some(j);
                }
                (None, None) => data = Some(value),
            },
            _ => {} // id:, retry: and unknown fields carry nothing we use
        }
    }
    if !saw_any {
        return None;
    }
    let data = joined.map(BytesMut::freeze).or(data);
    Some(SseEvent { raw, event, data })
}

/// (start, end) of each line, terminators excluded.
fn lines(buf: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        if pos >= buf.len() {
            return None;
        }
        let start = pos;
        match memchr::memchr2(b'\n', b'\r', &buf[pos..]) {
            Some(rel) => {
                let eol = pos + rel;
                pos = if buf[eol] == b'\r' && buf.get(eol + 1) == Some(&b'\n') {
                    eol + 2
                } else {
                    eol + 1
                };
                Some((start, eol))
            }
            None => {
                pos = buf.len();
                Some((start, buf.len()))
            }
        }
    })
}

// === encoding ===

/// `data: <payload>\n\n`
pub fn data_frame(payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

/// `event: <name>\ndata: <payload>\n\n`
pub fn named_frame(name: &str, payload: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(payload.len() + name.len() + 16);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(payload);
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

pub const DONE_FRAME: &[u8] = b"data: [DONE]\n\n";
pub const KEEPALIVE_FRAME: &[u8] = b": keep-alive\n\n";

#[cfg(test)]
mod tests;
