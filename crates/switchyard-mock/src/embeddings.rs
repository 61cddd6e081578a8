//! Embeddings: OpenAI `POST /v1/embeddings` and Gemini `:embedContent` /
//! `:batchEmbedContents`.
//!
//! Separate from the chat formats because nothing is "answered": each input text maps to a
//! deterministic unit vector (FNV-1a of the text seeds a SplitMix64 stream, values in -1..1,
//! L2-normalized, rounded to f32), so a test can embed the same text twice and get the same
//! floats, and a base64 answer decodes (little-endian f32) to exactly the float answer.
//! Dimensions: `dimensions` / `outputDimensionality`, default [`DEFAULT_DIMS`], at most
//! [`MAX_DIMS`]. Shapes: `openai/embeddings_float.response.json` (base64: the same with a
//! string per `embedding`), `gemini/embed_content.response.json`,
//! `gemini/batch_embed_contents.response.json`.

use crate::json::pretty_nl;
use crate::text;
use bytes::Bytes;
use serde_json::{json, Value};

/// Vector length when the request names none.
pub const DEFAULT_DIMS: usize = 8;
/// Largest accepted vector length.
pub const MAX_DIMS: usize = 4096;

/// The deterministic unit vector of `text`.
pub fn vector(text: &str, dims: usize) -> Vec<f32> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut next = || {
        h = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let raw: Vec<f64> = (0..dims)
        .map(|_| (next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
        .collect();
    let norm = raw.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
    raw.iter().map(|x| (x / norm) as f32).collect()
}

/// An f32 as JSON with its shortest f32 digits (`0.01400754`, not `0.014007540233…`).
fn num(x: f32) -> Value {
    let n: f64 = format!("{x}").parse().unwrap_or(0.0);
    serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number)
}

fn floats(v: &[f32]) -> Value {
    Value::Array(v.iter().copied().map(num).collect())
}

/// Standard base64 (with padding) of `bytes`.
pub fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                out.push(ABC[(n >> shift) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Little-endian f32 bytes, base64 (OpenAI `encoding_format: "base64"`).
pub fn base64_f32(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    base64(&bytes)
}

fn dims(v: Option<&Value>, field: &str) -> Result<usize, String> {
    match v {
        None | Some(Value::Null) => Ok(DEFAULT_DIMS),
        Some(d) => match d.as_u64() {
            Some(n) if (1..=MAX_DIMS as u64).contains(&n) => Ok(n as usize),
            _ => Err(format!(
                "Invalid '{field}': expected an integer in 1..={MAX_DIMS}, got {d}."
            )),
        },
    }
}

/// One OpenAI input: (text hashed into the vector, characters, tokens given as ids).
fn openai_inputs(input: Option<&Value>) -> Result<Vec<(String, usize, usize)>, String> {
    let bad = || {
        "Invalid 'input': expected a non-empty string, array of strings or array of token arrays."
            .to_string()
    };
    let tokens = |a: &[Value]| -> Option<(String, usize, usize)> {
        a.iter()
            .all(|t| t.is_u64())
            .then(|| (Value::Array(a.to_vec()).to_string(), 0, a.len()))
    };
    let one = |v: &Value| match v {
        Value::String(s) if !s.is_empty() => Some((s.clone(), s.chars().count(), 0)),
        Value::Array(a) if !a.is_empty() => tokens(a),
        _ => None,
    };
    match input {
        Some(Value::String(_)) => Ok(vec![one(input.expect("some")).ok_or_else(bad)?]),
        Some(Value::Array(items)) if !items.is_empty() => {
            if items.iter().all(Value::is_u64) {
                return Ok(vec![tokens(items).ok_or_else(bad)?]);
            }
            items.iter().map(|i| one(i).ok_or_else(bad)).collect()
        }
        _ => Err(bad()),
    }
}

fn usage_tokens(chars: usize, tokens: usize) -> u64 {
    let from_text = if chars > 0 {
        text::prompt_tokens(chars)
    } else {
        0
    };
    (from_text + tokens as u64).max(1)
}

/// `POST /v1/embeddings` body for `model` (the request's, or the Azure deployment).
pub fn openai(body: &Value, model: &str) -> Result<Bytes, String> {
    let inputs = openai_inputs(body.get("input"))?;
    let dims = dims(body.get("dimensions"), "dimensions")?;
    let base64 = match body.get("encoding_format").and_then(Value::as_str) {
        None | Some("float") => false,
        Some("base64") => true,
        Some(other) => {
            return Err(format!(
                "Invalid 'encoding_format': expected 'float' or 'base64', got '{other}'."
            ))
        }
    };
    let (mut chars, mut tokens) = (0, 0);
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, (text, c, t))| {
            chars += c;
            tokens += t;
            let v = vector(text, dims);
            let embedding = if base64 {
                Value::String(base64_f32(&v))
            } else {
                floats(&v)
            };
            json!({"object": "embedding", "index": index, "embedding": embedding})
        })
        .collect();
    let n = usage_tokens(chars, tokens);
    Ok(pretty_nl(&json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": n, "total_tokens": n}
    })))
}

/// Text of a Gemini `Content` (its parts' `text`, concatenated).
fn content_text(req: &Value) -> Result<String, String> {
    let t: String = req
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .ok_or("* EmbedContentRequest.content: contents must not be empty")?
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    Ok(t)
}

fn out_dims(req: &Value) -> Result<usize, String> {
    dims(
        req.get("outputDimensionality")
            .or(req.get("output_dimensionality")),
        "outputDimensionality",
    )
}

/// `:embedContent` body.
pub fn gemini_single(body: &Value) -> Result<Bytes, String> {
    let text = content_text(body)?;
    let n = text::prompt_tokens(text.chars().count());
    Ok(pretty_nl(&json!({
        "embedding": {"values": floats(&vector(&text, out_dims(body)?))},
        "usageMetadata": {
            "promptTokenCount": n,
            "totalTokenCount": n,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": n}]
        }
    })))
}

/// `:batchEmbedContents` body for the model in the URL (each request's `model`, when
/// given, must be `models/<that model>`).
pub fn gemini_batch(body: &Value, model: &str) -> Result<Bytes, String> {
    let reqs = body
        .get("requests")
        .and_then(Value::as_array)
        .filter(|r| !r.is_empty())
        .ok_or("* BatchEmbedContentsRequest.requests: at least one request is required")?;
    let want = format!("models/{model}");
    let mut out = Vec::with_capacity(reqs.len());
    for (i, r) in reqs.iter().enumerate() {
        if let Some(m) = r.get("model").and_then(Value::as_str) {
            if m != want {
                return Err(format!(
                    "* BatchEmbedContentsRequest.requests[{i}].model: model \"{m}\" does not match the batch model \"{want}\""
                ));
            }
        }
        let text = content_text(r)?;
        out.push(json!({"values": floats(&vector(&text, out_dims(r)?))}));
    }
    Ok(pretty_nl(&json!({"embeddings": out})))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_known() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64_f32(&[1.0]), "AACAPw==");
    }

    #[test]
    fn vectors() {
        let a = vector("hello", 8);
        assert_eq!(a, vector("hello", 8));
        assert_ne!(a, vector("world", 8));
        let norm: f32 = a.iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5);
        // shortest f32 digits survive the f64 round trip
        for x in a {
            assert_eq!(num(x).as_f64().unwrap() as f32, x);
        }
    }
}
