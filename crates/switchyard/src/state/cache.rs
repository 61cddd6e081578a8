//! The response cache (`cache.*`, contract §3): whole answers of identical
//! normalized requests, kept as the IR so that any door can replay one as a
//! JSON answer or as a stream. Behind a small trait: the memory backend
//! lives here, a shared (Redis) one implements the same three calls.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use switchyard_protocol::ir::{ChatResponse, FinishReason};

/// What the cache keys on: sha256 of (door, scope, normalized request).
pub type CacheKey = [u8; 32];

/// A stored answer and who served it (the replay's `x-switchyard-deployment`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct CachedAnswer {
    pub answer: ChatResponse,
    pub deployment: Arc<str>,
    pub provider: Arc<str>,
}

impl CachedAnswer {
    /// Roughly what it holds in memory (the cache's byte bound).
    pub fn size(&self) -> u64 {
        let a = &self.answer;
        let text = [&a.text, &a.reasoning, &a.reasoning_signature, &a.refusal]
            .iter()
            .map(|t| t.as_ref().map_or(0, String::len))
            .sum::<usize>();
        let calls: usize = a
            .tool_calls
            .iter()
            .map(|c| c.id.len() + c.name.len() + c.arguments.len() + 72)
            .sum();
        (text + calls + a.id.len() + a.model.len() + 256) as u64
    }
}

pub type Lookup<'a> = Pin<Box<dyn Future<Output = Option<Arc<CachedAnswer>>> + Send + 'a>>;

pub trait ResponseCache: Send + Sync {
    /// The answer stored under `key`, if it has not expired. (A shared
    /// backend answers over the network: the one wait of a lookup.)
    fn get<'a>(&'a self, key: &'a CacheKey) -> Lookup<'a>;
    /// Keep `answer` under `key` for the TTL (never waited on).
    fn put(&self, key: CacheKey, answer: Arc<CachedAnswer>);
    /// Forget everything (`DELETE /admin/cache`); how many entries went
    /// (`None`: the shared backend could not be reached).
    fn clear(&self) -> Pin<Box<dyn Future<Output = Option<u64>> + Send + '_>>;
    /// Entries held now (`switchyard_cache_entries`).
    fn entries(&self) -> u64;
}

/// One request's place in the cache: where its answer is kept if it ends
/// well. (What the stream relay holds; it knows nothing else of caching.)
#[derive(Clone)]
pub struct Slot {
    pub cache: Arc<dyn ResponseCache>,
    pub key: CacheKey,
}

impl Slot {
    /// Keep an answer that ended well; anything else is never stored.
    pub fn keep(&self, answer: ChatResponse, deployment: &Arc<str>, provider: &Arc<str>) {
        if !storable(&answer) {
            return;
        }
        let entry = CachedAnswer {
            answer,
            deployment: deployment.clone(),
            provider: provider.clone(),
        };
        self.cache.put(self.key, Arc::new(entry));
    }
}

/// Finished normally (a stop or tool calls): not cut at `max_tokens`, not
/// stopped by a safety filter, not a refusal, not empty.
fn storable(a: &ChatResponse) -> bool {
    let finished = matches!(
        a.finish_reason,
        FinishReason::Stop | FinishReason::ToolCalls
    );
    let said = a.text.as_ref().is_some_and(|t| !t.is_empty()) || !a.tool_calls.is_empty();
    finished && said && a.refusal.is_none()
}

/// In-process cache, bounded in entries and in bytes at once. moka weighs
/// against one capacity, so the capacity is `max_entries` units of
/// `max_bytes / max_entries` bytes each and an entry weighs its size in
/// units, at least 1: the count stays ≤ `max_entries` (every entry weighs
/// ≥ 1) and the bytes ≤ `max_bytes` (units × unit size).
pub struct MemoryCache {
    inner: moka::sync::Cache<CacheKey, Arc<CachedAnswer>>,
}

impl MemoryCache {
    pub fn new(ttl: Duration, max_entries: u64, max_bytes: u64) -> Self {
        let unit = (max_bytes / max_entries.max(1)).max(1);
        let inner = moka::sync::Cache::builder()
            .max_capacity(max_entries)
            .time_to_live(ttl)
            .weigher(move |_k, v: &Arc<CachedAnswer>| {
                u32::try_from(v.size().div_ceil(unit).max(1)).unwrap_or(u32::MAX)
            })
            .build();
        MemoryCache { inner }
    }
}

impl ResponseCache for MemoryCache {
    fn get<'a>(&'a self, key: &'a CacheKey) -> Lookup<'a> {
        let hit = self.inner.get(key);
        Box::pin(std::future::ready(hit))
    }

    fn put(&self, key: CacheKey, answer: Arc<CachedAnswer>) {
        self.inner.insert(key, answer);
    }

    fn clear(&self) -> Pin<Box<dyn Future<Output = Option<u64>> + Send + '_>> {
        self.inner.run_pending_tasks();
        let n = self.inner.entry_count();
        self.inner.invalidate_all();
        self.inner.run_pending_tasks();
        Box::pin(std::future::ready(Some(n)))
    }

    fn entries(&self) -> u64 {
        self.inner.run_pending_tasks();
        self.inner.entry_count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> Arc<CachedAnswer> {
        Arc::new(CachedAnswer {
            answer: ChatResponse {
                text: Some(text.into()),
                ..ChatResponse::default()
            },
            deployment: Arc::from("p/m"),
            provider: Arc::from("p"),
        })
    }

    fn get(c: &MemoryCache, k: &CacheKey) -> Option<Arc<CachedAnswer>> {
        futures_util::FutureExt::now_or_never(c.get(k)).flatten()
    }

    #[test]
    fn only_answers_that_ended_well_are_kept() {
        let ok = ChatResponse {
            text: Some("hi".into()),
            ..ChatResponse::default()
        };
        assert!(storable(&ok));
        for reason in [
            FinishReason::Length,
            FinishReason::ContentFilter,
            FinishReason::Error,
        ] {
            let cut = ChatResponse {
                finish_reason: reason,
                ..ok.clone()
            };
            assert!(!storable(&cut), "{reason:?}");
        }
        assert!(!storable(&ChatResponse::default()));
        let refused = ChatResponse {
            refusal: Some("no".into()),
            ..ok
        };
        assert!(!storable(&refused));
    }

    #[test]
    fn bounded_in_entries() {
        let c = MemoryCache::new(Duration::from_secs(60), 10, 1 << 30);
        for i in 0..100u8 {
            c.put([i; 32], answer("x"));
        }
        assert!(c.entries() <= 10, "{}", c.entries());
    }

    #[test]
    fn bounded_in_bytes() {
        // 100 entries of ~10 KiB against 100 KiB: about ten fit.
        let c = MemoryCache::new(Duration::from_secs(60), 1000, 100 << 10);
        let big = "y".repeat(10 << 10);
        for i in 0..100u8 {
            c.put([i; 32], answer(&big));
        }
        let n = c.entries();
        assert!((1..=10).contains(&n), "{n}");
    }

    #[test]
    fn clear_empties_it() {
        let c = MemoryCache::new(Duration::from_secs(60), 10, 1 << 20);
        c.put([1; 32], answer("a"));
        assert_eq!(
            get(&c, &[1; 32])
                .and_then(|a| a.answer.text.clone())
                .as_deref(),
            Some("a")
        );
        assert_eq!(
            futures_util::FutureExt::now_or_never(c.clear()),
            Some(Some(1))
        );
        assert!(get(&c, &[1; 32]).is_none());
        assert_eq!(c.entries(), 0);
    }
}
