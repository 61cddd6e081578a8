//! The usage store on its own, on a real SQLite file: migrations at every
//! start, daily rollups that keep answering after `retention` deleted the
//! request rows, and a queue that drops (and counts) what it cannot hold.

use std::sync::Arc;
use std::time::Duration;

use switchyard::config::{Usage, UsageBackend};
use switchyard::usage::query::{now_ms, GroupBy, Range};
use switchyard::usage::record::{UsageRow, Write, DAY_MS};
use switchyard::usage::writer::Outcome;
use switchyard::usage::UsageStore;

fn cfg(dir: &tempfile::TempDir, retention_days: u64) -> Usage {
    Usage {
        store: UsageBackend::Sqlite {
            path: dir.path().join("u.db").display().to_string(),
        },
        retention: Duration::from_secs(retention_days * 86_400),
        store_responses: Duration::from_secs(86_400),
    }
}

fn row(ts_ms: i64, route: &str, cost: f64) -> UsageRow {
    UsageRow {
        request_id: format!("r-{ts_ms}"),
        ts_ms,
        client: Some(Arc::from("team")),
        key_id: None,
        route: Some(Arc::from(route)),
        model: Some(Arc::from("m")),
        deployment: Some(Arc::from("p/m")),
        status: 200,
        outcome: "ok",
        usage_estimated: false,
        task: None,
        shadow: false,
        stream: false,
        cache: "off",
        input_tokens: 10,
        output_tokens: 20,
        cached_input_tokens: 0,
        cost_usd: cost,
        latency_ms: 5.0,
        ttfb_ms: None,
        attempts: 1,
    }
}

async fn open(u: &Usage, outcome: Outcome) -> UsageStore {
    UsageStore::open(u, outcome).await.unwrap().unwrap()
}

fn range(since_ms: i64, until_ms: i64) -> Range {
    Range {
        since_ms,
        until_ms,
        client: None,
    }
}

#[tokio::test]
async fn rollups_answer_for_days_whose_rows_retention_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let u = cfg(&dir, 1);
    let store = open(&u, Outcome::new(Default::default(), Default::default())).await;
    let today = now_ms().div_euclid(DAY_MS) * DAY_MS;
    // Noon, ten and five days ago; and now.
    for (days, route, cost) in [
        (10, "chat", 1.0),
        (10, "chat", 2.0),
        (5, "cheap", 4.0),
        (0, "chat", 8.0),
    ] {
        let ts = if days == 0 {
            now_ms() - 1
        } else {
            today - days * DAY_MS + DAY_MS / 2
        };
        store.send(Write::Row(row(ts, route, cost)));
    }
    assert!(store.flush(Duration::from_secs(10)).await);
    let month = range(today - 30 * DAY_MS, now_ms());
    let before = store.totals(GroupBy::Route, month.clone()).await.unwrap();
    // Retention (1 day) deletes the old request rows…
    store.sweep();
    assert!(store.flush(Duration::from_secs(10)).await);
    let ten_days_ago_noon = range(
        today - 10 * DAY_MS + DAY_MS / 4,
        today - 10 * DAY_MS + DAY_MS * 3 / 4,
    );
    assert!(
        store
            .totals(GroupBy::Route, ten_days_ago_noon)
            .await
            .unwrap()
            .is_empty(),
        "a part of a day reads request rows, and they are gone"
    );
    // …and whole days still answer from the rollups, the same as before.
    let after = store.totals(GroupBy::Route, month).await.unwrap();
    assert_eq!(before, after);
    let chat = after.iter().find(|(k, _)| k == "chat").unwrap().1;
    assert_eq!((chat.requests, chat.cost_usd), (3, 11.0));
    assert_eq!(after[0].0, "chat", "highest cost first");
    // The spend of a window, as budgets rebuild it.
    assert_eq!(store.spent("team", today).await.unwrap(), 8.0);
    assert_eq!(store.spent("team", today - 6 * DAY_MS).await.unwrap(), 12.0);
    assert_eq!(store.spent("nobody", 0).await.unwrap(), 0.0);
}

