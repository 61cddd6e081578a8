//! Anthropic Messages upstreams (`/v1/messages`, `x-api-key`,
//! `anthropic-version`), and the Anthropic client dialect's answers.

pub mod errors;

/// Anthropic's Messages API: `x-api-key`, `anthropic-version`.
pub struct Anthropic;

/// An Anthropic stream's events as IR events (`message_stop` ends it).
struct StreamDecoder(an::StreamTranslator);

impl super::translate::StreamDecode for StreamDecoder {
    fn push(
        &mut self,
        ev: &switchyard_protocol::sse::SseEvent,
        out: &mut Vec<switchyard_protocol::ir::StreamEvent>,
    ) -> super::translate::Decoded {
        super::translate::anthropic_push(&mut self.0, ev, out)
    }
}

impl super::provider::Provider for Anthropic {
    fn gen_ai_name(&self) -> &'static str {
        "anthropic"
    }

    fn dialect(&self) -> super::Dialect {
        super::Dialect::Anthropic
    }

    fn urls(
        &self,
        p: &crate::config::Provider,
        _: &crate::config::Deployment,
    ) -> super::provider::Urls {
        let base = &p.base_url;
        super::provider::Urls {
            count_tokens: Some(format!("{base}/v1/messages/count_tokens")),
            ..super::provider::Urls::same(format!("{base}/v1/messages"))
        }
    }

    fn models_url(&self, p: &crate::config::Provider) -> String {
        // One entry is answer enough.
        format!("{}/v1/models?limit=1", p.base_url)
    }

    fn auth(&self, secret: &str) -> (http::HeaderName, String) {
        (
            http::HeaderName::from_static("x-api-key"),
            secret.to_owned(),
        )
    }

    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[("anthropic-version", "2023-06-01")]
    }

    fn takes_anthropic_beta(&self) -> bool {
        true
    }

    fn encode(
        &self,
        dep: &DeploymentRt,
        inbound: &super::Inbound<'_>,
    ) -> Result<Outbound, GatewayError> {
        let super::Inbound::Anthropic { fields, ir } = inbound else {
            return encode(dep, inbound.ir());
        };
        Ok(Outbound::plain(switchyard_protocol::passthrough::write(
            fields,
            &switchyard_protocol::passthrough::Splice {
                model: Some(&dep.cfg.model),
                remove: &["provider_options"],
                client_options: (!ir.provider_options.is_empty()).then_some(&ir.provider_options),
                provider_options: super::body::options(dep),
                ..Default::default()
            },
        )))
    }

    fn decode(&self, bytes: &[u8], out: &Outbound) -> Result<ChatResponse, GatewayError> {
        decode(bytes, out)
    }

    /// JSON mode's forced tool comes back as the answer text.
    fn stream_decoder(&self, out: &Outbound) -> super::translate::Decoder {
        Box::new(StreamDecoder(an::StreamTranslator::new(
            out.json_tool.as_deref(),
        )))
    }

    /// As JSON in a hidden system prompt.
    fn renders(&self, _: &http::Uri) -> crate::doors::facts::Renders {
        crate::doors::facts::Renders::Anthropic
    }

    /// Its server-side web search tool.
    fn runs_web_search(&self, _: &ChatRequest) -> bool {
        true
    }

    fn refuses_choices(&self, _: bool) -> Option<&'static str> {
        Some("Anthropic deployments answer one choice")
    }

    /// `/v1/messages/count_tokens`: an Anthropic client's body as it came,
    /// `model` replaced; other clients are counted locally.
    fn count_tokens_body(
        &self,
        dep: &DeploymentRt,
        inbound: &super::Inbound<'_>,
    ) -> Option<Result<Vec<u8>, GatewayError>> {
        let super::Inbound::Anthropic { fields, .. } = inbound else {
            return None;
        };
        Some(Ok(switchyard_protocol::passthrough::write(
            fields,
            &switchyard_protocol::passthrough::Splice {
                model: Some(&dep.cfg.model),
                remove: &["provider_options"],
                ..Default::default()
            },
        )))
    }

    fn classify(
        &self,
        status: http::StatusCode,
        headers: &http::HeaderMap,
        body: &[u8],
        secrets: &[&str],
    ) -> GatewayError {
        errors::classify(status, headers, body, secrets)
    }
}

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
