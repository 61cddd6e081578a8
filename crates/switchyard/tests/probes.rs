//! Background probes (contract §10) over real HTTP: a dead fallback is
//! found before a request needs it, an open circuit closes on a probe and
//! not on a client's request, a spare key the upstream refuses is set aside
//! and comes back when it is taken again, probes keep within `max_share`
//! of an rpm, and a completion probe is recorded as client `_probe` with
//! its cost.

mod common;

use std::time::Duration;

use serde_json::{json, Value};
use switchyard_mock::{Behavior, MockServer};

/// A deployment's `/admin/state` entry.
async fn deployment(h: &common::Harness, id: &str) -> Value {
    let s = h.admin_json("/admin/state").await;
    s["deployments"]
        .as_array()
        .and_then(|ds| ds.iter().find(|d| d["id"] == id).cloned())
        .unwrap_or_else(|| panic!("{id} in {s}"))
}

/// The mock's model-list calls (what an auth probe sends) carrying the
/// header `x-who: {who}`.
fn model_lists(mock: &MockServer, who: &str) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path_and_query.ends_with("/models"))
        .filter(|r| r.header("x-who") == Some(who))
        .count()
}

/// The mock's chat calls for `model`.
fn chats(mock: &MockServer, model: &str) -> usize {
    mock.requests()
        .iter()
        .filter(|r| r.json.as_ref().is_some_and(|j| j["model"] == model))
        .count()
}

fn probe_lines(h: &common::Harness) -> Vec<Value> {
    h.decisions()
        .into_iter()
        .filter(|d| d["client"] == "_probe")
        .collect()
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    common::free_port()
}

