//! The adversarial tier, client side (contract §8): clients that go away
//! mid-stream, stop reading, dribble their request or flood the listener.
//! Each test is what a careless or hostile client does, and checks that the
//! gateway still charges what was produced, frees what the request held and
//! keeps answering everyone else. Every wait is bounded.

mod common;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard_mock::{Behavior, Fault};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A budgeted client on a priced OpenAI deployment and an Anthropic one.
const PRICED: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
  an: { protocol: anthropic, base_url: "{mock}" }
models:
  - { id: oa/m, provider: oa, model: gpt-4o-mini, capabilities: [streaming, tools], pricing: { input: 100, output: 300 } }
  - { id: an/m, provider: an, model: claude-sonnet-4-5, capabilities: [streaming, tools], pricing: { input: 100, output: 300 } }
routes:
  chat: { targets: [oa/m] }
  claude: { targets: [an/m] }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 100, per: day } }
"#;

/// The path, body and headers of a streamed request on each door.
fn door_request(door: &str, model: &str) -> (&'static str, Value) {
    let text = "Tell me about the weather in Paris today, please.";
    match door {
        "chat" => (
            "/v1/chat/completions",
            json!({"model": model, "stream": true, "max_tokens": 200, "messages": common::user(text)}),
        ),
        "messages" => (
            "/v1/messages",
            json!({"model": model, "stream": true, "max_tokens": 200, "messages": common::user(text)}),
        ),
        "responses" => (
            "/v1/responses",
            json!({"model": model, "stream": true, "max_output_tokens": 200, "input": text}),
        ),
        other => panic!("no door {other}"),
    }
}

/// Open a stream on `door` and read it until `enough` says the client has
/// what it wants; then drop the connection (the user pressed Esc). Returns
/// what was read.
async fn read_then_close(
    h: &common::Harness,
    door: &str,
    model: &str,
    enough: impl Fn(&str) -> bool,
) -> String {
    let (path, body) = door_request(door, model);
    let http = reqwest::Client::new();
    let mut resp = http
        .post(h.url(path))
        .bearer_auth("client-secret")
        .header("anthropic-version", "2023-06-01")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut seen = String::new();
    let read = async {
        while let Some(chunk) = resp.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if enough(&seen) {
                return;
            }
        }
        panic!("the stream ended before the client had what it wanted: {seen}");
    };
    tokio::time::timeout(Duration::from_secs(10), read)
        .await
        .expect("the content arrives");
    drop(resp);
    drop(http);
    seen
}

async fn spent(h: &common::Harness) -> f64 {
    let clients = h.admin_json("/admin/clients").await;
    clients["clients"][0]["budget"]["spent_usd"]
        .as_f64()
        .unwrap_or_else(|| panic!("no spend in {clients}"))
}

/// The one usage row: outcome, usage_estimated, output tokens, cost.
async fn usage_row(h: &common::Harness) -> (String, bool, u64, f64) {
    h.flush_usage().await;
    let db = rusqlite::Connection::open(h.dir.path().join("usage.db")).unwrap();
    db.query_row(
        "SELECT outcome, usage_estimated, output_tokens, cost_usd FROM usage_requests",
        [],
        |r| Ok((r.get(0)?, r.get::<_, i64>(1)? == 1, r.get(2)?, r.get(3)?)),
    )
    .unwrap()
}

/// The decision line of the one request, once written.
async fn the_decision(h: &common::Harness) -> Value {
    common::eventually(
        || async { !h.decisions().is_empty() },
        "the request's decision line",
    )
    .await;
    h.decisions().remove(0)
}

