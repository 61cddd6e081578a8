//! Upstream failures → contract §4 codes. Each protocol reads its own error
//! body into a [`Reading`] (`openai/errors.rs`, `anthropic/errors.rs`,
//! `gemini/errors.rs`); the status table here is shared.
//!
//! Keys (contract §8): only an answer that says the key itself is bad is
//! `auth_failed` from the upstream, which is what sets a key aside (a 401,
//! or a body the protocol reads as a bad key); a 403 about one request (a
//! model the key may not use, a region or policy refusal) is `forbidden`:
//! it fails that request (the next candidate may serve it), not the key.

use std::time::Duration;

use http::{HeaderMap, StatusCode};

use crate::error::{ErrorCode, GatewayError, Source};
use crate::observe::redact::redact;
use crate::upstream::retry_after;

/// What a protocol's error body said, beyond the status.
#[derive(Debug, Default)]
pub struct Reading {
    pub message: String,
    pub context_length: bool,
    pub content_filter: bool,
    /// Quota or billing spent: set the key aside, don't retry it.
    pub quota: bool,
    /// The body says the key itself is bad, whatever the status (Gemini's
    /// 400 `API_KEY_INVALID`).
    pub bad_key: bool,
    /// A 401 whose body says it is about what this request asked for (an
    /// OpenAI restricted key missing a scope), not about the key.
    pub not_key: bool,
    /// A wait given in the body (Gemini `RetryInfo`).
    pub retry_after: Option<Duration>,
    /// A quota that resets at a known time was spent (a per-day quota):
    /// how long until it does (see `resets`).
    pub rests_for: Option<Duration>,
    /// The body's own code decides, whatever the status (a provider that
    /// says overload or billing with a 429, MAPPING §18).
    pub code: Option<ErrorCode>,
}

pub fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    r: Reading,
    secrets: &[&str],
) -> GatewayError {
    let (code, source) = match status.as_u16() {
        _ if r.bad_key => (ErrorCode::AuthFailed, Source::Upstream),
        _ if r.code.is_some() => {
            let code = r.code.unwrap_or(ErrorCode::UpstreamError);
            (code, code_source(code))
        }
        400 | 413 | 422 if r.context_length => (ErrorCode::ContextTooLong, Source::Client),
        400 if r.content_filter => (ErrorCode::ContentFiltered, Source::Client),
        // Moonshot says a spent account with a 403.
        400 | 403 if r.quota => (ErrorCode::RateLimited, Source::Upstream),
        401 if !r.not_key => (ErrorCode::AuthFailed, Source::Upstream),
        401 | 403 => (ErrorCode::Forbidden, Source::Upstream),
        402 => (ErrorCode::RateLimited, Source::Upstream),
        404 => (ErrorCode::ModelNotFound, Source::Upstream),
        408 => (ErrorCode::Timeout, Source::Upstream),
        413 => (ErrorCode::PayloadTooLarge, Source::Client),
        429 => (ErrorCode::RateLimited, Source::Upstream),
        503 | 529 => (ErrorCode::Overloaded, Source::Upstream),
        500..=599 => (ErrorCode::UpstreamError, Source::Upstream),
        _ => (ErrorCode::InvalidRequest, Source::Client),
    };
    let quota = r.quota || status.as_u16() == 402;
    let quota = quota && code == ErrorCode::RateLimited;
    let text = if r.message.is_empty() {
        format!("upstream answered {status}")
    } else {
        r.message
    };
    let mut e =
        GatewayError::new(code, source, redact(&text, secrets)).with_status(status.as_u16());
    e.quota_exhausted = quota;
    if matches!(code, ErrorCode::RateLimited | ErrorCode::Overloaded) && !quota {
        e.retry_after = retry_after::from_headers(headers).or(r.retry_after);
    }
    // A per-day quota: the rest is until its reset, and that is also the
    // honest Retry-After for a client that gets this error.
    if code == ErrorCode::RateLimited {
        if let Some(rest) = r.rests_for.filter(|d| !d.is_zero()) {
            e.rests_for = Some(rest);
            e.retry_after = Some(rest);
        }
    }
    e
}

/// Whose fault a body-decided code is.
fn code_source(code: ErrorCode) -> Source {
    match code {
        ErrorCode::InvalidRequest
        | ErrorCode::ContextTooLong
        | ErrorCode::ContentFiltered
        | ErrorCode::PayloadTooLarge => Source::Client,
        _ => Source::Upstream,
    }
}

/// Non-JSON error bodies are kept short.
pub fn raw_message(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned()
}

/// Wording providers use for a prompt over the context window.
pub fn says_context_length(lower: &str) -> bool {
    lower.contains("maximum context length")
        || lower.contains("context window")
        || lower.contains("context length")
        || lower.contains("prompt is too long")
        || (lower.contains("input token count") && lower.contains("exceeds the maximum"))
}

/// An in-band stream error from an upstream, by its kind.
pub fn in_band(code: ErrorCode, message: &str) -> GatewayError {
    GatewayError::upstream(code, redact(message, &[]))
}

/// Fixture-driven test helper: serve a `*.http.json` envelope to a classifier.
#[cfg(test)]
pub fn fixture(name: &str) -> (StatusCode, HeaderMap, Vec<u8>) {
    let path = format!(
        "{}/../../fixtures/providers/{name}.http.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let env: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut headers = HeaderMap::new();
    for (k, v) in env["headers"].as_object().unwrap() {
        headers.insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.as_str().unwrap().parse().unwrap(),
        );
    }
    let body = match env.get("body_raw") {
        Some(raw) => raw.as_str().unwrap().as_bytes().to_vec(),
        None => serde_json::to_vec(&env["body"]).unwrap(),
    };
    (
        StatusCode::from_u16(env["status"].as_u64().unwrap() as u16).unwrap(),
        headers,
        body,
    )
}
