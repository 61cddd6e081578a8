//! An upstream behind a private CA (a self-hosted vLLM, a private endpoint):
//! the gateway trusts the system's store as well as the public roots, so
//! `SSL_CERT_FILE` naming the CA is all it takes — and without it the
//! certificate is refused. The gateway runs as its own process (the
//! variable is read once per process); the upstream is a TLS origin here
//! speaking HTTP/2 or HTTP/1.1 and answering OpenAI's recorded body.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use common::instance::Instance;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};

const TLS_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tls");
const ANSWER: &str = include_str!("../../../fixtures/providers/openai/chat_text.response.json");

/// A loopback HTTPS origin for `localhost` (the test CA's certificate),
/// offering HTTP/2 and HTTP/1.1; its port and how many requests it served.
async fn private_origin() -> (u16, Arc<AtomicUsize>) {
    use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
    let chain = vec![CertificateDer::from_pem_file(format!("{TLS_DIR}/server.pem")).unwrap()];
    let key = PrivateKeyDer::from_pem_file(format!("{TLS_DIR}/server.key")).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            let (acceptor, counter) = (acceptor.clone(), counter.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(sock).await else {
                    return; // the gateway refused the certificate
                };
                let answer = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let counter = counter.clone();
                    async move {
                        assert_eq!(req.uri().path(), "/v1/chat/completions");
                        counter.fetch_add(1, Ordering::SeqCst);
                        let mut resp =
                            Response::new(Full::new(Bytes::from_static(ANSWER.as_bytes())));
                        resp.headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), answer)
                    .await;
            });
        }
    });
    (port, served)
}

fn config(port: u16) -> String {
    format!(
        r#"
providers:
  private: {{ protocol: openai, base_url: "https://localhost:{port}/v1", keys: [{{ env: TEST_KEY }}] }}
models:
  - {{ id: private/m, provider: private, model: gpt-5.1-chat-latest }}
routes:
  chat: {{ targets: [private/m], retry: {{ attempts: 1 }} }}
"#
    )
}

async fn ask(gw: &Instance) -> (u16, serde_json::Value) {
    let resp = reqwest::Client::new()
        .post(gw.url("/v1/chat/completions"))
        .json(&serde_json::json!({"model": "chat", "messages": [{"role": "user", "content": "Hello"}]}))
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.json().await.unwrap())
}

#[tokio::test]
async fn an_upstream_signed_by_a_private_ca_is_trusted_through_ssl_cert_file_and_refused_without() {
    let (port, served) = private_origin().await;
    let ca = format!("{TLS_DIR}/ca.pem");
    let mut trusting = Instance::start(&config(port), &[("SSL_CERT_FILE", &ca)]).await;
    let (status, body) = ask(&trusting).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "Hello! How can I help you today?"
    );
    assert_eq!(served.load(Ordering::SeqCst), 1);

    // The same config without the CA: the certificate is refused, nothing
    // reaches the origin, and the client gets the contract's envelope.
    let mut plain =
        Instance::start(&config(port), &[("SSL_CERT_FILE", "/nonexistent/ca.pem")]).await;
    let (status, body) = ask(&plain).await;
    assert_ne!(status, 200, "{body}");
    assert!(body["error"]["code"].is_string(), "{body}");
    assert_eq!(served.load(Ordering::SeqCst), 1, "no request got through");
    let text = body.to_string();
    assert!(!text.contains("sk-test-secret-value-1234"), "{text}");
    trusting.stop().await;
    plain.stop().await;
}
