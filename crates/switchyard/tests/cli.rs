//! The `switchyard` binary on real files and signals: `check`, and `serve`
//! refusing a bad config and stopping cleanly on SIGTERM.

use std::process::Command;

fn check(yaml: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["check", "--config"])
        .arg(&path)
        .env_remove("MISSING_KEY_VAR")
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr)
        .unwrap()
        .replace(&path.display().to_string(), "FILE");
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        stderr,
    )
}

#[test]
fn check_reports_every_problem_with_file_line_column() {
    let yaml = "\
providers:
  openai:
    protocol: openai
    keys: [{ env: MISSING_KEY_VAR }]
    timeouts: { conect: 5s }
models:
  - id: openai/gpt-4o
    provider: openia
    model: gpt-4o
    pricing: { input: -1, output: 10 }
routes:
  chat:
    targets: [openai/gpt-4o, nowhere/model]
";
    let (code, _, stderr) = check(yaml);
    assert_eq!(code, 1, "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    let expect_prefixes = [
        "FILE:4:19: providers.openai.keys[0].env:",
        "FILE:5:17: providers.openai.timeouts.conect:",
        "FILE:8:15: models[0].provider:",
        "FILE:10:23: models[0].pricing.input:",
        "FILE:13:30: routes.chat.targets[1]:",
    ];
    for p in expect_prefixes {
        assert!(
            lines.iter().any(|l| l.starts_with(p)),
            "missing `{p}` in:\n{stderr}"
        );
    }
    assert!(stderr.contains("5 problem(s) found"), "{stderr}");
}

#[test]
fn check_accepts_a_valid_config() {
    let yaml = switchyard::demo::config_yaml("http://127.0.0.1:9", "127.0.0.1:0", "127.0.0.1:0");
    let (code, stdout, stderr) = check(&yaml);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("ok (3 providers, 3 deployments, 4 routes)"),
        "{stdout}"
    );
}

#[test]
fn serve_refuses_a_bad_config_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.yaml");
    std::fs::write(&path, "server: { listen: nowhere }\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(":1:19: server.listen:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `docker stop`, Kubernetes and systemd stop a process with SIGTERM: a
/// request in flight at that moment still gets its answer, a new connection
/// is refused, the decision-log line of every request is written, and the
/// exit is clean (code 0).
#[tokio::test]
async fn serve_stops_cleanly_on_sigterm() {
    let mock = switchyard_mock::MockServer::start("127.0.0.1:0")
        .await
        .unwrap();
    let (port, admin) = (free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gateway.yaml");
    let yaml = format!(
        "server: {{ listen: 127.0.0.1:{port}, admin_listen: 127.0.0.1:{admin} }}
providers:
  mock: {{ protocol: openai, base_url: {} }}
models:
  - {{ id: mock/gpt-4o-mini, provider: mock, model: gpt-4o-mini }}
routes:
  chat: {{ strategy: priority, targets: [mock/gpt-4o-mini] }}
observability: {{ log_format: json, log_requests: true }}
usage: {{ path: {}/usage.db }}
",
        mock.base_url(),
        dir.path().display()
    );
    std::fs::write(&path, yaml).unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--config"])
        .arg(&path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let http = reqwest::Client::new();
    let mut up = false;
    for _ in 0..200 {
        let health = http.get(format!("http://127.0.0.1:{admin}/healthz")).send();
        if health.await.is_ok_and(|r| r.status() == 200) {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(up, "the gateway did not come up");
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let body = |ms: u64| {
        serde_json::json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}],
            "mock": {"latency_ms": ms}})
    };
    let first = http.post(&url).json(&body(0)).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let slow = tokio::spawn(http.post(&url).json(&body(800)).send());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let kill = std::process::Command::new("sh")
        .args(["-c", &format!("kill -TERM {pid}")])
        .status()
        .unwrap();
    assert!(kill.success());
    // Stopping: a new connection is refused while the slow request drains.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let late = reqwest::Client::new()
        .post(&url)
        .json(&body(0))
        .send()
        .await;
    assert!(late.as_ref().is_err_and(|e| e.is_connect()), "{late:?}");
    let slow = slow
        .await
        .unwrap()
        .expect("the in-flight request is answered");
    assert_eq!(slow.status(), 200);
    let ids = [&first, &slow].map(|r| r.headers()["x-request-id"].to_str().unwrap().to_owned());
    let out = tokio::time::timeout(std::time::Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("the gateway exits after SIGTERM")
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{:?}", out.status);
    let stdout = String::from_utf8(out.stdout).unwrap();
    for id in ids {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(&format!("\"request_id\":\"{id}\""))),
            "no decision-log line for {id}:\n{stdout}"
        );
    }
}
