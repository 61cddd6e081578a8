//! Vertex AI error bodies → contract §4 codes (MAPPING §17.4).
//!
//! Vertex answers in two shapes: google.rpc.Status (`{"error":{"code",
//! "message","status"}}`, as the Gemini Developer API, but from the quota
//! layer in front of Claude too, sometimes wrapped in a JSON array), and,
//! for Claude's own model errors, Anthropic's `{"type":"error",…}`. Each is
//! read by that protocol's classifier; only where Vertex means something
//! else does this module decide.

use std::borrow::Cow;

use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::value::RawValue;
use switchyard_protocol::gemini::parse_error;

use crate::adapters::errors::{self, raw_message, Reading};
use crate::adapters::{anthropic, gemini};
use crate::error::{ErrorCode, GatewayError, Source};

pub fn classify(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
) -> GatewayError {
    let body = unwrap_array(body);
    if let Some(google_status) = parse_error(&body).map(|g| g.status) {
        if !google_status.is_empty() {
            return google(status, headers, &body, &google_status, secrets);
        }
    }
    if is_anthropic(&body) {
        return anthropic::errors::classify(status, headers, &body, secrets);
    }
    let reading = Reading {
        message: raw_message(&body),
        ..Reading::default()
    };
    errors::classify(status, headers, reading, secrets)
}

/// The quota layer wraps its Status in an array (`[{"error":{…}}]`): its
/// first element is the error. Anything else is left as it is.
fn unwrap_array(body: &[u8]) -> Cow<'_, [u8]> {
    let trimmed = body.trim_ascii();
    if !trimmed.starts_with(b"[") {
        return Cow::Borrowed(body);
    }
    match serde_json::from_slice::<Vec<&RawValue>>(trimmed) {
        Ok(items) => match items.first() {
            Some(first) => Cow::Owned(first.get().as_bytes().to_vec()),
            None => Cow::Borrowed(body),
        },
        Err(_) => Cow::Borrowed(body),
    }
}

/// Anthropic's envelope: `{"type":"error","error":{…}}`.
fn is_anthropic(body: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<Cow<'a, str>>,
    }
    serde_json::from_slice::<Envelope>(body).is_ok_and(|e| e.kind.as_deref() == Some("error"))
}

