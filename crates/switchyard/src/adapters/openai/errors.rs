//! OpenAI-protocol error bodies (OpenAI, Azure, DeepSeek, Qwen, vLLM…) →
//! contract §4 codes. Tested against `fixtures/providers/*/error_*.http.json`.

use http::{HeaderMap, StatusCode};
use switchyard_protocol::openai::WireErrorBody;

use crate::adapters::errors::{self, raw_message, says_context_length, Reading};
use crate::error::GatewayError;

/// Classify a non-2xx upstream answer. `secrets` are redacted from the message.
pub fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
) -> GatewayError {
    errors::classify(status, headers, read(body), secrets)
}

/// A failure a Responses upstream reports in its answer or stream
/// (`response.failed`, `error`), by its code (MAPPING §14.5).
pub fn responses_failure(e: &switchyard_protocol::responses::UpstreamError) -> GatewayError {
    use crate::error::ErrorCode;
    let message = crate::observe::redact::redact(&e.message, &[]);
    let mut err = match e.code.as_str() {
        "rate_limit_exceeded" => GatewayError::upstream(ErrorCode::RateLimited, message),
        "insufficient_quota" => {
            let mut g = GatewayError::upstream(ErrorCode::RateLimited, message);
            g.quota_exhausted = true;
            g
        }
        "context_length_exceeded" => GatewayError::upstream(ErrorCode::ContextTooLong, message),
        "invalid_prompt" => GatewayError::upstream(ErrorCode::ContentFiltered, message),
        _ => GatewayError::upstream(ErrorCode::UpstreamError, message),
    };
    if err.code == ErrorCode::RateLimited {
        err.retry_after = try_again_in(&e.message);
    }
    err
}

/// "Please try again in 1.5s" / "in 300ms" → the delay.
fn try_again_in(message: &str) -> Option<std::time::Duration> {
    let rest = &message[message.find("try again in ")? + "try again in ".len()..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let n: f64 = rest[..end].parse().ok()?;
    let secs = if rest[end..].starts_with("ms") {
        n / 1000.0
    } else {
        n
    };
    std::time::Duration::try_from_secs_f64(secs).ok()
}

fn read(body: &[u8]) -> Reading {
    let Ok(b) = serde_json::from_slice::<WireErrorBody>(body) else {
        return Reading {
            message: raw_message(body),
            ..Reading::default()
        };
    };
    let message = b.error.message.as_deref().unwrap_or_default().to_owned();
    let code = b.error.code_str().unwrap_or_default();
    let kind = b.error.kind.as_deref().unwrap_or_default();
    Reading {
        // OpenAI says `context_length_exceeded`; DeepSeek and vLLM only say it in words.
        context_length: code == "context_length_exceeded"
            || says_context_length(&message.to_ascii_lowercase()),
        content_filter: code == "content_filter",
        quota: code == "insufficient_quota" || kind == "insufficient_quota",
        message,
        ..Reading::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    /// Serve a fixture envelope through `classify`.
    fn fixture(name: &str) -> GatewayError {
        let (status, headers, body) = errors::fixture(name);
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
