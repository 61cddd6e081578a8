//! OpenAI-protocol upstreams (OpenAI, Azure, DeepSeek, Qwen compatible-mode,
//! GLM, Kimi, Ark, MiniMax, Groq, vLLM, Ollama…): the OpenAI body and
//! stream, with each compatible provider's own rules in its [`flavor`].

pub mod errors;
pub mod flavor;

use http::{HeaderMap, HeaderName, StatusCode};

use std::sync::Arc;

use switchyard_protocol::ir::{ChatResponse, ReasoningConfig, StreamEvent};
use switchyard_protocol::openai::think::ThinkSplit;
use switchyard_protocol::openai::{self as oa, UpstreamEdits};

use flavor::{Flavor, ReplayStore};

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
fn encode(dep: &DeploymentRt, inbound: &Inbound<'_>, model: Option<&str>) -> Vec<u8> {
    match inbound {
        Inbound::OpenAi { view, .. } => view.write_upstream(&UpstreamEdits {
            model,
            force_include_usage: true,
            options: options(dep),
        }),
        _ => oa::encode_request(inbound.ir(), model, &dep.provider.cfg.options),
    }
}

/// The reasoning a request asked for, without decoding an OpenAI client's
/// body into the IR for it.
fn asked_reasoning(inbound: &Inbound<'_>) -> Option<ReasoningConfig> {
    match inbound {
        Inbound::OpenAi { view, .. } => {
            let effort = view.typed.reasoning_effort.clone()?;
            Some(ReasoningConfig {
                effort: Some(effort),
                budget_tokens: None,
            })
        }
        _ => inbound.ir().reasoning.clone(),
    }
}

/// An OpenAI-dialect stream's chunks as IR events; `[DONE]` ends it, and an
/// `{"error": …}` chunk is the upstream's in-band error. A flavor may hide
/// an error in a chunk, inline its reasoning in the text, or want the
/// reasoning that made tool calls kept for the next turn.
struct StreamDecoder {
    chunks: oa::StreamTranslator,
    flavor: Option<(Arc<dyn Flavor>, ReplayStore)>,
    think: Option<ThinkSplit>,
    /// The reasoning so far, and the calls it made.
    reasoning: String,
    calls: Vec<String>,
}

impl StreamDecoder {
    fn new(flavor: Option<(Arc<dyn Flavor>, ReplayStore)>) -> Self {
        let think = flavor
            .as_ref()
            .filter(|(f, _)| f.splits_think())
            .map(|_| ThinkSplit::default());
        StreamDecoder {
            chunks: oa::StreamTranslator::default(),
            flavor,
            think,
            reasoning: String::new(),
            calls: Vec::new(),
        }
    }

    /// The flavor's look at the events one chunk gave.
    fn settle(&mut self, from: usize, out: &mut Vec<StreamEvent>) {
        let Some((_, store)) = &self.flavor else {
            return;
        };
        let fresh: Vec<StreamEvent> = out.drain(from..).collect();
        for ev in fresh {
            match ev {
                StreamEvent::TextDelta(t) if self.think.is_some() => {
                    if let Some(s) = &mut self.think {
                        s.push(&t, out);
                    }
                    continue;
                }
                StreamEvent::Finish { .. } => {
                    if let Some(mut s) = self.think.take() {
                        s.finish(out);
                    }
                }
                _ => {}
            }
            out.push(ev);
        }
        for ev in &out[from..] {
            match ev {
                StreamEvent::ReasoningDelta { text, .. } => self.reasoning.push_str(text),
                StreamEvent::ToolCallStart { id, .. } => self.calls.push(id.clone()),
                StreamEvent::Finish { .. } => {
                    store.remember(self.calls.iter().map(String::as_str), &self.reasoning)
                }
                _ => {}
            }
        }
    }
}

impl super::translate::StreamDecode for StreamDecoder {
    fn push(
        &mut self,
        ev: &switchyard_protocol::sse::SseEvent,
        out: &mut Vec<StreamEvent>,
    ) -> super::translate::Decoded {
        use super::translate::Decoded;
        let Some(data) = &ev.data else {
            return Decoded::Events;
        };
        if ev.is_done_sentinel() {
            return Decoded::Done;
        }
        if let Some(e) = self
            .flavor
            .as_ref()
            .and_then(|(f, _)| f.error_in_answer(data))
        {
            return Decoded::Error(e);
        }
        match oa::peek_chunk(data) {
            Err(_) => Decoded::Unparsable,
            Ok(c) if c.error.is_some() => Decoded::Error(super::translate::openai_in_band(
                c.error.map(|e| e.get()).unwrap_or_default(),
            )),
            Ok(c) => {
                let from = out.len();
                self.chunks.push(&c, out);
                self.settle(from, out);
                Decoded::Events
            }
        }
    }
}

/// An OpenAI-dialect answer as the IR.
pub(crate) fn decode(bytes: &[u8]) -> Result<ChatResponse, GatewayError> {
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
/// server: `Authorization: Bearer`, `model` in the body, and the
/// provider's [`flavor`] rules. Azure: the deployment in the path with an
/// `api-version` query, an `api-key` header, no `model` in the body.
pub struct OpenAi {
    azure: bool,
    flavor: Arc<dyn Flavor>,
    /// Reasoning that made tool calls, for the flavors that want it back.
    replay: ReplayStore,
}

/// Azure's `api-version` when the provider names none.
const AZURE_API_VERSION: &str = "2024-10-21";

impl OpenAi {
    pub fn new(cfg: &ProviderCfg) -> OpenAi {
        OpenAi {
            azure: cfg.protocol == crate::config::Protocol::Azure,
            flavor: flavor::for_name(cfg.flavor).into(),
            replay: ReplayStore::default(),
        }
    }

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
        let model = self.model(dep);
        let body = encode(dep, inbound, model);
        let reasoning = asked_reasoning(inbound);
        let facts = flavor::Facts {
            model: &dep.cfg.model,
            body_model: model,
            stream: inbound.stream(),
            reasoning: reasoning.as_ref(),
            max_output_tokens: dep.cfg.max_output_tokens,
            replay: dep.cfg.reasoning_replay,
        };
        Ok(Outbound::plain(flavor::apply(
            &*self.flavor,
            facts,
            &self.replay,
            body,
        )))
    }

    fn decode(&self, bytes: &[u8], _: &Outbound) -> Result<ChatResponse, GatewayError> {
        if let Some(e) = self.flavor.error_in_answer(bytes) {
            return Err(e);
        }
        let mut ir = decode(bytes)?;
        flavor::settle(&*self.flavor, &self.replay, &mut ir);
        Ok(ir)
    }

    fn stream_decoder(&self, _: &Outbound) -> super::translate::Decoder {
        let flavor = self
            .flavor
            .rewrites_answers()
            .then(|| (self.flavor.clone(), self.replay.clone()));
        Box::new(StreamDecoder::new(flavor))
    }

    fn passes_answers_through(&self) -> bool {
        !self.flavor.rewrites_answers()
    }

    fn refuses_choices(&self, _stream: bool) -> Option<&'static str> {
        self.flavor.rewrites_answers().then_some(
            "this provider's answers are read and written again by the gateway (its reasoning split off or kept for the next turn), one choice at a time",
        )
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
        let mut reading = errors::read(body);
        self.flavor.read_error(status, body, &mut reading);
        super::errors::classify(status, headers, reading, secrets)
    }
}
