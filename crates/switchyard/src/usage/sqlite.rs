//! The embedded store: one SQLite file in WAL mode. One writer thread owns
//! the write connection and drains the queue in batches (one transaction a
//! batch); reads (admin, start-up) use a second connection, which WAL lets
//! run beside the writer.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{params, Connection, OptionalExtension};
use tokio::sync::mpsc;

use super::query::{GroupBy, Part, Range};
use super::record::{self, IssuedKey, StoredResponse, Totals, Write};
use super::schema as sql;
use super::writer::{Batch, Job, Outcome};

fn err(e: rusqlite::Error) -> String {
    e.to_string()
}

fn connect(path: &Path) -> Result<Connection, String> {
    let c = Connection::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    // WAL: readers never block the writer; NORMAL: a commit waits for the
    // WAL write, not for a checkpoint's fsync (a crash loses at most the
    // last batches, never the file).
    c.pragma_update(None, "journal_mode", "WAL").map_err(err)?;
    c.pragma_update(None, "synchronous", "NORMAL")
        .map_err(err)?;
    c.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(err)?;
    Ok(c)
}

fn migrate(c: &mut Connection) -> Result<(), String> {
    c.execute(sql::MIGRATIONS_TABLE, []).map_err(err)?;
    for (i, m) in sql::MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        let done: Option<i64> = c
            .query_row(
                "SELECT version FROM switchyard_migrations WHERE version = ?",
                [version],
                |r| r.get(0),
            )
            .optional()
            .map_err(err)?;
        if done.is_some() {
            continue;
        }
        let tx = c.transaction().map_err(err)?;
        tx.execute_batch(m)
            .map_err(|e| format!("migration {version}: {e}"))?;
        tx.execute(
            "INSERT INTO switchyard_migrations (version, applied_at) VALUES (?, ?)",
            params![version, super::query::now_ms()],
        )
        .map_err(err)?;
        tx.commit().map_err(err)?;
    }
    Ok(())
}

/// The read side, shared by admin handlers.
pub struct Sqlite {
    read: Arc<Mutex<Connection>>,
}

/// Open (and migrate) the file; start the writer thread on `rx`.
pub fn open(
    path: &Path,
    rx: mpsc::Receiver<Job>,
    outcome: Outcome,
) -> Result<(Sqlite, std::thread::JoinHandle<()>), String> {
    let mut w = connect(path)?;
    migrate(&mut w)?;
    let r = connect(path)?;
    let writer = std::thread::Builder::new()
        .name("switchyard-usage-writer".into())
        .spawn(move || write_loop(w, rx, outcome))
        .map_err(|e| format!("cannot start the usage writer: {e}"))?;
    Ok((
        Sqlite {
            read: Arc::new(Mutex::new(r)),
        },
        writer,
    ))
}

fn write_loop(mut c: Connection, mut rx: mpsc::Receiver<Job>, outcome: Outcome) {
    let mut batch = Batch::default();
    while batch.fill_blocking(&mut rx) {
        let rows = batch.rows.len();
        match write_batch(&mut c, &batch) {
            Ok(()) => outcome.written(rows),
            Err(e) => outcome.failed(rows, &e),
        }
        batch.clear();
    }
}

