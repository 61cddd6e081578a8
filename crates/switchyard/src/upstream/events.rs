//! Reads an upstream response body as events, one at a time, without
//! buffering the stream: each network chunk goes into the decoder and out
//! come whole events. SSE is the usual framing; a provider with another
//! (Bedrock's binary event-stream) brings its own [`Framing`], which hands
//! out each frame as the event its stream decoder reads.

use crate::upstream::client::UpstreamBody;
use http_body_util::BodyExt;
use switchyard_protocol::sse::{SseDecoder, SseEvent};

#[derive(Debug)]
pub enum EventsError {
    /// The connection broke or the body was cut.
    Body(String),
    /// One event grew past the decoder's cap.
    TooLarge,
    /// The framing is lost (a bad checksum or length): nothing after it
    /// can be read.
    Broken(String),
    /// The upstream reported an error inside the stream (an exception
    /// frame), classified by its provider.
    Upstream(crate::error::GatewayError),
}

/// A stream framing other than SSE, brought by the provider whose streams
/// use it: bytes in, events out.
pub trait Framing: Send {
    /// The `content-type` a stream in this framing is sent with.
    fn content_type(&self) -> &'static str;
    fn push(&mut self, bytes: &[u8]);
    /// The next whole event in what was pushed, if there is one.
    fn next_event(&mut self) -> Result<Option<SseEvent>, EventsError>;
    /// At the end of the body: a partial frame left over is an error.
    fn finish(&mut self) -> Result<Option<SseEvent>, EventsError>;
}

enum Decoder {
    Sse(SseDecoder),
    Other(Box<dyn Framing>),
}

impl Decoder {
    fn push(&mut self, bytes: &[u8]) {
        match self {
            Decoder::Sse(d) => d.push(bytes),
            Decoder::Other(d) => d.push(bytes),
        }
    }

    fn next_event(&mut self) -> Result<Option<SseEvent>, EventsError> {
        match self {
            Decoder::Sse(d) => d.next_event().map_err(|_| EventsError::TooLarge),
            Decoder::Other(d) => d.next_event(),
        }
    }

    fn finish(&mut self) -> Result<Option<SseEvent>, EventsError> {
        match self {
            Decoder::Sse(d) => Ok(d.finish()),
            Decoder::Other(d) => d.finish(),
        }
    }
}

pub struct UpstreamEvents {
    body: UpstreamBody,
    decoder: Decoder,
    eof: bool,
}

impl UpstreamEvents {
    /// The body's events: SSE unless `framing` says otherwise.
    pub fn new(body: UpstreamBody, framing: Option<Box<dyn Framing>>) -> Self {
        UpstreamEvents {
            body,
            decoder: framing.map_or_else(|| Decoder::Sse(SseDecoder::new()), Decoder::Other),
            eof: false,
        }
    }

    /// The next event; `Ok(None)` at a clean end of the body.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, EventsError> {
        loop {
            if let Some(ev) = self.decoder.next_event()? {
                return Ok(Some(ev));
            }
            if self.eof {
                return self.decoder.finish();
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.decoder.push(&data);
                    }
                }
                Some(Err(e)) => return Err(EventsError::Body(e.to_string())),
                None => self.eof = true,
            }
        }
    }
}

/// What [`UpstreamEvents`] does to a body, without a connection (issue 22):
/// the HTTP/1.1 body decoder ([`super::h1::Framing`], as the reader drives
/// it) and the SSE decoder on its output, fed the wire in arbitrary reads.
/// A valid chunked stream gives the same events whatever the chunk sizes
/// and the reads; a mangled or arbitrary wire gives an error or a body no
/// longer than itself, in a bounded number of steps, and never a panic.
#[cfg(test)]
mod tests {
    use crate::prop::config;
    use bytes::BytesMut;
    use proptest::prelude::*;
    use proptest::sample::Index;
    use switchyard_protocol::sse::{SseDecoder, SseEvent};

    use crate::upstream::h1::{Chunk, Framing, Step};

    const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/providers/");
    const STREAMS: [&str; 4] = [
        "openai/stream_tool_call.sse",
        "anthropic/stream_tool_use.sse",
        "gemini/stream_function_call_partial_args.sse",
        "openai-responses/stream_text.sse",
    ];

