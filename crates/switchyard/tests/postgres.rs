//! The PostgreSQL usage store against a real server (started by the test):
//! the same `/admin/usage` answers as SQLite for the same traffic, issued
//! keys kept, a server stopped mid-run fails no request — the rows it
//! could not take are dropped and counted —, and three gateway processes
//! writing to it at once lose and duplicate no row. A shadow copy's row
//! (`shadow = 1`) is written to both alike.

mod common;

use std::sync::Arc;

use common::postgres::Postgres;
use serde_json::{json, Value};

const TRAFFIC: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
  an: { protocol: anthropic, base_url: "{mock}" }
models:
  - { id: oa/m, provider: oa, model: gpt-m, capabilities: [streaming], pricing: { input: 3, output: 15, cached_input: 1 } }
  - { id: an/c, provider: an, model: claude-c, capabilities: [streaming], pricing: { input: 1, output: 5 } }
routes:
  chat: { targets: [oa/m] }
  cheap: { targets: [an/c] }
  shadowed: { targets: [an/c], shadow: { target: oa/m, share: 1.0 } }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 100, per: month } }
  - { id: other, key_sha256: "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b" }
"#;

/// The same requests, in the same order, to one gateway.
async fn traffic(h: &common::Harness) {
    let http = reqwest::Client::new();
    let plan = [
        ("client-secret", "chat", false, "hello"),
        ("client-secret", "chat", true, "hello there"),
        ("client-secret", "cheap", false, "what is two and two"),
        ("secret", "cheap", true, "hi"),
        (
            "secret",
            "chat",
            false,
            "a longer question about budgets and ledgers",
        ),
        ("secret", "nope", false, "unknown route"),
        ("client-secret", "shadowed", false, "compare me"),
    ];
    for (key, model, stream, text) in plan {
        let r = http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth(key)
            .json(&json!({"model": model, "stream": stream, "messages": common::user(text)}))
            .send()
            .await
            .unwrap();
        r.text().await.unwrap();
    }
}

fn rows(u: &Value) -> Vec<Value> {
    u["rows"].as_array().unwrap().clone()
}

fn same_rows(a: &Value, b: &Value) {
    let (a, b) = (rows(a), rows(b));
    assert_eq!(a.len(), b.len(), "{a:#?} vs {b:#?}");
    for (x, y) in a.iter().zip(&b) {
        for k in [
            "key",
            "requests",
            "errors",
            "cache_hits",
            "input_tokens",
            "output_tokens",
            "cached_input_tokens",
        ] {
            assert_eq!(x[k], y[k], "{k}: {x} vs {y}");
        }
        let (cx, cy) = (
            x["cost_usd"].as_f64().unwrap(),
            y["cost_usd"].as_f64().unwrap(),
        );
        assert!((cx - cy).abs() < 1e-12, "{x} vs {y}");
    }
}

