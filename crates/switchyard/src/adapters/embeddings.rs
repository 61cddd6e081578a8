//! One embeddings attempt (`POST /v1/embeddings`, MAPPING.md §15); each
//! provider's module builds its request and reads its answer with the
//! helpers here.
//!
//! * OpenAI / Azure: the client's body forwarded with `model` replaced (Azure
//!   names the deployment in the URL, so `model` is dropped), the answer
//!   passed back as it came; usage read from it.
//! * Gemini: `:batchEmbedContents`, `input[i]` → `requests[i]` (`model:
//!   "models/<m>"`, `outputDimensionality` from `dimensions`), the answer
//!   mapped back to OpenAI's list with `index: i`, floats as they came or,
//!   when the client asked for base64, packed as little-endian f32 and
//!   base64-encoded; usage from `usageMetadata` (absent: 0).
//! * Anthropic has no embeddings API: never a candidate (config validation
//!   refuses the `embeddings` capability there); reaching here is a bug
//!   reported as `invalid_request`.
//!
//! The deployment's provider `options` (generation parameters) are not merged
//! into embedding requests.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use switchyard_protocol::ir::Usage;

use super::{send, Answer, CallInfo, JsonAnswer};
use crate::adapters::deployment::DeploymentRt;
use crate::config::ProviderKey;
use crate::doors::embeddings::{EmbedInput, EmbeddingsRequest};
use crate::error::{ErrorCode, GatewayError};

pub async fn embeddings(
    dep: &DeploymentRt,
    key: Option<&ProviderKey>,
    req: &EmbeddingsRequest<'_>,
    call: &CallInfo,
) -> Result<Answer, GatewayError> {
    let Some(url) = &dep.endpoint.embeddings_url else {
        return Err(GatewayError::invalid(
            None,
            format!("{} has no embeddings API", dep.name),
        ));
    };
    let provider = dep.api();
    let Some(body) = provider.embeddings_body(dep, req) else {
        // Never a candidate (config validation refuses the capability).
        return Err(GatewayError::invalid(
            None,
            format!("{} has no embeddings API", dep.name),
        ));
    };
    let (bytes, ttfb) = send::post_json(dep, key, url, body?, call).await?;
    let answer = provider.embeddings_answer(dep, req, bytes)?;
    Ok(Answer::Json(JsonAnswer { ttfb, ..answer }))
}

/// An OpenAI answer passes through; only its usage and model are read.
pub fn openai_answer(model: &str, bytes: bytes::Bytes) -> Result<JsonAnswer, GatewayError> {
    #[derive(Deserialize)]
    struct Peek {
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        usage: Option<PeekUsage>,
        data: Vec<serde::de::IgnoredAny>,
    }
    #[derive(Deserialize)]
    struct PeekUsage {
        #[serde(default)]
        prompt_tokens: u64,
    }
    let p: Peek = serde_json::from_slice(&bytes).map_err(|e| bad_answer(&e))?;
    let _ = p.data;
    Ok(JsonAnswer {
        usage: Usage {
            input_tokens: p.usage.map_or(0, |u| u.prompt_tokens),
            ..Usage::default()
        },
        model: p.model.unwrap_or_else(|| model.to_owned()),
        body: bytes,
        ttfb: Default::default(),
    })
}

fn bad_answer(e: &dyn std::fmt::Display) -> GatewayError {
    GatewayError::upstream(
        ErrorCode::UpstreamError,
        format!("upstream embeddings answer is not valid: {e}"),
    )
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GeminiBatch<'a> {
    requests: Vec<GeminiEmbed<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GeminiEmbed<'a> {
    model: &'a str,
    content: GeminiContent<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_dimensionality: Option<u32>,
}

#[derive(Serialize)]
struct GeminiContent<'a> {
    parts: [GeminiPart<'a>; 1],
}

#[derive(Serialize)]
struct GeminiPart<'a> {
    text: &'a str,
}

