//! OpenAI-protocol upstreams (OpenAI, DeepSeek, Qwen compatible-mode, GLM,
//! Kimi, Groq, vLLM, Ollama…) for OpenAI-speaking clients: the passthrough
//! path. The client's body is forwarded with only model, stream_options and
//! options spliced in; answers are forwarded byte for byte, peeked for usage.

pub mod errors;
pub mod stream;

use bytes::Bytes;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderValue, Request};
use http_body_util::Full;
use switchyard_protocol::openai::{peek_response, RequestView, UpstreamEdits};
use tokio::time::Instant;

use super::{earliest, read_body, CallInfo, JsonAnswer};
use crate::error::{ErrorCode, GatewayError};
use crate::state::live::DeploymentRt;
use crate::upstream::events::UpstreamEvents;
use crate::upstream::keys;
pub use stream::{OpenAiStream, Step};

/// Largest upstream JSON answer or error body we read.
const MAX_ANSWER: usize = 64 * 1024 * 1024;
const MAX_ERROR_BODY: usize = 1024 * 1024;

/// What came back from one attempt.
pub enum Answer {
    Json(JsonAnswer),
    Stream(OpenAiStream),
}

/// One attempt against one deployment.
pub async fn chat(
    dep: &DeploymentRt,
    view: &RequestView<'_>,
    call: &CallInfo,
) -> Result<Answer, GatewayError> {
    let provider = &dep.provider;
    let t = provider.cfg.timeouts;
    let started = Instant::now();
    let first_byte_by = earliest(started + t.first_byte, call.deadline);
    let total_by = earliest(started + t.total, call.deadline);

    let body = view.write_upstream(&UpstreamEdits {
        model: Some(&dep.cfg.model),
        force_include_usage: true,
        options: (!provider.cfg.options.is_empty()).then_some(&provider.cfg.options),
    });
    let req = build_request(dep, view.typed.stream, Bytes::from(body), call)?;
    let resp = match tokio::time::timeout_at(first_byte_by, provider.http.request(req)).await {
        Err(_) => return Err(silent("no response headers before the first-byte timeout")),
        Ok(Err(e)) => return Err(connect_error(&e)),
        Ok(Ok(r)) => r,
    };
    let status = resp.status();
    if !status.is_success() {
        let headers = resp.headers().clone();
        let body = read_body(resp.into_body(), MAX_ERROR_BODY, total_by).await?;
        return Err(errors::classify(
            status,
            &headers,
            &body,
            &provider.secret_refs(),
        ));
    }
    if view.typed.stream {
        let is_sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        if !is_sse {
            return Err(GatewayError::upstream(
                ErrorCode::UpstreamError,
                "upstream answered a stream request without an event stream",
            ));
        }
        let events = UpstreamEvents::new(resp.into_body());
        let stream =
            OpenAiStream::open(events, view.typed.include_usage, first_byte_by, started).await?;
        return Ok(Answer::Stream(stream));
    }
    let body = read_body(resp.into_body(), MAX_ANSWER, total_by).await?;
    let ttfb = started.elapsed();
    let peek = peek_response(&body).map_err(|e| {
        GatewayError::upstream(
            ErrorCode::UpstreamError,
            format!("upstream answer is not valid JSON: {e}"),
        )
    })?;
    let usage = peek.usage.as_ref().map(|u| u.to_ir()).unwrap_or_default();
    let model = peek.model.as_deref().unwrap_or(&dep.cfg.model).to_owned();
    Ok(Answer::Json(JsonAnswer {
        body,
        usage,
        model,
        ttfb,
    }))
}

fn build_request(
    dep: &DeploymentRt,
    stream: bool,
    body: Bytes,
    call: &CallInfo,
) -> Result<Request<Full<Bytes>>, GatewayError> {
    let provider = &dep.provider;
    let mut req = Request::post(&provider.chat_url)
        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
        .header(
            ACCEPT,
            HeaderValue::from_static(if stream {
                "text/event-stream"
            } else {
                "application/json"
            }),
        );
    if let Some(key) = keys::pick(&provider.cfg.keys) {
        let value =
            HeaderValue::try_from(format!("Bearer {}", key.secret.expose())).map_err(|_| {
                GatewayError::new(
                    ErrorCode::AuthFailed,
                    crate::error::Source::Gateway,
                    format!("provider key {} is not a valid header value", key.label),
                )
            })?;
        req = req.header(AUTHORIZATION, value);
    }
    for (k, v) in &provider.cfg.headers {
        req = req.header(k.as_str(), v.as_str());
    }
    if let Some(tp) = &call.traceparent {
        req = req.header("traceparent", tp.clone());
    }
    req.body(Full::new(body)).map_err(|e| {
        GatewayError::new(
            ErrorCode::UpstreamError,
            crate::error::Source::Gateway,
            format!("could not build the upstream request: {e}"),
        )
    })
}

/// A silent upstream: `timeout`, not retried, falls back at once.
pub fn silent(what: &str) -> GatewayError {
    GatewayError::upstream(ErrorCode::Timeout, format!("upstream timed out: {what}"))
}

fn connect_error(e: &hyper_util::client::legacy::Error) -> GatewayError {
    use std::error::Error as _;
    let mut detail = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        detail = format!("{detail}: {s}");
        src = s.source();
    }
    GatewayError::upstream(
        ErrorCode::ConnectionError,
        format!("could not reach upstream: {detail}"),
    )
}
