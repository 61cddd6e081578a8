//! Stored Responses-API answers (`store: true`, the API's default), so that
//! `previous_response_id` can continue a conversation served by any
//! deployment and `GET`/`DELETE /v1/responses/{id}` work. Behind a small
//! trait so that a shared backend (Redis, the usage store) can hold them for
//! many instances later; the memory store here is bounded in entries and
//! bytes, and entries expire after their TTL.

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

/// One stored answer: the conversation up to and including it (as the IR,
/// instructions left out: they are not inherited), and the Response body as
/// the client got it.
#[derive(Debug, Clone)]
pub struct Stored {
    pub history: Arc<Vec<Message>>,
    pub body: Bytes,
}

pub trait ResponseStore: Send + Sync {
    fn get(&self, id: &str) -> Option<Stored>;
    fn put(&self, id: String, stored: Stored);
    /// `true` when there was such a response.
    fn delete(&self, id: &str) -> bool;
    /// Bring `id` from a slower backing store into reach of [`Self::get`]
    /// (called once, before a request that names it).
    fn load<'a>(&'a self, _id: &'a str) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async {})
    }
    /// Keep a copy another instance stored, here only (no write-through).
    fn keep_local(&self, id: String, stored: Stored) {
        self.put(id, stored);
    }
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

impl ResponseStore for LedgerResponses {
    fn get(&self, id: &str) -> Option<Stored> {
        self.memory.get(id)
    }

    fn keep_local(&self, id: String, stored: Stored) {
        self.memory.put(id, stored);
    }

    fn put(&self, id: String, stored: Stored) {
        let now = crate::usage::query::now_ms();
        let ttl = i64::try_from(self.store.store_responses.as_millis()).unwrap_or(i64::MAX);
        match serde_json::to_string(&*stored.history) {
            Ok(history) => self.store.send(Write::PutResponse(StoredResponse {
                id: id.clone(),
                created_at_ms: now,
                expires_at_ms: now.saturating_add(ttl),
                body: String::from_utf8_lossy(&stored.body).into_owned(),
                history,
            })),
            Err(e) => tracing::warn!("a stored response could not be encoded: {e}"),
        }
        self.memory.put(id, stored);
    }

    fn delete(&self, id: &str) -> bool {
        self.store.send(Write::DeleteResponse(id.to_owned()));
        if let Ok(mut d) = self.deleted.lock() {
            if d.len() >= TOMBSTONES {
                d.pop_front();
            }
            d.push_back(id.to_owned());
        }
        self.memory.delete(id)
    }

    fn load<'a>(&'a self, id: &'a str) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            if self.memory.get(id).is_some() || self.was_deleted(id) {
                return;
            }
            let found = match self.store.get_response(id).await {
                Ok(f) => f,
                Err(e) => {
                    tracing::warn!(store = %self.store.name, "a stored response could not be read: {e}");
                    return;
                }
            };
            let Some(r) = found else { return };
            match serde_json::from_str::<Vec<Message>>(&r.history) {
                Ok(history) => self.memory.put(
                    id.to_owned(),
                    Stored {
                        history: Arc::new(history),
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
            .map(|m| {
                64 + m.text().len()
                    + m.tool_calls
                        .iter()
                        .map(|c| c.arguments.len())
                        .sum::<usize>()
            })
            .sum::<usize>()
}

impl ResponseStore for MemoryResponses {
    fn get(&self, id: &str) -> Option<Stored> {
        let mut g = self.inner.lock().ok()?;
        let expired = match g.map.get(id) {
            None => return None,
            Some((_, at, _)) => at.elapsed() > self.ttl,
        };
        if expired {
            remove(&mut g, id);
            return None;
        }
        g.map.get(id).map(|(s, _, _)| s.clone())
    }

    fn put(&self, id: String, stored: Stored) {
        let size = size_of(&stored);
        if size > self.max_bytes {
            return;
        }
        let Ok(mut g) = self.inner.lock() else { return };
        remove(&mut g, &id);
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
        g.order.push_back(id.clone());
        g.map.insert(id, (stored, Instant::now(), size));
    }

    fn delete(&self, id: &str) -> bool {
        self.inner
            .lock()
            .map(|mut g| remove(&mut g, id))
            .unwrap_or(false)
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
            history: Arc::new(vec![Message {
                role: Role::User,
                content: vec![ContentPart::Text(text.into())],
                ..Message::default()
            }]),
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
        assert!(s.delete("b"));
        assert!(!s.delete("b"));
        // Bounded in bytes too: a big entry pushes out the rest.
        let s = MemoryResponses::new(Duration::from_secs(60), 100, 800);
        s.put("x".into(), stored(&"x".repeat(100)));
        s.put("y".into(), stored(&"y".repeat(300)));
        assert!(s.get("x").is_none(), "264 + 664 bytes do not fit in 800");
        assert!(s.get("y").is_some());
        s.put("z".into(), stored(&"z".repeat(1000)));
        assert!(s.get("z").is_none(), "larger than the whole store");
    }
}
