//! Amazon Bedrock Runtime (contract §9, MAPPING §16): Converse and
//! ConverseStream for every model (`api: converse`, the default), or
//! InvokeModel / InvokeModelWithResponseStream with the Anthropic body
//! (`api: invoke`). Requests are signed with SigV4 after the body is built
//! (`sign`), with credentials resolved off the request path
//! (`credentials`); streams come in the AWS event-stream framing
//! (`framing`), exceptions inside them and errors before them read by
//! `errors`. The wire codecs are `switchyard_protocol::bedrock`.

pub mod credentials;
pub mod errors;
pub mod framing;
pub mod options;
pub mod sign;

use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderName, Request};
use switchyard_protocol::bedrock as br;
use switchyard_protocol::ir::{ChatResponse, StreamEvent};
use switchyard_protocol::sse::SseEvent;

use super::body::Outbound;
use super::convert::bad_json;
use super::deployment::DeploymentRt;
use super::provider::{Provider, Urls};
use super::translate::{Decoded, Decoder, StreamDecode};
use super::{Dialect, Inbound, JsonAnswer};
use crate::config::{
    BedrockApi, CloudCredentials, Deployment, Provider as ProviderCfg, ProviderKey,
};
use crate::error::{ErrorCode, GatewayError, Source};
use credentials::{AwsCredentials, Keys};

/// A Bedrock provider block (its region and credentials), as one of its
/// deployments speaks it (Converse or InvokeModel).
pub struct Bedrock {
    region: Arc<str>,
    credentials: Arc<AwsCredentials>,
    api: BedrockApi,
    /// The deployment's model id: Converse answers name none, so the
    /// answer is given this one (empty for the provider block itself).
    model: Arc<str>,
}

impl Bedrock {
    pub fn new(cfg: &ProviderCfg) -> Result<Bedrock, String> {
        let region: Arc<str> = cfg
            .region
            .as_deref()
            .ok_or_else(|| format!("providers.{}: no region", cfg.id))?
            .into();
        let credentials = match &cfg.credentials {
            Some(CloudCredentials::AwsKeys {
                access_key_id,
                secret_access_key,
                session_token,
                ..
            }) => AwsCredentials::fixed(Keys {
                access_key_id: access_key_id.clone(),
                secret_access_key: secret_access_key.clone(),
                session_token: session_token.clone(),
                expiry: None,
            }),
            _ => AwsCredentials::chain(&region),
        };
        Ok(Bedrock {
            region,
            credentials,
            api: BedrockApi::default(),
            model: "".into(),
        })
    }

    /// The credentials this provider signs with (tests and `/admin` read
    /// whether they are there).
    pub fn credentials(&self) -> &Arc<AwsCredentials> {
        &self.credentials
    }
}

