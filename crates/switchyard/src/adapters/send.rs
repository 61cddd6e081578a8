//! Sending one upstream request: auth and headers, the first-byte timeout on
//! the response head, connection errors, and classifying a non-2xx answer
//! with the protocol's own error rules.

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderName, HeaderValue, Method, Request, Response, Uri};
use tokio::time::Instant;

use super::{read_body, silent, CallInfo};
use crate::adapters::deployment::DeploymentRt;
use crate::config::ProviderKey;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::upstream::client::{SendError, UpstreamBody};

/// Largest upstream JSON answer we read.
pub const MAX_ANSWER: usize = 64 * 1024 * 1024;
const MAX_ERROR_BODY: usize = 1024 * 1024;

/// What kind of upstream call: a stream or not, to the upstream's own
/// Responses API or its usual endpoint.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    pub stream: bool,
    pub responses_api: bool,
}

/// Send and return a 2xx response (body unread), or the classified error.
pub async fn send(
    dep: &DeploymentRt,
    key: Option<&ProviderKey>,
    shape: Shape,
    body: Vec<u8>,
    call: &CallInfo,
    first_byte_by: Instant,
    total_by: Instant,
) -> Result<Response<UpstreamBody>, GatewayError> {
    let url = match (shape.responses_api, &dep.endpoint.responses_url) {
        (true, Some(u)) => u,
        _ if shape.stream => &dep.endpoint.stream_url,
        _ => &dep.endpoint.url,
    };
    let accept = if shape.stream {
        "text/event-stream"
    } else {
        "application/json"
    };
    send_to(dep, key, url, accept, body, call, first_byte_by, total_by).await
}

/// A whole JSON exchange with one of the deployment's other URLs (embeddings,
/// token counting): the answer's bytes and its time to first byte, within
/// the provider's first-byte and total timeouts and the request's deadline.
pub async fn post_json(
    dep: &DeploymentRt,
    key: Option<&ProviderKey>,
    url: &Uri,
    body: Vec<u8>,
    call: &CallInfo,
) -> Result<(Bytes, std::time::Duration), GatewayError> {
    let started = Instant::now();
    let t = dep.provider.cfg.timeouts;
    let first_byte_by = super::earliest(started + t.first_byte, call.deadline);
    let total_by = super::earliest(started + t.total, call.deadline);
    let accept = "application/json";
    let resp = send_to(dep, key, url, accept, body, call, first_byte_by, total_by).await?;
    let bytes = read_body(resp.into_body(), MAX_ANSWER, first_byte_by, total_by).await?;
    Ok((bytes, started.elapsed()))
}

/// [`send`] to one of the deployment's other URLs (embeddings, token
/// counting): the same auth, headers, timeouts and error classification.
#[expect(clippy::too_many_arguments, reason = "one call per attempt kind")]
pub async fn send_to(
    dep: &DeploymentRt,
    key: Option<&ProviderKey>,
    url: &Uri,
    accept: &'static str,
    body: Vec<u8>,
    call: &CallInfo,
    first_byte_by: Instant,
    total_by: Instant,
) -> Result<Response<UpstreamBody>, GatewayError> {
    let provider = &dep.provider;
    let api = dep.api();
    if let Some(pending) = api.pending() {
        // Credentials not fetched yet (just after start): wait for them
        // within the first-byte timeout; the fetch is never ours.
        if tokio::time::timeout_at(first_byte_by, pending)
            .await
            .is_err()
        {
            return Err(GatewayError::new(
                ErrorCode::AuthFailed,
                Source::Gateway,
                format!("no credentials for provider {} yet", provider.name),
            ));
        }
    }
    let mut req = build(dep, url, accept, Bytes::from(body), call)?;
    api.authorize(&mut req, key)?;
    let fut = crate::upstream::client::request(provider.cfg.timeouts.connect, req);
    let resp = match tokio::time::timeout_at(first_byte_by, fut).await {
        Err(_) => return Err(silent("no response headers before the first-byte timeout")),
        Ok(Err(e)) => return Err(connect_error(&e)),
        Ok(Ok(r)) => r,
    };
    let status = resp.status();
    // Remaining-quota headers (OpenAI x-ratelimit-*, Anthropic
    // anthropic-ratelimit-*): the share used moves traffic away as it nears
    // the limit (contract §10), and when a budget hits zero, new requests
    // to this deployment are held until its reset instead of meeting a 429.
    if status.is_success() || status.as_u16() == 429 {
        dep.state.observe_headers(Instant::now(), resp.headers());
    }
    if status.is_success() {
        return Ok(resp);
    }
    let headers = resp.headers().clone();
    let body = read_body(resp.into_body(), MAX_ERROR_BODY, total_by, total_by).await?;
    let secrets = provider.secret_refs();
    Err(dep.api().classify(status, &headers, &body, &secrets))
}

