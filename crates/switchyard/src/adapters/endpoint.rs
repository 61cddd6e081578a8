//! Where each adapter sends a deployment's requests, and how it authenticates.
//! Computed once per config load, never per request.

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
    let base = &p.base_url;
    let (embeddings_url, count_tokens_url) = match adapter {
        Adapter::OpenAi => (Some(format!("{base}/embeddings")), None),
        Adapter::Azure => {
            let version = p.api_version.as_deref().unwrap_or("2024-10-21");
            let u = format!(
                "{base}/openai/deployments/{}/embeddings?api-version={version}",
                d.model
            );
            (Some(u), None)
        }
        Adapter::Anthropic => (None, Some(format!("{base}/v1/messages/count_tokens"))),
        Adapter::Gemini => (
            Some(format!(
                "{base}/v1beta/models/{}:batchEmbedContents",
                d.model
            )),
            Some(format!("{base}/v1beta/models/{}:countTokens", d.model)),
        ),
    };
    let (url, stream_url) = match adapter {
        Adapter::OpenAi => {
            let u = format!("{base}/chat/completions");
            (u.clone(), u)
        }
        Adapter::Azure => {
            let version = p.api_version.as_deref().unwrap_or("2024-10-21");
            let u = format!(
                "{base}/openai/deployments/{}/chat/completions?api-version={version}",
                d.model
            );
            (u.clone(), u)
        }
        Adapter::Anthropic => {
            let u = format!("{base}/v1/messages");
            (u.clone(), u)
        }
        Adapter::Gemini => (
            format!("{base}/v1beta/models/{}:generateContent", d.model),
            format!(
                "{base}/v1beta/models/{}:streamGenerateContent?alt=sse",
                d.model
            ),
        ),
    };
    let responses_url = match adapter {
        Adapter::OpenAi => Some(format!("{base}/responses")),
        Adapter::Azure => Some(format!("{base}/openai/v1/responses")),
        Adapter::Anthropic | Adapter::Gemini => None,
    };
    let parse = |u: String| {
        u.parse::<Uri>()
            .map_err(|e| format!("models.{}: bad upstream URL {u}: {e}", d.id))
    };
    Ok(Endpoint {
        url: parse(url)?,
        stream_url: parse(stream_url)?,
        responses_url: responses_url.map(parse).transpose()?,
        embeddings_url: embeddings_url.map(parse).transpose()?,
        count_tokens_url: count_tokens_url.map(parse).transpose()?,
    })
}

/// The auth header for a key, in the adapter's style.
pub fn auth_header(
    adapter: Adapter,
    key: &ProviderKey,
) -> Result<(HeaderName, HeaderValue), String> {
    let secret = key.secret.expose();
    let (name, value) = match adapter {
        Adapter::OpenAi => (http::header::AUTHORIZATION, format!("Bearer {secret}")),
        Adapter::Azure => (HeaderName::from_static("api-key"), secret.clone()),
        Adapter::Anthropic => (HeaderName::from_static("x-api-key"), secret.clone()),
        Adapter::Gemini => (HeaderName::from_static("x-goog-api-key"), secret.clone()),
    };
    let mut value = HeaderValue::try_from(value)
        .map_err(|_| format!("provider key {} is not a valid header value", key.label))?;
    value.set_sensitive(true);
    Ok((name, value))
}

/// Headers a protocol always needs.
pub fn fixed_headers(adapter: Adapter) -> &'static [(&'static str, &'static str)] {
    match adapter {
        Adapter::Anthropic => &[("anthropic-version", "2023-06-01")],
        _ => &[],
    }
}