/// The user reads to the answer's last word and closes: the stream is
/// charged on every door, the upstream call is stopped, the row and the
/// log line say so.
#[tokio::test]
async fn a_stream_the_client_closes_after_its_content_is_charged_on_every_door() {
    let full = "Hello from the mock openai provider.";
    for door in ["chat", "messages", "responses"] {
        let h = common::start(PRICED).await;
        // Slow events, and a stream that never ends by itself after its
        // content (finish and usage would come after a long pause): only a
        // gateway that stops the call when the client leaves gets here.
        h.mock.set_default(Behavior {
            chunk_delay_ms: 40,
            ..Behavior::fault(Fault::Stall).after(7)
        });
        let seen = read_then_close(&h, door, "chat", |s| s.contains("provider.")).await;
        assert!(seen.contains("provider."), "{door}: {seen}");
        let d = the_decision(&h).await;
        assert_eq!(d["outcome"], "client_closed", "{door}: {d}");
        assert_eq!(d["usage_estimated"], true, "{door}: {d}");
        assert_eq!(d["status"], 499, "{door}: {d}");
        let (input, output) = (
            d["tokens"]["input"].as_u64().unwrap(),
            d["tokens"]["output"].as_u64().unwrap(),
        );
        assert!(input >= 8, "{door}: the prompt is charged: {d}");
        // The text relayed, counted with the tokenizer: 7 tokens
        // ("Hello from the mock openai provider.").
        assert!(
            (6..=9).contains(&output),
            "{door}: the output relayed ({full}) is charged: {d}"
        );
        let cost = d["cost_usd"].as_f64().unwrap();
        assert!(cost > 0.0, "{door}: {d}");
        // The upstream call was stopped (its body dropped mid-stream).
        common::eventually(
            || async { h.mock.abandoned_bodies() == 1 },
            "the upstream stream abandoned",
        )
        .await;
        // The budget and the ledger are charged the same amount.
        let s = spent(&h).await;
        assert!((s - cost).abs() < 1e-9, "{door}: spent {s} vs cost {cost}");
        let (outcome, estimated, out, row_cost) = usage_row(&h).await;
        assert_eq!(
            (outcome.as_str(), estimated, out),
            ("client_closed", true, output),
            "{door}"
        );
        assert!(
            (row_cost - cost).abs() < 1e-9,
            "{door}: row {row_cost} vs {cost}"
        );
    }
}

/// Anthropic says the input at the start of its stream: a stream closed
/// mid-way is charged the upstream's own input figure.
#[tokio::test]
async fn a_closed_anthropic_stream_takes_the_input_the_upstream_reported() {
    let h = common::start(PRICED).await;
    h.mock.set_default(Behavior {
        chunk_delay_ms: 40,
        ..Behavior::fault(Fault::Stall).after(7)
    });
    // message_start, content_block_start, ping, then "Hello", " from",
    // " the", " mock": the client leaves after the fourth piece.
    read_then_close(&h, "messages", "claude", |s| s.contains("\" mock\"")).await;
    let d = the_decision(&h).await;
    assert_eq!(d["outcome"], "client_closed", "{d}");
    // The mock reports characters / 4 of the prompt: 49 / 4 → 12.
    assert_eq!(d["tokens"]["input"], 12, "{d}");
    assert!(d["tokens"]["output"].as_u64().unwrap() >= 4, "{d}");
    common::eventually(
        || async { h.mock.abandoned_bodies() == 1 },
        "the upstream stream abandoned",
    )
    .await;
}

/// A stream read to its end is the upstream's figures, not an estimate.
#[tokio::test]
async fn a_stream_read_to_its_end_is_not_estimated() {
    let h = common::start(PRICED).await;
    read_then_close(&h, "chat", "chat", |s| s.contains("[DONE]")).await;
    let d = the_decision(&h).await;
    assert_eq!(d["outcome"], "ok", "{d}");
    assert_eq!(d["usage_estimated"], false, "{d}");
    assert_eq!(d["status"], 200, "{d}");
    assert_eq!(h.mock.abandoned_bodies(), 0);
}

