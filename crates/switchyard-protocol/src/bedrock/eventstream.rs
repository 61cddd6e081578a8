//! `application/vnd.amazon.eventstream` framing (MAPPING §16.4, FRAMING.md)
//! over the maintained codec in `aws-smithy-eventstream`.
//!
//! Unlike SSE, a bad frame cannot be skipped: once a length or CRC is wrong
//! the position of the next frame is unknown, so any error leaves the
//! decoder broken for good and the stream counts as interrupted.

use std::fmt;

use aws_smithy_eventstream::frame::{read_message_from, write_message_to};
use aws_smithy_types::event_stream::{Header, HeaderValue, Message};
use bytes::{Bytes, BytesMut};

/// Largest frame accepted (prelude, headers, payload and CRCs). Bedrock's
/// frames are a few hundred bytes; the cap keeps a corrupt or hostile length
/// from making the decoder buffer without bound.
pub const MAX_FRAME_LEN: u32 = 16 * 1024 * 1024;

/// total_length, headers_length, prelude_crc.
const PRELUDE_LEN: usize = 12;
/// A frame with no headers and no payload: prelude plus message CRC.
const MIN_FRAME_LEN: u32 = 16;

/// What `:message-type` says a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// A stream event (`messageStart`, `contentBlockDelta`, `chunk`…).
    Event,
    /// A modeled mid-stream failure (`throttlingException`…).
    Exception,
    /// A generic event-stream protocol error (`:error-code`).
    Error,
}

/// One decoded frame, reduced to what a Bedrock consumer reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: FrameKind,
    /// `:event-type`, `:exception-type` or `:error-code` (empty when absent).
    pub name: String,
    /// The JSON payload. For an `error` frame with an empty payload, its
    /// `:error-message` header as `{"message": …}`, so exceptions and errors
    /// read alike.
    pub payload: Bytes,
}

/// Why the stream's framing is lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// `total_length` below 16 or above [`MAX_FRAME_LEN`].
    Length(u32),
    /// The prelude's CRC does not match its first 8 bytes.
    PreludeChecksum,
    /// The codec rejected the frame (message CRC, header lengths, UTF-8…).
    Malformed(String),
    /// A `:message-type` other than `event`, `exception` or `error`.
    UnknownMessageType(String),
    /// The stream ended inside a frame, this many bytes in.
    Truncated(usize),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Length(n) => write!(f, "event-stream frame length {n} out of range"),
            FrameError::PreludeChecksum => f.write_str("event-stream prelude checksum mismatch"),
            FrameError::Malformed(e) => write!(f, "malformed event-stream frame: {e}"),
            FrameError::UnknownMessageType(t) => {
                write!(f, "unknown event-stream message type `{t}`")
            }
            FrameError::Truncated(n) => {
                write!(f, "event stream ended inside a frame ({n} bytes buffered)")
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Incremental frame decoder: bytes may arrive cut anywhere, several frames
/// per push. Feed with [`push`](Self::push), drain with
/// [`next_frame`](Self::next_frame) until `Ok(None)`, and call
/// [`finish`](Self::finish) at EOF. Holds at most one incomplete frame
/// (≤ [`MAX_FRAME_LEN`]) plus what was pushed and not yet drained.
#[derive(Debug, Default)]
pub struct FrameDecoder {
    buf: BytesMut,
    /// Set by the first error; every later call returns it.
    broken: Option<FrameError>,
}

impl FrameDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Append bytes from the body. Ignored once the decoder is broken.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.broken.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// Bytes received and not yet returned as frames.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame, `Ok(None)` if more bytes are needed.
    pub fn next_frame(&mut self) -> Result<Option<Frame>, FrameError> {
        self.next_message()
            .and_then(|m| m.map(frame_of).transpose())
            .map_err(|e| self.fail(e))
    }

    /// At EOF: an error if the stream stopped inside a frame (or was broken).
    pub fn finish(&mut self) -> Result<(), FrameError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        match self.buf.len() {
            0 => Ok(()),
            n => Err(self.fail(FrameError::Truncated(n))),
        }
    }

    /// The next complete message with all its headers (any value type).
    fn next_message(&mut self) -> Result<Option<Message>, FrameError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let Some(prelude) = self.buf.first_chunk::<PRELUDE_LEN>() else {
            return Ok(None);
        };
        let total = frame_len(prelude)?;
        if self.buf.len() < total {
            return Ok(None);
        }
        read_message(self.buf.split_to(total).freeze()).map(Some)
    }

    fn fail(&mut self, e: FrameError) -> FrameError {
        self.buf = BytesMut::new();
        self.broken = Some(e.clone());
        e
    }
}

