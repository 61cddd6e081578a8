//! Traces (contract §6): each finished, sampled-in request becomes its spans,
//! built after the fact from its record with the times it noted, and goes
//! to the OTLP collector through a bounded queue.
//!
//! Span tree (names are the contract's and the GenAI conventions'):
//! - `switchyard.request` (server span; root, or the caller's span's child)
//!   - `switchyard.route`: the routing plan
//!   - `switchyard.cache`: the response-cache lookup, when there was one
//!   - `{operation} {request model}` (e.g. `chat gpt-4o`): one client span
//!     per upstream call that was sent, retries and resumed continuations
//!     included; the upstream got a `traceparent` naming it.
//!
//! Not the SDK's batch span processor: it keeps its count of dropped spans
//! to itself and does not count a failed export as dropped at all. Here a
//! full queue and a batch the collector did not take are both counted in
//! `switchyard_trace_spans_dropped_total`; the request never waits on
//! either.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanExporter as _, SpanLinks};
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};

use super::Sink;
use crate::config::{Observability, OtlpProtocol};
use crate::observe::ctx::{AttemptLog, RequestCtx};
use crate::observe::trace::{new_span_id, TraceCtx};

/// Requests' spans waiting for export; past this they are dropped.
const QUEUE: usize = 2048;
/// Spans in one export.
const BATCH: usize = 512;
/// How long spans wait for more to share their export.
const DELAY: Duration = Duration::from_millis(200);
/// One export, retries included, before its spans count as dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

enum Msg {
    Spans(Vec<SpanData>),
    Flush(oneshot::Sender<()>),
}

pub struct TraceSink {
    tx: mpsc::Sender<Msg>,
    dropped: Counter,
    scope: InstrumentationScope,
}

impl TraceSink {
    /// Build the exporter and start its task (on the current runtime).
    pub fn start(o: &Observability, dropped: Counter) -> Result<Arc<TraceSink>, String> {
        let Some(endpoint) = &o.otlp_endpoint else {
            return Err("observability.otlp_endpoint is not set".into());
        };
        let exporter = exporter(endpoint, o.otlp_protocol)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(export_loop(rx, exporter, dropped.clone()));
        let scope = InstrumentationScope::builder("switchyard")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        Ok(Arc::new(TraceSink { tx, dropped, scope }))
    }

    /// Export what is queued (shutdown); `false` when that took longer
    /// than `within`.
    pub async fn flush(&self, within: Duration) -> bool {
        let (done, wait) = oneshot::channel();
        let flushed = async {
            self.tx.send(Msg::Flush(done)).await.ok()?;
            wait.await.ok()
        };
        matches!(tokio::time::timeout(within, flushed).await, Ok(Some(())))
    }
}

impl Sink for TraceSink {
    fn finished(&self, r: &RequestCtx) {
        let Some(t) = r.trace else { return };
        let spans = spans(r, &t, &self.scope);
        let n = spans.len() as u64;
        if self.tx.try_send(Msg::Spans(spans)).is_err() {
            self.dropped.inc_by(n);
        }
    }
}

fn exporter(
    endpoint: &str,
    protocol: OtlpProtocol,
) -> Result<opentelemetry_otlp::SpanExporter, String> {
    let builder = opentelemetry_otlp::SpanExporter::builder();
    let built = match protocol {
        OtlpProtocol::Grpc => builder
            .with_tonic()
            .with_endpoint(endpoint)
            .with_timeout(EXPORT_TIMEOUT)
            .build(),
        OtlpProtocol::Http => builder
            .with_http()
            .with_endpoint(http_traces_url(endpoint))
            .with_timeout(EXPORT_TIMEOUT)
            .with_http_client(otlp_http::Client)
            .build(),
    };
    let mut exporter = built.map_err(|e| format!("observability.otlp_endpoint: {e}"))?;
    exporter.set_resource(
        &opentelemetry_sdk::Resource::builder()
            .with_service_name("switchyard")
            .build(),
    );
    Ok(exporter)
}

