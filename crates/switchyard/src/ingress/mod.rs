//! FRONT DOOR: the client-facing handlers. Each handler loads the live config
//! once, reads and checks the body, authenticates, and hands off to
//! normalize → route → reliability; replies are rendered in `respond` (errors
//! and JSON) and `sse_out` (streams) only.

pub mod anthropic;
pub mod auth;
pub mod body;
pub mod degraded;
pub mod names;
pub mod openai;
pub mod pipeline;
pub mod respond;
pub mod sse_out;

use http::HeaderMap;

/// `x-request-id` if the client sent a sane one, else a fresh one.
pub fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(&names::X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128 && v.bytes().all(|b| b.is_ascii_graphic()))
        .map(str::to_owned)
        .unwrap_or_else(new_request_id)
}

/// `req_` and 32 random hex digits (no formatter: this is on every request).
fn new_request_id() -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut id = String::with_capacity(36);
    id.push_str("req_");
    let n = rand::random::<u128>();
    for i in (0..32).rev() {
        id.push(char::from(HEX[(n >> (i * 4)) as usize & 0xf]));
    }
    id
}

/// The trace id of a W3C `traceparent` (`00-<trace>-<span>-<flags>`).
pub fn trace_id(headers: &HeaderMap) -> Option<String> {
    let tp = headers.get(&names::TRACEPARENT)?.to_str().ok()?;
    let mut parts = tp.split('-');
    let (_version, trace) = (parts.next()?, parts.next()?);
    (trace.len() == 32 && trace.bytes().all(|b| b.is_ascii_hexdigit())).then(|| trace.to_owned())
}