/// A non-stream request whose client leaves while the upstream thinks: the
/// prompt was sent, so it is charged, and the call is stopped.
#[tokio::test]
async fn a_request_the_client_leaves_mid_call_is_charged_its_prompt() {
    let h = common::start(PRICED).await;
    h.mock.set_default(Behavior {
        latency_ms: 5_000,
        ..Behavior::default()
    });
    let url = h.url("/v1/chat/completions");
    let asked = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .bearer_auth("client-secret")
            .json(&json!({"model": "chat", "max_tokens": 50, "messages": common::user("What is the capital of France?")}))
            .send()
            .await
    });
    common::eventually(
        || async { h.mock.request_count() == 1 },
        "the upstream call is out",
    )
    .await;
    asked.abort();
    let d = the_decision(&h).await;
    assert_eq!(d["outcome"], "client_closed", "{d}");
    assert_eq!(d["usage_estimated"], true, "{d}");
    assert!(d["tokens"]["input"].as_u64().unwrap() > 0, "{d}");
    assert!(d["cost_usd"].as_f64().unwrap() > 0.0, "{d}");
    assert!(spent(&h).await > 0.0);
}

/// A raw HTTP/1.1 request on a fresh connection whose receive buffer is
/// small (so a client that does not read fills it fast).
async fn raw_stream_request(h: &common::Harness, body: &Value) -> TcpStream {
    let addr = h.gw.addr;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut tcp = socket.connect(addr).await.unwrap();
    let body = serde_json::to_vec(body).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer client-secret\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(&body).await.unwrap();
    tcp
}

async fn post_as(h: &common::Harness, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .bearer_auth("client-secret")
        .json(&body)
        .send()
        .await
        .unwrap()
}

const SLOTS: &str = r#"
providers:
  oa:
    protocol: openai
    base_url: "{mock}/v1"
    timeouts: { first_byte: 1s, total: 2s, stream_idle: 1s }
    limits: { concurrency: 3, queue: 0 }
models:
  - { id: oa/m, provider: oa, model: gpt-4o-mini, capabilities: [streaming], pricing: { input: 1, output: 1 } }
routes:
  chat: { targets: [oa/m] }
clients:
  - { id: team, key_env: CLIENT_KEY }
"#;

/// Three streams opened and never read: their slots come back within the
/// total timeout (here 2 s), every other client is served after that, the
/// upstream calls are stopped, and what they produced is charged. (A
/// client whose socket buffers are full is the next test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_nobody_reads_free_their_slots_within_total() {
    let h = common::start(SLOTS).await;
    // An answer that would take 50 s: only the total timeout ends it.
    h.mock.set_default(Behavior {
        chunks: Some(1_000),
        chunk_delay_ms: 50,
        ..Behavior::default()
    });
    let body = json!({"model": "chat", "stream": true, "messages": common::user("hi")});
    let started = Instant::now();
    let mut silent = Vec::new();
    for _ in 0..3 {
        silent.push(raw_stream_request(&h, &body).await);
    }
    common::eventually(
        || async { h.mock.request_count() == 3 },
        "three streams upstream",
    )
    .await;
    // Every slot is held now: the next request is refused…
    h.mock.set_default(Behavior::default());
    let r = post_as(&h, json!({"model": "chat", "messages": common::user("hi")})).await;
    assert_eq!(r.status(), 429, "all three slots are held");
    // …until the silent streams' total timeout ends them.
    common::eventually(
        || async { h.decisions().len() >= 4 },
        "the silent streams are ended",
    )
    .await;
    let freed = started.elapsed();
    assert!(
        freed < Duration::from_secs(6),
        "slots came back after {freed:?}"
    );
    let r = post_as(&h, json!({"model": "chat", "messages": common::user("hi")})).await;
    assert_eq!(r.status(), 200, "served once the slots came back");
    let stalled: Vec<Value> = h
        .decisions()
        .into_iter()
        .filter(|d| d["stream"] == true)
        .collect();
    assert_eq!(stalled.len(), 3);
    for d in &stalled {
        assert_eq!(d["usage_estimated"], true, "{d}");
        assert_eq!(d["outcome"], "timeout", "{d}");
        assert!(d["tokens"]["output"].as_u64().unwrap() > 0, "{d}");
    }
    // The upstream calls were stopped, not left to run their 50 s.
    common::eventually(
        || async { h.mock.abandoned_bodies() == 3 },
        "the upstream calls stopped",
    )
    .await;
    drop(silent);
}

