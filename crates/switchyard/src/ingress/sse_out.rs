//! The client's event stream: response head and the bytes of the served
//! stream (`reliability::relay`), written as they come.

use axum::response::Response;

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
    respond::event_stream(axum::body::Body::from_stream(body), headers)
}
