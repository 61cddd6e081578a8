//! The response cache on the request path (contract §3): whether a request
//! may be answered from the cache or kept in it (`cache.when`, the client's
//! `x-switchyard-cache`), the lookup, the replay of a hit in the client's
//! dialect — a whole answer or a stream —, and keeping a good answer.
//! A hit calls no upstream and costs nothing: no budget spend, no tokens.

use std::sync::Arc;
use std::time::SystemTime;

use axum::response::Response;
use bytes::Bytes;
use http::HeaderMap;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::respond::{self, ServedHeaders};
use crate::adapters::deployment::DeploymentRt;
use crate::config::CacheWhen;
use crate::doors::normalize::Normalized;
use crate::doors::{Door, Inbound};
use crate::governance::Principal;
use crate::live::Live;
use crate::observe::record::CacheLookup;
use crate::reliability::ctx::RequestCtx;
use crate::state::cache::{CacheKey, CachedAnswer, Slot};

/// How one request uses the cache.
#[derive(Clone)]
pub struct CacheUse {
    slot: Slot,
    /// The client's dialect: what a whole answer is read back in.
    door: Door,
    /// False for `x-switchyard-cache: no-cache`: kept, never looked up.
    read: bool,
}

/// What the client's `x-switchyard-cache` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ask {
    Default,
    /// `use`: this request may be cached whatever `when` says.
    Use,
    NoCache,
    NoStore,
}

fn ask(headers: &HeaderMap) -> Ask {
    match headers.get(&crate::names::CACHE).map(|v| v.as_bytes()) {
        Some(b"use") => Ask::Use,
        Some(b"no-cache") => Ask::NoCache,
        Some(b"no-store") => Ask::NoStore,
        _ => Ask::Default,
    }
}

/// `None` when the cache is off or the request is not for it (`when`,
/// `no-store`, several choices).
pub fn plan(
    live: &Live,
    headers: &HeaderMap,
    who: Option<&Principal<'_>>,
    normalized: &Normalized,
    inbound: &Inbound<'_>,
) -> Option<CacheUse> {
    let cache = live.cache.as_ref()?;
    let ask = ask(headers);
    let wanted = match live.config.cache.when {
        CacheWhen::Always => true,
        CacheWhen::Deterministic => normalized.deterministic || ask == Ask::Use,
        CacheWhen::Header => ask == Ask::Use,
    };
    if !wanted || ask == Ask::NoStore || inbound.n() > 1 {
        return None;
    }
    Some(CacheUse {
        slot: Slot {
            cache: cache.clone(),
            key: key(inbound.door(), who, normalized),
        },
        door: inbound.door(),
        read: ask != Ask::NoCache,
    })
}

/// The door (its answers are its own dialect's), whose cache (the client's
/// own, or the one every `cache: shared` client uses) and the request.
fn key(door: Door, who: Option<&Principal<'_>>, normalized: &Normalized) -> CacheKey {
    let door: &[u8] = match door {
        Door::OpenAiChat => b"chat",
        Door::AnthropicMessages => b"messages",
        Door::Responses => b"responses",
    };
    let head = Sha256::new().chain_update(door).chain_update([0]);
    scope(head, who.map(|p| (p.client_id(), p.client.cache_shared)))
        .chain_update(normalized.hash)
        .finalize()
        .into()
}

/// Whose cache, written so that no two scopes hash alike whatever the
/// client ids are: a tag byte, then for a client's own cache its id's
/// length before the id (`team` is never `team/sub`, and no client id can
/// pass for the shared cache or an open gateway's).
fn scope(h: Sha256, who: Option<(&str, bool)>) -> Sha256 {
    match who {
        None => h.chain_update([0]),
        Some((_, true)) => h.chain_update([1]),
        Some((id, false)) => h
            .chain_update([2])
            .chain_update((id.len() as u64).to_be_bytes())
            .chain_update(id.as_bytes()),
    }
}

