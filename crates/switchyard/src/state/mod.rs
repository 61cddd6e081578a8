//! STATE: the live config snapshot (swapped atomically on reload) and, in
//! later issues, the shared state store.

pub mod cache;
pub mod live;
pub mod memory;
pub mod redis;
pub mod responses;
pub mod store;
