//! Anthropic error bodies (`{"type":"error","error":{"type","message"}}`) and
//! in-band stream errors → contract §4 codes.

use http::{HeaderMap, StatusCode};
use switchyard_protocol::anthropic::{parse_error, StreamError};

use crate::adapters::errors::{self, raw_message, says_context_length, Reading};
use crate::error::{ErrorCode, GatewayError};

pub fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
) -> GatewayError {
    let reading = match parse_error(body) {
        Some((kind, message)) => {
            let lower = message.to_ascii_lowercase();
            Reading {
                context_length: says_context_length(&lower),
                quota: lower.contains("credit balance is too low"),
                // `permission_error` (403) is about what was asked for (a
                // model the key may not use), not the key.
                bad_key: kind == "authentication_error",
                message,
                ..Reading::default()
            }
        }
        None => Reading {
            message: raw_message(body),
            ..Reading::default()
        },
    };
    errors::classify(status, headers, reading, secrets)
}

/// `event: error` after the stream started (HTTP status was 200).
pub fn in_band(e: &StreamError) -> GatewayError {
    let code = match e.kind.as_str() {
        "overloaded_error" => ErrorCode::Overloaded,
        "rate_limit_error" => ErrorCode::RateLimited,
        "invalid_request_error" => ErrorCode::InvalidRequest,
        "authentication_error" => ErrorCode::AuthFailed,
        "permission_error" => ErrorCode::Forbidden,
        "not_found_error" => ErrorCode::ModelNotFound,
        "request_too_large" => ErrorCode::PayloadTooLarge,
        _ => ErrorCode::UpstreamError,
    };
    errors::in_band(code, &e.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> GatewayError {
        let (status, headers, body) = errors::fixture(name);
        classify(status, &headers, &body, &[])
    }

    #[test]
    fn anthropic_fixtures() {
        assert_eq!(
            fixture("anthropic/error_400_invalid_request").code,
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            fixture("anthropic/error_400_max_tokens_too_large").code,
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            fixture("anthropic/error_400_prompt_too_long").code,
            ErrorCode::ContextTooLong
        );
        assert_eq!(
            fixture("anthropic/error_401_authentication").code,
            ErrorCode::AuthFailed
        );
        // A resource this key may not use: that request fails, the key stays.
        let e = fixture("anthropic/error_403_permission");
        assert_eq!(
            (e.code, e.source),
            (ErrorCode::Forbidden, crate::error::Source::Upstream)
        );
        assert!(e.fall_back());
        assert_eq!(
            fixture("anthropic/error_404_model_not_found").code,
            ErrorCode::ModelNotFound
        );
        assert_eq!(
            fixture("anthropic/error_413_request_too_large").code,
            ErrorCode::PayloadTooLarge
        );
        let e = fixture("anthropic/error_429_rate_limit");
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert!(e.retry_after.is_some(), "retry-after honoured");
        assert_eq!(
            fixture("anthropic/error_500_api_error").code,
            ErrorCode::UpstreamError
        );
        let e = fixture("anthropic/error_529_overloaded");
        assert_eq!(
            (e.code, e.code.status().as_u16()),
            (ErrorCode::Overloaded, 503)
        );
    }

    #[test]
    fn in_band_kinds() {
        let e = in_band(&StreamError {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
        });
        assert_eq!(e.code, ErrorCode::Overloaded);
        let e = in_band(&StreamError {
            kind: "permission_error".into(),
            message: "no".into(),
        });
        assert_eq!(e.code, ErrorCode::Forbidden);
        let e = in_band(&StreamError {
            kind: "authentication_error".into(),
            message: "invalid x-api-key".into(),
        });
        assert_eq!(e.code, ErrorCode::AuthFailed);
    }
}
