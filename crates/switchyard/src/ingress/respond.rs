//! The one place that renders replies: error envelopes and the gateway's
//! response headers. Nothing here logs (the decision log does, once).

use axum::response::Response;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, StatusCode};

use crate::doors::Door;
use crate::error::GatewayError;
use crate::names;

/// The Retry-After of a 429 nobody gave a wait for.
const UNSAID_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// An error in the door's envelope, with `x-request-id` (and Retry-After).
pub fn error(door: Door, e: &GatewayError, request_id: &str) -> Response {
    error_response(door.error_body(e), e, request_id)
}

fn error_response(body: Vec<u8>, e: &GatewayError, request_id: &str) -> Response {
    let mut resp = Response::new(axum::body::Body::from(body));
    *resp.status_mut() = e.code.status();
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    set(h, &names::X_REQUEST_ID, request_id);
    // Every 429 says when to come back (contract §10), even when the
    // upstream did not (a Gemini 429 without `RetryInfo`): a second then.
    let wait = e
        .retry_after
        .or((e.code.status() == StatusCode::TOO_MANY_REQUESTS).then_some(UNSAID_WAIT));
    if let Some(d) = wait {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        h.insert(RETRY_AFTER, HeaderValue::from(secs.max(1)));
    }
    // A client too slow to send its request loses the connection too
    // (hyper closes it after this answer): it cannot dribble another.
    if e.code == crate::error::ErrorCode::RequestTimeout {
        h.insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

/// Headers every served answer carries (contract §3).
pub struct ServedHeaders<'a> {
    pub request_id: &'a str,
    pub deployment: &'a str,
    pub attempts: usize,
    pub cache: &'static str,
    pub cost_usd: Option<f64>,
    pub fallback_reason: Option<&'a str>,
    /// Tools the request offered that the serving deployment cannot see.
    pub dropped_tools: Option<&'a str>,
    /// A client with its own rpm/tpm: OpenAI's `x-ratelimit-*` headers.
    pub rate: Option<&'a RateHeaders>,
    /// A client with a budget: what is left of it (USD).
    pub budget_remaining: Option<f64>,
}

/// `x-switchyard-budget-remaining-usd`.
pub fn budget_remaining(h: &mut http::HeaderMap, usd: f64) {
    set(h, &names::BUDGET_REMAINING, &format!("{usd:.6}"));
}

/// `(limit, used in the window with this request)` for requests and tokens,
/// and when the oldest of the window's counts slides out.
#[derive(Debug, Clone, Copy)]
pub struct RateHeaders {
    pub requests: Option<(u64, u64)>,
    pub tokens: Option<(u64, u64)>,
    pub reset: std::time::Duration,
}

impl RateHeaders {
    fn write(&self, h: &mut http::HeaderMap) {
        let reset = format!("{}s", self.reset.as_secs().max(1));
        for (pair, names) in [
            (self.requests, &names::RATELIMIT_REQUESTS),
            (self.tokens, &names::RATELIMIT_TOKENS),
        ] {
            if let Some((limit, used)) = pair {
                let [l, r, t] = names;
                h.insert(l.clone(), HeaderValue::from(limit));
                h.insert(r.clone(), HeaderValue::from(limit.saturating_sub(used)));
                set(h, t, &reset);
            }
        }
    }
}

pub fn reply(
    status: StatusCode,
    content_type: &'static str,
    body: axum::body::Body,
    s: &ServedHeaders<'_>,
) -> Response {
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    // Sized for what follows (and the server's date/length): no regrowth.
    let h = resp.headers_mut();
    h.reserve(10);
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    set(h, &names::X_REQUEST_ID, s.request_id);
    set(h, &names::DEPLOYMENT, s.deployment);
    h.insert(names::ATTEMPTS.clone(), attempts_value(s.attempts));
    h.insert(names::CACHE.clone(), HeaderValue::from_static(s.cache));
    if let Some(c) = s.cost_usd {
        set(h, &names::COST_USD, &format!("{c:.8}"));
    }
    if let Some(r) = s.fallback_reason {
        set(h, &names::FALLBACK_REASON, r);
    }
    if let Some(t) = s.dropped_tools {
        set(h, &names::DROPPED_TOOLS, t);
    }
    if let Some(r) = s.rate {
        r.write(h);
    }
    if let Some(b) = s.budget_remaining {
        budget_remaining(h, b);
    }
    resp
}

pub fn json(body: Bytes, s: &ServedHeaders<'_>) -> Response {
    reply(
        StatusCode::OK,
        "application/json",
        axum::body::Body::from(body),
        s,
    )
}

/// An answer as Server-Sent Events: never cached, and not buffered by a
/// proxy in front (nginx honours `X-Accel-Buffering: no`).
pub fn event_stream(body: axum::body::Body, s: &ServedHeaders<'_>) -> Response {
    let mut resp = reply(StatusCode::OK, "text/event-stream", body, s);
    let h = resp.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        names::ACCEL_BUFFERING.clone(),
        HeaderValue::from_static("no"),
    );
    resp
}

/// A gateway-made JSON body (catalogue, stored response) with `x-request-id`.
pub fn plain_json(body: axum::body::Body, request_id: &str) -> Response {
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    set(h, &names::X_REQUEST_ID, request_id);
    resp
}

/// A count as a header value; the usual small ones without an allocation.
fn attempts_value(n: usize) -> HeaderValue {
    const SMALL: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];
    match SMALL.get(n) {
        Some(s) => HeaderValue::from_static(s),
        None => HeaderValue::from(n),
    }
}

fn set(h: &mut http::HeaderMap, name: &HeaderName, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        h.insert(name.clone(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::attempts_value;

    #[test]
    fn attempts_header_values() {
        for n in [0, 1, 9, 10, 123] {
            assert_eq!(attempts_value(n).to_str().unwrap(), n.to_string());
        }
    }
}
