//! Amazon Bedrock Runtime (MAPPING §16): the wire side only, no I/O, no
//! signing.
//!
//! - [`FrameDecoder`] / [`encode_frame`]: the binary AWS event-stream
//!   framing of ConverseStream and InvokeModelWithResponseStream.
//! - Converse: [`encode_request`] builds the body, [`decode_response`]
//!   reads an answer, [`StreamTranslator`] turns ConverseStream events into
//!   IR events, [`exception`] classifies exception frames (and
//!   `x-amzn-errortype` names).
//! - InvokeModel with Claude: [`anthropic_body`] adapts an Anthropic
//!   Messages body, [`chunk_event`] unwraps a stream `chunk` into the
//!   Anthropic event it carries.
//! - CountTokens: [`count_tokens_body_converse`],
//!   [`count_tokens_body_invoke`] and [`count_tokens_answer`].
//!
//! The model id is never in a body: it goes in the URL
//! (`/model/{modelId}/converse` …), which the caller builds and signs.

mod converse;
mod eventstream;
mod invoke;
#[cfg(test)]
mod testdata;

pub use converse::{
    decode_response, encode_request, exception, finish_reason, ConvertError, DecodeError, Encoded,
    ExceptionKind, PushError, StreamException, StreamTranslator,
};
pub use eventstream::{encode_frame, Frame, FrameDecoder, FrameError, FrameKind, MAX_FRAME_LEN};
pub use invoke::{anthropic_body, chunk_event, InvokeError, ANTHROPIC_VERSION};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// The CountTokens body for a Converse request: its `messages`, `system`
/// and `toolConfig` under `input.converse` (inference settings and
/// model-native fields do not count and are not accepted there).
pub fn count_tokens_body_converse(converse_body: &Value) -> Value {
    let mut converse = Map::new();
    for key in ["messages", "system", "toolConfig"] {
        if let Some(v) = converse_body.get(key) {
            converse.insert(key.into(), v.clone());
        }
    }
    json!({ "input": { "converse": converse } })
}

/// The CountTokens body for an InvokeModel request: the exact body bytes,
/// base64, under `input.invokeModel.body`.
pub fn count_tokens_body_invoke(body: &[u8]) -> Value {
    let b64 = base64::engine::general_purpose::STANDARD.encode(body);
    json!({ "input": { "invokeModel": { "body": b64 } } })
}

/// The count from a CountTokens answer, `{"inputTokens": N}`.
pub fn count_tokens_answer(bytes: &[u8]) -> Result<u64, serde_json::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        input_tokens: u64,
    }
    serde_json::from_slice::<Answer>(bytes).map(|a| a.input_tokens)
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::testdata::{json_file, read};

    /// A full Converse body (with the settings CountTokens does not take)
    /// gives the recorded CountTokens body.
    #[test]
    fn count_tokens_converse_body_matches_the_recording() {
        let want = json_file("count_tokens_converse.request.json");
        let mut full = want["input"]["converse"].clone();
        full["inferenceConfig"] = json!({"maxTokens": 10});
        full["additionalModelRequestFields"] = json!({"top_k": 3});
        assert_eq!(count_tokens_body_converse(&full), want);
        let bare = count_tokens_body_converse(&json!({"messages": []}));
        assert_eq!(bare, json!({"input": {"converse": {"messages": []}}}));
    }

    /// The recorded InvokeModel CountTokens body wraps the exact bytes.
    #[test]
    fn count_tokens_invoke_body_matches_the_recording() {
        let want = json_file("count_tokens_invoke.request.json");
        let b64 = want["input"]["invokeModel"]["body"].as_str().unwrap();
        let inner = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(count_tokens_body_invoke(&inner), want);
    }

    #[test]
    fn count_tokens_answers() {
        let converse = read("count_tokens_converse.response.json");
        assert_eq!(count_tokens_answer(&converse).unwrap(), 375);
        let invoke = read("count_tokens_invoke.response.json");
        assert_eq!(count_tokens_answer(&invoke).unwrap(), 18);
        assert!(count_tokens_answer(b"{}").is_err());
        assert!(count_tokens_answer(br#"{"inputTokens":-1}"#).is_err());
        assert!(count_tokens_answer(b"\xff").is_err());
    }
}
