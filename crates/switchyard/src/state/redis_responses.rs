//! Stored Responses-API answers shared by the fleet: an answer stored on
//! one instance continues (`previous_response_id`) and reads back on any
//! other, and one deleted on any instance is gone on all of them at once.
//!
//! In front of the instance's own store ([`ResponseStore`]): written to
//! both (Redis in the background). Redis decides whether an answer exists:
//! before a request that names one, one read (bounded like every fleet
//! read) asks it — for the answer itself when this instance has no copy,
//! else only whether it was deleted. A delete removes the entry and leaves a
//! tombstone (for the stored answers' TTL) before it returns, so a local
//! copy, or an entry whose background write lands late, is never served
//! after it. While Redis is away the instance goes on with its own copies.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_protocol::ir::Message;

use super::fleet::Fleet;
use super::responses::{Pending, ResponseStore, Stored};

pub struct FleetResponses {
    inner: Arc<dyn ResponseStore>,
    fleet: Arc<Fleet>,
    ttl: Duration,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Shared {
    /// `null` for an answer an upstream holds (entries written before
    /// there were such answers have an array).
    history: Option<Vec<Message>>,
    body: String,
}

/// What Redis says of an answer.
enum Seen {
    Deleted,
    /// Its entry (when asked for) — absent when it expired or its write has
    /// not landed yet.
    Entry(Option<String>),
}

impl FleetResponses {
    pub fn new(inner: Arc<dyn ResponseStore>, fleet: Arc<Fleet>, ttl: Duration) -> Self {
        FleetResponses { inner, fleet, ttl }
    }

    fn key(&self, key: &str) -> String {
        self.fleet.key(&format!("response:{key}"))
    }

    fn tombstone(&self, key: &str) -> String {
        self.fleet.key(&format!("response-deleted:{key}"))
    }

    /// One read: the tombstone, and the entry when `entry` (`None`: Redis
    /// is away).
    async fn ask(&self, key: &str, entry: bool) -> Option<Seen> {
        let (k, t) = (self.key(key), self.tombstone(key));
        let (found, deleted): (Option<String>, bool) = self
            .fleet
            .read(|r| async move {
                let mut c = r.conn();
                if entry {
                    let (e, d): (Option<String>, Option<String>) = ::redis::cmd("MGET")
                        .arg(&k)
                        .arg(&t)
                        .query_async(&mut c)
                        .await?;
                    Ok((e, d.is_some()))
                } else {
                    let d: bool = ::redis::cmd("EXISTS").arg(&t).query_async(&mut c).await?;
                    Ok((None, d))
                }
            })
            .await?;
        Some(if deleted {
            Seen::Deleted
        } else {
            Seen::Entry(found)
        })
    }
}

impl ResponseStore for FleetResponses {
    fn get(&self, key: &str) -> Option<Stored> {
        self.inner.get(key)
    }

    fn put(&self, key: String, stored: Stored) {
        let shared = Shared {
            history: stored.history.as_deref().cloned(),
            body: String::from_utf8_lossy(&stored.body).into_owned(),
        };
        if let Ok(json) = serde_json::to_string(&shared) {
            self.fleet.set_later(self.key(&key), json, self.ttl);
        }
        self.inner.put(key, stored);
    }

    fn delete<'a>(&'a self, key: &'a str) -> Pending<'a, bool> {
        Box::pin(async move {
            let (k, t, ttl) = (self.key(key), self.tombstone(key), self.ttl);
            let removed: Option<u64> = self
                .fleet
                .read(|r| async move {
                    let mut c = r.conn();
                    let (n,): (u64,) = ::redis::pipe()
                        .del(&k)
                        .cmd("SET")
                        .arg(&t)
                        .arg(1)
                        .arg("PX")
                        .arg(ttl.as_millis().max(1) as u64)
                        .ignore()
                        .query_async(&mut c)
                        .await?;
                    Ok(n)
                })
                .await;
            let here = self.inner.delete(key).await;
            here || removed.is_some_and(|n| n > 0)
        })
    }

    fn load<'a>(&'a self, key: &'a str) -> Pending<'a, ()> {
        Box::pin(async move {
            let local = self.inner.get(key).is_some();
            match self.ask(key, !local).await {
                Some(Seen::Deleted) => self.inner.forget_local(key),
                Some(Seen::Entry(Some(json))) => {
                    if let Ok(s) = serde_json::from_str::<Shared>(&json) {
                        let stored = Stored {
                            history: s.history.map(Arc::new),
                            body: Bytes::from(s.body),
                        };
                        self.inner.keep_local(key.to_owned(), stored);
                    }
                }
                // Not in Redis (expired there, written before the fleet,
                // or Redis is away): the instance's own store may have it.
                Some(Seen::Entry(None)) | None if !local => self.inner.load(key).await,
                Some(Seen::Entry(None)) | None => {}
            }
        })
    }

    fn keep_local(&self, key: String, stored: Stored) {
        self.inner.keep_local(key, stored);
    }

    fn forget_local(&self, key: &str) {
        self.inner.forget_local(key);
    }
}
