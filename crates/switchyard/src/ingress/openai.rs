//! `POST /v1/chat/completions`: the OpenAI-compatible door.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;

use super::pipeline;
use crate::app::App;
use crate::doors::Door;

pub async fn chat_completions(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    chat(app, headers, body).await
}

/// The handler proper; the client listener calls it directly for the hot
/// path (no router, no header-map clone), axum for everything else.
pub async fn chat(app: App, headers: HeaderMap, body: Body) -> Response {
    pipeline::door(app, headers, body, Door::OpenAiChat).await
}
