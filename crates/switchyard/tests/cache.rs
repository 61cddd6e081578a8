//! The response cache (contract §3): an identical normalized request is
//! answered from memory without calling the upstream — as JSON or replayed
//! as a stream in the client's own dialect —, privately per client unless
//! shared, never from an answer that went wrong, for free.

mod common;

use std::time::Duration;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use switchyard_mock::{Behavior, Fault};

const CACHED: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1" }
  an: { protocol: anthropic, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
  gm: { protocol: gemini, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
models:
  - { id: oa/gpt, provider: oa, model: gpt-4o-mini, capabilities: [streaming, tools], pricing: { input: 1, output: 2 } }
  - { id: an/claude, provider: an, model: claude-sonnet-4-5, capabilities: [streaming, tools], pricing: { input: 3, output: 15 } }
  - { id: gm/gemini, provider: gm, model: gemini-2.5-flash, capabilities: [streaming, tools] }
routes:
  chat: { targets: [oa/gpt] }
cache: { backend: memory, ttl: 5m }
"#;

fn chat(text: &str) -> Value {
    json!({"model": "chat", "temperature": 0, "messages": common::user(text)})
}

async fn send(h: &common::Harness, path: &str, body: &Value, headers: &[(&str, &str)]) -> Reply {
    let mut req = reqwest::Client::new().post(h.url(path)).json(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    Reply::of(req.send().await.unwrap()).await
}

/// What a test reads of an answer.
struct Reply {
    status: u16,
    cache: String,
    deployment: String,
    attempts: String,
    cost: Option<f64>,
    body: String,
}

impl Reply {
    async fn of(r: reqwest::Response) -> Reply {
        let h = |n: &str| {
            r.headers()
                .get(n)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default()
        };
        let (cache, deployment, attempts) = (
            h("x-switchyard-cache"),
            h("x-switchyard-deployment"),
            h("x-switchyard-attempts"),
        );
        let cost = r
            .headers()
            .get("x-switchyard-cost-usd")
            .map(|v| v.to_str().unwrap().parse().unwrap());
        Reply {
            status: r.status().as_u16(),
            cache,
            deployment,
            attempts,
            cost,
            body: r.text().await.unwrap(),
        }
    }

    /// (text, input tokens, output tokens) of the answer, whatever the
    /// door and whether it streamed.
    fn said(&self) -> (String, u64, u64) {
        let mut text = String::new();
        let (mut input, mut output) = (0, 0);
        let docs: Vec<Value> = if self.body.trim_start().starts_with('{') {
            vec![serde_json::from_str(&self.body).unwrap()]
        } else {
            common::sse_data(&self.body)
                .iter()
                .filter_map(|d| serde_json::from_str(d).ok())
                .collect()
        };
        let n = |v: &Value| v.as_u64().unwrap_or(0);
        for v in &docs {
            // OpenAI chat: a whole answer or its chunks.
            if let Some(c) = v["choices"][0]["message"]["content"].as_str() {
                text.push_str(c);
            }
            if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
                text.push_str(c);
            }
            if v["usage"]["prompt_tokens"].is_u64() {
                (input, output) = (
                    n(&v["usage"]["prompt_tokens"]),
                    n(&v["usage"]["completion_tokens"]),
                );
            }
            match v["type"].as_str() {
                // Anthropic.
                Some("message") => {
                    for b in v["content"].as_array().unwrap() {
                        text.push_str(b["text"].as_str().unwrap_or(""));
                    }
                    (input, output) = (
                        n(&v["usage"]["input_tokens"]),
                        n(&v["usage"]["output_tokens"]),
                    );
                }
                Some("message_start") => input = n(&v["message"]["usage"]["input_tokens"]),
                Some("content_block_delta") => {
                    text.push_str(v["delta"]["text"].as_str().unwrap_or(""))
                }
                Some("message_delta") => {
                    // Translated streams learn the prompt's size at the end.
                    if n(&v["usage"]["input_tokens"]) > 0 {
                        input = n(&v["usage"]["input_tokens"]);
                    }
                    output = n(&v["usage"]["output_tokens"]);
                }
                // Responses.
                Some("response.output_text.delta") => text.push_str(v["delta"].as_str().unwrap()),
                Some("response.completed") => {
                    let u = &v["response"]["usage"];
                    (input, output) = (n(&u["input_tokens"]), n(&u["output_tokens"]));
                }
                _ => {}
            }
            if v["object"] == "response" {
                for item in v["output"].as_array().unwrap() {
                    for part in item["content"].as_array().into_iter().flatten() {
                        text.push_str(part["text"].as_str().unwrap_or(""));
                    }
                }
                (input, output) = (
                    n(&v["usage"]["input_tokens"]),
                    n(&v["usage"]["output_tokens"]),
                );
            }
        }
        (text, input, output)
    }
}

#[tokio::test]
async fn a_hit_is_answered_without_the_upstream_and_costs_nothing() {
    let h = common::start(CACHED).await;
    let first = send(&h, "/v1/chat/completions", &chat("Capital of France?"), &[]).await;
    assert_eq!((first.status, first.cache.as_str()), (200, "miss"));
    assert!(first.cost.unwrap() > 0.0);
    let second = send(&h, "/v1/chat/completions", &chat("Capital of France?"), &[]).await;
    assert_eq!(second.status, 200);
    assert_eq!(second.cache, "hit");
    assert_eq!(second.deployment, "oa/gpt");
    assert_eq!(second.attempts, "0");
    assert_eq!(second.cost, Some(0.0));
    assert_eq!(second.said(), first.said());
    assert!(!first.said().0.is_empty());
    assert_eq!(h.mock.request_count(), 1, "the hit called no upstream");

    let (miss, hit) = (h.decision(0).await, h.decision(1).await);
    assert_eq!(
        (miss["cache"].as_str(), hit["cache"].as_str()),
        (Some("miss"), Some("hit"))
    );
    assert_eq!(hit["input_hash"], miss["input_hash"]);
    assert_eq!(hit["attempts"], json!([]));
    assert_eq!(hit["selected"], "oa/gpt");
    assert_eq!(hit["cost_usd"], 0.0);

    let metrics = h.metrics().await;
    for line in [
        "switchyard_cache_requests_total{result=\"hit\"} 1",
        "switchyard_cache_requests_total{result=\"miss\"} 1",
        "switchyard_cache_entries 1",
    ] {
        assert!(metrics.contains(line), "{line} in\n{metrics}");
    }
    // The usage store counts the hit, at no cost.
    let usage = h.usage("group_by=route").await;
    let row = &usage["rows"][0];
    assert_eq!(
        (row["requests"].as_u64(), row["cache_hits"].as_u64()),
        (Some(2), Some(1))
    );
    let logged = miss["cost_usd"].as_f64().unwrap();
    assert!((row["cost_usd"].as_f64().unwrap() - logged).abs() < 1e-12);
}

#[tokio::test]
async fn key_order_whitespace_and_streaming_do_not_change_the_key() {
    let h = common::start(CACHED).await;
    let raw = r#"{"model":"chat","temperature":0,"max_tokens":50,"messages":[{"role":"user","content":"Order?"}]}"#;
    let first = h.post_raw(raw, "application/json").await;
    assert_eq!(first.headers()["x-switchyard-cache"], "miss");
    let reordered = "{\n  \"messages\": [ { \"content\": \"Order?\", \"role\": \"user\" } ],\n  \"max_tokens\": 50,\n  \"temperature\": 0.0,\n  \"model\": \"chat\"\n}";
    let again = h.post_raw(reordered, "application/json").await;
    assert_eq!(again.headers()["x-switchyard-cache"], "hit");
    // The same question asked as a stream is the same question.
    let streamed: Value = serde_json::from_str(raw).unwrap();
    let mut streamed = streamed;
    streamed["stream"] = json!(true);
    let s = send(&h, "/v1/chat/completions", &streamed, &[]).await;
    assert_eq!(s.cache, "hit");
    assert!(s.body.ends_with("data: [DONE]\n\n"), "{}", s.body);
    // A different setting is a different request.
    let other = r#"{"model":"chat","temperature":0,"max_tokens":51,"messages":[{"role":"user","content":"Order?"}]}"#;
    let r = h.post_raw(other, "application/json").await;
    assert_eq!(r.headers()["x-switchyard-cache"], "miss");
    assert_eq!(h.mock.request_count(), 2);
    let d: Vec<Value> = h.decisions();
    assert_eq!(d[0]["input_hash"], d[1]["input_hash"]);
    assert_ne!(d[0]["input_hash"], d[3]["input_hash"]);
}

/// A request body for (model, stream).
type Body = fn(&str, bool) -> Value;

/// Every door over every upstream protocol: the answer streamed first is
/// replayed as a stream and as a whole answer with the same text and usage.
#[tokio::test]
async fn a_hit_replays_in_each_door_as_a_stream_and_as_json() {
    let h = common::start(CACHED).await;
    let doors: [(&str, Body); 3] = [
        ("/v1/chat/completions", |m, s| {
            json!({"model": m, "temperature": 0, "stream": s, "stream_options": {"include_usage": true},
                   "messages": common::user("Replay me")})
        }),
        ("/v1/messages", |m, s| {
            json!({"model": m, "temperature": 0, "stream": s, "max_tokens": 100,
                   "messages": common::user("Replay me")})
        }),
        (
            "/v1/responses",
            |m, s| json!({"model": m, "temperature": 0, "stream": s, "input": "Replay me"}),
        ),
    ];
    for model in ["oa/gpt", "an/claude", "gm/gemini"] {
        for (path, body) in doors {
            let calls = h.mock.request_count();
            let live = send(&h, path, &body(model, true), &[]).await;
            assert_eq!(
                (live.status, live.cache.as_str()),
                (200, "miss"),
                "{path} {model}: {}",
                live.body
            );
            let replayed = send(&h, path, &body(model, true), &[]).await;
            assert_eq!(replayed.cache, "hit", "{path} {model}");
            let whole = send(&h, path, &body(model, false), &[]).await;
            assert_eq!(whole.cache, "hit", "{path} {model}");
            assert_eq!(h.mock.request_count(), calls + 1, "{path} {model}");
            let said = live.said();
            assert!(
                !said.0.is_empty() && said.1 > 0 && said.2 > 0,
                "{path} {model}: {said:?}"
            );
            assert_eq!(replayed.said(), said, "{path} {model} stream replay");
            assert_eq!(whole.said(), said, "{path} {model} JSON replay");
            assert_eq!(replayed.deployment, model);
            // Each door's own stream framing.
            match path {
                "/v1/chat/completions" => assert!(replayed.body.ends_with("data: [DONE]\n\n")),
                "/v1/messages" => assert!(replayed.body.contains("event: message_stop")),
                _ => assert!(replayed.body.contains("event: response.completed")),
            }
        }
    }
}

/// `message_start`'s usage in an Anthropic stream.
fn message_start_usage(body: &str) -> Value {
    common::sse_data(body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v["type"] == "message_start")
        .map(|v| v["message"]["usage"].clone())
        .unwrap_or_else(|| panic!("no message_start in {body}"))
}

/// A stream replayed on the Anthropic door says its input usage in
/// `message_start` as the live one did (an agent reads its context size
/// there), whatever the upstream that first answered.
#[tokio::test]
async fn a_replayed_anthropic_stream_starts_with_its_input_usage() {
    let h = common::start(CACHED).await;
    for model in ["an/claude", "oa/gpt", "gm/gemini"] {
        let body = json!({"model": model, "temperature": 0, "stream": true, "max_tokens": 100,
            "messages": common::user("How big is my prompt?")});
        let live = send(&h, "/v1/messages", &body, &[]).await;
        assert_eq!(live.cache, "miss", "{model}");
        let replayed = send(&h, "/v1/messages", &body, &[]).await;
        assert_eq!(replayed.cache, "hit", "{model}");
        let (live_said, replay_said) = (live.said(), replayed.said());
        assert_eq!(replay_said, live_said, "{model}");
        let usage = message_start_usage(&replayed.body);
        assert_eq!(usage["input_tokens"], live_said.1, "{model}: {usage}");
        assert!(live_said.1 > 0, "{model}");
        // A live Anthropic stream starts with it too: the replay matches it.
        if model == "an/claude" {
            assert_eq!(
                message_start_usage(&live.body)["input_tokens"],
                usage["input_tokens"]
            );
        }
    }
}

fn sha(key: &str) -> String {
    hex::encode(Sha256::digest(key.as_bytes()))
}

#[tokio::test]
async fn a_client_sees_its_own_cache_unless_it_shares() {
    let yaml = format!(
        "{CACHED}clients:\n  - {{ id: a, key_sha256: \"{}\" }}\n  - {{ id: b, key_sha256: \"{}\" }}\n  - {{ id: c, key_sha256: \"{}\", cache: shared }}\n  - {{ id: d, key_sha256: \"{}\", cache: shared }}\n",
        sha("key-a"),
        sha("key-b"),
        sha("key-c"),
        sha("key-d")
    );
    let h = common::start(&yaml).await;
    let ask = |key: &'static str| {
        let h = &h;
        async move {
            let auth = format!("Bearer {key}");
            send(
                h,
                "/v1/chat/completions",
                &chat("Whose answer?"),
                &[("authorization", &auth)],
            )
            .await
            .cache
        }
    };
    assert_eq!(ask("key-a").await, "miss");
    assert_eq!(ask("key-b").await, "miss", "b never sees a's answer");
    assert_eq!(ask("key-c").await, "miss", "the shared cache is not a's");
    assert_eq!(ask("key-d").await, "hit", "d shares c's");
    assert_eq!(ask("key-a").await, "hit", "a keeps its own");
    assert_eq!(h.mock.request_count(), 3);
}

/// Client `team` never gets client `team/sub`'s cached answers, and a
/// `cache: shared` client cannot read another's conversation out of the
/// shared cache by sending its `previous_response_id` (contract §8).
#[tokio::test]
async fn no_client_reaches_another_clients_answers_through_the_cache() {
    let yaml = format!(
        "{CACHED}clients:\n  - {{ id: team, key_sha256: \"{}\" }}\n  - {{ id: team/sub, key_sha256: \"{}\" }}\n  - {{ id: c, key_sha256: \"{}\", cache: shared }}\n  - {{ id: d, key_sha256: \"{}\", cache: shared }}\n",
        sha("key-team"),
        sha("key-sub"),
        sha("key-c"),
        sha("key-d")
    );
    let h = common::start(&yaml).await;
    let ask = |key: &'static str, path: &'static str, body: Value| {
        let h = &h;
        async move {
            let auth = format!("Bearer {key}");
            send(h, path, &body, &[("authorization", &auth)]).await
        }
    };
    let question = chat("Whose plan?");
    assert_eq!(
        ask("key-sub", "/v1/chat/completions", question.clone())
            .await
            .cache,
        "miss"
    );
    assert_eq!(
        ask("key-team", "/v1/chat/completions", question.clone())
            .await
            .cache,
        "miss",
        "team never sees team/sub's answer"
    );
    assert_eq!(
        ask("key-sub", "/v1/chat/completions", question.clone())
            .await
            .cache,
        "hit"
    );
    // c keeps a conversation and continues it: the continuation is cached
    // in the shared cache under a body that names c's response.
    let first = ask(
        "key-c",
        "/v1/responses",
        json!({"model": "chat", "temperature": 0, "input": "My PIN is 4711."}),
    )
    .await;
    assert_eq!(first.status, 200);
    let id = serde_json::from_str::<Value>(&first.body).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let next = json!({"model": "chat", "temperature": 0, "previous_response_id": id, "input": "What is my PIN?"});
    assert_eq!(
        ask("key-c", "/v1/responses", next.clone()).await.status,
        200
    );
    assert_eq!(
        ask("key-c", "/v1/responses", next.clone()).await.cache,
        "hit"
    );
    // d sends the very same body: not c's conversation, so not c's answer.
    let calls = h.mock.request_count();
    let stolen = ask("key-d", "/v1/responses", next).await;
    assert_eq!(stolen.status, 400, "{}", stolen.body);
    assert_ne!(stolen.cache, "hit");
    let body: Value = serde_json::from_str(&stolen.body).unwrap();
    assert_eq!(body["error"]["param"], "previous_response_id");
    assert_eq!(h.mock.request_count(), calls);
}

#[tokio::test]
async fn answers_that_went_wrong_are_never_stored() {
    let h = common::start(&CACHED.replace(
        "  chat: { targets: [oa/gpt] }\n",
        "  chat: { targets: [oa/gpt] }\n  once: { targets: [oa/gpt], retry: { attempts: 1 }, on_stream_interrupt: error }\n",
    ))
    .await;
    let once = |text: &str, stream: bool| json!({"model": "once", "temperature": 0, "stream": stream, "messages": common::user(text)});
    let cases: Vec<(&str, Behavior, bool)> = vec![
        (
            "an error",
            Behavior::status(500, r#"{"error":{"message":"boom","type":"server_error"}}"#),
            false,
        ),
        (
            "a content filter",
            Behavior::fixture("openai/chat_content_filter"),
            false,
        ),
        (
            "a truncated answer",
            Behavior::fixture("deepseek/chat_text_length"),
            false,
        ),
        (
            "a truncated stream",
            Behavior::fixture("openai/stream_finish_length"),
            true,
        ),
        (
            "an interrupted stream",
            Behavior::fault(Fault::Cut).chunks(6),
            true,
        ),
    ];
    for (what, bad, stream) in cases {
        let body = once(what, stream);
        h.mock.script(vec![bad]);
        let first = send(&h, "/v1/chat/completions", &body, &[]).await;
        assert_ne!(first.cache, "hit", "{what}");
        let calls = h.mock.request_count();
        let again = send(&h, "/v1/chat/completions", &body, &[]).await;
        assert_eq!(
            (again.status, again.cache.as_str()),
            (200, "miss"),
            "{what}: {}",
            again.body
        );
        assert_eq!(h.mock.request_count(), calls + 1, "{what} was not stored");
        // The good answer that followed is.
        let third = send(&h, "/v1/chat/completions", &body, &[]).await;
        assert_eq!(third.cache, "hit", "{what}");
    }
}

#[tokio::test]
async fn no_cache_refreshes_and_no_store_leaves_no_trace() {
    let h = common::start(CACHED).await;
    let q = chat("Fresh?");
    h.mock.set_default(Behavior::text("first answer"));
    send(&h, "/v1/chat/completions", &q, &[]).await;
    h.mock.set_default(Behavior::text("second answer"));
    let refreshed = send(
        &h,
        "/v1/chat/completions",
        &q,
        &[("x-switchyard-cache", "no-cache")],
    )
    .await;
    assert_eq!(
        (refreshed.cache.as_str(), refreshed.said().0.as_str()),
        ("miss", "second answer")
    );
    let hit = send(&h, "/v1/chat/completions", &q, &[]).await;
    assert_eq!(
        (hit.cache.as_str(), hit.said().0.as_str()),
        ("hit", "second answer")
    );

    let other = chat("Never kept?");
    let skipped = send(
        &h,
        "/v1/chat/completions",
        &other,
        &[("x-switchyard-cache", "no-store")],
    )
    .await;
    assert_eq!(skipped.cache, "off");
    let after = send(&h, "/v1/chat/completions", &other, &[]).await;
    assert_eq!(after.cache, "miss", "no-store wrote nothing");
    assert_eq!(h.mock.request_count(), 4);
}

/// The `x-switchyard-cache` of the same request asked twice.
async fn pair(h: &common::Harness, body: Value, headers: &[(&str, &str)]) -> (String, String) {
    let first = send(h, "/v1/chat/completions", &body, headers).await.cache;
    let second = send(h, "/v1/chat/completions", &body, headers).await.cache;
    (first, second)
}

#[tokio::test]
async fn when_decides_which_requests_are_cached() {
    let mild =
        |text: &str| json!({"model": "chat", "temperature": 0.7, "messages": common::user(text)});
    let seeded = |text: &str| json!({"model": "chat", "temperature": 0.7, "seed": 7, "messages": common::user(text)});
    let det = common::start(CACHED).await;
    assert_eq!(
        pair(&det, mild("a"), &[]).await,
        ("off".into(), "off".into())
    );
    assert_eq!(
        pair(&det, seeded("b"), &[]).await,
        ("miss".into(), "hit".into())
    );
    assert_eq!(
        (pair(&det, mild("c"), &[("x-switchyard-cache", "use")]).await),
        ("miss".into(), "hit".into())
    );
    assert_eq!(det.mock.request_count(), 4);

    let header = common::start(&CACHED.replace("ttl: 5m", "ttl: 5m, when: header")).await;
    assert_eq!(
        pair(&header, chat("d"), &[]).await,
        ("off".into(), "off".into())
    );
    assert_eq!(
        (pair(&header, chat("e"), &[("x-switchyard-cache", "use")]).await),
        ("miss".into(), "hit".into())
    );

    let always = common::start(&CACHED.replace("ttl: 5m", "ttl: 5m, when: always")).await;
    assert_eq!(
        pair(&always, mild("f"), &[]).await,
        ("miss".into(), "hit".into())
    );
}

#[tokio::test]
async fn entries_expire_after_their_ttl_and_purge_empties_the_cache() {
    let h = common::start(&CACHED.replace("ttl: 5m", "ttl: 1s")).await;
    let q = chat("Soon stale?");
    assert_eq!(
        send(&h, "/v1/chat/completions", &q, &[]).await.cache,
        "miss"
    );
    assert_eq!(send(&h, "/v1/chat/completions", &q, &[]).await.cache, "hit");
    // moka keeps its own clock: paused tokio time cannot age its entries.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert_eq!(
        send(&h, "/v1/chat/completions", &q, &[]).await.cache,
        "miss"
    );

    let purged = reqwest::Client::new()
        .delete(h.admin("/admin/cache"))
        .send()
        .await
        .unwrap();
    assert_eq!(purged.status(), 200);
    let v: Value = purged.json().await.unwrap();
    assert_eq!(v["removed"], 1);
    assert!(h.metrics().await.contains("switchyard_cache_entries 0"));
    assert_eq!(
        send(&h, "/v1/chat/completions", &q, &[]).await.cache,
        "miss"
    );
    assert_eq!(h.mock.request_count(), 3);
}

#[tokio::test]
async fn purge_without_a_cache_says_so() {
    let h = common::start(common::ONE_OPENAI).await;
    let r = reqwest::Client::new()
        .delete(h.admin("/admin/cache"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 409);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], "cache_off");
    // And an answer says the cache is off.
    let a = send(&h, "/v1/chat/completions", &chat("x"), &[]).await;
    assert_eq!(a.cache, "off");
}

