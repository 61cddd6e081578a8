//! Fixture error envelopes (`fixtures/providers/*/error_*.http.json`), embedded at build time.

use bytes::Bytes;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Every embedded envelope: (name without `.http.json`, file text).
pub const ENVELOPES: &[(&str, &str)] = &[
    (
        "anthropic/error_400_invalid_request",
        fixture!("anthropic/error_400_invalid_request.http.json"),
    ),
    (
        "anthropic/error_400_max_tokens_too_large",
        fixture!("anthropic/error_400_max_tokens_too_large.http.json"),
    ),
    (
        "anthropic/error_400_prompt_too_long",
        fixture!("anthropic/error_400_prompt_too_long.http.json"),
    ),
    (
        "anthropic/error_401_authentication",
        fixture!("anthropic/error_401_authentication.http.json"),
    ),
    (
        "anthropic/error_403_permission",
        fixture!("anthropic/error_403_permission.http.json"),
    ),
    (
        "anthropic/error_404_model_not_found",
        fixture!("anthropic/error_404_model_not_found.http.json"),
    ),
    (
        "anthropic/error_413_request_too_large",
        fixture!("anthropic/error_413_request_too_large.http.json"),
    ),
    (
        "anthropic/error_429_rate_limit",
        fixture!("anthropic/error_429_rate_limit.http.json"),
    ),
    (
        "anthropic/error_500_api_error",
        fixture!("anthropic/error_500_api_error.http.json"),
    ),
    (
        "anthropic/error_529_overloaded",
        fixture!("anthropic/error_529_overloaded.http.json"),
    ),
    (
        "azure/error_400_content_filter",
        fixture!("azure/error_400_content_filter.http.json"),
    ),
    (
        "azure/error_400_context_length",
        fixture!("azure/error_400_context_length.http.json"),
    ),
    (
        "azure/error_401_access_denied",
        fixture!("azure/error_401_access_denied.http.json"),
    ),
    (
        "azure/error_404_deployment_not_found",
        fixture!("azure/error_404_deployment_not_found.http.json"),
    ),
    (
        "azure/error_429_rate_limit",
        fixture!("azure/error_429_rate_limit.http.json"),
    ),
    (
        "bedrock/error_400_converse_stream_before_stream",
        fixture!("bedrock/error_400_converse_stream_before_stream.http.json"),
    ),
    (
        "bedrock/error_400_validation_anthropic_body",
        fixture!("bedrock/error_400_validation_anthropic_body.http.json"),
    ),
    (
        "bedrock/error_400_validation_input_too_long",
        fixture!("bedrock/error_400_validation_input_too_long.http.json"),
    ),
    (
        "bedrock/error_400_validation_invalid_model",
        fixture!("bedrock/error_400_validation_invalid_model.http.json"),
    ),
    (
        "bedrock/error_400_validation_on_demand_not_supported",
        fixture!("bedrock/error_400_validation_on_demand_not_supported.http.json"),
    ),
    (
        "bedrock/error_400_validation_prompt_too_long_anthropic",
        fixture!("bedrock/error_400_validation_prompt_too_long_anthropic.http.json"),
    ),
    (
        "bedrock/error_403_access_denied",
        fixture!("bedrock/error_403_access_denied.http.json"),
    ),
    (
        "bedrock/error_404_resource_not_found_eol",
        fixture!("bedrock/error_404_resource_not_found_eol.http.json"),
    ),
    (
        "bedrock/error_429_model_not_ready",
        fixture!("bedrock/error_429_model_not_ready.http.json"),
    ),
    (
        "bedrock/error_429_throttling",
        fixture!("bedrock/error_429_throttling.http.json"),
    ),
    (
        "bedrock/error_503_service_unavailable",
        fixture!("bedrock/error_503_service_unavailable.http.json"),
    ),
    (
        "bedrock/error_503_too_many_connections",
        fixture!("bedrock/error_503_too_many_connections.http.json"),
    ),
    (
        "deepseek/error_400_context_length",
        fixture!("deepseek/error_400_context_length.http.json"),
    ),
    (
        "deepseek/error_401_authentication",
        fixture!("deepseek/error_401_authentication.http.json"),
    ),
    (
        "deepseek/error_402_insufficient_balance",
        fixture!("deepseek/error_402_insufficient_balance.http.json"),
    ),
    (
        "deepseek/error_429_rate_limit",
        fixture!("deepseek/error_429_rate_limit.http.json"),
    ),
    (
        "deepseek/error_503_server_overloaded",
        fixture!("deepseek/error_503_server_overloaded.http.json"),
    ),
    (
        "gemini/error_400_api_key_invalid",
        fixture!("gemini/error_400_api_key_invalid.http.json"),
    ),
    (
        "gemini/error_400_context_length",
        fixture!("gemini/error_400_context_length.http.json"),
    ),
    (
        "gemini/error_400_invalid_argument",
        fixture!("gemini/error_400_invalid_argument.http.json"),
    ),
    (
        "gemini/error_403_missing_api_key",
        fixture!("gemini/error_403_missing_api_key.http.json"),
    ),
    (
        "gemini/error_403_service_disabled",
        fixture!("gemini/error_403_service_disabled.http.json"),
    ),
    (
        "gemini/error_404_model_not_found",
        fixture!("gemini/error_404_model_not_found.http.json"),
    ),
    (
        "gemini/error_429_resource_exhausted",
        fixture!("gemini/error_429_resource_exhausted.http.json"),
    ),
    (
        "gemini/error_500_internal",
        fixture!("gemini/error_500_internal.http.json"),
    ),
    (
        "gemini/error_503_unavailable",
        fixture!("gemini/error_503_unavailable.http.json"),
    ),
    (
        "openai/error_400_context_length",
        fixture!("openai/error_400_context_length.http.json"),
    ),
    (
        "openai/error_400_invalid_request",
        fixture!("openai/error_400_invalid_request.http.json"),
    ),
    (
        "openai/error_401_invalid_api_key",
        fixture!("openai/error_401_invalid_api_key.http.json"),
    ),
    (
        "openai/error_403_unsupported_region",
        fixture!("openai/error_403_unsupported_region.http.json"),
    ),
    (
        "openai/error_404_model_not_found",
        fixture!("openai/error_404_model_not_found.http.json"),
    ),
    (
        "openai/error_429_insufficient_quota",
        fixture!("openai/error_429_insufficient_quota.http.json"),
    ),
    (
        "openai/error_429_rate_limit_tokens",
        fixture!("openai/error_429_rate_limit_tokens.http.json"),
    ),
    (
        "openai/error_500_server_error",
        fixture!("openai/error_500_server_error.http.json"),
    ),
    (
        "openai/error_503_overloaded",
        fixture!("openai/error_503_overloaded.http.json"),
    ),
    (
        "openai-responses/error_400_invalid_request",
        fixture!("openai-responses/error_400_invalid_request.http.json"),
    ),
    (
        "openai-responses/error_400_model_not_found",
        fixture!("openai-responses/error_400_model_not_found.http.json"),
    ),
    (
        "openai-responses/error_400_previous_response_not_found",
        fixture!("openai-responses/error_400_previous_response_not_found.http.json"),
    ),
    (
        "openai-responses/error_400_reasoning_item_without_following_item",
        fixture!("openai-responses/error_400_reasoning_item_without_following_item.http.json"),
    ),
    (
        "openai-responses/error_429_insufficient_quota",
        fixture!("openai-responses/error_429_insufficient_quota.http.json"),
    ),
    (
        "openai-responses/error_429_rate_limit",
        fixture!("openai-responses/error_429_rate_limit.http.json"),
    ),
    (
        "qwen/error_401_invalid_api_key",
        fixture!("qwen/error_401_invalid_api_key.http.json"),
    ),
    (
        "vertex/anthropic_error_429_quota",
        fixture!("vertex/anthropic_error_429_quota.http.json"),
    ),
    (
        "vertex/error_400_context_length",
        fixture!("vertex/error_400_context_length.http.json"),
    ),
    (
        "vertex/error_400_invalid_argument",
        fixture!("vertex/error_400_invalid_argument.http.json"),
    ),
    (
        "vertex/error_403_permission_denied",
        fixture!("vertex/error_403_permission_denied.http.json"),
    ),
    (
        "vertex/error_429_resource_exhausted",
        fixture!("vertex/error_429_resource_exhausted.http.json"),
    ),
    (
        "vertex/oauth/error_400_invalid_grant",
        fixture!("vertex/oauth/error_400_invalid_grant.http.json"),
    ),
    (
        "deepseek/error_400_missing_reasoning_content_v32",
        fixture!("deepseek/error_400_missing_reasoning_content_v32.http.json"),
    ),
    (
        "deepseek/error_400_reasoning_content_in_input_legacy_r1",
        fixture!("deepseek/error_400_reasoning_content_in_input_legacy_r1.http.json"),
    ),
    (
        "deepseek/error_400_reasoning_content_must_be_passed_back",
        fixture!("deepseek/error_400_reasoning_content_must_be_passed_back.http.json"),
    ),
    (
        "deepseek/error_400_unknown_role_developer",
        fixture!("deepseek/error_400_unknown_role_developer.http.json"),
    ),
    (
        "deepseek/responses_api_error_400",
        fixture!("deepseek/responses_api_error_400.http.json"),
    ),
    (
        "qwen/error_400_context_length",
        fixture!("qwen/error_400_context_length.http.json"),
    ),
    (
        "qwen/error_400_enable_thinking_non_streaming",
        fixture!("qwen/error_400_enable_thinking_non_streaming.http.json"),
    ),
    (
        "qwen/error_401_invalid_api_key_native",
        fixture!("qwen/error_401_invalid_api_key_native.http.json"),
    ),
    (
        "qwen/error_429_throttling_allocation_quota",
        fixture!("qwen/error_429_throttling_allocation_quota.http.json"),
    ),
    (
        "zhipu/error_400_1210_invalid_parameter",
        fixture!("zhipu/error_400_1210_invalid_parameter.http.json"),
    ),
    (
        "zhipu/error_400_1261_context_length",
        fixture!("zhipu/error_400_1261_context_length.http.json"),
    ),
    (
        "zhipu/error_401_1001_missing_token",
        fixture!("zhipu/error_401_1001_missing_token.http.json"),
    ),
    (
        "zhipu/error_429_1113_insufficient_balance",
        fixture!("zhipu/error_429_1113_insufficient_balance.http.json"),
    ),
    (
        "zhipu/error_429_1302_rate_limit",
        fixture!("zhipu/error_429_1302_rate_limit.http.json"),
    ),
    (
        "zhipu/error_429_1305_overloaded",
        fixture!("zhipu/error_429_1305_overloaded.http.json"),
    ),
    (
        "zhipu/error_429_1308_usage_cap",
        fixture!("zhipu/error_429_1308_usage_cap.http.json"),
    ),
    (
        "moonshot/error_400_context_length",
        fixture!("moonshot/error_400_context_length.http.json"),
    ),
    (
        "moonshot/error_401_invalid_authentication",
        fixture!("moonshot/error_401_invalid_authentication.http.json"),
    ),
    (
        "moonshot/error_403_exceeded_current_quota",
        fixture!("moonshot/error_403_exceeded_current_quota.http.json"),
    ),
    (
        "moonshot/error_404_resource_not_found",
        fixture!("moonshot/error_404_resource_not_found.http.json"),
    ),
    (
        "moonshot/error_429_engine_overloaded",
        fixture!("moonshot/error_429_engine_overloaded.http.json"),
    ),
    (
        "moonshot/error_429_rate_limit_rpm",
        fixture!("moonshot/error_429_rate_limit_rpm.http.json"),
    ),
    (
        "volcengine/error_400_missing_parameter",
        fixture!("volcengine/error_400_missing_parameter.http.json"),
    ),
    (
        "volcengine/error_401_authentication_format",
        fixture!("volcengine/error_401_authentication_format.http.json"),
    ),
    (
        "minimax/error_200_base_resp_insufficient_balance",
        fixture!("minimax/error_200_base_resp_insufficient_balance.http.json"),
    ),
    (
        "minimax/error_429_anthropic_endpoint_usage_limit",
        fixture!("minimax/error_429_anthropic_endpoint_usage_limit.http.json"),
    ),
    (
        "minimax/error_500_anthropic_endpoint_1008",
        fixture!("minimax/error_500_anthropic_endpoint_1008.http.json"),
    ),
];

