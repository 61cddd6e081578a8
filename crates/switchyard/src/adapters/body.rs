//! The upstream body for a (client dialect, upstream protocol) pair. Same
//! dialect: the client's bytes with `model` (and little else) spliced in.
//! Otherwise: through the IR into the upstream's dialect.

use switchyard_protocol::openai::{self as oa, UpstreamEdits};
use switchyard_protocol::passthrough::{self, Splice};

use super::{Adapter, Inbound};
use crate::adapters::deployment::DeploymentRt;
use crate::config::Capability;
use crate::doors::responses::ResponsesIn;
use crate::error::GatewayError;

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
    fn plain(body: Vec<u8>) -> Self {
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
    matches!(dep.provider.adapter, Adapter::OpenAi | Adapter::Azure)
        && dep.cfg.capabilities.contains(Capability::Responses)
        && !r.expanded
}

/// The deployment runs the hosted web search the request asked for
/// (Anthropic's server tool; Gemini's Google Search, which it will not
/// combine with function declarations).
pub fn runs_web_search(dep: &DeploymentRt, ir: &switchyard_protocol::ir::ChatRequest) -> bool {
    match dep.provider.adapter {
        Adapter::Anthropic => true,
        Adapter::Gemini => ir.tools.is_empty(),
        Adapter::OpenAi | Adapter::Azure => false,
    }
}

/// `n` > 1 where the upstream cannot give several choices: Anthropic never,
/// Gemini (`candidateCount`) not as a stream the gateway could translate.
fn choices_refusal(adapter: Adapter, inbound: &Inbound<'_>) -> Option<GatewayError> {
    let n = inbound.n();
    let why = match adapter {
        _ if n <= 1 => return None,
        Adapter::OpenAi | Adapter::Azure => return None,
        Adapter::Anthropic => "Anthropic deployments answer one choice",
        Adapter::Gemini if inbound.stream() => "Gemini deployments stream one choice",
        Adapter::Gemini => return None,
    };
    Some(GatewayError::invalid(
        Some("n".into()),
        format!("n = {n} cannot be served: {why}"),
    ))
}

pub fn build(dep: &DeploymentRt, inbound: &Inbound<'_>) -> Result<Outbound, GatewayError> {
    let p = &dep.provider;
    let options = (!p.cfg.options.is_empty()).then_some(&p.cfg.options);
    // Azure names the deployment in the URL, not the body.
    let model = (p.adapter != Adapter::Azure).then_some(dep.cfg.model.as_str());
    if let Inbound::Responses(r) = inbound {
        // The same dialect: the client's fields as they came, `model`
        // replaced (Azure's Responses API names the deployment there too).
        if responses_pass(dep, r) {
            return Ok(Outbound {
                body: r.peek.write_upstream(Some(&dep.cfg.model), options),
                responses_api: true,
                ..Outbound::default()
            });
        }
        if let Some(e) = r.refusal() {
            return Err(e);
        }
    }
    if let Some(e) = choices_refusal(p.adapter, inbound) {
        return Err(e);
    }
    match (p.adapter, inbound) {
        (Adapter::OpenAi | Adapter::Azure, Inbound::OpenAi { view, .. }) => {
            Ok(Outbound::plain(view.write_upstream(&UpstreamEdits {
                model,
                force_include_usage: true,
                options,
            })))
        }
        (Adapter::OpenAi | Adapter::Azure, _) => Ok(Outbound::plain(oa::encode_request(
            inbound.ir(),
            model,
            &p.cfg.options,
        ))),
        (Adapter::Anthropic, Inbound::Anthropic { fields, ir }) => {
            Ok(Outbound::plain(passthrough::write(
                fields,
                &Splice {
                    model: Some(&dep.cfg.model),
                    remove: &["provider_options"],
                    client_options: (!ir.provider_options.is_empty())
                        .then_some(&ir.provider_options),
                    provider_options: options,
                    ..Splice::default()
                },
            )))
        }
        (Adapter::Anthropic, _) => super::anthropic::encode(dep, inbound.ir()),
        (Adapter::Gemini, _) => super::gemini::encode(dep, inbound.ir()),
    }
}
