//! One token-counting attempt (`POST /v1/messages/count_tokens`,
//! MAPPING.md §15), answered `{"input_tokens": N}`; each provider's module
//! says whether it counts itself and builds the request:
//! * Anthropic: the client's body forwarded with `model` replaced to
//!   `/v1/messages/count_tokens` (with the client's `anthropic-beta`), the
//!   answer passed back as it came;
//! * Gemini: `:countTokens` with `generateContentRequest` built exactly as the
//!   chat adapter builds a generation (system instruction and tools
//!   included; `contents` alone would under-count), `totalTokens` read back;
//! * OpenAI, Azure and other OpenAI-compatible upstreams have no counting
//!   endpoint: counted locally ([`crate::tokenize`]), no upstream call.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchyard_protocol::ir::{ChatRequest, Usage};

use super::{send, Answer, CallInfo, Inbound, JsonAnswer};
use crate::adapters::deployment::DeploymentRt;
use crate::config::ProviderKey;
use crate::error::{ErrorCode, GatewayError};

/// Does this deployment count without an upstream call?
pub fn is_local(dep: &DeploymentRt) -> bool {
    dep.endpoint.count_tokens_url.is_none()
}

/// The local count, as the answer.
pub fn local(dep: &DeploymentRt, ir: &ChatRequest) -> JsonAnswer {
    answer(
        crate::tokenize::count_chat(ir, &dep.cfg.model),
        &dep.cfg.model,
    )
}

pub fn answer(n: u64, model: &str) -> JsonAnswer {
    #[derive(Serialize)]
    struct Count {
        input_tokens: u64,
    }
    JsonAnswer {
        body: serde_json::to_vec(&Count { input_tokens: n })
            .unwrap_or_default()
            .into(),
        usage: Usage::default(),
        model: model.to_owned(),
        ttfb: Default::default(),
    }
}

/// One attempt: the upstream's counter, or the local count.
pub async fn count_tokens(
    dep: &DeploymentRt,
    key: Option<&ProviderKey>,
    inbound: &Inbound<'_>,
    call: &CallInfo,
) -> Result<Answer, GatewayError> {
    let Some(url) = &dep.endpoint.count_tokens_url else {
        return Ok(Answer::Json(local(dep, inbound.ir())));
    };
    let provider = dep.api();
    let Some(body) = provider.count_tokens_body(dep, inbound) else {
        return Ok(Answer::Json(local(dep, inbound.ir())));
    };
    let (bytes, ttfb) = send::post_json(dep, key, url, body?, call).await?;
    let mut a = provider.count_tokens_answer(dep, bytes)?;
    a.ttfb = ttfb;
    Ok(Answer::Json(a))
}

/// `{"generateContentRequest": {model, contents, systemInstruction, tools, …}}`.
pub fn gemini_request(dep: &DeploymentRt, ir: &ChatRequest) -> Result<Vec<u8>, GatewayError> {
    let generation = super::gemini::encode(dep, ir)?;
    let mut req: Map<String, Value> = serde_json::from_slice(&generation.body)
        .map_err(|e| GatewayError::invalid(None, format!("cannot count for Gemini: {e}")))?;
    req.insert(
        "model".into(),
        Value::String(format!("models/{}", dep.cfg.model)),
    );
    let mut outer = Map::new();
    outer.insert("generateContentRequest".into(), Value::Object(req));
    Ok(serde_json::to_vec(&outer).unwrap_or_default())
}

pub fn gemini_total(bytes: &[u8]) -> Result<u64, GatewayError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Count {
        total_tokens: u64,
    }
    serde_json::from_slice::<Count>(bytes)
        .map(|c| c.total_tokens)
        .map_err(|e| bad_answer(&e))
}

/// Anthropic's answer passes through once it is known to hold a count.
/// An upstream that answers `{"input_tokens": N}` itself: passed back as it
/// came, the count read.
pub fn passed_answer(model: &str, bytes: bytes::Bytes) -> Result<JsonAnswer, GatewayError> {
    #[derive(Deserialize)]
    struct Count {
        #[expect(dead_code, reason = "checked to be present, passed through")]
        input_tokens: u64,
    }
    serde_json::from_slice::<Count>(&bytes).map_err(|e| bad_answer(&e))?;
    Ok(JsonAnswer {
        body: bytes,
        ..answer(0, model)
    })
}

fn bad_answer(e: &dyn std::fmt::Display) -> GatewayError {
    GatewayError::upstream(
        ErrorCode::UpstreamError,
        format!("upstream token count is not valid: {e}"),
    )
}
