//! switchyard: an LLM gateway.
//!
//! The request path:
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
//! Beside the path: `config` (YAML → validated model), `live` (the config
//! snapshot a request keeps), `registry` (circuits, health, limits, keys:
//! kept across reloads), `state` (storage: the state store, the response
//! cache, stored responses, and what is shared with a fleet — alone or on
//! Redis, behind `state::shared::Shared`), `observe` (the request's record, decision log,
//! redaction, logging, trace ids, the OTLP wire format), `sinks` (where a
//! finished record goes), `usage` (the cost ledger), `governance` (who, and
//! what they may spend: budgets and issued keys, kept across reloads),
//! `shadow` (a share of a route's requests copied to another deployment
//! after the answer, and the two compared), `admin`.
//!
//! Layers, lowest first. A module uses only the layers below its own, never
//! one above and never another of its own line (`tests/layers.rs` reads the
//! sources and holds every `crate::` path to this table):
//! ```text
//! layer 0   classify contract error names secret tokenize write_stall prop
//! layer 1   config
//! layer 2   observe
//! layer 3   upstream
//! layer 4   usage
//! layer 5   sinks state
//! layer 6   governance
//! layer 7   registry
//! layer 8   doors
//! layer 9   adapters
//! layer 10  live
//! layer 11  route
//! layer 12  reliability
//! layer 13  shadow
//! layer 14  app demo
//! layer 15  ingress admin
//! layer 16  routes
//! layer 17  server
//! layer 18  cli
//! ```

pub mod classify;
pub mod contract;
pub mod error;
pub mod names;
#[cfg(test)]
pub(crate) mod prop;
pub mod secret;
pub mod tokenize;
pub mod write_stall;

pub mod config;
pub mod observe;
pub mod upstream;
pub mod usage;

pub mod sinks;
pub mod state;

pub mod governance;
pub mod registry;

pub mod doors;

pub mod adapters;
pub mod live;
pub mod route;

pub mod reliability;

pub mod shadow;

pub mod app;
pub mod demo;

pub mod admin;
pub mod ingress;

pub mod routes;
pub mod server;

pub mod cli;
