//! The client's event stream: response head and the bytes of the served
//! stream (`reliability::relay`), written as they come.

use axum::response::Response;
use http::StatusCode;

use super::respond::{self, ServedHeaders};
use crate::adapters::deployment::DeploymentRt;
use crate::adapters::UpstreamStream;
use crate::reliability::ctx::RequestCtx;
use crate::reliability::relay::relay;
use std::sync::Arc;

pub use crate::reliability::relay::Relay;

pub fn stream(
    upstream: Box<UpstreamStream>,
    served: Arc<DeploymentRt>,
    with: Relay,
    ctx: RequestCtx,
    headers: &ServedHeaders<'_>,
) -> Response {
    let body = relay(upstream, served, with, ctx);
    let mut resp = respond::reply(
        StatusCode::OK,
        "text/event-stream",
        axum::body::Body::from_stream(body),
        headers,
    );
    let h = resp.headers_mut();
    h.insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache"),
    );
    // Tell nginx-style proxies in front of us not to buffer either.
    h.insert(
        crate::names::ACCEL_BUFFERING.clone(),
        http::HeaderValue::from_static("no"),
    );
    resp
}
