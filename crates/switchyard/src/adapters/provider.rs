//! One provider, one module, behind one interface ([`Provider`]): where a
//! deployment's requests go, how a request is authenticated once its body
//! is built (a key header, a signature, an access token), the headers the
//! protocol always needs, how its bodies are encoded and its answers and
//! streams decoded (and in what framing), where a key is checked, and how
//! its errors read. [`super::provider_for`] is where providers are
//! registered; the shared adapter code asks these questions instead of
//! matching on the provider.

use std::future::Future;
use std::pin::Pin;

use http::{HeaderMap, HeaderName, HeaderValue, Request, StatusCode};

use bytes::Bytes;
use switchyard_protocol::ir::{ChatRequest, ChatResponse};

use super::body::Outbound;
use super::deployment::DeploymentRt;
use super::JsonAnswer;
use super::{Dialect, Inbound};
use crate::config::{Deployment, Provider as ProviderCfg, ProviderKey};
use crate::doors::embeddings::EmbeddingsRequest;
use crate::doors::facts::Renders;
use crate::error::GatewayError;

/// A deployment's upstream URLs, before parsing.
#[derive(Debug, Clone, PartialEq)]
pub struct Urls {
    pub chat: String,
    /// Streams go here (Gemini streams on another method).
    pub stream: String,
    /// The upstream's own Responses API, when it has one.
    pub responses: Option<String>,
    /// Its embeddings API, when it has one.
    pub embeddings: Option<String>,
    /// Its own token counter; `None`: tokens are counted locally.
    pub count_tokens: Option<String>,
}

impl Urls {
    /// One URL for whole answers and streams alike.
    pub fn same(chat: String) -> Urls {
        Urls {
            stream: chat.clone(),
            chat,
            responses: None,
            embeddings: None,
            count_tokens: None,
        }
    }
}

pub trait Provider: Send + Sync {
    /// The OpenTelemetry GenAI `gen_ai.provider.name`.
    fn gen_ai_name(&self) -> &'static str;

    /// The wire dialect its bodies and streams are in.
    fn dialect(&self) -> Dialect;

    /// Where `d`'s requests go (computed once per config load).
    fn urls(&self, p: &ProviderCfg, d: &Deployment) -> Urls;

    /// Its variant for deployment `d`, when a deployment's settings change
    /// how it speaks (a Bedrock deployment's `api`); `None`: itself.
    fn for_deployment(&self, _d: &Deployment) -> Option<std::sync::Arc<dyn Provider>> {
        None
    }

    /// Where its models are listed: a key that may list them works.
    fn models_url(&self, p: &ProviderCfg) -> String;

    /// The header a key goes in, and its value.
    fn auth(&self, secret: &str) -> (HeaderName, String);

    /// Headers every request carries.
    fn fixed_headers(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// What a request must wait for before [`Provider::authorize`] can
    /// sign it (credentials or a token its module fetches in the
    /// background, not there yet just after start); `None`: nothing.
    /// The request path only waits: it never fetches.
    fn pending(&self) -> Option<Pin<Box<dyn Future<Output = ()> + Send + '_>>> {
        None
    }

    /// Authenticates `req`, whose URL, headers and body are final (a
    /// signature covers them). By default `key` goes in [`Provider::auth`]'s
    /// header.
    fn authorize(
        &self,
        req: &mut Request<Bytes>,
        key: Option<&ProviderKey>,
    ) -> Result<(), GatewayError> {
        if let Some(key) = key {
            let (name, value) = key_header(self, key)?;
            req.headers_mut().insert(name, value);
        }
        Ok(())
    }

    /// The framing of its streams when not SSE (one decoder per stream).
    fn stream_framing(&self, _out: &Outbound) -> Option<Box<dyn crate::upstream::events::Framing>> {
        None
    }

    /// Whether an Anthropic client's `anthropic-beta` goes along.
    fn takes_anthropic_beta(&self) -> bool {
        false
    }

