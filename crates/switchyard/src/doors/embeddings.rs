//! `POST /v1/embeddings` (OpenAI's shape; errors in the OpenAI envelope,
//! [`super::Door::OpenAiChat`]): the request, read once, with its raw fields
//! kept for the OpenAI/Azure passthrough.

use serde::Deserialize;
use serde_json::value::RawValue;
use switchyard_protocol::passthrough::{self, Fields};

use crate::error::GatewayError;

/// One input to embed.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbedInput {
    Text(String),
    /// Token ids (OpenAI only: other upstreams take text).
    Tokens(Vec<u32>),
}

#[derive(Debug)]
pub struct EmbeddingsRequest<'a> {
    /// The client's top-level fields as they came (forwarded to OpenAI-
    /// compatible upstreams with `model` replaced).
    pub fields: Fields<'a>,
    pub model: String,
    pub inputs: Vec<EmbedInput>,
    /// `encoding_format: "base64"` (little-endian f32, base64); default float.
    pub base64: bool,
    pub dimensions: Option<u32>,
}

impl EmbeddingsRequest<'_> {
    /// Estimated input tokens (≈ 4 characters a token; a token array is
    /// its length): what rpm/tpm limits reserve before the answer.
    pub fn estimated_tokens(&self) -> u64 {
        self.inputs.iter().map(estimate).sum()
    }

    /// The largest single input's estimate: what a context window must
    /// hold (each input is embedded on its own).
    pub fn largest_input(&self) -> u64 {
        self.inputs.iter().map(estimate).max().unwrap_or(0)
    }
}

fn estimate(i: &EmbedInput) -> u64 {
    match i {
        EmbedInput::Text(t) => (t.len() as u64).div_ceil(4),
        EmbedInput::Tokens(t) => t.len() as u64,
    }
}

/// `input`: a string, an array of strings, an array of token ids, or an
/// array of token arrays; never empty.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawInput {
    One(String),
    Many(Vec<String>),
    Tokens(Vec<u32>),
    TokenArrays(Vec<Vec<u32>>),
}

pub fn decode(text: &str) -> Result<EmbeddingsRequest<'_>, GatewayError> {
    let fields = passthrough::parse_object(text).map_err(|m| GatewayError::invalid(None, m))?;
    let mut model = None;
    let mut input = None;
    let mut base64 = false;
    let mut dimensions = None;
    for (key, raw) in &fields {
        let raw: &RawValue = raw;
        match key.as_ref() {
            "model" => model = Some(field::<String>(raw, "model")?),
            "input" => input = Some(field::<RawInput>(raw, "input").map_err(|_| {
                invalid(
                    "input",
                    "`input` must be a string, an array of strings, an array of token ids or an array of token arrays",
                )
            })?),
            "encoding_format" => {
                base64 = match field::<Option<String>>(raw, "encoding_format")?.as_deref() {
                    None | Some("float") => false,
                    Some("base64") => true,
                    Some(other) => {
                        return Err(invalid(
                            "encoding_format",
                            format!("`encoding_format` must be `float` or `base64`, not `{other}`"),
                        ))
                    }
                }
            }
            "dimensions" => {
                dimensions = field::<Option<u32>>(raw, "dimensions")?;
                if dimensions == Some(0) {
                    return Err(invalid("dimensions", "`dimensions` must be at least 1"));
                }
            }
            "user" => {
                field::<Option<String>>(raw, "user")?;
            }
            _ => {}
        }
    }
    let model = model
        .filter(|m| !m.is_empty())
        .ok_or_else(|| invalid("model", "`model` is required"))?;
    let inputs = match input.ok_or_else(|| invalid("input", "`input` is required"))? {
        RawInput::One(s) => vec![EmbedInput::Text(s)],
        RawInput::Many(v) => v.into_iter().map(EmbedInput::Text).collect(),
        RawInput::Tokens(t) => vec![EmbedInput::Tokens(t)],
        RawInput::TokenArrays(v) => v.into_iter().map(EmbedInput::Tokens).collect(),
    };
    let empty = |i: &EmbedInput| match i {
        EmbedInput::Text(t) => t.is_empty(),
        EmbedInput::Tokens(t) => t.is_empty(),
    };
    if inputs.is_empty() || inputs.iter().any(empty) {
        return Err(invalid(
            "input",
            "`input` must not be empty, nor hold an empty string or token array",
        ));
    }
    Ok(EmbeddingsRequest {
        fields,
        model,
        inputs,
        base64,
        dimensions,
    })
}

fn invalid(param: &str, message: impl Into<String>) -> GatewayError {
    GatewayError::invalid(Some(param.to_owned()), message)
}

fn field<'a, T: Deserialize<'a>>(raw: &'a RawValue, param: &str) -> Result<T, GatewayError> {
    serde_json::from_str(raw.get()).map_err(|e| {
        let s = e.to_string();
        let s = s.find(" at line ").map_or(s.as_str(), |i| &s[..i]);
        invalid(param, format!("`{param}`: {s}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_shape() {
        let r = decode(r#"{"model":"e","input":"hi"}"#).unwrap();
        assert_eq!(r.inputs, [EmbedInput::Text("hi".into())]);
        assert!(!r.base64);
        let r = decode(
            r#"{"model":"e","input":["a","bcde"],"encoding_format":"base64","dimensions":8}"#,
        )
        .unwrap();
        assert_eq!(r.inputs.len(), 2);
        assert!(r.base64);
        assert_eq!(r.dimensions, Some(8));
        assert_eq!((r.estimated_tokens(), r.largest_input()), (2, 1));
        let r = decode(r#"{"model":"e","input":[1,2,3]}"#).unwrap();
        assert_eq!(r.inputs, [EmbedInput::Tokens(vec![1, 2, 3])]);
        let r = decode(r#"{"model":"e","input":[[1],[2,3]]}"#).unwrap();
        assert_eq!(r.inputs.len(), 2);
    }

    #[test]
    fn bad_requests_name_their_param() {
        for (body, param) in [
            (r#"{"input":"x"}"#, "model"),
            (r#"{"model":"e"}"#, "input"),
            (r#"{"model":"e","input":[]}"#, "input"),
            (r#"{"model":"e","input":[""]}"#, "input"),
            (r#"{"model":"e","input":{"a":1}}"#, "input"),
            (
                r#"{"model":"e","input":"x","encoding_format":"int8"}"#,
                "encoding_format",
            ),
            (r#"{"model":"e","input":"x","dimensions":0}"#, "dimensions"),
            (
                r#"{"model":"e","input":"x","dimensions":"8"}"#,
                "dimensions",
            ),
        ] {
            let e = decode(body).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{body}");
        }
    }
}