/// The `:batchEmbedContents` body: one request per input, in order.
pub fn gemini_request(model: &str, req: &EmbeddingsRequest<'_>) -> Result<Vec<u8>, GatewayError> {
    let name = format!("models/{model}");
    let requests = req
        .inputs
        .iter()
        .map(|i| match i {
            EmbedInput::Text(text) => Ok(GeminiEmbed {
                model: &name,
                content: GeminiContent {
                    parts: [GeminiPart { text }],
                },
                output_dimensionality: req.dimensions,
            }),
            EmbedInput::Tokens(_) => Err(GatewayError::invalid(
                Some("input".into()),
                "Gemini embeddings take text, not token arrays",
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(serde_json::to_vec(&GeminiBatch { requests }).unwrap_or_default())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiAnswer {
    embeddings: Vec<GeminiValues>,
    #[serde(default)]
    usage_metadata: Option<GeminiUsage>,
}

#[derive(Deserialize)]
struct GeminiValues {
    values: Vec<f32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GeminiUsage {
    #[serde(default)]
    prompt_token_count: u64,
}

#[derive(Serialize)]
struct OpenAiList<'a> {
    object: &'static str,
    data: Vec<OpenAiEmbedding>,
    model: &'a str,
    usage: OpenAiUsage,
}

#[derive(Serialize)]
struct OpenAiEmbedding {
    object: &'static str,
    index: usize,
    embedding: Vector,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Vector {
    Float(Vec<f32>),
    Base64(String),
}

#[derive(Serialize)]
struct OpenAiUsage {
    prompt_tokens: u64,
    total_tokens: u64,
}

/// A Gemini batch answer as OpenAI's list.
pub fn gemini_answer(
    model: &str,
    req: &EmbeddingsRequest<'_>,
    bytes: &[u8],
) -> Result<JsonAnswer, GatewayError> {
    let a: GeminiAnswer = serde_json::from_slice(bytes).map_err(|e| bad_answer(&e))?;
    if a.embeddings.len() != req.inputs.len() {
        return Err(bad_answer(&format!(
            "{} embeddings for {} inputs",
            a.embeddings.len(),
            req.inputs.len()
        )));
    }
    let tokens = a.usage_metadata.map_or(0, |u| u.prompt_token_count);
    let data = a
        .embeddings
        .into_iter()
        .enumerate()
        .map(|(index, e)| OpenAiEmbedding {
            object: "embedding",
            index,
            embedding: if req.base64 {
                Vector::Base64(base64_f32(&e.values))
            } else {
                Vector::Float(e.values)
            },
        })
        .collect();
    let list = OpenAiList {
        object: "list",
        data,
        model,
        usage: OpenAiUsage {
            prompt_tokens: tokens,
            total_tokens: tokens,
        },
    };
    Ok(JsonAnswer {
        body: serde_json::to_vec(&list).unwrap_or_default().into(),
        usage: Usage {
            input_tokens: tokens,
            ..Usage::default()
        },
        model: model.to_owned(),
        ttfb: Default::default(),
    })
}

/// OpenAI's `encoding_format: "base64"`: the floats as little-endian f32
/// bytes, standard base64 with padding.
pub fn base64_f32(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doors::embeddings::decode;

    #[test]
    fn gemini_batch_request_per_input() {
        let r = decode(r#"{"model":"e","input":["hello","world"],"dimensions":4}"#).unwrap();
        let body: serde_json::Value =
            serde_json::from_slice(&gemini_request("gemini-embedding-001", &r).unwrap()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"requests": [
                {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "hello"}]}, "outputDimensionality": 4},
                {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": "world"}]}, "outputDimensionality": 4},
            ]})
        );
        let tokens = decode(r#"{"model":"e","input":[[1,2]]}"#).unwrap();
        assert_eq!(
            gemini_request("m", &tokens).unwrap_err().code,
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn gemini_answer_as_openai_list() {
        let float = decode(r#"{"model":"e","input":["a","b"]}"#).unwrap();
        let b64 = decode(r#"{"model":"e","input":["a","b"],"encoding_format":"base64"}"#).unwrap();
        let upstream = br#"{"embeddings":[{"values":[0.5,-0.25]},{"values":[1.0,0.0]}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3}}"#;
        let a = gemini_answer("m", &float, upstream).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
        assert_eq!(v["data"][1]["index"], 1);
        assert_eq!(v["data"][0]["embedding"], serde_json::json!([0.5, -0.25]));
        assert_eq!(v["usage"]["prompt_tokens"], 3);
        assert_eq!(a.usage.input_tokens, 3);
        let a = gemini_answer("m", &b64, upstream).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&a.body).unwrap();
        // 0.5f32 = 00 00 00 3f, -0.25f32 = 00 00 80 be (little-endian).
        assert_eq!(v["data"][0]["embedding"], "AAAAPwAAgL4=");
        // One embedding for two inputs is a bad answer.
        let short = br#"{"embeddings":[{"values":[0.5]}]}"#;
        assert_eq!(
            gemini_answer("m", &float, short).unwrap_err().code,
            ErrorCode::UpstreamError
        );
    }
}
