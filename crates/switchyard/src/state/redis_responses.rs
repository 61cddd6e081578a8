//! Stored Responses-API answers shared by the fleet: an answer stored on
//! one instance continues (`previous_response_id`) and reads back on any
//! other. In front of the instance's own store ([`ResponseStore`]): written
//! to both (Redis in the background), read from Redis only when this
//! instance does not have the id — one read, before the request that
//! names it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use switchyard_protocol::ir::Message;

use super::fleet::Fleet;
use super::responses::{ResponseStore, Stored};

pub struct FleetResponses {
    inner: Arc<dyn ResponseStore>,
    fleet: Arc<Fleet>,
    ttl: Duration,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Shared {
    history: Vec<Message>,
    body: String,
}

impl FleetResponses {
    pub fn new(inner: Arc<dyn ResponseStore>, fleet: Arc<Fleet>, ttl: Duration) -> Self {
        FleetResponses { inner, fleet, ttl }
    }

    fn key(&self, id: &str) -> String {
        self.fleet.key(&format!("response:{id}"))
    }
}

impl ResponseStore for FleetResponses {
    fn get(&self, id: &str) -> Option<Stored> {
        self.inner.get(id)
    }

    fn put(&self, id: String, stored: Stored) {
        let shared = Shared {
            history: (*stored.history).clone(),
            body: String::from_utf8_lossy(&stored.body).into_owned(),
        };
        if let Ok(json) = serde_json::to_string(&shared) {
            self.fleet.set_later(self.key(&id), json, self.ttl);
        }
        self.inner.put(id, stored);
    }

    fn delete(&self, id: &str) -> bool {
        self.fleet.delete_later(self.key(id));
        self.inner.delete(id)
    }

    fn load<'a>(&'a self, id: &'a str) -> Pin<Box<dyn Future<Output = ()> + Send + 'a>> {
        Box::pin(async move {
            self.inner.load(id).await;
            if self.inner.get(id).is_some() {
                return;
            }
            let found = self.fleet.get(self.key(id)).await;
            if let Some(s) = found.and_then(|j| serde_json::from_str::<Shared>(&j).ok()) {
                let stored = Stored {
                    history: Arc::new(s.history),
                    body: Bytes::from(s.body),
                };
                self.inner.keep_local(id.to_owned(), stored);
            }
        })
    }

    fn keep_local(&self, id: String, stored: Stored) {
        self.inner.keep_local(id, stored);
    }
}
