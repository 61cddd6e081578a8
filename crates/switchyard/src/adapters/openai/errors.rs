//! OpenAI-protocol error bodies (OpenAI, Azure, DeepSeek, Qwen, vLLM…) →
//! contract §4 codes. Tested against `fixtures/providers/*/error_*.http.json`.

use http::{HeaderMap, StatusCode};
use switchyard_protocol::openai::WireErrorBody;

use crate::adapters::retry_after;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::observe::redact::redact;

/// Classify a non-2xx upstream answer. `secrets` are redacted from the message.
pub fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
) -> GatewayError {
    let parsed: Option<WireErrorBody> = serde_json::from_slice(body).ok();
    let (message, code, kind) = match &parsed {
        Some(b) => (
            b.error.message.as_deref().unwrap_or_default().to_owned(),
            b.error.code_str().unwrap_or_default(),
            b.error.kind.as_deref().unwrap_or_default().to_owned(),
        ),
        None => (
            String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
            String::new(),
            String::new(),
        ),
    };
    let lower = message.to_ascii_lowercase();
    let (code_out, source) = match status.as_u16() {
        400 | 413 | 422 if is_context_length(&code, &lower) => {
            (ErrorCode::ContextTooLong, Source::Client)
        }
        400 if code == "content_filter" => (ErrorCode::ContentFiltered, Source::Client),
        401 | 403 => (ErrorCode::AuthFailed, Source::Upstream),
        402 => (ErrorCode::RateLimited, Source::Upstream),
        404 => (ErrorCode::ModelNotFound, Source::Upstream),
        408 => (ErrorCode::Timeout, Source::Upstream),
        413 => (ErrorCode::PayloadTooLarge, Source::Client),
        429 => (ErrorCode::RateLimited, Source::Upstream),
        503 | 529 => (ErrorCode::Overloaded, Source::Upstream),
        500..=599 => (ErrorCode::UpstreamError, Source::Upstream),
        _ => (ErrorCode::InvalidRequest, Source::Client),
    };
    let quota =
        status.as_u16() == 402 || code == "insufficient_quota" || kind == "insufficient_quota";
    let text = if message.is_empty() {
        format!("upstream answered {status}")
    } else {
        message
    };
    let mut e =
        GatewayError::new(code_out, source, redact(&text, secrets)).with_status(status.as_u16());
    e.quota_exhausted = quota;
    if matches!(code_out, ErrorCode::RateLimited | ErrorCode::Overloaded) && !quota {
        e.retry_after = retry_after::from_headers(headers);
    }
    e
}

/// OpenAI says `context_length_exceeded`; DeepSeek and vLLM only say it in words.
fn is_context_length(code: &str, lower_message: &str) -> bool {
    code == "context_length_exceeded"
        || lower_message.contains("maximum context length")
        || lower_message.contains("context window")
        || lower_message.contains("context length")
        || lower_message.contains("prompt is too long")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serve a fixture envelope through `classify`.
    fn fixture(name: &str) -> GatewayError {
        let path = format!(
            "{}/../../fixtures/providers/{name}.http.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let env: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut headers = HeaderMap::new();
        for (k, v) in env["headers"].as_object().unwrap() {
            headers.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.as_str().unwrap().parse().unwrap(),
            );
        }
        let body = match env.get("body_raw") {
            Some(raw) => raw.as_str().unwrap().as_bytes().to_vec(),
            None => serde_json::to_vec(&env["body"]).unwrap(),
        };
        let status = StatusCode::from_u16(env["status"].as_u64().unwrap() as u16).unwrap();
        classify(status, &headers, &body, &[])
    }

    #[test]
    fn openai_fixtures() {
        assert_eq!(
            fixture("openai/error_400_context_length").code,
            ErrorCode::ContextTooLong
        );
        assert_eq!(
            fixture("openai/error_400_invalid_request").code,
            ErrorCode::InvalidRequest
        );
        let e = fixture("openai/error_401_invalid_api_key");
        assert_eq!(e.code, ErrorCode::AuthFailed);
        assert!(e.fall_back());
        assert!(!e.message.contains("sk-"), "key leaked: {}", e.message);
        assert_eq!(
            fixture("openai/error_403_unsupported_region").code,
            ErrorCode::AuthFailed
        );
        assert_eq!(
            fixture("openai/error_404_model_not_found").code,
            ErrorCode::ModelNotFound
        );
        let e = fixture("openai/error_429_insufficient_quota");
        assert_eq!((e.code, e.quota_exhausted), (ErrorCode::RateLimited, true));
        let e = fixture("openai/error_429_rate_limit_tokens");
        assert_eq!((e.code, e.quota_exhausted), (ErrorCode::RateLimited, false));
        assert_eq!(e.retry_after, Some(std::time::Duration::from_secs(1)));
        assert!(e.message.starts_with("Rate limit reached"));
        assert_eq!(
            fixture("openai/error_500_server_error").code,
            ErrorCode::UpstreamError
        );
        assert_eq!(
            fixture("openai/error_503_overloaded").code,
            ErrorCode::Overloaded
        );
    }

    #[test]
    fn compatible_provider_fixtures() {
        assert_eq!(
            fixture("deepseek/error_400_context_length").code,
            ErrorCode::ContextTooLong
        );
        assert_eq!(
            fixture("deepseek/error_401_authentication").code,
            ErrorCode::AuthFailed
        );
        let e = fixture("deepseek/error_402_insufficient_balance");
        assert_eq!((e.code, e.quota_exhausted), (ErrorCode::RateLimited, true));
        assert_eq!(
            fixture("deepseek/error_429_rate_limit").code,
            ErrorCode::RateLimited
        );
        assert_eq!(
            fixture("deepseek/error_503_server_overloaded").code,
            ErrorCode::Overloaded
        );
        assert_eq!(
            fixture("azure/error_400_content_filter").code,
            ErrorCode::ContentFiltered
        );
        assert_eq!(
            fixture("azure/error_400_context_length").code,
            ErrorCode::ContextTooLong
        );
        assert_eq!(
            fixture("azure/error_401_access_denied").code,
            ErrorCode::AuthFailed
        );
        assert_eq!(
            fixture("azure/error_404_deployment_not_found").code,
            ErrorCode::ModelNotFound
        );
        let e = fixture("azure/error_429_rate_limit");
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert!(e.retry_after.is_some());
        assert_eq!(
            fixture("qwen/error_401_invalid_api_key").code,
            ErrorCode::AuthFailed
        );
    }

    #[test]
    fn non_json_error_bodies_are_kept_short() {
        let body = vec![b'x'; 10_000];
        let e = classify(StatusCode::BAD_GATEWAY, &HeaderMap::new(), &body, &[]);
        assert_eq!(e.code, ErrorCode::UpstreamError);
        assert!(e.message.len() <= 512);
    }
}
