//! STATE: storage. The state store behind circuits, limits and health
//! (`store`: in memory, or shared through Redis), the response cache,
//! stored Responses-API answers, and the fleet's shared state in Redis
//! (`fleet`, `redis`: admission, circuit events, keys; `lease`: the
//! slices of shared windows an instance admits from on its own). What the numbers
//! mean is the layers above (`registry`, `governance`).

pub mod cache;
pub mod fleet;
pub mod lease;
pub mod memory;
pub mod redis;
pub mod redis_cache;
pub mod redis_responses;
pub mod responses;
pub mod shared;
pub mod store;
