//! SHADOW TRAFFIC (contract §11): a `share` of a route's requests
//! (`routes.<r>.shadow: { target, share }`, drawn per request) is also sent
//! to the shadow target once the primary has answered, and the two answers
//! are compared (`compare`); `GET /admin/shadow` shows the figures per
//! (route, shadow target), the dashboard a table of them.
//!
//! Off the request path. The request's scope (`reliability::ctx`) runs an
//! `After` when the request is over, with its closed record and its answer
//! (a JSON body, or a stream put together as the IR as it went out); ours
//! ([`Pending`]) only takes a place for the job without waiting (at most
//! `shadow.queue` jobs wait and `shadow.workers` run): with none free the
//! job is dropped and counted (`switchyard_shadow_dropped_total`), so
//! nothing ever waits for a shadow. The job runs as a task on the runtime
//! that served the request (`send`), waiting its turn among the
//! `shadow.workers` running: handing it to another thread's runtime cost
//! a wake-up of that thread per shadow (in the sh64 lane that thread's
//! context switches were ~8% of the gateway's CPU), and this worker's
//! upstream connection pool is already warm. A shadow never delays or changes the
//! client's answer and never holds its connection: it starts after the
//! answer's last byte went out (a JSON answer when its body is handed to
//! the client, a stream after its end). Only answers that ended well are
//! shadowed: a failed request, a cache hit, a degraded answer, a stream the
//! client cut or one continued on another deployment after it broke are not.
//!
//! What is sent: the same request as the IR (the client's body read again
//! by its door, or, for a Responses request that continued a stored
//! conversation, the expanded IR kept), not streamed, written as an OpenAI
//! chat request — the form every provider module translates from, as the
//! probes send theirs — and handed to `adapters::chat` for the shadow
//! deployment, like any attempt. What that form cannot say (an Anthropic
//! client's `cache_control` marks, a thinking budget) is not in the copy.
//!
//! The shadow deployment's own circuit and limits are respected: an open
//! circuit, a full rpm/tpm window or no usable key skips the copy (never
//! the half-open trial: the prober or a client request takes that); its
//! concurrency slot is waited for like a request's (within its
//! `queue_timeout`). Its outcome feeds that deployment's health and circuit
//! like any call to it — so a shadow that fails can open the shadow
//! deployment's circuit, never another's (the primary's only when the
//! shadow target is the same deployment). Keys are not set aside on a
//! shadow's failure, and a shadow is never retried.
//!
//! Cost: a shadow is never charged to the client (no budget hold, no client
//! rpm/tpm); its usage row in the ledger has client `_shadow` and
//! `shadow = 1`, so a client's spend never includes it and by client it is
//! a line of its own. The primary's record goes to the sinks as every
//! request's does; the shadow's only to the ledger (not the decision log,
//! the request metrics, or a canary's tallies).
//!
//! Placement: the sinks (layer 5) only see records and cannot call
//! adapters; the hook that decides (`Shadows::draw`, called by the door
//! pipeline in `ingress`) and the worker that calls the shadow deployment
//! need `adapters`, `live` and `reliability`'s key choice, so this module
//! sits right above `reliability` and below `app`/`ingress`/`admin`, which
//! hold and read it. Reliability knows only its `After` interface.

pub mod compare;
mod send;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use rand::Rng;
use serde::Serialize;
use switchyard_protocol::ir::ChatRequest;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::adapters::deployment::DeploymentRt;
use crate::config::ShadowTraffic;
use crate::doors::{Door, Inbound};
use crate::live::{Live, Target};
use crate::observe::metrics::{Metrics, Name, ShadowLabels, ShadowRouteLabels};
use crate::observe::record::Record;
use crate::reliability::ctx::{After, Answered};
use crate::usage::UsageStore;
use compare::{Tally, View};

/// The client a shadow's usage row names.
pub const CLIENT: &str = "_shadow";

/// The shadow queue, its workers and the figures, shared by every request
/// (kept across reloads: built once at start-up).
#[derive(Clone)]
pub struct Shadows {
    inner: Arc<Inner>,
}

struct Inner {
    /// Places for jobs, waiting or running: `shadow.queue` + `shadow.workers`.
    places: Arc<Semaphore>,
    /// Turns to run: `shadow.workers`.
    turns: Arc<Semaphore>,
    /// Jobs waiting for a turn now.
    waiting: AtomicUsize,
    stop: CancellationToken,
    cfg: ShadowTraffic,
    /// Jobs queued since start.
    enqueued: AtomicU64,
    tallies: Mutex<BTreeMap<Pairing, Tally>>,
    metrics: Arc<Metrics>,
    usage: Option<Arc<UsageStore>>,
    schemas: crate::contract::Schemas,
}

/// A route and its shadow target: what the figures are kept by.
type Pairing = (Arc<str>, Arc<str>);

/// One shadow to send.
struct Job {
    route: Arc<str>,
    dep: Arc<DeploymentRt>,
    request: Request,
    primary: Primary,
}

/// The client's request, as it can be read again.
struct Request {
    door: Door,
    body: Bytes,
    /// The request as the IR when the body alone does not give it back (a
    /// Responses request that continued a stored conversation).
    ir: Option<Arc<ChatRequest>>,
}

/// What the primary answered, and what it took and cost.
struct Primary {
    answer: Answered,
    request_id: String,
    ms: f64,
    cost_usd: f64,
    tokens: u64,
}

