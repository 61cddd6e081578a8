//! Ids the translators make up when an upstream sends none (a Gemini answer
//! without `responseId`, a tool call without `id`).
//!
//! Such an id must be unique per answer and never repeat across requests:
//! an Anthropic client rejects a conversation with two `tool_use` blocks of
//! the same id, and a deterministic upstream answers two turns alike. A hash
//! of the answer would repeat with it, so an id is a per-process random
//! prefix and a counter: unique within the process by construction, across
//! processes (a fleet, a restart) by the prefix, and one relaxed atomic add
//! each — no lock on the hot path.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// 16 lowercase hex digits, then at least 8 more: never the same twice.
pub fn unique() -> String {
    static PREFIX: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let prefix = *PREFIX.get_or_init(process_seed);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix:016x}{n:08x}")
}

/// `{prefix}_` followed by [`unique`], e.g. `call_…` or `msg_…`.
pub fn with_prefix(prefix: &str) -> String {
    let mut id = String::with_capacity(prefix.len() + 25);
    id.push_str(prefix);
    id.push('_');
    id.push_str(&unique());
    id
}

/// An upstream's id, or (when it sent none, or an empty one) a new one.
pub fn or_new(id: Option<&str>, prefix: &str) -> String {
    match id.filter(|id| !id.is_empty()) {
        Some(id) => id.to_owned(),
        None => with_prefix(prefix),
    }
}

/// 64 random bits without a random-number crate: std's hasher keys come from
/// the OS's randomness once per process; the time and pid are mixed in so
/// that even a platform without it gives each process its own prefix.
fn process_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_never_repeat_and_share_the_process_prefix() {
        let ids: Vec<String> = (0..1000).map(|_| unique()).collect();
        let set: std::collections::HashSet<&String> = ids.iter().collect();
        assert_eq!(set.len(), ids.len());
        assert!(ids.iter().all(|i| i.len() >= 24 && i[..16] == ids[0][..16]));
        assert!(with_prefix("call").starts_with("call_"));
        assert_eq!(or_new(Some("call_1"), "call"), "call_1");
        assert_ne!(or_new(Some(""), "call"), or_new(None, "call"));
    }
}