impl CacheUse {
    /// The stored answer, if any; the lookup is timed for the trace.
    pub async fn lookup(&self, ctx: &mut RequestCtx) -> Option<Arc<CachedAnswer>> {
        ctx.cache = "miss";
        if !self.read {
            return None;
        }
        let (started, t) = (SystemTime::now(), Instant::now());
        let hit = self.slot.cache.get(&self.slot.key).await;
        ctx.cache_lookup = Some(CacheLookup {
            started,
            took: t.elapsed(),
        });
        if hit.is_some() {
            ctx.cache = "hit";
        }
        hit
    }

    /// Keep a whole answer as the client got it (in its door's dialect).
    pub fn keep_body(&self, body: &[u8], dep: &DeploymentRt) {
        if let Some(answer) = self.door.read_answer(body) {
            self.slot.keep(answer, &dep.name, &dep.provider.name);
        }
    }

    /// Where the answer goes (a stream keeps it when it ends).
    pub fn slot(&self) -> Slot {
        self.slot.clone()
    }
}

/// A hit, ready to go out: the stored answer in the client's dialect, as
/// JSON or replayed as a stream. Nothing upstream was called: no attempts,
/// cost 0.
pub struct Replayed {
    body: Bytes,
    stream: bool,
    deployment: Arc<str>,
}

/// A hit, encoded for the client (its door's encoder, as a live answer
/// would be) and recorded: served by the deployment that first answered.
pub fn replayed(
    live: &Live,
    who: Option<&Principal<'_>>,
    inbound: &Inbound<'_>,
    hit: &CachedAnswer,
    ctx: &mut RequestCtx,
) -> Replayed {
    if let Some((p, b)) = who.and_then(|p| Some((p, p.client.budget?))) {
        // Nothing is reserved: the hold only reads what is left.
        ctx.budget = Some(live.governance.budgets.hold(&p.id, b));
    }
    ctx.route = live.route_names.get(inbound.model()).cloned();
    let model: Arc<str> = Arc::from(hit.answer.model.as_str());
    ctx.served_by(&hit.deployment, &model);
    ctx.cost_usd = Some(0.0);
    ctx.decision_reason = Some("cache_hit");
    let body = if inbound.stream() {
        inbound.as_stream(&hit.answer)
    } else {
        inbound.answer(&hit.answer)
    };
    Replayed {
        body,
        stream: inbound.stream(),
        deployment: hit.deployment.clone(),
    }
}

impl Replayed {
    pub fn reply(self, mut ctx: RequestCtx, rid: &str) -> Response {
        let headers = ServedHeaders {
            request_id: rid,
            deployment: &self.deployment,
            attempts: 0,
            cache: "hit",
            cost_usd: Some(0.0),
            fallback_reason: None,
            dropped_tools: None,
            rate: None,
            budget_remaining: ctx.settle_budget(),
        };
        ctx.debug_response(&self.body);
        let resp = if self.stream {
            respond::event_stream(axum::body::Body::from(self.body), &headers)
        } else {
            respond::json(self.body, &headers)
        };
        ctx.finish(200, None);
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::scope;
    use sha2::{Digest, Sha256};

    fn of(who: Option<(&str, bool)>, rest: &[u8]) -> [u8; 32] {
        scope(Sha256::new(), who)
            .chain_update(rest)
            .finalize()
            .into()
    }

    #[test]
    fn no_two_scopes_share_a_key() {
        let all = [
            of(None, b"x"),
            of(Some(("team", true)), b"x"),
            of(Some(("other", true)), b"x"),
            of(Some(("team", false)), b"x"),
            of(Some(("team/sub", false)), b"x"),
            of(Some(("\0shared", false)), b"x"),
            of(Some(("", false)), b"x"),
        ];
        // `cache: shared` clients share one cache; every other scope is its own.
        assert_eq!(all[1], all[2]);
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len() - 1);
        // The id's length is part of it: an id cannot run into the request.
        assert_ne!(
            of(Some(("team", false)), b"/subx"),
            of(Some(("team/sub", false)), b"x")
        );
    }
}
