//! Does the upstream take this key? The authenticated call that costs
//! nothing and answers it: listing models (OpenAI and compatible
//! `GET {base}/models`, Azure `GET {base}/openai/models?api-version=…`,
//! Anthropic `GET {base}/v1/models`, Gemini `GET {base}/v1beta/models`),
//! with the key sent as a real request sends it. A refusal is classified by
//! the protocol's own error rules, like any attempt's, so "the key is bad"
//! means here what it means for a request.

use std::time::Duration;

use bytes::Bytes;
use http::header::ACCEPT;
use http::{HeaderName, HeaderValue, Method, Request, Uri};
use tokio::time::Instant;

use super::read_body;
use crate::adapters::deployment::ProviderRt;
use crate::config::ProviderKey;
use crate::error::{ErrorCode, GatewayError, Source};

/// The longest a check may take (the provider's own timeouts may be
/// shorter).
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(10);
/// Of an error answer, this much is read to classify it.
const MAX_ERROR_BODY: usize = 64 * 1024;

/// What the upstream said about a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It took the key: a model list, or a refusal of this one call that is
    /// not about the key (a restricted key without the scope to list
    /// models is still a good key).
    Works,
    /// It still says the key is bad.
    Rejected,
    /// No word on the key (unreachable, slow, overloaded, rate limited, no
    /// model list): the reason, for the log.
    Unknown(String),
}

/// Where a provider lists its models. `None` only for a base URL that does
/// not parse (the config check refuses those).
pub fn models_url(p: &ProviderRt) -> Option<Uri> {
    p.api().models_url(&p.cfg).parse().ok()
}

/// Ask the upstream whether it takes `key`.
pub async fn check(p: &ProviderRt, key: &ProviderKey) -> Verdict {
    match list_models(p, Some(key)).await {
        Ok(()) => Verdict::Works,
        Err(e) if e.upstream_status.is_some() => verdict(&e),
        Err(e) => Verdict::Unknown(e.message),
    }
}

/// The free call itself: the model list with `key` (none: a provider that
/// takes none). `Err` is the refusal classified as a request's would be
/// (with its status), or, with no status, what kept the answer away.
pub async fn list_models(p: &ProviderRt, key: Option<&ProviderKey>) -> Result<(), GatewayError> {
    let req = build(p, key)
        .map_err(|e| GatewayError::new(ErrorCode::UpstreamError, Source::Gateway, e))?;
    let t = p.cfg.timeouts;
    let by = Instant::now() + t.total.min(CHECK_TIMEOUT);
    let first_by = (Instant::now() + t.first_byte).min(by);
    let fut = crate::upstream::client::request(t.connect, req);
    let resp = match tokio::time::timeout_at(first_by, fut).await {
        Err(_) => {
            return Err(GatewayError::upstream(
                ErrorCode::Timeout,
                "no answer in time",
            ))
        }
        Ok(Err(e)) => {
            return Err(GatewayError::upstream(
                ErrorCode::ConnectionError,
                format!("could not reach the upstream: {e}"),
            ))
        }
        Ok(Ok(r)) => r,
    };
    let status = resp.status();
    if status.is_success() {
        return Ok(());
    }
    let headers = resp.headers().clone();
    let body = read_body(resp.into_body(), MAX_ERROR_BODY, by, by).await?;
    let secrets = p.secret_refs();
    let mut e = p.api().classify(status, &headers, &body, &secrets);
    e.upstream_status.get_or_insert(status.as_u16());
    Err(e)
}

/// A refusal's word on the key.
fn verdict(e: &GatewayError) -> Verdict {
    match (e.code, e.source) {
        (ErrorCode::AuthFailed, Source::Upstream) => Verdict::Rejected,
        // Known, and refused this call only; or known and spent (a request
        // will find that out and set it aside as spent).
        (ErrorCode::Forbidden, Source::Upstream) => Verdict::Works,
        _ if e.quota_exhausted => Verdict::Works,
        _ => Verdict::Unknown(e.to_string()),
    }
}

fn build(p: &ProviderRt, key: Option<&ProviderKey>) -> Result<Request<Bytes>, String> {
    let url = models_url(p).ok_or("the provider's base_url does not parse")?;
    let mut req = Request::new(Bytes::new());
    *req.method_mut() = Method::GET;
    *req.uri_mut() = url;
    let h = req.headers_mut();
    h.insert(ACCEPT, HeaderValue::from_static("application/json"));
    if let Some(key) = key {
        let (name, value) = super::provider::key_header(p.api(), key).map_err(|e| e.message)?;
        h.insert(name, value);
    }
    for (k, v) in p.api().fixed_headers() {
        h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
    }
    // Static headers a real request carries (an organization, a proxy's
    // own auth) go with the check too.
    for (k, v) in &p.cfg.headers {
        if let (Ok(name), Ok(value)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) {
            h.insert(name, value);
        }
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_word_on_the_key_decides() {
        let up = |code| GatewayError::new(code, Source::Upstream, "x");
        assert_eq!(verdict(&up(ErrorCode::AuthFailed)), Verdict::Rejected);
        assert_eq!(verdict(&up(ErrorCode::Forbidden)), Verdict::Works);
        let mut spent = up(ErrorCode::RateLimited);
        spent.quota_exhausted = true;
        assert_eq!(verdict(&spent), Verdict::Works);
        for code in [
            ErrorCode::RateLimited,
            ErrorCode::Overloaded,
            ErrorCode::UpstreamError,
            ErrorCode::ModelNotFound,
            ErrorCode::Timeout,
        ] {
            assert!(matches!(verdict(&up(code)), Verdict::Unknown(_)), "{code}");
        }
        // The gateway's own trouble building the request says nothing.
        let ours = GatewayError::new(ErrorCode::AuthFailed, Source::Gateway, "x");
        assert!(matches!(verdict(&ours), Verdict::Unknown(_)));
    }
}