fn build(
    dep: &DeploymentRt,
    url: &Uri,
    accept: &'static str,
    body: Bytes,
    call: &CallInfo,
) -> Result<Request<Bytes>, GatewayError> {
    let provider = &dep.provider;
    let api = dep.api();
    // Built in place: the request builder moves its parts through a chain
    // of closures, a measurable copy on every request.
    let mut req = Request::new(body);
    *req.method_mut() = Method::POST;
    *req.uri_mut() = url.clone();
    let h = req.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    h.insert(ACCEPT, HeaderValue::from_static(accept));
    for (k, v) in api.fixed_headers() {
        h.insert(HeaderName::from_static(k), HeaderValue::from_static(v));
    }
    for (k, v) in &provider.cfg.headers {
        let (Ok(name), Ok(value)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) else {
            return Err(GatewayError::new(
                ErrorCode::UpstreamError,
                Source::Gateway,
                format!("provider header {k} is not a valid header"),
            ));
        };
        h.insert(name, value);
    }
    if let Some(tp) = &call.traceparent {
        h.insert(crate::names::TRACEPARENT.clone(), tp.clone());
    }
    // An Anthropic client's betas (mid-conversation system messages,
    // context management…) go to an Anthropic upstream with its body.
    if let Some(beta) = call
        .anthropic_beta
        .as_ref()
        .filter(|_| api.takes_anthropic_beta())
    {
        h.insert(crate::names::ANTHROPIC_BETA.clone(), beta.clone());
    }
    Ok(req)
}

fn connect_error(e: &SendError) -> GatewayError {
    use std::error::Error as _;
    if let SendError::Setup(_) | SendError::Url = e {
        return GatewayError::new(ErrorCode::UpstreamError, Source::Gateway, e.to_string());
    }
    let mut detail = e.to_string();
    let mut ours = match e {
        SendError::Connect(inner) | SendError::Http(inner) => out_of_descriptors(inner.as_ref()),
        _ => false,
    };
    let mut src = e.source();
    while let Some(s) = src {
        detail = format!("{detail}: {s}");
        ours |= out_of_descriptors(s);
        src = s.source();
    }
    let e = GatewayError::upstream(
        ErrorCode::ConnectionError,
        format!("could not reach upstream: {detail}"),
    );
    // This process ran out of file descriptors: not the provider's fault,
    // so it must not open the provider's circuit (which would refuse every
    // request for a cooldown after the descriptors were free again).
    if ours {
        return GatewayError {
            source: Source::Gateway,
            ..e
        };
    }
    e
}

/// EMFILE / ENFILE: no descriptor for a new socket.
fn out_of_descriptors(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::raw_os_error)
        .is_some_and(|c| c == 23 || c == 24)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_out_of_our_own_descriptors_is_not_the_upstreams_fault() {
        let emfile = SendError::Connect(Box::new(std::io::Error::from_raw_os_error(24)));
        let e = connect_error(&emfile);
        assert_eq!(
            (e.code, e.source),
            (ErrorCode::ConnectionError, Source::Gateway)
        );
        assert!(!crate::registry::circuit::counts_as_failure(&e));
        let refused = SendError::Connect(Box::new(std::io::Error::from_raw_os_error(111)));
        let e = connect_error(&refused);
        assert_eq!(e.source, Source::Upstream);
        assert!(crate::registry::circuit::counts_as_failure(&e));
    }
}
