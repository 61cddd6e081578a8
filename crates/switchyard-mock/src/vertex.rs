//! Google Vertex AI: the OAuth2 token endpoint of the service-account JWT-bearer flow, the
//! bearer-token check of every Vertex call, Vertex's errors, and the request readers of the
//! `publishers/anthropic` routes and Gemini `:countTokens`.
//!
//! Shapes: `vertex/oauth/*` (token endpoint), `vertex/error_*.http.json`,
//! `vertex/anthropic_error_429_quota.http.json`, `vertex/gemini_count_tokens.response.json`,
//! `vertex/anthropic_*.json`.

use crate::conv::{self, Conv};
use crate::faults::{self, full, Body};
use crate::json::pretty_nl;
use crate::text;
use bytes::Bytes;
use http::{HeaderMap, Response};
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The service account the token endpoint knows: its `client_email` must be the
/// assertion's `iss`, its key must have signed it.
pub struct ServiceAccount {
    pub client_email: String,
    pub private_key_id: Option<String>,
    pub token_uri: Option<String>,
    key: EncodingKey,
}

impl std::fmt::Debug for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccount")
            .field("client_email", &self.client_email)
            .field("private_key_id", &self.private_key_id)
            .finish_non_exhaustive()
    }
}

impl ServiceAccount {
    /// Parse a service-account key file (`client_email`, `private_key` PEM, optional
    /// `private_key_id`, `token_uri`).
    pub fn from_json(text: &str) -> Result<ServiceAccount, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("service account: {e}"))?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        let client_email = s("client_email").ok_or("service account: no client_email")?;
        let pem = s("private_key").ok_or("service account: no private_key")?;
        let key = EncodingKey::from_rsa_pem(pem.as_bytes())
            .map_err(|e| format!("service account: private_key: {e}"))?;
        Ok(ServiceAccount {
            client_email,
            private_key_id: s("private_key_id"),
            token_uri: s("token_uri"),
            key,
        })
    }
}

/// The default service account: `vertex/oauth/service_account.test.json` (google-auth's
/// public test key).
pub const DEFAULT_SERVICE_ACCOUNT: &str = fixture!("vertex/oauth/service_account.test.json");

/// Default `expires_in` of a minted token (what Google answers).
pub const DEFAULT_TOKEN_LIFETIME_SECS: u64 = 3599;

/// The OAuth scope a Vertex call needs.
pub const CLOUD_PLATFORM: &str = "https://www.googleapis.com/auth/cloud-platform";
/// The `aud` Google's token endpoint expects.
pub const GOOGLE_TOKEN_AUD: &str = "https://oauth2.googleapis.com/token";
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// Token-endpoint state.
pub struct State {
    pub account: Option<Arc<ServiceAccount>>,
    pub lifetime_secs: u64,
    /// Minted tokens → expiry (Unix seconds on the mock's clock).
    pub tokens: HashMap<String, i64>,
    /// Tokens minted so far (numbers the next one).
    pub minted: u64,
}

impl Default for State {
    fn default() -> Self {
        State {
            account: ServiceAccount::from_json(DEFAULT_SERVICE_ACCOUNT)
                .ok()
                .map(Arc::new),
            lifetime_secs: DEFAULT_TOKEN_LIFETIME_SECS,
            tokens: HashMap::new(),
            minted: 0,
        }
    }
}

/// An RFC 6749 error as Google's token endpoint writes it (1-space indent,
/// `vertex/oauth/error_400_invalid_grant.http.json`).
fn oauth_error(error: &str, description: &str) -> Response<Body> {
    let q = |s: &str| Value::String(s.to_string()).to_string();
    let body = format!(
        "{{\n \"error\": {},\n \"error_description\": {}\n}}",
        q(error),
        q(description)
    );
    faults::response(400, Some("application/json; charset=utf-8"), [], full(body))
}

const BAD_SIGNATURE: &str = "Invalid JWT Signature.";
const BAD_TIME: &str = "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.";

/// Decode a `application/x-www-form-urlencoded` value.
pub(crate) fn form_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Decode a percent-encoded URL path segment (`%3A` → `:`); invalid escapes stay as sent.
pub fn percent_decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let Some(v) = s
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| s.to_string())
}

fn b64url_decode(s: &str) -> Option<Vec<u8>> {
    if s.contains(['+', '/', '=']) {
        return None;
    }
    let mut std: String = s
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    while !std.len().is_multiple_of(4) {
        std.push('=');
    }
    aws_smithy_types::base64::decode(std).ok()
}

