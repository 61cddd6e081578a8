//! Zhipu GLM / Z.ai (MAPPING §18.3): the thinking switch is `thinking:
//! {type}`; reasoning goes back only under preserved thinking
//! (`clear_thinking: false`); errors are read by `error.code`, not the
//! status (billing arrives as a 429, overload as a 429 too).

use http::StatusCode;
use serde_json::json;

use super::{error_fields, Edits, Flavor, Replay, Request};
use crate::adapters::errors::Reading;
use crate::error::ErrorCode;

pub struct Zhipu;

impl Flavor for Zhipu {
    fn edits(&self, r: &Request<'_>, e: &mut Edits) {
        if let Some(on) = r.thinking().filter(|_| !r.has("thinking")) {
            let kind = if on { "enabled" } else { "disabled" };
            e.set("thinking", json!({ "type": kind }));
        }
    }

    /// Preserved thinking keeps what the client sends back; otherwise the
    /// replayed reasoning is only billed as prompt.
    fn replay(&self, r: &Request<'_>) -> Replay {
        let preserved = r
            .raw("thinking")
            .and_then(|t| serde_json::from_str::<serde_json::Value>(t.get()).ok())
            .is_some_and(|t| t["clear_thinking"] == json!(false));
        if preserved {
            Replay::Leave
        } else {
            Replay::Strip
        }
    }

    fn read_error(&self, _status: StatusCode, body: &[u8], r: &mut Reading) {
        let (code, _) = error_fields(body);
        let (decided, quota) = match code.as_str() {
            "1000" | "1001" | "1002" | "1003" | "1004" => (ErrorCode::AuthFailed, false),
            // Balance spent; the coding plan's 5-hour cap.
            "1113" | "1308" | "1309" => (ErrorCode::RateLimited, true),
            "1210" | "1211" | "1213" | "1214" => (ErrorCode::InvalidRequest, false),
            "1261" => (ErrorCode::ContextTooLong, false),
            "1301" => (ErrorCode::ContentFiltered, false),
            "1302" | "1303" => (ErrorCode::RateLimited, false),
            "1305" => (ErrorCode::Overloaded, false),
            _ => return,
        };
        r.code = Some(decided);
        r.quota = quota;
        r.bad_key = decided == ErrorCode::AuthFailed;
    }
}
