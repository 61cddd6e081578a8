//! Qwen on DashScope's compatible mode (MAPPING §18.2): `enable_thinking`
//! (with `thinking_budget`), refused on non-streaming calls; reasoning not
//! sent back; its 429 `insufficient_quota` is a per-minute throttle, not a
//! spent balance.

use std::time::Duration;

use http::StatusCode;
use serde_json::json;

use super::{Edits, Flavor, Replay, Request};
use crate::adapters::errors::Reading;
use crate::error::ErrorCode;

pub struct Qwen;

/// QwQ and `*-thinking` models always think: no switch to send.
fn thinks_always(model: &str) -> bool {
    model.starts_with("qwq") || model.contains("-thinking")
}

/// How long DashScope's quota throttle lasts (a minute's allocation).
const THROTTLE: Duration = Duration::from_secs(60);

impl Flavor for Qwen {
    fn edits(&self, r: &Request<'_>, e: &mut Edits) {
        if thinks_always(r.model) {
            return;
        }
        if !r.stream {
            // "parameter.enable_thinking must be set to false for
            // non-streaming calls": whatever was asked.
            e.set("enable_thinking", json!(false));
            return;
        }
        if let Some(on) = r.thinking().filter(|_| !r.has("enable_thinking")) {
            e.set("enable_thinking", json!(on));
            let budget = r.reasoning.and_then(|c| c.budget_tokens);
            if let Some(b) = budget.filter(|_| on && !r.has("thinking_budget")) {
                e.set("thinking_budget", json!(b));
            }
        }
    }

    fn replay(&self, _r: &Request<'_>) -> Replay {
        Replay::Strip
    }

    fn read_error(&self, status: StatusCode, body: &[u8], r: &mut Reading) {
        let text = String::from_utf8_lossy(body);
        if status == StatusCode::TOO_MANY_REQUESTS
            && (text.contains("insufficient_quota") || text.contains("Throttling.AllocationQuota"))
        {
            r.quota = false;
            r.code = Some(ErrorCode::RateLimited);
            r.retry_after = r.retry_after.or(Some(THROTTLE));
        }
        if text.contains("Range of input length should be") {
            r.context_length = true;
        }
    }
}
