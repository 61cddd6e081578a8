//! `POST /v1/responses` (the Responses door; its dialect lives in
//! `doors::responses`), and the stored answers: `GET` and `DELETE
//! /v1/responses/{id}`, for the client that owns them only — any other
//! client gets the same 404 as for an id that never existed.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::response::Response;
use http::HeaderMap;

use super::{auth, pipeline, request_id, respond};
use crate::app::App;
use crate::doors::Door;
use crate::error::{ErrorCode, GatewayError};
use crate::state::responses::owned_key;

pub async fn create(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    pipeline::door(app, headers, body, Door::Responses).await
}

/// A stored answer, as the client first got it.
pub async fn retrieve(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let rid = request_id(&headers);
    let key = match authenticated(&app, &headers) {
        Ok(client) => owned_key(client.as_deref(), &id),
        Err(e) => return respond::error(Door::Responses, &e, &rid),
    };
    app.responses.load(&key).await;
    match app.responses.get(&key) {
        // A streamed answer of the passthrough is kept only as the
        // client's id (the upstream holds its body).
        Some(s) if !s.body.is_empty() => respond::plain_json(Body::from(s.body), &rid),
        Some(_) => respond::error(Door::Responses, &held_upstream(&id), &rid),
        None => respond::error(Door::Responses, &not_found(&id), &rid),
    }
}

pub async fn delete(
    State(app): State<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let rid = request_id(&headers);
    let key = match authenticated(&app, &headers) {
        Ok(client) => owned_key(client.as_deref(), &id),
        Err(e) => return respond::error(Door::Responses, &e, &rid),
    };
    app.responses.load(&key).await;
    if !app.responses.delete(&key).await {
        return respond::error(Door::Responses, &not_found(&id), &rid);
    }
    let body = serde_json::json!({"id": id, "object": "response", "deleted": true});
    respond::plain_json(Body::from(body.to_string()), &rid)
}

/// The caller's client id (`None` on an open gateway).
fn authenticated(app: &App, headers: &HeaderMap) -> Result<Option<String>, GatewayError> {
    auth::authenticate(&app.live.load(), headers).map(|p| p.map(|p| p.client.id.clone()))
}

fn not_found(id: &str) -> GatewayError {
    GatewayError::client(
        ErrorCode::ModelNotFound,
        format!("Response with id '{id}' not found."),
    )
    .with_param("id")
}

/// The caller's own answer, streamed through the passthrough: the gateway
/// recorded its id, not its body.
fn held_upstream(id: &str) -> GatewayError {
    GatewayError::client(
        ErrorCode::ModelNotFound,
        format!("Response with id '{id}' was streamed from a Responses API deployment, which holds it: the gateway keeps only its id."),
    )
    .with_param("id")
}