#[tokio::test]
async fn a_hit_spends_nothing_of_a_budget_or_a_rate_limit() {
    let yaml = format!(
        "{CACHED}clients:\n  - {{ id: team, key_env: CLIENT_KEY, rpm: 1, budget: {{ usd: 1, per: day }} }}\n"
    );
    let h = common::start(&yaml).await;
    let auth = [("authorization", "Bearer client-secret")];
    let first = send(&h, "/v1/chat/completions", &chat("Budget?"), &auth).await;
    assert_eq!(first.cache, "miss");
    let spent = |v: Value| v["clients"][0]["budget"]["spent_usd"].as_f64().unwrap();
    let before = spent(h.admin_json("/admin/clients").await);
    assert!(before > 0.0);
    let r = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .bearer_auth("client-secret")
        .json(&chat("Budget?"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["x-switchyard-cache"], "hit");
    let left = common::header_f64(&r, "x-switchyard-budget-remaining-usd");
    assert!((left - (1.0 - before)).abs() < 1e-6, "{left} vs {before}");
    assert_eq!(spent(h.admin_json("/admin/clients").await), before);
    // The hit took nothing of `rpm: 1` either: a new question is the
    // second request of the minute, and refused.
    let other = send(&h, "/v1/chat/completions", &chat("Another?"), &auth).await;
    assert_eq!(other.status, 429, "{}", other.body);
    assert_eq!(h.mock.request_count(), 1);
}

/// The README's demo claim: the second identical deterministic request is a
/// hit, and the dashboard is on the admin listener.
#[tokio::test]
async fn the_demo_caches_deterministic_requests() {
    let dir = tempfile::tempdir().unwrap();
    let demo = switchyard::demo::start("127.0.0.1:0", "127.0.0.1:0")
        .await
        .unwrap();
    let mut config = demo.config;
    config.usage.store = switchyard::config::UsageBackend::Sqlite {
        path: dir.path().join("demo.db").display().to_string(),
    };
    let gw = switchyard::server::start(
        config,
        switchyard::server::Options {
            decisions: switchyard::observe::decision_log::DecisionSink::Off,
            config_source: None,
            workers: switchyard::server::Workers::Current,
        },
    )
    .await
    .unwrap();
    let ask = || {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", gw.base_url()))
            .json(&json!({"model": "chat", "temperature": 0, "messages": common::user("Hello!")}))
            .send()
    };
    assert_eq!(ask().await.unwrap().headers()["x-switchyard-cache"], "miss");
    let hit = ask().await.unwrap();
    assert_eq!(hit.headers()["x-switchyard-cache"], "hit");
    assert_eq!(common::header_f64(&hit, "x-switchyard-cost-usd"), 0.0);
    assert_eq!(demo.mock.request_count(), 1);
    let page = reqwest::get(format!("{}/", gw.admin_url())).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("switchyard"));
}
