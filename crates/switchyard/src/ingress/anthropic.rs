//! `POST /v1/messages`: the Anthropic-compatible door. Routed exactly like
//! chat completions; errors in the Anthropic envelope.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;
use switchyard_protocol::{anthropic, passthrough};

use super::pipeline;
use crate::adapters::{Dialect, Inbound};
use crate::app::App;
use crate::error::GatewayError;

pub async fn messages(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    pipeline::door(app, headers, body, Dialect::Anthropic, decode).await
}

/// The raw fields are kept for the Anthropic→Anthropic passthrough; the IR
/// is decoded from them (the body is parsed once).
fn decode(text: &str) -> Result<Inbound<'_>, GatewayError> {
    let fields = passthrough::parse_object(text).map_err(|m| GatewayError::invalid(None, m))?;
    let ir =
        anthropic::decode_fields(&fields).map_err(|e| GatewayError::invalid(e.param, e.message))?;
    Ok(Inbound::Anthropic { fields, ir })
}
