//! Reads an upstream response body as SSE events, one at a time, without
//! buffering the stream: each network chunk goes into the decoder and out
//! come whole events.

use crate::upstream::client::UpstreamBody;
use http_body_util::BodyExt;
use switchyard_protocol::sse::{SseDecoder, SseEvent};

#[derive(Debug)]
pub enum EventsError {
    /// The connection broke or the body was cut.
    Body(String),
    /// One event grew past the decoder's cap.
    TooLarge,
}

pub struct UpstreamEvents {
    body: UpstreamBody,
    decoder: SseDecoder,
    eof: bool,
}

impl UpstreamEvents {
    pub fn new(body: UpstreamBody) -> Self {
        UpstreamEvents {
            body,
            decoder: SseDecoder::new(),
            eof: false,
        }
    }

    /// The next event; `Ok(None)` at a clean end of the body.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, EventsError> {
        loop {
            match self.decoder.next_event() {
                Ok(Some(ev)) => return Ok(Some(ev)),
                Ok(None) => {}
                Err(_) => return Err(EventsError::TooLarge),
            }
            if self.eof {
                return Ok(self.decoder.finish());
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
