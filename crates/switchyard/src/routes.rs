//! The two routers: which handler serves which path.
//!
//! Client listener (`server.listen`), in the order a request meets it:
//! 1. axum routing by path; unknown paths get a 404 `unknown_endpoint` in
//!    the envelope of the door the path belongs to.
//! 2. the handler (`ingress::*`): loads the `Live` snapshot once, reads the
//!    body within `max_body`, authenticates (every route; there is no
//!    unauthenticated client endpoint), then normalize → route → reliability
//!    → adapters → upstream, and replies through `ingress::respond` /
//!    `ingress::sse_out`. The request's `RequestCtx` writes its decision-log
//!    line when the reply (or stream) ends, or when the client hangs up.
//!
//! Admin listener (`server.admin_listen`): health, readiness, reload,
//! state, circuits and provider keys by hand, governance, shadow traffic's
//! comparisons and the dashboard page (`GET /`).

use axum::routing::{get, post};
use axum::Router;

use crate::admin;
use crate::app::App;
use crate::ingress;

pub fn client_router(app: App) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(ingress::openai::chat_completions),
        )
        .route("/v1/messages", post(ingress::anthropic::messages))
        .route("/v1/responses", post(ingress::responses::create))
        .route(
            "/v1/responses/{id}",
            get(ingress::responses::retrieve).delete(ingress::responses::delete),
        )
        .route(
            "/v1/messages/count_tokens",
            post(ingress::count_tokens::count_tokens),
        )
        .route("/v1/embeddings", post(ingress::embeddings::embeddings))
        .route("/v1/models", get(ingress::models::list))
        // A deployment id has a `/` in it: the rest of the path is the id.
        .route("/v1/models/{*id}", get(ingress::models::retrieve))
        .route("/", axum::routing::head(ingress::unknown::head_root))
        .fallback(ingress::unknown::unknown_endpoint)
        .with_state(app)
}

pub fn admin_router(app: App) -> Router {
    Router::new()
        .route("/healthz", get(admin::healthz))
        .route("/readyz", get(admin::readyz))
        .route("/metrics", get(admin::metrics))
        .route("/", get(admin::dashboard::index))
        .route("/dashboard/app.js", get(admin::dashboard::script))
        .route("/dashboard/style.css", get(admin::dashboard::style))
        .route("/admin/state", get(admin::state))
        .route("/admin/decisions", get(admin::decisions))
        .route("/admin/shadow", get(admin::shadow))
        .route("/admin/deployments/{id}/{action}", post(admin::circuit))
        .route(
            "/admin/providers/{name}/keys/{label}/reset",
            post(admin::reset_key),
        )
        .route("/admin/reload", post(admin::reload))
        .route("/admin/cache", axum::routing::delete(admin::purge_cache))
        .route("/admin/usage", get(admin::governance::usage))
        .route("/admin/clients", get(admin::governance::clients))
        .route(
            "/admin/clients/{id}/keys",
            post(admin::governance::create_key),
        )
        .route(
            "/admin/clients/{id}/keys/{key_id}",
            axum::routing::delete(admin::governance::revoke_key),
        )
        .layer(axum::middleware::from_fn_with_state(
            app.clone(),
            admin::auth::require_key,
        ))
        .with_state(app)
}
