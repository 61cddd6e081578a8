//! Gemini generateContent upstreams (`:generateContent`,
//! `:streamGenerateContent?alt=sse`, `x-goog-api-key`).

pub mod errors;

use switchyard_protocol::gemini::{self as gm, DecodeError, Target};
use switchyard_protocol::ir::{ChatRequest, ChatResponse};

use super::body::Outbound;
use crate::adapters::deployment::DeploymentRt;
use crate::error::{ErrorCode, GatewayError};

pub fn encode(dep: &DeploymentRt, ir: &ChatRequest) -> Result<Outbound, GatewayError> {
    let target = Target {
        max_output_tokens: dep.cfg.max_output_tokens,
        missing_signature: Some(gm::SKIP_SIGNATURE_VALIDATOR),
    };
    let mut body =
        gm::encode_request(ir, &target).map_err(|e| GatewayError::invalid(e.param, e.message))?;
    super::anthropic::merge_options(&mut body, &dep.provider.cfg.options);
    Ok(Outbound {
        body,
        ..Outbound::default()
    })
}

pub fn decode(bytes: &[u8]) -> Result<ChatResponse, GatewayError> {
    gm::decode_response(bytes).map_err(decode_error)
}

/// Every candidate (`candidateCount` > 1).
pub fn decode_candidates(bytes: &[u8]) -> Result<Vec<ChatResponse>, GatewayError> {
    gm::decode_candidates(bytes).map_err(decode_error)
}

pub fn decode_error(e: DecodeError) -> GatewayError {
    match e {
        DecodeError::Json(m) => GatewayError::upstream(
            ErrorCode::UpstreamError,
            format!("upstream answer is not valid JSON: {m}"),
        ),
        DecodeError::PromptBlocked { reason, message } => blocked(&reason, message.as_deref()),
        DecodeError::Upstream(g) => errors::in_band(g),
        DecodeError::NoCandidates => GatewayError::upstream(
            ErrorCode::UpstreamError,
            "upstream answered with no candidate",
        ),
    }
}

/// A safety block of the prompt itself: `content_filtered`, not an answer.
pub fn blocked(reason: &str, message: Option<&str>) -> GatewayError {
    let detail = message.map(|m| format!(": {m}")).unwrap_or_default();
    GatewayError::client(
        ErrorCode::ContentFiltered,
        format!("the provider blocked the prompt ({reason}){detail}"),
    )
}
