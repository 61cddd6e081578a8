//! Shared state in Redis (contract §7), first pieces: admission against
//! fleet-wide sliding windows in one round trip, and circuit transitions as
//! versioned events on a Redis Stream. A request's limits (the
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
    publish: std::sync::Arc<::redis::Script>,
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
            publish: std::sync::Arc::new(::redis::Script::new(PUBLISH)),
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

/// Where a consumer is in the stream (`0` from the start, or an entry id).
pub type StreamPos = String;

impl RedisState {
    fn circuit_keys(&self) -> (String, String) {
        (
            format!("{}circuits", self.prefix),
            format!("{}circuit-events", self.prefix),
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
                    events.extend(CircuitEvent::parse(&d, &e));
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
