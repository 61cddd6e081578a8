//! SINKS: where a finished request goes. The request's one record
//! (`observe::ctx::RequestCtx`: who, route, candidates, every attempt,
//! tokens, cost, cache, outcome, timings) is handed once to each sink: the
//! decision log, the metrics, the usage store, the dashboard's recent
//! decisions and the trace export. Nothing on the request path waits on a
//! sink: each one buffers or counts, and does its slow work elsewhere.
//! (Budget settlement is the request's own hold, settled before the sinks
//! run, so that they all see the settled spend.)

pub mod decision_log;
pub mod metrics;
pub mod recent;
pub mod trace;
pub mod usage;

use std::sync::Arc;

use crate::observe::ctx::RequestCtx;

pub trait Sink: Send + Sync {
    /// A request began (e.g. the in-flight gauge).
    fn started(&self) {}
    /// The request is over: its record, complete.
    fn finished(&self, r: &RequestCtx);
    /// The sink reads `input_hash` (so the body is hashed at all).
    fn wants_input_hash(&self) -> bool {
        false
    }
}

/// Every sink of a gateway, shared by its requests.
#[derive(Clone, Default)]
pub struct Sinks {
    list: Arc<[Arc<dyn Sink>]>,
    /// Computed once: asked on every request.
    input_hash: bool,
}

impl Sinks {
    pub fn new(list: Vec<Arc<dyn Sink>>) -> Sinks {
        let input_hash = list.iter().any(|s| s.wants_input_hash());
        Sinks {
            list: list.into(),
            input_hash,
        }
    }

    pub fn started(&self) {
        self.list.iter().for_each(|s| s.started());
    }

    pub fn finished(&self, r: &RequestCtx) {
        self.list.iter().for_each(|s| s.finished(r));
    }

    pub fn wants_input_hash(&self) -> bool {
        self.input_hash
    }
}

impl std::fmt::Debug for Sinks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Sinks({})", self.list.len())
    }
}