#[tokio::test]
async fn postgres_answers_what_sqlite_answers() {
    let pg = Postgres::start();
    let lite = common::start(TRAFFIC).await;
    let yaml = format!(
        "{TRAFFIC}usage: {{ store: postgres, url: \"{}\" }}\n",
        pg.url
    );
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let post = common::start_in(&yaml, "", dir.clone()).await;
    traffic(&lite).await;
    traffic(&post).await;
    // The shadow copy's row (client `_shadow`, `shadow = 1`) is written
    // after its answer: both stores have it before they are compared.
    for h in [&lite, &post] {
        common::eventually(
            || async {
                let s = h.admin_json("/admin/shadow").await;
                s["shadows"][0]["requests"] == 1
            },
            "the shadow copy sent",
        )
        .await;
    }
    let by_client = post.usage("group_by=client").await;
    assert!(
        rows(&by_client).iter().any(|r| r["key"] == "_shadow"),
        "{by_client}"
    );
    for by in ["client", "model", "route", "deployment"] {
        let q = format!("group_by={by}");
        let (a, b) = (lite.usage(&q).await, post.usage(&q).await);
        assert!(!rows(&a).is_empty());
        same_rows(&a, &b);
    }
    same_rows(
        &lite.usage("group_by=route&since=40d").await,
        &post.usage("group_by=route&since=40d").await,
    );

    // Issued keys and budgets live in PostgreSQL across restarts.
    let http = reqwest::Client::new();
    let issued: Value = post.issue_key("other").await;
    let key = issued["key"].as_str().unwrap().to_owned();
    let spent = |h: &common::Harness| {
        let url = h.admin("/admin/clients");
        async move {
            let v: Value = reqwest::get(url).await.unwrap().json().await.unwrap();
            v["clients"][0]["budget"]["spent_usd"].as_f64().unwrap()
        }
    };
    let before = spent(&post).await;
    assert!(before > 0.0);
    post.gw.shutdown().await;
    let post = common::start_in(&yaml, "", dir).await;
    assert!((spent(&post).await - before).abs() < 1e-12);
    let r = http
        .post(post.url("/v1/chat/completions"))
        .bearer_auth(&key)
        .json(&json!({"model": "chat", "messages": common::user("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

fn metric(m: &str, name: &str) -> f64 {
    m.lines()
        .find_map(|l| {
            l.strip_prefix(name)
                .map(|v| v.trim().parse::<f64>().unwrap())
        })
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_stopped_server_fails_no_request_and_its_rows_are_counted_as_dropped() {
    let mut pg = Postgres::start();
    let yaml = format!(
        "{TRAFFIC}usage: {{ store: postgres, url: \"{}\" }}\n",
        pg.url
    );
    let h = common::start(&yaml).await;
    let http = reqwest::Client::new();
    let chat = || {
        http.post(h.url("/v1/chat/completions"))
            .bearer_auth("client-secret")
            .json(&json!({"model": "chat", "messages": common::user("hi")}))
            .send()
    };
    assert_eq!(chat().await.unwrap().status(), 200);
    h.flush_usage().await;
    pg.stop();
    for _ in 0..10 {
        assert_eq!(
            chat().await.unwrap().status(),
            200,
            "the store is down, not the gateway"
        );
    }
    h.flush_usage().await;
    let m = h.metrics().await;
    assert_eq!(
        metric(&m, "switchyard_usage_store_writes_total{result=\"ok\"}"),
        1.0,
        "{m}"
    );
    assert_eq!(
        metric(
            &m,
            "switchyard_usage_store_writes_total{result=\"dropped\"}"
        ),
        10.0,
        "{m}"
    );
    // Back up: rows are written again.
    pg.restart();
    common::eventually_within(
        std::time::Duration::from_secs(5),
        || async {
            assert_eq!(chat().await.unwrap().status(), 200);
            h.flush_usage().await;
            let m = h.metrics().await;
            (metric(&m, "switchyard_usage_store_writes_total{result=\"ok\"}") > 1.0).then_some(())
        },
        "writes resume once PostgreSQL is back",
    )
    .await;
}

/// Two instances on one PostgreSQL: a key issued on one works on the other,
/// and once revoked on one it stops on the other, within the key sync.
#[tokio::test]
async fn instances_sharing_postgres_agree_on_issued_keys() {
    let pg = Postgres::start();
    let yaml = format!(
        "{TRAFFIC}usage: {{ store: postgres, url: \"{}\" }}\n",
        pg.url
    );
    // Started together on a fresh database: their migrations take turns
    // (without the advisory lock one would fail creating the same tables).
    let (a, b) = tokio::join!(common::start(&yaml), common::start(&yaml));
    let http = reqwest::Client::new();
    let issued: Value = a.issue_key("team").await;
    let (id, key) = (
        issued["id"].as_str().unwrap(),
        issued["key"].as_str().unwrap(),
    );
    let status_on = |h: &common::Harness| {
        http.post(h.url("/v1/chat/completions"))
            .bearer_auth(key)
            .json(&json!({"model": "chat", "messages": common::user("hi")}))
            .send()
    };
    assert_eq!(
        status_on(&a).await.unwrap().status(),
        200,
        "at once where it was issued"
    );
    let answers = |want: u16| {
        let b = &b;
        move || async move { (status_on(b).await.unwrap().status() == want).then_some(()) }
    };
    common::eventually_within(
        std::time::Duration::from_secs(6),
        answers(200),
        "the other instance picks it up from the store",
    )
    .await;
    let r = http
        .delete(a.admin(&format!("/admin/clients/team/keys/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(
        status_on(&a).await.unwrap().status(),
        401,
        "at once where it was revoked"
    );
    common::eventually_within(
        std::time::Duration::from_secs(6),
        answers(401),
        "and on the other instance within the key sync",
    )
    .await;
}

/// What one request of the fleet test sent, and what it got back.
struct Sent {
    instance: usize,
    client: &'static str,
    route: &'static str,
    stream: bool,
    request_id: String,
    input_tokens: i64,
    output_tokens: i64,
    cached_input_tokens: i64,
    /// `x-switchyard-cost-usd` (non-streaming answers only; a stream's cost
    /// is in the decision log).
    cost_header: Option<f64>,
}

/// The usage of an answer: the body's `usage`, or a stream's usage chunk.
fn usage_of(body: &str, stream: bool) -> (i64, i64, i64) {
    let usage = if stream {
        common::sse_data(body)
            .iter()
            .filter(|d| d.as_str() != "[DONE]")
            .map(|d| serde_json::from_str::<Value>(d).unwrap())
            .find(|v| v["usage"].is_object())
            .unwrap_or_else(|| panic!("no usage chunk in the stream:\n{body}"))["usage"]
            .clone()
    } else {
        serde_json::from_str::<Value>(body).unwrap()["usage"].clone()
    };
    let n = |v: &Value| v.as_i64().unwrap_or(0);
    (
        n(&usage["prompt_tokens"]),
        n(&usage["completion_tokens"]),
        n(&usage["prompt_tokens_details"]["cached_tokens"]),
    )
}

/// Three gateway processes (the built binary, not tasks of this test) on one
/// PostgreSQL usage store, writing at once: 300 requests round-robin across
/// them, 30 in flight, streaming and not, two clients, two routes (an
/// OpenAI and an Anthropic upstream). Every request leaves exactly one row
/// (the rows' request ids are the `x-request-id`s the clients got, none
/// missing, none twice) with the tokens and cost its answer reported; every
/// instance answers `/admin/usage` with the same totals, which are the sums
/// of what the answers said; and no instance dropped a row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_writing_at_once_lose_and_duplicate_no_row() {
    use common::instance::{self, metric};
    use futures_util::StreamExt;
    use std::collections::{HashMap, HashSet};
    use std::time::Duration;

    const N: usize = 300;
    const IN_FLIGHT: usize = 30;
    let pg = Postgres::start();
    let yaml = format!(
        "{TRAFFIC}usage: {{ store: postgres, url: \"{}\" }}\n",
        pg.url
    );
    let fleet = instance::fleet(&yaml, 3, &[]).await;
    let (team, other) = (reqwest::Client::new(), reqwest::Client::new());

    // Request i: instance i % 3, then every combination of client, stream
    // and route on each instance (12 | 300: 25 of each per instance).
    let one = |i: usize| {
        let instance = i % 3;
        let (client, key, http) = if (i / 3).is_multiple_of(2) {
            ("team", "client-secret", &team)
        } else {
            ("other", "secret", &other)
        };
        let stream = (i / 6) % 2 == 1;
        let route = if (i / 12).is_multiple_of(2) {
            "chat"
        } else {
            "cheap"
        };
        let text = format!("request {i}:{}", " and more".repeat(i % 7));
        let mut body = json!({"model": route, "stream": stream, "messages": common::user(&text)});
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        let send = http
            .post(fleet[instance].url("/v1/chat/completions"))
            .bearer_auth(key)
            .json(&body)
            .send();
        async move {
            let r = send.await.unwrap_or_else(|e| panic!("request {i}: {e}"));
            let status = r.status();
            let request_id = r.headers()["x-request-id"].to_str().unwrap().to_owned();
            let cost_header = (!stream).then(|| common::header_f64(&r, "x-switchyard-cost-usd"));
            let text = r.text().await.unwrap();
            assert_eq!(
                status, 200,
                "request {i} ({client}, {route}, stream {stream}): {text}"
            );
            let (input_tokens, output_tokens, cached_input_tokens) = usage_of(&text, stream);
            assert!(input_tokens > 0 && output_tokens > 0, "request {i}: {text}");
            Sent {
                instance,
                client,
                route,
                stream,
                request_id,
                input_tokens,
                output_tokens,
                cached_input_tokens,
                cost_header,
            }
        }
    };
    let sent: Vec<Sent> = tokio::time::timeout(
        Duration::from_secs(20),
        futures_util::stream::iter((0..N).map(one))
            .buffer_unordered(IN_FLIGHT)
            .collect(),
    )
    .await
    .expect("300 requests answered within 20 s");
    let ids: HashSet<&str> = sent.iter().map(|s| s.request_id.as_str()).collect();
    assert_eq!(ids.len(), N, "every answer has its own x-request-id");

    // Flushed: each instance counts a row written (or dropped) per request
    // it served; the counter moves only once the batch is committed.
    for (n, gw) in fleet.iter().enumerate() {
        let served = sent.iter().filter(|s| s.instance == n).count() as f64;
        let counted = common::poll_within(common::PATIENCE, || async {
            let m = gw.metrics().await;
            let ok = metric(&m, "switchyard_usage_store_writes_total{result=\"ok\"}");
            let dropped = metric(
                &m,
                "switchyard_usage_store_writes_total{result=\"dropped\"}",
            );
            (ok + dropped >= served).then_some(m)
        });
        // Not all counted in time: the asserts below say what is missing.
        let m = match counted.await {
            Some(m) => m,
            None => gw.metrics().await,
        };
        assert_eq!(
            metric(
                &m,
                "switchyard_usage_store_writes_total{result=\"dropped\"}"
            ),
            0.0,
            "{} dropped rows\n{}",
            gw.name,
            gw.output_tails()
        );
        assert_eq!(
            metric(&m, "switchyard_usage_store_writes_total{result=\"ok\"}"),
            served,
            "{} wrote a row per request it served, no more\n{}",
            gw.name,
            gw.output_tails()
        );
        assert!(
            !gw.stdout().contains("rows dropped"),
            "{} logged a usage write error\n{}",
            gw.name,
            gw.output_tails()
        );
    }

    // A stream's cost is in the decision log of the instance that served it.
    let mut logged: HashMap<String, f64> = HashMap::new();
    for (n, gw) in fleet.iter().enumerate() {
        let want: HashSet<&str> = sent
            .iter()
            .filter(|s| s.instance == n)
            .map(|s| s.request_id.as_str())
            .collect();
        let lines = common::eventually_within(
            Duration::from_secs(5),
            || async {
                let lines = gw.decisions();
                (lines.len() >= want.len()).then_some(lines)
            },
            &format!("{}: a decision line per request", gw.name),
        )
        .await;
        assert_eq!(
            lines.len(),
            want.len(),
            "{}: a decision line per request",
            gw.name
        );
        for d in lines {
            let id = d["request_id"].as_str().unwrap().to_owned();
            assert!(
                want.contains(id.as_str()),
                "{}: {id} was not sent there",
                gw.name
            );
            logged.insert(id, d["cost_usd"].as_f64().unwrap());
        }
    }
    let cost_of = |s: &Sent| s.cost_header.unwrap_or_else(|| logged[&s.request_id]);

    // The rows, straight from PostgreSQL: one per request id, the request's own.
    let (db, conn) = tokio_postgres::connect(&pg.url, tokio_postgres::NoTls)
        .await
        .expect("the test connects to PostgreSQL");
    tokio::spawn(conn);
    let stored_rows = db
        .query(
            "SELECT request_id, client, route, stream, status, input_tokens, output_tokens, \
             cached_input_tokens, cost_usd FROM usage_requests",
            &[],
        )
        .await
        .unwrap();
    let mut by_id: HashMap<String, Vec<tokio_postgres::Row>> = HashMap::new();
    for r in stored_rows {
        by_id.entry(r.get::<_, String>(0)).or_default().push(r);
    }
    let twice: Vec<&String> = by_id
        .iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(k, _)| k)
        .collect();
    assert!(
        twice.is_empty(),
        "request ids with more than one row: {twice:?}"
    );
    let stored: HashSet<&str> = by_id.keys().map(String::as_str).collect();
    let missing: Vec<&&str> = ids.difference(&stored).collect();
    let foreign: Vec<&&str> = stored.difference(&ids).collect();
    assert!(missing.is_empty(), "requests without a row: {missing:?}");
    assert!(foreign.is_empty(), "rows of no request sent: {foreign:?}");
    for s in &sent {
        let r = &by_id[&s.request_id][0];
        let id = &s.request_id;
        assert_eq!(
            r.get::<_, Option<String>>(1).as_deref(),
            Some(s.client),
            "{id}"
        );
        assert_eq!(
            r.get::<_, Option<String>>(2).as_deref(),
            Some(s.route),
            "{id}"
        );
        assert_eq!(r.get::<_, i64>(3), i64::from(s.stream), "{id}");
        assert_eq!(r.get::<_, i64>(4), 200, "{id}");
        assert_eq!(r.get::<_, i64>(5), s.input_tokens, "{id}");
        assert_eq!(r.get::<_, i64>(6), s.output_tokens, "{id}");
        assert_eq!(r.get::<_, i64>(7), s.cached_input_tokens, "{id}");
        let cost = r.get::<_, f64>(8);
        assert!(
            (cost - cost_of(s)).abs() < 1e-12,
            "{id}: row {cost}, answer {}",
            cost_of(s)
        );
    }

    // `/admin/usage`: the same answer from every instance, the answers' sums.
    for by in ["client", "route", "deployment"] {
        let q = format!("/admin/usage?group_by={by}");
        let answers: Vec<Value> =
            futures_util::future::join_all(fleet.iter().map(|gw| gw.admin_json(&q))).await;
        for (gw, a) in fleet.iter().zip(&answers).skip(1) {
            assert_eq!(
                a["rows"], answers[0]["rows"],
                "{by}: {} vs {}",
                gw.name, fleet[0].name
            );
        }
        if by != "client" {
            continue;
        }
        let rows = rows(&answers[0]);
        assert_eq!(rows.len(), 2, "{rows:#?}");
        for client in ["team", "other"] {
            let mine: Vec<&Sent> = sent.iter().filter(|s| s.client == client).collect();
            let row = rows
                .iter()
                .find(|r| r["key"] == client)
                .unwrap_or_else(|| panic!("no {client} row: {rows:#?}"));
            let sum = |f: fn(&Sent) -> i64| mine.iter().map(|s| f(s)).sum::<i64>();
            assert_eq!(row["requests"], mine.len(), "{row}");
            assert_eq!(row["errors"], 0, "{row}");
            assert_eq!(row["cache_hits"], 0, "{row}");
            assert_eq!(row["input_tokens"], sum(|s| s.input_tokens), "{row}");
            assert_eq!(row["output_tokens"], sum(|s| s.output_tokens), "{row}");
            assert_eq!(
                row["cached_input_tokens"],
                sum(|s| s.cached_input_tokens),
                "{row}"
            );
            let cost: f64 = mine.iter().map(|s| cost_of(s)).sum();
            let got = row["cost_usd"].as_f64().unwrap();
            assert!(
                cost > 0.0 && (got - cost).abs() < 1e-9,
                "{client}: {got} vs {cost}"
            );
        }
    }
}
