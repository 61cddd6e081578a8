//! Turning a rendered answer into an HTTP response, applying delays and faults.

use crate::behavior::{Behavior, Fault};
use crate::render::{Midstream, Payload, Rendered};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Full, StreamBody};
use hyper::body::Frame;
use std::io;
use std::time::Duration;
use tokio::sync::mpsc;

/// Response body type of the mock server.
pub type Body = BoxBody<Bytes, io::Error>;

/// A complete body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

/// One step of a streamed body.
#[derive(Debug)]
pub enum Step {
    Data(Bytes),
    Sleep(u64),
    /// Abort the connection mid-body.
    Abort,
    /// Send nothing more, keep the connection open until the client goes away.
    Stall,
}

/// A body that plays `steps` from a spawned task, one frame per data step.
pub fn streamed(steps: Vec<Step>) -> Body {
    let (tx, mut rx) = mpsc::channel::<Result<Frame<Bytes>, io::Error>>(8);
    tokio::spawn(async move {
        for step in steps {
            match step {
                Step::Data(b) => {
                    if tx.send(Ok(Frame::data(b))).await.is_err() {
                        return;
                    }
                }
                Step::Sleep(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
                Step::Abort => {
                    // Let hyper write out what was sent (it flushes when the body is pending)
                    // before the error aborts the connection.
                    while tx.capacity() < tx.max_capacity() {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let err = io::Error::new(io::ErrorKind::ConnectionAborted, "mock fault: cut");
                    let _ = tx.send(Err(err)).await;
                    return;
                }
                Step::Stall => {
                    tx.closed().await;
                    return;
                }
            }
        }
    });
    StreamBody::new(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))).boxed()
}

/// Build a response with `status`, `content_type` and extra headers.
pub fn response(
    status: u16,
    content_type: Option<&str>,
    headers: impl IntoIterator<Item = (String, String)>,
    body: Body,
) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    if let Some(ct) = content_type {
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_str(ct).expect("content type"),
        );
    }
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            http::header::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(&v),
        ) {
            h.insert(name, value);
        }
    }
    resp
}

fn drip(all: Bytes, b: &Behavior, steps: &mut Vec<Step>) {
    let size = b.drip_bytes.max(1);
    let mut off = 0;
    while off < all.len() {
        if off > 0 && b.drip_delay_ms > 0 {
            steps.push(Step::Sleep(b.drip_delay_ms));
        }
        let end = (off + size).min(all.len());
        steps.push(Step::Data(all.slice(off..end)));
        off = end;
    }
}

/// The body of a successful answer under behavior `b`.
pub fn answer_body(payload: Payload, bad_event: Bytes, midstream: Midstream, b: &Behavior) -> Body {
    let mut steps = Vec::new();
    if b.fault == Some(Fault::FirstEventDelay) && b.first_event_delay_ms > 0 {
        steps.push(Step::Sleep(b.first_event_delay_ms));
    }
    match payload {
        Payload::Full(bytes) => {
            let half = bytes.slice(..bytes.len() / 2);
            match b.fault {
                Some(Fault::MalformedJson) => return full(half),
                Some(Fault::Cut) => steps.extend([Step::Data(half), Step::Abort]),
                Some(Fault::Stall) => steps.extend([Step::Data(half), Step::Stall]),
                Some(Fault::Drip) => drip(bytes, b, &mut steps),
                Some(Fault::FirstEventDelay) => steps.push(Step::Data(bytes)),
                _ => return full(bytes),
            }
        }
        Payload::Events(mut events) => {
            let n = b.after_events.min(events.len());
            let mut tail = None;
            match b.fault {
                Some(Fault::BadEvent | Fault::MalformedJson) => events.insert(n, bad_event),
                Some(Fault::MidstreamError) => {
                    events.truncate(n);
                    events.push(match &b.error_message {
                        Some(m) => crate::json::with_message(&midstream(n), m),
                        None => midstream(n),
                    });
                }
                Some(Fault::Cut) => {
                    events.truncate(n);
                    tail = Some(Step::Abort);
                }
                Some(Fault::Stall) => {
                    events.truncate(n);
                    tail = Some(Step::Stall);
                }
                _ => {}
            }
            if b.fault == Some(Fault::Drip) {
                drip(Bytes::from(events.concat()), b, &mut steps);
            } else {
                for (i, e) in events.into_iter().enumerate() {
                    if i > 0 && b.chunk_delay_ms > 0 {
                        steps.push(Step::Sleep(b.chunk_delay_ms));
                    }
                    steps.push(Step::Data(e));
                }
            }
            steps.extend(tail);
        }
    }
    streamed(steps)
}

/// The full response for a rendered answer.
pub fn answer(r: Rendered, b: &Behavior) -> Response<Body> {
    let headers = r
        .headers
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .chain(b.headers.clone());
    let body = answer_body(r.payload, r.bad_event, r.midstream_error, b);
    response(200, Some(r.content_type), headers, body)
}