/// OTLP/HTTP's traces path under the configured endpoint.
fn http_traces_url(endpoint: &str) -> String {
    if endpoint.ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    }
}

/// Batch what arrives (up to `BATCH` spans or `DELAY`), export it, count
/// what the collector did not take. One export at a time: while the
/// collector is slow the queue fills, and the rest is dropped at the door.
async fn export_loop(
    mut rx: mpsc::Receiver<Msg>,
    exporter: opentelemetry_otlp::SpanExporter,
    dropped: Counter,
) {
    let failing = AtomicBool::new(false);
    let mut batch: Vec<SpanData> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut flushed = take(first, &mut batch);
        let by = tokio::time::Instant::now() + DELAY;
        while flushed.is_none() && batch.len() < BATCH {
            match tokio::time::timeout_at(by, rx.recv()).await {
                Ok(Some(m)) => flushed = take(m, &mut batch),
                Ok(None) | Err(_) => break,
            }
        }
        if !batch.is_empty() {
            export(&exporter, std::mem::take(&mut batch), &dropped, &failing).await;
        }
        if let Some(done) = flushed {
            let _ = done.send(());
        }
    }
}

/// Add a message's spans to the batch; a flush request is answered once
/// the batch is out.
fn take(m: Msg, batch: &mut Vec<SpanData>) -> Option<oneshot::Sender<()>> {
    match m {
        Msg::Spans(s) => {
            batch.extend(s);
            None
        }
        Msg::Flush(done) => Some(done),
    }
}

async fn export(
    exporter: &opentelemetry_otlp::SpanExporter,
    batch: Vec<SpanData>,
    dropped: &Counter,
    failing: &AtomicBool,
) {
    let n = batch.len() as u64;
    // The exporter bounds itself; this bounds a misbehaving one too.
    let result = tokio::time::timeout(EXPORT_TIMEOUT * 2, exporter.export(batch)).await;
    match result {
        Ok(Ok(())) => {
            if failing.swap(false, Ordering::Relaxed) {
                tracing::info!("trace export: the collector takes spans again");
            }
        }
        Ok(Err(e)) => {
            dropped.inc_by(n);
            if !failing.swap(true, Ordering::Relaxed) {
                tracing::warn!("trace export failed, spans are dropped until it works again: {e}");
            }
        }
        Err(_) => {
            dropped.inc_by(n);
            if !failing.swap(true, Ordering::Relaxed) {
                tracing::warn!("trace export timed out, spans are dropped until it works again");
            }
        }
    }
}

/// Every span of one finished request.
fn spans(r: &RequestCtx, t: &TraceCtx, scope: &InstrumentationScope) -> Vec<SpanData> {
    let end = r.ts + r.took();
    let mut out = Vec::with_capacity(4 + r.attempts.len());
    if let Some(p) = r.plan_timing {
        let attrs = route_attributes(r);
        let s = Span::child(t, "switchyard.route", p.started, p.started + p.took);
        out.push(s.data(attrs, Status::Unset, scope));
    }
    if let Some(c) = r.cache_lookup {
        let attrs = vec![KeyValue::new("switchyard.cache.result", r.cache)];
        let s = Span::child(t, "switchyard.cache", c.started, c.started + c.took);
        out.push(s.data(attrs, Status::Unset, scope));
    }
    for (i, a) in r.attempts.iter().enumerate().filter(|(_, a)| a.sent) {
        out.push(attempt_span(r, t, i, a, end, scope));
    }
    // The request lasted at least as long as its parts (their clocks are
    // read at different moments).
    let end = out.iter().map(|s| s.end_time).fold(end, SystemTime::max);
    out.push(request_span(r, t, end, scope));
    out
}

/// One span's identity and place, before its attributes.
struct Span {
    trace_id: u128,
    span_id: u64,
    parent: u64,
    remote_parent: bool,
    kind: SpanKind,
    name: Cow<'static, str>,
    start: SystemTime,
    end: SystemTime,
}