/// The frame length a prelude announces, once its CRC and bounds check out.
fn frame_len(prelude: &[u8; PRELUDE_LEN]) -> Result<usize, FrameError> {
    let [t0, t1, t2, t3, h0, h1, h2, h3, c0, c1, c2, c3] = *prelude;
    let crc = crc32fast::hash(&[t0, t1, t2, t3, h0, h1, h2, h3]);
    if crc != u32::from_be_bytes([c0, c1, c2, c3]) {
        return Err(FrameError::PreludeChecksum);
    }
    let total = u32::from_be_bytes([t0, t1, t2, t3]);
    if !(MIN_FRAME_LEN..=MAX_FRAME_LEN).contains(&total) {
        return Err(FrameError::Length(total));
    }
    usize::try_from(total).map_err(|_| FrameError::Length(total))
}

/// One whole frame through the codec (both CRCs, header syntax).
fn read_message(frame: Bytes) -> Result<Message, FrameError> {
    read_message_from(frame).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// A string header's value (other value types count as absent).
fn header<'m>(m: &'m Message, name: &str) -> Option<&'m str> {
    m.headers()
        .iter()
        .find(|h| h.name().as_str() == name)
        .and_then(|h| h.value().as_string().ok())
        .map(|s| s.as_str())
}

/// A message as a [`Frame`]. A missing `:message-type` is an event, as
/// botocore reads it.
fn frame_of(m: Message) -> Result<Frame, FrameError> {
    let (kind, name_header) = match header(&m, ":message-type") {
        None | Some("event") => (FrameKind::Event, ":event-type"),
        Some("exception") => (FrameKind::Exception, ":exception-type"),
        Some("error") => (FrameKind::Error, ":error-code"),
        Some(other) => return Err(FrameError::UnknownMessageType(other.to_owned())),
    };
    let name = header(&m, name_header).unwrap_or_default().to_owned();
    let mut payload = m.payload().clone();
    if kind == FrameKind::Error && payload.is_empty() {
        if let Some(message) = header(&m, ":error-message") {
            let body = serde_json::json!({ "message": message });
            payload = Bytes::from(body.to_string());
        }
    }
    Ok(Frame {
        kind,
        name,
        payload,
    })
}

