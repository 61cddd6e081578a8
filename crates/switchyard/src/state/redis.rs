//! The fleet's shared state on Redis (contract §7), below [`super::fleet`]:
//! the connection (one server, found through Sentinel, or a Cluster), the
//! server-side scripts and the key layout.
//!
//! - Admission: a request's limits (the client's rpm and tpm, the
//!   deployment's, a budget's counter) and the revoked-key check run as one
//!   script — the decision on the shared count, never on a local copy, and
//!   either every window takes the request or none is charged. Requests'
//!   scripts are written in pipelines (`batch_admissions`).
//! - A sliding window is one hash per limiter: a field per bucket (the
//!   window is cut into [`BUCKETS`]), `t` their sum and `o` the oldest bucket
//!   it may hold, so a read costs two fields however full it is; slid-out
//!   buckets are dropped as they go. Keys expire after two spans of silence.
//! - Circuit transitions, issued and revoked keys: versioned entries on the
//!   `{prefix}events` stream.
//!
//! Redis Cluster needs every key of one script in one slot: on a Cluster
//! every key carries the prefix as its hash tag ([`super::fleet::Fleet::new`]).

use ::redis::aio::ConnectionManager;

/// Buckets per window: a window slides in tenths.
pub const BUCKETS: u64 = 10;

