//! Qwen on DashScope's compatible mode (MAPPING §18.2): `enable_thinking`
//! (with `thinking_budget`), refused on non-streaming calls; reasoning not
//! sent back; its 429 `insufficient_quota` is a per-minute throttle, not a
//! spent balance. A 429 that names a daily quota ("per day", "daily",
//! 每日/每天/今日/当日) rests until the time it states (Beijing time unless
//! it says otherwise), else until midnight in Beijing.

use std::time::{Duration, SystemTime};

use http::StatusCode;
use serde_json::json;

use super::{Edits, Flavor, Replay, Request};
use crate::adapters::errors::Reading;
use crate::adapters::resets;
use crate::error::ErrorCode;

pub struct Qwen;

/// QwQ and `*-thinking` models always think: no switch to send.
fn thinks_always(model: &str) -> bool {
    model.starts_with("qwq") || model.contains("-thinking")
}

/// How long DashScope's quota throttle lasts (a minute's allocation).
const THROTTLE: Duration = Duration::from_secs(60);

/// A stated reset further away than this is a misreading: the day's
/// midnight is taken instead.
const LONGEST_STATED: Duration = Duration::from_secs(48 * 3600);

/// A 429 body that names a daily quota: how long until it resets — the
/// time the body states when it is ahead (and within two days), else the
/// next midnight in Beijing. `None` for any other 429 (the per-minute
/// `Throttling.AllocationQuota` among them).
pub fn daily_rest(text: &str, now: SystemTime) -> Option<Duration> {
    let lower = text.to_lowercase();
    let daily = [
        "per day", "perday", "per_day", "daily", "每日", "每天", "今日", "当日",
    ]
    .iter()
    .any(|w| lower.contains(w));
    if !daily {
        return None;
    }
    let stated = resets::beijing_time_in(text)
        .map(|at| resets::until(now, at))
        .filter(|d| !d.is_zero() && *d <= LONGEST_STATED);
    Some(stated.unwrap_or_else(|| resets::until_beijing_midnight(now)))
}

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
        if status == StatusCode::TOO_MANY_REQUESTS {
            if let Some(rest) = daily_rest(&text, SystemTime::now()) {
                r.quota = false;
                r.code = Some(ErrorCode::RateLimited);
                r.rests_for = Some(rest);
            }
        }
        if text.contains("Range of input length should be") {
            r.context_length = true;
        }
    }
}
