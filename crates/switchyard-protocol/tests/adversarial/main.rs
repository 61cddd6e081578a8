//! The standing adversarial suite (issue 22): every wire decoder of the
//! protocol crate fed arbitrary bytes, the real provider fixtures cut,
//! flipped and re-chunked, and structurally hostile JSON (deep nesting, huge
//! numbers and strings, 50 copies of an array's item, duplicate keys, wrong
//! types). Whatever comes in, a decoder must not panic, must finish (every
//! run is watched by [`support::within`]), and its state and output must stay
//! proportional to its input. Incremental decoders must also give the same
//! events whatever the chunking of their input.
//!
//! Failures are not persisted to files: a case found here is committed as a
//! plain `#[test]` next to the decoder it broke.

mod bodies;
mod requests;
mod schema;
mod sse;
mod streams;
mod support;