#[tokio::test]
async fn a_dead_fallback_is_found_by_probes_and_skipped_before_any_request_reaches_it() {
    let yaml = r#"
providers:
  main: { protocol: openai, base_url: "{mock}/v1" }
  backup:
    protocol: openai
    base_url: "http://127.0.0.1:DEAD/v1"
    circuit: { consecutive_failures: 2, cooldown: 60s }
    probe: { every: 1s }
models:
  - { id: main/m, provider: main, model: gpt-main }
  - { id: backup/m, provider: backup, model: gpt-backup }
routes:
  chat: { targets: [main/m], fallbacks: [backup/m], retry: { attempts: 1 } }
"#
    .replace("DEAD", &dead_port().to_string());
    let h = common::start(&yaml).await;
    // No client request yet: the probes alone open the fallback's circuit.
    common::eventually(
        || async { deployment(&h, "backup/m").await["circuit"] == "open" },
        "the dead fallback's circuit opens on probes",
    )
    .await;
    let d = deployment(&h, "backup/m").await;
    assert_eq!(d["last_probe"]["result"], "failed", "{d}");
    assert_eq!(d["last_probe"]["kind"], "auth", "{d}");
    assert!(
        d["last_probe"]["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("connection_error")),
        "{d}"
    );
    assert_eq!(
        deployment(&h, "main/m").await["last_probe"],
        Value::Null,
        "an unprobed provider has no probe"
    );
    // Each probe is a decision-log line of client `_probe`.
    let probes = probe_lines(&h);
    assert!(probes.len() >= 2, "{probes:?}");
    assert!(probes
        .iter()
        .all(|p| p["selected"] == "backup/m" && p["probe"]["result"] == "failed"));

    // Now the first choice fails: the request does not go on to the dead
    // fallback, it is answered at once from what the probes found.
    h.mock.script(vec![Behavior {
        status: Some(500),
        ..Default::default()
    }]);
    let r = h
        .post(json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 502, "the first choice's own error");
    let line = h.decision(h.decisions().len() - 1).await;
    let attempts = line["attempts"].as_array().unwrap();
    assert!(
        attempts
            .iter()
            .all(|a| a["deployment"] != "backup/m" || a["outcome"] == "circuit_open"),
        "{line}"
    );
    assert_eq!(chats(&h.mock, "gpt-backup"), 0);
    let m = h.metrics().await;
    assert!(
        m.lines()
            .any(|l| l
                .starts_with(r#"switchyard_probes_total{deployment="backup/m",result="failed"}"#)),
        "{m}"
    );
    // Probes are not client requests.
    assert!(!m.contains(r#"deployment="backup/m",status"#), "{m}");
}

#[tokio::test]
async fn an_open_circuit_closes_on_a_probe_not_on_a_clients_request() {
    let h = common::start(
        r#"
providers:
  main:
    protocol: openai
    base_url: "{mock}/v1"
    headers: { x-who: main }
    circuit: { consecutive_failures: 1, cooldown: 1s }
    probe: { every: 30s }
models:
  - { id: main/m, provider: main, model: gpt-main }
routes:
  chat: { targets: [main/m], retry: { attempts: 1 } }
"#,
    )
    .await;
    h.mock.script(vec![Behavior {
        status: Some(500),
        ..Default::default()
    }]);
    let ask = || h.post(json!({"model": "chat", "messages": common::user("hi")}));
    assert_eq!(ask().await.status(), 502);
    assert_eq!(deployment(&h, "main/m").await["circuit"], "open");
    // Past the cooldown the circuit is the prober's to try: no request is
    // let through as the trial, however many come.
    common::eventually(
        || async { deployment(&h, "main/m").await["circuit"] == "closed" },
        "the probe closes the circuit",
    )
    .await;
    assert_eq!(chats(&h.mock, "gpt-main"), 1, "only the failed request");
    let d = deployment(&h, "main/m").await;
    assert_eq!(d["last_probe"]["reason"], "circuit", "{d}");
    assert_eq!(d["last_probe"]["result"], "ok", "{d}");
    assert!(model_lists(&h.mock, "main") >= 1);
    let line = probe_lines(&h).pop().unwrap();
    assert_eq!(
        line["transitions"][0], "main/m: half_open -> closed (probe_ok)",
        "{line}"
    );
    // And requests are served again.
    assert_eq!(ask().await.status(), 200);
}

#[tokio::test]
async fn while_open_a_probed_deployment_never_takes_a_request_as_its_trial() {
    // `main` is down (nothing listens) and probed: its circuit opens on the
    // first request, and its cooldown (1 s, growing to 3 s) runs out while
    // requests keep coming. The probes fail and keep it open; no request is
    // ever let through to try it.
    let yaml = r#"
providers:
  main:
    protocol: openai
    base_url: "http://127.0.0.1:DEAD/v1"
    circuit: { consecutive_failures: 1, cooldown: 1s }
    probe: { every: 60s }
  spare: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: main/m, provider: main, model: gpt-main }
  - { id: spare/m, provider: spare, model: gpt-spare }
routes:
  chat: { targets: [main/m], fallbacks: [spare/m], retry: { attempts: 1 } }
"#
    .replace("DEAD", &dead_port().to_string());
    let h = common::start(&yaml).await;
    let ask = || h.post(json!({"model": "chat", "messages": common::user("hi")}));
    for _ in 0..25 {
        assert_eq!(ask().await.status(), 200, "served by the fallback");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let clients: Vec<Value> = h
        .decisions()
        .into_iter()
        .filter(|d| d["client"] != "_probe")
        .collect();
    let sent_to_main = |d: &Value| {
        d["attempts"].as_array().is_some_and(|a| {
            a.iter()
                .any(|a| a["deployment"] == "main/m" && a["outcome"] != "circuit_open")
        })
    };
    assert_eq!(clients.len(), 25);
    assert!(sent_to_main(&clients[0]), "the first request found it down");
    assert!(
        clients[1..].iter().all(|d| !sent_to_main(d)),
        "no later request tried it: {clients:?}"
    );
    // The probes did, past each cooldown, and found it still down.
    let probes = probe_lines(&h);
    assert!(!probes.is_empty(), "probed once the cooldown was over");
    assert!(probes
        .iter()
        .all(|p| p["probe"]["reason"] == "circuit" && p["probe"]["result"] == "failed"));
    assert_eq!(deployment(&h, "main/m").await["circuit"], "open");
}

#[tokio::test]
async fn a_spare_key_the_upstream_refuses_is_set_aside_and_restored_when_taken() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    mock.set_valid_keys(vec!["sk-main".into()]);
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let h = common::start_on(
        mock,
        r#"
providers:
  main:
    protocol: openai
    base_url: "{mock}/v1"
    keys: [{ value: sk-main }, { value: sk-spare, weight: 0 }]
    probe: { every: 1s }
models:
  - { id: main/m, provider: main, model: gpt-main }
routes:
  chat: { targets: [main/m] }
"#,
        "",
        dir,
    )
    .await;
    let spare = |d: &Value| {
        d["keys"]
            .as_array()
            .and_then(|ks| ks.iter().find(|k| k["label"] == "inline#1").cloned())
            .unwrap_or(Value::Null)
    };
    let aside = common::eventually_some(
        || async {
            let k = spare(&deployment(&h, "main/m").await);
            (k["status"] == "quarantined").then_some(k)
        },
        "the refused spare key is set aside",
    )
    .await;
    assert_eq!(aside["reason"], "rejected", "{aside}");
    assert_eq!(aside["last_probe"]["result"], "key_rejected", "{aside}");
    assert_eq!(aside["last_probe"]["reason"], "spare_key", "{aside}");
    // The key is never shown.
    assert!(!aside.to_string().contains("sk-spare"));
    // The deployment itself is fine: the key was the trouble.
    assert_eq!(deployment(&h, "main/m").await["circuit"], "closed");

    h.mock
        .set_valid_keys(vec!["sk-main".into(), "sk-spare".into()]);
    common::eventually(
        || async { spare(&deployment(&h, "main/m").await)["status"] == "active" },
        "the spare key is back once the upstream takes it",
    )
    .await;
}

#[tokio::test]
async fn probes_keep_within_max_share_of_a_deployments_rpm() {
    // Both idle and probed every second; `capped` allows 600 rpm of which
    // 2% (12 a minute: one per 5 s) may be probes.
    let h = common::start(
        r#"
providers:
  capped:
    protocol: openai
    base_url: "{mock}/v1"
    headers: { x-who: capped }
    limits: { rpm: 600 }
    probe: { every: 1s, max_share: 0.02 }
  free:
    protocol: openai
    base_url: "{mock}/v1"
    headers: { x-who: free }
    probe: { every: 1s }
models:
  - { id: capped/m, provider: capped, model: gpt-capped }
  - { id: free/m, provider: free, model: gpt-free }
routes:
  chat: { targets: [capped/m, free/m] }
"#,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(6500)).await;
    let (capped, free) = (model_lists(&h.mock, "capped"), model_lists(&h.mock, "free"));
    assert!((1..=2).contains(&capped), "capped: {capped}");
    assert!(free >= 4, "free: {free}");
    // A probe counts in the deployment's rpm window (taken just before it
    // is sent: one more may be on its way).
    let used = deployment(&h, "capped/m").await["rpm_used"]
        .as_u64()
        .unwrap() as usize;
    assert!(
        used >= 1 && used.abs_diff(capped) <= 1,
        "{used} vs {capped}"
    );
}

#[tokio::test]
async fn a_completion_probe_is_recorded_as_client_probe_with_its_cost() {
    let h = common::start(
        r#"
providers:
  main:
    protocol: openai
    base_url: "{mock}/v1"
    probe: { every: 1s, kind: completion }
models:
  - { id: main/m, provider: main, model: gpt-main, pricing: { input: 2.5, output: 10 } }
routes:
  chat: { targets: [main/m] }
"#,
    )
    .await;
    common::eventually(
        || async { chats(&h.mock, "gpt-main") >= 1 },
        "a one-token completion probe",
    )
    .await;
    let sent = h
        .mock
        .requests()
        .into_iter()
        .find_map(|r| r.json.filter(|j| j["model"] == "gpt-main"))
        .unwrap();
    assert_eq!(sent["max_tokens"], 1, "{sent}");
    let line = common::eventually_some(
        || async { probe_lines(&h).pop() },
        "the probe's decision-log line",
    )
    .await;
    assert_eq!(line["probe"]["kind"], "completion", "{line}");
    assert!(line["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{line}");
    h.flush_usage().await;
    let usage = h.usage("group_by=client").await;
    let row = usage["rows"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["key"] == "_probe").cloned())
        .unwrap_or_else(|| panic!("a `_probe` row in {usage}"));
    assert!(row["requests"].as_u64().is_some_and(|n| n >= 1), "{row}");
    assert!(row["cost_usd"].as_f64().is_some_and(|c| c > 0.0), "{row}");
}