/// A client that stops reading a long answer: once the socket buffers are
/// full the gateway cannot write, and `stream_idle` (1 s) later the stream
/// is cut — slot back, upstream call stopped, what it produced charged —
/// long before the total (30 s) or the answer's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_after_stream_idle() {
    let h =
        common::start(&SLOTS.replace("first_byte: 1s, total: 2s", "first_byte: 10s, total: 30s"))
            .await;
    // 10 MiB in 2,048 events, 2 ms apart: several times what the socket
    // buffers hold (about 3 MB here), and 4 s or more to send.
    h.mock.set_default(Behavior {
        text: Some("word ".repeat(2 << 20)),
        chunks: Some(2_048),
        chunk_delay_ms: 2,
        ..Behavior::default()
    });
    let body = json!({"model": "chat", "stream": true, "messages": common::user("hi")});
    let started = Instant::now();
    let mut tcp = raw_stream_request(&h, &body).await;
    // Read the head, then nothing more.
    let mut head = [0u8; 512];
    let n = tcp.read(&mut head).await.unwrap();
    let head = String::from_utf8_lossy(&head[..n]);
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    common::eventually(
        || async { !h.decisions().is_empty() },
        "the stream nobody reads is ended",
    )
    .await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(10), "cut after {took:?}");
    let d = &h.decisions()[0];
    assert_eq!(d["outcome"], "request_timeout", "{d}");
    assert_eq!(d["usage_estimated"], true, "{d}");
    assert!(d["tokens"]["output"].as_u64().unwrap() > 0, "{d}");
    common::eventually(
        || async { h.mock.abandoned_bodies() == 1 },
        "the upstream call stopped",
    )
    .await;
    let r = post_as(&h, json!({"model": "chat", "messages": common::user("hi")})).await;
    assert_eq!(r.status(), 200);
    drop(tcp);
}

