//! The upstream body for a (client dialect, upstream provider) pair, made by
//! the provider's module ([`super::provider::Provider::encode`]). Same
//! dialect: the client's bytes with `model` (and little else) spliced in.
//! Otherwise: through the IR into the upstream's dialect. A Responses
//! request to a deployment with its own Responses API goes as it came.

use super::provider::Provider as Api;
use super::Inbound;
use crate::adapters::deployment::DeploymentRt;
use crate::config::Capability;
use crate::doors::responses::ResponsesIn;
use crate::error::GatewayError;
use switchyard_protocol::ir::ChatRequest;

/// What goes upstream, and what the answer's translation must know about it.
#[derive(Debug, Default)]
pub struct Outbound {
    pub body: Vec<u8>,
    /// JSON mode emulated with this forced tool (Anthropic): its call comes
    /// back as the answer text.
    pub json_tool: Option<String>,
    /// Whitespace trimmed off a trailing assistant (prefill) message, to be
    /// put back in front of the continuation.
    pub prefill_trimmed: String,
    /// A Responses request forwarded to the upstream's own `/responses`.
    pub responses_api: bool,
}

impl Outbound {
    pub fn plain(body: Vec<u8>) -> Self {
        Outbound {
            body,
            ..Outbound::default()
        }
    }
}

/// A Responses request goes to this deployment's own `/responses` as it
/// came: an `openai`/`azure` deployment with the `responses` capability,
/// unless the request continues a conversation only this gateway has.
pub fn responses_pass(dep: &DeploymentRt, r: &ResponsesIn<'_>) -> bool {
    dep.api().has_responses_api()
        && dep.cfg.capabilities.contains(Capability::Responses)
        && !r.expanded
}

/// The deployment runs the hosted web search the request asked for
/// (Anthropic's server tool; Gemini's Google Search, beside function
/// declarations only where the deployment declares `search_with_tools`).
pub fn runs_web_search(dep: &DeploymentRt, ir: &ChatRequest) -> bool {
    let api = dep.api();
    api.runs_web_search(ir)
        || (api.search_beside_tools() && dep.cfg.capabilities.contains(Capability::SearchWithTools))
}

/// `n` > 1 where the upstream cannot give several choices (its module
/// says why).
fn choices_refusal(api: &dyn Api, inbound: &Inbound<'_>) -> Option<GatewayError> {
    let n = inbound.n();
    if n <= 1 {
        return None;
    }
    let why = api.refuses_choices(inbound.stream())?;
    Some(GatewayError::invalid(
        Some("n".into()),
        format!("n = {n} cannot be served: {why}"),
    ))
}

/// The provider's own `options`, when it has any (merged into every body).
pub fn options(dep: &DeploymentRt) -> Option<&serde_json::Map<String, serde_json::Value>> {
    let o = &dep.provider.cfg.options;
    (!o.is_empty()).then_some(o)
}

/// `inlined`: the request's IR with its image URLs fetched and inlined
/// ([`super::images::inline`]), for a provider that takes only inline
/// images.
pub fn build(
    dep: &DeploymentRt,
    inbound: &Inbound<'_>,
    inlined: Option<&ChatRequest>,
) -> Result<Outbound, GatewayError> {
    if let Inbound::Responses(r) = inbound {
        // The same dialect: the client's fields as they came, `model`
        // replaced (Azure's Responses API names the deployment there too).
        if responses_pass(dep, r) {
            return Ok(Outbound {
                body: r.peek.write_upstream(Some(&dep.cfg.model), options(dep)),
                responses_api: true,
                ..Outbound::default()
            });
        }
        if let Some(e) = r.refusal() {
            return Err(e);
        }
    }
    if let Some(e) = choices_refusal(dep.api(), inbound) {
        return Err(e);
    }
    match inlined {
        Some(ir) => dep.api().encode_inlined(dep, inbound, ir),
        None => dep.api().encode(dep, inbound),
    }
}
