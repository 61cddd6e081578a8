//! Bedrock's streams in the AWS event-stream framing, as the events the
//! stream decoders read. A ConverseStream frame becomes an event named by
//! its `:event-type` with its JSON payload; an InvokeModel `chunk` frame
//! becomes the Anthropic SSE event it wraps (so an Anthropic client's
//! stream passes through as Anthropic's own); an `exception` frame ends
//! the stream with its error. A bad length or checksum loses the framing:
//! the stream is broken (unlike an unreadable SSE event, it cannot be
//! skipped).

use bytes::{BufMut, Bytes, BytesMut};
use switchyard_protocol::bedrock::{chunk_event, FrameDecoder, FrameKind};
use switchyard_protocol::sse::SseEvent;

use crate::upstream::events::{EventsError, Framing};

pub const CONTENT_TYPE: &str = "application/vnd.amazon.eventstream";

pub struct EventFrames {
    frames: FrameDecoder,
    /// InvokeModel: unwrap `chunk` frames into Anthropic events.
    invoke: bool,
}

impl EventFrames {
    pub fn new(invoke: bool) -> EventFrames {
        EventFrames {
            frames: FrameDecoder::new(),
            invoke,
        }
    }
}

impl Framing for EventFrames {
    fn content_type(&self) -> &'static str {
        CONTENT_TYPE
    }

    fn push(&mut self, bytes: &[u8]) {
        self.frames.push(bytes);
    }

    fn next_event(&mut self) -> Result<Option<SseEvent>, EventsError> {
        let frame = match self.frames.next_frame() {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(None),
            Err(e) => return Err(EventsError::Broken(e.to_string())),
        };
        match frame.kind {
            FrameKind::Exception | FrameKind::Error => Err(EventsError::Upstream(
                super::errors::in_stream(&frame.name, &frame.payload),
            )),
            FrameKind::Event if self.invoke && frame.name == "chunk" => {
                match chunk_event(&frame.payload) {
                    Ok((kind, json)) => Ok(Some(sse(&kind, json))),
                    // Unreadable: passed on as such, counted and skipped.
                    Err(_) => Ok(Some(sse("chunk", frame.payload))),
                }
            }
            FrameKind::Event => Ok(Some(SseEvent {
                raw: Bytes::new(),
                event: Some(Bytes::from(frame.name)),
                data: Some(frame.payload),
            })),
        }
    }

    fn finish(&mut self) -> Result<Option<SseEvent>, EventsError> {
        self.frames
            .finish()
            .map_err(|e| EventsError::Broken(e.to_string()))?;
        Ok(None)
    }
}

/// `event: {kind}\ndata: {json}\n\n`, as Anthropic sends it.
fn sse(kind: &str, json: Bytes) -> SseEvent {
    let mut raw = BytesMut::with_capacity(kind.len() + json.len() + 16);
    raw.put_slice(b"event: ");
    raw.put_slice(kind.as_bytes());
    raw.put_slice(b"\ndata: ");
    raw.put_slice(&json);
    raw.put_slice(b"\n\n");
    SseEvent {
        raw: raw.freeze(),
        event: Some(Bytes::copy_from_slice(kind.as_bytes())),
        data: Some(json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    const ROOT: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/providers/bedrock/"
    );

    fn read(name: &str) -> Vec<u8> {
        std::fs::read(format!("{ROOT}{name}")).unwrap()
    }

    /// Every event of `wire` fed in pieces of `step` bytes, and how it ended.
    fn run(wire: &[u8], invoke: bool, step: usize) -> (Vec<SseEvent>, Result<(), String>) {
        let mut f = EventFrames::new(invoke);
        let mut events = Vec::new();
        for piece in wire.chunks(step.max(1)) {
            f.push(piece);
            loop {
                match f.next_event() {
                    Ok(Some(ev)) => events.push(ev),
                    Ok(None) => break,
                    Err(e) => return (events, Err(format!("{e:?}"))),
                }
            }
        }
        let end = f.finish().map(|_| ()).map_err(|e| format!("{e:?}"));
        (events, end)
    }

    #[test]
    fn converse_frames_are_named_events_whatever_the_cuts() {
        let wire = read("converse_stream_text.eventstream");
        let (whole, end) = run(&wire, false, wire.len());
        end.unwrap();
        let names: Vec<_> = whole
            .iter()
            .map(|e| e.event_str().unwrap().to_owned())
            .collect();
        assert_eq!(names.first().map(String::as_str), Some("messageStart"));
        assert_eq!(names.last().map(String::as_str), Some("metadata"));
        for step in [1, 3, 7, 64] {
            let (cut, end) = run(&wire, false, step);
            end.unwrap();
            assert_eq!(cut, whole, "pieces of {step}");
        }
    }

    #[test]
    fn invoke_chunks_become_anthropic_sse_events() {
        let (events, end) = run(&read("invoke_stream_anthropic.eventstream"), true, 5);
        end.unwrap();
        let kinds: Vec<_> = events.iter().map(|e| e.event_str().unwrap()).collect();
        assert_eq!(kinds.first(), Some(&"message_start"));
        assert_eq!(kinds.last(), Some(&"message_stop"));
        let last = std::str::from_utf8(&events.last().unwrap().raw).unwrap();
        assert!(last.starts_with("event: message_stop\ndata: {"), "{last}");
        assert!(!last.contains("amazon-bedrock-invocationMetrics"), "{last}");
        assert!(last.ends_with("\n\n"));
    }

    #[test]
    fn an_exception_frame_ends_the_stream_with_its_error() {
        for (file, code) in [
            (
                "stream_exception_throttlingException.eventstream",
                ErrorCode::RateLimited,
            ),
            (
                "stream_exception_serviceUnavailableException.eventstream",
                ErrorCode::Overloaded,
            ),
            (
                "stream_exception_validationException.eventstream",
                ErrorCode::ContextTooLong,
            ),
            (
                "stream_exception_modelStreamErrorException.eventstream",
                ErrorCode::UpstreamError,
            ),
        ] {
            let mut f = EventFrames::new(false);
            f.push(&read(file));
            match f.next_event() {
                Err(EventsError::Upstream(e)) => assert_eq!(e.code, code, "{file}"),
                other => panic!("{file}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_cut_or_corrupt_stream_is_broken_not_skipped() {
        let wire = read("converse_stream_text.eventstream");
        let (_, end) = run(&wire[..wire.len() - 3], false, 10);
        assert!(end.unwrap_err().contains("Broken"));
        let mut bad = wire.clone();
        bad[20] ^= 0x55;
        let (events, end) = run(&bad, false, wire.len());
        assert!(events.is_empty() && end.unwrap_err().contains("Broken"));
    }
}
