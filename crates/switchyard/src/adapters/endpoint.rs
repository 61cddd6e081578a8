//! Where each adapter sends a deployment's requests, and how it authenticates
//! (each provider's module says: [`super::provider::Provider`]). Computed
//! once per config load, never per request.

use http::{HeaderName, HeaderValue, Uri};

use super::Adapter;
use crate::config::{Deployment, Provider, ProviderKey};

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

pub fn endpoint(adapter: Adapter, p: &Provider, d: &Deployment) -> Result<Endpoint, String> {
    let urls = adapter.provider().urls(p, d);
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

/// The auth header for a key, in the adapter's style.
pub fn auth_header(
    adapter: Adapter,
    key: &ProviderKey,
) -> Result<(HeaderName, HeaderValue), String> {
    let (name, value) = adapter.provider().auth(key.secret.expose());
    let mut value = HeaderValue::try_from(value)
        .map_err(|_| format!("provider key {} is not a valid header value", key.label))?;
    value.set_sensitive(true);
    Ok((name, value))
}

/// Headers a protocol always needs.
pub fn fixed_headers(adapter: Adapter) -> &'static [(&'static str, &'static str)] {
    adapter.provider().fixed_headers()
}
