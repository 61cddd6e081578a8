//! Test harness: mock providers and the gateway, both in-process on ephemeral
//! loopback ports, talking real HTTP ([`instance`]: gateways as separate
//! processes of the built binary).

#![allow(dead_code)]

pub mod apt;
pub mod charges;
pub mod etcd;
pub mod instance;
pub mod otlp;
pub mod postgres;
pub mod redis;

use std::future::Future;
use std::time::{Duration, Instant};

/// How long [`eventually`] and [`eventually_some`] wait.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// Wait until `check` holds, asking again every 25 ms, for at most 10 s;
/// panics naming `what` if it never does. Every test that waits on
/// something asynchronous (a log line written, a state shared, a process
/// up) waits with this family, all on the one loop of [`poll_within`].
pub async fn eventually<F, Fut>(mut check: F, what: &str)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let check = || {
        let holds = check();
        async move { holds.await.then_some(()) }
    };
    eventually_within(PATIENCE, check, what).await
}

/// For a wait whose find the test goes on with (a response, lines): the first `Some`, within 10 s.
pub async fn eventually_some<T, F, Fut>(check: F, what: &str) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    eventually_within(PATIENCE, check, what).await
}

/// For a wait with a bound of its own ("within 1 s"): the first `Some` within `limit`.
pub async fn eventually_within<T, F, Fut>(limit: Duration, check: F, what: &str) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match poll_within(limit, check).await {
        Some(found) => found,
        None => panic!("not within {} s: {what}", limit.as_secs_f64()),
    }
}