/// Why an assertion was refused: `(error, error_description)`.
type Refusal = (&'static str, String);

/// Check a JWT-bearer assertion against `account` at Unix time `now`.
fn check_assertion(
    assertion: &str,
    account: &ServiceAccount,
    mock_token_url: &str,
    now: i64,
) -> Result<(), Refusal> {
    let bad = || ("invalid_grant", BAD_SIGNATURE.to_string());
    let mut parts = assertion.split('.');
    let (Some(h), Some(c), Some(sig), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let header: Value = b64url_decode(h)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(bad)?;
    let claims: Value = b64url_decode(c)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(bad)?;
    if header.get("alg").and_then(Value::as_str) != Some("RS256") {
        return Err(bad());
    }
    if claims.get("iss").and_then(Value::as_str) != Some(account.client_email.as_str()) {
        return Err(("invalid_grant", "Invalid grant: account not found".into()));
    }
    if let (Some(kid), Some(id)) = (
        header.get("kid").and_then(Value::as_str),
        account.private_key_id.as_deref(),
    ) {
        if kid != id {
            return Err(bad());
        }
    }
    // RS256 (PKCS#1 v1.5) is deterministic: re-sign the signing input with the account's
    // key and compare.
    if jsonwebtoken::crypto::CryptoProvider::try_get_default().is_none() {
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
    }
    let signing_input = &assertion[..h.len() + 1 + c.len()];
    let expected =
        jsonwebtoken::crypto::sign(signing_input.as_bytes(), &account.key, Algorithm::RS256)
            .map_err(|_| bad())?;
    if expected != sig {
        return Err(bad());
    }
    let aud = claims
        .get("aud")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let aud_ok = aud == GOOGLE_TOKEN_AUD
        || aud == mock_token_url
        || account.token_uri.as_deref() == Some(aud);
    if !aud_ok {
        return Err((
            "invalid_grant",
            format!("Invalid JWT: Failed audience check. The expected value was {GOOGLE_TOKEN_AUD} but the audience in the JWT was {aud}."),
        ));
    }
    let scope_ok = claims
        .get("scope")
        .and_then(Value::as_str)
        .is_some_and(|s| s.split(' ').any(|x| x == CLOUD_PLATFORM));
    if !scope_ok {
        return Err((
            "invalid_scope",
            "Invalid OAuth scope or ID token audience provided.".into(),
        ));
    }
    let (Some(iat), Some(exp)) = (
        claims.get("iat").and_then(Value::as_i64),
        claims.get("exp").and_then(Value::as_i64),
    ) else {
        return Err(("invalid_grant", BAD_TIME.into()));
    };
    // Google allows a little clock skew on `iat`.
    if exp <= iat || exp.saturating_sub(iat) > 3600 || exp <= now || iat > now.saturating_add(300) {
        return Err(("invalid_grant", BAD_TIME.into()));
    }
    Ok(())
}

/// `POST /token`: the JWT-bearer grant. Success `{"access_token":"ya29.mock-<n>",
/// "expires_in":<lifetime>,"token_type":"Bearer"}`.
pub fn token(
    state: &std::sync::Mutex<State>,
    headers: &HeaderMap,
    body: &[u8],
    now: i64,
) -> Response<Body> {
    let form = String::from_utf8_lossy(body);
    let mut grant_type = None;
    let mut assertion = None;
    for kv in form.split('&') {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        match k {
            "grant_type" => grant_type = form_decode(v),
            "assertion" => assertion = form_decode(v),
            _ => {}
        }
    }
    match grant_type.as_deref() {
        Some(GRANT_TYPE) => {}
        Some(other) => {
            return oauth_error(
                "unsupported_grant_type",
                &format!("Invalid grant_type: {other}"),
            )
        }
        None => return oauth_error("unsupported_grant_type", "Invalid grant_type: "),
    }
    let Some(assertion) = assertion else {
        return oauth_error("invalid_request", "Missing required parameter: assertion");
    };
    let host = headers
        .get("host")
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    let mock_url = format!("http://{host}/token");
    let mut st = state.lock().expect("vertex lock");
    let Some(account) = st.account.clone() else {
        return oauth_error("invalid_grant", BAD_SIGNATURE);
    };
    drop(st);
    if let Err((error, description)) = check_assertion(&assertion, &account, &mock_url, now) {
        return oauth_error(error, &description);
    }
    st = state.lock().expect("vertex lock");
    st.minted += 1;
    let token = format!("ya29.mock-{}", st.minted);
    let lifetime = st.lifetime_secs;
    let expiry = now.saturating_add(i64::try_from(lifetime).unwrap_or(i64::MAX));
    st.tokens.insert(token.clone(), expiry);
    drop(st);
    let body = json!({"access_token": token, "expires_in": lifetime, "token_type": "Bearer"});
    faults::response(
        200,
        Some("application/json; charset=utf-8"),
        [
            (
                "cache-control".to_string(),
                "no-cache, no-store, max-age=0, must-revalidate".to_string(),
            ),
            ("pragma".to_string(), "no-cache".to_string()),
        ],
        full(body.to_string()),
    )
}

/// The reason of a refused bearer token (`ErrorInfo.reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BearerRefusal {
    Missing,
    Unknown,
    Expired,
}

/// Check `Authorization: Bearer <token>`: minted by this mock and not expired at `now`.
pub fn check_bearer(state: &State, headers: &HeaderMap, now: i64) -> Result<(), BearerRefusal> {
    let Some(token) = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.strip_prefix("Bearer "))
    else {
        return Err(BearerRefusal::Missing);
    };
    match state.tokens.get(token.trim()) {
        None => Err(BearerRefusal::Unknown),
        Some(expiry) if *expiry <= now => Err(BearerRefusal::Expired),
        Some(_) => Ok(()),
    }
}

