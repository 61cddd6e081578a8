//! `POST /v1/embeddings`: routed like chat (a route name or a deployment id,
//! the client's `routes`, its rpm/tpm), to deployments that declare the
//! `embeddings` capability only, with the same retries, fallbacks, circuits
//! and limits (`reliability::Op::Embeddings`). Errors in the OpenAI envelope.

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use http::HeaderMap;
use tokio::time::Instant;

use super::pipeline;
use crate::adapters::CallInfo;
use crate::app::App;
use crate::config::{Capabilities, Capability};
use crate::doors::{embeddings, Door};
use crate::error::GatewayError;
use crate::reliability::{Op, Served};
use crate::route::Facts;

/// An upstream that reports no usage (Gemini's batch embeddings) has its
/// input counted here, with the tokenizer, so the request is not recorded
/// at $0 (contract §8): the answer's usage, the log and the row say so.
async fn count_unreported(
    req: &embeddings::EmbeddingsRequest<'_>,
    model: &str,
    j: &mut crate::adapters::JsonAnswer,
    ctx: &mut crate::reliability::ctx::RequestCtx,
) {
    if j.usage.input_tokens > 0 || req.inputs.is_empty() {
        return;
    }
    let mut text = String::new();
    let mut tokens = 0u64;
    for i in &req.inputs {
        match i {
            embeddings::EmbedInput::Text(t) => {
                text.push_str(t);
                text.push('\n');
            }
            embeddings::EmbedInput::Tokens(t) => tokens += t.len() as u64,
        }
    }
    tokens += crate::tokenize::count_output(model, text).await;
    j.usage.input_tokens = tokens;
    ctx.usage_estimated = true;
    // The client's copy of the answer says the same.
    if let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&j.body) {
        v["usage"] = serde_json::json!({"prompt_tokens": tokens, "total_tokens": tokens});
        if let Ok(b) = serde_json::to_vec(&v) {
            j.body = b.into();
        }
    }
}

pub async fn embeddings(State(app): State<App>, headers: HeaderMap, body: Body) -> Response {
    let live = app.serving();
    let rid = super::request_id(&headers);
    let mut ctx = app.request_ctx(&rid, &headers, &live);
    let result: Result<Served, GatewayError> = async {
        let (who, bytes, _) = pipeline::admit(&live, &headers, body, false, &mut ctx).await?;
        let req = embeddings::decode(super::body::utf8(&bytes)?)?;
        ctx.model = Some(req.model.clone());
        let facts = Facts {
            must_declare: Capabilities::from_iter([Capability::Embeddings]),
            // Each input is embedded on its own: the largest must fit.
            prompt_tokens: req.largest_input(),
            max_tokens: Some(0),
            ..Facts::default()
        };
        let estimate = req.estimated_tokens();
        ctx.prompt_estimate = estimate;
        let planned =
            pipeline::prepare(&live, who.as_ref(), &req.model, &facts, estimate, &mut ctx)?;
        let call = CallInfo {
            traceparent: headers.get(&crate::names::TRACEPARENT).cloned(),
            deadline: planned
                .route
                .and_then(|r| r.deadline)
                .map(|d| Instant::now() + d),
            anthropic_beta: None,
            capture: false,
        };
        let served = pipeline::execute(
            &planned.plan,
            Op::Embeddings(&req),
            &call,
            estimate,
            &mut ctx,
        )
        .await?;
        ctx.served_by(&served.dep.name, &served.dep.model);
        ctx.fallback_reason = served.fallback_reason;
        let mut served = served;
        if let crate::adapters::Answer::Json(j) = &mut served.answer {
            count_unreported(&req, &served.dep.model, j, &mut ctx).await;
        }
        Ok(served)
    }
    .await;
    match result {
        Ok(served) => pipeline::deliver_json(served, ctx, &rid, Door::OpenAiChat),
        Err(e) => pipeline::fail_plain(Door::OpenAiChat, &e, ctx, &rid),
    }
}