    /// The upstream body for `inbound` on `dep`: in its own dialect, the
    /// client's bytes with `model` (and little else) spliced in; otherwise
    /// through the IR.
    fn encode(&self, dep: &DeploymentRt, inbound: &Inbound<'_>) -> Result<Outbound, GatewayError>;

    /// A whole answer as the IR (`out`: what the request's body was made
    /// with, e.g. JSON mode emulated with a forced tool).
    fn decode(&self, bytes: &[u8], out: &Outbound) -> Result<ChatResponse, GatewayError>;

    /// A decoder for one translated stream of its events.
    fn stream_decoder(&self, out: &Outbound) -> super::translate::Decoder;

    /// A client of its own dialect gets its answers as they came (`false`:
    /// they are decoded and written again, e.g. a flavor that strips
    /// extras or keeps reasoning for the next turn).
    fn passes_answers_through(&self) -> bool {
        true
    }

    /// It runs the hosted web search a request asks for.
    fn runs_web_search(&self, _ir: &ChatRequest) -> bool {
        false
    }

    /// It can run that search beside function declarations too, on a
    /// deployment whose `capabilities` say `search_with_tools` (Gemini 3).
    fn search_beside_tools(&self) -> bool {
        false
    }

    /// It takes images only as bytes in the body (its API cannot fetch an
    /// https image URL): the gateway fetches such URLs first
    /// (`super::images`) and builds the body with
    /// [`Provider::encode_inlined`].
    fn inline_images(&self) -> bool {
        false
    }

    /// An image URL it does fetch itself, left as it is (Gemini's Files API
    /// URIs, Vertex's `gs://`).
    fn keeps_image_url(&self, _url: &str) -> bool {
        false
    }

    /// [`Provider::encode`] with `ir` — the request's IR with its image URLs
    /// fetched and inlined — in place of the inbound's own. Asked only of a
    /// provider whose [`Provider::inline_images`] holds; the others never
    /// see a substitute (by default the inbound's own IR is encoded).
    fn encode_inlined(
        &self,
        dep: &DeploymentRt,
        inbound: &Inbound<'_>,
        _ir: &ChatRequest,
    ) -> Result<Outbound, GatewayError> {
        self.encode(dep, inbound)
    }

    /// Why it cannot give several choices (`n` > 1), as a stream or not;
    /// `None`: it can.
    fn refuses_choices(&self, _stream: bool) -> Option<&'static str> {
        None
    }

    /// It has its own Responses API (a deployment with the `responses`
    /// capability is sent Responses requests as they came).
    fn has_responses_api(&self) -> bool {
        false
    }

    /// Its embeddings request for `req` (`None`: it has no embeddings API).
    fn embeddings_body(
        &self,
        _dep: &DeploymentRt,
        _req: &EmbeddingsRequest<'_>,
    ) -> Option<Result<Vec<u8>, GatewayError>> {
        None
    }

    /// Its embeddings answer as OpenAI's (by default it is one: passed
    /// back as it came, usage read).
    fn embeddings_answer(
        &self,
        dep: &DeploymentRt,
        _req: &EmbeddingsRequest<'_>,
        bytes: Bytes,
    ) -> Result<JsonAnswer, GatewayError> {
        super::embeddings::openai_answer(&dep.cfg.model, bytes)
    }

    /// How it renders tool definitions into what it bills (for the input
    /// estimate): compactly unless it says otherwise.
    fn renders(&self, _url: &http::Uri) -> Renders {
        Renders::Compact
    }

    /// Its own token-counting request (`None`: tokens are counted locally).
    fn count_tokens_body(
        &self,
        _dep: &DeploymentRt,
        _inbound: &Inbound<'_>,
    ) -> Option<Result<Vec<u8>, GatewayError>> {
        None
    }

    /// Its token count as `{"input_tokens": N}` (by default it answers so
    /// itself: passed back as it came).
    fn count_tokens_answer(
        &self,
        dep: &DeploymentRt,
        bytes: Bytes,
    ) -> Result<JsonAnswer, GatewayError> {
        super::count_tokens::passed_answer(&dep.cfg.model, bytes)
    }

