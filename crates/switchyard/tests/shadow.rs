//! Shadow traffic (contract §11), over real HTTP with two mock providers:
//! the primary's and the shadow target's. A share of a route's requests is
//! also sent to the shadow target after the answer; `/admin/shadow` compares
//! the two; the shadow's cost is in the ledger as `_shadow`, never in the
//! client's spend; the client's answer never waits for it.

mod common;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockServer};

/// Route `chat` shadows every request to `side/s` (three times the
/// primary's prices); route `plain` has no shadow. `{extra}` is more
/// top-level config.
const TWO_MOCKS: &str = r#"
providers:
  main: { protocol: openai, base_url: "{mock}/v1" }
  side: { protocol: openai, base_url: "{shadow}/v1" }
models:
  - { id: main/m, provider: main, model: gpt-m, capabilities: [tools, streaming, json_schema], pricing: { input: 1, output: 2 } }
  - { id: side/s, provider: side, model: gpt-s, capabilities: [tools, streaming, json_schema], pricing: { input: 3, output: 6 } }
routes:
  chat: { targets: [main/m], shadow: { target: side/s, share: 1.0 } }
  extract: { targets: [main/m], shadow: { target: side/s, share: 1.0 } }
  plain: { targets: [main/m] }
  guarded: { targets: [main/m], contract: { on_violation: repair }, shadow: { target: side/s, share: 1.0 } }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 100, per: day } }
"#;

struct Two {
    h: common::Harness,
    shadow: MockServer,
}

async fn start(extra: &str) -> Two {
    let shadow = MockServer::start("127.0.0.1:0").await.unwrap();
    let yaml = format!("{TWO_MOCKS}{extra}").replace("{shadow}", &shadow.base_url());
    Two {
        h: common::start(&yaml).await,
        shadow,
    }
}

impl Two {
    async fn send(&self, body: Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(self.h.url("/v1/chat/completions"))
            .bearer_auth("client-secret")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// `/admin/shadow`'s row for `route`.
    async fn row(&self, route: &str) -> Value {
        let all = self.h.admin_json("/admin/shadow").await;
        all["shadows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["route"] == route)
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// Wait until the route's shadows were all sent (or skipped).
    async fn shadowed(&self, route: &str, n: u64) -> Value {
        common::eventually_some(
            || async {
                let r = self.row(route).await;
                (r["requests"].as_u64().unwrap_or(0) + r["skipped"].as_u64().unwrap_or(0) >= n)
                    .then_some(r)
            },
            &format!("{n} shadows of route {route}"),
        )
        .await
    }
}

/// A whole OpenAI answer, as the mock serves it verbatim.
fn answer(text: Option<&str>, tools: &[(&str, &str)], finish: &str, usage: (u64, u64)) -> String {
    let calls: Vec<Value> = tools
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"id": format!("call_{i}"), "type": "function",
                   "function": {"name": name, "arguments": args}})
        })
        .collect();
    let mut message = json!({"role": "assistant", "content": text});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 1, "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": usage.0, "completion_tokens": usage.1,
                  "total_tokens": usage.0 + usage.1}
    })
    .to_string()
}

fn scripted(body: String) -> Behavior {
    Behavior::status(200, body)
}

