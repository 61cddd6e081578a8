//! SINKS: where a finished request goes. The request's one record
//! (`observe::record::Record`: who, route, candidates, every attempt,
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

pub use crate::observe::sink::{Sink, Sinks};
