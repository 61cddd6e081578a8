//! The last layer (`degraded.enabled`): when nothing could serve, answer with
//! the configured message in the client's dialect — a normal, clearly labelled
//! answer (`x-switchyard-deployment: degraded` and the reason in
//! `x-switchyard-fallback-reason`) rather than an error page.

use axum::response::Response;
use bytes::{Bytes, BytesMut};
use http::StatusCode;
use switchyard_protocol::ir::{ChatResponse, FinishReason, StreamEvent};
use switchyard_protocol::openai::{encode_chunk, ChunkEnvelope};
use switchyard_protocol::sse::{data_frame, DONE_FRAME};
use switchyard_protocol::{anthropic, openai};

use super::respond::{self, ServedHeaders};
use crate::adapters::Dialect;
use crate::error::{ErrorCode, GatewayError};
use crate::state::live::Live;

/// `Some` when degraded answers are on and `e` means "nobody could serve".
pub fn reply(
    live: &Live,
    dialect: Dialect,
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
    };
    if !stream {
        let body = match dialect {
            Dialect::Anthropic => anthropic::encode_response(&answer),
            _ => openai::encode_response(&answer),
        };
        return Some(respond::json(Bytes::from(body), &headers));
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
    let mut out = BytesMut::new();
    match dialect {
        Dialect::Anthropic => {
            let mut enc = anthropic::StreamEncoder::new();
            for ev in &events {
                enc.push(ev).iter().for_each(|f| out.extend_from_slice(f));
            }
            enc.end().iter().for_each(|f| out.extend_from_slice(f));
        }
        _ => {
            let env = ChunkEnvelope {
                id: answer.id.clone(),
                model: answer.model.clone(),
                created,
            };
            for ev in &events {
                out.extend_from_slice(&data_frame(&encode_chunk(&env, ev)));
            }
            out.extend_from_slice(DONE_FRAME);
        }
    }
    Some(respond::reply(
        StatusCode::OK,
        "text/event-stream",
        axum::body::Body::from(out.freeze()),
        &headers,
    ))
}
