//! OpenAI-protocol upstreams (OpenAI, Azure, DeepSeek, Qwen compatible-mode,
//! GLM, Kimi, Groq, vLLM, Ollama…): their error rules. Bodies and streams are
//! handled by the shared `body`, `convert` and `stream` modules.

pub mod errors;

use http::{HeaderMap, HeaderName, StatusCode};

use switchyard_protocol::ir::ChatResponse;
use switchyard_protocol::openai::{self as oa, UpstreamEdits};

use super::body::{options, Outbound};
use super::deployment::DeploymentRt;
use super::provider::{Provider, Urls};
use super::{Dialect, Inbound};
use crate::config::{Deployment, Provider as ProviderCfg};
use crate::doors::embeddings::EmbeddingsRequest;
use crate::error::GatewayError;

/// An OpenAI-dialect body: an OpenAI client's bytes with `model` spliced in
/// (and usage asked for on streams), anything else through the IR. `model`
/// is `None` where the URL names the deployment (Azure).
fn encode(dep: &DeploymentRt, inbound: &Inbound<'_>, model: Option<&str>) -> Outbound {
    let body = match inbound {
        Inbound::OpenAi { view, .. } => view.write_upstream(&UpstreamEdits {
            model,
            force_include_usage: true,
            options: options(dep),
        }),
        _ => oa::encode_request(inbound.ir(), model, &dep.provider.cfg.options),
    };
    Outbound::plain(body)
}

/// An OpenAI-dialect stream's chunks as IR events; `[DONE]` ends it, and an
/// `{"error": …}` chunk is the upstream's in-band error.
#[derive(Default)]
struct StreamDecoder(oa::StreamTranslator);

impl super::translate::StreamDecode for StreamDecoder {
    fn push(
        &mut self,
        ev: &switchyard_protocol::sse::SseEvent,
        out: &mut Vec<switchyard_protocol::ir::StreamEvent>,
    ) -> super::translate::Decoded {
        use super::translate::Decoded;
        let Some(data) = &ev.data else {
            return Decoded::Events;
        };
        if ev.is_done_sentinel() {
            return Decoded::Done;
        }
        match oa::peek_chunk(data) {
            Err(_) => Decoded::Unparsable,
            Ok(c) if c.error.is_some() => Decoded::Error(super::translate::openai_in_band(
                c.error.map(|e| e.get()).unwrap_or_default(),
            )),
            Ok(c) => {
                self.0.push(&c, out);
                Decoded::Events
            }
        }
    }
}

/// An OpenAI-dialect answer as the IR.
fn decode(bytes: &[u8]) -> Result<ChatResponse, GatewayError> {
    oa::peek_response(bytes)
        .map(|p| p.to_ir())
        .map_err(super::convert::bad_json)
}

/// An OpenAI-shaped embeddings request: the client's body with `model`
/// replaced (dropped where the URL names the deployment).
fn embeddings_body(req: &EmbeddingsRequest<'_>, model: Option<&str>) -> Vec<u8> {
    switchyard_protocol::passthrough::write(
        &req.fields,
        &switchyard_protocol::passthrough::Splice {
            model,
            ..Default::default()
        },
    )
}

/// The OpenAI dialect's upstreams. OpenAI and every OpenAI-compatible
/// server: `Authorization: Bearer`, `model` in the body. Its Azure flavor:
/// the deployment in the path with an `api-version` query, an `api-key`
/// header, no `model` in the body.
pub struct OpenAi {
    pub azure: bool,
}

/// Azure's `api-version` when the provider names none.
const AZURE_API_VERSION: &str = "2024-10-21";

impl OpenAi {
    /// The body's `model` (Azure's URL names the deployment instead).
    fn model<'a>(&self, dep: &'a DeploymentRt) -> Option<&'a str> {
        (!self.azure).then_some(dep.cfg.model.as_str())
    }

    fn api_version(p: &ProviderCfg) -> &str {
        p.api_version.as_deref().unwrap_or(AZURE_API_VERSION)
    }
}

impl Provider for OpenAi {
    fn gen_ai_name(&self) -> &'static str {
        if self.azure {
            "azure.ai.openai"
        } else {
            "openai"
        }
    }

    fn dialect(&self) -> Dialect {
        Dialect::OpenAi
    }

    fn urls(&self, p: &ProviderCfg, d: &Deployment) -> Urls {
        let base = &p.base_url;
        if !self.azure {
            return Urls {
                responses: Some(format!("{base}/responses")),
                embeddings: Some(format!("{base}/embeddings")),
                ..Urls::same(format!("{base}/chat/completions"))
            };
        }
        let version = Self::api_version(p);
        let deployment = format!("{base}/openai/deployments/{}", d.model);
        Urls {
            responses: Some(format!("{base}/openai/v1/responses")),
            embeddings: Some(format!("{deployment}/embeddings?api-version={version}")),
            ..Urls::same(format!(
                "{deployment}/chat/completions?api-version={version}"
            ))
        }
    }

    fn models_url(&self, p: &ProviderCfg) -> String {
        if self.azure {
            let version = Self::api_version(p);
            format!("{}/openai/models?api-version={version}", p.base_url)
        } else {
            format!("{}/models", p.base_url)
        }
    }

    fn auth(&self, secret: &str) -> (HeaderName, String) {
        if self.azure {
            (HeaderName::from_static("api-key"), secret.to_owned())
        } else {
            (http::header::AUTHORIZATION, format!("Bearer {secret}"))
        }
    }

    fn encode(&self, dep: &DeploymentRt, inbound: &Inbound<'_>) -> Result<Outbound, GatewayError> {
        Ok(encode(dep, inbound, self.model(dep)))
    }

    fn decode(&self, bytes: &[u8], _: &Outbound) -> Result<ChatResponse, GatewayError> {
        decode(bytes)
    }

    fn stream_decoder(&self, _: &Outbound) -> super::translate::Decoder {
        Box::new(StreamDecoder::default())
    }

    fn embeddings_body(
        &self,
        dep: &DeploymentRt,
        req: &EmbeddingsRequest<'_>,
    ) -> Option<Result<Vec<u8>, GatewayError>> {
        Some(Ok(embeddings_body(req, self.model(dep))))
    }

    /// OpenAI's own API and Azure render tools compactly; any other
    /// OpenAI-compatible server (DeepSeek, Qwen, vLLM, …) as JSON in its
    /// chat template.
    fn renders(&self, url: &http::Uri) -> crate::doors::facts::Renders {
        use crate::doors::facts::Renders;
        let host = url.host().unwrap_or_default();
        let own =
            host == "openai.com" || host.ends_with(".openai.com") || host.ends_with(".azure.com");
        if self.azure || own {
            Renders::Compact
        } else {
            Renders::Template
        }
    }

    fn has_responses_api(&self) -> bool {
        true
    }

    fn classify(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
        secrets: &[&str],
    ) -> GatewayError {
        errors::classify(status, headers, body, secrets)
    }
}
