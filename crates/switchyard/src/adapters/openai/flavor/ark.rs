//! Volcengine Ark, Doubao (MAPPING §18.5): `thinking: {type}` on Seed
//! models; a model's output cap refused with a 400 (clamped to the
//! deployment's `max_output_tokens` first); reasoning not sent back;
//! errors by their PascalCase `code`.

use http::StatusCode;
use serde_json::json;

use super::{error_fields, Edits, Flavor, Replay, Request};
use crate::adapters::errors::Reading;
use crate::error::ErrorCode;

pub struct Ark;

impl Flavor for Ark {
    fn edits(&self, r: &Request<'_>, e: &mut Edits) {
        if let Some(on) = r.thinking().filter(|_| !r.has("thinking")) {
            let kind = if on { "enabled" } else { "disabled" };
            e.set("thinking", json!({ "type": kind }));
        }
        let Some(cap) = r.max_output_tokens else {
            return;
        };
        for key in ["max_tokens", "max_completion_tokens"] {
            let asked = r.raw(key).and_then(|v| v.get().parse::<u64>().ok());
            if asked.is_some_and(|n| n > u64::from(cap)) {
                e.set(key, json!(cap));
            }
        }
    }

    fn replay(&self, _r: &Request<'_>) -> Replay {
        Replay::Strip
    }

    fn read_error(&self, _status: StatusCode, body: &[u8], r: &mut Reading) {
        let (code, _) = error_fields(body);
        if code == "AuthenticationError" || code.starts_with("InvalidAccessKey") {
            r.code = Some(ErrorCode::AuthFailed);
            r.bad_key = true;
        } else if code.starts_with("MissingParameter") || code.starts_with("InvalidParameter") {
            r.code = Some(ErrorCode::InvalidRequest);
        } else if code.starts_with("RateLimitExceeded") {
            r.code = Some(ErrorCode::RateLimited);
        } else if code.starts_with("ServerOverloaded") {
            r.code = Some(ErrorCode::Overloaded);
        } else if code.starts_with("QuotaExceeded") || code == "AccountOverdueError" {
            r.code = Some(ErrorCode::RateLimited);
            r.quota = true;
        }
    }
}
