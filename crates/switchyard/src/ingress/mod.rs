//! FRONT DOOR: the client-facing handlers. Each handler loads the live config
//! once, reads and checks the body, authenticates, and hands off to
//! normalize → route → reliability; replies are rendered in `respond` (errors
//! and JSON) and `sse_out` (streams) only.

pub mod anthropic;
pub mod auth;
pub mod body;
pub mod cache;
pub mod count_tokens;
pub mod degraded;
pub mod embeddings;
pub mod models;
pub mod openai;
pub mod pipeline;
pub mod respond;
pub mod responses;
pub mod sse_out;
pub mod unknown;

use http::HeaderMap;

use crate::names;

/// `x-request-id` if the client sent a sane one, else a fresh one.
pub fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(&names::X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(new_request_id)
}

/// `req_` and 32 hex digits from a per-thread generator seeded from the OS
/// RNG: unique and unguessable enough for a correlation id, at a few
/// instructions instead of a ChaCha block per request.
fn new_request_id() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n = (u128::from(next_u64()) << 64) | u128::from(next_u64());
    let mut id = String::with_capacity(36);
    id.push_str("req_");
    for i in (0..32).rev() {
        id.push(char::from(HEX[(n >> (i * 4)) as usize & 0xf]));
    }
    id
}

/// wyrand (one multiply per number), one state per thread.
fn next_u64() -> u64 {
    thread_local! {
        static STATE: std::cell::Cell<u64> = std::cell::Cell::new(rand::random());
    }
    STATE.with(|s| {
        let x = s.get().wrapping_add(0xa076_1d64_78bd_642f);
        s.set(x);
        let t = u128::from(x) * u128::from(x ^ 0xe703_7ed1_a0b4_28db);
        (t >> 64) as u64 ^ t as u64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_request_ids_are_well_formed_and_distinct() {
        let ids: std::collections::HashSet<String> =
            (0..10_000).map(|_| request_id(&HeaderMap::new())).collect();
        assert_eq!(ids.len(), 10_000);
        assert!(ids.iter().all(|id| id.len() == 36
            && id.starts_with("req_")
            && id[4..].bytes().all(|b| b.is_ascii_hexdigit())));
        // A client's own id is kept.
        let mut h = HeaderMap::new();
        h.insert(&names::X_REQUEST_ID, "abc-123".parse().unwrap());
        assert_eq!(request_id(&h), "abc-123");
    }
}