fn tools() -> Value {
    json!([
        {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
        {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {}}}}
    ])
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The scripted run: every request shadowed; the figures are what the
/// script implies — 3 of 4 finish reasons and 2 of 4 tool-call lists agree,
/// 2 of 4 schema answers are valid, the cost ratio is the price ratio — and
/// the ledger has a `_shadow` row per shadow while the client's budget and
/// spend count only the primary's answers.
#[tokio::test]
async fn the_figures_follow_the_script_and_the_ledger_keeps_shadows_apart() {
    let t = start("").await;
    let primary_tools = answer(None, &[("lookup", r#"{"q":"a"}"#)], "tool_calls", (10, 20));
    t.h.mock.set_default(scripted(primary_tools.clone()));
    // Same usage on both sides: the cost ratio is the prices' (3).
    let shadow_answers = [
        (None, vec![("lookup", r#"{"q":"a"}"#)], "tool_calls"),
        (None, vec![("search", "{}")], "tool_calls"),
        (Some("I would look that up"), vec![], "stop"),
        (None, vec![("lookup", r#"{"q":"a"}"#)], "tool_calls"),
    ];
    t.shadow.script(
        shadow_answers
            .iter()
            .map(|(text, calls, finish)| scripted(answer(*text, calls, finish, (10, 20))))
            .collect(),
    );
    let mut client_cost = 0.0;
    for _ in 0..4 {
        let r = t
            .send(json!({"model": "chat", "messages": common::user("find a"), "tools": tools()}))
            .await;
        assert_eq!(r.status(), 200);
        client_cost += common::header_f64(&r, "x-switchyard-cost-usd");
    }
    let row = t.shadowed("chat", 4).await;
    assert_eq!(row["requests"], 4, "{row}");
    assert_eq!(row["compared"], 4, "{row}");
    assert_eq!(
        (row["errors"].as_u64(), row["dropped"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(row["target"], "side/s");
    assert!(close(f(&row["finish_reason_agreement"]), 0.75), "{row}");
    assert!(close(f(&row["tool_call_agreement"]), 0.5), "{row}");
    assert!(close(f(&row["cost_ratio"]), 3.0), "{row}");
    assert!(close(f(&row["primary_cost_usd"]), client_cost), "{row}");
    assert_eq!(
        row["schema_validity"],
        Value::Null,
        "no request asked for a schema"
    );
    // The text similarity: the mean over the pairs of the documented score
    // (an answer's text, then each call's name and arguments).
    let text = |t: Option<&str>, calls: &[(&str, &str)]| {
        let mut s = t.unwrap_or_default().to_owned();
        for (n, a) in calls {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(&format!("{n} {a}"));
        }
        s
    };
    let primary_text = text(None, &[("lookup", r#"{"q":"a"}"#)]);
    let want: f64 = shadow_answers
        .iter()
        .map(|(t, c, _)| switchyard::shadow::compare::similarity(&primary_text, &text(*t, c)))
        .sum::<f64>()
        / 4.0;
    assert!(close(f(&row["text_similarity"]), want), "{row} vs {want}");
    assert!(want > 0.5 && want < 1.0, "{want}");
    // The shadow got the request itself, not streamed, for its own model.
    let sent = t.shadow.requests();
    assert_eq!(sent.len(), 4);
    for r in &sent {
        let j = r.json.as_ref().unwrap();
        assert_eq!(j["model"], "gpt-s", "{j}");
        assert_ne!(j["stream"], true, "{j}");
        assert_eq!(j["messages"], common::user("find a"), "{j}");
        assert_eq!(j["tools"].as_array().map(Vec::len), Some(2), "{j}");
    }

    // Schema validity: the route asks for JSON with a schema; 2 of 4
    // shadow answers satisfy it.
    let schema = json!({"type": "json_schema", "json_schema": {"name": "thing", "schema": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
    t.h.mock.set_default(scripted(answer(
        Some(r#"{"name":"alpha"}"#),
        &[],
        "stop",
        (10, 20),
    )));
    t.shadow.script(
        [
            r#"{"name":"alpha"}"#,
            "not json at all",
            r#"{"name":5}"#,
            r#"{"name":"beta"}"#,
        ]
        .iter()
        .map(|text| scripted(answer(Some(text), &[], "stop", (10, 20))))
        .collect(),
    );
    for _ in 0..4 {
        let r = t
            .send(json!({"model": "extract", "messages": common::user("name it"), "response_format": schema}))
            .await;
        assert_eq!(r.status(), 200);
        client_cost += common::header_f64(&r, "x-switchyard-cost-usd");
    }
    let row = t.shadowed("extract", 4).await;
    assert_eq!(row["schema_checked"], 4, "{row}");
    assert!(close(f(&row["schema_validity"]), 0.5), "{row}");
    assert!(close(f(&row["finish_reason_agreement"]), 1.0), "{row}");

    // The ledger: 8 shadow rows, client `_shadow`, three times the cost.
    t.h.flush_usage().await;
    let db = rusqlite::Connection::open(t.h.dir.path().join("usage.db")).unwrap();
    let (rows, cost): (i64, f64) = db
        .query_row(
            "SELECT COUNT(*), SUM(cost_usd) FROM usage_requests WHERE shadow = 1 AND client = '_shadow' AND deployment = 'side/s'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(rows, 8);
    assert!(
        close(cost, 3.0 * client_cost),
        "{cost} vs 3 × {client_cost}"
    );
    let (primary_rows, primary_shadow): (i64, i64) = db
        .query_row(
            "SELECT COUNT(*), SUM(shadow) FROM usage_requests WHERE client = 'team'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((primary_rows, primary_shadow), (8, 0));
    // The client's budget and spend are the primary's answers only.
    let clients = t.h.admin_json("/admin/clients").await;
    let spent = f(&clients["clients"][0]["budget"]["spent_usd"]);
    assert!(close(spent, client_cost), "{clients}");
    let by_client = t.h.usage("group_by=client").await;
    let of = |key: &str| {
        by_client["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["key"] == key)
            .cloned()
            .unwrap_or_else(|| panic!("no {key} row: {by_client}"))
    };
    assert!(
        close(f(&of("team")["cost_usd"]), client_cost),
        "{by_client}"
    );
    assert_eq!(of("team")["requests"], 8);
    assert_eq!(of("_shadow")["requests"], 8);
    let m = t.h.metrics().await;
    assert!(
        m.contains(
            r#"switchyard_shadow_requests_total{route="chat",target="side/s",result="ok"} 4"#
        ),
        "{m}"
    );
}

/// The client's answer never waits for its shadow: with the shadow target
/// taking 2 s, every client request (whole or streamed, at the OpenAI and
/// the Anthropic door) is back well before, and each is shadowed and
/// compared after it.
#[tokio::test]
async fn the_primary_never_waits_for_its_shadow() {
    const SLOW: Duration = Duration::from_secs(2);
    let t = start("").await;
    t.shadow
        .set_default(Behavior::default().latency(SLOW.as_millis() as u64));
    let mut took = Vec::new();
    // OpenAI's door, then Anthropic's: whole, streamed, whole, streamed.
    for (anthropic, stream) in [(false, false), (false, true), (true, false), (true, true)] {
        let started = Instant::now();
        let r = if anthropic {
            reqwest::Client::new()
                .post(t.h.url("/v1/messages"))
                .bearer_auth("client-secret")
                .header("anthropic-version", "2023-06-01")
                .json(&json!({"model": "chat", "max_tokens": 64, "stream": stream, "messages": common::user("hello")}))
                .send()
                .await
                .unwrap()
        } else {
            t.send(json!({"model": "chat", "stream": stream, "messages": common::user("hello")}))
                .await
        };
        assert_eq!(r.status(), 200);
        let body = r.text().await.unwrap();
        took.push(started.elapsed());
        let end = if anthropic { "message_stop" } else { "[DONE]" };
        assert_eq!(body.contains(end), stream, "{body}");
    }
    for (i, d) in took.iter().enumerate() {
        assert!(
            *d < SLOW,
            "request {i} took {d:?}, not under the shadow's {SLOW:?}"
        );
    }
    let row = t.shadowed("chat", 4).await;
    assert_eq!(row["compared"], 4, "{row}");
    assert!(f(&row["shadow_p50_ms"]) >= SLOW.as_millis() as f64, "{row}");
    assert!(f(&row["primary_p95_ms"]) < SLOW.as_millis() as f64, "{row}");
    assert!(close(f(&row["finish_reason_agreement"]), 1.0), "{row}");
    assert!(
        close(f(&row["text_similarity"]), 1.0),
        "the same mock text: {row}"
    );
    assert!(close(f(&row["cost_ratio"]), 3.0), "{row}");
}

/// A stream is shadowed after its end, never while it runs; a client that
/// goes away mid-stream gets no shadow (its answer never ended).
#[tokio::test]
async fn a_stream_is_shadowed_after_its_end_and_not_when_cut() {
    let t = start("").await;
    t.h.mock
        .set_default(Behavior::default().chunks(6).chunk_delay(150));
    let r = t
        .send(json!({"model": "chat", "stream": true, "messages": common::user("hello")}))
        .await;
    assert_eq!(r.status(), 200);
    let mut body = r.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    assert!(!first.is_empty());
    // Mid-stream: nothing went to the shadow target.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(t.shadow.request_count(), 0);
    while let Some(chunk) = body.next().await {
        chunk.unwrap();
    }
    t.shadowed("chat", 1).await;
    assert_eq!(t.shadow.request_count(), 1);

    // Cut: read one event, then hang up.
    let r = reqwest::Client::new()
        .post(t.h.url("/v1/chat/completions"))
        .bearer_auth("client-secret")
        .header("x-request-id", "cut-me")
        .json(&json!({"model": "chat", "stream": true, "messages": common::user("hello")}))
        .send()
        .await
        .unwrap();
    let mut body = r.bytes_stream();
    body.next().await.unwrap().unwrap();
    drop(body);
    let line = common::eventually_some(
        || async {
            t.h.decisions()
                .into_iter()
                .find(|d| d["request_id"] == "cut-me")
        },
        "the cut stream's decision line",
    )
    .await;
    assert_eq!(line["status"], 499, "{line}");
    // The request is over (its line is written): it queued nothing.
    let all = t.h.admin_json("/admin/shadow").await;
    assert_eq!(all["enqueued"], 1, "{all}");
    assert_eq!(t.shadow.request_count(), 1);
}

/// A stream held under a response contract (repaired before it went out)
/// is shadowed with the client's own request, and compared with the answer
/// the client got.
#[tokio::test]
async fn a_stream_held_under_a_contract_is_shadowed_with_the_clients_request() {
    let t = start("").await;
    let (good, bad) = (r#"{"name":"alpha"}"#, r#"{"name":5}"#);
    t.h.mock.script(
        [bad, good]
            .iter()
            .map(|text| scripted(answer(Some(text), &[], "stop", (10, 20))))
            .collect(),
    );
    t.shadow
        .script(vec![scripted(answer(Some(good), &[], "stop", (10, 20)))]);
    let schema = json!({"type": "json_schema", "json_schema": {"name": "thing", "schema": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}});
    let r = t
        .send(json!({"model": "guarded", "stream": true, "messages": common::user("name it"), "response_format": schema}))
        .await;
    assert_eq!(r.status(), 200);
    assert_eq!(common::sse_text(&r.text().await.unwrap()), good);
    let row = t.shadowed("guarded", 1).await;
    assert_eq!(row["compared"], 1, "{row}");
    assert!(close(f(&row["schema_validity"]), 1.0), "{row}");
    assert!(
        close(f(&row["text_similarity"]), 1.0),
        "the repaired answer: {row}"
    );
    // The client's request, not the repair's (which appended the error).
    let sent = t.shadow.requests();
    let j = sent[0].json.as_ref().unwrap();
    assert_eq!(j["messages"], common::user("name it"), "{j}");
}

/// A tiny queue and a slow shadow target: what does not fit is dropped and
/// counted, the queue never grows past its bound, the client never waits.
#[tokio::test]
async fn a_full_queue_drops_and_counts() {
    const SLOW: Duration = Duration::from_millis(1500);
    let t = start("shadow: { queue: 2, workers: 1 }\n").await;
    t.shadow
        .set_default(Behavior::default().latency(SLOW.as_millis() as u64));
    let started = Instant::now();
    for i in 0..10 {
        let sent = Instant::now();
        let r = t
            .send(json!({"model": "chat", "messages": common::user("hello")}))
            .await;
        assert_eq!(r.status(), 200);
        let took = sent.elapsed();
        assert!(took < SLOW, "request {i} took {took:?}");
        let all = t.h.admin_json("/admin/shadow").await;
        assert!(all["queued"].as_u64().unwrap() <= 2, "{all}");
    }
    let elapsed = started.elapsed();
    let all = t.h.admin_json("/admin/shadow").await;
    assert_eq!(
        (all["queue"].as_u64(), all["workers"].as_u64()),
        (Some(2), Some(1))
    );
    let row = t.row("chat").await;
    let (dropped, enqueued) = (
        row["dropped"].as_u64().unwrap(),
        all["enqueued"].as_u64().unwrap(),
    );
    assert_eq!(dropped + enqueued, 10, "{all}");
    // Queued: one being sent and two waiting, plus one for each shadow the
    // worker finished meanwhile (one per `SLOW`); the rest dropped.
    let room = 3 + (elapsed.as_secs_f64() / SLOW.as_secs_f64()) as u64;
    assert!(enqueued <= room, "{enqueued} queued in {elapsed:?}: {all}");
    assert!(dropped > 0, "{all}");
    let m = t.h.metrics().await;
    assert!(
        m.contains(&format!(
            r#"switchyard_shadow_dropped_total{{route="chat"}} {dropped}"#
        )),
        "{m}"
    );
    // What was queued is sent in the end, one at a time.
    let sent = common::eventually_within(
        SLOW * (enqueued as u32 + 4),
        || async {
            let r = t.row("chat").await;
            (r["requests"].as_u64() == Some(enqueued)).then_some(r)
        },
        "every queued shadow sent",
    )
    .await;
    assert_eq!(sent["dropped"].as_u64(), Some(dropped));
}

/// A route without a shadow never queues one; `share` must be in (0, 1] and
/// the target a known deployment, refused with the file's line.
#[tokio::test]
async fn no_shadow_without_one_and_bad_shadows_are_refused() {
    let t = start("").await;
    for _ in 0..3 {
        let r = t
            .send(json!({"model": "plain", "messages": common::user("hello")}))
            .await;
        assert_eq!(r.status(), 200);
    }
    let all = t.h.admin_json("/admin/shadow").await;
    assert_eq!(all["enqueued"], 0, "{all}");
    assert_eq!(t.row("plain").await, Value::Null);
    assert_eq!(t.row("chat").await["requests"], 0);
    assert_eq!(t.shadow.request_count(), 0);

    let config = |shadow: &str| {
        format!(
            "providers:\n  p: {{ protocol: openai, base_url: \"http://127.0.0.1:9/v1\" }}\n\
             models:\n  - {{ id: p/a, provider: p, model: a }}\n  - {{ id: p/b, provider: p, model: b }}\n\
             routes:\n  chat:\n    targets: [p/a]\n    shadow: {shadow}\n"
        )
    };
    let refused = |shadow: &str| {
        let errs = switchyard::config::load_str(&config(shadow), "gw.yaml", &|_| None)
            .expect_err("refused");
        errs.iter()
            .map(|d| d.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    };
    let e = refused("{ target: p/b, share: 0.0 }");
    assert!(e.starts_with("gw.yaml:9:"), "{e}");
    assert!(e.contains("routes.chat.shadow.share"), "{e}");
    let e = refused("{ target: p/b, share: 1.5 }");
    assert!(e.contains("routes.chat.shadow.share"), "{e}");
    let e = refused("{ target: p/nope, share: 0.5 }");
    assert!(e.starts_with("gw.yaml:9:"), "{e}");
    assert!(e.contains("unknown deployment `p/nope`"), "{e}");
    let e = refused("{ share: 0.5 }");
    assert!(e.contains("missing `target`"), "{e}");
    let e = refused("{ target: p/b, share: 0.5, mirror: true }");
    assert!(e.contains("mirror"), "{e}");
    assert!(switchyard::config::load_str(
        &config("{ target: p/b, share: 0.05 }"),
        "gw.yaml",
        &|_| None
    )
    .is_ok());
}
