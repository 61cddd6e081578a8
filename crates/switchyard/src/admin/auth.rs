//! `server.admin_key_env`: when set, every admin endpoint but `/healthz`
//! and `/readyz` needs `Authorization: Bearer <admin key>`.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use http::StatusCode;
use sha2::{Digest, Sha256};

use crate::app::App;

pub async fn require_key(State(app): State<App>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return next.run(req).await;
    }
    let live = app.live.load();
    let Some(want) = &live.config.server.admin_key else {
        return next.run(req).await;
    };
    let given = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    // Compared as digests: equal length, no early exit on the key's bytes.
    let ok = given
        .is_some_and(|g| Sha256::digest(g.as_bytes()) == Sha256::digest(want.expose().as_bytes()));
    if ok {
        return next.run(req).await;
    }
    super::governance::error(
        StatusCode::UNAUTHORIZED,
        "auth_failed",
        "the admin API needs `Authorization: Bearer <key>` with the key in the variable `server.admin_key_env` names",
    )
}
