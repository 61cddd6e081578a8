//! TEMP floor experiment: hyper server -> hyper-util legacy client, nothing else.
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use std::convert::Infallible;
use tokio::net::TcpSocket;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut threads = vec![];
    for _ in 0..2 {
        threads.push(std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let s = TcpSocket::new_v4().unwrap();
                s.set_reuseaddr(true).unwrap();
                s.set_reuseport(true).unwrap();
                s.bind("127.0.0.1:18090".parse().unwrap()).unwrap();
                let l = s.listen(1024).unwrap();
                let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
                http.set_nodelay(true);
                let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new())
                    .pool_timer(TokioTimer::new())
                    .http1_writev(false)
                    .build(http);
                loop {
                    let (tcp, _) = l.accept().await.unwrap();
                    tcp.set_nodelay(true).unwrap();
                    let client = client.clone();
                    tokio::spawn(async move {
                        let svc = hyper::service::service_fn(
                            move |req: http::Request<hyper::body::Incoming>| {
                                let client = client.clone();
                                async move {
                                    let (parts, body) = req.into_parts();
                                    let body = body.collect().await.unwrap().to_bytes();
                                    let mut up = http::Request::builder()
                                        .method(parts.method)
                                        .uri(format!("http://127.0.0.1:18081{}", parts.uri.path()))
                                        .header("content-type", "application/json")
                                        .header("authorization", "Bearer x")
                                        .body(Full::new(body))
                                        .unwrap();
                                    up.headers_mut();
                                    let resp = client.request(up).await.unwrap();
                                    let (p, b) = resp.into_parts();
                                    let b = b.collect().await.unwrap().to_bytes();
                                    Ok::<_, Infallible>(http::Response::from_parts(p, Full::new(b)))
                                }
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .writev(false)
                            .serve_connection(TokioIo::new(tcp), svc)
                            .await;
                    });
                }
            });
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
}
