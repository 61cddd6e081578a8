//! UPSTREAM: the pooled HTTP client, provider key pools, the incremental
//! reader of upstream event streams, and the fetcher of clients' image URLs.

pub mod client;
pub mod events;
pub mod h1;
pub mod image_fetch;
pub mod keys;
pub mod retry_after;
