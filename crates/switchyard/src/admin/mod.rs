//! ADMIN: health, readiness and config reload, on `server.admin_listen` only.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::app::App;

pub mod reload;

pub async fn healthz() -> &'static str {
    "ok"
}

/// Ready once a config is live with at least one usable deployment, or when
/// the config deliberately has none.
pub async fn readyz(State(app): State<App>) -> Response {
    let live = app.live.load();
    let usable = live
        .deployments
        .values()
        .any(|d| d.provider.adapter.is_supported());
    if usable || live.deployments.is_empty() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "no deployment has a usable adapter",
        )
            .into_response()
    }
}

pub async fn metrics(State(app): State<App>) -> Response {
    let body = app.metrics.render();
    (
        [(
            http::header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

pub async fn reload(State(app): State<App>) -> Response {
    match reload::from_file(&app) {
        Ok(version) => (
            StatusCode::OK,
            axum::Json(serde_json::json!({"result": "ok", "config_version": version})),
        )
            .into_response(),
        Err(errors) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            axum::Json(serde_json::json!({"result": "error", "errors": errors})),
        )
            .into_response(),
    }
}
