//! The cost ledger: one usage row per request, `/admin/usage` over them,
//! `/admin/clients`, the keys API, the admin key, `switchyard usage`.

mod common;

use std::sync::Arc;

use serde_json::{json, Value};
use switchyard_mock::Behavior;

const TWO_ROUTES: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
  an: { protocol: anthropic, base_url: "{mock}" }
models:
  - { id: oa/m, provider: oa, model: gpt-m, capabilities: [streaming], pricing: { input: 3, output: 15 } }
  - { id: an/c, provider: an, model: claude-c, capabilities: [streaming], pricing: { input: 1, output: 5 } }
routes:
  chat: { targets: [oa/m] }
  cheap: { targets: [an/c] }
"#;

fn row<'a>(u: &'a Value, key: &str) -> &'a Value {
    u["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == key || (key.is_empty() && r["key"].is_null()))
        .unwrap_or_else(|| panic!("no row {key}: {u}"))
}

#[tokio::test]
async fn every_request_is_one_row_and_usage_adds_them_up() {
    let h = common::start(TWO_ROUTES).await;
    let http = reqwest::Client::new();
    let mut chat_cost = 0.0;
    for _ in 0..3 {
        let r = http
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": "chat", "messages": common::user("hello")}))
            .send()
            .await
            .unwrap();
        chat_cost += common::header_f64(&r, "x-switchyard-cost-usd");
    }
    let r = http
        .post(h.url("/v1/chat/completions"))
        .json(&json!({"model": "cheap", "messages": common::user("hello")}))
        .send()
        .await
        .unwrap();
    let cheap_cost = common::header_f64(&r, "x-switchyard-cost-usd");
    // A streamed one: its cost is in the store only.
    let body = http
        .post(h.url("/v1/chat/completions"))
        .json(&json!({"model": "cheap", "stream": true, "messages": common::user("hello")}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains("[DONE]"));
    // An upstream failure is a row too, counted as an error.
    h.mock
        .script(vec![Behavior::fixture("openai/error_400_invalid_request")]);
    let r = http
        .post(h.url("/v1/chat/completions"))
        .json(&json!({"model": "chat", "messages": common::user("hello")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let _ = h.decision(5).await;

    let by_route = h.usage("group_by=route").await;
    assert_eq!(by_route["group_by"], "route");
    let chat = row(&by_route, "chat");
    assert_eq!(
        (chat["requests"].as_i64(), chat["errors"].as_i64()),
        (Some(4), Some(1))
    );
    assert!(
        (chat["cost_usd"].as_f64().unwrap() - chat_cost).abs() < 1e-9,
        "{chat}"
    );
    let cheap = row(&by_route, "cheap");
    assert_eq!(cheap["requests"], 2);
    // Streamed or not, the same answer costs the same.
    assert!(
        (cheap["cost_usd"].as_f64().unwrap() - 2.0 * cheap_cost).abs() < 1e-9,
        "{cheap} vs 2 × {cheap_cost}"
    );
    assert!(cheap["input_tokens"].as_i64().unwrap() > 0);
    assert!(cheap["output_tokens"].as_i64().unwrap() > 0);
    // Highest cost first.
    assert_eq!(by_route["rows"][0]["key"], "chat");

    let by_model = h.usage("group_by=model").await;
    assert_eq!(row(&by_model, "claude-c")["requests"], 2);
    // The failed request was served by no model; its deployment is the one
    // that failed.
    assert_eq!(row(&by_model, "gpt-m")["requests"], 3);
    assert_eq!(row(&by_model, "")["errors"], 1);
    let by_dep = h.usage("group_by=deployment&since=1h").await;
    assert_eq!(row(&by_dep, "an/c")["requests"], 2);
    assert_eq!(row(&by_dep, "oa/m")["requests"], 4);
    // An open gateway: one group without a client.
    let by_client = h.usage("").await;
    assert_eq!(by_client["group_by"], "client");
    assert_eq!(by_client["rows"][0]["key"], Value::Null);
    assert_eq!(by_client["rows"][0]["requests"], 6);
    // Ranges: a month back reads rollups of whole days plus today's rows.
    let month = h.usage("group_by=route&since=30d").await;
    assert_eq!(row(&month, "chat")["requests"], 4);
    let past = h.usage("since=2020-01-01&until=2020-01-02T00:00:00Z").await;
    assert_eq!(past["rows"], json!([]));
    assert_eq!(past["since"], "2020-01-01T00:00:00Z");
    for bad in ["group_by=team", "since=yesterday", "since=1h&until=2h"] {
        let r = reqwest::get(h.admin(&format!("/admin/usage?{bad}")))
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{bad}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "invalid_request");
    }
    // The metrics count what was written.
    let m = h.metrics().await;
    assert!(
        m.contains("switchyard_usage_store_writes_total{result=\"ok\"} 6"),
        "{m}"
    );
}

const KEYED: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: oa/m, provider: oa, model: m, pricing: { input: 1, output: 1 } }
routes:
  chat: { targets: [oa/m] }
clients:
  - { id: team, key_env: CLIENT_KEY, routes: [chat], rpm: 100, budget: { usd: 10, per: month } }
"#;

async fn chat_with(http: &reqwest::Client, h: &common::Harness, key: &str) -> reqwest::Response {
    http.post(h.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": "chat", "messages": common::user("hi")}))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn keys_issued_at_run_time_work_at_once_and_are_revoked_at_once() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let admin_key = "  admin_key_env: ADMIN_KEY";
    let h = common::start_in(KEYED, admin_key, dir.clone()).await;
    let http = reqwest::Client::new();
    let admin =
        |m: reqwest::Method, path: &str| http.request(m, h.admin(path)).bearer_auth("admin-secret");
    // The admin API needs its key; health checks do not.
    let r = reqwest::get(h.admin("/admin/clients")).await.unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .get(h.admin("/admin/state"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        reqwest::get(h.admin("/healthz")).await.unwrap().status(),
        200
    );
    assert_eq!(
        reqwest::get(h.admin("/readyz")).await.unwrap().status(),
        200
    );

    let r = admin(reqwest::Method::POST, "/admin/clients/team/keys")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let issued: Value = r.json().await.unwrap();
    let (id, key) = (
        issued["id"].as_str().unwrap(),
        issued["key"].as_str().unwrap(),
    );
    assert!(key.starts_with("sy-") && id.starts_with("key-"), "{issued}");

    // Works at once, as that client (its routes, limits and budget).
    let r = chat_with(&http, &h, key).await;
    assert_eq!(r.status(), 200);
    assert!(r
        .headers()
        .contains_key("x-switchyard-budget-remaining-usd"));
    assert_eq!(r.headers()["x-ratelimit-limit-requests"], "100");
    let d = h.decision(0).await;
    assert_eq!(d["client"], "team");
    assert!(!d.to_string().contains(key), "the key is never logged");
    assert_eq!(chat_with(&http, &h, "client-secret").await.status(), 200);
    h.flush_usage().await;

    let clients: Value = admin(reqwest::Method::GET, "/admin/clients")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        !clients.to_string().contains(key),
        "shown once, never again"
    );
    let team = &clients["clients"][0];
    assert_eq!(team["id"], "team");
    assert_eq!(team["routes"], json!(["chat"]));
    assert_eq!(team["rpm"], 100);
    assert_eq!(team["budget"]["per"], "month");
    assert_eq!(team["budget"]["usd"], 10.0);
    assert!(team["budget"]["spent_usd"].as_f64().unwrap() > 0.0);
    let keys = team["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{team}");
    assert!(keys[0]["id"].as_str().unwrap().starts_with("cfg-"));
    assert_eq!(keys[1]["id"], id);
    assert!(keys[1]["created_at"].as_str().is_some());
    for k in keys {
        assert!(k["last_used_at"].as_str().is_some(), "{k}");
    }
    let by_client: Value = admin(reqwest::Method::GET, "/admin/usage?group_by=client")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(row(&by_client, "team")["requests"], 2);

    // An issued key survives a restart (it lives in the usage store).
    h.gw.shutdown().await;
    let h = common::start_in(KEYED, admin_key, dir).await;
    let admin =
        |m: reqwest::Method, path: &str| http.request(m, h.admin(path)).bearer_auth("admin-secret");
    assert_eq!(chat_with(&http, &h, key).await.status(), 200);

    let revoke = |key_id: &str| {
        admin(
            reqwest::Method::DELETE,
            &format!("/admin/clients/team/keys/{key_id}"),
        )
        .send()
    };
    // Revoked: refused at once.
    assert_eq!(revoke(id).await.unwrap().status(), 200);
    let r = chat_with(&http, &h, key).await;
    assert_eq!(r.status(), 401);
    let e: Value = r.json().await.unwrap();
    assert_eq!(e["error"]["code"], "auth_failed");
    assert_eq!(chat_with(&http, &h, "client-secret").await.status(), 200);
    assert_eq!(revoke(id).await.unwrap().status(), 404, "revoked once");
    // Neither for clients the config lacks, nor for the config's own key.
    let r = admin(reqwest::Method::POST, "/admin/clients/nobody/keys")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let cfg_key = keys[0]["id"].as_str().unwrap();
    assert_eq!(revoke(cfg_key).await.unwrap().status(), 409);
}

#[tokio::test]
async fn without_a_store_what_needs_one_says_so() {
    let h = common::start(&format!("{KEYED}usage: {{ store: off }}\n")).await;
    assert!(h.gw.app.usage.is_none());
    let http = reqwest::Client::new();
    for (method, path) in [
        (reqwest::Method::POST, "/admin/clients/team/keys"),
        (reqwest::Method::DELETE, "/admin/clients/team/keys/key-1"),
        (reqwest::Method::GET, "/admin/usage"),
    ] {
        let r = http.request(method, h.admin(path)).send().await.unwrap();
        assert_eq!(r.status(), 409, "{path}");
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["error"]["code"], "usage_store_off");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .contains("usage.store"),
            "{e}"
        );
    }
    // Budgets still hold in memory.
    let r = chat_with(&http, &h, "client-secret").await;
    assert_eq!(r.status(), 200);
    assert!(r
        .headers()
        .contains_key("x-switchyard-budget-remaining-usd"));
}

#[tokio::test]
async fn the_usage_command_prints_what_the_admin_api_answers() {
    let h = common::start(TWO_ROUTES).await;
    let http = reqwest::Client::new();
    for model in ["chat", "cheap", "cheap"] {
        let r = http
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": model, "messages": common::user("hello")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let api = h.usage("group_by=route").await;
    let db = h.dir.path().join("usage.db");
    let config = h.dir.path().join("gw.yaml");
    std::fs::write(&config, format!("usage: {{ path: {} }}\n", db.display())).unwrap();
    let run = |format: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args([
                "usage",
                "--group-by",
                "route",
                "--since",
                "1h",
                "--format",
                format,
                "--config",
            ])
            .arg(&config)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let json_out: Value = serde_json::from_str(&run("json")).unwrap();
    assert_eq!(json_out["rows"], api["rows"]);
    let csv = run("csv");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "route,requests,errors,cache_hits,input_tokens,output_tokens,cached_input_tokens,cost_usd"
    );
    assert!(lines.iter().any(|l| l.starts_with("cheap,2,0,0,")), "{csv}");
    let table = run("table");
    assert!(
        table.lines().nth(1).unwrap().starts_with("ROUTE"),
        "{table}"
    );
    let total = table.lines().last().unwrap();
    assert!(
        total.starts_with("TOTAL") && total.contains(" 3 "),
        "{table}"
    );
    // Without a config: the demo's store, `switchyard.db` where it runs.
    let here = tempfile::tempdir().unwrap();
    let bare = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .args(["usage", "--format", "json", "--group-by", "route"])
            .current_dir(here.path())
            .output()
            .unwrap()
    };
    let none = bare();
    assert!(!none.status.success());
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("no usage store at switchyard.db"),
        "{none:?}"
    );
    // The file and its write-ahead log (rows not yet checkpointed live there).
    std::fs::copy(&db, here.path().join("switchyard.db")).unwrap();
    let wal = h.dir.path().join("usage.db-wal");
    if wal.exists() {
        std::fs::copy(&wal, here.path().join("switchyard.db-wal")).unwrap();
    }
    let out = bare();
    assert!(out.status.success(), "{out:?}");
    let demo: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(demo["rows"], api["rows"]);
}

