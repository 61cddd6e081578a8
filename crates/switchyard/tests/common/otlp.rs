//! A real OTLP trace receiver on loopback, gRPC (tonic) or HTTP/protobuf
//! (`POST /v1/traces`), that keeps every span it is sent, flattened for
//! assertions.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use serde_json::Value;

/// One received span; ids in lowercase hex (the parent empty for a root).
#[derive(Debug, Clone)]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    pub parent: String,
    pub name: String,
    /// OTLP `SpanKind`: 2 server, 3 client, 1 internal.
    pub kind: i32,
    pub start: u64,
    pub end: u64,
    pub attrs: BTreeMap<String, Value>,
    /// OTLP `StatusCode`: 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub service: Option<String>,
}

impl Span {
    pub fn attr(&self, key: &str) -> &Value {
        self.attrs.get(key).unwrap_or(&Value::Null)
    }
}

#[derive(Clone, Default)]
struct Store(Arc<Mutex<Vec<Span>>>);

impl Store {
    fn add(&self, req: ExportTraceServiceRequest) {
        let mut got = self.0.lock().unwrap();
        for rs in req.resource_spans {
            let service = rs.resource.as_ref().and_then(|r| {
                r.attributes
                    .iter()
                    .find(|kv| kv.key == "service.name")
                    .and_then(|kv| {
                        json_of(kv.value.as_ref()?.value.as_ref()?)
                            .as_str()
                            .map(str::to_owned)
                    })
            });
            for ss in rs.scope_spans {
                for s in ss.spans {
                    got.push(Span {
                        trace_id: hex::encode(&s.trace_id),
                        span_id: hex::encode(&s.span_id),
                        parent: hex::encode(&s.parent_span_id),
                        name: s.name,
                        kind: s.kind,
                        start: s.start_time_unix_nano,
                        end: s.end_time_unix_nano,
                        attrs: s
                            .attributes
                            .into_iter()
                            .filter_map(|kv| {
                                let v = json_of(kv.value?.value.as_ref()?);
                                Some((kv.key, v))
                            })
                            .collect(),
                        status: s.status.map_or(0, |st| st.code),
                        service: service.clone(),
                    });
                }
            }
        }
    }
}

fn json_of(v: &AnyValue) -> Value {
    match v {
        AnyValue::StringValue(s) => Value::from(s.clone()),
        AnyValue::BoolValue(b) => Value::from(*b),
        AnyValue::IntValue(i) => Value::from(*i),
        AnyValue::DoubleValue(d) => Value::from(*d),
        other => Value::from(format!("{other:?}")),
    }
}

#[tonic::async_trait]
impl TraceService for Store {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        self.add(request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

pub struct Receiver {
    /// What `observability.otlp_endpoint` should say.
    pub endpoint: String,
    store: Store,
    task: tokio::task::JoinHandle<()>,
}

impl Receiver {
    /// OTLP/gRPC on 127.0.0.1, an ephemeral port.
    pub async fn start_grpc() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let store = Store::default();
        let incoming = tonic::transport::server::TcpIncoming::from(listener);
        let server = tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(store.clone()))
            .serve_with_incoming(incoming);
        let task = tokio::spawn(async move {
            let _ = server.await;
        });
        Receiver {
            endpoint,
            store,
            task,
        }
    }

    /// OTLP/HTTP (protobuf) on 127.0.0.1, `POST /v1/traces`; the endpoint
    /// is the base URL, as a user would configure it.
    pub async fn start_http() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let store = Store::default();
        let kept = store.clone();
        let app = axum::Router::new().route(
            "/v1/traces",
            axum::routing::post(move |body: bytes::Bytes| {
                let kept = kept.clone();
                async move {
                    match ExportTraceServiceRequest::decode(body) {
                        Ok(req) => {
                            kept.add(req);
                            let out = ExportTraceServiceResponse::default().encode_to_vec();
                            (
                                http::StatusCode::OK,
                                [("content-type", "application/x-protobuf")],
                                out,
                            )
                        }
                        Err(_) => (
                            http::StatusCode::BAD_REQUEST,
                            [("content-type", "text/plain")],
                            b"not an ExportTraceServiceRequest".to_vec(),
                        ),
                    }
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            endpoint,
            store,
            task,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        self.store.0.lock().unwrap().clone()
    }

    /// The spans of one trace (hex id).
    pub fn spans_for(&self, trace_id: &str) -> Vec<Span> {
        self.spans()
            .into_iter()
            .filter(|s| s.trace_id == trace_id)
            .collect()
    }

    /// Wait (up to 10 s) until at least `n` spans arrived, then a little
    /// longer for any straggler of the same export schedule.
    pub async fn wait_spans(&self, n: usize) -> Vec<Span> {
        let arrived = super::poll_within(super::PATIENCE, || async {
            (self.spans().len() >= n).then_some(())
        });
        if arrived.await.is_none() {
            panic!("fewer than {n} spans arrived: {:#?}", self.spans());
        }
        // A fixed grace, not a poll: a straggler may or may not come, and
        // the test wants it counted if it does.
        tokio::time::sleep(Duration::from_millis(300)).await;
        self.spans()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `observability:` for a gateway exporting to `endpoint`.
pub fn observability(endpoint: &str, protocol: &str, sample: f64) -> String {
    format!(
        "observability:\n  otlp_endpoint: \"{endpoint}\"\n  otlp_protocol: {protocol}\n  trace_sample: {sample}\n"
    )
}

/// The span named `name` (exactly one).
pub fn one<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name}: {spans:#?}");
    found[0]
}

/// The attempt spans (client kind), in start order.
pub fn attempts(spans: &[Span]) -> Vec<&Span> {
    let mut a: Vec<&Span> = spans.iter().filter(|s| s.kind == 3).collect();
    a.sort_by_key(|s| s.start);
    a
}
