//! Reasoning from earlier turns (MAPPING §18): sent back, stripped or left
//! as the client sent it, by the flavor's rule for the model. OpenAI and
//! Responses clients never send `reasoning_content` back, so the reasoning
//! that made tool calls is kept here, by the calls' ids, for the turn that
//! replays them; a turn whose reasoning is not known gets an empty one,
//! which the providers accept.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// What happens to reasoning in earlier assistant turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Replay {
    /// As the client sent it.
    #[default]
    Leave,
    /// Removed (the provider refuses it, or ignores it).
    Strip,
    /// Present on every turn that made tool calls (thinking-mode tool loops).
    ToolTurns,
    /// Present on every assistant turn.
    Every,
}

/// How a conversation's messages change.
#[derive(Debug, Default)]
pub struct Messages {
    pub replay: Replay,
    /// `developer` is not a role the provider knows: `system`.
    pub developer_as_system: bool,
    /// Reasoning goes back as `reasoning_details` (MiniMax), not
    /// `reasoning_content`.
    pub as_details: bool,
    /// A last assistant turn (a prefill) is marked `partial: true`
    /// (Kimi's partial mode: the answer continues it).
    pub partial_prefill: bool,
}

impl Messages {
    pub fn is_empty(&self) -> bool {
        self.replay == Replay::Leave && !self.developer_as_system && !self.partial_prefill
    }

    /// The messages rewritten, as JSON; `None` when nothing changes (then
    /// they are not parsed at all, where a glance can tell).
    pub fn rewrite(&self, raw: &RawValue, store: &ReplayStore) -> Option<String> {
        let text = raw.get();
        let developer = self.developer_as_system && text.contains("\"developer\"");
        let replay = match self.replay {
            Replay::Leave => false,
            Replay::Strip => text.contains("\"reasoning_"),
            Replay::ToolTurns => text.contains("\"tool_calls\""),
            Replay::Every => text.contains("\"assistant\""),
        };
        let prefill = self.partial_prefill && text.contains("\"assistant\"");
        if !developer && !replay && !prefill {
            return None;
        }
        let mut messages: Vec<Value> = serde_json::from_str(text).ok()?;
        let mut changed = false;
        for m in messages.iter_mut().filter_map(Value::as_object_mut) {
            changed |= self.message(m, store);
        }
        let last = messages.last_mut().and_then(Value::as_object_mut);
        if let Some(m) = last.filter(|m| prefill && m.get("role") == Some(&"assistant".into())) {
            m.insert("partial".into(), true.into());
            changed = true;
        }
        changed.then(|| Value::Array(messages).to_string())
    }

    fn message(&self, m: &mut Map<String, Value>, store: &ReplayStore) -> bool {
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        if role == "developer" && self.developer_as_system {
            m.insert("role".into(), "system".into());
            return true;
        }
        if role != "assistant" {
            return false;
        }
        let calls: Vec<&str> = m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("id").and_then(Value::as_str))
            .collect();
        let wanted = match self.replay {
            Replay::Leave => return false,
            Replay::Strip => {
                let a = m.remove("reasoning_content").is_some();
                let b = m.remove("reasoning_details").is_some();
                return a || b;
            }
            Replay::ToolTurns => !calls.is_empty(),
            Replay::Every => true,
        };
        if !wanted {
            return false;
        }
        let own = m
            .get("reasoning_content")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let kept = || calls.iter().find_map(|id| store.recall(id));
        if self.as_details {
            if m.contains_key("reasoning_details") {
                return false;
            }
            let text = own.map(Arc::from).or_else(kept);
            m.remove("reasoning_content");
            if let Some(t) = text.filter(|t| !t.is_empty()) {
                let detail = serde_json::json!([{"type": "reasoning.text", "text": &*t}]);
                m.insert("reasoning_details".into(), detail);
            }
            return true;
        }
        if own.is_some() {
            return false;
        }
        let text = kept().map(|t| t.to_string()).unwrap_or_default();
        m.insert("reasoning_content".into(), text.into());
        true
    }
}

/// Reasoning that made tool calls, by call id: bounded by its text's size,
/// forgotten after a while unused.
#[derive(Clone)]
pub struct ReplayStore(moka::sync::Cache<Arc<str>, Arc<str>>);

/// At most this much reasoning text is kept per provider.
const KEEP_BYTES: u64 = 32 << 20;
/// A tool loop's next turn comes within minutes; a day is generous.
const KEEP_FOR: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

impl Default for ReplayStore {
    fn default() -> Self {
        ReplayStore(
            moka::sync::Cache::builder()
                .max_capacity(KEEP_BYTES)
                .weigher(|k: &Arc<str>, v: &Arc<str>| {
                    u32::try_from(k.len() + v.len() + 64).unwrap_or(u32::MAX)
                })
                .time_to_idle(KEEP_FOR)
                .build(),
        )
    }
}

impl ReplayStore {
    /// `reasoning` made the calls `ids`.
    pub fn remember<'a>(&self, ids: impl Iterator<Item = &'a str>, reasoning: &str) {
        if reasoning.is_empty() {
            return;
        }
        let text: Arc<str> = Arc::from(reasoning);
        for id in ids.filter(|id| !id.is_empty()) {
            self.0.insert(Arc::from(id), text.clone());
        }
    }

    pub fn recall(&self, id: &str) -> Option<Arc<str>> {
        self.0.get(id)
    }
}
