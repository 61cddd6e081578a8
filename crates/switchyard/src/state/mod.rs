//! STATE: storage. The state store behind circuits, limits and health
//! (`store`, `memory`), the response cache (`cache`, `redis_cache`), stored
//! Responses-API answers (`responses`, `redis_responses`), and what an
//! instance shares with the rest of its fleet behind one interface
//! (`shared::Shared`: `Alone`, or `OnRedis` over `fleet` and `redis` —
//! admission on shared counts, circuit events, sessions, keys; `lease`: the
//! slices of shared windows an instance admits from on its own;
//! `fleet_canary`: a canary run's terms, counts and rollback), chosen at
//! start-up from `state.backend`. What the numbers mean is the layers above
//! (`governance`, `registry`, `reliability`).

pub mod cache;
pub mod fleet;
pub mod fleet_canary;
pub mod lease;
pub mod memory;
pub mod redis;
pub mod redis_cache;
pub mod redis_responses;
pub mod responses;
pub mod shared;
pub mod store;
