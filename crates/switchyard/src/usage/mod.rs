//! USAGE: the cost ledger. One row per finished request, written in batches
//! off the request path (the usage sink only queues), daily rollups for
//! fast answers over months, virtual keys issued at run time (hashed), and
//! stored Responses-API answers. SQLite embedded, or PostgreSQL for fleets;
//! both behind [`UsageStore`], with the same schema and the same answers.
//!
//! The store being slow or down never slows or fails a request: the queue is
//! bounded, and what does not fit is dropped, counted and logged.

pub mod postgres;
pub mod query;
pub mod record;
pub mod schema;
pub mod sqlite;
pub mod writer;

use std::collections::HashMap;
use std::path::Path;

use tokio::sync::mpsc;

use crate::config::{Usage, UsageBackend};
use query::{GroupBy, Range};
use record::{IssuedKey, StoredResponse, Totals, Write};
use writer::{Job, Outcome, Sweep};

/// Rows the queue holds before it drops (a few seconds of a busy gateway;
/// ~300 bytes each).
pub const QUEUE: usize = 65_536;

enum Backend {
    Sqlite(sqlite::Sqlite),
    Postgres(postgres::Postgres),
}

pub struct UsageStore {
    backend: Backend,
    tx: mpsc::Sender<Job>,
    outcome: Outcome,
    /// Which store, for messages (`SQLite switchyard.db`, `PostgreSQL`).
    pub name: String,
    retention_ms: i64,
    pub store_responses: std::time::Duration,
}

impl UsageStore {
    /// Open the configured store (migrated, its writer running), or `None`
    /// for `store: off`.
    pub async fn open(cfg: &Usage, outcome: Outcome) -> Result<Option<UsageStore>, String> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let (backend, name) = match &cfg.store {
            UsageBackend::Off => return Ok(None),
            UsageBackend::Sqlite { path } => {
                let (s, _writer) = sqlite::open(Path::new(path), rx, outcome.clone())
                    .map_err(|e| format!("usage store (SQLite {path}): {e}"))?;
                (Backend::Sqlite(s), format!("SQLite {path}"))
            }
            UsageBackend::Postgres { url } => {
                let (p, _writer) = postgres::open(url.expose(), rx, outcome.clone())
                    .await
                    .map_err(|e| format!("usage store (PostgreSQL): {e}"))?;
                (Backend::Postgres(p), "PostgreSQL".to_string())
            }
        };
        Ok(Some(UsageStore {
            backend,
            tx,
            outcome,
            name,
            retention_ms: i64::try_from(cfg.retention.as_millis()).unwrap_or(i64::MAX),
            store_responses: cfg.store_responses,
        }))
    }

    /// Queue a write; never waits. A full queue drops it (counted, logged).
    pub fn send(&self, w: Write) {
        let row = matches!(w, Write::Row(_));
        if self.tx.try_send(Job::Write(w)).is_err() && row {
            self.outcome.dropped(1, "the write queue is full");
        }
    }

    /// Queue a write, waiting for room: bulk loads and the writer's own
    /// benchmark, never the request path (which uses [`Self::send`]).
    pub async fn feed(&self, w: Write) {
        let _ = self.tx.send(Job::Write(w)).await;
    }

    /// Ask the writer to delete what retention no longer keeps.
    pub fn sweep(&self) {
        let now_ms = query::now_ms();
        let _ = self.tx.try_send(Job::Sweep(Sweep {
            rows_before_ms: now_ms.saturating_sub(self.retention_ms),
            now_ms,
        }));
    }

    /// Totals per group over `range`, highest cost first.
    pub async fn totals(&self, by: GroupBy, range: Range) -> Result<Vec<(String, Totals)>, String> {
        let parts = query::split(range.since_ms, range.until_ms);
        let got = match &self.backend {
            Backend::Sqlite(s) => s.totals(by, range, parts).await,
            Backend::Postgres(p) => p.totals(by, range, parts).await,
        }?;
        Ok(query::merge(got))
    }

    /// What a client spent since `since_ms` (budgets, at start-up).
    pub async fn spent(&self, client: &str, since_ms: i64) -> Result<f64, String> {
        let range = Range {
            since_ms,
            until_ms: i64::MAX / 2,
            client: Some(client.to_owned()),
        };
        let rows = self.totals(GroupBy::Client, range).await?;
        Ok(rows.iter().map(|(_, t)| t.cost_usd).sum())
    }

    pub async fn insert_key(&self, k: IssuedKey) -> Result<(), String> {
        match &self.backend {
            Backend::Sqlite(s) => s.insert_key(k).await,
            Backend::Postgres(p) => p.insert_key(k).await,
        }
    }

    /// `true` when the key existed, was the client's and was live.
    pub async fn revoke_key(&self, client: &str, id: &str) -> Result<bool, String> {
        let (c, i, now) = (client.to_owned(), id.to_owned(), query::now_ms());
        match &self.backend {
            Backend::Sqlite(s) => s.revoke_key(c, i, now).await,
            Backend::Postgres(p) => p.revoke_key(c, i, now).await,
        }
    }

    pub async fn active_keys(&self) -> Result<Vec<IssuedKey>, String> {
        match &self.backend {
            Backend::Sqlite(s) => s.active_keys().await,
            Backend::Postgres(p) => p.active_keys().await,
        }
    }

    /// When each key was last used (Unix ms).
    pub async fn key_use(&self) -> Result<HashMap<String, i64>, String> {
        match &self.backend {
            Backend::Sqlite(s) => s.key_use().await,
            Backend::Postgres(p) => p.key_use().await,
        }
    }

    pub async fn get_response(&self, id: &str) -> Result<Option<StoredResponse>, String> {
        let (id, now) = (id.to_owned(), query::now_ms());
        match &self.backend {
            Backend::Sqlite(s) => s.get_response(id, now).await,
            Backend::Postgres(p) => p.get_response(id, now).await,
        }
    }

    /// Wait until everything queued before now is written (tests, shutdown).
    pub async fn flush(&self, within: std::time::Duration) -> bool {
        let (ack, done) = tokio::sync::oneshot::channel();
        let sent = tokio::time::timeout(within, self.tx.send(Job::Flush(ack))).await;
        matches!(sent, Ok(Ok(()))) && matches!(tokio::time::timeout(within, done).await, Ok(Ok(())))
    }
}
