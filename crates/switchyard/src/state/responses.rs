//! Stored Responses-API answers (`store: true`, the API's default), so that
//! `previous_response_id` can continue a conversation served by any
//! deployment and `GET`/`DELETE /v1/responses/{id}` work. Behind a small
//! trait so that a shared backend (Redis, the usage store) can hold them for
//! many instances; the memory store here is bounded in entries and bytes,
//! and entries expire after their TTL.
//!
//! A stored answer belongs to the client that created it: every store is
//! keyed by [`owned_key`] (owner and id), so another client's lookup of the
//! same id finds nothing, exactly as an unknown id. Answers of the Responses
//! passthrough are kept too, without a history (the upstream holds the
//! conversation): recording their ids is what lets the passthrough forward a
//! `previous_response_id` only for the client it was given to.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use switchyard_protocol::ir::Message;
use tokio::time::Instant;

use crate::usage::record::{StoredResponse, Write};
use crate::usage::UsageStore;

/// One stored answer: the Response body as the client got it, and the
/// conversation up to and including it (as the IR, instructions left out:
/// they are not inherited) — `None` when an upstream's Responses API
/// answered through the passthrough and holds the conversation itself.
#[derive(Debug, Clone)]
pub struct Stored {
    pub history: Option<Arc<Vec<Message>>>,
    pub body: Bytes,
}

/// The store key of response `id` owned by `owner` (a client id; `None` on
/// an open gateway, whose requests are one tenant).
///
/// Unambiguous: the id is escaped (`%` → `%25`, `/` → `%2F`), so in a
/// client's key the last `/` always separates owner from id, and an open
/// gateway's keys have no `/` at all — client `team` asking for id
/// `sub/resp_1` gets `team/sub%2Fresp_1`, never `team/sub`'s `resp_1`.
/// Ids the gateway and the upstreams issue (`resp_…`) need no escaping, so
/// keys written before the escaping was added read back unchanged.
pub fn owned_key(owner: Option<&str>, id: &str) -> String {
    let mut key = String::with_capacity(owner.map_or(0, |o| o.len() + 1) + id.len());
    if let Some(o) = owner {
        key.push_str(o);
        key.push('/');
    }
    for c in id.chars() {
        match c {
            '%' => key.push_str("%25"),
            '/' => key.push_str("%2F"),
            c => key.push(c),
        }
    }
    key
}

pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The stores take keys made by [`owned_key`].
pub trait ResponseStore: Send + Sync {
    fn get(&self, key: &str) -> Option<Stored>;
    fn put(&self, key: String, stored: Stored);
    /// Remove it wherever it is kept (in a fleet: on every instance by the
    /// time this returns); `true` when there was such a response.
    fn delete<'a>(&'a self, key: &'a str) -> Pending<'a, bool>;
    /// Bring `key` from a slower backing store into reach of [`Self::get`]
    /// — or, in a fleet, drop the local copy of an answer another instance
    /// deleted (called once, before a request that names it).
    fn load<'a>(&'a self, _key: &'a str) -> Pending<'a, ()> {
        Box::pin(async {})
    }
    /// Keep a copy another instance stored, here only (no write-through).
    fn keep_local(&self, key: String, stored: Stored) {
        self.put(key, stored);
    }
    /// Drop this instance's copy only: another instance deleted it.
    fn forget_local(&self, key: &str);
}

/// Memory in front of the usage store: answers are written through (off
/// the request path, by the store's writer) and read back from the store
/// only when memory no longer has them — after a restart, or on another
/// instance sharing PostgreSQL.
pub struct LedgerResponses {
    memory: MemoryResponses,
    store: Arc<UsageStore>,
    /// Ids deleted here whose delete may still wait in the writer's queue:
    /// never read back from the store (bounded; deletes are rare).
    deleted: Mutex<VecDeque<String>>,
}

const TOMBSTONES: usize = 10_000;

impl LedgerResponses {
    pub fn new(store: Arc<UsageStore>) -> Self {
        LedgerResponses {
            memory: MemoryResponses::new(store.store_responses, 10_000, 256 << 20),
            store,
            deleted: Mutex::default(),
        }
    }

    fn was_deleted(&self, id: &str) -> bool {
        self.deleted.lock().is_ok_and(|d| d.iter().any(|x| x == id))
    }
}

impl LedgerResponses {
    /// Never read `key` back from the store again (its delete may still
    /// wait in the writer's queue, or another instance deleted it).
    fn tombstone(&self, key: &str) {
        if let Ok(mut d) = self.deleted.lock() {
            if d.len() >= TOMBSTONES {
                d.pop_front();
            }
            d.push_back(key.to_owned());
        }
    }
}

