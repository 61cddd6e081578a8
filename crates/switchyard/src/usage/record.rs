//! What the store keeps: one row per request, the daily rollup rows a batch
//! of them adds up to, issued keys and stored Responses-API answers.

use std::collections::BTreeMap;
use std::sync::Arc;

/// One request (contract §6, "Usage store").
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    pub request_id: String,
    /// Unix milliseconds, when the request arrived.
    pub ts_ms: i64,
    pub client: Option<Arc<str>>,
    pub key_id: Option<Arc<str>>,
    pub route: Option<Arc<str>>,
    /// The upstream model that served.
    pub model: Option<Arc<str>>,
    pub deployment: Option<Arc<str>>,
    pub status: u16,
    /// `ok` or a contract §4 code (`client_closed` for a 499).
    pub outcome: &'static str,
    /// The tokens are the gateway's count (a stream cut short, an upstream
    /// that reports no usage), not the upstream's.
    pub usage_estimated: bool,
    pub stream: bool,
    /// `hit` | `miss` | `off`.
    pub cache: &'static str,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: f64,
    pub ttfb_ms: Option<f64>,
    pub attempts: u32,
    /// The request's task (scene), when it had one.
    pub task: Option<String>,
    /// The gateway's shadow copy of a request (contract §11; client
    /// `_shadow`), not a client's request.
    pub shadow: bool,
}

impl UsageRow {
    pub fn is_error(&self) -> bool {
        self.status >= 400
    }
}

pub const DAY_MS: i64 = 86_400_000;

/// Totals of one group (a rollup row, or one row of an `/admin/usage` answer).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Totals {
    pub requests: i64,
    pub errors: i64,
    pub cache_hits: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_input_tokens: i64,
    pub cost_usd: f64,
}

impl Totals {
    pub fn add(&mut self, o: &Totals) {
        self.requests += o.requests;
        self.errors += o.errors;
        self.cache_hits += o.cache_hits;
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cached_input_tokens += o.cached_input_tokens;
        self.cost_usd += o.cost_usd;
    }

    fn of(r: &UsageRow) -> Totals {
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        Totals {
            requests: 1,
            errors: i64::from(r.is_error()),
            cache_hits: i64::from(r.cache == "hit"),
            input_tokens: n(r.input_tokens),
            output_tokens: n(r.output_tokens),
            cached_input_tokens: n(r.cached_input_tokens),
            cost_usd: r.cost_usd,
        }
    }
}

/// The key of a daily rollup row. Absent parts are stored as `""` (they are
/// part of the primary key). Ordered as the primary key is.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DayKey {
    pub day: i64,
    pub client: Arc<str>,
    pub route: Arc<str>,
    pub model: Arc<str>,
    pub deployment: Arc<str>,
}

/// What a batch of rows adds to the daily rollups: one upsert per group, in
/// key order. The order matters on a shared PostgreSQL: each upsert locks
/// its row until the batch commits, so two instances upserting the same
/// groups in different orders deadlock, and the batch the server aborts is
/// lost (three instances writing at once lost rows that way).
pub fn rollup(rows: &[UsageRow]) -> BTreeMap<DayKey, Totals> {
    let empty: Arc<str> = Arc::from("");
    let part = |v: &Option<Arc<str>>| v.clone().unwrap_or_else(|| empty.clone());
    let mut out: BTreeMap<DayKey, Totals> = BTreeMap::new();
    for r in rows {
        let k = DayKey {
            day: r.ts_ms.div_euclid(DAY_MS),
            client: part(&r.client),
            route: part(&r.route),
            model: part(&r.model),
            deployment: part(&r.deployment),
        };
        out.entry(k).or_default().add(&Totals::of(r));
    }
    out
}

/// The latest use of each key in a batch, in key order (the upserts lock
/// rows, as [`rollup`]'s do).
pub fn last_used(rows: &[UsageRow]) -> BTreeMap<Arc<str>, i64> {
    let mut out: BTreeMap<Arc<str>, i64> = BTreeMap::new();
    for r in rows {
        if let Some(k) = &r.key_id {
            let t = out.entry(k.clone()).or_insert(r.ts_ms);
            *t = (*t).max(r.ts_ms);
        }
    }
    out
}

/// A virtual key issued through the admin API (only its hash is kept).
#[derive(Debug, Clone, PartialEq)]
pub struct IssuedKey {
    pub id: String,
    pub client: String,
    /// sha256 of the key, hex.
    pub sha256: String,
    pub created_at_ms: i64,
}

/// A stored Responses-API answer: the Response body and the conversation
/// up to it, both as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredResponse {
    pub id: String,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub body: String,
    pub history: String,
}

/// What the writer is asked to do, in order.
#[derive(Debug)]
pub enum Write {
    Row(UsageRow),
    PutResponse(StoredResponse),
    DeleteResponse(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn row(ts_ms: i64, client: &str, cost: f64, status: u16) -> UsageRow {
        UsageRow {
            request_id: format!("r{ts_ms}"),
            ts_ms,
            client: Some(Arc::from(client)),
            key_id: Some(Arc::from("k1")),
            route: Some(Arc::from("chat")),
            model: Some(Arc::from("gpt-4o")),
            deployment: Some(Arc::from("openai/gpt-4o")),
            status,
            outcome: if status == 200 {
                "ok"
            } else {
                "upstream_error"
            },
            usage_estimated: false,
            task: None,
            shadow: false,
            stream: false,
            cache: "off",
            input_tokens: 10,
            output_tokens: 5,
            cached_input_tokens: 2,
            cost_usd: cost,
            latency_ms: 1.5,
            ttfb_ms: Some(1.0),
            attempts: 1,
        }
    }

    #[test]
    fn a_batch_rolls_up_by_day_and_group() {
        let rows = [
            row(1_000, "a", 0.5, 200),
            row(2_000, "a", 0.25, 502),
            row(DAY_MS + 5, "a", 1.0, 200),
            row(3_000, "b", 2.0, 200),
        ];
        let r = rollup(&rows);
        assert_eq!(r.len(), 3);
        let day0a = r
            .iter()
            .find(|(k, _)| k.day == 0 && &*k.client == "a")
            .map(|(_, t)| *t)
            .unwrap();
        assert_eq!(day0a.requests, 2);
        assert_eq!(day0a.errors, 1);
        assert_eq!(day0a.input_tokens, 20);
        assert!((day0a.cost_usd - 0.75).abs() < 1e-12);
        assert_eq!(last_used(&rows)[&Arc::<str>::from("k1")], DAY_MS + 5);
    }
}
