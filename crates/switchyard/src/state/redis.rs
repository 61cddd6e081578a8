//! Shared state in Redis (contract §7), first piece: admission against
//! fleet-wide sliding windows in one round trip. A request's limits (the
//! client's rpm and tpm, the deployment's) are checked and charged together
//! by one server-side script: the decision is made on the shared count,
//! never on a local copy, and either every window takes the request or none
//! is charged. Not yet wired to `state.backend: redis` (still refused by
//! `check`): the rest of the shared state follows behind the same store.
//!
//! A window is one hash per limiter: field = bucket number (the window is
//! cut into `BUCKETS` buckets), value = what was charged in it. The script
//! sums the live buckets, drops the ones that slid out, and charges the
//! current one. Keys expire after two spans of silence.
//!
//! Redis Cluster needs every key of one script in one slot: callers give a
//! request's keys one hash tag (`{client}`), or call once per slot.

use ::redis::aio::ConnectionManager;

/// Buckets per window: a window slides in tenths.
pub const BUCKETS: u64 = 10;

const ADMIT: &str = r"
local now, span, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local width = math.max(1, math.floor(span / n))
local cur = math.floor(now / width)
local used = {}
for i, key in ipairs(KEYS) do
  local limit, cost = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
  local total = 0
  local fields = redis.call('HGETALL', key)
  for j = 1, #fields, 2 do
    if tonumber(fields[j]) > cur - n then
      total = total + tonumber(fields[j + 1])
    else
      redis.call('HDEL', key, fields[j])
    end
  end
  if total + cost > limit then
    return {0, i, total}
  end
  used[i] = total
end
for i, key in ipairs(KEYS) do
  local cost = tonumber(ARGV[3 + 2 * i])
  if cost ~= 0 then
    redis.call('HINCRBY', key, cur, cost)
  end
  redis.call('PEXPIRE', key, span * 2)
  used[i] = used[i] + cost
end
return {1, 0, unpack(used)}
";

/// One limiter a request must fit: `cost` more within `limit`.
#[derive(Debug, Clone)]
pub struct Window<'a> {
    pub key: &'a str,
    pub limit: u64,
    pub cost: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Every window took it; what each has used now, this request included.
    Admitted(Vec<u64>),
    /// Window `index` (0-based) had used `used` of its limit already and
    /// this cost did not fit; nothing was charged anywhere.
    Refused { index: usize, used: u64 },
}

/// The fleet's shared state on one Redis (reconnecting on its own).
#[derive(Clone)]
pub struct RedisState {
    conn: ConnectionManager,
    prefix: String,
    admit: std::sync::Arc<::redis::Script>,
}

impl RedisState {
    /// Connect to `url` (`redis://`, `rediss://`); keys go under `prefix`.
    pub async fn connect(url: &str, prefix: &str) -> Result<RedisState, String> {
        let client = ::redis::Client::open(url).map_err(|e| format!("state.redis_url: {e}"))?;
        let conn = ConnectionManager::new(client)
            .await
            .map_err(|e| format!("redis at state.redis_url: {e}"))?;
        Ok(RedisState {
            conn,
            prefix: prefix.to_owned(),
            admit: std::sync::Arc::new(::redis::Script::new(ADMIT)),
        })
    }

    /// `windows` over `span_ms` at `now_ms` (the caller's clock, in ms):
    /// all of them charged, or none. One round trip (`EVALSHA`, loading
    /// the script once if the server does not have it).
    pub async fn admit(
        &self,
        windows: &[Window<'_>],
        span_ms: u64,
        now_ms: u64,
    ) -> Result<Admission, ::redis::RedisError> {
        let mut call = self.admit.prepare_invoke();
        call.arg(now_ms).arg(span_ms).arg(BUCKETS);
        for w in windows {
            call.key(format!("{}{}", self.prefix, w.key))
                .arg(w.limit)
                .arg(w.cost);
        }
        let mut conn = self.conn.clone();
        let reply: Vec<u64> = call.invoke_async(&mut conn).await?;
        Ok(match reply.as_slice() {
            [1, _, used @ ..] => Admission::Admitted(used.to_vec()),
            [_, index, used, ..] => Admission::Refused {
                index: (*index as usize).saturating_sub(1),
                used: *used,
            },
            _ => Admission::Refused { index: 0, used: 0 },
        })
    }
}
