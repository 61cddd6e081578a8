//! `POST /v1/messages`: the Anthropic-compatible door. Routed exactly like
//! chat completions; its dialect lives in `doors::anthropic_messages`.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;

use super::pipeline;
use crate::app::App;
use crate::doors::Door;

pub async fn messages(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    pipeline::door(app, headers, body, Door::AnthropicMessages).await
}
