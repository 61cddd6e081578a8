//! OBSERVABILITY: the per-request context and its decision-log line, secret
//! redaction, the process's log subscriber, and what a traced request
//! carries while it runs (`trace`).

pub mod debug_bodies;
pub mod decision_log;
mod log_line;
pub mod logging;
pub mod metrics;
pub mod otlp;
pub mod record;
pub mod redact;
pub mod sink;
pub mod trace;