/// A parsed envelope, ready to serve.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
}

fn parse(name: &str, text: &str) -> Envelope {
    let v: Value = serde_json::from_str(text).expect("fixture envelope is JSON");
    let status = v["status"].as_u64().expect("fixture status") as u16;
    // `content-length` is left to hyper: it is the served body's.
    // `transfer-encoding` likewise is the served body's framing; a list value (`vary`) is
    // one comma-separated header.
    let headers = v["headers"]
        .as_object()
        .map(|h| {
            h.iter()
                .filter(|(k, _)| {
                    !k.eq_ignore_ascii_case("content-length")
                        && !k.eq_ignore_ascii_case("transfer-encoding")
                })
                .map(|(k, v)| {
                    let value = match v {
                        Value::Array(items) => items
                            .iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", "),
                        other => other.as_str().unwrap_or_default().to_string(),
                    };
                    (k.clone(), value)
                })
                .collect()
        })
        .unwrap_or_default();
    let body = if let Some(raw) = v.get("body_raw").and_then(Value::as_str) {
        Bytes::from(raw.to_string())
    } else {
        let body = v.get("body").cloned().unwrap_or(Value::Null);
        // The Responses API pretty-prints without a trailing newline, its error in the wire
        // order message, type, param, code (the recorder sorted some of these files' keys).
        // OpenAI, Gemini and Vertex (google.rpc.Status) pretty-print theirs; the others
        // (Bedrock's `{"message"}` included) send compact JSON.
        if name.starts_with("openai-responses/") {
            crate::json::pretty_ascii(&wire_order(body))
        } else if name.starts_with("openai/")
            || name.starts_with("gemini/")
            || name.starts_with("vertex/")
        {
            crate::json::pretty_nl(&body)
        } else {
            Bytes::from(crate::json::compact(&body))
        }
    };
    Envelope {
        status,
        headers,
        body,
    }
}

