//! RELIABILITY: walk the plan's candidates, one attempt each, falling back
//! only on errors the contract says may fall back and only before anything
//! reached the client (streams are opened up to their first event inside the
//! attempt). Every attempt is recorded for the decision log.

pub mod circuit;
pub mod health;
pub mod limits;
pub mod retry;

use std::sync::Arc;

use tokio::time::Instant;

use crate::adapters::{self, Answer, CallInfo, Inbound};
use crate::error::{ErrorCode, GatewayError};
use crate::observe::ctx::{AttemptLog, RequestCtx};
use crate::route::Plan;
use crate::state::live::DeploymentRt;

pub struct Served {
    pub answer: Answer,
    pub dep: Arc<DeploymentRt>,
    pub attempts: usize,
    /// Why the first choice did not serve, when it did not.
    pub fallback_reason: Option<&'static str>,
}

pub async fn execute(
    plan: &Plan,
    inbound: &Inbound<'_>,
    call: &CallInfo,
    ctx: &mut RequestCtx,
) -> Result<Served, GatewayError> {
    let mut errors: Vec<GatewayError> = Vec::new();
    for cand in &plan.candidates {
        let started = Instant::now();
        let result = adapters::chat(&cand.dep, inbound, call).await;
        let latency = started.elapsed();
        match result {
            Ok(answer) => {
                let ttfb = answer.ttfb();
                ctx.attempts.push(AttemptLog::ok(
                    &cand.dep.name,
                    &cand.dep.provider.name,
                    latency,
                    ttfb,
                ));
                return Ok(Served {
                    answer,
                    dep: cand.dep.clone(),
                    attempts: errors.len() + 1,
                    fallback_reason: errors.first().map(|e| e.code.as_str()),
                });
            }
            Err(e) => {
                ctx.attempts.push(AttemptLog::failed(
                    &cand.dep.name,
                    &cand.dep.provider.name,
                    &e,
                    latency,
                ));
                if e.code == ErrorCode::AuthFailed {
                    tracing::error!(deployment = %cand.dep.cfg.id, "upstream rejected the gateway's key: {}", e.message);
                }
                let stop = !e.fall_back();
                errors.push(e);
                if stop {
                    break;
                }
            }
        }
    }
    Err(give_up(plan, errors))
}

/// One failure: that error. Several alike: the shared code (a client can act
/// on a 429). Mixed: `no_healthy_deployment`.
fn give_up(plan: &Plan, mut errors: Vec<GatewayError>) -> GatewayError {
    let Some(last) = errors.pop() else {
        let why = if plan.skipped.is_empty() {
            "the route has no targets".to_owned()
        } else {
            let list: Vec<String> = plan
                .skipped
                .iter()
                .map(|(d, r)| format!("{d}: {r}"))
                .collect();
            format!("no usable deployment ({})", list.join(", "))
        };
        return GatewayError::new(
            ErrorCode::NoHealthyDeployment,
            crate::error::Source::Gateway,
            why,
        );
    };
    if errors.is_empty() || errors.iter().all(|e| e.code == last.code) || !last.fall_back() {
        return last;
    }
    GatewayError::new(
        ErrorCode::NoHealthyDeployment,
        crate::error::Source::Gateway,
        format!(
            "every candidate failed; last: {}: {}",
            last.code, last.message
        ),
    )
}
