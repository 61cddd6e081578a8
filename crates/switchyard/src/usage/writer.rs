//! What both stores' writers share: taking a batch off the bounded queue,
//! and counting (and saying in the log) what was written and what was lost.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use prometheus_client::metrics::counter::Counter;
use tokio::sync::mpsc;

use super::record::{UsageRow, Write};

/// The most a batch takes off the queue (one transaction).
pub const MAX_BATCH: usize = 2048;

/// How long a batch waits for more rows after its first. A transaction (and
/// a wake-up of the writer) per request cost ~70 µs of CPU a request at c=1
/// in the benchmark; batches of 50 ms make that a rounding error, and rows
/// still reach the store within a fraction of a second.
pub const LINGER: std::time::Duration = std::time::Duration::from_millis(50);

/// Delete what `retention` and `store_responses` no longer keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sweep {
    pub rows_before_ms: i64,
    pub now_ms: i64,
}

/// One batch: request rows, the other writes in their order, and a sweep.
#[derive(Debug, Default)]
pub struct Batch {
    pub rows: Vec<UsageRow>,
    pub other: Vec<Write>,
    pub sweep: Option<Sweep>,
    /// Told once this batch is committed (or failed).
    pub acks: Vec<tokio::sync::oneshot::Sender<()>>,
}

/// The writer's own queue item: a write, a sweep, or a flush (answered
/// once everything queued before it is written).
#[derive(Debug)]
#[expect(
    clippy::large_enum_variant,
    reason = "one row per request goes through the channel: boxing it would add an allocation to every request; a sweep or a flush is rare"
)]
pub enum Job {
    Write(Write),
    Sweep(Sweep),
    Flush(tokio::sync::oneshot::Sender<()>),
}

impl Batch {
    fn push(&mut self, j: Job) {
        match j {
            Job::Write(Write::Row(r)) => self.rows.push(r),
            Job::Write(w) => self.other.push(w),
            Job::Sweep(s) => self.sweep = Some(s),
            Job::Flush(ack) => self.acks.push(ack),
        }
    }

    fn len(&self) -> usize {
        self.rows.len() + self.other.len()
    }

    /// Wait for one job, then [`LINGER`] for more (unless the batch is
    /// already full or someone waits on a flush), then take what is queued
    /// (up to [`MAX_BATCH`]). `false` once the queue is closed and empty.
    pub fn fill_blocking(&mut self, rx: &mut mpsc::Receiver<Job>) -> bool {
        let Some(first) = rx.blocking_recv() else {
            return false;
        };
        self.push(first);
        self.drain(rx);
        if self.wants_more() {
            std::thread::sleep(LINGER);
            self.drain(rx);
        }
        true
    }

    pub async fn fill(&mut self, rx: &mut mpsc::Receiver<Job>) -> bool {
        let Some(first) = rx.recv().await else {
            return false;
        };
        self.push(first);
        self.drain(rx);
        if self.wants_more() {
            tokio::time::sleep(LINGER).await;
            self.drain(rx);
        }
        true
    }

    fn wants_more(&self) -> bool {
        self.len() < MAX_BATCH && self.acks.is_empty()
    }

    fn drain(&mut self, rx: &mut mpsc::Receiver<Job>) {
        while self.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(j) => self.push(j),
                Err(_) => break,
            }
        }
    }

    /// After the batch's transaction: answer its flushes, empty it.
    pub fn clear(&mut self) {
        self.rows.clear();
        self.other.clear();
        self.sweep = None;
        for a in self.acks.drain(..) {
            let _ = a.send(());
        }
    }
}

/// `switchyard_usage_store_writes_total{result}` and the log lines that
/// say rows were lost (at most one every 10 s, with the count since).
#[derive(Clone)]
pub struct Outcome {
    pub ok: Counter,
    pub dropped: Counter,
    last_said: Arc<AtomicI64>,
    unsaid: Arc<std::sync::atomic::AtomicU64>,
}

impl Outcome {
    pub fn new(ok: Counter, dropped: Counter) -> Outcome {
        Outcome {
            ok,
            dropped,
            last_said: Arc::new(AtomicI64::new(i64::MIN)),
            unsaid: Arc::default(),
        }
    }

    pub fn written(&self, rows: usize) {
        self.ok.inc_by(rows as u64);
    }

    /// Rows the queue had no room for (the request goes on regardless).
    pub fn dropped(&self, rows: usize, why: &str) {
        self.dropped.inc_by(rows as u64);
        let pending = self.unsaid.fetch_add(rows as u64, Ordering::Relaxed) + rows as u64;
        let now = super::query::now_ms();
        let last = self.last_said.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= 10_000
            && self
                .last_said
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.unsaid.fetch_sub(pending, Ordering::Relaxed);
            tracing::warn!(
                dropped_rows = pending,
                "usage store: {why}; rows dropped (requests are unaffected)"
            );
        }
    }

    /// A batch the store refused (down, full disk): its rows are lost.
    pub fn failed(&self, rows: usize, e: &str) {
        self.dropped(rows, &format!("a write failed: {e}"));
    }
}
