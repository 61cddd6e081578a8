//! Bedrock's failures → contract §4 codes (MAPPING §16.7). The exception's
//! name is only in the `x-amzn-errortype` header (`Name:namespace`), the
//! body is `{"message": …}`; inside a stream the same names arrive as
//! `exception` frames (camelCase) after a 200. The status alone misleads:
//! a 429 may be a model not ready yet (retry, it is no quota), a 400 a
//! daily token quota, and context overflow is a 400 told only by its text.

use http::{HeaderMap, StatusCode};
use switchyard_protocol::bedrock::{self as br, ExceptionKind};

use crate::adapters::errors::{self, raw_message, says_context_length, Reading};
use crate::error::{ErrorCode, GatewayError};

/// The exception name of an answer: `x-amzn-errortype` up to its first
/// `:`, else the body's `__type` (never seen from Bedrock, accepted).
fn exception_name(headers: &HeaderMap, body: &serde_json::Value) -> String {
    let header = headers
        .get("x-amzn-errortype")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(':').next().unwrap_or(v).to_owned());
    header
        .or_else(|| {
            body.get("__type")
                .and_then(|t| t.as_str())
                .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned())
        })
        .unwrap_or_default()
}

fn message_of(body: &serde_json::Value, raw: &[u8]) -> String {
    ["message", "Message"]
        .iter()
        .find_map(|k| body.get(*k).and_then(|m| m.as_str()))
        .map_or_else(|| raw_message(raw), str::to_owned)
}

/// Wording Bedrock uses for a prompt over the model's window (its own,
/// and Anthropic's passed through Converse).
fn too_long(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("input is too long") || says_context_length(&lower)
}

pub fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
) -> GatewayError {
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let name = exception_name(headers, &json).to_ascii_lowercase();
    let message = message_of(&json, body);
    // The status the exception stands for in the shared table, where the
    // wire's status would read wrong.
    let (as_status, quota, bad_key) = match name.as_str() {
        // Transient (the SDKs retry it), not a rate limit of this account.
        "modelnotreadyexception" => (503, false, false),
        // A daily token quota, sent as a 400.
        "servicequotaexceededexception" => (429, true, false),
        "modeltimeoutexception" => (408, false, false),
        "modelerrorexception" | "internalserverexception" => (500, false, false),
        // The credentials themselves are refused.
        "unrecognizedclientexception"
        | "invalidsignatureexception"
        | "expiredtokenexception"
        | "incompletesignatureexception"
        | "missingauthenticationtokenexception" => (401, false, true),
        _ => (status.as_u16(), false, false),
    };
    let reading = Reading {
        context_length: too_long(&message),
        quota,
        bad_key,
        message,
        ..Reading::default()
    };
    let shown = StatusCode::from_u16(as_status).unwrap_or(status);
    errors::classify(shown, headers, reading, secrets).with_status(status.as_u16())
}

/// An `exception` frame inside a stream (the HTTP status was 200).
pub fn in_stream(name: &str, payload: &[u8]) -> GatewayError {
    from_exception(&br::exception(name, payload))
}