/// The loop itself (`None` at `limit`), for a waiter that words its own failure from what it saw.
pub async fn poll_within<T, F, Fut>(limit: Duration, mut check: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Some(found) = check().await {
            return Some(found);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    None
}

/// The status a one-message chat request for `model` gets at `base` (a
/// gateway's client URL).
pub async fn chat_status(base: &str, model: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&serde_json::json!({"model": model, "messages": user("hi")}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// A port nothing listens on now (for a server a test starts itself).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

use std::sync::{Arc, Mutex};

use switchyard::config;
use switchyard::observe::decision_log::DecisionSink;
use switchyard::server::{self, Running};
use switchyard_mock::MockServer;

pub struct Harness {
    pub gw: Running,
    pub mock: MockServer,
    pub decisions: Arc<Mutex<Vec<String>>>,
    /// The gateway's own directory (its SQLite usage store, unless the YAML
    /// says otherwise); `{dir}` in the YAML names it.
    pub dir: Arc<tempfile::TempDir>,
}

/// `{mock}` in the YAML is replaced by the mock's base URL, `{dir}` by the
/// harness's temporary directory. The YAML must not have a `server:`
/// section: the harness adds one on ephemeral ports. Without a `usage:`
/// section the gateway keeps its usage store in `{dir}/usage.db`.
pub async fn start(yaml: &str) -> Harness {
    start_with(yaml, "").await
}

pub async fn start_with(yaml: &str, server_extra: &str) -> Harness {
    let dir = Arc::new(tempfile::tempdir().expect("temporary directory"));
    start_in(yaml, server_extra, dir).await
}

/// [`start_with`] in a given directory: a restart on the same store.
pub async fn start_in(yaml: &str, server_extra: &str, dir: Arc<tempfile::TempDir>) -> Harness {
    let mock = MockServer::start("127.0.0.1:0").await.expect("mock starts");
    start_on(mock, yaml, server_extra, dir).await
}

/// [`start_in`] with a mock the test started (and prepared files for).
pub async fn start_on(
    mock: MockServer,
    yaml: &str,
    server_extra: &str,
    dir: Arc<tempfile::TempDir>,
) -> Harness {
    let yaml = yaml
        .replace("{mock}", &mock.base_url())
        .replace("{dir}", &dir.path().display().to_string());
    let has_usage = yaml.starts_with("usage:") || yaml.contains("\nusage:");
    let usage = if has_usage {
        String::new()
    } else {
        format!("usage:\n  path: {}/usage.db\n", dir.path().display())
    };
    let full = format!(
        "server:\n  listen: 127.0.0.1:0\n  admin_listen: 127.0.0.1:0\n{server_extra}\n{yaml}\n{usage}"
    );
    let cfg = match config::load_str(&full, "test.yaml", &|name| match name {
        "TEST_KEY" => Some("sk-test-secret-value-1234".into()),
        "CLIENT_KEY" => Some("client-secret".into()),
        "ADMIN_KEY" => Some("admin-secret".into()),
        // The mock Bedrock's test credentials (switchyard_mock::AwsCredentials's default).
        "MOCK_AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".into()),
        "MOCK_AWS_SECRET_ACCESS_KEY" => Some("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into()),
        "WRONG_AWS_ACCESS_KEY_ID" => Some("AKIDEXAMPLE".into()),
        "WRONG_AWS_SECRET_ACCESS_KEY" => Some("not-the-secret".into()),
        _ => None,
    }) {
        Ok(c) => c,
        Err(ds) => panic!(
            "test config invalid:\n{}",
            ds.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    };
    let (sink, decisions) = DecisionSink::capture();
    let gw = server::start(
        cfg,
        server::Options {
            decisions: sink,
            config_source: None,
            workers: server::Workers::Current,
        },
    )
    .await
    .expect("gateway starts");
    Harness {
        gw,
        mock,
        decisions,
        dir,
    }
}

impl Harness {
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.gw.base_url())
    }

    /// Decision-log lines so far, parsed.
    pub fn decisions(&self) -> Vec<serde_json::Value> {
        self.decisions
            .lock()
            .unwrap()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Wait (briefly) for the n-th decision line: streams write theirs at the end.
    pub async fn decision(&self, n: usize) -> serde_json::Value {
        eventually_within(
            Duration::from_secs(2),
            || async { self.decisions().into_iter().nth(n) },
            &format!("decision line #{n}"),
        )
        .await
    }

    pub fn admin(&self, path: &str) -> String {
        format!("{}{path}", self.gw.admin_url())
    }

    /// `GET` an admin path (no admin key), its JSON answer.
    pub async fn admin_json(&self, path: &str) -> serde_json::Value {
        reqwest::get(self.admin(path))
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// `POST /admin/clients/{client}/keys` (no admin key): `{"id", "key", …}`.
    pub async fn issue_key(&self, client: &str) -> serde_json::Value {
        let r = reqwest::Client::new()
            .post(self.admin(&format!("/admin/clients/{client}/keys")))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        r.json().await.unwrap()
    }

    /// `/metrics` as text.
    pub async fn metrics(&self) -> String {
        reqwest::get(self.admin("/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    /// Every usage row queued so far is written.
    pub async fn flush_usage(&self) {
        let store = self.gw.app.usage.as_ref().expect("a usage store");
        assert!(
            store.flush(std::time::Duration::from_secs(10)).await,
            "usage rows written"
        );
    }

    /// `GET /admin/usage?{query}`, after a flush.
    pub async fn usage(&self, query: &str) -> serde_json::Value {
        self.flush_usage().await;
        let r = reqwest::get(self.admin(&format!("/admin/usage?{query}")))
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        r.json().await.unwrap()
    }

    pub async fn post(&self, body: serde_json::Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.url("/v1/chat/completions"))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    pub async fn post_raw(
        &self,
        body: impl Into<reqwest::Body>,
        content_type: &str,
    ) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.url("/v1/chat/completions"))
            .header("content-type", content_type)
            .body(body)
            .send()
            .await
            .unwrap()
    }
}

impl Harness {
    /// `POST /v1/responses` as a Responses client (Codex) sends it.
    pub async fn responses(&self, body: serde_json::Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.url("/v1/responses"))
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// `POST /v1/messages` as an Anthropic client sends it.
    pub async fn messages(&self, body: serde_json::Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.url("/v1/messages"))
            .header("anthropic-version", "2023-06-01")
            .json(&body)
            .send()
            .await
            .unwrap()
    }
}

/// One OpenAI-protocol mock deployment behind route `chat`.
pub const ONE_OPENAI: &str = r#"
providers:
  mock:
    protocol: openai
    base_url: "{mock}/v1"
    keys: [{ env: TEST_KEY }]
models:
  - id: mock/gpt-4o-mini
    provider: mock
    model: gpt-4o-mini
    capabilities: [tools, streaming]
    pricing: { input: 1.0, output: 2.0 }
routes:
  chat:
    targets: [mock/gpt-4o-mini]
"#;

/// One route over two deployments of one mock, in that order.
pub const TWO_TARGETS: &str = r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/a, provider: mock, model: a }
  - { id: mock/b, provider: mock, model: b }
routes:
  chat: { targets: [mock/a, mock/b] }
"#;

/// A header's value as a number (`x-switchyard-cost-usd`, the budget left).
pub fn header_f64(r: &reqwest::Response, name: &str) -> f64 {
    let v = r
        .headers()
        .get(name)
        .unwrap_or_else(|| panic!("no {name} header"));
    v.to_str().unwrap().parse().unwrap()
}

pub fn user(text: &str) -> serde_json::Value {
    serde_json::json!([{"role": "user", "content": text}])
}

/// Split an SSE body into its `data:` payloads.
pub fn sse_data(body: &str) -> Vec<String> {
    body.split("\n\n")
        .filter_map(|ev| {
            ev.lines()
                .find_map(|l| l.strip_prefix("data: "))
                .map(str::to_owned)
        })
        .collect()
}

/// The streamed answer text of an OpenAI SSE body.
pub fn sse_text(body: &str) -> String {
    sse_data(body)
        .iter()
        .filter(|d| d.as_str() != "[DONE]")
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect()
}
