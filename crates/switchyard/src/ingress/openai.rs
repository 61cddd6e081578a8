//! `POST /v1/chat/completions` and `GET /v1/models`.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;
use serde::Serialize;
use sha2::{Digest, Sha256};
use switchyard_protocol::openai::parse_request;
use tokio::time::Instant;

use super::respond::{self, ServedHeaders};
use super::{auth, body, request_id, sse_out, trace_id};
use crate::adapters::openai::Answer;
use crate::adapters::CallInfo;
use crate::app::App;
use crate::error::{ErrorCode, GatewayError};
use crate::observe::ctx::{CandidateLog, RequestCtx};
use crate::reliability::{self, Served};
use crate::route;
use crate::state::live::{Live, Target};

pub async fn chat_completions(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    let live = app.live.load_full();
    let rid = request_id(&headers);
    let mut ctx = RequestCtx::new(
        rid.clone(),
        trace_id(&headers),
        live.config.version.clone(),
        app.decisions.clone(),
    );
    match serve(&live, &headers, body, &mut ctx).await {
        Err(e) => {
            let resp = respond::openai_error(&e, &rid);
            ctx.finish(e.code.status().as_u16(), Some(&e));
            resp
        }
        Ok((served, stream_limits)) => deliver(served, ctx, &live, &rid, stream_limits),
    }
}

async fn serve(
    live: &Arc<Live>,
    headers: &HeaderMap,
    body: Body,
    ctx: &mut RequestCtx,
) -> Result<(Served, sse_out::StreamLimits), GatewayError> {
    let cfg = &live.config;
    let bytes = body::read(body, headers, cfg.server.max_body).await?;
    let text = body::utf8(&bytes)?;
    let view = parse_request(text).map_err(|e| GatewayError::invalid(e.param, e.message))?;
    let model = view.typed.model.as_ref();
    ctx.model = Some(model.to_owned());
    ctx.stream = view.typed.stream;
    if ctx.wants_input_hash() {
        ctx.input_hash = Some(hex::encode(Sha256::digest(&bytes)));
    }
    let client = auth::authenticate(live, headers)?;
    ctx.client = client.map(|c| c.id.clone());
    let target = live.resolve(model).ok_or_else(|| {
        GatewayError::client(ErrorCode::ModelNotFound, format!("unknown model `{model}`: GET /v1/models lists the routes and deployments you can use"))
    })?;
    auth::authorize(client, model, &target)?;
    let plan = route::plan(live, &target);
    ctx.route = plan.route.clone();
    ctx.decision_reason = Some(plan.reason);
    ctx.skipped = plan.skipped.clone();
    ctx.candidates = plan
        .candidates
        .iter()
        .map(|c| CandidateLog {
            deployment: c.dep.cfg.id.clone(),
            role: c.role,
            score: Default::default(),
        })
        .collect();
    let route_deadline = match &target {
        Target::Route(r) => r.deadline,
        Target::Deployment(_) => None,
    };
    let started = Instant::now();
    let call = CallInfo {
        request_id: ctx.request_id.clone(),
        traceparent: headers.get("traceparent").cloned(),
        deadline: route_deadline.map(|d| started + d),
    };
    let served = reliability::execute(&plan, &view, &call, ctx).await?;
    ctx.selected = Some(served.dep.cfg.id.clone());
    ctx.fallback_reason = served.fallback_reason;
    let t = served.dep.provider.cfg.timeouts;
    let limits = sse_out::StreamLimits {
        keepalive: cfg.server.sse_keepalive,
        idle: t.stream_idle,
        total_by: crate::adapters::earliest(started + t.total, call.deadline),
    };
    Ok((served, limits))
}

fn deliver(
    served: Served,
    mut ctx: RequestCtx,
    live: &Live,
    rid: &str,
    limits: sse_out::StreamLimits,
) -> Response {
    let dep = &served.dep.cfg;
    let _ = live;
    match served.answer {
        Answer::Json(j) => {
            ctx.set_usage(&j.usage, dep.pricing.as_ref());
            let headers = ServedHeaders {
                request_id: rid,
                deployment: &dep.id,
                attempts: served.attempts,
                cache: "off",
                cost_usd: ctx.cost_usd,
                fallback_reason: served.fallback_reason,
            };
            let resp = respond::json(j.body, &headers);
            ctx.finish(200, None);
            resp
        }
        Answer::Stream(s) => {
            let headers = ServedHeaders {
                request_id: rid,
                deployment: &dep.id,
                attempts: served.attempts,
                cache: "off",
                cost_usd: None,
                fallback_reason: served.fallback_reason,
            };
            sse_out::openai(s, ctx, limits, dep.pricing, &headers)
        }
    }
}

#[derive(Serialize)]
struct ModelList {
    object: &'static str,
    data: Vec<ModelEntry>,
}

#[derive(Serialize)]
struct ModelEntry {
    id: String,
    object: &'static str,
    created: u64,
    owned_by: String,
}

/// Routes and deployments the caller may use.
pub async fn models(State(app): State<App>, headers: HeaderMap) -> Response {
    let live = app.live.load_full();
    let rid = request_id(&headers);
    let client = match auth::authenticate(&live, &headers) {
        Ok(c) => c,
        Err(e) => return respond::openai_error(&e, &rid),
    };
    let mut data = Vec::new();
    for r in live.config.routes.values() {
        if auth::may_use(client, &r.name, &Target::Route(r)) {
            data.push(ModelEntry {
                id: r.name.clone(),
                object: "model",
                created: 0,
                owned_by: "switchyard".into(),
            });
        }
    }
    for id in &live.config.deployment_order {
        if let Some(d) = live.deployments.get(id) {
            if auth::may_use(client, id, &Target::Deployment(d)) {
                data.push(ModelEntry {
                    id: id.clone(),
                    object: "model",
                    created: 0,
                    owned_by: d.cfg.provider.clone(),
                });
            }
        }
    }
    let body = serde_json::to_vec(&ModelList {
        object: "list",
        data,
    })
    .unwrap_or_default();
    let mut resp = Response::new(Body::from(body));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}
