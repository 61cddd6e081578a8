//! A real OTLP/gRPC trace receiver that only counts what it is sent: the
//! collector of the benchmark's traced lane. `GET /` on its HTTP port (the
//! next port up) answers `{"requests", "spans"}` so the benchmark can check
//! the spans arrived.
//!
//! cargo run --release --example otlp_sink -- 127.0.0.1:14317

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};

#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    spans: AtomicU64,
}

#[derive(Clone, Default)]
struct Sink(Arc<Counts>);

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = request
            .get_ref()
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        self.0.requests.fetch_add(1, Ordering::Relaxed);
        self.0.spans.fetch_add(spans as u64, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), String> {
    let addr: std::net::SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:14317".into())
        .parse()
        .map_err(|e| format!("ADDR: {e}"))?;
    let sink = Sink::default();
    let counts = sink.0.clone();
    let stats = std::net::SocketAddr::new(addr.ip(), addr.port() + 1);
    let listener = tokio::net::TcpListener::bind(stats)
        .await
        .map_err(|e| format!("{stats}: {e}"))?;
    tokio::spawn(async move {
        let app = axum::Router::new().route(
            "/",
            axum::routing::get(move || {
                let c = counts.clone();
                async move {
                    axum::Json(serde_json::json!({
                        "requests": c.requests.load(Ordering::Relaxed),
                        "spans": c.spans.load(Ordering::Relaxed),
                    }))
                }
            }),
        );
        let _ = axum::serve(listener, app).await;
    });
    tonic::transport::Server::builder()
        .add_service(TraceServiceServer::new(sink))
        .serve(addr)
        .await
        .map_err(|e| e.to_string())
}