impl Span {
    /// A span under the request's.
    fn child(t: &TraceCtx, name: &'static str, start: SystemTime, end: SystemTime) -> Span {
        Span {
            trace_id: t.trace_id,
            span_id: new_span_id(),
            parent: t.span_id,
            remote_parent: false,
            kind: SpanKind::Internal,
            name: Cow::Borrowed(name),
            start,
            end,
        }
    }

    fn data(
        self,
        attributes: Vec<KeyValue>,
        status: Status,
        scope: &InstrumentationScope,
    ) -> SpanData {
        SpanData {
            span_context: SpanContext::new(
                TraceId::from(self.trace_id),
                SpanId::from(self.span_id),
                TraceFlags::SAMPLED,
                false,
                TraceState::NONE,
            ),
            parent_span_id: SpanId::from(self.parent),
            parent_span_is_remote: self.remote_parent,
            span_kind: self.kind,
            name: self.name,
            start_time: self.start,
            end_time: self.end.max(self.start),
            attributes,
            dropped_attributes_count: 0,
            events: SpanEvents::default(),
            links: SpanLinks::default(),
            status,
            instrumentation_scope: scope.clone(),
        }
    }
}

fn request_span(
    r: &RequestCtx,
    t: &TraceCtx,
    end: SystemTime,
    scope: &InstrumentationScope,
) -> SpanData {
    let mut attrs = vec![
        KeyValue::new("switchyard.request_id", r.request_id.clone()),
        KeyValue::new("switchyard.stream", r.stream),
        KeyValue::new("http.response.status_code", i64::from(r.status)),
        KeyValue::new("switchyard.cache", r.cache),
    ];
    if let Some(route) = &r.route {
        attrs.push(KeyValue::new("switchyard.route", route.clone()));
    }
    if let Some(client) = &r.client {
        attrs.push(KeyValue::new("switchyard.client", client.clone()));
    }
    if let Some(model) = &r.model {
        attrs.push(KeyValue::new("gen_ai.request.model", model.clone()));
    }
    if let Some(cost) = r.cost_usd {
        attrs.push(KeyValue::new("switchyard.cost_usd", cost));
    }
    if let Some(e) = r.error {
        attrs.push(KeyValue::new("error.type", e));
    }
    let span = Span {
        trace_id: t.trace_id,
        span_id: t.span_id,
        parent: t.parent.unwrap_or(0),
        remote_parent: t.parent.is_some(),
        kind: SpanKind::Server,
        name: Cow::Borrowed("switchyard.request"),
        start: r.ts,
        end,
    };
    span.data(attrs, error_status(r.error), scope)
}

fn route_attributes(r: &RequestCtx) -> Vec<KeyValue> {
    let mut attrs = vec![KeyValue::new(
        "switchyard.route.candidates",
        r.candidates.len() as i64,
    )];
    if let Some(s) = &r.selected {
        attrs.push(KeyValue::new("switchyard.route.selected", s.clone()));
    }
    if let Some(reason) = r.decision_reason {
        attrs.push(KeyValue::new("switchyard.route.decision_reason", reason));
    }
    if let Some(f) = r.fallback_reason {
        attrs.push(KeyValue::new("switchyard.route.fallback_reason", f));
    }
    attrs
}

fn attempt_span(
    r: &RequestCtx,
    t: &TraceCtx,
    i: usize,
    a: &AttemptLog,
    request_end: SystemTime,
    scope: &InstrumentationScope,
) -> SpanData {
    let model = r.model.as_deref().unwrap_or("");
    let span = Span {
        trace_id: t.trace_id,
        // Not traced when it was sent (cannot happen today): an id of its own.
        span_id: if a.span.span_id == 0 {
            new_span_id()
        } else {
            a.span.span_id
        },
        parent: t.span_id,
        remote_parent: false,
        kind: SpanKind::Client,
        name: Cow::Owned(format!("{} {model}", a.span.operation)),
        start: a.span.started,
        end: attempt_end(r, i, a, request_end),
    };
    let ok = a.outcome == "ok";
    let status = error_status((!ok).then_some(a.outcome));
    span.data(attempt_attributes(r, a), status, scope)
}

