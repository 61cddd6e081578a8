//! MiniMax (MAPPING §18.6): reasoning asked apart (`reasoning_split`) as
//! `reasoning_details`, else inline `<think>…</think>` split off; it goes
//! back as it came; `tool_choice` only `none`/`auto`; extras
//! (`base_resp`, `*_sensitive*`) stripped; and an error may come as HTTP
//! 200 with `base_resp.status_code` ≠ 0, on a stream too.

use http::StatusCode;
use serde_json::json;

use super::{Edits, Flavor, Replay, Request};
use crate::adapters::errors::Reading;
use crate::error::{ErrorCode, GatewayError};

pub struct MiniMax;

impl Flavor for MiniMax {
    fn edits(&self, r: &Request<'_>, e: &mut Edits) {
        e.messages.as_details = true;
        if !r.has("reasoning_split") {
            e.set("reasoning_split", json!(true));
        }
        // M2.x takes only `none` and `auto`: a required or named tool
        // becomes `auto` (the tool is still offered).
        let forced = r
            .raw("tool_choice")
            .is_some_and(|v| !matches!(v.get(), "\"none\"" | "\"auto\""));
        if forced {
            e.set("tool_choice", json!("auto"));
        }
    }

    fn replay(&self, _r: &Request<'_>) -> Replay {
        Replay::ToolTurns
    }

    fn rewrites_answers(&self) -> bool {
        true
    }

    fn splits_think(&self) -> bool {
        true
    }

    fn error_in_answer(&self, body: &[u8]) -> Option<GatewayError> {
        let (code, message) = base_resp(body)?;
        let mut r = Reading {
            message,
            ..Reading::default()
        };
        read_code(code, &mut r);
        let mut e =
            crate::adapters::errors::classify(StatusCode::OK, &http::HeaderMap::new(), r, &[]);
        // Its own code, as the provider said it.
        e.message = format!("{} (MiniMax status {code})", e.message);
        Some(e)
    }

    fn read_error(&self, _status: StatusCode, body: &[u8], r: &mut Reading) {
        if let Some((code, message)) = base_resp(body) {
            if r.message.is_empty() {
                r.message = message;
            }
            read_code(code, r);
        }
    }
}

/// A non-zero `base_resp.status_code` and its message.
fn base_resp(body: &[u8]) -> Option<(i64, String)> {
    if !body.windows(11).any(|w| w == b"\"base_resp\"") {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let b = v.get("base_resp")?;
    let code = b.get("status_code")?.as_i64()?;
    let message = b
        .get("status_msg")
        .and_then(|m| m.as_str())
        .unwrap_or_default();
    (code != 0).then(|| (code, message.to_owned()))
}

fn read_code(code: i64, r: &mut Reading) {
    let (decided, quota) = match code {
        1002 | 1039 => (ErrorCode::RateLimited, false),
        1004 => (ErrorCode::AuthFailed, false),
        1008 | 2049 | 2056 => (ErrorCode::RateLimited, true),
        1026 | 1027 => (ErrorCode::ContentFiltered, false),
        2013 => (ErrorCode::InvalidRequest, false),
        1000 | 1001 | 1024 | 1033 => (ErrorCode::UpstreamError, false),
        _ => (ErrorCode::UpstreamError, false),
    };
    r.code = Some(decided);
    r.quota = quota;
    r.bad_key = decided == ErrorCode::AuthFailed;
}
