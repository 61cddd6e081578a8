//! The PostgreSQL usage store against a real server (started by the test):
//! the same `/admin/usage` answers as SQLite for the same traffic, issued
//! keys kept, and a server stopped mid-run fails no request — the rows it
//! could not take are dropped and counted.

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
    let mut written = false;
    for _ in 0..50 {
        assert_eq!(chat().await.unwrap().status(), 200);
        h.flush_usage().await;
        let m = h.metrics().await;
        if metric(&m, "switchyard_usage_store_writes_total{result=\"ok\"}") > 1.0 {
            written = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(written, "writes resume once PostgreSQL is back");
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
    let mut seen = 0;
    for _ in 0..60 {
        seen = status_on(&b).await.unwrap().status().as_u16();
        if seen == 200 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, 200, "the other instance picks it up from the store");
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
    for _ in 0..60 {
        seen = status_on(&b).await.unwrap().status().as_u16();
        if seen == 401 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(seen, 401, "and on the other instance within the key sync");
}
