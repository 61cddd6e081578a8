//! A client's `provider_options` on a Converse body (CONTRACT §8: they add
//! fields, never replace one the gateway sets or meters). The protocol
//! crate refuses the keys every upstream shares (`model`, `messages`,
//! `max_tokens`, `toolConfig`, …); Converse has its own names for two of
//! them, refused here: `modelId` (the model, which is in the URL) and
//! `inferenceConfig` (its `maxTokens` is the output cap the request was
//! metered for). `additionalModelRequestFields` — the model-native fields
//! (`top_k`, a Nova `inferenceConfig.topK`, …) — is merged with the
//! gateway's own instead of replacing them, and may not carry the model or
//! an output cap either (at its top level or in its `inferenceConfig`).

use serde_json::{Map, Value};
use switchyard_protocol::bedrock as br;
use switchyard_protocol::ir::ChatRequest;
use switchyard_protocol::json::RESERVED_OPTIONS;

const ADDITIONAL: &str = "additionalModelRequestFields";

/// Converse's own names for the model and the output cap.
const RESERVED_CONVERSE: &[&str] = &["modelId", "inferenceConfig"];

/// Keys `additionalModelRequestFields` may not carry: the shared reserved
/// keys, and the model and output-cap names of the models behind Converse
/// (Anthropic, Nova, Titan, Llama, Mistral, Cohere).
const RESERVED_NATIVE: &[&str] = &[
    "modelId",
    "maxTokens",
    "max_new_tokens",
    "max_tokens_to_sample",
    "max_gen_len",
    "maxTokenCount",
    "maxOutputTokens",
];

fn refused(param: String) -> br::ConvertError {
    let key = param.rsplit('.').next().unwrap_or(&param).to_owned();
    br::ConvertError {
        message: format!(
            "{param}: `{key}` is set by the gateway; provider_options may add fields, not replace one"
        ),
        param: Some(param),
    }
}

fn reserved_native(key: &str) -> bool {
    RESERVED_OPTIONS.contains(&key) || RESERVED_NATIVE.contains(&key)
}

/// The first key of the client's options the gateway owns, as a `param`.
fn first_refused(options: &Map<String, Value>) -> Option<String> {
    if let Some(k) = options
        .keys()
        .find(|k| RESERVED_CONVERSE.contains(&k.as_str()))
    {
        return Some(format!("provider_options.{k}"));
    }
    let extra = options.get(ADDITIONAL)?.as_object()?;
    let prefix = format!("provider_options.{ADDITIONAL}");
    if let Some(k) = extra.keys().find(|k| reserved_native(k)) {
        return Some(format!("{prefix}.{k}"));
    }
    let nested = extra.get("inferenceConfig")?.as_object()?;
    nested
        .keys()
        .find(|k| reserved_native(k))
        .map(|k| format!("{prefix}.inferenceConfig.{k}"))
}

/// [`br::encode_request`], with the client's `provider_options` checked
/// for Converse's reserved keys and its `additionalModelRequestFields`
/// merged into the gateway's (the gateway's own keys kept).
pub fn encode_request(ir: &ChatRequest, model: &str) -> Result<br::Encoded, br::ConvertError> {
    if let Some(param) = first_refused(&ir.provider_options) {
        return Err(refused(param));
    }
    let Some(extra) = ir.provider_options.get(ADDITIONAL) else {
        return br::encode_request(ir, model);
    };
    if !extra.is_object() {
        return Err(br::ConvertError {
            param: Some(format!("provider_options.{ADDITIONAL}")),
            message: format!("provider_options.{ADDITIONAL} must be an object"),
        });
    }
    // Rare: encode without it, then add its keys beside the gateway's.
    let mut own = ir.clone();
    own.provider_options.remove(ADDITIONAL);
    let mut enc = br::encode_request(&own, model)?;
    if let (Some(body), Value::Object(extra)) = (enc.body.as_object_mut(), extra) {
        let merged = body
            .entry(ADDITIONAL)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(merged) = merged {
            for (k, v) in extra {
                merged.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
    }
    Ok(enc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(options: Value) -> ChatRequest {
        use switchyard_protocol::ir::{ContentPart, Message, Role};
        ChatRequest {
            model: "m".into(),
            messages: vec![Message {
                role: Role::User,
                content: vec![ContentPart::Text("hi".into())],
                ..Message::default()
            }],
            max_tokens: Some(20),
            provider_options: options.as_object().cloned().unwrap_or_default(),
            ..ChatRequest::default()
        }
    }

    #[test]
    fn the_model_and_the_cap_are_refused_under_converses_names() {
        for (options, param) in [
            (json!({"modelId": "x"}), "provider_options.modelId"),
            (
                json!({"inferenceConfig": {"maxTokens": 9}}),
                "provider_options.inferenceConfig",
            ),
            (
                json!({"additionalModelRequestFields": {"model": "x"}}),
                "provider_options.additionalModelRequestFields.model",
            ),
            (
                json!({"additionalModelRequestFields": {"max_tokens": 9}}),
                "provider_options.additionalModelRequestFields.max_tokens",
            ),
            (
                json!({"additionalModelRequestFields": {"inferenceConfig": {"max_new_tokens": 9}}}),
                "provider_options.additionalModelRequestFields.inferenceConfig.max_new_tokens",
            ),
        ] {
            let e = encode_request(&request(options.clone()), "anthropic.claude-x").unwrap_err();
            assert_eq!(e.param.as_deref(), Some(param), "{options}");
            assert!(e.message.contains("set by the gateway"), "{}", e.message);
        }
    }

    #[test]
    fn native_fields_are_added_beside_the_gateways_own() {
        let mut ir = request(json!({
            "additionalModelRequestFields": {"top_k": 40, "inferenceConfig": {"topK": 20}},
            "performanceConfig": {"latency": "optimized"}
        }));
        ir.top_k = Some(3);
        let enc = encode_request(&ir, "anthropic.claude-x").unwrap();
        assert_eq!(
            enc.body["additionalModelRequestFields"],
            json!({"top_k": 3, "inferenceConfig": {"topK": 20}})
        );
        assert_eq!(
            enc.body["performanceConfig"],
            json!({"latency": "optimized"})
        );
        // A model the gateway sets nothing native for: the client's alone.
        let enc = encode_request(&ir, "us.amazon.nova-micro-v1:0").unwrap();
        assert_eq!(
            enc.body["additionalModelRequestFields"],
            json!({"top_k": 40, "inferenceConfig": {"topK": 20}})
        );
        // Without any: the protocol crate's encoding as it is.
        let plain = request(json!({}));
        assert_eq!(
            encode_request(&plain, "m").unwrap(),
            br::encode_request(&plain, "m").unwrap()
        );
    }
}
