//! The shared store for fleets: PostgreSQL through a bounded pool. The same
//! schema, migrations and answers as SQLite (`schema.rs`); the writer is a
//! task that drains the same queue, one transaction a batch.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use tokio::sync::mpsc;
use tokio_postgres::types::ToSql;
use tokio_postgres::NoTls;

use super::query::{GroupBy, Part, Range};
use super::record::{self, IssuedKey, StoredResponse, Totals, UsageRow, Write};
use super::schema as sql;
use super::writer::{Batch, Job, Outcome};

/// The pool's bound: the writer and the admin reads share it.
const POOL: usize = 4;
/// Rows a single INSERT carries (18 parameters each, far below the
/// protocol's 65 535).
const ROWS_PER_INSERT: usize = 256;

fn err(e: impl std::error::Error) -> String {
    // The driver's "db error" says nothing alone: the server's message is
    // its source. Neither names the password.
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

pub struct Postgres {
    pool: Pool,
}

/// Connect, migrate, start the writer task on `rx`.
pub async fn open(
    url: &str,
    rx: mpsc::Receiver<Job>,
    outcome: Outcome,
) -> Result<(Postgres, tokio::task::JoinHandle<()>), String> {
    let mut cfg = tokio_postgres::Config::from_str(url)
        .map_err(|e| format!("usage.url is not a PostgreSQL URL: {e}"))?;
    cfg.connect_timeout(Duration::from_secs(3));
    let mgr = Manager::from_config(
        cfg,
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let pool = Pool::builder(mgr)
        .max_size(POOL)
        .runtime(Runtime::Tokio1)
        .wait_timeout(Some(Duration::from_secs(3)))
        .create_timeout(Some(Duration::from_secs(3)))
        .recycle_timeout(Some(Duration::from_secs(3)))
        .build()
        .map_err(err)?;
    migrate(&pool).await?;
    let writer_pool = pool.clone();
    let writer = tokio::spawn(write_loop(writer_pool, rx, outcome));
    Ok((Postgres { pool }, writer))
}

/// Every migration in one transaction under an advisory lock: instances
/// starting together take turns (even `CREATE TABLE IF NOT EXISTS` races
/// between two sessions otherwise).
async fn migrate(pool: &Pool) -> Result<(), String> {
    let mut c = pool
        .get()
        .await
        .map_err(|e| format!("cannot reach PostgreSQL: {e}"))?;
    let tx = c.transaction().await.map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock(7261730001)", &[])
        .await
        .map_err(err)?;
    tx.batch_execute(sql::MIGRATIONS_TABLE).await.map_err(err)?;
    for (i, m) in sql::MIGRATIONS.iter().enumerate() {
        let version = i as i64 + 1;
        let done = tx
            .query_opt(
                "SELECT version FROM switchyard_migrations WHERE version = $1",
                &[&version],
            )
            .await
            .map_err(err)?;
        if done.is_some() {
            continue;
        }
        tx.batch_execute(m)
            .await
            .map_err(|e| format!("migration {version}: {}", err(e)))?;
        tx.execute(
            "INSERT INTO switchyard_migrations (version, applied_at) VALUES ($1, $2)",
            &[&version, &super::query::now_ms()],
        )
        .await
        .map_err(err)?;
    }
    tx.commit().await.map_err(err)
}

async fn write_loop(pool: Pool, mut rx: mpsc::Receiver<Job>, outcome: Outcome) {
    let mut batch = Batch::default();
    while batch.fill(&mut rx).await {
        let rows = batch.rows.len();
        match write_batch(&pool, &batch).await {
            Ok(()) => outcome.written(rows),
            Err(e) => outcome.failed(rows, &e),
        }
        batch.clear();
    }
}

fn clamp(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A row's values in column order, typed as the columns are.
fn row_values(r: &UsageRow) -> [Box<dyn ToSql + Sync + Send>; sql::ROW_COLUMNS] {
    let s = |v: &Option<std::sync::Arc<str>>| v.as_deref().map(str::to_owned);
    [
        Box::new(r.request_id.clone()),
        Box::new(r.ts_ms),
        Box::new(s(&r.client)),
        Box::new(s(&r.key_id)),
        Box::new(s(&r.route)),
        Box::new(s(&r.model)),
        Box::new(s(&r.deployment)),
        Box::new(i64::from(r.status)),
        Box::new(r.outcome.to_owned()),
        Box::new(i64::from(r.stream)),
        Box::new(r.cache.to_owned()),
        Box::new(clamp(r.input_tokens)),
        Box::new(clamp(r.output_tokens)),
        Box::new(clamp(r.cached_input_tokens)),
        Box::new(r.cost_usd),
        Box::new(r.latency_ms),
        Box::new(r.ttfb_ms),
        Box::new(i64::from(r.attempts)),
        Box::new(i64::from(r.usage_estimated)),
        Box::new(r.task.clone()),
        Box::new(i64::from(r.shadow)),
    ]
}

/// `INSERT … VALUES (…), (…)` for `n` rows.
fn multi_insert(n: usize) -> String {
    let head = &sql::INSERT_ROW[..sql::INSERT_ROW.find("VALUES").unwrap_or(0)];
    let mut s = String::with_capacity(head.len() + n * 100);
    s.push_str(head);
    s.push_str("VALUES ");
    let mut p = 0;
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push('(');
        for j in 0..sql::ROW_COLUMNS {
            if j > 0 {
                s.push(',');
            }
            p += 1;
            s.push('$');
            s.push_str(&p.to_string());
        }
        s.push(')');
    }
    s
}

async fn write_batch(pool: &Pool, b: &Batch) -> Result<(), String> {
    let mut c = pool.get().await.map_err(err)?;
    let tx = c.transaction().await.map_err(err)?;
    for chunk in b.rows.chunks(ROWS_PER_INSERT) {
        let values: Vec<_> = chunk.iter().flat_map(row_values).collect();
        let refs: Vec<&(dyn ToSql + Sync)> = values
            .iter()
            .map(|v| v.as_ref() as &(dyn ToSql + Sync))
            .collect();
        tx.execute(multi_insert(chunk.len()).as_str(), &refs)
            .await
            .map_err(err)?;
    }
    let upsert_day = tx
        .prepare_cached(&sql::numbered(sql::UPSERT_DAY))
        .await
        .map_err(err)?;
    for (k, t) in record::rollup(&b.rows) {
        tx.execute(
            &upsert_day,
            &[
                &k.day,
                &&*k.client,
                &&*k.route,
                &&*k.model,
                &&*k.deployment,
                &t.requests,
                &t.errors,
                &t.cache_hits,
                &t.input_tokens,
                &t.output_tokens,
                &t.cached_input_tokens,
                &t.cost_usd,
            ],
        )
        .await
        .map_err(err)?;
    }
    let key_use = tx
        .prepare_cached(&sql::numbered(sql::UPSERT_KEY_USE))
        .await
        .map_err(err)?;
    for (k, at) in record::last_used(&b.rows) {
        tx.execute(&key_use, &[&&*k, &at]).await.map_err(err)?;
    }
    for w in &b.other {
        match w {
            Write::PutResponse(s) => {
                tx.execute(
                    sql::numbered(sql::PUT_RESPONSE).as_str(),
                    &[
                        &s.id,
                        &s.created_at_ms,
                        &s.expires_at_ms,
                        &s.body,
                        &s.history,
                    ],
                )
                .await
                .map_err(err)?;
            }
            Write::DeleteResponse(id) => {
                tx.execute(sql::numbered(sql::DELETE_RESPONSE).as_str(), &[id])
                    .await
                    .map_err(err)?;
            }
            Write::Row(_) => {}
        }
    }
    if let Some(s) = b.sweep {
        tx.execute(
            sql::numbered(sql::DELETE_OLD_ROWS).as_str(),
            &[&s.rows_before_ms],
        )
        .await
        .map_err(err)?;
        tx.execute(
            sql::numbered(sql::DELETE_EXPIRED_RESPONSES).as_str(),
            &[&s.now_ms],
        )
        .await
        .map_err(err)?;
    }
    tx.commit().await.map_err(err)
}

impl Postgres {
    async fn client(&self) -> Result<deadpool_postgres::Object, String> {
        self.pool.get().await.map_err(err)
    }

    pub async fn totals(
        &self,
        by: GroupBy,
        range: Range,
        parts: Vec<Part>,
    ) -> Result<Vec<Vec<(String, Totals)>>, String> {
        let c = self.client().await?;
        let mut out = Vec::with_capacity(parts.len());
        for p in parts {
            let one = range.client.is_some();
            let (text, lo, hi) = match p {
                Part::Rows(a, b) => (sql::rows_totals(by.column(), one), a, b),
                Part::Days(a, b) => (sql::days_totals(by.column(), one), a, b),
            };
            let st = c.prepare_cached(&sql::numbered(&text)).await.map_err(err)?;
            let rows = match &range.client {
                Some(client) => c.query(&st, &[&lo, &hi, client]).await,
                None => c.query(&st, &[&lo, &hi]).await,
            }
            .map_err(err)?;
            out.push(
                rows.iter()
                    .map(|r| {
                        (
                            r.get::<_, String>(0),
                            Totals {
                                requests: r.get(1),
                                errors: r.get(2),
                                cache_hits: r.get(3),
                                input_tokens: r.get(4),
                                output_tokens: r.get(5),
                                cached_input_tokens: r.get(6),
                                cost_usd: r.get::<_, Option<f64>>(7).unwrap_or(0.0),
                            },
                        )
                    })
                    .collect(),
            );
        }
        Ok(out)
    }

    pub async fn insert_key(&self, k: IssuedKey) -> Result<(), String> {
        let c = self.client().await?;
        c.execute(
            sql::numbered(sql::INSERT_KEY).as_str(),
            &[&k.id, &k.client, &k.sha256, &k.created_at_ms],
        )
        .await
        .map(drop)
        .map_err(err)
    }

    pub async fn revoke_key(
        &self,
        client: String,
        id: String,
        now_ms: i64,
    ) -> Result<bool, String> {
        let c = self.client().await?;
        c.execute(
            sql::numbered(sql::REVOKE_KEY).as_str(),
            &[&now_ms, &id, &client],
        )
        .await
        .map(|n| n > 0)
        .map_err(err)
    }

    pub async fn active_keys(&self) -> Result<Vec<IssuedKey>, String> {
        let c = self.client().await?;
        let rows = c.query(sql::ACTIVE_KEYS, &[]).await.map_err(err)?;
        Ok(rows
            .iter()
            .map(|r| IssuedKey {
                id: r.get(0),
                client: r.get(1),
                sha256: r.get(2),
                created_at_ms: r.get(3),
            })
            .collect())
    }

    pub async fn key_use(&self) -> Result<HashMap<String, i64>, String> {
        let c = self.client().await?;
        let rows = c.query(sql::KEY_USE, &[]).await.map_err(err)?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    pub async fn get_response(
        &self,
        id: String,
        now_ms: i64,
    ) -> Result<Option<StoredResponse>, String> {
        let c = self.client().await?;
        let row = c
            .query_opt(sql::numbered(sql::GET_RESPONSE).as_str(), &[&id, &now_ms])
            .await
            .map_err(err)?;
        Ok(row.map(|r| StoredResponse {
            id,
            created_at_ms: 0,
            body: r.get(0),
            history: r.get(1),
            expires_at_ms: r.get(2),
        }))
    }
}
