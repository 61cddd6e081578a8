//! Where a deployment's requests go (each provider's module says:
//! [`super::provider::Provider::urls`]). Computed once per config load,
//! never per request.

use http::Uri;

use super::provider::Provider as Api;
use crate::config::{Deployment, Provider};

/// The deployment's URLs (Gemini streams on a different method).
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub url: Uri,
    pub stream_url: Uri,
    /// The upstream's own Responses API (OpenAI and Azure only).
    pub responses_url: Option<Uri>,
    /// `POST /v1/embeddings` goes here (OpenAI, Azure: `/embeddings`
    /// beside `/chat/completions`; Gemini: `:batchEmbedContents`); `None`
    /// where the protocol has no embeddings API (Anthropic).
    pub embeddings_url: Option<Uri>,
    /// The upstream's own token counter (Anthropic
    /// `/v1/messages/count_tokens`, Gemini `:countTokens`); `None` where
    /// tokens are counted locally (OpenAI, Azure).
    pub count_tokens_url: Option<Uri>,
}

pub fn endpoint(api: &dyn Api, p: &Provider, d: &Deployment) -> Result<Endpoint, String> {
    let urls = api.urls(p, d);
    let parse = |u: String| {
        u.parse::<Uri>()
            .map_err(|e| format!("models.{}: bad upstream URL {u}: {e}", d.id))
    };
    Ok(Endpoint {
        url: parse(urls.chat)?,
        stream_url: parse(urls.stream)?,
        responses_url: urls.responses.map(parse).transpose()?,
        embeddings_url: urls.embeddings.map(parse).transpose()?,
        count_tokens_url: urls.count_tokens.map(parse).transpose()?,
    })
}
