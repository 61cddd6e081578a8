//! The Responses error envelope (the Chat Completions one):
//! `{"error":{"message","type","param","code"}}`. The gateway picks the
//! fields (MAPPING §14.5); this only writes them.

use serde::Serialize;

#[derive(Serialize)]
struct Envelope<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: Option<&'a str>,
}

/// An HTTP error body, e.g. `error_body("…", "invalid_request_error",
/// Some("previous_response_id"), Some("previous_response_not_found"))`.
pub fn error_body(message: &str, kind: &str, param: Option<&str>, code: Option<&str>) -> Vec<u8> {
    let e = Envelope {
        error: Inner {
            message,
            kind,
            param,
            code,
        },
    };
    // Serializing plain strings into a Vec cannot fail.
    serde_json::to_vec(&e).unwrap_or_default()
}
