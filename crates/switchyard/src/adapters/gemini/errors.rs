//! Gemini `google.rpc.Status` error bodies → contract §4 codes.

use http::{HeaderMap, StatusCode};
use switchyard_protocol::gemini::{parse_error, GeminiError};

use crate::adapters::errors::{self, raw_message, says_context_length, Reading};
use crate::error::{ErrorCode, GatewayError};

pub fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
) -> GatewayError {
    let reading = match parse_error(body) {
        Some(g) => read(g),
        None => Reading {
            message: raw_message(body),
            ..Reading::default()
        },
    };
    errors::classify(status, headers, reading, secrets)
}

fn read(g: GeminiError) -> Reading {
    let lower = g.message.to_ascii_lowercase();
    Reading {
        context_length: says_context_length(&lower),
        // Google answers a bad key with 400 INVALID_ARGUMENT, reason API_KEY_INVALID.
        bad_key: g.reason.as_deref() == Some("API_KEY_INVALID"),
        retry_after: g.retry_delay,
        message: g.message,
        ..Reading::default()
    }
}

/// An error object inside a stream.
pub fn in_band(g: GeminiError) -> GatewayError {
    let code = match g.status.as_str() {
        "RESOURCE_EXHAUSTED" => ErrorCode::RateLimited,
        "UNAVAILABLE" => ErrorCode::Overloaded,
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" => ErrorCode::InvalidRequest,
        "PERMISSION_DENIED" | "UNAUTHENTICATED" => ErrorCode::AuthFailed,
        "DEADLINE_EXCEEDED" => ErrorCode::Timeout,
        _ => ErrorCode::UpstreamError,
    };
    errors::in_band(code, &g.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> GatewayError {
        let (status, headers, body) = errors::fixture(name);
        classify(status, &headers, &body, &[])
    }

    #[test]
    fn gemini_fixtures() {
        let e = fixture("gemini/error_400_api_key_invalid");
        assert_eq!(e.code, ErrorCode::AuthFailed);
        assert!(e.fall_back());
        assert_eq!(
            fixture("gemini/error_400_context_length").code,
            ErrorCode::ContextTooLong
        );
        assert_eq!(
            fixture("gemini/error_400_invalid_argument").code,
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            fixture("gemini/error_403_missing_api_key").code,
            ErrorCode::AuthFailed
        );
        assert_eq!(
            fixture("gemini/error_403_service_disabled").code,
            ErrorCode::AuthFailed
        );
        assert_eq!(
            fixture("gemini/error_404_model_not_found").code,
            ErrorCode::ModelNotFound
        );
        let e = fixture("gemini/error_429_resource_exhausted");
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert!(e.retry_after.is_some(), "RetryInfo honoured");
        assert_eq!(
            fixture("gemini/error_500_internal").code,
            ErrorCode::UpstreamError
        );
        assert_eq!(
            fixture("gemini/error_503_unavailable").code,
            ErrorCode::Overloaded
        );
    }
}
