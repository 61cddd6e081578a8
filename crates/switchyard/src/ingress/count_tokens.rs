//! `POST /v1/messages/count_tokens`: a Messages body without `max_tokens`,
//! routed like `/v1/messages`; the first candidate that answers counts
//! (`reliability::Op::CountTokens`): an Anthropic deployment forwards to its
//! upstream counter, Gemini counts with `:countTokens`, anything else is
//! counted locally (`crate::tokenize`). An upstream 4xx is the client's
//! answer; a connection error, timeout or 5xx falls back to the next
//! candidate as for chat. Errors in the Anthropic envelope.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;
use switchyard_protocol::anthropic as an;
use switchyard_protocol::passthrough;
use tokio::time::Instant;

use super::pipeline;
use crate::adapters::CallInfo;
use crate::app::App;
use crate::doors::{Door, Inbound};
use crate::error::GatewayError;
use crate::reliability::{Op, Served};
use crate::route::Facts;

pub async fn count_tokens(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    let live = app.serving();
    let rid = super::request_id(&headers);
    let mut ctx = app.request_ctx(&rid, &headers, &live);
    let result: Result<Served, GatewayError> = async {
        let (who, bytes, _) = pipeline::admit(&live, &headers, body, false, &mut ctx).await?;
        let text = super::body::utf8(&bytes)?;
        let fields = passthrough::parse_object(text).map_err(|m| GatewayError::invalid(None, m))?;
        let ir = an::decode_count_fields(&fields)
            .map_err(|e| GatewayError::invalid(e.param, e.message))?;
        let inbound = Inbound::Anthropic { fields, ir };
        let model = inbound.model();
        ctx.model = Some(model.to_owned());
        let facts = Facts::read(&inbound, &headers, &live.config.task_rules);
        // Counting generates nothing: it takes a request from rpm, no tokens.
        let planned = pipeline::prepare(&live, who.as_ref(), model, &facts, 0, &mut ctx)?;
        let call = CallInfo {
            traceparent: headers.get(&crate::names::TRACEPARENT).cloned(),
            deadline: planned
                .route
                .and_then(|r| r.deadline)
                .map(|d| Instant::now() + d),
            anthropic_beta: pipeline::anthropic_beta(&headers),
            capture: false,
        };
        let served =
            pipeline::execute(&planned.plan, Op::CountTokens(&inbound), &call, 0, &mut ctx).await?;
        ctx.served_by(&served.dep.name, &served.dep.model);
        ctx.fallback_reason = served.fallback_reason;
        Ok(served)
    }
    .await;
    match result {
        Ok(served) => pipeline::deliver_json(served, ctx, &rid, Door::AnthropicMessages),
        Err(e) => pipeline::fail_plain(Door::AnthropicMessages, &e, ctx, &rid),
    }
}
