//! OBSERVABILITY: the per-request context and its decision-log line, secret
//! redaction, and the process's log subscriber.

pub mod ctx;
pub mod decision_log;
mod log_line;
pub mod logging;
pub mod metrics;
pub mod redact;
