//! Keys this build parses but does not act on yet: refused, never ignored.
//!
//! A config that asks for something it would not get would otherwise load
//! and leave the user believing they have it. Each such key gets an error at
//! its own position: fleet keys without the fleet, a client's `debug`
//! without `debug_bodies: header`. Keys that tune the response cache while it is off
//! are refused the same way.
//! The model keeps the fields for the issues that implement them: delete the
//! matching lines here when a feature lands.
//!
//! A key whose value already has a problem (unknown value, bad duration or URL,
//! missing `usd`) keeps only that message: grammar first, one message per key.

use super::super::node::{At, Sp};
use super::super::raw::RawConfig;
use super::super::Diags;
use crate::config::model::{CacheBackend, DebugBodies, StateBackend};

fn at<T>(v: &Option<Sp<T>>) -> Option<&At> {
    v.as_ref().map(|s| &s.at)
}

/// Runs after every other check of these sections (so that grammar wins) and
/// before [`super::globals::requirements`].
pub fn check(d: &mut Diags, raw: &RawConfig) {
    // One message per key: a key already reported keeps its first.
    let mut say = |at: &At, msg: String| {
        if !d.reported(&at.path) {
            d.err(at, msg);
        }
    };
    const CACHE_OFF: &str =
        "has no effect: the response cache is off; set `cache.backend: memory` or remove it";
    let c = &raw.cache;
    let backend = c.backend.as_ref().map(|b| b.value);
    // A shared cache is the fleet's: it needs the fleet's Redis, and Redis
    // bounds its bytes (`maxmemory`), not us.
    if backend == Some(CacheBackend::Redis) {
        if let Some(m) = &c.max_bytes {
            say(
                &m.at,
                "has no effect with `backend: redis` (Redis's own `maxmemory` bounds it); remove it"
                    .into(),
            );
        }
    }
    // The cache is off unless `backend: memory` asks for it: a key that
    // tunes a cache that is not there would do nothing.
    if matches!(backend, None | Some(CacheBackend::Off)) {
        let keys = [
            at(&c.ttl),
            at(&c.max_entries),
            at(&c.max_bytes),
            at(&c.when),
        ];
        for a in keys.into_iter().flatten() {
            say(a, CACHE_OFF.into());
        }
        for client in raw.clients.iter().flatten() {
            if let Some(c) = &client.cache {
                say(&c.at, CACHE_OFF.into());
            }
        }
    }

    // The fleet's keys act with `backend: redis` only.
    let s = &raw.state;
    let shared = s
        .backend
        .as_ref()
        .is_some_and(|b| b.value == StateBackend::Redis);
    if !shared {
        for a in [
            at(&s.redis_url),
            at(&s.cluster_urls),
            at(&s.key_prefix),
            at(&s.on_unavailable),
        ]
        .into_iter()
        .flatten()
        {
            say(
                a,
                "has no effect: there is no shared state; set `state.backend: redis` or remove it"
                    .into(),
            );
        }
    }

    // A client allowed to see its bodies logged needs the log to take them.
    let bodies = raw.observability.debug_bodies.as_ref().map(|b| b.value);
    if bodies != Some(DebugBodies::Header) {
        for c in raw.clients.iter().flatten() {
            if let Some(debug) = c.debug.as_ref().filter(|v| v.value) {
                say(
                    &debug.at,
                    "has no effect: bodies are never logged; set `observability.debug_bodies: header` or remove it"
                        .into(),
                );
            }
        }
    } else if !raw
        .clients
        .iter()
        .flatten()
        .any(|c| c.debug.as_ref().is_some_and(|v| v.value))
    {
        if let Some(b) = &raw.observability.debug_bodies {
            say(
                &b.at,
                "has no effect: no client may ask for its bodies; give one `debug: true` or set `debug_bodies: off`"
                    .into(),
            );
        }
    }
}
