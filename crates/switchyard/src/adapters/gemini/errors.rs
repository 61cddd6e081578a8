//! Gemini `google.rpc.Status` error bodies → contract §4 codes. A 429 for
//! a per-day quota (a `QuotaFailure` violation whose `quotaId` or
//! `quotaMetric` says so, e.g. `GenerateRequestsPerDayPerProjectPerModel`)
//! rests until Google's daily reset, midnight US Pacific time; a
//! per-minute one only for its `RetryInfo`.

use std::time::SystemTime;

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
    classify_at(status, headers, body, secrets, SystemTime::now())
}

/// [`classify`] with the wall clock a daily reset is counted from.
pub fn classify_at(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
    now: SystemTime,
) -> GatewayError {
    let mut reading = match parse_error(body) {
        Some(g) => read(g),
        None => Reading {
            message: raw_message(body),
            ..Reading::default()
        },
    };
    if status == StatusCode::TOO_MANY_REQUESTS && per_day(body) {
        reading.rests_for = Some(crate::adapters::resets::until_pacific_midnight(now));
    }
    errors::classify(status, headers, reading, secrets)
}

/// Does a `google.rpc.QuotaFailure` in the body name a per-day quota?
/// (`quotaId: GenerateRequestsPerDayPerProjectPerModel-FreeTier`, or a
/// `quotaMetric` ending in `…_per_day`.)
pub fn per_day(body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(body) else {
        return false;
    };
    // The Developer API sends the status as it is; Vertex may wrap it in
    // a one-element array.
    let status = v.get(0).unwrap_or(&v);
    let details = status["error"]["details"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    let daily = |s: &str| {
        let lower = s.to_ascii_lowercase();
        lower.contains("perday") || lower.contains("per_day") || lower.contains("per day")
    };
    details
        .iter()
        .filter_map(|d| d["violations"].as_array())
        .flatten()
        .any(|violation| {
            ["quotaId", "quotaMetric"]
                .iter()
                .filter_map(|k| violation[*k].as_str())
                .any(daily)
        })
}

fn read(g: GeminiError) -> Reading {
    let lower = g.message.to_ascii_lowercase();
    let reason = g.reason.as_deref().unwrap_or_default();
    Reading {
        context_length: says_context_length(&lower),
        // Google answers a bad key with 400 INVALID_ARGUMENT, reason
        // API_KEY_INVALID; a request with no key at all gets 403 "…
        // unregistered callers …".
        bad_key: key_reason(reason)
            || (g.status == "PERMISSION_DENIED" && lower.contains("unregistered callers")),
        quota: reason == "BILLING_DISABLED",
        retry_after: g.retry_delay,
        message: g.message,
        ..Reading::default()
    }
}

/// `ErrorInfo` reasons about the key or the project it belongs to (every
/// request with this key fails the same way, whatever it asks), as opposed
/// to a 403 about one request (`IAM_PERMISSION_DENIED` on a model, …).
fn key_reason(reason: &str) -> bool {
    // API_KEY_INVALID, API_KEY_SERVICE_BLOCKED, API_KEY_IP_ADDRESS_BLOCKED, …
    reason.starts_with("API_KEY_")
        || matches!(
            reason,
            "SERVICE_DISABLED" | "CONSUMER_INVALID" | "CONSUMER_SUSPENDED"
        )
}

/// An error object inside a stream.
pub fn in_band(g: GeminiError) -> GatewayError {
    let code = match g.status.as_str() {
        "RESOURCE_EXHAUSTED" => ErrorCode::RateLimited,
        "UNAVAILABLE" => ErrorCode::Overloaded,
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" => ErrorCode::InvalidRequest,
        "UNAUTHENTICATED" => ErrorCode::AuthFailed,
        "PERMISSION_DENIED" => ErrorCode::Forbidden,
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
        // The key's project has the API off: every request with this key
        // fails alike, so it is the key's problem.
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

    /// A per-day quota rests until the next midnight US Pacific; the
    /// recorded per-minute one (`…PerModelPerMinute-FreeTier`) only for its
    /// `RetryInfo` (26 s).
    #[test]
    fn a_per_day_quota_rests_until_the_pacific_midnight_a_per_minute_one_does_not() {
        use std::time::{Duration, UNIX_EPOCH};
        // 2026-07-15 20:00 UTC = 13:00 PDT: eleven hours to the reset.
        let now = UNIX_EPOCH + Duration::from_secs(1_784_145_600);
        let (status, headers, body) = errors::fixture("gemini/error_429_resource_exhausted");
        let minute = classify_at(status, &headers, &body, &[], now);
        assert_eq!(minute.code, ErrorCode::RateLimited);
        assert_eq!(minute.rests_for, None);
        assert_eq!(minute.retry_after, Some(Duration::from_secs(26)));
        let text = String::from_utf8(body).unwrap().replace(
            "GenerateContentInputTokensPerModelPerMinute-FreeTier",
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        );
        let day = classify_at(status, &headers, text.as_bytes(), &[], now);
        assert_eq!(day.code, ErrorCode::RateLimited);
        assert!(
            !day.quota_exhausted,
            "the key stays: other models have their own quota"
        );
        assert_eq!(day.rests_for, Some(Duration::from_secs(11 * 3600)));
        assert_eq!(
            day.retry_after, day.rests_for,
            "the client is told when it resets"
        );
        // Named by the metric alone, and inside Vertex's array.
        let metric = br#"[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[{"quotaMetric":"generativelanguage.googleapis.com/generate_requests_per_day"}]}]}}]"#;
        assert!(per_day(metric));
        for other in [
            &b"not json"[..],
            b"{}",
            br#"{"error":{"details":[{"violations":[{"quotaId":7}]}]}}"#,
        ] {
            assert!(!per_day(other));
        }
        // Not a 429: no rest.
        let e = classify_at(StatusCode::FORBIDDEN, &headers, text.as_bytes(), &[], now);
        assert_eq!(e.rests_for, None);
    }

    /// A 403 about one request (a model this key's project may not use)
    /// is `forbidden`: no key is set aside for it.
    #[test]
    fn a_permission_refusal_of_one_request_is_not_about_the_key() {
        let body = br#"{"error":{"code":403,"message":"Permission denied on resource models/gemini-2.5-pro (or it may not exist).","status":"PERMISSION_DENIED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"IAM_PERMISSION_DENIED","domain":"googleapis.com"}]}}"#;
        let e = classify(StatusCode::FORBIDDEN, &HeaderMap::new(), body, &[]);
        assert_eq!(
            (e.code, e.source),
            (ErrorCode::Forbidden, crate::error::Source::Upstream)
        );
        let denied = GeminiError {
            code: 403,
            status: "PERMISSION_DENIED".into(),
            message: "no".into(),
            retry_delay: None,
            reason: None,
        };
        assert_eq!(in_band(denied).code, ErrorCode::Forbidden);
    }
}
