//! Debug bodies (contract §11): a client with `debug: true` that sends
//! `x-switchyard-debug: 1` has the request's body and its answer in its
//! decision-log line, with keys masked; nobody else does, and no key ever
//! reaches the line.

mod common;

use serde_json::{json, Value};
use switchyard_mock::Behavior;

const PROVIDER_KEY: &str = "plain-provider-credential-42";

/// `team` may ask for its bodies; `other` (key `other-secret`) may not.
const CONFIG: &str = r#"
providers:
  oa: { protocol: openai, base_url: "{mock}/v1", keys: [{ value: plain-provider-credential-42 }] }
models:
  - { id: oa/m, provider: oa, model: gpt-4o-mini, capabilities: [streaming] }
routes:
  chat: { targets: [oa/m] }
clients:
  - { id: team, key_env: CLIENT_KEY, debug: true }
  - { id: other, key_sha256: "9c0ee26e4a1fbb028187486a7ea91f81f8ab81fcf467cba75107dbd3a64244d7" }
observability: { debug_bodies: header }
"#;

fn prompt() -> String {
    format!("use {PROVIDER_KEY} or sk-live-abcdefghijklmnop, please")
}

async fn send(h: &common::Harness, key: &str, debug: Option<&str>, stream: bool) -> String {
    let mut req = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .bearer_auth(key)
        .json(&json!({"model": "chat", "stream": stream, "messages": common::user(&prompt())}));
    if let Some(v) = debug {
        req = req.header("x-switchyard-debug", v);
    }
    let r = req.send().await.unwrap();
    r.text().await.unwrap()
}

/// The line's `debug`, after checking no key is anywhere in the line.
fn debug_of(line: &Value) -> Option<Value> {
    let text = line.to_string();
    for secret in [
        PROVIDER_KEY,
        "sk-live-abcdefghijklmnop",
        "client-secret",
        "other-secret",
    ] {
        assert!(!text.contains(secret), "{secret} in the log line: {text}");
    }
    line.get("debug").cloned()
}

#[tokio::test]
async fn an_allowed_client_that_asks_has_both_bodies_logged_with_keys_masked() {
    let h = common::start(CONFIG).await;
    h.mock.set_default(Behavior {
        text: Some(format!("Your key {PROVIDER_KEY} works.")),
        ..Behavior::default()
    });
    // The client's own answer is not touched.
    let answer = send(&h, "client-secret", Some("1"), false).await;
    assert!(answer.contains(PROVIDER_KEY), "{answer}");
    let d = debug_of(&h.decision(0).await).expect("bodies logged");
    let request: Value = serde_json::from_str(d["request"].as_str().unwrap()).unwrap();
    assert_eq!(request["model"], "chat");
    assert_eq!(
        request["messages"][0]["content"],
        "use ***** or *****, please"
    );
    let response: Value = serde_json::from_str(d["response"].as_str().unwrap()).unwrap();
    assert_eq!(
        response["choices"][0]["message"]["content"],
        "Your key ***** works."
    );
    assert_eq!(d["truncated"], false);

    // A stream: the frames as the client got them, each event masked.
    h.mock.set_default(Behavior {
        text: Some(format!("Your key {PROVIDER_KEY} works.")),
        chunks: Some(1),
        ..Behavior::default()
    });
    let streamed = send(&h, "client-secret", Some("1"), true).await;
    assert!(streamed.contains("[DONE]"), "{streamed}");
    let d = debug_of(&h.decision(1).await).expect("bodies logged");
    let frames = d["response"].as_str().unwrap();
    assert!(frames.contains("Your key ***** works."), "{frames}");
    assert_eq!(
        common::sse_data(frames).last().map(String::as_str),
        Some("[DONE]")
    );
}

#[tokio::test]
async fn an_error_answer_is_logged_as_the_client_got_it() {
    let h = common::start(CONFIG).await;
    h.mock.set_default(Behavior {
        status: Some(400),
        body: Some(json!({"error": {"message": "bad request", "type": "invalid_request_error"}})),
        ..Behavior::default()
    });
    let answer = send(&h, "client-secret", Some("1"), false).await;
    let d = debug_of(&h.decision(0).await).expect("bodies logged");
    let logged: Value = serde_json::from_str(d["response"].as_str().unwrap()).unwrap();
    let sent: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(logged, sent);
    assert!(logged["error"].is_object(), "{logged}");
}

#[tokio::test]
async fn nobody_else_gets_bodies_logged() {
    let h = common::start(CONFIG).await;
    // A client without `debug`, asking.
    send(&h, "other-secret", Some("1"), false).await;
    // The allowed client, not asking; and asking with another value.
    send(&h, "client-secret", None, false).await;
    send(&h, "client-secret", Some("true"), false).await;
    for n in 0..3 {
        let line = h.decision(n).await;
        assert_eq!(line["status"], 200, "{line}");
        assert_eq!(debug_of(&line), None, "line {n}: {line}");
    }
}
