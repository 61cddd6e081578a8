//! Reading the request body within `server.max_body` and
//! `server.body_timeout`: a client that dribbles its body (or stops sending
//! it) gets 408 and loses the connection instead of holding it open.

use axum::body::Body;
use bytes::Bytes;
use http::HeaderMap;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::error::{ErrorCode, GatewayError};

pub async fn read(
    body: Body,
    headers: &HeaderMap,
    server: &crate::config::Server,
) -> Result<Bytes, GatewayError> {
    let max = server.max_body;
    let too_large = || {
        GatewayError::client(
            ErrorCode::PayloadTooLarge,
            format!("request body is larger than server.max_body ({max} bytes)"),
        )
    };
    let declared = headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(too_large());
    }
    let whole = tokio::time::timeout(server.body_timeout, Limited::new(body, max).collect());
    let Ok(collected) = whole.await else {
        return Err(GatewayError::client(
            ErrorCode::RequestTimeout,
            format!(
                "the request body did not arrive within server.body_timeout ({} s)",
                server.body_timeout.as_secs_f64()
            ),
        ));
    };
    match collected {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(e) => Err(GatewayError::invalid(
            None,
            format!("could not read the request body: {e}"),
        )),
    }
}

/// The body as text, or a precise error.
pub fn utf8(body: &Bytes) -> Result<&str, GatewayError> {
    std::str::from_utf8(body).map_err(|e| {
        GatewayError::invalid(
            None,
            format!(
                "request body is not valid UTF-8 (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )
    })
}
