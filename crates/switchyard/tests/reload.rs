//! Config reload through the admin API: a good config is swapped in
//! atomically, a bad one is refused and the old one keeps serving.

use serde_json::{json, Value};
use switchyard::observe::decision_log::DecisionSink;
use switchyard::{config, server};
use switchyard_mock::MockServer;

fn yaml(mock: &str, route: &str) -> String {
    format!(
        "server: {{ listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0 }}\nusage: {{ store: off }}\nproviders:\n  mock: {{ protocol: openai, base_url: \"{mock}/v1\" }}\nmodels:\n  - {{ id: mock/a, provider: mock, model: a }}\nroutes:\n  {route}: {{ targets: [mock/a] }}\n"
    )
}

#[tokio::test]
async fn reload_swaps_a_valid_config_and_refuses_a_broken_one() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.yaml");
    std::fs::write(&path, yaml(&mock.base_url(), "first")).unwrap();
    let cfg = config::load_file(&path).unwrap();
    let gw = server::start(
        cfg,
        server::Options {
            decisions: DecisionSink::Off,
            config_path: Some(path.clone()),
            workers: server::Workers::Current,
        },
    )
    .await
    .unwrap();
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
    assert!(
        m.contains(r#"switchyard_config_reloads_total{result="ok"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(r#"switchyard_config_reloads_total{result="error"} 1"#),
        "{m}"
    );
    gw.shutdown().await;
}
