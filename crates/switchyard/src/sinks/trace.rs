//! Traces (contract §6): each finished request that is traced — sampled in
//! at the start, or kept at the end by the tail rule (errors, requests past
//! `trace_slow`: `observe::record::Tail`) — becomes its spans, built after
//! the fact from its record with the times it noted, and goes to the OTLP
//! collector through a bounded queue.
//!
//! Span tree (names are the contract's and the GenAI conventions'):
//! - `switchyard.request` (server span; root, or the caller's span's child)
//!   - `switchyard.route`: the routing plan
//!   - `switchyard.cache`: the response-cache lookup, when there was one
//!   - `{operation} {request model}` (e.g. `chat gpt-4o`): one client span
//!     per upstream call that was sent, retries and resumed continuations
//!     included; the upstream got a `traceparent` naming it.
//!
//! Spans are written in the OTLP wire format as the request ends
//! (`observe::otlp`, where the figure that ruled out the SDK's span model
//! is) and exported in batches by one task. A full queue and a batch the
//! collector did not take are both counted in
//! `switchyard_trace_spans_dropped_total`; the request never waits on
//! either.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use tokio::sync::{mpsc, oneshot};

use super::Sink;
use crate::config::{Observability, OtlpProtocol};
use crate::observe::otlp::{self, Kind, SpanOut, Val};
use crate::observe::record::{AttemptLog, Record};
use crate::observe::trace::{new_span_id, TraceCtx};

/// Requests' spans waiting for export (a tick's worth at ~80k requests
/// a second); past this they are dropped.
const QUEUE: usize = 4096;
/// Spans in one export.
const BATCH: usize = 512;
/// How often the queue is drained: how long a span waits for its export.
const TICK: Duration = Duration::from_millis(50);
/// One export before its spans count as dropped.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const SCOPE: &str = "switchyard";
const SERVICE: &str = "switchyard";

enum Msg {
    /// One request's spans, encoded (`otlp::push_span`), and how many.
    Spans(Vec<u8>, u32),
    Flush(oneshot::Sender<()>),
}

pub struct TraceSink {
    tx: mpsc::Sender<Msg>,
    dropped: Counter,
}

impl TraceSink {
    /// Build the exporter and start its task (on the current runtime).
    pub fn start(o: &Observability, dropped: Counter) -> Result<Arc<TraceSink>, String> {
        let Some(endpoint) = &o.otlp_endpoint else {
            return Err("observability.otlp_endpoint is not set".into());
        };
        let exporter = Exporter::new(endpoint, o.otlp_protocol)?;
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(export_loop(rx, exporter, dropped.clone()));
        Ok(Arc::new(TraceSink { tx, dropped }))
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
    fn finished(&self, r: &Record) {
        let Some(t) = r.trace else { return };
        let (bytes, n) = spans(r, &t);
        if self.tx.try_send(Msg::Spans(bytes, n)).is_err() {
            self.dropped.inc_by(u64::from(n));
        }
    }
}

/// Where batches go: OTLP/gRPC (tonic, the `TraceService/Export` call with
/// the request already encoded) or OTLP/HTTP (protobuf, through the
/// gateway's own upstream client: pooled, rustls).
enum Exporter {
    Grpc(tonic::client::Grpc<tonic::transport::Channel>),
    Http(http::Uri),
}

impl Exporter {
    fn new(endpoint: &str, protocol: OtlpProtocol) -> Result<Exporter, String> {
        let bad = |e: &dyn std::fmt::Display| format!("observability.otlp_endpoint: {e}");
        match protocol {
            OtlpProtocol::Grpc => {
                let mut ep = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
                    .map_err(|e| bad(&e))?
                    .connect_timeout(CONNECT_TIMEOUT)
                    .timeout(EXPORT_TIMEOUT);
                if endpoint.starts_with("https://") {
                    let tls = tonic::transport::ClientTlsConfig::new().with_webpki_roots();
                    ep = ep.tls_config(tls).map_err(|e| bad(&e))?;
                }
                Ok(Exporter::Grpc(tonic::client::Grpc::new(ep.connect_lazy())))
            }
            OtlpProtocol::Http => http_traces_url(endpoint)
                .parse()
                .map(Exporter::Http)
                .map_err(|e| bad(&e)),
        }
    }