/// A history as the usage store keeps it: JSON, `null` for an answer the
/// upstream holds (rows written before there were such answers hold an
/// array, and read back as they were).
pub fn encode_history(h: Option<&Arc<Vec<Message>>>) -> Result<String, serde_json::Error> {
    serde_json::to_string(&h.map(|h| &**h))
}

pub fn decode_history(text: &str) -> Result<Option<Arc<Vec<Message>>>, serde_json::Error> {
    Ok(serde_json::from_str::<Option<Vec<Message>>>(text)?.map(Arc::new))
}

impl ResponseStore for LedgerResponses {
    fn get(&self, key: &str) -> Option<Stored> {
        self.memory.get(key)
    }

    fn keep_local(&self, key: String, stored: Stored) {
        self.memory.put(key, stored);
    }

    fn forget_local(&self, key: &str) {
        self.tombstone(key);
        self.memory.remove(key);
    }

    fn put(&self, key: String, stored: Stored) {
        let now = crate::usage::query::now_ms();
        let ttl = i64::try_from(self.store.store_responses.as_millis()).unwrap_or(i64::MAX);
        match encode_history(stored.history.as_ref()) {
            Ok(history) => self.store.send(Write::PutResponse(StoredResponse {
                id: key.clone(),
                created_at_ms: now,
                expires_at_ms: now.saturating_add(ttl),
                body: String::from_utf8_lossy(&stored.body).into_owned(),
                history,
            })),
            Err(e) => tracing::warn!("a stored response could not be encoded: {e}"),
        }
        self.memory.put(key, stored);
    }

    fn delete<'a>(&'a self, key: &'a str) -> Pending<'a, bool> {
        self.store.send(Write::DeleteResponse(key.to_owned()));
        self.tombstone(key);
        Box::pin(std::future::ready(self.memory.remove(key)))
    }

    fn load<'a>(&'a self, key: &'a str) -> Pending<'a, ()> {
        Box::pin(async move {
            if self.memory.get(key).is_some() || self.was_deleted(key) {
                return;
            }
            let found = match self.store.get_response(key).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(store = %self.store.name, "a stored response could not be read: {e}");
                    return;
                }
            };
            let Some(r) = found else { return };
            match decode_history(&r.history) {
                Ok(history) => self.memory.put(
                    key.to_owned(),
                    Stored {
                        history,
                        body: Bytes::from(r.body),
                    },
                ),
                Err(e) => tracing::warn!("a stored response could not be decoded: {e}"),
            }
        })
    }
}

/// The in-process store: oldest entries go first when it is full.
pub struct MemoryResponses {
    inner: Mutex<Inner>,
    ttl: Duration,
    max_entries: usize,
    max_bytes: usize,
}

#[derive(Default)]
struct Inner {
    map: HashMap<String, (Stored, Instant, usize)>,
    /// Insertion order, for eviction; ids already deleted are skipped.
    order: VecDeque<String>,
    bytes: usize,
}

impl MemoryResponses {
    pub fn new(ttl: Duration, max_entries: usize, max_bytes: usize) -> Self {
        MemoryResponses {
            inner: Mutex::new(Inner::default()),
            ttl,
            max_entries,
            max_bytes,
        }
    }
}

impl Default for MemoryResponses {
    /// 30 days (the contract's default), 10 000 answers, 256 MiB.
    fn default() -> Self {
        MemoryResponses::new(Duration::from_secs(30 * 86_400), 10_000, 256 << 20)
    }
}

/// What an entry costs: its body and the text of its history.
fn size_of(s: &Stored) -> usize {
    s.body.len()
        + s.history
            .iter()
            .flat_map(|h| h.iter())
            .map(|m| {
                64 + m.text().len()
                    + m.tool_calls
                        .iter()
                        .map(|c| c.arguments.len())
                        .sum::<usize>()
            })
            .sum::<usize>()
}

impl MemoryResponses {
    /// Remove `key`; `true` when it was there.
    fn remove(&self, key: &str) -> bool {
        self.inner
            .lock()
            .map(|mut g| remove(&mut g, key))
            .unwrap_or(false)
    }
}

impl ResponseStore for MemoryResponses {
    fn get(&self, key: &str) -> Option<Stored> {
        let mut g = self.inner.lock().ok()?;
        let expired = match g.map.get(key) {
            None => return None,
            Some((_, at, _)) => at.elapsed() > self.ttl,
        };
        if expired {
            remove(&mut g, key);
            return None;
        }
        g.map.get(key).map(|(s, _, _)| s.clone())
    }

