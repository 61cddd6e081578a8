//! Anthropic Messages upstreams.

use bytes::Bytes;
use switchyard_protocol::ir::{ChatRequest, ChatResponse};

use super::body::Outbound;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::state::live::DeploymentRt;

pub fn encode(_dep: &DeploymentRt, _ir: &ChatRequest) -> Result<Outbound, GatewayError> {
    Err(GatewayError::new(
        ErrorCode::UpstreamError,
        Source::Gateway,
        "anthropic adapter pending",
    ))
}

pub fn decode(_bytes: &[u8], _out: &Outbound) -> Result<ChatResponse, GatewayError> {
    Err(GatewayError::new(
        ErrorCode::UpstreamError,
        Source::Gateway,
        "anthropic adapter pending",
    ))
}

pub fn encode_response(_r: &ChatResponse) -> Bytes {
    Bytes::new()
}