#[tokio::test]
async fn reopening_a_store_keeps_its_rows_and_runs_no_migration_twice() {
    let dir = tempfile::tempdir().unwrap();
    let u = cfg(&dir, 90);
    let store = open(&u, Outcome::new(Default::default(), Default::default())).await;
    store.send(Write::Row(row(now_ms() - 10, "chat", 0.5)));
    assert!(store.flush(Duration::from_secs(10)).await);
    drop(store);
    let store = open(&u, Outcome::new(Default::default(), Default::default())).await;
    let t = store
        .totals(GroupBy::Client, range(now_ms() - DAY_MS, now_ms()))
        .await
        .unwrap();
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].1.requests, 1);
    let c = rusqlite::Connection::open(dir.path().join("u.db")).unwrap();
    let versions: i64 = c
        .query_row("SELECT COUNT(*) FROM switchyard_migrations", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(
        versions as usize,
        switchyard::usage::schema::MIGRATIONS.len()
    );
    let mode: String = c
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[tokio::test]
async fn a_full_queue_drops_and_counts_instead_of_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let u = cfg(&dir, 90);
    let outcome = Outcome::new(Default::default(), Default::default());
    let store = open(&u, outcome.clone()).await;
    // Hold the database so that the writer cannot commit: the queue fills.
    let blocker = rusqlite::Connection::open(dir.path().join("u.db")).unwrap();
    blocker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let n = switchyard::usage::QUEUE + 5_000;
    let started = std::time::Instant::now();
    for i in 0..n {
        store.send(Write::Row(row(now_ms() - 1 - i as i64, "chat", 0.0)));
    }
    // Never waited on the store (the writer is stuck behind the lock).
    assert!(started.elapsed() < Duration::from_secs(5));
    let dropped = outcome.dropped.get();
    assert!(
        dropped >= 5_000 - switchyard::usage::writer::MAX_BATCH as u64,
        "{dropped}"
    );
    blocker.execute_batch("COMMIT").unwrap();
    assert!(store.flush(Duration::from_secs(30)).await);
    assert_eq!(outcome.ok.get() + outcome.dropped.get(), n as u64);
}

/// A store written before shadow traffic existed gains the `shadow` column
/// (migration 4) with its old rows as not shadows; a shadow row keeps its
/// flag.
#[tokio::test]
async fn an_older_store_gains_the_shadow_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.db");
    {
        // The schema as migrations 1–3 left it, with one request row.
        let mut c = rusqlite::Connection::open(&path).unwrap();
        c.execute(switchyard::usage::schema::MIGRATIONS_TABLE, [])
            .unwrap();
        let tx = c.transaction().unwrap();
        for (i, m) in switchyard::usage::schema::MIGRATIONS[..3]
            .iter()
            .enumerate()
        {
            tx.execute_batch(m).unwrap();
            tx.execute(
                "INSERT INTO switchyard_migrations (version, applied_at) VALUES (?, 0)",
                [i as i64 + 1],
            )
            .unwrap();
        }
        tx.execute(
            "INSERT INTO usage_requests (request_id, ts, status, outcome, stream, cache, input_tokens, output_tokens, cached_input_tokens, cost_usd, latency_ms, attempts) VALUES ('old', 1, 200, 'ok', 0, 'off', 1, 1, 0, 0.1, 1.0, 1)",
            [],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let u = cfg(&dir, 90);
    let store = open(&u, Outcome::new(Default::default(), Default::default())).await;
    let mut shadow = row(now_ms() - 10, "chat", 0.3);
    shadow.request_id = "shadow-r".into();
    shadow.client = Some(Arc::from("_shadow"));
    shadow.shadow = true;
    store.send(Write::Row(shadow));
    assert!(store.flush(Duration::from_secs(10)).await);
    let c = rusqlite::Connection::open(&path).unwrap();
    let flags: Vec<(String, i64)> = c
        .prepare("SELECT request_id, shadow FROM usage_requests ORDER BY ts")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(flags, [("old".into(), 0), ("shadow-r".into(), 1)]);
    // A shadow is never a client's spend.
    assert_eq!(store.spent("team", 0).await.unwrap(), 0.0);
}
