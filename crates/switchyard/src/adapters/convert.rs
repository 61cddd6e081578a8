//! A whole (non-streamed) upstream answer → the client's dialect. Same
//! dialect: the bytes as they came, peeked for usage and model. Otherwise:
//! decoded into the IR by the provider's module
//! ([`super::provider::Provider::decode`]) and encoded for the client.

use bytes::Bytes;
use switchyard_protocol::openai as oa;

use super::body::Outbound;
use super::{Dialect, Inbound, JsonAnswer};
use crate::adapters::deployment::DeploymentRt;
use crate::error::{ErrorCode, GatewayError};

pub fn answer(
    dep: &DeploymentRt,
    inbound: &Inbound<'_>,
    out: &Outbound,
    bytes: Bytes,
) -> Result<JsonAnswer, GatewayError> {
    let upstream = dep.api().dialect();
    if out.responses_api {
        return responses_passthrough(dep, inbound, bytes);
    }
    let same =
        crate::adapters::speaks(dep.api(), inbound.door()) && dep.api().passes_answers_through();
    if same && upstream == Dialect::OpenAi {
        return passthrough(dep, bytes);
    }
    if upstream == Dialect::Gemini && inbound.n() > 1 {
        return gemini_choices(dep, bytes);
    }
    let mut ir = dep.api().decode(&bytes, out)?;
    if ir.created == 0 {
        ir.created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or_default();
    }
    let body = if same { bytes } else { inbound.answer(&ir) };
    let model = if ir.model.is_empty() {
        dep.cfg.model.clone()
    } else {
        ir.model
    };
    Ok(JsonAnswer {
        body,
        usage: ir.usage,
        model,
        ttfb: Default::default(),
    })
}

/// OpenAI to OpenAI: the bytes go as they came; only usage and model are
/// read (see `peek_usage`: the choices are not parsed).
fn passthrough(dep: &DeploymentRt, bytes: Bytes) -> Result<JsonAnswer, GatewayError> {
    let peek = oa::peek_usage(&bytes).map_err(|e| {
        GatewayError::upstream(
            ErrorCode::UpstreamError,
            format!("upstream answer is not valid JSON: {e}"),
        )
    })?;
    let usage = peek.usage.map(|u| u.to_ir()).unwrap_or_default();
    let model = match peek.model {
        Some(m) if !m.is_empty() => m.into_owned(),
        _ => dep.cfg.model.clone(),
    };
    Ok(JsonAnswer {
        body: bytes,
        usage,
        model,
        ttfb: Default::default(),
    })
}

/// Several Gemini candidates (`candidateCount`) as an OpenAI client's choices.
fn gemini_choices(dep: &DeploymentRt, bytes: Bytes) -> Result<JsonAnswer, GatewayError> {
    let mut all = super::gemini::decode_candidates(&bytes)?;
    let created = crate::doors::unix_now();
    for r in &mut all {
        r.created = created;
        if r.model.is_empty() {
            r.model.clone_from(&dep.cfg.model);
        }
    }
    let first = &all[0];
    Ok(JsonAnswer {
        body: Bytes::from(oa::encode_choices(&all)),
        usage: first.usage,
        model: first.model.clone(),
        ttfb: Default::default(),
    })
}

/// A Responses upstream's answer to a Responses client: the bytes as they
/// came, read for usage and model (a failed body is the upstream's error),
/// and kept as the client's (its id is what it may continue).
fn responses_passthrough(
    dep: &DeploymentRt,
    inbound: &Inbound<'_>,
    bytes: Bytes,
) -> Result<JsonAnswer, GatewayError> {
    use switchyard_protocol::responses::{decode_response, DecodeError};
    let r = match decode_response(&bytes) {
        Ok(r) => r,
        Err(DecodeError::Failed(e)) => return Err(super::openai::errors::responses_failure(&e)),
        Err(DecodeError::Unparsable(m)) => {
            return Err(GatewayError::upstream(
                ErrorCode::UpstreamError,
                format!("upstream answer is not a Response: {m}"),
            ))
        }
    };
    if let Inbound::Responses(ri) = inbound {
        ri.keep_upstream(&r.id, bytes.clone());
    }
    let model = if r.model.is_empty() {
        dep.cfg.model.clone()
    } else {
        r.model
    };
    Ok(JsonAnswer {
        body: bytes,
        usage: r.usage,
        model,
        ttfb: Default::default(),
    })
}

pub fn bad_json(e: serde_json::Error) -> GatewayError {
    GatewayError::upstream(
        ErrorCode::UpstreamError,
        format!("upstream answer is not valid JSON: {e}"),
    )
}
