//! DeepSeek (MAPPING §18.1): reasoning in `reasoning_content`, which the
//! legacy R1 refuses to get back and thinking-mode tool loops (V3.2 and
//! later) require back; `developer` is not a role it knows; the thinking
//! switch is `thinking: {type}`.

use serde_json::json;

use super::{Edits, Flavor, Replay, Request};

pub struct DeepSeek;

/// The first reasoner (2025-01 … ~2025-11), which 400s on replayed reasoning.
fn legacy(model: &str) -> bool {
    model.starts_with("deepseek-r1")
}

impl Flavor for DeepSeek {
    fn edits(&self, r: &Request<'_>, e: &mut Edits) {
        e.messages.developer_as_system = true;
        if let Some(on) = r
            .thinking()
            .filter(|_| !legacy(r.model) && !r.has("thinking"))
        {
            let kind = if on { "enabled" } else { "disabled" };
            e.set("thinking", json!({ "type": kind }));
        }
    }

    fn replay(&self, r: &Request<'_>) -> Replay {
        if legacy(r.model) {
            Replay::Strip
        } else if r.model.starts_with("deepseek-v4") {
            // V4 asks for it back outside pure tool loops too.
            Replay::Every
        } else {
            Replay::ToolTurns
        }
    }

    fn rewrites_answers(&self) -> bool {
        true
    }
}
