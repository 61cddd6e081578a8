//! Config reload through the admin API: a good config is swapped in
//! atomically, a bad one is refused and the old one keeps serving.

mod common;

use std::time::Duration;

use serde_json::{json, Value};
use switchyard::observe::decision_log::DecisionSink;
use switchyard::{config, server};
use switchyard_mock::MockServer;

/// A gateway started from `text`, written to a file of its own that it
/// reloads from; the file's path, and its directory (removed on drop).
async fn watching(text: &str) -> (server::Running, std::path::PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.yaml");
    std::fs::write(&path, text).unwrap();
    let gw = server::start(
        config::load_file(&path).unwrap(),
        server::Options {
            decisions: DecisionSink::Off,
            config_source: Some(config::source::Source::File(path.clone().into())),
            workers: server::Workers::Current,
        },
    )
    .await
    .unwrap();
    (gw, path, dir)
}

fn yaml(mock: &str, route: &str) -> String {
    format!(
        "server: {{ listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0 }}\nusage: {{ store: off }}\nproviders:\n  mock: {{ protocol: openai, base_url: \"{mock}/v1\" }}\nmodels:\n  - {{ id: mock/a, provider: mock, model: a }}\nroutes:\n  {route}: {{ targets: [mock/a] }}\n"
    )
}

