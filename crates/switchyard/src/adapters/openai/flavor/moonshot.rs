//! Moonshot Kimi (MAPPING §18.4): `max_tokens`, not
//! `max_completion_tokens`; thinking turned off with `thinking: {type:
//! disabled}`; a prefill marked `partial`; reasoning kept in tool loops;
//! errors read by `type` (a spent account is a 403, an overloaded engine a
//! 429, the wait in prose).

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use super::{error_fields, Edits, Flavor, Replay, Request};
use crate::adapters::errors::Reading;
use crate::error::ErrorCode;

pub struct Moonshot;

impl Flavor for Moonshot {
    fn edits(&self, r: &Request<'_>, e: &mut Edits) {
        e.rename(r, "max_completion_tokens", "max_tokens");
        e.messages.partial_prefill = true;
        // The coding models refuse `disabled`; the thinking model always thinks.
        let switchable = !r.model.contains("-code") && !r.model.contains("thinking");
        if r.thinking() == Some(false) && switchable && !r.has("thinking") {
            e.set("thinking", json!({ "type": "disabled" }));
        }
    }

    fn replay(&self, _r: &Request<'_>) -> Replay {
        Replay::ToolTurns
    }

    fn rewrites_answers(&self) -> bool {
        true
    }

    fn read_error(&self, _status: StatusCode, body: &[u8], r: &mut Reading) {
        let (_, kind) = error_fields(body);
        let lower = r.message.to_ascii_lowercase();
        match kind.as_str() {
            "invalid_authentication_error" => r.code = Some(ErrorCode::AuthFailed),
            "exceeded_current_quota_error" => {
                r.code = Some(ErrorCode::RateLimited);
                r.quota = true;
            }
            "resource_not_found_error" => r.code = Some(ErrorCode::ModelNotFound),
            "engine_overloaded_error" => r.code = Some(ErrorCode::Overloaded),
            "rate_limit_reached_error" => {
                r.code = Some(ErrorCode::RateLimited);
                r.retry_after = r.retry_after.or(try_again_after(&lower));
            }
            "invalid_request_error"
                if lower.contains("exceeded model token limit")
                    || lower.contains("model max length exceeded") =>
            {
                r.context_length = true;
            }
            _ => {}
        }
    }
}

/// "… please try again after 1 seconds" → the wait (an hour at most).
fn try_again_after(lower: &str) -> Option<Duration> {
    let rest = &lower[lower.find("try again after ")? + "try again after ".len()..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let secs: u64 = rest[..end].parse().ok()?;
    Some(Duration::from_secs(secs.min(3600)))
}