/// A stream's call lasts past its opening: until the continuation that
/// followed it began, or the request ended.
fn attempt_end(r: &RequestCtx, i: usize, a: &AttemptLog, request_end: SystemTime) -> SystemTime {
    let opened = a.span.started + Duration::from_secs_f64(a.latency_ms.max(0.0) / 1e3);
    if !(r.stream && a.ttfb_ms.is_some()) {
        return opened;
    }
    let next = r.attempts[i + 1..]
        .iter()
        .find(|n| n.sent)
        .map(|n| n.span.started);
    next.unwrap_or(request_end).max(opened)
}

fn attempt_attributes(r: &RequestCtx, a: &AttemptLog) -> Vec<KeyValue> {
    let mut attrs = vec![
        KeyValue::new("gen_ai.operation.name", a.span.operation),
        KeyValue::new("gen_ai.provider.name", a.span.provider),
        KeyValue::new("switchyard.provider", a.provider.clone()),
        KeyValue::new("switchyard.deployment", a.deployment.clone()),
        KeyValue::new("switchyard.outcome", a.outcome),
        KeyValue::new("switchyard.resumed", a.resumed),
    ];
    if let Some(m) = &r.model {
        attrs.push(KeyValue::new("gen_ai.request.model", m.clone()));
    }
    if let Some(m) = &a.span.model {
        attrs.push(KeyValue::new("gen_ai.response.model", m.clone()));
    }
    if let Some(s) = a.status {
        attrs.push(KeyValue::new("http.response.status_code", i64::from(s)));
    }
    if a.outcome != "ok" {
        attrs.push(KeyValue::new("error.type", a.outcome));
    }
    if let Some(u) = a.usage {
        attrs.push(KeyValue::new(
            "gen_ai.usage.input_tokens",
            u.input_tokens as i64,
        ));
        attrs.push(KeyValue::new(
            "gen_ai.usage.output_tokens",
            u.output_tokens as i64,
        ));
        attrs.push(KeyValue::new("switchyard.cost_usd", u.cost_usd));
    }
    attrs
}

fn error_status(code: Option<&'static str>) -> Status {
    match code {
        Some(c) => Status::Error {
            description: Cow::Borrowed(c),
        },
        None => Status::Unset,
    }
}

/// OTLP/HTTP through the gateway's own upstream client (TLS by rustls,
/// pooled connections), bounded by the export timeout.
mod otlp_http {
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use opentelemetry_http::{HttpClient, HttpError, Request, Response};

    use super::EXPORT_TIMEOUT;

    const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
    /// A collector's answer is a small protobuf message.
    const MAX_ANSWER: usize = 1 << 20;

    #[derive(Debug)]
    pub struct Client;

    #[async_trait::async_trait]
    impl HttpClient for Client {
        async fn send_bytes(&self, req: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
            let call = async {
                let resp = crate::upstream::client::request(CONNECT_TIMEOUT, req).await?;
                let (head, body) = resp.into_parts();
                let body = http_body_util::Limited::new(body, MAX_ANSWER)
                    .collect()
                    .await?
                    .to_bytes();
                Ok::<_, HttpError>(Response::from_parts(head, body))
            };
            tokio::time::timeout(EXPORT_TIMEOUT, call)
                .await
                .map_err(|_| HttpError::from("the collector did not answer in time"))?
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_endpoint_gets_the_traces_path_once() {
        assert_eq!(http_traces_url("http://c:4318"), "http://c:4318/v1/traces");
        assert_eq!(
            http_traces_url("http://c:4318/v1/traces"),
            "http://c:4318/v1/traces"
        );
        assert_eq!(
            http_traces_url("http://c:4318/otel/"),
            "http://c:4318/otel/v1/traces"
        );
    }
}
