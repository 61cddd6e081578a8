//! The most recent decisions, in memory, for the dashboard
//! (`GET /admin/decisions`). A fixed ring of slots, each an `ArcSwapOption`,
//! and an atomic cursor: a finished request claims the next slot and swaps
//! its summary in — no lock, nothing shared but the cursor — and a reader
//! walks the slots back from the cursor.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwapOption;
use serde::Serialize;

use super::Sink;
use crate::observe::record::Record;

/// How many decisions the dashboard can see.
pub const KEEP: usize = 100;

/// A small summary of one finished request: `Arc<str>` and `&'static str`
/// fields, so building it costs one allocation beyond the request id.
#[derive(Debug, Serialize)]
pub struct Decision {
    /// Position in the stream of decisions (orders a racing read).
    #[serde(skip)]
    seq: usize,
    #[serde(serialize_with = "rfc3339")]
    pub ts: SystemTime,
    pub request_id: Box<str>,
    pub client: Option<Arc<str>>,
    pub route: Option<Arc<str>>,
    pub model: Option<Arc<str>>,
    pub selected: Option<Arc<str>>,
    pub decision_reason: Option<&'static str>,
    pub fallback_reason: Option<&'static str>,
    pub status: u16,
    pub error: Option<&'static str>,
    /// Upstream calls made (candidates skipped unsent are not counted).
    pub attempts: u32,
    pub duration_ms: f64,
    pub cost_usd: Option<f64>,
    pub cache: &'static str,
    pub stream: bool,
}

impl Decision {
    fn of(seq: usize, r: &Record) -> Decision {
        Decision {
            seq,
            ts: r.ts,
            request_id: r.request_id.as_str().into(),
            client: r.client.clone(),
            route: r.route.clone(),
            model: r.served_model.clone(),
            selected: r.selected.clone(),
            decision_reason: r.decision_reason,
            fallback_reason: r.fallback_reason,
            status: r.status,
            error: r.error,
            attempts: r.attempts.iter().filter(|a| a.sent).count() as u32,
            duration_ms: r.duration_ms,
            cost_usd: r.cost_usd,
            cache: r.cache,
            stream: r.stream,
        }
    }
}

pub struct Recent {
    slots: Box<[ArcSwapOption<Decision>]>,
    /// Decisions recorded so far; the next goes to `cursor % slots.len()`.
    cursor: AtomicUsize,
}

impl Default for Recent {
    fn default() -> Self {
        Recent::new(KEEP)
    }
}

impl Recent {
    pub fn new(keep: usize) -> Recent {
        Recent {
            slots: (0..keep.max(1)).map(|_| ArcSwapOption::empty()).collect(),
            cursor: AtomicUsize::new(0),
        }
    }

    fn record(&self, r: &Record) {
        let seq = self.cursor.fetch_add(1, Ordering::Relaxed);
        let slot = &self.slots[seq % self.slots.len()];
        slot.store(Some(Arc::new(Decision::of(seq, r))));
    }

    /// Up to `limit` decisions, newest first. A slot being rewritten while
    /// this reads may show its older or newer entry; sorting by `seq` keeps
    /// the order right either way.
    pub fn latest(&self, limit: usize) -> Vec<Arc<Decision>> {
        let mut out: Vec<Arc<Decision>> = self.slots.iter().filter_map(|s| s.load_full()).collect();
        out.sort_unstable_by_key(|d| std::cmp::Reverse(d.seq));
        out.truncate(limit);
        out
    }
}

/// The sink that feeds a shared [`Recent`].
pub struct RecentSink(pub Arc<Recent>);

impl Sink for RecentSink {
    fn finished(&self, r: &Record) {
        self.0.record(r);
    }
}

fn rfc3339<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    let text = time::OffsetDateTime::from(*t)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    s.serialize_str(&text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::Sinks;

    fn finish(sinks: &Sinks, id: &str) {
        let mut r = Record::new(id.to_owned(), None, Arc::from("v1"));
        r.route = Some(Arc::from("chat"));
        r.close(200, None);
        sinks.finished(&r);
    }

    #[test]
    fn keeps_the_last_n_newest_first() {
        let recent = Arc::new(Recent::new(3));
        let sinks = Sinks::new(vec![Arc::new(RecentSink(recent.clone()))]);
        assert!(recent.latest(10).is_empty());
        for i in 0..5 {
            finish(&sinks, &format!("req-{i}"));
        }
        let ids: Vec<_> = recent
            .latest(10)
            .iter()
            .map(|d| d.request_id.to_string())
            .collect();
        assert_eq!(ids, ["req-4", "req-3", "req-2"]);
        assert_eq!(recent.latest(1)[0].request_id.as_ref(), "req-4");
        let json = serde_json::to_value(&*recent.latest(1)[0]).unwrap();
        assert_eq!(json["route"], "chat");
        assert_eq!(json["status"], 200);
        assert!(json["ts"].as_str().unwrap().ends_with('Z'), "{json}");
        assert!(json.get("seq").is_none());
    }
}
