//! STATE: the live config snapshot (swapped atomically on reload), the state
//! store behind circuits, limits and health (`store`, in memory today), the
//! response cache, stored Responses-API answers, and the first pieces of
//! the fleet's shared state in Redis (`redis`: admission, circuit events).

pub mod cache;
pub mod fleet;
pub mod live;
pub mod memory;
pub mod redis;
pub mod redis_cache;
pub mod redis_responses;
pub mod responses;
pub mod store;