    fn put(&self, key: String, stored: Stored) {
        let size = size_of(&stored);
        if size > self.max_bytes {
            return;
        }
        let Ok(mut g) = self.inner.lock() else { return };
        remove(&mut g, &key);
        while !g.order.is_empty()
            && (g.map.len() >= self.max_entries || g.bytes + size > self.max_bytes)
        {
            if let Some(old) = g.order.pop_front() {
                if let Some((_, _, n)) = g.map.remove(&old) {
                    g.bytes -= n;
                }
            }
        }
        g.bytes += size;
        g.order.push_back(key.clone());
        g.map.insert(key, (stored, Instant::now(), size));
    }

    fn delete<'a>(&'a self, key: &'a str) -> Pending<'a, bool> {
        Box::pin(std::future::ready(self.remove(key)))
    }

    fn forget_local(&self, key: &str) {
        self.remove(key);
    }
}

fn remove(g: &mut Inner, id: &str) -> bool {
    match g.map.remove(id) {
        Some((_, _, n)) => {
            g.bytes -= n;
            if let Some(pos) = g.order.iter().position(|o| o == id) {
                g.order.remove(pos);
            }
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_protocol::ir::{ContentPart, Role};

    fn stored(text: &str) -> Stored {
        Stored {
            history: Some(Arc::new(vec![Message {
                role: Role::User,
                content: vec![ContentPart::Text(text.into())],
                ..Message::default()
            }])),
            body: Bytes::from(text.to_owned()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn entries_expire_after_their_ttl() {
        let s = MemoryResponses::new(Duration::from_secs(60), 10, 1 << 20);
        s.put("resp_1".into(), stored("a"));
        assert!(s.get("resp_1").is_some());
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(s.get("resp_1").is_none());
    }

    #[test]
    fn the_oldest_go_first_when_full_and_delete_says_whether_it_was_there() {
        let s = MemoryResponses::new(Duration::from_secs(60), 2, 1 << 20);
        s.put("a".into(), stored("1"));
        s.put("b".into(), stored("2"));
        s.put("c".into(), stored("3"));
        assert!(s.get("a").is_none());
        assert!(s.get("b").is_some() && s.get("c").is_some());
        let delete = |k| futures_util::FutureExt::now_or_never(s.delete(k)).unwrap();
        assert!(delete("b"));
        assert!(!delete("b"));
        // Bounded in bytes too: a big entry pushes out the rest.
        let s = MemoryResponses::new(Duration::from_secs(60), 100, 800);
        s.put("x".into(), stored(&"x".repeat(100)));
        s.put("y".into(), stored(&"y".repeat(300)));
        assert!(s.get("x").is_none(), "264 + 664 bytes do not fit in 800");
        assert!(s.get("y").is_some());
        s.put("z".into(), stored(&"z".repeat(1000)));
        assert!(s.get("z").is_none(), "larger than the whole store");
    }

    #[test]
    fn owner_keys_never_collide() {
        // `team` asking for `sub/resp_1` is not `team/sub` asking for `resp_1`.
        assert_ne!(
            owned_key(Some("team"), "sub/resp_1"),
            owned_key(Some("team/sub"), "resp_1")
        );
        // An open gateway's keys are never a client's.
        assert_ne!(
            owned_key(None, "team/resp_1"),
            owned_key(Some("team"), "resp_1")
        );
        // The escape itself cannot be forged.
        assert_ne!(
            owned_key(Some("team"), "sub%2Fresp_1"),
            owned_key(Some("team"), "sub/resp_1")
        );
        let pairs = [
            (Some("a"), "b/c"),
            (Some("a/b"), "c"),
            (Some("a%2Fb"), "c"),
            (Some("a"), "b%2Fc"),
            (None, "a/b/c"),
            (None, "a%2Fb%2Fc"),
            (Some(""), "a/b/c"),
        ];
        let keys: std::collections::HashSet<String> =
            pairs.iter().map(|(o, i)| owned_key(*o, i)).collect();
        assert_eq!(keys.len(), pairs.len(), "{keys:?}");
        // Ids the gateway issues keep the key they always had.
        assert_eq!(owned_key(Some("team"), "resp_1"), "team/resp_1");
        assert_eq!(owned_key(None, "resp_1"), "resp_1");
    }

    #[test]
    fn histories_read_back_as_written_and_old_rows_still_read() {
        let s = stored("hi");
        let text = encode_history(s.history.as_ref()).unwrap();
        assert_eq!(decode_history(&text).unwrap().unwrap()[0].text(), "hi");
        assert_eq!(encode_history(None).unwrap(), "null");
        assert!(decode_history("null").unwrap().is_none());
        // A row written before answers without history existed.
        let old = serde_json::to_string(&**s.history.as_ref().unwrap()).unwrap();
        assert!(decode_history(&old).unwrap().is_some());
    }
}