/// 401 `UNAUTHENTICATED` (google.rpc.Status, 2-space pretty).
pub fn unauthenticated(why: BearerRefusal) -> Response<Body> {
    let reason = match why {
        BearerRefusal::Missing => "CREDENTIALS_MISSING",
        BearerRefusal::Unknown => "ACCESS_TOKEN_TYPE_UNSUPPORTED",
        BearerRefusal::Expired => "ACCESS_TOKEN_EXPIRED",
    };
    let message = match why {
        BearerRefusal::Missing => "Request is missing required authentication credential. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
        _ => "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
    };
    let body = pretty_nl(&json!({"error": {
        "code": 401,
        "message": message,
        "status": "UNAUTHENTICATED",
        "details": [{
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": "googleapis.com",
            "metadata": {"service": "aiplatform.googleapis.com"}
        }]
    }}));
    faults::response(
        401,
        Some("application/json; charset=UTF-8"),
        [(
            "www-authenticate".to_string(),
            "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\"".to_string(),
        )],
        full(body),
    )
}

/// The recorded envelope a bare `status` behavior serves on a Vertex route
/// (`anthropic`: the `publishers/anthropic` routes).
pub fn status_fixture(status: u16, anthropic: bool) -> Option<&'static str> {
    Some(match (status, anthropic) {
        (429, true) => "vertex/anthropic_error_429_quota",
        (529, true) => "anthropic/error_529_overloaded",
        (400, _) => "vertex/error_400_context_length",
        (403, _) => "vertex/error_403_permission_denied",
        (429, _) => "vertex/error_429_resource_exhausted",
        _ => return None,
    })
}

/// A google.rpc.Status body for a status with no recorded envelope.
pub fn status_body(status: u16) -> Bytes {
    let (st, message) = match status {
        401 => ("UNAUTHENTICATED", "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project."),
        404 => ("NOT_FOUND", "Publisher Model was not found or your project does not have access to it. Please ensure you are using a valid model version."),
        409 => ("ABORTED", "The operation was aborted."),
        499 => ("CANCELLED", "The operation was cancelled."),
        500 => ("INTERNAL", "Internal error encountered."),
        501 => ("UNIMPLEMENTED", "Operation is not implemented, or supported, or enabled."),
        503 => ("UNAVAILABLE", "The service is currently unavailable."),
        504 => ("DEADLINE_EXCEEDED", "The request timed out. Please try again."),
        s if s >= 500 => ("INTERNAL", "Internal error encountered."),
        _ => ("FAILED_PRECONDITION", "Precondition check failed."),
    };
    crate::gemini::error_body(status, message, st)
}

