//! Anthropic Messages upstreams (`/v1/messages`, `x-api-key`,
//! `anthropic-version`), and the Anthropic client dialect's answers.

pub mod errors;

use bytes::Bytes;
use switchyard_protocol::anthropic::{self as an, Target};
use switchyard_protocol::ir::{ChatRequest, ChatResponse};

use super::body::Outbound;
use super::convert::bad_json;
use crate::adapters::deployment::DeploymentRt;
use crate::error::GatewayError;

/// IR → `/v1/messages` body (system hoisted, turns alternated, JSON mode as a
/// forced tool, prefill trimmed).
pub fn encode(dep: &DeploymentRt, ir: &ChatRequest) -> Result<Outbound, GatewayError> {
    let target = Target {
        model: &dep.cfg.model,
        max_output_tokens: dep.cfg.max_output_tokens,
        stream: ir.stream,
    };
    let mut enc =
        an::encode_request(ir, &target).map_err(|e| GatewayError::invalid(None, e.to_string()))?;
    merge_options(&mut enc.body, &dep.provider.cfg.options);
    Ok(Outbound {
        body: enc.body,
        json_tool: enc.json_tool,
        prefill_trimmed: enc.prefill_trimmed,
        responses_api: false,
    })
}

pub fn decode(bytes: &[u8], out: &Outbound) -> Result<ChatResponse, GatewayError> {
    an::decode_response(bytes, out.json_tool.as_deref()).map_err(bad_json)
}

pub fn encode_response(r: &ChatResponse) -> Bytes {
    Bytes::from(an::encode_response(r))
}

/// Provider `options` are top-level body fields, merged last. The body was
/// just encoded by us, so one more pass over it is cheap and exact.
pub fn merge_options(body: &mut Vec<u8>, options: &serde_json::Map<String, serde_json::Value>) {
    if options.is_empty() {
        return;
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return;
    };
    let Ok(fields) = switchyard_protocol::passthrough::parse_object(text) else {
        return;
    };
    let merged = switchyard_protocol::passthrough::write(
        &fields,
        &switchyard_protocol::passthrough::Splice {
            model: fields
                .iter()
                .find(|(k, _)| k == "model")
                .and_then(|(_, v)| serde_json::from_str(v.get()).ok()),
            provider_options: Some(options),
            ..Default::default()
        },
    );
    *body = merged;
}
