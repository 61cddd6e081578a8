//! What routing needs to know about a request, read once at the door:
//! capabilities it implies, its estimated size, its task and session. Each
//! door reads its own request (`Inbound::facts`); this is the IR reader and
//! the parts every door shares.

use http::{HeaderMap, HeaderName};
use switchyard_protocol::ir::{ChatRequest, ContentPart, ResponseFormat, Role};

use super::Inbound;
use crate::config::{Capabilities, Capability, TaskRule};
use crate::names;

/// A typical image costs ~1k tokens whatever its size in bytes.
pub(crate) const IMAGE_CHARS: usize = 4000;
/// Role markers and separators per message.
pub(crate) const MESSAGE_CHARS: usize = 16;

#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// Capabilities the request itself implies (tools, images, JSON schema, streaming).
    pub needs: Capabilities,
    /// Capabilities a deployment must declare itself to be a candidate at
    /// all (`embeddings`): unlike `needs`, a deployment that declares no
    /// capabilities is not exempt. Empty for chat.
    pub must_declare: Capabilities,
    /// Estimated prompt tokens (≈ 4 characters a token, plus per-message overhead).
    pub prompt_tokens: u64,
    /// Output tokens asked for (`max_tokens`), if any.
    pub max_tokens: Option<u32>,
    /// `x-switchyard-task`, else the first `task_rules` match.
    pub task: Option<String>,
    /// `x-switchyard-session`.
    pub session: Option<String>,
}

impl Facts {
    pub fn read(inbound: &Inbound<'_>, headers: &HeaderMap, rules: &[TaskRule]) -> Facts {
        let mut f = inbound.facts();
        if inbound.stream() {
            f.needs.insert(Capability::Streaming);
        }
        let header = |name: &HeaderName| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        f.task = header(&names::TASK).map(str::to_owned);
        if f.task.is_none() && !rules.is_empty() {
            f.task = match_rules(rules, &inbound.last_user_text().to_lowercase());
        }
        f.session = header(&names::SESSION).map(|s| s.chars().take(200).collect());
        f
    }

    /// Tokens to reserve against rpm/tpm limits before the answer is known.
    pub fn estimated_total(&self) -> u64 {
        self.prompt_tokens + u64::from(self.max_tokens.unwrap_or(256))
    }

    /// Facts of a request in the IR.
    pub fn from_ir(ir: &ChatRequest) -> Facts {
        let mut needs = Capabilities::default();
        if !ir.tools.is_empty() {
            needs.insert(Capability::Tools);
        }
        if matches!(ir.response_format, Some(ResponseFormat::JsonSchema { .. })) {
            needs.insert(Capability::JsonSchema);
        }
        let mut chars = 0;
        for m in &ir.messages {
            chars += MESSAGE_CHARS;
            for p in &m.content {
                chars += match p {
                    ContentPart::Text(t) | ContentPart::Reasoning { text: t, .. } => t.len(),
                    ContentPart::Image { .. } => {
                        needs.insert(Capability::Vision);
                        IMAGE_CHARS
                    }
                    ContentPart::RedactedReasoning(_) | ContentPart::ResponsesItem(_) => 0,
                };
            }
            chars += m
                .tool_calls
                .iter()
                .map(|c| c.arguments.len())
                .sum::<usize>();
        }
        Facts {
            needs,
            prompt_tokens: (chars / 4) as u64,
            max_tokens: ir.max_tokens,
            ..Facts::default()
        }
    }
}

/// The first rule whose keyword or regex matches the last user message.
fn match_rules(rules: &[TaskRule], text: &str) -> Option<String> {
    if text.is_empty() {
        return None;
    }
    rules
        .iter()
        .find(|r| {
            r.keywords.iter().any(|k| text.contains(k.as_str()))
                || r.regex.as_ref().is_some_and(|re| re.is_match(text))
        })
        .map(|r| r.task.clone())
}

pub(crate) fn last_user(ir: &ChatRequest) -> String {
    ir.messages
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .map(|m| m.text())
        .unwrap_or_default()
}
