//! `server.admin_key_env`: when set, every admin endpoint but `/healthz`
//! and `/readyz` needs the admin key, as `Authorization: Bearer <key>` or
//! as the password of HTTP Basic (any user name): a browser cannot send a
//! Bearer header when it opens the dashboard, but it prompts for Basic when
//! a 401 carries `WWW-Authenticate: Basic`, and then sends it with the
//! page's own requests too.

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use base64::Engine;
use http::StatusCode;
use sha2::{Digest, Sha256};

use crate::app::App;

pub const CHALLENGE: &str = "Basic realm=\"switchyard admin\", charset=\"UTF-8\"";

pub async fn require_key(State(app): State<App>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    if path == "/healthz" || path == "/readyz" {
        return next.run(req).await;
    }
    let live = app.live.load();
    let Some(want) = &live.config.server.admin_key else {
        return next.run(req).await;
    };
    let header = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if header
        .and_then(given_key)
        .is_some_and(|g| same(&g, want.expose()))
    {
        return next.run(req).await;
    }
    let mut res = super::governance::error(
        StatusCode::UNAUTHORIZED,
        "auth_failed",
        "the admin API needs the key in the variable `server.admin_key_env` names: `Authorization: Bearer <key>`, or HTTP Basic with it as the password",
    );
    res.headers_mut().insert(
        http::header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static(CHALLENGE),
    );
    res
}

/// The key an `Authorization` value carries: a Bearer token, or the
/// password of Basic credentials (the user name is ignored).
fn given_key(v: &str) -> Option<String> {
    let (scheme, rest) = v.split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return Some(rest.to_owned());
    }
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest)
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (_user, password) = text.split_once(':')?;
    Some(password.to_owned())
}

/// Compared as digests: equal length, no early exit on the key's bytes.
fn same(given: &str, want: &str) -> bool {
    Sha256::digest(given.as_bytes()) == Sha256::digest(want.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user_pass: &str) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(user_pass);
        format!("Basic {b64}")
    }

    #[test]
    fn bearer_and_basic_carry_the_key() {
        assert_eq!(given_key("Bearer k1").as_deref(), Some("k1"));
        assert_eq!(given_key("bearer  k1 ").as_deref(), Some("k1"));
        assert_eq!(given_key(&basic("admin:k1")).as_deref(), Some("k1"));
        // Any user name, and a password may hold colons.
        assert_eq!(given_key(&basic(":a:b")).as_deref(), Some("a:b"));
    }

    #[test]
    fn malformed_credentials_carry_nothing() {
        for v in ["", "Bearer", "Digest x", "Basic !!!", "Basic a2V5"] {
            assert_eq!(given_key(v), None, "{v}");
        }
        assert!(same("k", "k"));
        assert!(!same("k", "K"));
    }
}
