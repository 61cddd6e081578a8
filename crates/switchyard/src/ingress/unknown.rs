//! Paths the client listener does not serve: 404 `unknown_endpoint` in the
//! envelope of the door the path belongs to (Anthropic under
//! `/v1/messages`, OpenAI elsewhere), with `x-request-id` and a
//! decision-log line like any other request (contract §3).

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, Uri};

use super::{request_id, respond};
use crate::app::App;
use crate::doors::Door;
use crate::error::{ErrorCode, GatewayError};

pub async fn unknown_endpoint(
    State(app): State<App>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let live = app.live.load_full();
    let rid = request_id(&headers);
    let mut ctx = app.request_ctx(&rid, &headers, &live);
    let e = GatewayError::client(
        ErrorCode::UnknownEndpoint,
        format!("no such endpoint: {method} {}", uri.path()),
    );
    let resp = respond::error(Door::for_path(uri.path()), &e, &rid);
    ctx.finish(e.code.status().as_u16(), Some(&e));
    resp
}

/// `HEAD /`: a client (or a load balancer) checking the gateway is there.
pub async fn head_root() -> Response {
    StatusCode::OK.into_response()
}