    async fn send(&mut self, body: Vec<u8>) -> Result<(), String> {
        match self {
            Exporter::Grpc(grpc) => {
                grpc.ready().await.map_err(|e| e.to_string())?;
                let path = http::uri::PathAndQuery::from_static(
                    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
                );
                grpc.unary(tonic::Request::new(Bytes::from(body)), path, raw::Raw)
                    .await
                    .map(|_| ())
                    .map_err(|s| format!("{}: {}", s.code(), s.message()))
            }
            Exporter::Http(uri) => {
                let req = http::Request::post(uri.clone())
                    .header(http::header::CONTENT_TYPE, "application/x-protobuf")
                    .body(Bytes::from(body))
                    .map_err(|e| e.to_string())?;
                let resp = crate::upstream::client::request(CONNECT_TIMEOUT, req)
                    .await
                    .map_err(|e| e.to_string())?;
                match resp.status() {
                    s if s.is_success() => Ok(()),
                    s => Err(format!("the collector answered {s}")),
                }
            }
        }
    }
}

/// OTLP/HTTP's traces path under the configured endpoint.
fn http_traces_url(endpoint: &str) -> String {
    if endpoint.ends_with("/v1/traces") {
        endpoint.to_owned()
    } else {
        format!("{}/v1/traces", endpoint.trim_end_matches('/'))
    }
}

/// Every `TICK`, take what queued meanwhile and export it (`BATCH` spans
/// at a time), counting what the collector did not take. Requests never
/// wake this task (waiting on the queue cost a task wakeup per request,
/// often on the other core); draining on a timer costs one per tick. One
/// export at a time: while the collector is slow the queue fills, and the
/// rest is dropped at the door.
async fn export_loop(mut rx: mpsc::Receiver<Msg>, mut exporter: Exporter, dropped: Counter) {
    let failing = AtomicBool::new(false);
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut batch = Batch::default();
    loop {
        tick.tick().await;
        loop {
            let m = match rx.try_recv() {
                Ok(m) => m,
                Err(mpsc::error::TryRecvError::Empty) => break,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    batch.export(&mut exporter, &dropped, &failing).await;
                    return;
                }
            };
            match m {
                Msg::Spans(b, n) => batch.add(&b, n),
                Msg::Flush(done) => {
                    batch.export(&mut exporter, &dropped, &failing).await;
                    let _ = done.send(());
                }
            }
            if batch.spans >= BATCH {
                batch.export(&mut exporter, &dropped, &failing).await;
            }
        }
        batch.export(&mut exporter, &dropped, &failing).await;
    }
}

/// Encoded spans of several requests, back to back.
#[derive(Default)]
struct Batch {
    bytes: Vec<u8>,
    spans: usize,
}

impl Batch {
    fn add(&mut self, b: &[u8], n: u32) {
        self.bytes.extend_from_slice(b);
        self.spans += n as usize;
    }

    async fn export(&mut self, exporter: &mut Exporter, dropped: &Counter, failing: &AtomicBool) {
        if self.spans == 0 {
            return;
        }
        let n = std::mem::take(&mut self.spans) as u64;
        let body = otlp::export_request(SERVICE, SCOPE, env!("CARGO_PKG_VERSION"), &self.bytes);
        self.bytes.clear();
        let sent = tokio::time::timeout(EXPORT_TIMEOUT, exporter.send(body)).await;
        match sent.unwrap_or_else(|_| Err("timed out".into())) {
            Ok(()) => {
                if failing.swap(false, Ordering::Relaxed) {
                    tracing::info!("trace export: the collector takes spans again");
                }
            }
            Err(e) => {
                dropped.inc_by(n);
                if !failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "trace export failed, spans are dropped until it works again: {e}"
                    );
                }
            }
        }
    }
}