/// The Anthropic version `:rawPredict` requires.
pub const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// Read (and validate) a `:rawPredict` / `:streamRawPredict` body: the Anthropic Messages
/// shape without `model` (the URL has it), `anthropic_version` `vertex-2023-10-16`,
/// `max_tokens` required. `Err` is the message of an Anthropic `invalid_request_error`.
pub fn anthropic_conv(body: &Value, model: &str, stream: bool) -> Result<Conv, String> {
    if !body.is_object() {
        return Err("Input should be a valid dictionary".into());
    }
    match body.get("anthropic_version") {
        None => return Err("anthropic_version: Field required".into()),
        Some(Value::String(v)) if v == ANTHROPIC_VERSION => {}
        Some(_) => {
            return Err(format!(
                "anthropic_version: Input should be '{ANTHROPIC_VERSION}'"
            ))
        }
    }
    if body.get("model").is_some() {
        return Err("model: Extra inputs are not permitted".into());
    }
    for key in ["max_tokens", "messages"] {
        if body.get(key).is_none() {
            return Err(format!("{key}: Field required"));
        }
    }
    let mut c = conv::anthropic(body);
    c.model = model.to_string();
    c.stream = stream;
    Ok(c)
}

/// Gemini `:countTokens` on Vertex: `{totalTokens, totalBillableCharacters,
/// promptTokensDetails}` (`vertex/gemini_count_tokens.response.json`); the body is
/// `{contents, systemInstruction, tools}` or the `generateContentRequest` wrapper.
pub fn gemini_count(body: &Value, model: &str) -> Bytes {
    let inner = body
        .get("generateContentRequest")
        .or(body.get("generate_content_request"))
        .unwrap_or(body);
    let chars = conv::gemini(inner, model, false).prompt_chars;
    let n = text::prompt_tokens(chars);
    pretty_nl(&json!({
        "totalTokens": n,
        "totalBillableCharacters": chars,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": n}]
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st() -> std::sync::Mutex<State> {
        std::sync::Mutex::new(State::default())
    }

    /// Mangled forms and assertions are refused, never a panic.
    #[test]
    fn garbage_is_refused() {
        let state = st();
        let h = HeaderMap::new();
        let grant = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=";
        let big = format!(
            "{grant}{}.{}.sig",
            "eyJhbGciOiJSUzI1NiJ9",
            // {"iss":"service-account@example.com","iat":-9000000000000000000,"exp":9000000000000000000}
            "eyJpc3MiOiJzZXJ2aWNlLWFjY291bnRAZXhhbXBsZS5jb20iLCJpYXQiOi05MDAwMDAwMDAwMDAwMDAwMDAwLCJleHAiOjkwMDAwMDAwMDAwMDAwMDAwMDB9"
        );
        for body in [
            "".to_string(),
            "%".to_string(),
            "grant_type=%zz".to_string(),
            grant.to_string(),
            format!("{grant}..."),
            format!("{grant}%E2%82"),
            format!("{grant}a.b.c.d"),
            format!("{grant}e30.e30.e30"),
            format!("{grant}\u{ffff}.☃.x"),
            big,
        ] {
            let r = token(&state, &h, body.as_bytes(), 1_735_689_600);
            assert_eq!(r.status(), 400, "{body}");
        }
        // validly signed, absurd times
        let account = ServiceAccount::from_json(DEFAULT_SERVICE_ACCOUNT).unwrap();
        for (iat, exp) in [
            (-9_000_000_000_000_000_000i64, 9_000_000_000_000_000_000i64),
            (i64::MAX, i64::MAX),
            (0, 1),
        ] {
            let claims = json!({"iss": account.client_email, "aud": GOOGLE_TOKEN_AUD,
                "scope": CLOUD_PLATFORM, "iat": iat, "exp": exp});
            let jwt = jsonwebtoken::encode(
                &jsonwebtoken::Header::new(Algorithm::RS256),
                &claims,
                &account.key,
            )
            .unwrap();
            let r = token(
                &state,
                &h,
                format!("{grant}{jwt}").as_bytes(),
                1_735_689_600,
            );
            assert_eq!(r.status(), 400, "{iat} {exp}");
        }
        assert_eq!(state.lock().unwrap().minted, 0);
        assert_eq!(percent_decode("a%3Ab%zz%4"), "a:b%zz%4");
        assert_eq!(percent_decode("%FF"), "%FF");
    }

    #[test]
    fn bearer() {
        let mut s = State::default();
        s.tokens.insert("ya29.mock-1".into(), 100);
        let mut h = HeaderMap::new();
        assert_eq!(check_bearer(&s, &h, 50), Err(BearerRefusal::Missing));
        h.insert("authorization", "Bearer ya29.mock-1".parse().unwrap());
        assert_eq!(check_bearer(&s, &h, 50), Ok(()));
        assert_eq!(check_bearer(&s, &h, 100), Err(BearerRefusal::Expired));
        h.insert("authorization", "Bearer ya29.mock-2".parse().unwrap());
        assert_eq!(check_bearer(&s, &h, 50), Err(BearerRefusal::Unknown));
    }
}
