//! Header names the gateway reads and writes, parsed once: looking a header
//! up (or inserting it) by `&str` parses and validates the name every time.

use http::HeaderName;

pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
pub static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub static X_API_KEY: HeaderName = HeaderName::from_static("x-api-key");
pub static TASK: HeaderName = HeaderName::from_static("x-switchyard-task");
pub static SESSION: HeaderName = HeaderName::from_static("x-switchyard-session");
/// `x-switchyard-debug: 1`: a client allowed to (`clients[].debug`) has this
/// request's bodies in the decision log.
pub static DEBUG: HeaderName = HeaderName::from_static("x-switchyard-debug");
pub static DEPLOYMENT: HeaderName = HeaderName::from_static("x-switchyard-deployment");
pub static ATTEMPTS: HeaderName = HeaderName::from_static("x-switchyard-attempts");
pub static CACHE: HeaderName = HeaderName::from_static("x-switchyard-cache");
pub static COST_USD: HeaderName = HeaderName::from_static("x-switchyard-cost-usd");
pub static BUDGET_REMAINING: HeaderName =
    HeaderName::from_static("x-switchyard-budget-remaining-usd");
pub static FALLBACK_REASON: HeaderName = HeaderName::from_static("x-switchyard-fallback-reason");
pub static DROPPED_TOOLS: HeaderName = HeaderName::from_static("x-switchyard-dropped-tools");
/// OpenAI's rate-limit headers: limit, remaining, reset.
pub static RATELIMIT_REQUESTS: [HeaderName; 3] = [
    HeaderName::from_static("x-ratelimit-limit-requests"),
    HeaderName::from_static("x-ratelimit-remaining-requests"),
    HeaderName::from_static("x-ratelimit-reset-requests"),
];
pub static RATELIMIT_TOKENS: [HeaderName; 3] = [
    HeaderName::from_static("x-ratelimit-limit-tokens"),
    HeaderName::from_static("x-ratelimit-remaining-tokens"),
    HeaderName::from_static("x-ratelimit-reset-tokens"),
];
pub static ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");
pub static ANTHROPIC_BETA: HeaderName = HeaderName::from_static("anthropic-beta");
pub static ANTHROPIC_VERSION: HeaderName = HeaderName::from_static("anthropic-version");
