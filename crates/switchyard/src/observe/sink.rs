//! What a finished request's record is handed to: the `Sink` interface and
//! the fan-out over a gateway's sinks. The sinks themselves (decision log,
//! metrics, usage store, …) are `crate::sinks`, above this layer.

use std::sync::Arc;

use crate::observe::record::Record;

pub trait Sink: Send + Sync {
    /// A request began (e.g. the in-flight gauge).
    fn started(&self) {}
    /// The request is over: its record, complete.
    fn finished(&self, r: &Record);
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

    pub fn finished(&self, r: &Record) {
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
