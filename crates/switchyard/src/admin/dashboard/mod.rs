//! The dashboard (`GET /` on the admin listener): one HTML page, its script
//! and its style sheet, compiled into the binary. The page polls the admin
//! JSON (`/admin/state`, `/admin/decisions`, `/admin/shadow`,
//! `/admin/usage`, `/admin/clients`) from the same origin, so it needs nothing the API does
//! not already serve, and the admin key guards it like every other path.

use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("style.css");

/// Only our own script, style and admin JSON; never framed.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                   connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; \
                   base-uri 'none'; form-action 'none'";

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (http::header::CONTENT_TYPE, content_type),
            // Always revalidated: a new binary's page is picked up at once.
            (http::header::CACHE_CONTROL, "no-cache"),
            (http::header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (http::header::CONTENT_SECURITY_POLICY, CSP),
        ],
        body,
    )
        .into_response()
}

pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX)
}

pub async fn script() -> Response {
    asset("text/javascript; charset=utf-8", SCRIPT)
}

pub async fn style() -> Response {
    asset("text/css; charset=utf-8", STYLE)
}
