//! One gateway of a fleet (`state.backend: redis`, contract §7): what an
//! instance shares with the others, and how it keeps serving without them.
//!
//! - Admission ([`Fleet::admit`]): a request's client and deployment
//!   rpm/tpm windows and its budget reservation are taken from this
//!   instance's leased slices ([`super::lease`]) when they cover it, and
//!   otherwise charged by one script in one round trip. One task renews the
//!   slices, all windows in one call, and writes what was admitted from
//!   them. The corrections after the answer (real tokens and cost for the
//!   estimates) go with the next renewal when the window has a slice here,
//!   else to a queue that one task writes out in pipelined batches
//!   ([`Fleet::adjust`]); never on the request's time.
//! - Revokes: a virtual key revoked here returns once every live instance
//!   has confirmed it applied the event (`{prefix}applied`), since slices
//!   admit without asking Redis.
//! - Events: circuit transitions are published as versioned events on the
//!   `{prefix}events` stream and applied by every instance (`events` task).
//! - Heartbeats: every second each instance writes itself into
//!   `{prefix}instances` (with its `config_version`) and counts the live
//!   ones, so a fallback knows what share of a limit is its own.
//! - Redis down or slow (over 50 ms): `on_unavailable: local` decides on
//!   this instance's own state, every shared limit divided by the instances
//!   last seen; `reject` refuses. Either way it is counted per op and said
//!   once in the log, and the heartbeat brings the instance back.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::lease::{Leases, Local};
use super::redis::{
    Adjust, Admission, CircuitEvent, Endpoint, Event, RedisState, Window, KEY_ISSUED, KEY_REVOKED,
};

/// Slower than this is unavailable (contract §7).
pub const SLOW: Duration = Duration::from_millis(50);
/// Late answers in a row that take the instance off Redis.
const SLOW_RUN: u32 = 3;
/// An instance not heard from for this long is gone.
const HEARTBEAT_TTL_MS: u64 = 5_000;
const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// How often the slices are looked over for renewal.
const LEASE_TICK: Duration = Duration::from_millis(100);
/// Corrections waiting to be written; a full queue drops (and counts) one.
const ADJUST_QUEUE: usize = 65_536;

/// `switchyard_state_backend_errors_total{op}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Admit,
    Adjust,
    Heartbeat,
    Events,
    Publish,
    Read,
}

impl Op {
    pub const ALL: [Op; 6] = [
        Op::Admit,
        Op::Adjust,
        Op::Heartbeat,
        Op::Events,
        Op::Publish,
        Op::Read,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Op::Admit => "admit",
            Op::Adjust => "adjust",
            Op::Heartbeat => "heartbeat",
            Op::Events => "events",
            Op::Publish => "publish",
            Op::Read => "read",
        }
    }
}

/// What the fleet could not decide: the caller falls back (`local`) or
/// refuses (`reject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unavailable {
    pub reject: bool,
}

/// An instance seen by its heartbeat.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Peer {
    pub id: String,
    pub config_version: String,
    pub started_at_ms: u64,
    pub last_seen_ms: u64,
    /// Its health score per deployment (merged by the others).
    #[serde(default)]
    pub health: HashMap<String, f64>,
    /// What its requests in flight hold on the fleet's budget counters,
    /// per client (USD): the fleet's reservations are every instance's.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub budget_held: HashMap<String, f64>,
}

/// What an instance says of itself in each heartbeat.
pub struct Report {
    pub config_version: String,
    pub health: HashMap<String, f64>,
    pub budget_held: HashMap<String, f64>,
}

/// A circuit's state as it travels between instances: the breaker's mode,
/// how long it has left (ms, from the event's time) and its cooldown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedCircuit {
    pub mode: u64,
    pub left_ms: u64,
    pub cooldown_ms: u64,
}

impl SharedCircuit {
    fn encode(&self, instance: &str) -> String {
        format!(
            "{},{},{},{instance}",
            self.mode, self.left_ms, self.cooldown_ms
        )
    }

    /// The state and its publisher.
    fn decode(s: &str) -> Option<(SharedCircuit, &str)> {
        let mut p = s.splitn(4, ',');
        let c = SharedCircuit {
            mode: p.next()?.parse().ok()?,
            left_ms: p.next()?.parse().ok()?,
            cooldown_ms: p.next()?.parse().ok()?,
        };
        Some((c, p.next().unwrap_or("")))
    }
}