/// Nanoseconds since the Unix epoch.
fn nanos(t: SystemTime) -> u64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Every span of one finished request, encoded, and how many.
fn spans(r: &Record, t: &TraceCtx) -> (Vec<u8>, u32) {
    let mut out = Vec::with_capacity(512 + 320 * r.attempts.len());
    let mut n = 0;
    let mut attrs: Vec<(&str, Val<'_>)> = Vec::with_capacity(16);
    let mut end = nanos(r.ts + r.took());
    if let Some(p) = r.plan_timing {
        route_attributes(r, &mut attrs);
        let (s, e) = (nanos(p.started), nanos(p.started + p.took));
        otlp::push_span(&mut out, &child(t, "switchyard.route", s, e, &attrs, None));
        end = end.max(e);
        n += 1;
    }
    if let Some(c) = r.cache_lookup {
        attrs.clear();
        attrs.push(("switchyard.cache.result", Val::Str(r.cache)));
        let (s, e) = (nanos(c.started), nanos(c.started + c.took));
        otlp::push_span(&mut out, &child(t, "switchyard.cache", s, e, &attrs, None));
        end = end.max(e);
        n += 1;
    }
    let mut name = String::new();
    for (i, a) in r.attempts.iter().enumerate().filter(|(_, a)| a.sent) {
        attrs.clear();
        attempt_attributes(a, &mut attrs);
        // GenAI span name: `{operation} {request model}`.
        name.clear();
        name.push_str(a.span.operation);
        name.push(' ');
        name.push_str(a.span.request_model.as_deref().unwrap_or_default());
        let ok = a.outcome == "ok";
        let span = SpanOut {
            // Not traced when it was sent (kept by the tail rule): an id
            // of its own.
            span_id: if a.span.span_id == 0 {
                new_span_id()
            } else {
                a.span.span_id
            },
            kind: Kind::Client,
            name: &name,
            start_ns: nanos(a.span.started),
            end_ns: nanos(attempt_end(r, i, a, r.ts + r.took())),
            ..child(t, "", 0, 0, &attrs, (!ok).then_some(a.outcome))
        };
        end = end.max(span.end_ns);
        otlp::push_span(&mut out, &span);
        n += 1;
    }
    // The request lasted at least as long as its parts (their clocks are
    // read at different moments).
    attrs.clear();
    request_attributes(r, &mut attrs);
    let request = SpanOut {
        trace_id: t.trace_id,
        span_id: t.span_id,
        parent: t.parent.unwrap_or(0),
        remote_parent: t.parent.is_some(),
        name: "switchyard.request",
        kind: Kind::Server,
        start_ns: nanos(r.ts),
        end_ns: end,
        attrs: &attrs,
        error: r.error,
    };
    otlp::push_span(&mut out, &request);
    (out, n + 1)
}

/// A span under the request's.
fn child<'a>(
    t: &TraceCtx,
    name: &'a str,
    start_ns: u64,
    end_ns: u64,
    attrs: &'a [(&'a str, Val<'a>)],
    error: Option<&'a str>,
) -> SpanOut<'a> {
    SpanOut {
        trace_id: t.trace_id,
        span_id: new_span_id(),
        parent: t.span_id,
        remote_parent: false,
        name,
        kind: Kind::Internal,
        start_ns,
        end_ns,
        attrs,
        error,
    }
}