/// `{"error": {message, type, param, code, …rest}}`.
fn wire_order(mut body: Value) -> Value {
    if let Some(Value::Object(err)) = body.get_mut("error") {
        let mut sorted = serde_json::Map::new();
        for k in ["message", "type", "param", "code"] {
            if let Some(v) = err.remove(k) {
                sorted.insert(k.to_string(), v);
            }
        }
        sorted.append(err);
        *err = sorted;
    }
    body
}

fn all() -> &'static HashMap<&'static str, Envelope> {
    static ALL: OnceLock<HashMap<&'static str, Envelope>> = OnceLock::new();
    ALL.get_or_init(|| {
        ENVELOPES
            .iter()
            .map(|(name, text)| (*name, parse(name, text)))
            .collect()
    })
}

/// Look up an envelope by name: `"openai/error_429_rate_limit_tokens"` (a trailing
/// `.http.json` is accepted too).
pub fn get(name: &str) -> Option<&'static Envelope> {
    let name = name.strip_suffix(".http.json").unwrap_or(name);
    all().get(name)
}

/// Names of every available envelope.
pub fn names() -> Vec<&'static str> {
    ENVELOPES.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn all_parse() {
        for name in super::names() {
            let e = super::get(name).unwrap();
            // MiniMax reports failures as HTTP 200 with `base_resp`.
            let in_band = name.starts_with("minimax/error_200_");
            assert!(e.status >= 400 || in_band, "{name}");
            assert!(!e.body.is_empty(), "{name}");
        }
        assert!(super::get("anthropic/error_529_overloaded.http.json").is_some());
    }
}