#[tokio::test]
async fn stored_responses_survive_a_restart() {
    let yaml = r#"
providers:
  an: { protocol: anthropic, base_url: "{mock}" }
  oa: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: an/claude, provider: an, model: claude-sonnet-4-5, max_output_tokens: 2048 }
  - { id: oa/gpt, provider: oa, model: gpt-4o-mini }
"#;
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let h = common::start_in(yaml, "", dir.clone()).await;
    let http = reqwest::Client::new();
    let create =
        |h: &common::Harness, body: Value| http.post(h.url("/v1/responses")).json(&body).send();
    let first: Value = create(
        &h,
        json!({"model": "an/claude", "input": "My name is Ada."}),
    )
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let id = first["id"].as_str().unwrap().to_owned();
    h.gw.shutdown().await;

    let h = common::start_in(yaml, "", dir.clone()).await;
    let got: Value = http
        .get(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(got, first, "read back from the store as the client got it");
    let r = create(
        &h,
        json!({"model": "oa/gpt", "previous_response_id": id, "input": "What is my name?"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let sent = h.mock.requests().last().unwrap().json.clone().unwrap();
    let messages = sent["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "the stored history went along: {sent}");
    assert_eq!(messages[0]["content"], "My name is Ada.");
    assert_eq!(
        messages[1]["content"],
        "Hello from the mock anthropic provider."
    );
    // Deleted: gone at once, and after the next restart too.
    let del = http
        .delete(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(del.status(), 200);
    let again = http
        .get(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 404);
    h.gw.shutdown().await;
    let h = common::start_in(yaml, "", dir).await;
    let gone = http
        .get(h.url(&format!("/v1/responses/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 404);
}

/// A request's task (scene) is in its row: the header's, else none.
#[tokio::test]
async fn a_rows_task_is_the_requests_task() {
    let h = common::start(TWO_ROUTES).await;
    let http = reqwest::Client::new();
    for task in [Some("code"), None] {
        let mut req = http
            .post(h.url("/v1/chat/completions"))
            .json(&json!({"model": "chat", "messages": common::user("hello")}));
        if let Some(t) = task {
            req = req.header("x-switchyard-task", t);
        }
        assert_eq!(req.send().await.unwrap().status(), 200);
    }
    h.flush_usage().await;
    let db = rusqlite::Connection::open(h.dir.path().join("usage.db")).unwrap();
    let mut q = db
        .prepare("SELECT task FROM usage_requests ORDER BY ts, rowid")
        .unwrap();
    let tasks: Vec<Option<String>> = q
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(tasks, [Some("code".to_owned()), None]);
}
