//! Builds the two routers.
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
//! state, circuits and provider keys by hand, governance and the dashboard
//! page (`GET /`).

use std::path::Path;

use axum::routing::{get, post};
use axum::Router;

use crate::admin;
use crate::ingress;
use std::sync::Arc;

use crate::observe::ctx::RequestCtx;
use crate::observe::metrics::Metrics;
use crate::state::live::Live;
use crate::state::live::SharedLive;

#[derive(Clone)]
pub struct App {
    pub live: SharedLive,
    /// Where every finished request goes (decision log, metrics).
    pub sinks: crate::sinks::Sinks,
    /// Where `POST /admin/reload` and SIGHUP read the config from.
    pub config_path: Option<Arc<Path>>,
    pub metrics: Arc<Metrics>,
    /// Stored Responses-API answers (`previous_response_id`, `GET /v1/responses/{id}`).
    pub responses: Arc<dyn crate::state::responses::ResponseStore>,
    /// The usage store (`usage.store`), when there is one.
    pub usage: Option<Arc<crate::usage::UsageStore>>,
    /// The version (text hash) of the config a reload last tried, good or
    /// bad: a file-change event for the same text is not a second reload.
    pub last_reload: Arc<std::sync::Mutex<Option<String>>>,
    /// The last finished requests (`GET /admin/decisions`, the dashboard).
    pub recent: Arc<crate::sinks::recent::Recent>,
    /// The OTLP trace export (`observability.otlp_endpoint`), when on.
    pub traces: Option<Arc<crate::sinks::trace::TraceSink>>,
}

impl App {
    /// A fresh per-request context.
    pub fn request_ctx(
        &self,
        request_id: &str,
        headers: &http::HeaderMap,
        live: &Live,
    ) -> RequestCtx {
        // Sampled in: the decision log names the trace in force (the
        // caller's, or the one begun here); else the caller's, if any.
        let trace = self.traces.as_ref().and_then(|_| {
            let parent = crate::observe::trace::caller(headers);
            crate::observe::trace::begin(parent, live.config.observability.trace_sample)
        });
        let trace_id = match &trace {
            Some(t) => Some(t.trace_id_hex()),
            None => crate::ingress::trace_id(headers),
        };
        let mut ctx = RequestCtx::new(
            request_id.to_owned(),
            trace_id,
            live.version.clone(),
            self.sinks.clone(),
        );
        ctx.trace = trace;
        ctx
    }
}

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
