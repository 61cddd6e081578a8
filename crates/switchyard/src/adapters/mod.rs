//! ADAPTERS: one per upstream protocol, chosen by the provider's `protocol`.
//! A closed enum with static dispatch: adding a protocol is a compile error
//! everywhere it must be handled.

pub mod openai;
pub mod retry_after;

use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use switchyard_protocol::ir::Usage;
use tokio::time::Instant;

use crate::config::Protocol;
use crate::error::{ErrorCode, GatewayError};

/// The adapter a provider speaks through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Adapter {
    OpenAi,
    /// Configured, but its adapter is not built yet: routing skips it.
    Unsupported(Protocol),
}

impl Adapter {
    pub fn for_protocol(p: Protocol) -> Adapter {
        match p {
            Protocol::OpenAi => Adapter::OpenAi,
            other => Adapter::Unsupported(other),
        }
    }

    pub fn is_supported(self) -> bool {
        !matches!(self, Adapter::Unsupported(_))
    }
}

/// Per-request facts every adapter needs besides the body.
#[derive(Debug, Clone)]
pub struct CallInfo {
    pub request_id: String,
    pub traceparent: Option<HeaderValue>,
    /// The whole-request deadline (route `deadline`), if any.
    pub deadline: Option<Instant>,
}

/// A successful non-streamed answer, body as the client will get it.
#[derive(Debug)]
pub struct JsonAnswer {
    pub body: Bytes,
    pub usage: Usage,
    pub model: String,
    pub ttfb: Duration,
}

/// Read a whole body, at most `limit` bytes, before `deadline`.
pub async fn read_body(
    body: Incoming,
    limit: usize,
    deadline: Instant,
) -> Result<Bytes, GatewayError> {
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout_at(deadline, limited.collect()).await {
        Err(_) => Err(GatewayError::upstream(
            ErrorCode::Timeout,
            "upstream did not finish its answer in time",
        )),
        Ok(Err(e)) => Err(GatewayError::upstream(
            ErrorCode::ConnectionError,
            format!("upstream body could not be read: {e}"),
        )),
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

/// The earlier of a phase deadline and the whole-request deadline.
pub fn earliest(phase: Instant, whole: Option<Instant>) -> Instant {
    whole.map_or(phase, |w| w.min(phase))
}
