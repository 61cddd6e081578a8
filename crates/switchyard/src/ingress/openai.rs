//! `POST /v1/chat/completions` and `GET /v1/models`.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;
use serde::Serialize;

use super::{auth, pipeline, request_id, respond};
use crate::app::App;
use crate::doors::Door;
use crate::state::live::Target;

pub async fn chat_completions(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    chat(app, headers, body).await
}

/// The handler proper; the client listener calls it directly for the hot
/// path (no router, no header-map clone), axum for everything else.
pub async fn chat(app: App, headers: HeaderMap, body: Body) -> Response {
    pipeline::door(app, headers, body, Door::OpenAiChat).await
}

#[derive(Serialize)]
struct ModelList {
    object: &'static str,
    data: Vec<ModelEntry>,
}

#[derive(Serialize)]
struct ModelEntry {
    id: String,
    object: &'static str,
    created: u64,
    owned_by: String,
}

/// Routes and deployments the caller may use.
pub async fn models(State(app): State<App>, headers: HeaderMap) -> Response {
    let live = app.live.load_full();
    let rid = request_id(&headers);
    let client = match auth::authenticate(&live, &headers) {
        Ok(c) => c,
        Err(e) => return respond::error(Door::OpenAiChat, &e, &rid),
    };
    let mut data = Vec::new();
    for r in live.config.routes.values() {
        if auth::may_use(client, &r.name, &Target::Route(r)) {
            data.push(ModelEntry {
                id: r.name.clone(),
                object: "model",
                created: 0,
                owned_by: "switchyard".into(),
            });
        }
    }
    for id in &live.config.deployment_order {
        if let Some(d) = live.deployments.get(id) {
            if auth::may_use(client, id, &Target::Deployment(d)) {
                data.push(ModelEntry {
                    id: id.clone(),
                    object: "model",
                    created: 0,
                    owned_by: d.cfg.provider.clone(),
                });
            }
        }
    }
    let body = serde_json::to_vec(&ModelList {
        object: "list",
        data,
    })
    .unwrap_or_default();
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}