fn request_attributes<'a>(r: &'a Record, attrs: &mut Vec<(&'static str, Val<'a>)>) {
    attrs.extend([
        ("switchyard.request_id", Val::Str(&r.request_id)),
        ("switchyard.stream", Val::Bool(r.stream)),
        ("http.response.status_code", Val::Int(i64::from(r.status))),
        ("switchyard.cache", Val::Str(r.cache)),
    ]);
    if let Some(route) = &r.route {
        attrs.push(("switchyard.route", Val::Str(route)));
    }
    if let Some(client) = &r.client {
        attrs.push(("switchyard.client", Val::Str(client)));
    }
    if let Some(model) = &r.model {
        attrs.push(("gen_ai.request.model", Val::Str(model)));
    }
    if let Some(cost) = r.cost_usd {
        attrs.push(("switchyard.cost_usd", Val::F64(cost)));
    }
    if let Some(e) = r.error {
        attrs.push(("error.type", Val::Str(e)));
    }
}

fn route_attributes<'a>(r: &'a Record, attrs: &mut Vec<(&'static str, Val<'a>)>) {
    attrs.push((
        "switchyard.route.candidates",
        Val::Int(r.candidates.len() as i64),
    ));
    if let Some(s) = &r.selected {
        attrs.push(("switchyard.route.selected", Val::Str(s)));
    }
    if let Some(reason) = r.decision_reason {
        attrs.push(("switchyard.route.decision_reason", Val::Str(reason)));
    }
    if let Some(f) = r.fallback_reason {
        attrs.push(("switchyard.route.fallback_reason", Val::Str(f)));
    }
}

/// A stream's call lasts past its opening: until the continuation that
/// followed it began, or the request ended.
fn attempt_end(r: &Record, i: usize, a: &AttemptLog, request_end: SystemTime) -> SystemTime {
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

/// An attempt's GenAI attributes: the model asked of the upstream (the
/// deployment's) and the one it reported; the client's `model` is the
/// request span's.
fn attempt_attributes<'a>(a: &'a AttemptLog, attrs: &mut Vec<(&'static str, Val<'a>)>) {
    attrs.extend([
        ("gen_ai.operation.name", Val::Str(a.span.operation)),
        ("gen_ai.provider.name", Val::Str(a.span.provider)),
        ("switchyard.provider", Val::Str(&a.provider)),
        ("switchyard.deployment", Val::Str(&a.deployment)),
        ("switchyard.outcome", Val::Str(a.outcome)),
        ("switchyard.resumed", Val::Bool(a.resumed)),
    ]);
    if let Some(m) = &a.span.request_model {
        attrs.push(("gen_ai.request.model", Val::Str(m)));
    }
    if let Some(m) = &a.span.model {
        attrs.push(("gen_ai.response.model", Val::Str(m)));
    }
    if let Some(s) = a.status {
        attrs.push(("http.response.status_code", Val::Int(i64::from(s))));
    }
    if a.outcome != "ok" {
        attrs.push(("error.type", Val::Str(a.outcome)));
    }
    if let Some(u) = a.usage {
        attrs.push(("gen_ai.usage.input_tokens", Val::Int(u.input_tokens as i64)));
        attrs.push((
            "gen_ai.usage.output_tokens",
            Val::Int(u.output_tokens as i64),
        ));
        attrs.push(("switchyard.cost_usd", Val::F64(u.cost_usd)));
    }
}

/// A tonic codec for a message that is already protobuf bytes (the
/// collector's answer is not read: a call that succeeds is enough).
mod raw {
    use bytes::{Buf, BufMut, Bytes};
    use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
    use tonic::Status;

    #[derive(Debug, Clone, Copy, Default)]
    pub struct Raw;

    impl Codec for Raw {
        type Encode = Bytes;
        type Decode = ();
        type Encoder = Raw;
        type Decoder = Raw;

        fn encoder(&mut self) -> Raw {
            Raw
        }

        fn decoder(&mut self) -> Raw {
            Raw
        }
    }

    impl Encoder for Raw {
        type Item = Bytes;
        type Error = Status;

        fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
            dst.put_slice(&item);
            Ok(())
        }
    }

    impl Decoder for Raw {
        type Item = ();
        type Error = Status;

        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<()>, Status> {
            src.advance(src.remaining());
            Ok(Some(()))
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
