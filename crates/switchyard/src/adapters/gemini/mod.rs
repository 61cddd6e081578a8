//! Gemini generateContent upstreams.

use switchyard_protocol::ir::{ChatRequest, ChatResponse};

use super::body::Outbound;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::state::live::DeploymentRt;

pub fn encode(_dep: &DeploymentRt, _ir: &ChatRequest) -> Result<Outbound, GatewayError> {
    Err(GatewayError::new(
        ErrorCode::UpstreamError,
        Source::Gateway,
        "gemini adapter pending",
    ))
}

pub fn decode(_bytes: &[u8]) -> Result<ChatResponse, GatewayError> {
    Err(GatewayError::new(
        ErrorCode::UpstreamError,
        Source::Gateway,
        "gemini adapter pending",
    ))
}