/// A stream exception, read by its kind (a model's own failure by the
/// status it reported, when it did).
pub fn from_exception(e: &br::StreamException) -> GatewayError {
    let code = match &e.kind {
        ExceptionKind::Throttling => ErrorCode::RateLimited,
        ExceptionKind::ServiceUnavailable => ErrorCode::Overloaded,
        ExceptionKind::Validation { too_long: true } => ErrorCode::ContextTooLong,
        ExceptionKind::Validation { too_long: false } => ErrorCode::InvalidRequest,
        ExceptionKind::ModelTimeout => ErrorCode::Timeout,
        ExceptionKind::ModelStreamError {
            original_status: Some(429),
        } => ErrorCode::RateLimited,
        ExceptionKind::ModelStreamError {
            original_status: Some(503 | 529),
        } => ErrorCode::Overloaded,
        ExceptionKind::Other(name) if name.eq_ignore_ascii_case("modelNotReadyException") => {
            ErrorCode::Overloaded
        }
        _ => ErrorCode::UpstreamError,
    };
    let message = if e.message.is_empty() {
        format!("upstream stream failed: {:?}", e.kind)
    } else {
        e.message.clone()
    };
    errors::in_band(code, &message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> GatewayError {
        let (status, headers, body) = errors::fixture(&format!("bedrock/{name}"));
        classify(status, &headers, &body, &[])
    }

    /// Every recorded Bedrock error, read as MAPPING §16.7 says.
    #[test]
    fn bedrock_error_fixtures() {
        let cases = [
            (
                "error_400_validation_input_too_long",
                ErrorCode::ContextTooLong,
            ),
            (
                "error_400_validation_prompt_too_long_anthropic",
                ErrorCode::ContextTooLong,
            ),
            (
                "error_400_validation_invalid_model",
                ErrorCode::InvalidRequest,
            ),
            (
                "error_400_validation_on_demand_not_supported",
                ErrorCode::InvalidRequest,
            ),
            (
                "error_400_validation_anthropic_body",
                ErrorCode::InvalidRequest,
            ),
            (
                "error_400_converse_stream_before_stream",
                ErrorCode::InvalidRequest,
            ),
            // Model access refused for this request: fall back, no key to blame.
            ("error_403_access_denied", ErrorCode::Forbidden),
            ("error_404_resource_not_found_eol", ErrorCode::ModelNotFound),
            ("error_429_throttling", ErrorCode::RateLimited),
            ("error_429_model_not_ready", ErrorCode::Overloaded),
            ("error_503_service_unavailable", ErrorCode::Overloaded),
            ("error_503_too_many_connections", ErrorCode::Overloaded),
        ];
        for (name, code) in cases {
            let e = fixture(name);
            assert_eq!(e.code, code, "{name}: {e:?}");
            assert!(!e.message.is_empty(), "{name}");
            assert!(!e.quota_exhausted, "{name}");
        }
        // Throttling carries the recorded text and no quota flag.
        let e = fixture("error_429_throttling");
        assert_eq!(
            e.message,
            "Too many tokens, please wait before trying again."
        );
    }

    #[test]
    fn names_beat_statuses() {
        let h = |name: &str| {
            let mut h = HeaderMap::new();
            h.insert(
                "x-amzn-ErrorType",
                format!("{name}:http://internal.amazon.com/coral/com.amazon.bedrock/")
                    .parse()
                    .unwrap(),
            );
            h
        };
        let body = br#"{"message":"Too many tokens per day"}"#;
        let e = classify(
            StatusCode::BAD_REQUEST,
            &h("ServiceQuotaExceededException"),
            body,
            &[],
        );
        assert_eq!((e.code, e.quota_exhausted), (ErrorCode::RateLimited, true));
        let e = classify(
            StatusCode::FORBIDDEN,
            &h("InvalidSignatureException"),
            b"{}",
            &[],
        );
        assert_eq!(e.code, ErrorCode::AuthFailed);
        let e = classify(
            StatusCode::from_u16(424).unwrap(),
            &h("ModelErrorException"),
            b"{}",
            &[],
        );
        assert_eq!(e.code, ErrorCode::UpstreamError);
        let e = classify(
            StatusCode::REQUEST_TIMEOUT,
            &h("ModelTimeoutException"),
            b"{}",
            &[],
        );
        assert_eq!(e.code, ErrorCode::Timeout);
        // The status is the wire's, whatever the table read.
        assert_eq!(e.upstream_status, Some(408));
    }

    #[test]
    fn stream_exceptions_by_name() {
        let cases = [
            (
                "throttlingException",
                "{\"message\":\"Too many tokens\"}",
                ErrorCode::RateLimited,
            ),
            (
                "serviceUnavailableException",
                "{\"message\":\"x\"}",
                ErrorCode::Overloaded,
            ),
            (
                "validationException",
                "{\"message\":\"Input is too long for requested model.\"}",
                ErrorCode::ContextTooLong,
            ),
            (
                "validationException",
                "{\"message\":\"bad\"}",
                ErrorCode::InvalidRequest,
            ),
            (
                "modelStreamErrorException",
                "{\"message\":\"x\"}",
                ErrorCode::UpstreamError,
            ),
            (
                "internalServerException",
                "not json",
                ErrorCode::UpstreamError,
            ),
        ];
        for (name, payload, code) in cases {
            assert_eq!(in_stream(name, payload.as_bytes()).code, code, "{name}");
        }
    }
}
