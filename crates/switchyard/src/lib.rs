//! switchyard: an LLM gateway.
//!
//! The request path, in the order of the modules below:
//!
//! ```text
//! client ─► ingress (auth, body, Live snapshot)
//!             └► normalize (protocol crate: passthrough view or IR)
//!                  └► response cache (ingress::cache: a hit is answered here)
//!                       └► route::plan (ordered candidates + reasons)
//!                            └► reliability::execute (attempts, fallback)
//!                                 └► adapters::<protocol> ─► upstream::client ─► provider
//!          ◄── ingress::respond / ingress::sse_out (event by event) ◄──┘
//! ```
//! Beside the path: `config` (YAML → validated model), `state` (the live
//! snapshot, the response cache), `observe` (decision log, redaction,
//! logging, trace ids, the OTLP wire format), `sinks` (where a
//! finished request goes), `usage` (the cost ledger), `governance` (who,
//! and what they may spend), `admin`.

pub mod adapters;
pub mod doors;
pub mod ingress;
pub mod reliability;
pub mod route;
pub mod upstream;

pub mod admin;
pub mod app;
pub mod cli;
pub mod config;
pub mod demo;
pub mod error;
pub mod governance;
pub mod names;
pub mod observe;
#[cfg(test)]
pub(crate) mod prop;
pub mod server;
pub mod sinks;
pub mod state;
pub mod tokenize;
pub mod usage;
pub mod write_stall;
