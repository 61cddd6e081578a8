//! Google Vertex AI (contract §9, MAPPING §17): Gemini (publisher `google`)
//! and Claude (publisher `anthropic`, `rawPredict` / `streamRawPredict`)
//! behind Google Cloud's OAuth2 access tokens. `token` mints and refreshes
//! those tokens off the request path; `errors` reads Vertex's error bodies
//! (google.rpc.Status, possibly array-wrapped, or Anthropic-shaped for
//! Claude). The bodies and streams are Gemini's and Anthropic's own: their
//! modules encode and decode them, this one only places and authorizes.

pub mod errors;
pub mod token;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Request};
use switchyard_protocol::ir::{ChatRequest, ChatResponse};

use super::body::Outbound;
use super::convert::bad_json;
use super::deployment::DeploymentRt;
use super::provider::{Provider, Urls};
use super::{Dialect, Inbound, JsonAnswer};
use crate::config::{CloudCredentials, Deployment, Provider as ProviderCfg, ProviderKey};
use crate::error::{ErrorCode, GatewayError, Source};
use token::TokenSource;

/// Claude's API version on Vertex (in the body, not a header).
pub const ANTHROPIC_VERSION: &str = "vertex-2023-10-16";

/// The model's publisher: who speaks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publisher {
    Google,
    Anthropic,
}

impl Publisher {
    /// From the model name: Claude models are Anthropic's.
    pub fn of(model: &str) -> Publisher {
        if model.starts_with("claude") {
            Publisher::Anthropic
        } else {
            Publisher::Google
        }
    }

    fn path(self) -> &'static str {
        match self {
            Publisher::Google => "google",
            Publisher::Anthropic => "anthropic",
        }
    }

    /// The module that speaks its bodies and streams.
    fn speaker(self) -> &'static dyn Provider {
        match self {
            Publisher::Google => &super::gemini::Gemini,
            Publisher::Anthropic => &super::anthropic::Anthropic,
        }
    }
}

/// A Vertex provider block (its project, location and token source), as
/// one of its deployments' publishers speaks it.
pub struct Vertex {
    tokens: Arc<TokenSource>,
    publisher: Publisher,
}

impl Vertex {
    /// Starts the token source (inside the runtime; outside it, as in
    /// `switchyard check`, nothing is fetched).
    pub fn new(cfg: &ProviderCfg) -> Result<Vertex, String> {
        let creds = match &cfg.credentials {
            Some(CloudCredentials::GoogleFile(path)) => token::Credentials::File(path.clone()),
            _ => token::Credentials::Default,
        };
        let tokens = match tokio::runtime::Handle::try_current() {
            Ok(_) => TokenSource::start(creds),
            Err(_) => TokenSource::idle(),
        };
        Ok(Vertex {
            tokens,
            publisher: Publisher::Google,
        })
    }

    /// Its token source (tests read when tokens were fetched).
    pub fn tokens(&self) -> &Arc<TokenSource> {
        &self.tokens
    }

    fn model_url(p: &ProviderCfg, publisher: Publisher, model: &str) -> String {
        format!(
            "{}/v1/projects/{}/locations/{}/publishers/{}/models/{model}",
            p.base_url,
            p.project.as_deref().unwrap_or_default(),
            p.location.as_deref().unwrap_or_default(),
            publisher.path()
        )
    }
}