/// A reload that moves a listener is refused (listeners are bound once):
/// the running config, and the listeners, stay as they are.
#[tokio::test]
async fn a_reload_that_moves_a_listener_is_refused() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let (gw, path, _dir) = watching(&yaml(&mock.base_url(), "first")).await;
    let http = reqwest::Client::new();
    for moved in [
        "admin_listen: 127.0.0.1:0 }",
        "listen: 127.0.0.1:0, admin_listen",
    ] {
        let text = yaml(&mock.base_url(), "second").replacen(
            moved,
            &moved.replace("127.0.0.1:0", "127.0.0.1:1"),
            1,
        );
        assert_ne!(text, yaml(&mock.base_url(), "second"));
        std::fs::write(&path, text).unwrap();
        let r = http
            .post(format!("{}/admin/reload", gw.admin_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 422, "{moved}");
        let errors = r.json::<Value>().await.unwrap()["errors"].to_string();
        assert!(errors.contains("restart the gateway"), "{errors}");
        let first = http
            .post(format!("{}/v1/chat/completions", gw.base_url()))
            .json(&json!({"model": "first", "messages": [{"role": "user", "content": "hi"}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(first.status(), 200, "the running config stays");
    }
}

#[tokio::test]
async fn reload_swaps_a_valid_config_and_refuses_a_broken_one() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let (gw, path, _dir) = watching(&yaml(&mock.base_url(), "first")).await;
    let http = reqwest::Client::new();
    let ask = |model: &'static str| {
        http.post(format!("{}/v1/chat/completions", gw.base_url()))
            .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    assert_eq!(ask("first").await.unwrap().status(), 200);
    let version_before = gw.app.live.load().version.clone();

    std::fs::write(&path, yaml(&mock.base_url(), "second")).unwrap();
    let r = http
        .post(format!("{}/admin/reload", gw.admin_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_ne!(body["config_version"].as_str().unwrap(), &*version_before);
    assert_eq!(ask("second").await.unwrap().status(), 200);
    assert_eq!(ask("first").await.unwrap().status(), 404);

    // A broken file: refused with its problems, the running config stays.
    std::fs::write(
        &path,
        "routes: { third: { targets: [nowhere/x] } }\nbogus: 1\n",
    )
    .unwrap();
    let r = http
        .post(format!("{}/admin/reload", gw.admin_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    let body: Value = r.json().await.unwrap();
    let errors = body["errors"].to_string();
    assert!(
        errors.contains("bogus") && errors.contains("nowhere/x"),
        "{errors}"
    );
    assert_eq!(ask("second").await.unwrap().status(), 200);
    let m = reqwest::get(format!("{}/metrics", gw.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Counted (the file watcher may have seen the same writes: a text
    // already applied or already refused is not reloaded twice).
    assert!(reloads(&m, "ok") >= 1, "{m}");
    assert!(reloads(&m, "error") >= 1, "{m}");
    gw.shutdown().await;
}

/// Two deployments and the routes `always` (on both) and `extra`.
fn watched_yaml(mock: &str, extra: &str, target: &str) -> String {
    format!(
        "server: {{ listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0 }}\nusage: {{ store: off }}\nproviders:\n  mock: {{ protocol: openai, base_url: \"{mock}/v1\" }}\nmodels:\n  - {{ id: mock/a, provider: mock, model: a }}\n  - {{ id: mock/b, provider: mock, model: b }}\nroutes:\n  always: {{ targets: [mock/a, mock/b] }}\n  {extra}: {{ targets: [{target}] }}\n"
    )
}

/// Replace the file the way editors do: a new file renamed over it.
fn write_atomically(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn reloads(metrics: &str, result: &str) -> u64 {
    let name = format!("switchyard_config_reloads_total{{result=\"{result}\"}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&name).map(|v| v.trim().parse().unwrap()))
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_config_reloads_when_its_file_changes_and_no_request_fails() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let (gw, path, _dir) = watching(&watched_yaml(&mock.base_url(), "r0", "mock/a")).await;
    let (base, admin) = (gw.base_url(), gw.admin_url());
    let http = reqwest::Client::new();
    // An opened circuit must stay open across every reload.
    let r = http
        .post(format!("{admin}/admin/deployments/mock%2Fb/open"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Continuous traffic on the route every version has.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let traffic = {
        let (http, base, stop) = (http.clone(), base.clone(), stop.clone());
        tokio::spawn(async move {
            let (mut ok, mut failed) = (0u32, Vec::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = http
                    .post(format!("{base}/v1/chat/completions"))
                    .json(&json!({"model": "always", "messages": [{"role": "user", "content": "hi"}]}))
                    .send()
                    .await;
                match r {
                    Ok(r) if r.status() == 200 => ok += 1,
                    Ok(r) => failed.push(r.status().as_u16()),
                    Err(e) => failed.push(e.status().map_or(0, |s| s.as_u16())),
                }
            }
            (ok, failed)
        })
    };
    // Within 5 s, route `model` answers 200.
    let serves = |model: String, what: String| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let answers = || {
                let r = http
                    .post(format!("{base}/v1/chat/completions"))
                    .json(&json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}))
                    .send();
                async move { (r.await.unwrap().status() == 200).then_some(()) }
            };
            common::eventually_within(Duration::from_secs(5), answers, &what).await
        }
    };
    let metrics = || {
        let url = format!("{admin}/metrics");
        async move { reqwest::get(url).await.unwrap().text().await.unwrap() }
    };
    for i in 1..=6 {
        // Routes added, targets changed; in place or renamed over.
        let target = if i % 2 == 0 {
            "mock/a"
        } else {
            "mock/b, mock/a"
        };
        let text = watched_yaml(&mock.base_url(), &format!("r{i}"), target);
        if i % 2 == 0 {
            write_atomically(&path, &text);
        } else {
            std::fs::write(&path, &text).unwrap();
        }
        serves(
            format!("r{i}"),
            format!("route r{i} serves after the write"),
        )
        .await;
        if i == 3 {
            // A broken file: counted, and the last good config keeps serving.
            let errors = reloads(&metrics().await, "error");
            write_atomically(&path, "routes: { broken: { targets: [nowhere/x] } }\n");
            common::eventually_within(
                Duration::from_secs(5),
                || async { (reloads(&metrics().await, "error") > errors).then_some(()) },
                "the broken file's reload was counted as an error",
            )
            .await;
            serves("r3".into(), "the last good config still serves".into()).await;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (ok, failed) = traffic.await.unwrap();
    assert!(ok > 20, "{ok} requests served during the reloads");
    assert!(failed.is_empty(), "no request failed: {failed:?}");
    let state: Value = reqwest::get(format!("{admin}/admin/state"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let b = state["deployments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["id"] == "mock/b")
        .unwrap();
    assert_eq!(
        b["circuit"], "open",
        "the opened circuit stayed open: {state}"
    );
    assert!(reloads(&metrics().await, "ok") >= 6);
    gw.shutdown().await;
}

/// One provider with one key of value `key` (label `inline#0`) behind
/// route `route`.
fn keyed_yaml(mock: &str, key: &str, route: &str) -> String {
    format!(
        "server: {{ listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0 }}\nusage: {{ store: off }}\nproviders:\n  mock: {{ protocol: openai, base_url: \"{mock}/v1\", keys: [{{ value: {key} }}] }}\nmodels:\n  - {{ id: mock/a, provider: mock, model: a }}\nroutes:\n  {route}: {{ targets: [mock/a] }}\n"
    )
}

/// A key the upstream rejected stays aside across a reload that keeps its
/// value, and is back in use after one that changes it (a rotated key).
#[tokio::test]
async fn a_reload_that_changes_a_rejected_key_restores_it() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    mock.set_valid_keys(vec!["key-new".into()]);
    let (gw, path, _dir) = watching(&keyed_yaml(&mock.base_url(), "key-old", "first")).await;
    let http = reqwest::Client::new();
    let ask = |route: &'static str| {
        http.post(format!("{}/v1/chat/completions", gw.base_url()))
            .json(&json!({"model": route, "messages": [{"role": "user", "content": "hi"}]}))
            .send()
    };
    let key_status = || async {
        let state: Value = reqwest::get(format!("{}/admin/state", gw.admin_url()))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        state["deployments"][0]["keys"][0]["status"].clone()
    };
    let reload = || async {
        let r = http
            .post(format!("{}/admin/reload", gw.admin_url()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    };
    assert_eq!(ask("first").await.unwrap().status(), 401);
    assert_eq!(key_status().await, "quarantined");

    // Same key, another route: still aside (and refused without a call).
    std::fs::write(&path, keyed_yaml(&mock.base_url(), "key-old", "second")).unwrap();
    reload().await;
    assert_eq!(key_status().await, "quarantined");
    let calls = mock
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(ask("second").await.unwrap().status(), 401);
    let again = mock
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .count();
    assert_eq!(calls, again, "a key set aside is not tried");

    // The key rotated in the config: in use at once.
    std::fs::write(&path, keyed_yaml(&mock.base_url(), "key-new", "second")).unwrap();
    reload().await;
    assert_eq!(key_status().await, "active");
    assert_eq!(ask("second").await.unwrap().status(), 200);
    gw.shutdown().await;
}