pub fn write_batch(c: &mut Connection, b: &Batch) -> Result<(), String> {
    let tx = c.transaction().map_err(err)?;
    {
        let mut ins = tx.prepare_cached(sql::INSERT_ROW).map_err(err)?;
        for r in &b.rows {
            ins.execute(params![
                r.request_id,
                r.ts_ms,
                r.client.as_deref(),
                r.key_id.as_deref(),
                r.route.as_deref(),
                r.model.as_deref(),
                r.deployment.as_deref(),
                r.status,
                r.outcome,
                r.stream,
                r.cache,
                clamp(r.input_tokens),
                clamp(r.output_tokens),
                clamp(r.cached_input_tokens),
                r.cost_usd,
                r.latency_ms,
                r.ttfb_ms,
                r.attempts,
                r.usage_estimated,
                r.task.as_deref(),
                r.shadow,
            ])
            .map_err(err)?;
        }
        let mut day = tx.prepare_cached(sql::UPSERT_DAY).map_err(err)?;
        for (k, t) in record::rollup(&b.rows) {
            day.execute(params![
                k.day,
                &*k.client,
                &*k.route,
                &*k.model,
                &*k.deployment,
                t.requests,
                t.errors,
                t.cache_hits,
                t.input_tokens,
                t.output_tokens,
                t.cached_input_tokens,
                t.cost_usd
            ])
            .map_err(err)?;
        }
        let mut used = tx.prepare_cached(sql::UPSERT_KEY_USE).map_err(err)?;
        for (k, at) in record::last_used(&b.rows) {
            used.execute(params![&*k, at]).map_err(err)?;
        }
        for w in &b.other {
            match w {
                Write::PutResponse(s) => {
                    tx.execute(
                        sql::PUT_RESPONSE,
                        params![s.id, s.created_at_ms, s.expires_at_ms, s.body, s.history],
                    )
                    .map_err(err)?;
                }
                Write::DeleteResponse(id) => {
                    tx.execute(sql::DELETE_RESPONSE, [id]).map_err(err)?;
                }
                Write::Row(_) => {}
            }
        }
        if let Some(s) = b.sweep {
            tx.execute(sql::DELETE_OLD_ROWS, [s.rows_before_ms])
                .map_err(err)?;
            tx.execute(sql::DELETE_EXPIRED_RESPONSES, [s.now_ms])
                .map_err(err)?;
        }
    }
    tx.commit().map_err(err)
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Sqlite {
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        let read = self.read.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = read
                .lock()
                .map_err(|_| "usage store lock poisoned".to_string())?;
            f(&mut c)
        })
        .await
        .map_err(|e| e.to_string())?
    }

    pub async fn totals(
        &self,
        by: GroupBy,
        range: Range,
        parts: Vec<Part>,
    ) -> Result<Vec<Vec<(String, Totals)>>, String> {
        self.with(move |c| {
            parts
                .into_iter()
                .map(|p| part_totals(c, by, &range, p))
                .collect()
        })
        .await
    }

    pub async fn insert_key(&self, k: IssuedKey) -> Result<(), String> {
        self.with(move |c| {
            c.execute(
                sql::INSERT_KEY,
                params![k.id, k.client, k.sha256, k.created_at_ms],
            )
            .map(drop)
            .map_err(err)
        })
        .await
    }

    pub async fn revoke_key(
        &self,
        client: String,
        id: String,
        now_ms: i64,
    ) -> Result<bool, String> {
        self.with(move |c| {
            c.execute(sql::REVOKE_KEY, params![now_ms, id, client])
                .map(|n| n > 0)
                .map_err(err)
        })
        .await
    }

    pub async fn active_keys(&self) -> Result<Vec<IssuedKey>, String> {
        self.with(|c| {
            let mut s = c.prepare(sql::ACTIVE_KEYS).map_err(err)?;
            let rows = s
                .query_map([], |r| {
                    Ok(IssuedKey {
                        id: r.get(0)?,
                        client: r.get(1)?,
                        sha256: r.get(2)?,
                        created_at_ms: r.get(3)?,
                    })
                })
                .map_err(err)?;
            rows.collect::<Result<Vec<_>, _>>().map_err(err)
        })
        .await
    }

    pub async fn key_use(&self) -> Result<HashMap<String, i64>, String> {
        self.with(|c| {
            let mut s = c.prepare(sql::KEY_USE).map_err(err)?;
            let rows = s
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .map_err(err)?;
            rows.collect::<Result<HashMap<_, _>, _>>().map_err(err)
        })
        .await
    }

    pub async fn get_response(
        &self,
        id: String,
        now_ms: i64,
    ) -> Result<Option<StoredResponse>, String> {
        self.with(move |c| {
            c.query_row(sql::GET_RESPONSE, params![id, now_ms], |r| {
                Ok(StoredResponse {
                    id: id.clone(),
                    created_at_ms: 0,
                    body: r.get(0)?,
                    history: r.get(1)?,
                    expires_at_ms: r.get(2)?,
                })
            })
            .optional()
            .map_err(err)
        })
        .await
    }
}

fn part_totals(
    c: &Connection,
    by: GroupBy,
    range: &Range,
    part: Part,
) -> Result<Vec<(String, Totals)>, String> {
    let one = range.client.is_some();
    let (text, lo, hi) = match part {
        Part::Rows(a, b) => (sql::rows_totals(by.column(), one), a, b),
        Part::Days(a, b) => (sql::days_totals(by.column(), one), a, b),
    };
    let mut s = c.prepare_cached(&text).map_err(err)?;
    let map = |r: &rusqlite::Row<'_>| {
        Ok((
            r.get::<_, String>(0)?,
            Totals {
                requests: r.get(1)?,
                errors: r.get(2)?,
                cache_hits: r.get(3)?,
                input_tokens: r.get(4)?,
                output_tokens: r.get(5)?,
                cached_input_tokens: r.get(6)?,
                cost_usd: r.get::<_, Option<f64>>(7)?.unwrap_or(0.0),
            },
        ))
    };
    let rows = match &range.client {
        Some(client) => s.query_map(params![lo, hi, client], map),
        None => s.query_map(params![lo, hi], map),
    }
    .map_err(err)?;
    rows.collect::<Result<Vec<_>, _>>().map_err(err)
}