/// Applies the events of other instances here (`registry::Registry`
/// implements it): a circuit transition to this one's breaker, a virtual
/// key issued or revoked to this one's keys.
pub trait FleetSink: Send + Sync {
    fn circuit(&self, deployment: &str, c: SharedCircuit, age_ms: u64);
    fn key_issued(&self, k: SharedKey);
    fn key_revoked(&self, client: &str, id: &str);
}

/// A virtual key issued through the admin API, as the fleet shares it
/// (only its hash, like the usage store).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct SharedKey {
    pub sha256: String,
    pub client: String,
    pub id: String,
    pub created_at_ms: i64,
}

pub struct Fleet {
    redis: ArcSwapOption<RedisState>,
    at: Endpoint,
    prefix: String,
    /// `{prefix}revoked`, the set every admission checks (named once, not
    /// per request).
    revoked_key: String,
    pub instance: Arc<str>,
    started_at_ms: u64,
    reject: bool,
    up: AtomicBool,
    /// Calls over [`SLOW`] in a row.
    slow_run: AtomicU32,
    peers: AtomicU32,
    errors: [AtomicU64; Op::ALL.len()],
    adjust_tx: mpsc::Sender<Adjust>,
    adjust_rx: Mutex<Option<mpsc::Receiver<Adjust>>>,
    publish_tx: mpsc::UnboundedSender<(String, SharedCircuit)>,
    publish_rx: Mutex<Option<mpsc::UnboundedReceiver<(String, SharedCircuit)>>>,
    live_peers: Mutex<Vec<Peer>>,
    /// The other live instances' health scores: per deployment, their sum
    /// and how many reported one.
    peer_health: arc_swap::ArcSwap<HashMap<String, (f64, u32)>>,
    /// The newest circuit version applied per deployment (stale events
    /// never flip a breaker back).
    versions: Mutex<HashMap<String, u64>>,
    /// This instance's slices of the shared windows.
    leases: Leases,
    /// A request the slices did not cover: renew now, not at the next tick.
    lease_nudge: tokio::sync::Notify,
    /// Lease renewals sent (for `/metrics` and the fleet benchmark).
    renewals: AtomicU64,
    /// Requests admitted from this instance's slices.
    leased: AtomicU64,
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Fleet {
    /// A fleet member for `url` with keys under `prefix`. Connecting is the
    /// heartbeat's job: an instance started while Redis is down serves on
    /// its own state and joins when Redis answers.
    pub fn new(at: Endpoint, prefix: &str, reject: bool) -> Arc<Fleet> {
        // On a Cluster one hash tag keeps a script's keys in one slot.
        let prefix = match at {
            Endpoint::Cluster(_) => format!("{{{prefix}}}"),
            Endpoint::One(_) => prefix.to_owned(),
        };
        let (adjust_tx, adjust_rx) = mpsc::channel(ADJUST_QUEUE);
        let (publish_tx, publish_rx) = mpsc::unbounded_channel();
        let instance = format!(
            "{}-{}-{:04x}",
            hostname(),
            std::process::id(),
            rand::random::<u16>()
        );
        Arc::new(Fleet {
            redis: ArcSwapOption::empty(),
            at,
            revoked_key: format!("{prefix}revoked"),
            prefix,
            instance: instance.into(),
            started_at_ms: now_ms(),
            reject,
            up: AtomicBool::new(false),
            slow_run: AtomicU32::new(0),
            peers: AtomicU32::new(1),
            errors: Default::default(),
            adjust_tx,
            adjust_rx: Mutex::new(Some(adjust_rx)),
            publish_tx,
            publish_rx: Mutex::new(Some(publish_rx)),
            live_peers: Mutex::new(Vec::new()),
            peer_health: Default::default(),
            versions: Mutex::new(HashMap::new()),
            leases: Leases::default(),
            lease_nudge: tokio::sync::Notify::new(),
            renewals: AtomicU64::new(0),
            leased: AtomicU64::new(0),
        })
    }

    /// `prefix` + `key`.
    pub fn key(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }

    /// Redis, when it is answering.
    fn redis(&self) -> Option<Arc<RedisState>> {
        if !self.up.load(Ordering::Acquire) {
            return None;
        }
        self.redis.load_full()
    }

    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// The instances last seen (at least this one).
    pub fn peers(&self) -> u32 {
        self.peers.load(Ordering::Relaxed).max(1)
    }

    pub fn live_peers(&self) -> Vec<Peer> {
        lock(&self.live_peers).clone()
    }

    /// What the other live instances held on the fleet's budget counters
    /// at their last heartbeat, per client (USD).
    pub fn peers_budget_held(&self) -> HashMap<String, f64> {
        let mut held: HashMap<String, f64> = HashMap::new();
        for p in lock(&self.live_peers)
            .iter()
            .filter(|p| p.id != *self.instance)
        {
            for (client, usd) in &p.budget_held {
                *held.entry(client.clone()).or_default() += usd;
            }
        }
        held
    }

    /// `local` merged with the other instances' scores for `deployment`
    /// (a mean: every instance's view counts once).
    pub fn merged_health(&self, deployment: &str, local: f64) -> f64 {
        match self.peer_health.load().get(deployment) {
            Some((sum, n)) if self.is_up() => (local + sum) / f64::from(n + 1),
            _ => local,
        }
    }

    /// A shared limit's share for this instance while Redis is away.
    pub fn local_share(&self, limit: u64) -> u64 {
        (limit / u64::from(self.peers())).max(1)
    }

    pub fn errors(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        Op::ALL
            .iter()
            .zip(&self.errors)
            .map(|(op, n)| (op.as_str(), n.load(Ordering::Relaxed)))
    }

    fn unavailable(&self) -> Unavailable {
        Unavailable {
            reject: self.reject,
        }
    }

    /// Count a failed op; the first failure after being up says so in the
    /// log, once, not per request.
    pub fn failed(&self, op: Op, e: &dyn std::fmt::Display) {
        self.errors[op as usize].fetch_add(1, Ordering::Relaxed);
        if self.up.swap(false, Ordering::AcqRel) {
            self.leases.clear();
            let mode = if self.reject {
                "refusing requests that need it (on_unavailable: reject)"
            } else {
                "serving on this instance's own state, shared limits divided by the instances last seen"
            };
            tracing::error!(op = op.as_str(), error = %e, peers = self.peers(), "shared state (Redis) unavailable: {mode}");
        }
    }

    /// A call that took over [`SLOW`]: that request decides without Redis,
    /// and a run of them in a row is Redis being slow (one late answer on
    /// a busy instance is not).
    fn slow(&self, op: Op) {
        if self.slow_run.fetch_add(1, Ordering::AcqRel) + 1 >= SLOW_RUN {
            self.failed(op, &"no answer within 50 ms, several times in a row");
        } else {
            self.errors[op as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn answered(&self) {
        if self.slow_run.load(Ordering::Relaxed) != 0 {
            self.slow_run.store(0, Ordering::Relaxed);
        }
    }

    /// A heartbeat failed: count it, and connect afresh next time.
    fn lost(&self, op: Op, e: &dyn std::fmt::Display) {
        self.failed(op, e);
        self.redis.store(None);
    }

    /// Charge `windows` (keys from [`Fleet::key`]) on the shared counts, in
    /// one round trip of at most [`SLOW`].
    /// `key_id`: a virtual key issued at run time, refused if revoked.
    pub async fn admit(
        &self,
        windows: &[Window<'_>],
        key_id: Option<&str>,
        now_ms: u64,
    ) -> Result<Admission, Unavailable> {
        let Some(r) = self.redis() else {
            return Err(self.unavailable());
        };
        // A revoked key is known on every instance before its revoke
        // returns (`share_key_revoked` waits for them): the slices need not
        // ask.
        let (taken, mut used) = match self.leases.take(windows, now_ms) {
            Local::Admitted(used) => {
                self.leased.fetch_add(1, Ordering::Relaxed);
                return Ok(Admission::Admitted(used));
            }
            Local::Refused { index, used } => return Ok(Admission::Refused { index, used }),
            Local::Ask { taken, used } => (taken, used),
        };
        self.lease_nudge.notify_one();
        let asked: Vec<usize> = (0..windows.len()).filter(|&i| !taken[i]).collect();
        let ask: Vec<Window<'_>> = asked.iter().map(|&i| windows[i].clone()).collect();
        let revoked = key_id.map(|id| (self.revoked_key.as_str(), id));
        let answer = match tokio::time::timeout(SLOW, r.admit_key(&ask, revoked, now_ms)).await {
            Ok(Ok(a)) => {
                self.answered();
                self.leases.answered(&ask, &a, now_ms);
                Ok(a)
            }
            Ok(Err(e)) => {
                self.failed(Op::Admit, &e);
                Err(self.unavailable())
            }
            Err(_) => {
                self.slow(Op::Admit);
                Err(self.unavailable())
            }
        };
        // Back in the request's own order; what the slices took is given
        // back unless every window took the request.
        match answer {
            Ok(Admission::Admitted(got)) => {
                for (&i, u) in asked.iter().zip(got) {
                    used[i] = u;
                }
                Ok(Admission::Admitted(used))
            }
            Ok(Admission::Refused { index, used }) => {
                self.leases.give_back(windows, &taken, now_ms);
                Ok(Admission::Refused {
                    index: asked.get(index).copied().unwrap_or(0),
                    used,
                })
            }
            other => {
                self.leases.give_back(windows, &taken, now_ms);
                other
            }
        }
    }

    /// Queue a correction; written with others after the answer.
    pub fn adjust(&self, a: Adjust) {
        if a.delta == 0 || self.leases.correct(&a.key, a.field, a.delta, now_ms()) {
            return;
        }
        if self.adjust_tx.try_send(a).is_err() {
            self.errors[Op::Adjust as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A circuit transition made here, for every other instance.
    pub fn publish(&self, deployment: &str, c: SharedCircuit) {
        let _ = self.publish_tx.send((deployment.to_owned(), c));
    }

    /// A read on the shared state (sticky sessions, cache, keys), bounded
    /// by [`SLOW`]; `None` when Redis is away (the caller goes local).
    pub async fn read<T, F>(&self, f: impl FnOnce(RedisState) -> F) -> Option<T>
    where
        F: std::future::Future<Output = Result<T, ::redis::RedisError>>,
    {
        self.read_within(SLOW, f).await
    }

    /// [`Fleet::read`] for work off the request path that may wait longer
    /// than [`SLOW`] (a canary's judge tick): over `limit` counts as slow.
    pub async fn read_within<T, F>(
        &self,
        limit: Duration,
        f: impl FnOnce(RedisState) -> F,
    ) -> Option<T>
    where
        F: std::future::Future<Output = Result<T, ::redis::RedisError>>,
    {
        let r = self.redis()?;
        match tokio::time::timeout(limit, f((*r).clone())).await {
            Ok(Ok(v)) => {
                self.answered();
                Some(v)
            }
            Ok(Err(e)) => {
                self.failed(Op::Read, &e);
                None
            }
            Err(_) => {
                self.slow(Op::Read);
                None
            }
        }
    }

    /// A write that may wait for nothing (sticky bindings, cache entries,
    /// issued keys): sent in the background.
    pub fn write<F>(self: &Arc<Self>, f: impl FnOnce(RedisState) -> F + Send + 'static)
    where
        F: std::future::Future<Output = Result<(), ::redis::RedisError>> + Send,
    {
        let Some(r) = self.redis() else {
            return;
        };
        let me = self.clone();
        tokio::spawn(async move {
            if let Err(e) = f((*r).clone()).await {
                me.failed(Op::Read, &e);
            }
        });
    }

    /// A key issued here: on every instance from now on (a miss elsewhere
    /// reads it through, and the event lands it everywhere).
    pub async fn share_key_issued(&self, k: &SharedKey) -> Result<(), String> {
        let r = self.redis().ok_or("Redis is unavailable")?;
        let json = serde_json::to_string(k).map_err(|e| e.to_string())?;
        let mut c = r.conn();
        let write = async {
            ::redis::cmd("HSET")
                .arg(self.key("keys"))
                .arg(&k.sha256)
                .arg(&json)
                .query_async::<()>(&mut c)
                .await?;
            r.publish_event(KEY_ISSUED, &json).await
        };
        self.admin_call(write).await.map(drop)
    }

    /// A key revoked here: refused on every instance at once (the
    /// admission script checks the revoked set).
    pub async fn share_key_revoked(&self, client: &str, id: &str) -> Result<(), String> {
        let r = self.redis().ok_or("Redis is unavailable")?;
        let mut c = r.conn();
        let keys = self.key("keys");
        let write = async {
            ::redis::cmd("SADD")
                .arg(&self.revoked_key)
                .arg(id)
                .query_async::<()>(&mut c)
                .await?;
            let all: HashMap<String, String> = ::redis::cmd("HGETALL")
                .arg(&keys)
                .query_async(&mut c)
                .await?;
            for (sha, json) in all {
                if serde_json::from_str::<SharedKey>(&json).is_ok_and(|k| k.id == id) {
                    ::redis::cmd("HDEL")
                        .arg(&keys)
                        .arg(sha)
                        .query_async::<()>(&mut c)
                        .await?;
                }
            }
            r.publish_event(KEY_REVOKED, &format!("{client} {id}"))
                .await
        };
        let event = self.admin_call(write).await?;
        self.applied_everywhere(&event).await
    }

    /// Wait (up to 1 s) until every other live instance has applied the
    /// event `id`: their slices admit without asking Redis, so a revoke
    /// must be known everywhere before it returns.
    async fn applied_everywhere(&self, id: &str) -> Result<(), String> {
        let others: Vec<String> = self
            .live_peers()
            .into_iter()
            .map(|p| p.id)
            .filter(|p| *p != *self.instance)
            .collect();
        if others.is_empty() {
            return Ok(());
        }
        let r = self.redis().ok_or("Redis is unavailable")?;
        let key = self.key("applied");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
        loop {
            let mut c = r.conn();
            let at: Vec<Option<String>> = ::redis::cmd("HMGET")
                .arg(&key)
                .arg(&others)
                .query_async(&mut c)
                .await
                .map_err(|e| e.to_string())?;
            let behind = at
                .iter()
                .filter(|a| a.as_deref().is_none_or(|a| stream_id(a) < stream_id(id)))
                .count();
            if behind == 0 {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    behind,
                    "a revoke was not confirmed by every instance within 1 s: they apply it when they read the events stream"
                );
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// An admin API's write to the fleet: bounded to 1 s, its failure
    /// counted and said to the caller.
    async fn admin_call<T>(
        &self,
        write: impl std::future::Future<Output = Result<T, ::redis::RedisError>>,
    ) -> Result<T, String> {
        tokio::time::timeout(Duration::from_secs(1), write)
            .await
            .map_err(|_| "Redis did not answer within 1 s".to_owned())?
            .map_err(|e| {
                self.failed(Op::Publish, &e);
                e.to_string()
            })
    }

    /// A key this instance does not know, looked up in the fleet's (one
    /// read, only on such a miss).
    pub async fn find_key(&self, sha256: &str) -> Option<SharedKey> {
        let keys = self.key("keys");
        let json: String = self
            .read(|r| async move {
                let mut c = r.conn();
                ::redis::cmd("HGET")
                    .arg(&keys)
                    .arg(sha256)
                    .query_async::<Option<String>>(&mut c)
                    .await
            })
            .await
            .flatten()?;
        serde_json::from_str(&json).ok()
    }

    /// Every live key the fleet shares, and the ids revoked anywhere
    /// (`None`: Redis is away).
    pub async fn all_keys(&self) -> Option<(Vec<SharedKey>, Vec<String>)> {
        let (keys, revoked) = (self.key("keys"), self.revoked_key.clone());
        let (all, revoked): (HashMap<String, String>, Vec<String>) = self
            .read(|r| async move {
                let mut c = r.conn();
                ::redis::pipe()
                    .hgetall(&keys)
                    .smembers(&revoked)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        let live = all
            .values()
            .filter_map(|j| serde_json::from_str(j).ok())
            .collect();
        Some((live, revoked))
    }

    /// `GET key` (a full key, from [`Fleet::key`]), bounded by [`SLOW`].
    pub async fn get(&self, key: String) -> Option<String> {
        self.read(|r| async move {
            let mut c = r.conn();
            ::redis::cmd("GET")
                .arg(key)
                .query_async::<Option<String>>(&mut c)
                .await
        })
        .await
        .flatten()
    }

    /// `SET key value PX ttl`, waited for (bounded by [`SLOW`]).
    pub async fn set(&self, key: String, value: String, ttl: Duration) {
        let _: Option<()> = self.read(|r| set_px(r, key, value, ttl)).await;
    }

    /// `SET key value NX PX ttl`: whether this instance took `key` (the
    /// one instance to do a piece of work until `ttl`). Redis away: `true`,
    /// each instance then does its own.
    pub async fn claim(&self, key: String, ttl: Duration) -> bool {
        let me = self.instance.to_string();
        self.read(|r| async move {
            let mut c = r.conn();
            ::redis::cmd("SET")
                .arg(key)
                .arg(me)
                .arg("NX")
                .arg("PX")
                .arg((ttl.as_millis() as u64).max(1))
                .query_async::<Option<String>>(&mut c)
                .await
        })
        .await
        .is_none_or(|r| r.is_some())
    }

    /// `SET key value PX ttl` in the background.
    pub fn set_later(self: &Arc<Self>, key: String, value: String, ttl: Duration) {
        self.write(move |r| set_px(r, key, value, ttl));
    }

    /// `DEL key` in the background.
    pub fn delete_later(self: &Arc<Self>, key: String) {
        self.write(move |r| async move {
            let mut c = r.conn();
            ::redis::cmd("DEL").arg(key).query_async(&mut c).await
        });
    }

    /// The fleet's background work: heartbeats (and re-joining), the
    /// adjustment writer, circuit publishing and the event consumer.
    pub fn run(
        self: &Arc<Self>,
        report: Arc<dyn Fn() -> Report + Send + Sync>,
        circuits: Arc<dyn FleetSink>,
        stop: CancellationToken,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let adjust_rx = lock(&self.adjust_rx).take();
        let publish_rx = lock(&self.publish_rx).take();
        let mut tasks = vec![tokio::spawn(self.clone().heartbeat(report, stop.clone()))];
        if let Some(rx) = adjust_rx {
            tasks.push(tokio::spawn(
                self.clone().write_adjustments(rx, stop.clone()),
            ));
        }
        if let Some(rx) = publish_rx {
            tasks.push(tokio::spawn(
                self.clone().publish_circuits(rx, stop.clone()),
            ));
        }
        tasks.push(tokio::spawn(self.clone().renew_leases(stop.clone())));
        tasks.push(tokio::spawn(self.clone().consume(circuits, stop)));
        tasks
    }

    /// Renew the slices that are due (every [`LEASE_TICK`], or at once when
    /// a request found none), all windows in one round trip; on stopping,
    /// give every slice back and write what is pending.
    async fn renew_leases(self: Arc<Self>, stop: CancellationToken) {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(LEASE_TICK) => {}
                _ = self.lease_nudge.notified() => {}
            }
            let now = now_ms();
            if self.redis().is_none() {
                continue;
            }
            let due = self.leases.due(now);
            self.send_renewals(due, now, Duration::from_secs(1)).await;
        }
        let now = now_ms();
        let last = self.leases.release_all(now);
        self.send_renewals(last, now, SLOW).await;
    }

    async fn send_renewals(&self, due: Vec<super::lease::Renewal>, now: u64, within: Duration) {
        if due.is_empty() {
            return;
        }
        let Some(r) = self.redis() else {
            due.iter().for_each(|d| self.leases.renewed(d, None, now));
            return;
        };
        self.renewals.fetch_add(1, Ordering::Relaxed);
        let peers = self.peers();
        let answer =
            match tokio::time::timeout(within, r.lease(&self.instance, &due, peers, now)).await {
                Ok(Ok(granted)) if granted.len() == due.len() => Some(granted),
                Ok(Ok(_)) => {
                    self.failed(Op::Adjust, &"a lease renewal answered for other windows");
                    None
                }
                Ok(Err(e)) => {
                    self.failed(Op::Adjust, &e);
                    None
                }
                Err(_) => {
                    self.failed(Op::Adjust, &"no answer within 1 s");
                    None
                }
            };
        match answer {
            Some(granted) => {
                self.answered();
                for (d, g) in due.iter().zip(granted) {
                    self.leases.renewed(d, Some(g), now);
                }
            }
            None => due.iter().for_each(|d| self.leases.renewed(d, None, now)),
        }
    }

    /// Shared windows this instance keeps an account of.
    pub fn lease_windows(&self) -> usize {
        self.leases.len()
    }

    /// Lease renewals sent and requests admitted from slices, so far.
    pub fn lease_counts(&self) -> (u64, u64) {
        (
            self.renewals.load(Ordering::Relaxed),
            self.leased.load(Ordering::Relaxed),
        )
    }

    async fn heartbeat(
        self: Arc<Self>,
        report: Arc<dyn Fn() -> Report + Send + Sync>,
        stop: CancellationToken,
    ) {
        loop {
            self.beat(report()).await;
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(HEARTBEAT_EVERY) => {}
            }
        }
        // Leaving: the others stop counting this instance at once.
        if let Some(r) = self.redis() {
            let mut c = r.conn();
            let _: Result<(), _> = tokio::time::timeout(
                SLOW,
                ::redis::cmd("HDEL")
                    .arg(self.key("instances"))
                    .arg(&*self.instance)
                    .query_async(&mut c),
            )
            .await
            .unwrap_or(Ok(()));
        }
    }

    /// One heartbeat: connect if need be, write this instance, read the
    /// live ones. Success after a failure re-joins the shared state.
    async fn beat(&self, report: Report) {
        if self.redis.load().is_none() {
            match tokio::time::timeout(
                Duration::from_secs(2),
                RedisState::connect_to(&self.at, &self.prefix),
            )
            .await
            {
                Ok(Ok(r)) => self.redis.store(Some(Arc::new(r))),
                Ok(Err(e)) => return self.failed(Op::Heartbeat, &e),
                Err(_) => return self.failed(Op::Heartbeat, &"connect timed out"),
            }
        }
        let Some(r) = self.redis.load_full() else {
            return;
        };
        let now = now_ms();
        let me = Peer {
            id: self.instance.to_string(),
            config_version: report.config_version,
            started_at_ms: self.started_at_ms,
            last_seen_ms: now,
            health: report.health,
            budget_held: report.budget_held,
        };
        let key = self.key("instances");
        let mut c = r.conn();
        let mut pipe = ::redis::pipe();
        pipe.hset(
            &key,
            &*self.instance,
            serde_json::to_string(&me).unwrap_or_default(),
        )
        .ignore()
        .hgetall(&key);
        let call = pipe.query_async::<(HashMap<String, String>,)>(&mut c);
        let all = match tokio::time::timeout(Duration::from_secs(1), call).await {
            Ok(Ok((all,))) => all,
            Ok(Err(e)) => return self.lost(Op::Heartbeat, &e),
            Err(_) => return self.lost(Op::Heartbeat, &"no answer within 1 s"),
        };
        let mut live = Vec::new();
        let mut gone = Vec::new();
        for (id, v) in all {
            match serde_json::from_str::<Peer>(&v) {
                Ok(p) if p.last_seen_ms + HEARTBEAT_TTL_MS >= now => live.push(p),
                _ => gone.push(id),
            }
        }
        if !gone.is_empty() {
            let _: Result<(), _> = ::redis::cmd("HDEL")
                .arg(&key)
                .arg(&gone)
                .query_async(&mut c)
                .await;
        }
        live.sort_by(|a, b| a.id.cmp(&b.id));
        let mut merged: HashMap<String, (f64, u32)> = HashMap::new();
        for p in live.iter().filter(|p| p.id != *self.instance) {
            for (dep, score) in &p.health {
                let e = merged.entry(dep.clone()).or_default();
                e.0 += score;
                e.1 += 1;
            }
        }
        self.peer_health.store(Arc::new(merged));
        self.peers
            .store(live.len().max(1) as u32, Ordering::Relaxed);
        *lock(&self.live_peers) = live;
        if !self.up.swap(true, Ordering::AcqRel) {
            tracing::warn!(peers = self.peers(), instance = %self.instance, "shared state (Redis) in use: limits, budgets and circuits are the fleet's");
        }
    }

    async fn write_adjustments(
        self: Arc<Self>,
        mut rx: mpsc::Receiver<Adjust>,
        stop: CancellationToken,
    ) {
        let mut batch = Vec::with_capacity(512);
        loop {
            let n = tokio::select! {
                n = rx.recv_many(&mut batch, 512) => n,
                _ = stop.cancelled() => {
                    rx.close();
                    rx.recv_many(&mut batch, 4096).await
                }
            };
            if n == 0 {
                break;
            }
            match self.redis.load_full() {
                Some(r) if self.is_up() => {
                    match tokio::time::timeout(Duration::from_secs(1), r.adjust(&batch)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => self.failed(Op::Adjust, &e),
                        Err(_) => self.failed(Op::Adjust, &"no answer within 1 s"),
                    }
                }
                // What Redis never saw stays counted at the estimate there:
                // the safe side.
                _ => {
                    self.errors[Op::Adjust as usize]
                        .fetch_add(batch.len() as u64, Ordering::Relaxed);
                }
            }
            batch.clear();
        }
    }

    async fn publish_circuits(
        self: Arc<Self>,
        mut rx: mpsc::UnboundedReceiver<(String, SharedCircuit)>,
        stop: CancellationToken,
    ) {
        loop {
            let (dep, c) = tokio::select! {
                m = rx.recv() => match m { Some(m) => m, None => break },
                _ = stop.cancelled() => break,
            };
            let Some(r) = self.redis() else {
                self.errors[Op::Publish as usize].fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let entry = c.encode(&self.instance);
            match tokio::time::timeout(
                Duration::from_secs(1),
                r.publish_circuit(&dep, &entry, now_ms()),
            )
            .await
            {
                Ok(Ok(v)) => {
                    let mut seen = lock(&self.versions);
                    let held = seen.entry(dep).or_default();
                    *held = (*held).max(v);
                }
                Ok(Err(e)) => self.failed(Op::Publish, &e),
                Err(_) => self.failed(Op::Publish, &"no answer within 1 s"),
            }
        }
    }

    /// Read the events stream on a connection of its own (it blocks):
    /// catch up on the latest state first, then follow; after a failure,
    /// catch up again.
    async fn consume(self: Arc<Self>, circuits: Arc<dyn FleetSink>, stop: CancellationToken) {
        'connect: loop {
            if stop.is_cancelled() {
                return;
            }
            let reader = match RedisState::connect_to(&self.at, &self.prefix).await {
                Ok(r) => r,
                Err(_) => {
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(HEARTBEAT_EVERY) => continue 'connect,
                    }
                }
            };
            let mut pos = match reader.circuit_catch_up().await {
                Ok((latest, pos)) => {
                    latest.into_iter().for_each(|e| self.apply(&*circuits, e));
                    pos
                }
                Err(e) => {
                    self.failed(Op::Events, &e);
                    tokio::time::sleep(HEARTBEAT_EVERY).await;
                    continue 'connect;
                }
            };
            loop {
                let read = tokio::time::timeout(Duration::from_secs(3), reader.events(&pos, 1_000));
                let next = tokio::select! {
                    _ = stop.cancelled() => return,
                    r = read => r.unwrap_or_else(|_| Err(::redis::RedisError::from((
                        ::redis::ErrorKind::IoError,
                        "no answer within 3 s",
                    )))),
                };
                match next {
                    Ok((events, p)) => {
                        for e in events {
                            match e {
                                Event::Circuit(c) => self.apply(&*circuits, c),
                                Event::KeyIssued(j) => {
                                    if let Ok(k) = serde_json::from_str(&j) {
                                        circuits.key_issued(k);
                                    }
                                }
                                Event::KeyRevoked(k) => {
                                    if let Some((client, id)) = k.split_once(' ') {
                                        circuits.key_revoked(client, id);
                                    }
                                }
                            }
                        }
                        if p != pos {
                            self.confirm_applied(&p).await;
                        }
                        pos = p;
                    }
                    Err(e) => {
                        self.failed(Op::Events, &e);
                        tokio::time::sleep(HEARTBEAT_EVERY).await;
                        continue 'connect;
                    }
                }
            }
        }
    }

    /// Say which event this instance has applied up to (a revoke waits
    /// for every instance's word).
    async fn confirm_applied(&self, pos: &str) {
        let Some(r) = self.redis() else {
            return;
        };
        let mut c = r.conn();
        let mut cmd = ::redis::cmd("HSET");
        cmd.arg(self.key("applied")).arg(&*self.instance).arg(pos);
        if let Ok(Err(e)) = tokio::time::timeout(SLOW, cmd.query_async::<()>(&mut c)).await {
            self.failed(Op::Events, &e);
        }
    }

    /// An event newer than what this instance holds, from another one.
    fn apply(&self, circuits: &dyn FleetSink, ev: CircuitEvent) {
        let Some((c, from)) = SharedCircuit::decode(&ev.state) else {
            return;
        };
        {
            let mut seen = lock(&self.versions);
            let held = seen.entry(ev.deployment.clone()).or_default();
            if *held >= ev.version {
                return;
            }
            *held = ev.version;
        }
        if from == &*self.instance {
            return;
        }
        let age = now_ms().saturating_sub(ev.at_ms);
        circuits.circuit(&ev.deployment, c, age);
    }
}

async fn set_px(
    r: RedisState,
    key: String,
    value: String,
    ttl: Duration,
) -> Result<(), ::redis::RedisError> {
    let mut c = r.conn();
    ::redis::cmd("SET")
        .arg(key)
        .arg(value)
        .arg("PX")
        .arg((ttl.as_millis() as u64).max(1))
        .query_async(&mut c)
        .await
}

/// A stream entry's id (`ms-seq`) in order.
fn stream_id(id: &str) -> (u64, u64) {
    let (ms, seq) = id.split_once('-').unwrap_or((id, "0"));
    (ms.parse().unwrap_or(0), seq.parse().unwrap_or(0))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "switchyard".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_circuit_travels_with_its_publisher() {
        let c = SharedCircuit {
            mode: 1,
            left_ms: 1500,
            cooldown_ms: 15000,
        };
        let e = c.encode("host-1-abcd");
        assert_eq!(SharedCircuit::decode(&e), Some((c, "host-1-abcd")));
        assert_eq!(SharedCircuit::decode("open"), None);
    }

    #[test]
    fn a_share_is_never_zero() {
        let f = Fleet::new(Endpoint::One("redis://127.0.0.1:1/".into()), "t:", false);
        f.peers.store(3, Ordering::Relaxed);
        assert_eq!(f.local_share(60), 20);
        assert_eq!(f.local_share(2), 1);
    }
}