/// One frame with Bedrock's three string headers in its recorded order:
/// `:event-type` (`:exception-type`, `:error-code`), `:content-type:
/// application/json`, `:message-type`. Empty only if `name` exceeds the
/// codec's 32 KiB header value limit or the payload 4 GiB (no Bedrock frame
/// comes close).
pub fn encode_frame(kind: FrameKind, name: &str, payload: &[u8]) -> Bytes {
    let (name_header, message_type) = match kind {
        FrameKind::Event => (":event-type", "event"),
        FrameKind::Exception => (":exception-type", "exception"),
        FrameKind::Error => (":error-code", "error"),
    };
    let string = |v: &str| HeaderValue::String(v.to_owned().into());
    let message = Message::new(Bytes::copy_from_slice(payload))
        .add_header(Header::new(name_header, string(name)))
        .add_header(Header::new(":content-type", string("application/json")))
        .add_header(Header::new(":message-type", string(message_type)));
    let mut out = Vec::with_capacity(payload.len() + name.len() + 96);
    match write_message_to(&message, &mut out) {
        Ok(()) => Bytes::from(out),
        Err(_) => Bytes::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    use crate::bedrock::testdata::{json_file as json, read, DIR};

    /// File names in `sub` (relative to the bedrock folder) ending in `suffix`.
    fn files(sub: &str, suffix: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(format!("{}{sub}", DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(suffix))
            .collect();
        names.sort();
        names
    }

    /// Feed `chunks` in order, draining after each; then EOF.
    fn decode_chunks<'a>(
        chunks: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Vec<Frame>, FrameError> {
        let mut d = FrameDecoder::new();
        let mut out = Vec::new();
        for c in chunks {
            d.push(c);
            while let Some(f) = d.next_frame()? {
                out.push(f);
            }
        }
        d.finish()?;
        Ok(out)
    }

    fn decode(bytes: &[u8]) -> Result<Vec<Frame>, FrameError> {
        decode_chunks([bytes])
    }

    /// (name, type, value) of a header as `vectors.json` spells it.
    fn header_json(h: &Header) -> (String, &'static str, Value) {
        let v = h.value();
        let (ty, val) = if let Ok(b) = v.as_bool() {
            ("bool", Value::from(b))
        } else if let Ok(b) = v.as_byte() {
            ("byte", Value::from(b))
        } else if let Ok(n) = v.as_int16() {
            ("int16", Value::from(n))
        } else if let Ok(n) = v.as_int32() {
            ("int32", Value::from(n))
        } else if let Ok(n) = v.as_int64() {
            ("int64", Value::from(n))
        } else if let Ok(b) = v.as_byte_array() {
            (
                "bytes",
                Value::from(String::from_utf8_lossy(b).into_owned()),
            )
        } else if let Ok(s) = v.as_string() {
            ("string", Value::from(s.as_str()))
        } else if let Ok(t) = v.as_timestamp() {
            ("timestamp_secs", Value::from(t.secs()))
        } else if let Ok(u) = v.as_uuid() {
            let h = format!("{u:032x}");
            let uuid = format!(
                "{}-{}-{}-{}-{}",
                &h[..8],
                &h[8..12],
                &h[12..16],
                &h[16..20],
                &h[20..]
            );
            ("uuid", Value::from(uuid))
        } else {
            ("?", Value::Null)
        };
        (h.name().as_str().to_owned(), ty, val)
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// The valid codec vectors decode to the headers (all ten value types)
    /// and payload `vectors.json` lists, as a whole message and as a frame.
    #[test]
    fn valid_codec_vectors_decode_as_listed() {
        let vectors = json("eventstream-test-vectors/vectors.json");
        let valid = vectors["valid"].as_object().unwrap();
        assert_eq!(valid.len(), 5);
        for (name, want) in valid {
            let bytes = match want["hex"].as_str() {
                Some(h) => hex(h),
                None => read(&format!("eventstream-test-vectors/{name}")),
            };
            let mut d = FrameDecoder::new();
            d.push(&bytes);
            let m = d
                .next_message()
                .unwrap()
                .unwrap_or_else(|| panic!("{name}"));
            let got: Vec<Value> = m
                .headers()
                .iter()
                .map(|h| {
                    let (n, t, v) = header_json(h);
                    serde_json::json!([n, t, v])
                })
                .collect();
            assert_eq!(Value::from(got), want["headers"], "{name}");
            assert_eq!(m.payload(), want["payload"].as_str().unwrap(), "{name}");
            let f = decode(&bytes).unwrap();
            assert_eq!(f.len(), 1, "{name}");
            assert_eq!((f[0].kind, f[0].name.as_str()), (FrameKind::Event, ""));
            assert_eq!(f[0].payload, want["payload"].as_str().unwrap(), "{name}");
        }
    }

    /// Every invalid codec vector is an error, whole or byte by byte (never
    /// a frame, never "need more bytes" forever).
    #[test]
    fn invalid_codec_vectors_are_errors() {
        let vectors = json("eventstream-test-vectors/vectors.json");
        let invalid = vectors["invalid"].as_object().unwrap();
        assert_eq!(invalid.len(), 8);
        for name in invalid.keys() {
            let bytes = read(&format!("eventstream-test-vectors/{name}"));
            let whole = decode(&bytes);
            assert!(whole.is_err(), "{name}: {whole:?}");
            let split = decode_chunks(bytes.chunks(1));
            assert_eq!(split, whole, "{name}");
        }
        let bytes = read("eventstream-test-vectors/invalid_prelude_checksum.bin");
        assert_eq!(decode(&bytes), Err(FrameError::PreludeChecksum));
    }

    /// smithy-rs's streaming vector: three messages concatenated, fed in
    /// chunks of 1 to 11 bytes, give exactly three frames.
    #[test]
    fn concatenated_vectors_in_small_chunks() {
        let mut all = Vec::new();
        for n in [
            "valid_with_all_headers_and_payload.bin",
            "valid_empty_payload.bin",
            "valid_no_headers.bin",
        ] {
            all.extend(read(&format!("eventstream-test-vectors/{n}")));
        }
        let whole = decode(&all).unwrap();
        let payloads: Vec<&[u8]> = whole.iter().map(|f| &f.payload[..]).collect();
        assert_eq!(
            payloads,
            [&b"some payload"[..], b"", b"another test payload"]
        );
        for size in 1..=11 {
            assert_eq!(decode_chunks(all.chunks(size)).unwrap(), whole, "{size}");
        }
    }

    /// The frames a `*.decoded.json` lists, as [`Frame`]s.
    fn listed_frames(decoded: &Value) -> Vec<Frame> {
        let frames = decoded["frames"].as_array().unwrap();
        frames
            .iter()
            .map(|f| {
                let h = |n: &str| {
                    f["headers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|x| x["name"] == n)
                        .and_then(|x| x["value"].as_str())
                        .unwrap_or_default()
                        .to_owned()
                };
                let (kind, name) = match h(":message-type").as_str() {
                    "exception" => (FrameKind::Exception, h(":exception-type")),
                    _ => (FrameKind::Event, h(":event-type")),
                };
                let payload = f["payload"].as_str().unwrap().as_bytes().to_vec();
                Frame {
                    kind,
                    name,
                    payload: payload.into(),
                }
            })
            .collect()
    }

    /// Every `*.eventstream` fixture gives the frames its `*.decoded.json`
    /// lists (exception fixtures: one exception named in the file name),
    /// fed whole, byte by byte, and split in two at every position.
    #[test]
    fn fixtures_decode_the_same_however_cut() {
        let names = files("", ".eventstream");
        assert_eq!(names.len(), 12);
        for name in &names {
            let bytes = read(name);
            let stem = name.trim_end_matches(".eventstream");
            let want = match stem.strip_prefix("stream_exception_") {
                Some(exc) => {
                    let f = decode(&bytes).unwrap();
                    assert_eq!(f.len(), 1, "{name}");
                    assert_eq!((f[0].kind, f[0].name.as_str()), (FrameKind::Exception, exc));
                    f
                }
                None => listed_frames(&json(&format!("{stem}.decoded.json"))),
            };
            assert_eq!(decode(&bytes).unwrap(), want, "{name} whole");
            assert_eq!(
                decode_chunks(bytes.chunks(1)).unwrap(),
                want,
                "{name} bytes"
            );
            for cut in 0..=bytes.len() {
                let (a, b) = bytes.split_at(cut);
                assert_eq!(decode_chunks([a, b]).unwrap(), want, "{name} cut {cut}");
            }
        }
    }

    /// Re-encoding each fixture frame with [`encode_frame`] gives the exact
    /// bytes, CRCs included, wherever the fixture uses the 3-header layout
    /// (all of them do); each frame sits at the offset, with the lengths and
    /// CRCs, its `*.decoded.json` lists.
    #[test]
    fn encode_frame_reproduces_fixture_bytes() {
        let layout = |m: &Message| -> Vec<String> {
            m.headers()
                .iter()
                .map(|h| h.name().as_str().to_owned())
                .collect()
        };
        let (mut seen, mut compared) = (0, 0);
        for name in files("", ".eventstream") {
            let bytes = read(&name);
            let decoded = name.replace(".eventstream", ".decoded.json");
            let listed = std::fs::read(format!("{}{decoded}", DIR))
                .map(|b| serde_json::from_slice::<Value>(&b).unwrap())
                .ok();
            let mut d = FrameDecoder::new();
            d.push(&bytes);
            let mut at = 0;
            for i in 0.. {
                let Some(m) = d.next_message().unwrap() else {
                    break;
                };
                let len = bytes.len() - at - d.buffered();
                let original = &bytes[at..at + len];
                if let Some(l) = &listed {
                    let crc =
                        |b: &[u8]| format!("0x{:08x}", u32::from_be_bytes(b.try_into().unwrap()));
                    let f = &l["frames"][i];
                    assert_eq!(f["offset"], at, "{name} {i}");
                    assert_eq!(f["total_length"], len, "{name} {i}");
                    assert_eq!(f["prelude_crc"], crc(&original[8..12]), "{name} {i}");
                    assert_eq!(f["message_crc"], crc(&original[len - 4..]), "{name} {i}");
                }
                at += len;
                seen += 1;
                let f = frame_of(m.clone()).unwrap();
                let first = match f.kind {
                    FrameKind::Exception => ":exception-type",
                    _ => ":event-type",
                };
                if layout(&m) != [first, ":content-type", ":message-type"] {
                    continue;
                }
                assert_eq!(header(&m, ":content-type"), Some("application/json"));
                let again = encode_frame(f.kind, &f.name, &f.payload);
                assert_eq!(&again[..], original, "{name} at {at}");
                compared += 1;
            }
            assert_eq!(at, bytes.len(), "{name}");
        }
        assert_eq!((seen, compared), (147, 147));
    }

    /// Any single corrupted byte in any fixture ends in an error (both CRCs
    /// cover every byte), never a panic or a silent wait.
    #[test]
    fn a_flipped_byte_anywhere_breaks_the_stream() {
        for name in files("", ".eventstream") {
            let bytes = read(&name);
            for i in 0..bytes.len() {
                let mut bad = bytes.clone();
                bad[i] ^= 0xff;
                let r = decode(&bad);
                assert!(r.is_err(), "{name} byte {i}: {r:?}");
            }
        }
    }

    /// A length above the cap fails as soon as the prelude is in; a broken
    /// decoder stays broken and stops buffering.
    #[test]
    fn oversized_frame_fails_at_once_and_stays_broken() {
        let total = MAX_FRAME_LEN + 1;
        let mut prelude = total.to_be_bytes().to_vec();
        prelude.extend(0u32.to_be_bytes());
        let crc = crc32fast::hash(&prelude);
        prelude.extend(crc.to_be_bytes());
        let mut d = FrameDecoder::new();
        d.push(&prelude);
        assert_eq!(d.next_frame(), Err(FrameError::Length(total)));
        let good = encode_frame(FrameKind::Event, "messageStart", b"{}");
        d.push(&good);
        assert_eq!(d.buffered(), 0);
        assert_eq!(d.next_frame(), Err(FrameError::Length(total)));
        assert_eq!(d.finish(), Err(FrameError::Length(total)));
    }

    #[test]
    fn too_short_frame_and_truncation_are_errors() {
        let mut prelude = 15u32.to_be_bytes().to_vec();
        prelude.extend(0u32.to_be_bytes());
        let crc = crc32fast::hash(&prelude);
        prelude.extend(crc.to_be_bytes());
        assert_eq!(decode(&prelude), Err(FrameError::Length(15)));
        let good = encode_frame(FrameKind::Event, "messageStop", b"{}");
        assert_eq!(
            decode(&good[..good.len() - 1]),
            Err(FrameError::Truncated(good.len() - 1))
        );
        assert_eq!(decode(&good[..5]), Err(FrameError::Truncated(5)));
        assert_eq!(decode(b""), Ok(vec![]));
    }

    /// Exception and error frames round-trip; an error frame's
    /// `:error-message` header becomes a `{"message"}` payload.
    #[test]
    fn exception_and_error_frames() {
        let exc = encode_frame(FrameKind::Exception, "throttlingException", b"{\"a\":1}");
        let err = Message::new(Bytes::new())
            .add_header(Header::new(
                ":message-type",
                HeaderValue::String("error".into()),
            ))
            .add_header(Header::new(":error-code", HeaderValue::String("E1".into())))
            .add_header(Header::new(
                ":error-message",
                HeaderValue::String("bad \"thing\"".into()),
            ));
        let mut all = exc.to_vec();
        write_message_to(&err, &mut all).unwrap();
        let f = decode(&all).unwrap();
        assert_eq!(f[0].kind, FrameKind::Exception);
        assert_eq!(f[0].name, "throttlingException");
        assert_eq!(f[0].payload, &b"{\"a\":1}"[..]);
        assert_eq!((f[1].kind, f[1].name.as_str()), (FrameKind::Error, "E1"));
        let body: Value = serde_json::from_slice(&f[1].payload).unwrap();
        assert_eq!(body["message"], "bad \"thing\"");
    }

    #[test]
    fn unknown_message_type_is_an_error() {
        let m = Message::new(&b"{}"[..]).add_header(Header::new(
            ":message-type",
            HeaderValue::String("gossip".into()),
        ));
        let mut bytes = Vec::new();
        write_message_to(&m, &mut bytes).unwrap();
        let e = FrameError::UnknownMessageType("gossip".into());
        assert_eq!(decode(&bytes), Err(e));
    }

    proptest::proptest! {
        /// Arbitrary bytes after a good frame, cut anywhere, never panic
        /// and never hide the good frame.
        #[test]
        fn arbitrary_bytes_never_panic(
            junk in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            cut in 0usize..400,
        ) {
            let mut bytes = encode_frame(FrameKind::Event, "chunk", b"{\"p\":\"x\"}").to_vec();
            bytes.extend(&junk);
            let (a, b) = bytes.split_at(cut.min(bytes.len()));
            let mut d = FrameDecoder::new();
            let mut frames = 0;
            for c in [a, b] {
                d.push(c);
                while let Ok(Some(_)) = d.next_frame() {
                    frames += 1;
                }
            }
            let _ = d.finish();
            proptest::prop_assert!(frames >= 1);
        }
    }
}
