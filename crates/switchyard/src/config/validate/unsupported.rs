//! Keys this build parses but does not act on yet: refused, never ignored.
//!
//! A config that asks for a response cache, shared state or body logging
//! would otherwise load and leave the user believing they have it. Each
//! such key gets an error at its own position; the truthful values
//! (`cache.backend: off`, `state.backend: memory`, `debug_bodies: off`) are
//! accepted.
//! The model keeps the fields for the issues that implement them: delete the
//! matching lines here when a feature lands.
//!
//! A key whose value already has a problem (unknown value, bad duration or URL,
//! missing `usd`) keeps only that message: grammar first, one message per key.

use super::super::node::{At, Sp};
use super::super::raw::RawConfig;
use super::super::Diags;
use crate::config::model::{CacheBackend, DebugBodies, StateBackend};

const NO_CACHE: &str = "there is no response cache in this build";
const NO_SHARED: &str =
    "there is no shared state in this build, each gateway process keeps its own in memory";

fn at<T>(v: &Option<Sp<T>>) -> Option<&At> {
    v.as_ref().map(|s| &s.at)
}

/// Runs after every other check of these sections (so that grammar wins) and
/// before [`super::globals::requirements`].
pub fn check(d: &mut Diags, raw: &RawConfig) {
    let mut refuse = |at: &At, missing: &str, fix: &str| {
        if !d.reported(&at.path) {
            d.err(at, format!("not supported yet ({missing}); {fix}"));
        }
    };
    let c = &raw.cache;
    let cache_off = c
        .backend
        .as_ref()
        .is_some_and(|b| b.value == CacheBackend::Off);
    if let Some(b) = c.backend.as_ref().filter(|_| !cache_off) {
        refuse(&b.at, NO_CACHE, "remove it or set `backend: off`");
    }
    if !cache_off {
        for a in [
            at(&c.ttl),
            at(&c.max_entries),
            at(&c.max_bytes),
            at(&c.when),
        ]
        .into_iter()
        .flatten()
        {
            refuse(a, NO_CACHE, "remove it or set `cache.backend: off`");
        }
    }

    for client in raw.clients.iter().flatten() {
        if let Some(c) = &client.cache {
            refuse(&c.at, NO_CACHE, "remove it");
        }
    }

    let s = &raw.state;
    if let Some(b) = s
        .backend
        .as_ref()
        .filter(|b| b.value == StateBackend::Redis)
    {
        refuse(&b.at, NO_SHARED, "remove it or set `backend: memory`");
    }
    for a in [
        at(&s.redis_url),
        at(&s.cluster_urls),
        at(&s.key_prefix),
        at(&s.on_unavailable),
    ]
    .into_iter()
    .flatten()
    {
        refuse(a, NO_SHARED, "remove it");
    }

    let o = &raw.observability;
    if let Some(b) = o
        .debug_bodies
        .as_ref()
        .filter(|b| b.value != DebugBodies::Off)
    {
        refuse(
            &b.at,
            "this build never logs request or response bodies",
            "remove it or set `debug_bodies: off`",
        );
    }
}
