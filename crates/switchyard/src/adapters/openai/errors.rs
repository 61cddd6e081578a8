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
    // An hour at most, as a Retry-After header is read: a wait past any
    // clock ("try again in 18446744073709551615s") must not reach
    // `Instant::now() + wait`, which panics.
    std::time::Duration::try_from_secs_f64(secs.min(3600.0)).ok()
}

pub fn read(body: &[u8]) -> Reading {
    let Ok(b) = serde_json::from_slice::<WireErrorBody>(body) else {
        return Reading {
            message: raw_message(body),
            ..Reading::default()
        };
    };
    let message = b.error.message.as_deref().unwrap_or_default().to_owned();
    let code = b.error.code_str().unwrap_or_default();
    let kind = b.error.kind.as_deref().unwrap_or_default();
    let lower = message.to_ascii_lowercase();
    Reading {
        // OpenAI says `context_length_exceeded`; DeepSeek and vLLM only say it in words.
        context_length: code == "context_length_exceeded" || says_context_length(&lower),
        content_filter: code == "content_filter",
        // Moonshot: `exceeded_current_quota_error`, with a 403.
        quota: code == "insufficient_quota"
            || kind == "insufficient_quota"
            || kind == "exceeded_current_quota_error",
        bad_key: code == "invalid_api_key",
        not_key: about_permissions(&lower),
        message,
        ..Reading::default()
    }
}

/// OpenAI answers a restricted key that lacks a scope with a 401 "You have
/// insufficient permissions for this operation. Missing scopes: …": the key
/// is good, this kind of request is not allowed with it.
fn about_permissions(lower: &str) -> bool {
    lower.contains("insufficient permissions") || lower.contains("missing scopes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{ErrorCode, Source};

    /// Serve a fixture envelope through `classify`.
    fn fixture(name: &str) -> GatewayError {
        let (status, headers, body) = errors::fixture(name);
        classify(status, &headers, &body, &[])
    }

    #[test]
    fn a_wait_past_any_clock_is_an_hour() {
        let d = try_again_in("Rate limit reached. Please try again in 18446744073709551615s.");
        assert_eq!(d, Some(std::time::Duration::from_secs(3600)));
        assert_eq!(
            try_again_in("Please try again in 250ms."),
            Some(std::time::Duration::from_millis(250))
        );
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
        // A refusal of where the request came from, not of the key.
        let e = fixture("openai/error_403_unsupported_region");
        assert_eq!((e.code, e.source), (ErrorCode::Forbidden, Source::Upstream));
        assert!(e.fall_back(), "another deployment may serve it");
        assert!(!crate::registry::circuit::counts_as_failure(&e));
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
        assert_eq!(
            fixture("moonshot/error_401_invalid_authentication").code,
            ErrorCode::AuthFailed
        );
        // Moonshot says a spent account with a 403: the key is spent, not bad.
        let e = fixture("moonshot/error_403_exceeded_current_quota");
        assert_eq!((e.code, e.quota_exhausted), (ErrorCode::RateLimited, true));
    }

    /// Only an answer about the key itself is `auth_failed` (what sets a
    /// key aside); a 401/403 about what one request asked for is
    /// `forbidden`, for that request alone.
    #[test]
    fn refusals_of_one_request_are_not_about_the_key() {
        let json = |status: u16, body: &str| {
            let status = StatusCode::from_u16(status).unwrap();
            classify(status, &HeaderMap::new(), body.as_bytes(), &[])
        };
        // A restricted key without the scope this request needs.
        let e = json(
            401,
            r#"{"error":{"message":"You have insufficient permissions for this operation. Missing scopes: model.request. Check that you have the correct role in your organization (Reader, Writer, Owner) and project (Member, Owner), and if you're using a restricted API key, that it has the necessary scopes.","type":"invalid_request_error","param":null,"code":null}}"#,
        );
        assert_eq!((e.code, e.source), (ErrorCode::Forbidden, Source::Upstream));
        // A model the project may not use.
        let e = json(
            403,
            r#"{"error":{"message":"Project `proj_abc` does not have access to model `gpt-4o`","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#,
        );
        assert_eq!(e.code, ErrorCode::Forbidden);
        // Any other 401 is about the key, and so is `invalid_api_key` at any status.
        assert_eq!(json(401, "<html>401</html>").code, ErrorCode::AuthFailed);
        let e = json(
            403,
            r#"{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        );
        assert_eq!(
            (e.code, e.source),
            (ErrorCode::AuthFailed, Source::Upstream)
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