impl Shadows {
    /// The queue's places and turns; jobs stop with `stop`.
    pub fn start(
        cfg: ShadowTraffic,
        metrics: Arc<Metrics>,
        usage: Option<Arc<UsageStore>>,
        stop: CancellationToken,
    ) -> Shadows {
        let (queue, workers) = (cfg.queue.max(1), cfg.workers.max(1));
        let inner = Arc::new(Inner {
            places: Arc::new(Semaphore::new(queue + workers)),
            turns: Arc::new(Semaphore::new(workers)),
            waiting: AtomicUsize::new(0),
            stop,
            cfg,
            enqueued: AtomicU64::new(0),
            tallies: Mutex::default(),
            metrics,
            usage,
            schemas: crate::contract::Schemas::default(),
        });
        Shadows { inner }
    }

    /// The request's shadow, when its route has one and the draw says so
    /// (`share` of its requests): what runs when the request is over.
    /// Nothing is copied here but a reference to the body.
    pub fn draw(&self, live: &Live, inbound: &Inbound<'_>, body: &Bytes) -> Option<Box<dyn After>> {
        let Some(Target::Route(r)) = live.resolve(inbound.model()) else {
            return None;
        };
        let s = r.shadow.as_ref()?;
        if s.share < 1.0 && rand::rng().random::<f64>() >= s.share {
            return None;
        }
        let dep = live.deployments.get(&s.target)?.clone();
        let route = live
            .route_names
            .get(&r.name)
            .cloned()
            .unwrap_or_else(|| Arc::from(r.name.as_str()));
        let ir = match inbound {
            Inbound::Responses(x) if x.expanded => Some(Arc::new(inbound.ir().clone())),
            _ => None,
        };
        Some(Box::new(Pending {
            shadows: self.clone(),
            route,
            dep,
            request: Request {
                door: inbound.door(),
                body: body.clone(),
                ir,
            },
        }))
    }

    /// The job takes a free place and runs on this runtime when its turn
    /// comes; with no place free (or no runtime) it is dropped and counted.
    fn enqueue(&self, job: Job) {
        let inner = &self.inner;
        let place = inner.places.clone().try_acquire_owned().ok();
        let (Some(place), Ok(rt)) = (place, tokio::runtime::Handle::try_current()) else {
            inner.tally(&job.route, &job.dep.name, |t| t.dropped += 1);
            inner
                .metrics
                .shadow_dropped
                .get_or_create(&ShadowRouteLabels {
                    route: Name(job.route),
                })
                .inc();
            return;
        };
        inner.enqueued.fetch_add(1, Ordering::Relaxed);
        inner.waiting.fetch_add(1, Ordering::Relaxed);
        let inner = inner.clone();
        rt.spawn(async move {
            let _place = place;
            let stop = inner.stop.clone();
            let turn = tokio::select! {
                _ = stop.cancelled() => None,
                t = inner.turns.clone().acquire_owned() => t.ok(),
            };
            inner.waiting.fetch_sub(1, Ordering::Relaxed);
            let Some(_turn) = turn else { return };
            tokio::select! {
                _ = stop.cancelled() => {}
                () = send::run(job, &inner) => {}
            }
        });
    }

    /// `GET /admin/shadow`: the queue, and a row per (route, shadow target)
    /// with traffic since start or configured in `live`.
    pub fn snapshot(&self, live: &Live) -> Snapshot {
        let mut rows: BTreeMap<(String, String), View> = BTreeMap::new();
        if let Ok(t) = self.inner.tallies.lock() {
            for ((route, target), tally) in t.iter() {
                rows.insert(
                    (route.to_string(), target.to_string()),
                    tally.view(route, target),
                );
            }
        }
        for r in live.config.routes.values() {
            if let Some(s) = &r.shadow {
                rows.entry((r.name.clone(), s.target.clone()))
                    .or_insert_with(|| Tally::default().view(&r.name, &s.target));
            }
        }
        Snapshot {
            queue: self.inner.cfg.queue.max(1),
            queued: self.inner.waiting.load(Ordering::Relaxed),
            workers: self.inner.cfg.workers,
            enqueued: self.inner.enqueued.load(Ordering::Relaxed),
            shadows: rows.into_values().collect(),
        }
    }
}

/// What `GET /admin/shadow` answers.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// The queue's bound (`shadow.queue`).
    pub queue: usize,
    /// Jobs waiting now.
    pub queued: usize,
    pub workers: usize,
    /// Jobs queued since start.
    pub enqueued: u64,
    pub shadows: Vec<View>,
}

impl Inner {
    fn tally(&self, route: &Arc<str>, target: &Arc<str>, f: impl FnOnce(&mut Tally)) {
        if let Ok(mut t) = self.tallies.lock() {
            f(t.entry((route.clone(), target.clone())).or_default());
        }
    }

    fn count(&self, route: &Arc<str>, target: &Arc<str>, result: &'static str) {
        self.metrics
            .shadow_requests
            .get_or_create(&ShadowLabels {
                route: Name(route.clone()),
                target: Name(target.clone()),
                result,
            })
            .inc();
    }
}

/// A request drawn for a shadow, waiting for its end.
struct Pending {
    shadows: Shadows,
    route: Arc<str>,
    dep: Arc<DeploymentRt>,
    request: Request,
}

impl After for Pending {
    fn finished(self: Box<Self>, rec: &Record, answer: Option<Answered>) {
        // Only an answer that ended well, from a deployment, is compared.
        let Some(answer) = answer else { return };
        if rec.status != 200 || rec.error.is_some() || rec.cache == "hit" {
            return;
        }
        let Pending {
            shadows,
            route,
            dep,
            request,
        } = *self;
        let job = Job {
            route,
            dep,
            request,
            primary: Primary {
                answer,
                request_id: rec.request_id.clone(),
                ms: rec.duration_ms,
                cost_usd: rec.cost_usd.unwrap_or(0.0),
                tokens: rec.tokens.input + rec.tokens.output,
            },
        };
        shadows.enqueue(job);
    }
}
