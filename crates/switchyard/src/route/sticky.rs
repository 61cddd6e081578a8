//! Sticky sessions: `x-switchyard-session` keeps a conversation on the
//! deployment that served it while that deployment is a healthy candidate.
//! The mapping lives in the state store (so it can be shared), as a hash of
//! the deployment id under a key derived from route and session.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use tokio::time::Instant;

use super::Plan;
use crate::config::Route;
use crate::live::Live;
use crate::state::store::Record;

/// How long a quiet session stays pinned.
pub const SESSION_TTL: Duration = Duration::from_secs(30 * 60);

fn key(route: &Route, session: &str) -> String {
    format!("sticky:{}:{session}", route.name)
}

fn id_hash(id: &str) -> u64 {
    let mut h = DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

/// Move the session's deployment to the front, if it is still a candidate
/// (and not held back past its quota's `stop`).
pub fn apply(live: &Live, route: &Route, session: &str, p: &mut Plan, now: Instant) {
    let Some(rec) = live.registry.store().get(&key(route, session), now) else {
        return;
    };
    if let Some(i) = p
        .candidates
        .iter()
        .position(|c| id_hash(&c.dep.cfg.id) == rec.0[0] && !super::quota::held_back(c))
    {
        let c = p.candidates.remove(i);
        p.candidates.insert(0, c);
        if let Some(first) = p.candidates.first_mut() {
            first.parts.push(("sticky", 1.0));
        }
        p.reason = "sticky session";
    }
}

/// Remember who served the session (the whole history moves with it: the
/// client sends it on every turn). In a fleet, for every instance, written
/// before the answer goes out: the next turn may reach any of them.
pub async fn remember(live: &Live, route: &Route, session: &str, deployment: &str, now: Instant) {
    pin(live, route, session, deployment, now);
    let shared = &live.registry.shared;
    shared
        .remember_session(&key(route, session), deployment, SESSION_TTL)
        .await;
}

fn pin(live: &Live, route: &Route, session: &str, deployment: &str, now: Instant) {
    live.registry.store().put(
        &key(route, session),
        Some(Record([id_hash(deployment), 0, 0, 0])),
        Some(SESSION_TTL),
        now,
    );
}

/// In a fleet, the session may have been served by another instance: read
/// its binding (one read, for sticky requests only) before planning.
pub async fn fetch(live: &Live, route: &Route, session: &str) {
    let found = live
        .registry
        .shared
        .recall_session(&key(route, session))
        .await;
    if let Some(dep) = found {
        pin(live, route, session, &dep, Instant::now());
    }
}