/// A model id as a path segment: `:` and `/` (of versions and ARNs)
/// percent-encoded, as the AWS SDKs send it. The signature covers the path
/// as sent, so this is what gets signed too.
pub fn model_segment(model: &str) -> String {
    let mut out = String::with_capacity(model.len() + 8);
    for b in model.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A ConverseStream's events as IR events; it has no terminator (the body
/// ends after `metadata`, which carries the finish and the usage).
struct ConverseDecoder(br::StreamTranslator);

impl StreamDecode for ConverseDecoder {
    fn push(&mut self, ev: &SseEvent, out: &mut Vec<StreamEvent>) -> Decoded {
        let (Some(name), Some(data)) = (ev.event_str(), ev.data.as_deref()) else {
            return Decoded::Unparsable;
        };
        match self.0.push(name, data, out) {
            Ok(()) => Decoded::Events,
            Err(br::PushError::BadJson(_)) => Decoded::Unparsable,
            Err(br::PushError::Exception(e)) => Decoded::Error(errors::from_exception(&e)),
        }
    }
}

impl Provider for Bedrock {
    fn gen_ai_name(&self) -> &'static str {
        "aws.bedrock"
    }

    /// InvokeModel speaks Anthropic's Messages dialect (an Anthropic
    /// client's body goes nearly as it came); Converse its own.
    fn dialect(&self) -> Dialect {
        match self.api {
            BedrockApi::Converse => Dialect::Converse,
            BedrockApi::Invoke => Dialect::Anthropic,
        }
    }

    fn for_deployment(&self, d: &Deployment) -> Option<Arc<dyn Provider>> {
        Some(Arc::new(Bedrock {
            region: self.region.clone(),
            credentials: self.credentials.clone(),
            api: d.api,
            model: d.model.as_str().into(),
        }))
    }

    fn urls(&self, p: &ProviderCfg, d: &Deployment) -> Urls {
        let model = format!("{}/model/{}", p.base_url, model_segment(&d.model));
        let (chat, stream) = match d.api {
            BedrockApi::Converse => ("converse", "converse-stream"),
            BedrockApi::Invoke => ("invoke", "invoke-with-response-stream"),
        };
        Urls {
            chat: format!("{model}/{chat}"),
            stream: format!("{model}/{stream}"),
            responses: None,
            embeddings: None,
            count_tokens: Some(format!("{model}/count-tokens")),
        }
    }

    /// Never asked: a Bedrock provider has no keys to check.
    fn models_url(&self, p: &ProviderCfg) -> String {
        p.base_url.clone()
    }

    /// Never used: requests are signed ([`Provider::authorize`]).
    fn auth(&self, _secret: &str) -> (HeaderName, String) {
        (http::header::AUTHORIZATION, String::new())
    }

    fn pending(
        &self,
    ) -> Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>> {
        (!self.credentials.settled()).then(|| {
            Box::pin(self.credentials.wait_settled())
                as std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>
        })
    }

    fn authorize(
        &self,
        req: &mut Request<Bytes>,
        _key: Option<&ProviderKey>,
    ) -> Result<(), GatewayError> {
        let Some(keys) = self.credentials.current() else {
            let why = self.credentials.failure();
            let why = why.as_deref().map_or("none resolved yet", String::as_str);
            return Err(GatewayError::new(
                ErrorCode::AuthFailed,
                Source::Gateway,
                format!("no AWS credentials to sign with: {why}"),
            ));
        };
        sign::sign_request(req, &keys, &self.region, SystemTime::now())
            .map_err(|m| GatewayError::new(ErrorCode::UpstreamError, Source::Gateway, m))
    }

    fn stream_framing(&self, _out: &Outbound) -> Option<Box<dyn crate::upstream::events::Framing>> {
        Some(Box::new(framing::EventFrames::new(
            self.api == BedrockApi::Invoke,
        )))
    }

    fn encode(&self, dep: &DeploymentRt, inbound: &Inbound<'_>) -> Result<Outbound, GatewayError> {
        match self.api {
            BedrockApi::Converse => converse_body(dep, inbound),
            BedrockApi::Invoke => {
                let mut out = super::anthropic::Anthropic.encode(dep, inbound)?;
                out.body = invoke_body(&out.body)?;
                Ok(out)
            }
        }
    }

    fn decode(&self, bytes: &[u8], out: &Outbound) -> Result<ChatResponse, GatewayError> {
        match self.api {
            BedrockApi::Converse => {
                // The answer names no model: it is the deployment's.
                br::decode_response(bytes, &self.model, out.json_tool.as_deref()).map_err(|e| {
                    GatewayError::upstream(
                        ErrorCode::UpstreamError,
                        format!("upstream answer: {e}"),
                    )
                })
            }
            BedrockApi::Invoke => super::anthropic::decode(bytes, out),
        }
    }

    fn stream_decoder(&self, out: &Outbound) -> Decoder {
        match self.api {
            BedrockApi::Converse => Box::new(ConverseDecoder(br::StreamTranslator::new(
                &self.model,
                out.json_tool.as_deref(),
            ))),
            BedrockApi::Invoke => super::anthropic::Anthropic.stream_decoder(out),
        }
    }

    fn refuses_choices(&self, _stream: bool) -> Option<&'static str> {
        Some("Bedrock deployments answer one choice")
    }

    fn runs_web_search(&self, _ir: &switchyard_protocol::ir::ChatRequest) -> bool {
        false
    }

    /// Converse takes images only as bytes.
    fn inline_images(&self) -> bool {
        self.api == BedrockApi::Converse
    }

    fn encode_inlined(
        &self,
        dep: &DeploymentRt,
        inbound: &Inbound<'_>,
        ir: &switchyard_protocol::ir::ChatRequest,
    ) -> Result<Outbound, GatewayError> {
        match self.api {
            BedrockApi::Converse => converse_ir(dep, ir),
            BedrockApi::Invoke => self.encode(dep, inbound),
        }
    }

    /// CountTokens with the same body a generation would send.
    fn count_tokens_body(
        &self,
        dep: &DeploymentRt,
        inbound: &Inbound<'_>,
    ) -> Option<Result<Vec<u8>, GatewayError>> {
        Some(self.encode(dep, inbound).and_then(|out| {
            let body = match self.api {
                BedrockApi::Converse => {
                    let v: serde_json::Value =
                        serde_json::from_slice(&out.body).map_err(bad_json)?;
                    br::count_tokens_body_converse(&v)
                }
                BedrockApi::Invoke => br::count_tokens_body_invoke(&out.body),
            };
            Ok(body.to_string().into_bytes())
        }))
    }

    fn count_tokens_answer(
        &self,
        dep: &DeploymentRt,
        bytes: Bytes,
    ) -> Result<JsonAnswer, GatewayError> {
        let n = br::count_tokens_answer(&bytes).map_err(bad_json)?;
        let body = serde_json::json!({ "input_tokens": n }).to_string();
        Ok(JsonAnswer {
            body: Bytes::from(body),
            usage: switchyard_protocol::ir::Usage::default(),
            model: dep.cfg.model.clone(),
            ttfb: Default::default(),
        })
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

/// The Converse body for the request, provider options merged.
fn converse_body(dep: &DeploymentRt, inbound: &Inbound<'_>) -> Result<Outbound, GatewayError> {
    converse_ir(dep, inbound.ir())
}

fn converse_ir(
    dep: &DeploymentRt,
    ir: &switchyard_protocol::ir::ChatRequest,
) -> Result<Outbound, GatewayError> {
    let enc = options::encode_request(ir, &dep.cfg.model).map_err(|e| GatewayError {
        param: e.param.clone(),
        ..GatewayError::invalid(None, e.message)
    })?;
    let mut body = enc.body;
    if let (Some(obj), opts) = (body.as_object_mut(), &dep.provider.cfg.options) {
        for (k, v) in opts {
            obj.insert(k.clone(), v.clone());
        }
    }
    Ok(Outbound {
        body: serde_json::to_vec(&body).map_err(bad_json)?,
        json_tool: enc.json_tool,
        ..Outbound::default()
    })
}

/// An Anthropic Messages body as InvokeModel takes it: no `model` (it is in
/// the URL), no `stream` (the URL decides), `anthropic_version` for Bedrock.
/// Betas are not passed on: Bedrock refuses the ones it does not know.
fn invoke_body(anthropic: &[u8]) -> Result<Vec<u8>, GatewayError> {
    let mut map: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(anthropic).map_err(bad_json)?;
    Ok(br::anthropic_body(&mut map, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_ids_are_encoded_as_the_sdks_send_them() {
        assert_eq!(
            model_segment("anthropic.claude-3-haiku-20240307-v1:0"),
            "anthropic.claude-3-haiku-20240307-v1%3A0"
        );
        assert_eq!(
            model_segment("arn:aws:bedrock:us-east-1:123:application-inference-profile/abc"),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A123%3Aapplication-inference-profile%2Fabc"
        );
        assert_eq!(
            model_segment("us.amazon.nova-micro-v1:0"),
            "us.amazon.nova-micro-v1%3A0"
        );
    }

    #[test]
    fn an_invoke_body_has_no_model_no_stream_and_bedrocks_version() {
        let body =
            invoke_body(br#"{"model":"m","stream":true,"max_tokens":5,"messages":[]}"#).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"max_tokens":5,"messages":[],"anthropic_version":"bedrock-2023-05-31"})
        );
    }
}
