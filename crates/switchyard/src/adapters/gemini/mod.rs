//! Gemini generateContent upstreams (`:generateContent`,
//! `:streamGenerateContent?alt=sse`, `x-goog-api-key`).

pub mod errors;

/// Gemini's generateContent API: `x-goog-api-key`, the model in the path.
pub struct Gemini;

/// A Gemini stream's chunks as IR events; a blocked prompt or an error
/// chunk is the upstream's in-band error.
struct StreamDecoder(gm::StreamTranslator);

impl super::translate::StreamDecode for StreamDecoder {
    fn push(
        &mut self,
        ev: &switchyard_protocol::sse::SseEvent,
        out: &mut Vec<switchyard_protocol::ir::StreamEvent>,
    ) -> super::translate::Decoded {
        use super::translate::Decoded;
        match self.0.push_event(ev, out) {
            Ok(()) => Decoded::Events,
            Err(gm::StreamProblem::Unparsable(_)) => Decoded::Unparsable,
            Err(gm::StreamProblem::PromptBlocked { reason, message }) => {
                Decoded::Error(blocked(&reason, message.as_deref()))
            }
            Err(gm::StreamProblem::StreamError(g)) => Decoded::Error(errors::in_band(g)),
        }
    }
}

impl super::provider::Provider for Gemini {
    fn gen_ai_name(&self) -> &'static str {
        "gcp.gemini"
    }

    fn dialect(&self) -> super::Dialect {
        super::Dialect::Gemini
    }

    fn urls(
        &self,
        p: &crate::config::Provider,
        d: &crate::config::Deployment,
    ) -> super::provider::Urls {
        let model = format!("{}/v1beta/models/{}", p.base_url, d.model);
        super::provider::Urls {
            chat: format!("{model}:generateContent"),
            stream: format!("{model}:streamGenerateContent?alt=sse"),
            responses: None,
            embeddings: Some(format!("{model}:batchEmbedContents")),
            count_tokens: Some(format!("{model}:countTokens")),
        }
    }

    fn models_url(&self, p: &crate::config::Provider) -> String {
        format!("{}/v1beta/models?pageSize=1", p.base_url)
    }

    fn auth(&self, secret: &str) -> (http::HeaderName, String) {
        (
            http::HeaderName::from_static("x-goog-api-key"),
            secret.to_owned(),
        )
    }

    fn encode(
        &self,
        dep: &DeploymentRt,
        inbound: &super::Inbound<'_>,
    ) -> Result<Outbound, GatewayError> {
        encode(dep, inbound.ir())
    }

    fn decode(&self, bytes: &[u8], _: &Outbound) -> Result<ChatResponse, GatewayError> {
        decode(bytes)
    }

    fn stream_decoder(&self, _: &Outbound) -> super::translate::Decoder {
        Box::new(StreamDecoder(gm::StreamTranslator::new()))
    }

    /// Google Search; beside function declarations only where the
    /// deployment says `search_with_tools` ([`Self::search_beside_tools`]).
    fn runs_web_search(&self, ir: &ChatRequest) -> bool {
        ir.tools.is_empty()
    }

    fn search_beside_tools(&self) -> bool {
        true
    }

    /// Arbitrary https URLs are refused (`fileData` takes Files API URIs).
    fn inline_images(&self) -> bool {
        true
    }

    fn keeps_image_url(&self, url: &str) -> bool {
        is_files_api_uri(url)
    }

    fn encode_inlined(
        &self,
        dep: &DeploymentRt,
        _inbound: &super::Inbound<'_>,
        ir: &ChatRequest,
    ) -> Result<Outbound, GatewayError> {
        encode(dep, ir)
    }

    /// `candidateCount` answers several, but not as a stream the gateway
    /// could translate.
    fn refuses_choices(&self, stream: bool) -> Option<&'static str> {
        stream.then_some("Gemini deployments stream one choice")
    }

    /// `:batchEmbedContents`.
    fn embeddings_body(
        &self,
        dep: &DeploymentRt,
        req: &crate::doors::embeddings::EmbeddingsRequest<'_>,
    ) -> Option<Result<Vec<u8>, GatewayError>> {
        Some(super::embeddings::gemini_request(&dep.cfg.model, req))
    }

    fn embeddings_answer(
        &self,
        dep: &DeploymentRt,
        req: &crate::doors::embeddings::EmbeddingsRequest<'_>,
        bytes: bytes::Bytes,
    ) -> Result<super::JsonAnswer, GatewayError> {
        super::embeddings::gemini_answer(&dep.cfg.model, req, &bytes)
    }

    /// `:countTokens` with the generation request as the chat adapter
    /// builds it (system instruction and tools included).
    fn count_tokens_body(
        &self,
        dep: &DeploymentRt,
        inbound: &super::Inbound<'_>,
    ) -> Option<Result<Vec<u8>, GatewayError>> {
        Some(super::count_tokens::gemini_request(dep, inbound.ir()))
    }

    fn count_tokens_answer(
        &self,
        dep: &DeploymentRt,
        bytes: bytes::Bytes,
    ) -> Result<super::JsonAnswer, GatewayError> {
        let n = super::count_tokens::gemini_total(&bytes)?;
        Ok(super::count_tokens::answer(n, &dep.cfg.model))
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

use switchyard_protocol::gemini::{self as gm, DecodeError, Target};
use switchyard_protocol::ir::{ChatRequest, ChatResponse};

use super::body::Outbound;
use crate::adapters::deployment::DeploymentRt;
use crate::config::Capability;
use crate::error::{ErrorCode, GatewayError};

/// A file uploaded with Gemini's Files API
/// (`https://generativelanguage.googleapis.com/v1beta/files/…`): Gemini
/// reads it itself, with the caller's key; the gateway could not.
pub fn is_files_api_uri(url: &str) -> bool {
    url.strip_prefix("https://generativelanguage.googleapis.com/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(_version, path)| path.starts_with("files/"))
}

pub fn encode(dep: &DeploymentRt, ir: &ChatRequest) -> Result<Outbound, GatewayError> {
    let target = Target {
        max_output_tokens: dep.cfg.max_output_tokens,
        missing_signature: Some(gm::SKIP_SIGNATURE_VALIDATOR),
    };
    let traits = gm::ModelTraits {
        search_with_tools: dep.cfg.capabilities.contains(Capability::SearchWithTools),
    };
    let mut body = gm::encode_request_for(ir, &target, traits)
        .map_err(|e| GatewayError::invalid(e.param, e.message))?;
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