    /// A non-2xx answer, read by the provider's own rules (contract §4
    /// codes); `secrets` are redacted from the message.
    fn classify(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
        secrets: &[&str],
    ) -> GatewayError;
}

/// `key` in `p`'s auth header, marked sensitive (never logged).
pub fn key_header<P: Provider + ?Sized>(
    p: &P,
    key: &ProviderKey,
) -> Result<(HeaderName, HeaderValue), GatewayError> {
    let (name, value) = p.auth(key.secret.expose());
    let mut value = HeaderValue::try_from(value).map_err(|_| {
        GatewayError::new(
            crate::error::ErrorCode::AuthFailed,
            crate::error::Source::Gateway,
            format!("provider key {} is not a valid header value", key.label),
        )
    })?;
    value.set_sensitive(true);
    Ok((name, value))
}

#[cfg(test)]
mod tests {
    use super::super::provider_for;
    use crate::config::Protocol;

    fn cfg(protocol: &str) -> crate::config::Config {
        let version = if protocol == "azure" {
            ", api_version: \"2024-10-21\""
        } else {
            ""
        };
        let yaml = format!(
            "providers:\n  p: {{ protocol: {protocol}, base_url: \"https://h\", keys: [{{ env: K }}]{version} }}\nmodels:\n  - {{ id: p/m, provider: p, model: mm }}\n"
        );
        let env = |name: &str| (name == "K").then(|| "k".to_owned());
        crate::config::load_str(&yaml, "t.yaml", &env).unwrap()
    }

    /// The URLs each provider's module gives, as the upstreams document them.
    #[test]
    fn each_provider_names_its_own_urls() {
        let cases = [
            (
                Protocol::OpenAi,
                "openai",
                "https://h/chat/completions",
                "https://h/chat/completions",
                Some("https://h/embeddings"),
                None,
            ),
            (
                Protocol::Azure,
                "azure",
                "https://h/openai/deployments/mm/chat/completions?api-version=2024-10-21",
                "https://h/openai/deployments/mm/chat/completions?api-version=2024-10-21",
                Some("https://h/openai/deployments/mm/embeddings?api-version=2024-10-21"),
                None,
            ),
            (
                Protocol::Anthropic,
                "anthropic",
                "https://h/v1/messages",
                "https://h/v1/messages",
                None,
                Some("https://h/v1/messages/count_tokens"),
            ),
            (
                Protocol::Gemini,
                "gemini",
                "https://h/v1beta/models/mm:generateContent",
                "https://h/v1beta/models/mm:streamGenerateContent?alt=sse",
                Some("https://h/v1beta/models/mm:batchEmbedContents"),
                Some("https://h/v1beta/models/mm:countTokens"),
            ),
        ];
        for (protocol, name, chat, stream, embeddings, count) in cases {
            let c = cfg(name);
            let (p, d) = (&c.providers["p"], &c.deployments["p/m"]);
            assert_eq!(p.protocol, protocol);
            let u = provider_for(p).unwrap().urls(p, d);
            assert_eq!(u.chat, chat, "{name}");
            assert_eq!(u.stream, stream, "{name}");
            assert_eq!(u.embeddings.as_deref(), embeddings, "{name}");
            assert_eq!(u.count_tokens.as_deref(), count, "{name}");
        }
    }

    #[test]
    fn each_provider_puts_the_key_in_its_own_header() {
        let seen: Vec<(String, String)> = [
            Protocol::OpenAi,
            Protocol::Azure,
            Protocol::Anthropic,
            Protocol::Gemini,
        ]
        .into_iter()
        .map(|p| {
            let c = cfg(p.as_str());
            let (n, v) = provider_for(&c.providers["p"]).unwrap().auth("s");
            (n.to_string(), v)
        })
        .collect();
        assert_eq!(
            seen,
            [
                ("authorization", "Bearer s"),
                ("api-key", "s"),
                ("x-api-key", "s"),
                ("x-goog-api-key", "s"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
        );
    }
}