/// Everything the server sends on `tcp` until it closes the connection
/// (bounded: 5 s).
async fn read_to_close(tcp: &mut tokio::net::tcp::ReadHalf<'_>) -> String {
    let mut answer = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = tcp.read(&mut buf).await {
            answer.extend_from_slice(&buf[..n]);
        }
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect("the gateway closes the connection");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A body dribbled a byte at a time gets 408 within `body_timeout`, and the
/// connection is closed; headers dribbled the same way lose the connection.
/// Meanwhile every other client is served.
#[tokio::test]
async fn a_dribbled_request_is_timed_out_and_closed() {
    let h = common::start_with(common::ONE_OPENAI, "  body_timeout: 500ms").await;
    let mut tcp = TcpStream::connect(h.gw.addr).await.unwrap();
    let (mut rd, mut wr) = tcp.split();
    let head = "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{";
    wr.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let dribble = async {
        for _ in 0..99 {
            if wr.write_all(b" ").await.is_err() {
                return;
            }
            // The dribble under test: a byte every 50 ms.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (answer, ()) = tokio::join!(read_to_close(&mut rd), dribble);
    let took = started.elapsed();
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert!(took < Duration::from_secs(3), "408 after {took:?}");
    // Another client, meanwhile and after, is served.
    let r = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
    // Headers dribbled: the connection is closed, nothing is served.
    let mut tcp = TcpStream::connect(h.gw.addr).await.unwrap();
    let (mut rd, mut wr) = tcp.split();
    let started = Instant::now();
    let dribble = async {
        for b in b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
            if wr.write_all(&[*b]).await.is_err() {
                return;
            }
            // The dribble under test: a byte every 50 ms.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let (answer, ()) = tokio::join!(read_to_close(&mut rd), dribble);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert!(!answer.contains("200 OK"), "{answer}");
    assert_eq!(
        h.mock.request_count(),
        1,
        "only the well-behaved request went upstream"
    );
}

/// Past `server.max_connections` a new connection gets 503 at once (in the
/// OpenAI envelope), while the connections already open are still served;
/// a freed place is taken again.
#[tokio::test]
async fn connections_past_the_bound_are_refused_at_once() {
    let h = common::start_with(common::ONE_OPENAI, "  max_connections: 4").await;
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(TcpStream::connect(h.gw.addr).await.unwrap());
    }
    // The listener has taken them all in before the next one comes.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let started = Instant::now();
    let r = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .json(&json!({"model": "chat", "messages": common::user("hi")}))
        .send()
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(r.status(), 503);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "overloaded", "{e}");
    // A connection already open is served.
    let mut tcp = held.pop().unwrap();
    let body = br#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    tcp.write_all(body).await.unwrap();
    let (mut rd, _wr) = tcp.split();
    let answer = read_to_close(&mut rd).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(tcp);
    // Its place is free again.
    let http = reqwest::Client::new();
    common::eventually(
        || async {
            http.post(h.url("/v1/chat/completions"))
                .json(&json!({"model": "chat", "messages": common::user("hi")}))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        },
        "a freed place is taken",
    )
    .await;
    drop(held);
}

/// Hostile bodies: a second `model` smuggled past the first, and a body of
/// 200 000 keys (quadratic once): each gets a prompt 400 or answer, nothing
/// smuggled reaches the upstream, and the gateway keeps serving.
#[tokio::test]
async fn hostile_bodies_are_refused_promptly_and_nothing_is_smuggled() {
    let h = common::start(common::ONE_OPENAI).await;
    let smuggled =
        r#"{"model":"chat","messages":[{"role":"user","content":"hi"}],"model":"gpt-secret"}"#;
    let r = h.post_raw(smuggled, "application/json").await;
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "invalid_request", "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("duplicate"),
        "{e}"
    );
    let mut wide = String::from(r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]"#);
    for i in 0..200_000 {
        wide.push_str(&format!(",\"k{i}\":0"));
    }
    wide.push('}');
    let started = Instant::now();
    let r = h.post_raw(wide, "application/json").await;
    assert!(
        r.status().is_success() || r.status() == 400,
        "{}",
        r.status()
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(
        h.mock
            .requests()
            .iter()
            .all(|q| !String::from_utf8_lossy(&q.body).contains("gpt-secret")),
        "the smuggled model never went upstream"
    );
    let r = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
}

/// A 200 KB header is refused, the connection closed, nothing reaches the
/// upstream, and the gateway keeps serving.
#[tokio::test]
async fn a_huge_header_is_refused_and_the_gateway_keeps_serving() {
    let h = common::start(common::ONE_OPENAI).await;
    let body = r#"{"model":"chat","messages":[{"role":"user","content":"hi"}]}"#;
    let huge = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-junk: {}\r\ncontent-length: {}\r\n\r\n{body}",
        "a".repeat(200_000),
        body.len()
    );
    for raw in [huge] {
        let mut tcp = TcpStream::connect(h.gw.addr).await.unwrap();
        let (mut rd, mut wr) = tcp.split();
        let _ = wr.write_all(raw.as_bytes()).await;
        let answer = read_to_close(&mut rd).await;
        assert!(
            answer.is_empty() || answer.starts_with("HTTP/1.1 4"),
            "{}",
            &answer[..answer.len().min(300)]
        );
        assert!(!answer.contains("HTTP/1.1 200"), "{answer}");
    }
    assert_eq!(h.mock.request_count(), 0, "nothing reached the upstream");
    let r = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
}