impl Provider for Vertex {
    fn gen_ai_name(&self) -> &'static str {
        "gcp.vertex_ai"
    }

    fn dialect(&self) -> Dialect {
        self.publisher.speaker().dialect()
    }

    fn for_deployment(&self, d: &Deployment) -> Option<Arc<dyn Provider>> {
        Some(Arc::new(Vertex {
            tokens: self.tokens.clone(),
            publisher: Publisher::of(&d.model),
        }))
    }

    fn urls(&self, p: &ProviderCfg, d: &Deployment) -> Urls {
        let model = Self::model_url(p, self.publisher, &d.model);
        match self.publisher {
            Publisher::Google => Urls {
                chat: format!("{model}:generateContent"),
                stream: format!("{model}:streamGenerateContent?alt=sse"),
                responses: None,
                embeddings: None,
                count_tokens: Some(format!("{model}:countTokens")),
            },
            Publisher::Anthropic => Urls {
                chat: format!("{model}:rawPredict"),
                stream: format!("{model}:streamRawPredict"),
                responses: None,
                embeddings: None,
                // The model goes in the body here.
                count_tokens: Some(format!(
                    "{}:rawPredict",
                    Self::model_url(p, self.publisher, "count-tokens")
                )),
            },
        }
    }

    /// Never asked: a Vertex provider has no keys to check.
    fn models_url(&self, p: &ProviderCfg) -> String {
        p.base_url.clone()
    }

    /// Never used: requests carry the service account's token.
    fn auth(&self, _secret: &str) -> (HeaderName, String) {
        (http::header::AUTHORIZATION, String::new())
    }

    fn takes_anthropic_beta(&self) -> bool {
        self.publisher == Publisher::Anthropic
    }

    fn pending(
        &self,
    ) -> Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>> {
        if self.tokens.current().is_some() || self.tokens.last_error().is_some() {
            return None;
        }
        // Just after start: the first token is on its way. The caller
        // bounds the wait by its first-byte timeout.
        Some(Box::pin(async {
            let _ = self.tokens.ready(Duration::from_secs(3600)).await;
        }))
    }

    fn authorize(
        &self,
        req: &mut Request<Bytes>,
        _key: Option<&ProviderKey>,
    ) -> Result<(), GatewayError> {
        let Some(token) = self.tokens.current() else {
            return Err(match self.tokens.last_error() {
                Some(e) => e.to_gateway(),
                None => GatewayError::new(
                    ErrorCode::AuthFailed,
                    Source::Gateway,
                    "no Vertex access token yet",
                ),
            });
        };
        let value: HeaderValue = token.authorization().clone();
        req.headers_mut().insert(http::header::AUTHORIZATION, value);
        Ok(())
    }

    fn encode(&self, dep: &DeploymentRt, inbound: &Inbound<'_>) -> Result<Outbound, GatewayError> {
        let mut out = self.publisher.speaker().encode(dep, inbound)?;
        if self.publisher == Publisher::Anthropic {
            out.body = anthropic_body(&out.body)?;
        }
        Ok(out)
    }

    fn decode(&self, bytes: &[u8], out: &Outbound) -> Result<ChatResponse, GatewayError> {
        self.publisher.speaker().decode(bytes, out)
    }

    fn stream_decoder(&self, out: &Outbound) -> super::translate::Decoder {
        self.publisher.speaker().stream_decoder(out)
    }

    fn renders(&self, url: &http::Uri) -> crate::doors::facts::Renders {
        self.publisher.speaker().renders(url)
    }

    fn runs_web_search(&self, ir: &ChatRequest) -> bool {
        self.publisher.speaker().runs_web_search(ir)
    }

    fn search_beside_tools(&self) -> bool {
        self.publisher.speaker().search_beside_tools()
    }

    /// Gemini's rule: image URLs are fetched and inlined (`gs://` objects
    /// stay: Vertex reads them itself). Claude on Vertex takes URLs.
    fn inline_images(&self) -> bool {
        self.publisher.speaker().inline_images()
    }

    fn keeps_image_url(&self, url: &str) -> bool {
        match self.publisher {
            Publisher::Google => url.starts_with("gs://"),
            Publisher::Anthropic => true,
        }
    }

    fn encode_inlined(
        &self,
        dep: &DeploymentRt,
        inbound: &Inbound<'_>,
        ir: &ChatRequest,
    ) -> Result<Outbound, GatewayError> {
        match self.publisher {
            Publisher::Google => self.publisher.speaker().encode_inlined(dep, inbound, ir),
            Publisher::Anthropic => self.encode(dep, inbound),
        }
    }

    fn refuses_choices(&self, stream: bool) -> Option<&'static str> {
        self.publisher.speaker().refuses_choices(stream)
    }

    /// Gemini's `:countTokens` with the generation's `contents`,
    /// `systemInstruction` and `tools` at the top level (Vertex's form);
    /// Claude's `count-tokens:rawPredict` with the model in the body.
    fn count_tokens_body(
        &self,
        dep: &DeploymentRt,
        inbound: &Inbound<'_>,
    ) -> Option<Result<Vec<u8>, GatewayError>> {
        Some(
            self.publisher
                .speaker()
                .encode(dep, inbound)
                .and_then(|out| {
                    let mut body: serde_json::Map<String, serde_json::Value> =
                        serde_json::from_slice(&out.body).map_err(bad_json)?;
                    match self.publisher {
                        Publisher::Google => {
                            body.retain(|k, _| {
                                matches!(k.as_str(), "contents" | "systemInstruction" | "tools")
                            });
                        }
                        Publisher::Anthropic => {
                            body.insert("model".into(), dep.cfg.model.clone().into());
                            for k in [
                                "stream",
                                "max_tokens",
                                "temperature",
                                "top_p",
                                "top_k",
                                "stop_sequences",
                            ] {
                                body.remove(k);
                            }
                            body.insert("anthropic_version".into(), ANTHROPIC_VERSION.into());
                        }
                    }
                    serde_json::to_vec(&body).map_err(bad_json)
                }),
        )
    }

    fn count_tokens_answer(
        &self,
        dep: &DeploymentRt,
        bytes: Bytes,
    ) -> Result<JsonAnswer, GatewayError> {
        self.publisher.speaker().count_tokens_answer(dep, bytes)
    }

    fn classify(
        &self,
        status: http::StatusCode,
        headers: &http::HeaderMap,
        body: &[u8],
        secrets: &[&str],
    ) -> GatewayError {
        let token = self.tokens.current();
        let mut known: Vec<&str> = secrets.to_vec();
        if let Some(t) = &token {
            known.push(t.expose());
        }
        if status == http::StatusCode::UNAUTHORIZED {
            // Revoked or expired early: fetch a new one (off this path).
            self.tokens.refresh_now();
        }
        errors::classify(status, headers, body, &known)
    }
}

/// An Anthropic Messages body as `rawPredict` takes it: the model in the
/// URL, `anthropic_version` in the body (`stream` stays: the method and the
/// body both say it).
fn anthropic_body(body: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(body).map_err(bad_json)?;
    map.remove("model");
    map.insert("anthropic_version".into(), ANTHROPIC_VERSION.into());
    serde_json::to_vec(&map).map_err(bad_json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_publisher_comes_from_the_model_name() {
        assert_eq!(
            Publisher::of("claude-sonnet-4-5@20250929"),
            Publisher::Anthropic
        );
        assert_eq!(Publisher::of("gemini-2.5-pro"), Publisher::Google);
    }

    #[test]
    fn a_claude_body_has_vertexs_version_and_no_model() {
        let body = anthropic_body(br#"{"model":"m","stream":true,"max_tokens":5}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"stream":true,"max_tokens":5,"anthropic_version":"vertex-2023-10-16"})
        );
    }
}
