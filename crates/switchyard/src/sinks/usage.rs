//! The usage store as a sink: the finished request becomes one row, queued
//! for the store's writer (never waited on; a full queue drops and counts).

use std::sync::Arc;

use super::Sink;
use crate::observe::record::Record;
use crate::usage::record::{UsageRow, Write};
use crate::usage::UsageStore;

pub struct UsageSink(pub Arc<UsageStore>);

impl Sink for UsageSink {
    fn finished(&self, r: &Record) {
        self.0.send(Write::Row(row(r)));
    }
}

pub fn row(r: &Record) -> UsageRow {
    let last_sent = r.attempts.iter().rev().find(|a| a.sent);
    UsageRow {
        request_id: r.request_id.clone(),
        ts_ms: crate::usage::query::to_ms(r.ts),
        client: r.client.clone(),
        key_id: r.key_id.clone(),
        route: r.route.clone(),
        model: r.served_model.clone(),
        // A failed request: the deployment that failed it.
        deployment: r
            .selected
            .clone()
            .or_else(|| last_sent.map(|a| a.deployment.clone())),
        status: r.status,
        outcome: r.outcome,
        usage_estimated: r.usage_estimated,
        task: r.task.clone(),
        shadow: false,
        stream: r.stream,
        cache: r.cache,
        input_tokens: r.tokens.input,
        output_tokens: r.tokens.output,
        cached_input_tokens: r.tokens.cached,
        cost_usd: r.cost_usd.unwrap_or(0.0),
        latency_ms: r.duration_ms,
        ttfb_ms: last_sent.and_then(|a| a.ttfb_ms),
        attempts: r.attempts.iter().filter(|a| a.sent).count() as u32,
    }
}