/// The Lua shared by [`ADMIT`] and [`LEASE`]: `live_total(key, bucket)`,
/// a sliding window's count (see the module docs), and `leased(lkey,
/// skip)`, the live slices on a window (`{window}:l`: a field per instance,
/// `units|expiry_ms`), expired ones dropped as they are met; `skip` is an
/// instance whose slice is not counted. Both read `n` (buckets per window)
/// and `now` (ms).
macro_rules! lua_windows {
    () => {
        r"
-- A sliding window is a hash: a field per bucket, `t` their sum and `o`
-- the oldest bucket it may hold. Reading it costs the same however full
-- it is; the buckets that slid out are dropped as they go.
local function live_total(key, cur)
  local v = redis.call('HMGET', key, 't', 'o')
  local total, oldest = tonumber(v[1]) or 0, tonumber(v[2])
  local floor = cur - n + 1
  if oldest == nil or oldest >= floor then
    return total
  end
  if floor - oldest >= n then
    redis.call('DEL', key)
    return 0
  end
  local dead = {}
  for b = oldest, floor - 1 do
    dead[#dead + 1] = b
  end
  for _, x in ipairs(redis.call('HMGET', key, unpack(dead))) do
    total = total - (tonumber(x) or 0)
  end
  redis.call('HDEL', key, unpack(dead))
  if total < 0 then
    total = 0
  end
  redis.call('HSET', key, 't', total, 'o', floor)
  return total
end
local function leased(lkey, skip)
  local all = redis.call('HGETALL', lkey)
  if #all == 0 then
    return 0
  end
  local sum, dead = 0, {}
  for j = 1, #all, 2 do
    local u, x = string.match(all[j + 1], '^(%d+)|(%d+)$')
    if x == nil or tonumber(x) <= now then
      dead[#dead + 1] = all[j]
    elseif all[j] ~= skip then
      sum = sum + tonumber(u)
    end
  end
  if #dead > 0 then
    redis.call('HDEL', lkey, unpack(dead))
  end
  return sum
end
"
    };
}

/// A request that no slice of this instance covers ([`super::lease`]).
/// KEYS: the windows, then each one's slices (`{window}:l`), then, when
/// ARGV[2] is not empty, the revoked set: ARGV[2] is a virtual key's id
/// that must not be in it. ARGV[1] is the buckets per window, ARGV[3] the
/// caller's clock (ms; a slice past its expiry is not counted). Then per
/// window six values: limit, cost, bucket, expiry (ms), kind, seed.
/// kind `s`: a sliding window charged in `bucket` (the caller's clock over
/// the bucket width), kept for `expiry` after its newest bucket; `f`: a
/// fixed counter (a budget's calendar window: one integer, `seed` when
/// missing, expiring `expiry` after it was made); `a`: sliding, and one
/// request larger than the whole limit may run while nothing else is
/// counted (a tpm limit). Every instance's live slices count as used.
///
/// Why it is written this way: `bench/fleet.sh` measured this script as
/// most of Redis's time per request, and most of the script's own time as
/// number conversions in Lua (a `tonumber` about 0.14 µs, a number turned
/// back into a string for `redis.call` about 0.4 µs; 38 and 12 of them per
/// request in the first version). So each number is parsed once, only where
/// it is compared, and what goes back to Redis is passed on as the string
/// it came as. Keys must be distinct (a request's windows are).
const ADMIT: &str = concat!(
    r"
local n, deny, now = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local windows = #KEYS
if deny ~= '' then
  windows = windows - 1
  if redis.call('SISMEMBER', KEYS[#KEYS], deny) == 1 then
    return {2, 0, 0}
  end
end
windows = windows / 2
local used, cost, at = {}, {}, {}
",
    lua_windows!(),
    r"for i = 1, windows do
  local key, a = KEYS[i], 3 + 6 * (i - 1)
  local limit, c, kind = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), ARGV[a + 5]
  local total
  if kind == 'f' then
    total = tonumber(redis.call('GET', key) or ARGV[a + 6])
  else
    total = live_total(key, tonumber(ARGV[a + 3]))
  end
  -- Every instance's live slices count as used (this one's too: it asks
  -- because its own slice does not cover the request).
  total = total + leased(KEYS[windows + i], nil)
  if c > 0 and total + c > limit and not (kind == 'a' and total == 0) then
    return {0, i, total}
  end
  used[i], cost[i], at[i] = total, c, a
end
for i = 1, windows do
  local key, a, c = KEYS[i], at[i], cost[i]
  if ARGV[a + 5] == 'f' then
    if redis.call('EXISTS', key) == 0 then
      redis.call('SET', key, ARGV[a + 6], 'PX', ARGV[a + 4])
    end
    if c ~= 0 then redis.call('INCRBY', key, ARGV[a + 2]) end
  elseif c ~= 0 then
    redis.call('HINCRBY', key, 't', ARGV[a + 2])
    -- A bucket starts (a tenth of the span): the oldest is known, and
    -- the expiry moves to two spans after the newest.
    if redis.call('HINCRBY', key, ARGV[a + 3], ARGV[a + 2]) == c then
      redis.call('HSETNX', key, 'o', ARGV[a + 3])
      redis.call('PEXPIRE', key, ARGV[a + 4])
    end
  end
  used[i] = used[i] + c
end
return {1, 0, unpack(used)}
"
);

/// Renews this instance's slices ([`super::lease`]), many windows in one
/// call. KEYS: per window, the window and its slices (`{window}:l`). ARGV:
/// buckets per window, this instance's id, its clock (ms), a slice's
/// lifetime (ms), the live instances, the share of a limit all slices
/// together may hold ([`super::lease::SHARE`]), then per window: limit, kind (as in [`ADMIT`]), the current bucket,
/// expiry, seed, the number of commits and each one's bucket (`-` for a
/// fixed counter) and delta, then the slice kept (`carry`), the more
/// wanted and the least worth holding (one request's cost). Commits go in first (a bucket that slid out is skipped); then
/// the slice becomes `carry` (cut to what is free if this instance's slice
/// had already expired) plus at most `want`, at most half of what is free
/// divided among the instances, and at most this instance's part of the
/// share (the slice included) — nothing when that part is under two
/// requests' cost. Returns per window: the count, the others' slices, the carry
/// and the extra granted.
const LEASE: &str = concat!(
    r"
local n, me, now, ttl, peers, share = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5]), tonumber(ARGV[6])
local div = 2 * peers
",
    lua_windows!(),
    r"
local function commit(key, kind, field, delta, cur, expiry, seed)
  if kind == 'f' then
    if redis.call('EXISTS', key) == 0 then
      redis.call('SET', key, seed, 'PX', expiry)
    end
    redis.call('INCRBY', key, delta)
    return
  end
  local f = tonumber(field)
  if f < cur - n + 1 then
    return
  end
  local o = tonumber(redis.call('HGET', key, 'o'))
  if o == nil then
    if tonumber(delta) < 0 then
      return
    end
    redis.call('HSET', key, 'o', field)
  elseif f < o then
    redis.call('HSET', key, 'o', field)
  end
  redis.call('HINCRBY', key, 't', delta)
  redis.call('HINCRBY', key, field, delta)
  redis.call('PEXPIRE', key, expiry)
end
local out, p = {}, 7
for w = 1, #KEYS / 2 do
  local key, lkey = KEYS[2 * w - 1], KEYS[2 * w]
  local limit, kind, cur, expiry, seed = tonumber(ARGV[p]), ARGV[p + 1], tonumber(ARGV[p + 2]), ARGV[p + 3], ARGV[p + 4]
  local commits = tonumber(ARGV[p + 5])
  p = p + 6
  for _ = 1, commits do
    commit(key, kind, ARGV[p], ARGV[p + 1], cur, expiry, seed)
    p = p + 2
  end
  local carry, want, least = tonumber(ARGV[p]), tonumber(ARGV[p + 1]), tonumber(ARGV[p + 2])
  p = p + 3
  local total
  if kind == 'f' then
    total = tonumber(redis.call('GET', key) or seed)
  else
    total = live_total(key, cur)
  end
  local others = leased(lkey, me)
  local mine = 0
  local held = redis.call('HGET', lkey, me)
  if held then
    local u, x = string.match(held, '^(%d+)|(%d+)$')
    if x and tonumber(x) > now then
      mine = tonumber(u)
    end
  end
  local room = limit - total - others
  if carry > mine and carry > room then
    carry = math.max(0, room)
  end
  local extra = 0
  -- An instance whose share is under two requests holds nothing (a slice
  -- of one, granted while its request asks here, would refuse that one).
  local part = math.floor(limit * share / peers)
  local cap = part - carry
  if want > 0 and room - carry > 0 and cap > 0 and part >= 2 * least then
    extra = math.min(want, cap, math.floor((room - carry) / div))
    -- A slice too small for one request would only be kept from the others.
    if carry + extra < least then
      extra = 0
    end
  end
  if carry + extra > 0 then
    redis.call('HSET', lkey, me, (carry + extra) .. '|' .. (now + ttl))
    redis.call('PEXPIRE', lkey, ttl * 2)
  elseif held then
    redis.call('HDEL', lkey, me)
  end
  out[#out + 1] = total
  out[#out + 1] = others
  out[#out + 1] = carry
  out[#out + 1] = extra
end
return out
"
);

/// Where a window's slices are kept (the same hash tag as the window).
pub fn leases_key(window: &str) -> String {
    format!("{window}:l")
}

/// A correction to a sliding window's bucket (KEYS[1]; ARGV: bucket,
/// delta): the bucket and the sum move together, and a bucket that already
/// slid out is left alone (a long stream settles after its minute).
const ADJUST: &str = r"
local o = tonumber(redis.call('HGET', KEYS[1], 'o'))
if o == nil or tonumber(ARGV[1]) < o then
  return 0
end
redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[1], 't', ARGV[2])
return 1
";

/// What a window counts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Span {
    /// A sliding window of this many ms (rpm, tpm).
    Sliding(u64),
    /// A fixed counter (a budget's calendar window in micro-USD): starts at
    /// `seed` when Redis has none, and expires `ttl_ms` after it was made.
    Fixed { ttl_ms: u64, seed: u64 },
}

/// One limiter a request must fit: `cost` more within `limit`.
#[derive(Debug, Clone)]
pub struct Window<'a> {
    pub key: &'a str,
    pub limit: u64,
    pub cost: u64,
    pub span: Span,
    /// One request larger than the whole limit may run while nothing else
    /// is counted (a tpm limit; never a budget).
    pub alone_ok: bool,
}

impl Window<'_> {
    /// The hash field a sliding window charged at `now_ms` (what a later
    /// adjustment must move); `None` for a fixed counter.
    pub fn field(&self, now_ms: u64) -> Option<u64> {
        match self.span {
            Span::Sliding(span) => Some(now_ms / (span / BUCKETS).max(1)),
            Span::Fixed { .. } => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Every window took it; what each has used now, this request included.
    Admitted(Vec<u64>),
    /// Window `index` (0-based) had used `used` of its limit already and
    /// this cost did not fit; nothing was charged anywhere.
    Refused { index: usize, used: u64 },
    /// The virtual key was revoked (on some instance); nothing charged.
    Revoked,
}

/// A correction to what a request was charged, written after its answer
/// (a settle: real tokens or cost for the estimate; a cancel).
#[derive(Debug, Clone)]
pub struct Adjust {
    /// The full Redis key (prefix included).
    pub key: std::sync::Arc<str>,
    /// The sliding window's bucket; `None` for a fixed counter.
    pub field: Option<u64>,
    pub delta: i64,
}

/// Ask the Sentinels where the master is now (again at every reconnect:
/// after a failover that is the promoted replica).
async fn master_of(sentinels: Vec<String>, service: String) -> Result<::redis::Client, String> {
    use ::redis::sentinel::{SentinelClient, SentinelServerType};
    let mut s = SentinelClient::build(sentinels, service, None, SentinelServerType::Master)
        .map_err(|e| format!("state.redis_url: {e}"))?;
    s.async_get_client()
        .await
        .map_err(|e| format!("redis sentinel at state.redis_url: {e}"))
}

/// Where the fleet's Redis is: one server (`redis_url`, possibly found
/// through Sentinel) or a Cluster (`cluster_urls`). On a Cluster every key
/// carries one hash tag (the prefix, in braces): a script's keys must share
/// a slot, so the fleet's state lives on one shard (and its replicas).
#[derive(Debug, Clone, PartialEq)]
pub enum Endpoint {
    One(String),
    Cluster(Vec<String>),
}

/// A connection to either.
#[derive(Clone)]
pub enum Conn {
    One(ConnectionManager),
    Cluster(::redis::cluster_async::ClusterConnection),
}

impl ::redis::aio::ConnectionLike for Conn {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a ::redis::Cmd,
    ) -> ::redis::RedisFuture<'a, ::redis::Value> {
        match self {
            Conn::One(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a ::redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> ::redis::RedisFuture<'a, Vec<::redis::Value>> {
        match self {
            Conn::One(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The fleet's shared state on one Redis (reconnecting on its own).
#[derive(Clone)]
pub struct RedisState {
    conn: Conn,
    prefix: String,
    admit: std::sync::Arc<::redis::Script>,
    lease: std::sync::Arc<::redis::Script>,
    publish: std::sync::Arc<::redis::Script>,
    /// Admissions on their way to [`batch_admissions`].
    admit_tx: tokio::sync::mpsc::UnboundedSender<AdmitJob>,
}

/// One request's admission script call, and where its answer goes.
struct AdmitJob {
    cmd: ::redis::Cmd,
    answer: tokio::sync::oneshot::Sender<::redis::RedisResult<::redis::Value>>,
    /// What undoes the charge, should the caller give up after the call
    /// was sent (it decided without Redis: never charged twice).
    refund: Vec<Adjust>,
}

/// Admissions written to Redis in one pipeline at most.
const ADMIT_BATCH: usize = 256;

/// Writes admissions out as pipelines. A batch is what queued while the
/// batcher was busy writing the one before: idle, a request leaves at once;
/// busy, many share a write and a read on both sides. A batch never waits
/// for the one before it to be answered — the connection is multiplexed,
/// so several pipelines are on the wire at once — and so a request waits
/// on Redis for exactly one round trip, whatever else is in flight
/// (contract §7; `tests/fleet.rs` holds it with Redis 100 ms away). Each
/// script still runs alone on Redis (its decision on the shared count), so
/// batching changes no outcome, only the syscalls and wakeups per request:
/// `bench/fleet.sh` measured a connection-level write per call as most of
/// the gateway's Redis cost. A caller that stopped waiting (its 50 ms are
/// up, it decided locally) is dropped before its call is sent, and if its
/// call was already on the wire what it charged is given back
/// (`send_batch`): it is never charged twice.
async fn batch_admissions(
    conn: Conn,
    script: std::sync::Arc<::redis::Script>,
    mut rx: tokio::sync::mpsc::UnboundedReceiver<AdmitJob>,
) {
    let mut jobs = Vec::with_capacity(ADMIT_BATCH);
    while rx.recv_many(&mut jobs, ADMIT_BATCH).await > 0 {
        let mut pipe = ::redis::Pipeline::with_capacity(jobs.len());
        let mut answers = Vec::with_capacity(jobs.len());
        for job in jobs.drain(..) {
            if !job.answer.is_closed() {
                pipe.add_command(job.cmd);
                answers.push((job.answer, job.refund));
            }
        }
        if answers.is_empty() {
            continue;
        }
        tokio::spawn(send_batch(conn.clone(), script.clone(), pipe, answers));
    }
}

type Answer = tokio::sync::oneshot::Sender<::redis::RedisResult<::redis::Value>>;

/// One pipeline of admissions, and each answer to its caller. A caller that
/// gave up while its call was on the wire decided without Redis: what the
/// call charged is given back.
async fn send_batch(
    mut conn: Conn,
    script: std::sync::Arc<::redis::Script>,
    pipe: ::redis::Pipeline,
    answers: Vec<(Answer, Vec<Adjust>)>,
) {
    use ::redis::aio::ConnectionLike;
    let mut replies = conn.req_packed_commands(&pipe, 0, answers.len()).await;
    if let Ok(values) = &replies {
        if values.iter().any(no_script) {
            // Redis lost its scripts (a restart, a failover to a fresh
            // replica): load it again and send the batch once more.
            replies = match script.load_async(&mut conn).await {
                Ok(_) => conn.req_packed_commands(&pipe, 0, answers.len()).await,
                Err(e) => Err(e),
            };
        }
    }
    match replies {
        Ok(values) => {
            let mut refunds = Vec::new();
            for ((answer, refund), v) in answers.into_iter().zip(values) {
                let admitted = matches!(&v, ::redis::Value::Array(a)
                    if matches!(a.first(), Some(::redis::Value::Int(1))));
                if answer.send(Ok(v)).is_err() && admitted {
                    refunds.extend(refund);
                }
            }
            if !refunds.is_empty() {
                let _ = adjust_on(&mut conn, &refunds).await;
            }
        }
        Err(e) => {
            for (answer, _) in answers {
                let e = (e.kind(), "admission batch failed", e.to_string());
                let _ = answer.send(Err(e.into()));
            }
        }
    }
}

fn gone() -> ::redis::RedisError {
    (::redis::ErrorKind::IoError, "admission batcher stopped").into()
}

fn no_script(v: &::redis::Value) -> bool {
    matches!(v, ::redis::Value::ServerError(e) if e.code() == "NOSCRIPT")
}

impl RedisState {
    /// Connect to `url` (`redis://`); keys go under `prefix`. A lost
    /// connection is re-made in the background; a call meanwhile fails
    /// fast rather than waiting for it.
    pub async fn connect(url: &str, prefix: &str) -> Result<RedisState, String> {
        Self::connect_to(&Endpoint::One(url.to_owned()), prefix).await
    }

    /// One server (or the master Sentinel names), or a Cluster.
    pub async fn connect_to(at: &Endpoint, prefix: &str) -> Result<RedisState, String> {
        let conn = match at {
            Endpoint::One(url) => Conn::One(Self::one(url).await?),
            Endpoint::Cluster(urls) => Conn::Cluster(
                ::redis::cluster::ClusterClientBuilder::new(urls.clone())
                    .connection_timeout(std::time::Duration::from_millis(500))
                    .build()
                    .map_err(|e| format!("state.cluster_urls: {e}"))?
                    .get_async_connection()
                    .await
                    .map_err(|e| format!("redis cluster at state.cluster_urls: {e}"))?,
            ),
        };
        let admit = std::sync::Arc::new(::redis::Script::new(ADMIT));
        let (admit_tx, admit_rx) = tokio::sync::mpsc::unbounded_channel();
        // Ends when the last clone of this state is gone (a reconnect
        // makes a new one).
        tokio::spawn(batch_admissions(conn.clone(), admit.clone(), admit_rx));
        let state = RedisState {
            conn,
            prefix: prefix.to_owned(),
            admit,
            lease: std::sync::Arc::new(::redis::Script::new(LEASE)),
            publish: std::sync::Arc::new(::redis::Script::new(PUBLISH)),
            admit_tx,
        };
        // Loaded now, so the first requests' EVALSHA finds them (rather
        // than each paying a NOSCRIPT and a resend of the whole script);
        // a node that lacks one later gets it resent by the call itself.
        let mut c = state.conn.clone();
        for script in [&state.admit, &state.lease, &state.publish] {
            let _ = script.prepare_invoke().load_async(&mut c).await;
        }
        Ok(state)
    }

    async fn one(url: &str) -> Result<ConnectionManager, String> {
        let client = match crate::config::sentinel_parts(url) {
            Some((sentinels, service)) => master_of(sentinels, service).await?,
            None => ::redis::Client::open(url).map_err(|e| format!("state.redis_url: {e}"))?,
        };
        let cfg = ::redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(std::time::Duration::from_millis(500))
            .set_number_of_retries(2)
            .set_max_delay(200);
        ConnectionManager::new_with_config(client, cfg)
            .await
            .map_err(|e| format!("redis at state.redis_url: {e}"))
    }

    /// `prefix` + `key`: the name Redis knows a key by.
    pub fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    pub fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// `windows` at `now_ms` (the caller's clock, in ms): all of them
    /// charged, or none. One round trip (`EVALSHA`, loading the script
    /// once if the server does not have it). Keys are taken as given
    /// (prefixed by the caller, see [`RedisState::key`]).
    pub async fn admit(
        &self,
        windows: &[Window<'_>],
        now_ms: u64,
    ) -> Result<Admission, ::redis::RedisError> {
        self.admit_key(windows, None, now_ms).await
    }

    /// [`RedisState::admit`], refused first if `revoked` = (set, key id)
    /// holds the id.
    pub async fn admit_key(
        &self,
        windows: &[Window<'_>],
        revoked: Option<(&str, &str)>,
        now_ms: u64,
    ) -> Result<Admission, ::redis::RedisError> {
        // EVALSHA sha n KEYS… ARGV…, as `Script::prepare_invoke` would
        // build it, but sent through the batcher.
        let nkeys = 2 * windows.len() + usize::from(revoked.is_some());
        let mut cmd = ::redis::cmd("EVALSHA");
        cmd.arg(self.admit.get_hash()).arg(nkeys);
        for w in windows {
            cmd.arg(w.key);
        }
        for w in windows {
            cmd.arg(leases_key(w.key));
        }
        if let Some((set, _)) = revoked {
            cmd.arg(set);
        }
        cmd.arg(BUCKETS)
            .arg(revoked.map_or("", |(_, id)| id))
            .arg(now_ms);
        for w in windows {
            let (bucket, expiry, kind, seed) = match w.span {
                Span::Sliding(span) => {
                    let kind = if w.alone_ok { "a" } else { "s" };
                    (w.field(now_ms).unwrap_or(0), span * 2, kind, 0)
                }
                Span::Fixed { ttl_ms, seed } => (0, ttl_ms, "f", seed),
            };
            cmd.arg(w.limit)
                .arg(w.cost)
                .arg(bucket)
                .arg(expiry)
                .arg(kind)
                .arg(seed);
        }
        let refund = windows
            .iter()
            .filter(|w| w.cost > 0)
            .map(|w| Adjust {
                key: w.key.into(),
                field: w.field(now_ms),
                delta: -(w.cost as i64),
            })
            .collect();
        let (answer, reply) = tokio::sync::oneshot::channel();
        self.admit_tx
            .send(AdmitJob {
                cmd,
                answer,
                refund,
            })
            .map_err(|_| gone())?;
        let value = reply.await.map_err(|_| gone())??;
        let reply: Vec<u64> = ::redis::from_owned_redis_value(value.extract_error()?)?;
        Ok(match reply.as_slice() {
            [1, _, used @ ..] => Admission::Admitted(used.to_vec()),
            [2, ..] => Admission::Revoked,
            [_, index, used, ..] => Admission::Refused {
                index: (*index as usize).saturating_sub(1),
                used: *used,
            },
            _ => Admission::Refused { index: 0, used: 0 },
        })
    }

    /// Renew `renewals` for instance `me` at `now_ms` (see [`LEASE`]): one
    /// round trip, however many windows.
    pub async fn lease(
        &self,
        me: &str,
        renewals: &[super::lease::Renewal],
        peers: u32,
        now_ms: u64,
    ) -> Result<Vec<super::lease::Granted>, ::redis::RedisError> {
        let mut call = self.lease.prepare_invoke();
        for r in renewals {
            call.key(&*r.key).key(leases_key(&r.key));
        }
        call.arg(BUCKETS)
            .arg(me)
            .arg(now_ms)
            .arg(super::lease::LEASE_TTL_MS)
            .arg(peers.max(1))
            .arg(super::lease::SHARE);
        for r in renewals {
            let (kind, cur, expiry, seed) = match r.span {
                Span::Sliding(span) => {
                    let kind = if r.alone_ok { "a" } else { "s" };
                    (kind, now_ms / (span / BUCKETS).max(1), span * 2, 0)
                }
                Span::Fixed { ttl_ms, seed } => ("f", 0, ttl_ms, seed),
            };
            call.arg(r.limit)
                .arg(kind)
                .arg(cur)
                .arg(expiry)
                .arg(seed)
                .arg(r.commits.len());
            for (field, delta) in &r.commits {
                match field {
                    Some(f) => call.arg(f),
                    None => call.arg("-"),
                };
                call.arg(delta);
            }
            call.arg(r.carry).arg(r.want).arg(r.least);
        }
        let out: Vec<u64> = call.invoke_async(&mut self.conn.clone()).await?;
        Ok(out
            .chunks_exact(4)
            .map(|c| super::lease::Granted {
                total: c[0],
                others: c[1],
                carry: c[2],
                extra: c[3],
            })
            .collect())
    }

    /// Many requests' corrections in one pipelined round trip, those to
    /// the same counter summed first (most of a batch hits a few buckets).
    pub async fn adjust(&self, batch: &[Adjust]) -> Result<(), ::redis::RedisError> {
        adjust_on(&mut self.conn.clone(), batch).await
    }
}

/// [`RedisState::adjust`] on `conn`.
async fn adjust_on(conn: &mut Conn, batch: &[Adjust]) -> Result<(), ::redis::RedisError> {
    let mut sums: std::collections::HashMap<(&str, Option<u64>), i64> =
        std::collections::HashMap::with_capacity(8);
    for a in batch {
        *sums.entry((&a.key, a.field)).or_default() += a.delta;
    }
    sums.retain(|_, d| *d != 0);
    if sums.is_empty() {
        return Ok(());
    }
    let mut pipe = ::redis::pipe();
    for ((key, field), delta) in sums {
        match field {
            Some(f) => pipe
                .cmd("EVAL")
                .arg(ADJUST)
                .arg(1)
                .arg(key)
                .arg(f)
                .arg(delta)
                .ignore(),
            None => pipe.incr(key, delta).ignore(),
        };
    }
    pipe.query_async::<()>(conn).await
}

/// Circuit transitions as versioned events (contract §7): every instance
/// acts on the same circuit state. A transition bumps the deployment's
/// version, records it as the latest state and appends it to a Redis Stream,
/// in one script; consumers apply only versions newer than what they hold,
/// so a duplicate or late event never flips a circuit back.
const PUBLISH: &str = r"
local version = redis.call('HINCRBY', KEYS[1], ARGV[1] .. ':v', 1)
local entry = version .. '|' .. ARGV[2] .. '|' .. ARGV[3]
redis.call('HSET', KEYS[1], ARGV[1], entry)
redis.call('XADD', KEYS[2], 'MAXLEN', '~', 10000, '*', 'deployment', ARGV[1], 'entry', entry)
return version
";

/// One circuit transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitEvent {
    pub deployment: String,
    /// `closed`, `open` or `half_open`.
    pub state: String,
    /// Per deployment, one more at every transition.
    pub version: u64,
    /// When it happened (the publisher's clock, ms).
    pub at_ms: u64,
}

impl CircuitEvent {
    fn parse(deployment: &str, entry: &str) -> Option<CircuitEvent> {
        let mut parts = entry.splitn(3, '|');
        let version = parts.next()?.parse().ok()?;
        let state = parts.next()?.to_owned();
        let at_ms = parts.next()?.parse().ok()?;
        Some(CircuitEvent {
            deployment: deployment.to_owned(),
            state,
            version,
            at_ms,
        })
    }
}

/// One entry of the events stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Circuit(CircuitEvent),
    /// A virtual key issued through the admin API (its record, as JSON).
    KeyIssued(String),
    /// A virtual key revoked: `client id`.
    KeyRevoked(String),
}

pub const KEY_ISSUED: &str = "key_issued";
pub const KEY_REVOKED: &str = "key_revoked";

/// Where a consumer is in the stream (`0` from the start, or an entry id).
pub type StreamPos = String;

impl RedisState {
    fn circuit_keys(&self) -> (String, String) {
        (
            format!("{}circuits", self.prefix),
            // Contract §7: the fleet's events stream.
            format!("{}events", self.prefix),
        )
    }

    /// Publish a transition; returns its version.
    pub async fn publish_circuit(
        &self,
        deployment: &str,
        state: &str,
        at_ms: u64,
    ) -> Result<u64, ::redis::RedisError> {
        let (latest, stream) = self.circuit_keys();
        let mut conn = self.conn.clone();
        self.publish
            .key(latest)
            .key(stream)
            .arg(deployment)
            .arg(state)
            .arg(at_ms)
            .invoke_async(&mut conn)
            .await
    }

    /// Catch up (at start-up, after a reconnect): the latest state of every
    /// deployment, and where to read the stream from. The position is read
    /// first, so a transition that lands in between is read twice, never
    /// missed (the version makes the second one a no-op).
    pub async fn circuit_catch_up(
        &self,
    ) -> Result<(Vec<CircuitEvent>, StreamPos), ::redis::RedisError> {
        let (latest, stream) = self.circuit_keys();
        let mut conn = self.conn.clone();
        let last: ::redis::streams::StreamRangeReply = ::redis::cmd("XREVRANGE")
            .arg(&stream)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query_async(&mut conn)
            .await?;
        let pos = last
            .ids
            .first()
            .map_or_else(|| "0".to_owned(), |e| e.id.clone());
        let all: std::collections::HashMap<String, String> = ::redis::cmd("HGETALL")
            .arg(&latest)
            .query_async(&mut conn)
            .await?;
        let events = all
            .iter()
            .filter(|(k, _)| !k.ends_with(":v"))
            .filter_map(|(k, v)| CircuitEvent::parse(k, v))
            .collect();
        Ok((events, pos))
    }

    /// Transitions after `pos`, waiting up to `block_ms` for one. Blocks its
    /// connection meanwhile: a consumer has a `RedisState` of its own.
    pub async fn circuit_events(
        &self,
        pos: &str,
        block_ms: u64,
    ) -> Result<(Vec<CircuitEvent>, StreamPos), ::redis::RedisError> {
        let (events, next) = self.events(pos, block_ms).await?;
        let circuits = events
            .into_iter()
            .filter_map(|e| match e {
                Event::Circuit(c) => Some(c),
                _ => None,
            })
            .collect();
        Ok((circuits, next))
    }

    /// Append a non-circuit event (a virtual key issued or revoked); its
    /// entry id.
    pub async fn publish_event(
        &self,
        field: &str,
        value: &str,
    ) -> Result<String, ::redis::RedisError> {
        let (_, stream) = self.circuit_keys();
        let mut conn = self.conn.clone();
        ::redis::cmd("XADD")
            .arg(&stream)
            .arg("MAXLEN")
            .arg("~")
            .arg(10_000)
            .arg("*")
            .arg(field)
            .arg(value)
            .query_async::<String>(&mut conn)
            .await
    }

    /// Every event after `pos` (see [`RedisState::circuit_events`]).
    pub async fn events(
        &self,
        pos: &str,
        block_ms: u64,
    ) -> Result<(Vec<Event>, StreamPos), ::redis::RedisError> {
        let (_, stream) = self.circuit_keys();
        let mut conn = self.conn.clone();
        let opts = ::redis::streams::StreamReadOptions::default()
            .block(block_ms as usize)
            .count(1000);
        let reply: Option<::redis::streams::StreamReadReply> =
            ::redis::AsyncCommands::xread_options(&mut conn, &[&stream], &[pos], &opts).await?;
        let mut next = pos.to_owned();
        let mut events = Vec::new();
        for key in reply.into_iter().flat_map(|r| r.keys) {
            for entry in key.ids {
                let field = |name: &str| entry.get::<String>(name);
                if let (Some(d), Some(e)) = (field("deployment"), field("entry")) {
                    events.extend(CircuitEvent::parse(&d, &e).map(Event::Circuit));
                } else if let Some(k) = field(KEY_ISSUED) {
                    events.push(Event::KeyIssued(k));
                } else if let Some(k) = field(KEY_REVOKED) {
                    events.push(Event::KeyRevoked(k));
                }
                next = entry.id;
            }
        }
        Ok((events, next))
    }
}

/// What one instance holds of the fleet's circuits: the newest version of
/// each deployment's state.
#[derive(Debug, Default)]
pub struct CircuitView {
    latest: std::collections::HashMap<String, CircuitEvent>,
}

impl CircuitView {
    /// Apply `ev` if it is newer than what is held; `true` when it changed
    /// the view (the caller then moves its breaker).
    pub fn apply(&mut self, ev: CircuitEvent) -> bool {
        match self.latest.get(&ev.deployment) {
            Some(held) if held.version >= ev.version => false,
            _ => {
                self.latest.insert(ev.deployment.clone(), ev);
                true
            }
        }
    }

    pub fn state(&self, deployment: &str) -> Option<&str> {
        self.latest.get(deployment).map(|e| e.state.as_str())
    }
}
