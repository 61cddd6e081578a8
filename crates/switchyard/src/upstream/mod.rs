//! UPSTREAM: the pooled HTTP client, provider key pools and the incremental
//! reader of upstream event streams.

pub mod client;
pub mod events;
pub mod h1;
pub mod keys;
pub mod retry_after;
