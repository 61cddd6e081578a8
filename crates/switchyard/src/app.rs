//! Builds the two routers.
//!
//! Client listener (`server.listen`), in the order a request meets it:
//! 1. axum routing by path; unknown paths get a 404 in the OpenAI envelope.
//! 2. the handler (`ingress::*`): loads the `Live` snapshot once, reads the
//!    body within `max_body`, authenticates (every route; there is no
//!    unauthenticated client endpoint), then normalize → route → reliability
//!    → adapters → upstream, and replies through `ingress::respond` /
//!    `ingress::sse_out`. The request's `RequestCtx` writes its decision-log
//!    line when the reply (or stream) ends, or when the client hangs up.
//!
//! Admin listener (`server.admin_listen`): health, readiness, reload.

use std::path::PathBuf;

use axum::routing::{get, post};
use axum::Router;

use crate::admin;
use crate::ingress;
use crate::observe::decision_log::DecisionSink;
use crate::state::live::SharedLive;
use crate::upstream::HttpClients;

#[derive(Clone)]
pub struct App {
    pub live: SharedLive,
    pub decisions: DecisionSink,
    pub http: HttpClients,
    /// Where `POST /admin/reload` and SIGHUP read the config from.
    pub config_path: Option<PathBuf>,
}

pub fn client_router(app: App) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(ingress::openai::chat_completions),
        )
        .route("/v1/models", get(ingress::openai::models))
        .fallback(ingress::respond::not_found)
        .with_state(app)
}

pub fn admin_router(app: App) -> Router {
    Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .route("/admin/reload", post(admin::reload))
        .with_state(app)
}