    fn stream(i: &Index) -> Vec<u8> {
        let name = i.get(&STREAMS);
        std::fs::read(format!("{ROOT}{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    /// The decoder over `wire` delivered in the pieces `cuts` makes: the
    /// body, its events, and whether the framing said the body ended.
    /// Each step takes bytes, or waits for a read, so the steps are bounded.
    fn run(mut framing: Framing, wire: &[u8], cuts: &[Index]) -> (Vec<u8>, Vec<SseEvent>, bool) {
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        at.push(wire.len());
        at.sort_unstable();
        let mut reads = at.into_iter();
        let (mut fed, mut buf) = (0, BytesMut::new());
        let (mut body, mut events, mut sse) = (Vec::new(), Vec::new(), SseDecoder::new());
        // Ended by the framing, out of reads, or an error; never by the
        // step bound.
        let (mut ended, mut stopped) = (false, false);
        for _ in 0..=4 * wire.len() + cuts.len() + 8 {
            match framing.decode(&mut buf) {
                Ok(Step::Data(d)) => {
                    assert!(!d.is_empty(), "a step that takes nothing");
                    body.extend_from_slice(&d);
                    sse.push(&d);
                    while let Some(ev) = sse.next_event().expect("small bodies") {
                        events.push(ev);
                    }
                    continue;
                }
                Ok(Step::More) => {
                    if let Some(to) = reads.next() {
                        buf.extend_from_slice(&wire[fed..to]);
                        fed = to;
                        continue;
                    }
                }
                Ok(Step::End) => ended = true,
                Err(_) => {}
            }
            stopped = true;
            break;
        }
        assert!(stopped, "no end after a step per byte");
        assert!(
            body.len() <= wire.len(),
            "{} body bytes from {}",
            body.len(),
            wire.len()
        );
        events.extend(sse.finish());
        (body, events, ended)
    }

    /// `body` in HTTP/1.1 chunks of the sizes `sizes` gives (cycled), with
    /// a chunk extension now and then and a trailer.
    fn chunked(body: &[u8], sizes: &[usize]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rest = body;
        for (k, size) in sizes.iter().cycle().enumerate() {
            if rest.is_empty() {
                break;
            }
            let (piece, after) = rest.split_at((*size).clamp(1, rest.len()));
            let ext = if k % 3 == 1 { ";ext=\"a b\"" } else { "" };
            out.extend_from_slice(format!("{:X}{ext}\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
            rest = after;
        }
        out.extend_from_slice(b"0\r\nx-trailer: 1\r\n\r\n");
        out
    }

    fn whole_events(body: &[u8]) -> Vec<SseEvent> {
        let mut sse = SseDecoder::new();
        sse.push(body);
        let mut out = Vec::new();
        while let Some(ev) = sse.next_event().unwrap() {
            out.push(ev);
        }
        out.extend(sse.finish());
        out
    }

    fn framings(len: u64) -> [Framing; 4] {
        [
            Framing::Chunked(Chunk::Size),
            Framing::Length(len),
            Framing::Length(len / 2 + 1),
            Framing::ToClose,
        ]
    }

    proptest! {
        #![proptest_config(config(128))]

        /// A real stream, chunked any way and read in any pieces: the body
        /// and the events are the stream's own.
        #[test]
        fn chunked_streams_decode_whatever_the_reads(
            f in any::<Index>(),
            sizes in prop::collection::vec(1..4096usize, 1..8),
            cuts in prop::collection::vec(any::<Index>(), 0..16),
        ) {
            let body = stream(&f);
            let wire = chunked(&body, &sizes);
            let (got, events, ended) = run(Framing::Chunked(Chunk::Size), &wire, &cuts);
            prop_assert!(ended);
            prop_assert_eq!(&got, &body);
            prop_assert_eq!(events, whole_events(&body));
        }

        /// The same wire cut, flipped and grown: an error or a shorter
        /// body, every framing, no panic.
        #[test]
        fn mangled_wires_end(
            f in any::<Index>(),
            sizes in prop::collection::vec(1..512usize, 1..4),
            edits in prop::collection::vec((any::<Index>(), any::<u8>(), 0..4u8), 1..6),
            cuts in prop::collection::vec(any::<Index>(), 0..16),
        ) {
            let mut wire = chunked(&stream(&f), &sizes);
            for (at, byte, how) in edits {
                let p = at.index(wire.len() + 1);
                match how {
                    0 => wire.truncate(p),
                    1 => wire.insert(p, byte),
                    2 if p < wire.len() => wire[p] ^= byte | 1,
                    _ => {
                        let end = (p + usize::from(byte)).min(wire.len());
                        wire.drain(p..end);
                    }
                }
            }
            for framing in framings(wire.len() as u64) {
                run(framing, &wire, &cuts);
            }
        }

        #[test]
        fn arbitrary_wires_end(
            wire in prop::collection::vec(any::<u8>(), 0..1024),
            cuts in prop::collection::vec(any::<Index>(), 0..16),
        ) {
            for framing in framings(wire.len() as u64) {
                run(framing, &wire, &cuts);
            }
        }
    }
}
