//! The fleet's response cache (`cache.backend: redis`): an answer stored
//! through one instance is a hit on every other. Entries are JSON under
//! `{prefix}cache:{key}` with the TTL; an index (a sorted set by expiry)
//! bounds them to `max_entries`, counts them and lets a purge find them.
//!
//! A lookup is one `GET` of at most 50 ms (a slow or absent Redis is a
//! miss, never an error); a store is written in the background.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::cache::{CacheKey, CachedAnswer, Lookup, ResponseCache};
use super::fleet::{now_ms, Fleet};

/// KEYS: entry, index. ARGV: value, ttl ms, now ms, max entries.
const PUT: &str = r"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local now = tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local popped = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #popped, 2 do
    redis.call('DEL', popped[i])
  end
end
return redis.call('ZCARD', KEYS[2])
";

/// KEYS: index. Deletes every indexed entry; returns how many were live.
const CLEAR: &str = r"
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000
local live = redis.call('ZCOUNT', KEYS[1], ms, '+inf')
local keys = redis.call('ZRANGE', KEYS[1], 0, -1)
for i = 1, #keys, 500 do
  redis.call('DEL', unpack(keys, i, math.min(i + 499, #keys)))
end
redis.call('DEL', KEYS[1])
return live
";

pub struct RedisCache {
    fleet: Arc<Fleet>,
    ttl: Duration,
    max_entries: u64,
    index: Arc<str>,
    put: Arc<::redis::Script>,
    clear: Arc<::redis::Script>,
    /// The index's size after the last store (what `entries` reports).
    seen: Arc<AtomicU64>,
}

impl RedisCache {
    pub fn new(fleet: Arc<Fleet>, ttl: Duration, max_entries: u64) -> Self {
        RedisCache {
            index: fleet.key("cache-index").into(),
            fleet,
            ttl,
            max_entries,
            put: Arc::new(::redis::Script::new(PUT)),
            clear: Arc::new(::redis::Script::new(CLEAR)),
            seen: Default::default(),
        }
    }

    fn entry_key(&self, key: &CacheKey) -> String {
        self.fleet.key(&format!("cache:{}", hex::encode(key)))
    }
}

impl ResponseCache for RedisCache {
    fn get<'a>(&'a self, key: &'a CacheKey) -> Lookup<'a> {
        let k = self.entry_key(key);
        Box::pin(async move {
            let json = self.fleet.get(k).await?;
            serde_json::from_str::<CachedAnswer>(&json)
                .ok()
                .map(Arc::new)
        })
    }

    fn put(&self, key: CacheKey, answer: Arc<CachedAnswer>) {
        let Ok(json) = serde_json::to_string(&*answer) else {
            return;
        };
        let (k, index, script) = (self.entry_key(&key), self.index.clone(), self.put.clone());
        let (ttl, max, seen) = (
            self.ttl.as_millis() as u64,
            self.max_entries,
            self.seen.clone(),
        );
        self.fleet.write(move |r| async move {
            let mut c = r.conn();
            let n: u64 = script
                .key(k)
                .key(&*index)
                .arg(json)
                .arg(ttl.max(1))
                .arg(now_ms())
                .arg(max)
                .invoke_async(&mut c)
                .await?;
            seen.store(n, Ordering::Relaxed);
            Ok(())
        });
    }

    fn clear(&self) -> Pin<Box<dyn Future<Output = Option<u64>> + Send + '_>> {
        Box::pin(async move {
            let n = self
                .fleet
                .read(|r| async move {
                    let mut c = r.conn();
                    self.clear
                        .key(&*self.index)
                        .invoke_async::<u64>(&mut c)
                        .await
                })
                .await?;
            self.seen.store(0, Ordering::Relaxed);
            Some(n)
        })
    }

    fn entries(&self) -> u64 {
        self.seen.load(Ordering::Relaxed)
    }
}
