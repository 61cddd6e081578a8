//! The last layer (`degraded.enabled`): when nothing could serve, answer with
//! the configured message in the client's dialect — a normal, clearly labelled
//! answer (`x-switchyard-deployment: degraded` and the reason in
//! `x-switchyard-fallback-reason`) rather than an error page.

use axum::response::Response;
use bytes::BytesMut;
use http::StatusCode;
use switchyard_protocol::ir::{ChatResponse, FinishReason, StreamEvent};

use super::respond::{self, ServedHeaders};
use crate::doors::Door;
use crate::error::{ErrorCode, GatewayError};
use crate::live::Live;

/// `Some` when degraded answers are on and `e` means "nobody could serve".
pub fn reply(
    live: &Live,
    door: Door,
    stream: bool,
    e: &GatewayError,
    request_id: &str,
    attempts: usize,
) -> Option<Response> {
    let cfg = &live.config.degraded;
    let outage = matches!(
        e.code,
        ErrorCode::NoHealthyDeployment
            | ErrorCode::Overloaded
            | ErrorCode::UpstreamError
            | ErrorCode::ConnectionError
            | ErrorCode::Timeout
            | ErrorCode::RateLimited
    );
    if !cfg.enabled || !outage {
        return None;
    }
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let answer = ChatResponse {
        id: format!("degraded-{request_id}"),
        model: "switchyard-degraded".into(),
        created,
        text: Some(cfg.message.clone()),
        finish_reason: FinishReason::Stop,
        ..ChatResponse::default()
    };
    let headers = ServedHeaders {
        request_id,
        deployment: "degraded",
        attempts,
        cache: "off",
        cost_usd: Some(0.0),
        fallback_reason: Some(e.code.as_str()),
        dropped_tools: None,
        rate: None,
        budget_remaining: None,
    };
    if !stream {
        return Some(respond::json(door.answer(&answer), &headers));
    }
    let events = [
        StreamEvent::Start {
            id: answer.id.clone(),
            model: answer.model.clone(),
            created,
        },
        StreamEvent::TextDelta(cfg.message.clone()),
        StreamEvent::Finish {
            reason: FinishReason::Stop,
            raw: None,
        },
    ];
    let mut enc = door.encoder(false);
    let mut out = BytesMut::new();
    for ev in &events {
        enc.encode(ev, &mut out);
    }
    out.extend_from_slice(&enc.end());
    Some(respond::reply(
        StatusCode::OK,
        "text/event-stream",
        axum::body::Body::from(out.freeze()),
        &headers,
    ))
}
