//! The usage store's writer on its own: how many request rows a second it
//! takes into SQLite (WAL, one writer thread, batched transactions). Run by
//! `bench/run.sh`; prints one JSON line.
//!
//! cargo run --release --example usage_writer -- [ROWS] [DIR]

use std::sync::Arc;
use std::time::{Duration, Instant};

use switchyard::config::{Usage, UsageBackend};
use switchyard::usage::record::{UsageRow, Write};
use switchyard::usage::writer::Outcome;
use switchyard::usage::UsageStore;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let rows: usize = args
        .next()
        .map_or(Ok(200_000), |a| a.parse().map_err(|e| format!("ROWS: {e}")))?;
    let dir = match args.next() {
        Some(d) => std::path::PathBuf::from(d),
        None => std::env::temp_dir().join(format!("switchyard-usage-bench-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let path = dir.join("usage-bench.db");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    let cfg = Usage {
        store: UsageBackend::Sqlite {
            path: path.display().to_string(),
        },
        retention: Duration::from_secs(90 * 86_400),
        store_responses: Duration::from_secs(86_400),
    };
    let outcome = Outcome::new(Default::default(), Default::default());
    let store = UsageStore::open(&cfg, outcome.clone())
        .await?
        .ok_or("no store")?;
    let name = |s: &str| -> Arc<str> { Arc::from(s) };
    let (client, route, model) = (name("team-a"), name("chat"), name("gpt-4o-mini"));
    let (dep, key) = (name("openai/gpt-4o-mini"), name("cfg-0123456789ab"));
    let now = switchyard::usage::query::now_ms();
    let started = Instant::now();
    for i in 0..rows {
        let row = UsageRow {
            request_id: format!("req-{i:012}"),
            ts_ms: now + (i as i64 % 1000),
            client: Some(client.clone()),
            key_id: Some(key.clone()),
            route: Some(route.clone()),
            model: Some(model.clone()),
            deployment: Some(dep.clone()),
            status: 200,
            outcome: "ok",
            usage_estimated: false,
            task: None,
            shadow: false,
            stream: i % 2 == 0,
            cache: "off",
            input_tokens: 120,
            output_tokens: 380,
            cached_input_tokens: 0,
            cost_usd: 0.000_42,
            latency_ms: 812.5,
            ttfb_ms: Some(95.0),
            attempts: 1,
        };
        // As fast as the queue takes them: the writer is the bottleneck.
        store.feed(Write::Row(row)).await;
    }
    if !store.flush(Duration::from_secs(120)).await {
        return Err("the writer did not finish".into());
    }
    let secs = started.elapsed().as_secs_f64();
    let written = outcome.ok.get();
    println!(
        "{{\"rows\": {rows}, \"written\": {written}, \"dropped\": {}, \"seconds\": {secs:.3}, \"rows_per_s\": {:.0}}}",
        outcome.dropped.get(),
        written as f64 / secs
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