/// A google.rpc.Status, read as the Developer API's (context length by
/// its text, RetryInfo, …), then Vertex's differences: a refusal of the
/// gateway's own identity, 401 `UNAUTHENTICATED` (a bad or expired token)
/// or 403 `PERMISSION_DENIED` (the service account lacks an IAM role), is
/// `auth_failed`: every request on these credentials fails alike, so fall
/// back. A 429 `RESOURCE_EXHAUSTED` is a per-minute or shared quota: back
/// off, never set aside.
fn google(
    status: StatusCode,
    headers: &HeaderMap,
    body: &[u8],
    google_status: &str,
    secrets: &[&str],
) -> GatewayError {
    let mut e = gemini::errors::classify(status, headers, body, secrets);
    match google_status {
        "UNAUTHENTICATED" | "PERMISSION_DENIED" => {
            e.code = ErrorCode::AuthFailed;
            e.source = Source::Upstream;
            e.retry_after = None;
            e.quota_exhausted = false;
        }
        "RESOURCE_EXHAUSTED" => e.quota_exhausted = false,
        _ => {}
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `*.http.json` envelope (header values may be lists), status,
    /// headers and body as sent.
    fn envelope(name: &str) -> (StatusCode, HeaderMap, Vec<u8>, serde_json::Value) {
        let path = format!(
            "{}/../../fixtures/providers/vertex/{name}.http.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let env: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut headers = HeaderMap::new();
        for (k, v) in env["headers"].as_object().unwrap() {
            let name = http::HeaderName::from_bytes(k.as_bytes()).unwrap();
            let values = match v {
                serde_json::Value::Array(vs) => vs.clone(),
                v => vec![v.clone()],
            };
            for v in values {
                headers.append(&name, v.as_str().unwrap().parse().unwrap());
            }
        }
        let body = match env.get("body_raw") {
            Some(raw) => raw.as_str().unwrap().as_bytes().to_vec(),
            None => serde_json::to_vec(&env["body"]).unwrap(),
        };
        let status = StatusCode::from_u16(env["status"].as_u64().unwrap() as u16).unwrap();
        (status, headers, body, env)
    }

    /// The fixture's own `error.message`, array-wrapped or not.
    fn message_of(body: &[u8]) -> String {
        let v: serde_json::Value = serde_json::from_slice(body).unwrap();
        let v = if v.is_array() { v[0].clone() } else { v };
        v["error"]["message"].as_str().unwrap().to_owned()
    }

    /// Classify a fixture; its message must come through whole.
    fn fixture(name: &str) -> GatewayError {
        let (status, headers, body, _) = envelope(name);
        let e = classify(status, &headers, &body, &[]);
        assert_eq!(e.message, message_of(&body), "{name}: message kept");
        assert_eq!(e.upstream_status, Some(status.as_u16()));
        e
    }

    #[test]
    fn every_vertex_error_fixture_is_classified_as_mapping_17_4_says() {
        let e = fixture("error_400_context_length");
        assert_eq!(
            (e.code, e.source),
            (ErrorCode::ContextTooLong, Source::Client)
        );

        let e = fixture("error_400_invalid_argument");
        assert_eq!(
            (e.code, e.source),
            (ErrorCode::InvalidRequest, Source::Client)
        );

        // IAM refused the service account: the credentials' problem.
        let e = fixture("error_403_permission_denied");
        assert_eq!(
            (e.code, e.source),
            (ErrorCode::AuthFailed, Source::Upstream)
        );
        assert!(e.fall_back());

        // Shared quota: back off and retry, no hint given, no key set aside.
        let e = fixture("error_429_resource_exhausted");
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert!(!e.quota_exhausted);
        assert_eq!(e.retry_after, None);

        // Claude's quota layer, array-wrapped google.rpc.Status.
        let e = fixture("anthropic_error_429_quota");
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert!(
            !e.quota_exhausted,
            "a per-minute quota: retry, then fall back"
        );
        assert!(e.message.starts_with("Quota exceeded for aiplatform"));
    }

    #[test]
    fn every_fixture_in_the_folder_is_covered() {
        let dir = format!(
            "{}/../../fixtures/providers/vertex",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|f| f.unwrap().file_name().into_string().ok())
            .filter_map(|f| f.strip_suffix(".http.json").map(str::to_owned))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "anthropic_error_429_quota",
                "error_400_context_length",
                "error_400_invalid_argument",
                "error_403_permission_denied",
                "error_429_resource_exhausted",
            ]
        );
        for name in &names {
            fixture(name);
        }
    }

    #[test]
    fn secrets_in_a_message_are_redacted_and_the_rest_kept() {
        let (status, headers, body, _) = envelope("error_403_permission_denied");
        let e = classify(status, &headers, &body, &["test-project-id-1234"]);
        assert!(!e.message.contains("test-project-id-1234"), "{}", e.message);
        assert!(e
            .message
            .starts_with("Permission 'aiplatform.endpoints.predict' denied"));
        assert!(e.message.contains("projects/*****/locations/us-central1"));

        let body = br#"[{"error":{"code":401,"message":"Request had invalid authentication credentials: ya29.c.secret-token-value","status":"UNAUTHENTICATED"}}]"#;
        let e = classify(
            StatusCode::UNAUTHORIZED,
            &HeaderMap::new(),
            body,
            &["ya29.c.secret-token-value"],
        );
        assert_eq!(e.code, ErrorCode::AuthFailed);
        assert_eq!(
            e.message,
            "Request had invalid authentication credentials: *****"
        );
    }

    #[test]
    fn google_statuses_without_fixtures() {
        let status = |code: u16, status: &str, message: &str| {
            let body =
                serde_json::json!({"error": {"code": code, "message": message, "status": status}});
            let body = serde_json::to_vec(&body).unwrap();
            let http = StatusCode::from_u16(code).unwrap();
            classify(http, &HeaderMap::new(), &body, &[]).code
        };
        assert_eq!(
            status(
                404,
                "NOT_FOUND",
                "Publisher Model `x` was not found or your project does not have access to it."
            ),
            ErrorCode::ModelNotFound
        );
        assert_eq!(
            status(400, "FAILED_PRECONDITION", "Project is not allowed."),
            ErrorCode::InvalidRequest
        );
        assert_eq!(
            status(500, "INTERNAL", "Internal error."),
            ErrorCode::UpstreamError
        );
        assert_eq!(
            status(503, "UNAVAILABLE", "Try again."),
            ErrorCode::Overloaded
        );
        assert_eq!(
            status(
                401,
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials."
            ),
            ErrorCode::AuthFailed
        );
    }

    #[test]
    fn anthropic_shaped_bodies_go_to_the_anthropic_classifier() {
        let body =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        let e = classify(
            StatusCode::from_u16(529).unwrap(),
            &HeaderMap::new(),
            body,
            &[],
        );
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::Overloaded, "Overloaded")
        );

        let body = br#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 250000 tokens > 200000 maximum"}}"#;
        let e = classify(StatusCode::BAD_REQUEST, &HeaderMap::new(), body, &[]);
        assert_eq!(e.code, ErrorCode::ContextTooLong);

        // Wrapped in an array like the quota layer's.
        let body = br#"[{"type":"error","error":{"type":"permission_error","message":"no"}}]"#;
        let e = classify(StatusCode::FORBIDDEN, &HeaderMap::new(), body, &[]);
        assert_eq!(e.code, ErrorCode::Forbidden);
    }

    #[test]
    fn anything_else_goes_by_status() {
        let e = classify(
            StatusCode::BAD_GATEWAY,
            &HeaderMap::new(),
            b"<html>bad gateway</html>",
            &[],
        );
        assert_eq!(
            (e.code, e.message.as_str()),
            (ErrorCode::UpstreamError, "<html>bad gateway</html>")
        );
        let e = classify(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new(), b"[]", &[]);
        assert_eq!((e.code, e.message.as_str()), (ErrorCode::RateLimited, "[]"));
        let e = classify(StatusCode::NOT_FOUND, &HeaderMap::new(), br#"[1, {"#, &[]);
        assert_eq!(e.code, ErrorCode::ModelNotFound);
        let e = classify(StatusCode::SERVICE_UNAVAILABLE, &HeaderMap::new(), b"", &[]);
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                ErrorCode::Overloaded,
                "upstream answered 503 Service Unavailable"
            )
        );
    }
}
