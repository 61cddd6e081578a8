//! The `switchyard` binary on real files and signals: `check`, and `serve`
//! refusing a bad config and stopping cleanly on SIGTERM.

mod common;

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

use common::free_port;

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
    common::eventually(
        || async {
            let health = http.get(format!("http://127.0.0.1:{admin}/healthz")).send();
            health.await.is_ok_and(|r| r.status() == 200)
        },
        "the gateway comes up",
    )
    .await;
    let url = format!("http://127.0.0.1:{port}/v1/chat/completions");
    let body = |ms: u64| {
        serde_json::json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}],
            "mock": {"latency_ms": ms}})
    };
    let first = http.post(&url).json(&body(0)).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let slow = tokio::spawn(http.post(&url).json(&body(800)).send());
    // The scenario: SIGTERM lands while the slow request is in flight.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let kill = std::process::Command::new("sh")
        .args(["-c", &format!("kill -TERM {pid}")])
        .status()
        .unwrap();
    assert!(kill.success());
    // Stopping: a new connection is refused while the slow request drains.
    // (A fixed pause for the listener to close: `late` below is the one
    // probe, and what it meets is the assertion.)
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

/// `check` shows a warning (a provider key written in clear) with its
/// position and still passes the config.
#[test]
fn check_warns_about_a_key_in_clear_and_passes() {
    let yaml = "providers:\n  p:\n    protocol: openai\n    keys: [{ value: sk-in-the-file }]\n";
    let (code, stdout, stderr) = check(yaml);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains(": ok ("), "{stdout}");
    assert!(
        stderr.starts_with(
            "FILE:4:21: warning: providers.p.keys[0].value: the key is written in clear"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("sk-in-the-file"), "{stderr}");
}

/// A gateway started by `args` in an empty folder (no ./switchyard.yaml:
/// the demo unless a config is given), with `env`.
fn spawn(args: &[&str], env: &[(&str, String)], dir: &std::path::Path) -> tokio::process::Child {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"));
    cmd.args(args)
        .current_dir(dir)
        .env_remove("SWITCHYARD_LISTEN")
        .env_remove("SWITCHYARD_ADMIN_LISTEN")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

/// The gateway answers a chat on `port` and health on `admin`, and the
/// admin API is not on the client port.
async fn serves_on(port: u16, admin: u16) {
    let http = reqwest::Client::new();
    let health = format!("http://127.0.0.1:{admin}/healthz");
    common::eventually(
        || async {
            http.get(&health)
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        },
        &format!("the admin API on {admin}"),
    )
    .await;
    let chat = http
        .post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
        .json(
            &serde_json::json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status(), 200, "the client API on {port}");
    let wrong = http
        .get(format!("http://127.0.0.1:{port}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 404);
}

/// The demo's addresses (`cargo run --release`, `switchyard serve`) and a
/// config file's can be set: `--listen` / `--admin-listen` win over
/// `SWITCHYARD_LISTEN` / `SWITCHYARD_ADMIN_LISTEN`, which win over the file.
#[tokio::test]
async fn listen_addresses_come_from_flags_then_env_then_file() {
    let dir = tempfile::tempdir().unwrap();
    let addr = |p: u16| format!("127.0.0.1:{p}");

    // The demo, by flags.
    let (port, admin) = (free_port(), free_port());
    let demo = spawn(
        &[
            "serve",
            "--listen",
            &addr(port),
            "--admin-listen",
            &addr(admin),
        ],
        &[],
        dir.path(),
    );
    serves_on(port, admin).await;
    drop(demo);

    // The demo with no command at all (what `cargo run --release` runs), by
    // the environment, and by a flag that wins over it.
    let (port, admin, loser) = (free_port(), free_port(), free_port());
    let demo = spawn(
        &["--admin-listen", &addr(admin)],
        &[
            ("SWITCHYARD_LISTEN", addr(port)),
            ("SWITCHYARD_ADMIN_LISTEN", addr(loser)),
        ],
        dir.path(),
    );
    serves_on(port, admin).await;
    drop(demo);

    // A config file: its addresses give way to the variable and the flag.
    let mock = switchyard_mock::MockServer::start("127.0.0.1:0")
        .await
        .unwrap();
    let (file_port, file_admin) = (free_port(), free_port());
    let path = dir.path().join("gateway.yaml");
    std::fs::write(
        &path,
        format!(
            "server: {{ listen: 127.0.0.1:{file_port}, admin_listen: 127.0.0.1:{file_admin} }}
providers:
  mock: {{ protocol: openai, base_url: {}/v1 }}
models:
  - {{ id: mock/gpt-4o-mini, provider: mock, model: gpt-4o-mini }}
routes:
  chat: {{ targets: [mock/gpt-4o-mini] }}
usage: {{ store: off }}
",
            mock.base_url()
        ),
    )
    .unwrap();
    let (port, admin) = (free_port(), free_port());
    let file = path.display().to_string();
    let gw = spawn(
        &["serve", "--config", &file, "--admin-listen", &addr(admin)],
        &[("SWITCHYARD_LISTEN", addr(port))],
        dir.path(),
    );
    serves_on(port, admin).await;
    for p in [file_port, file_admin] {
        assert!(
            std::net::TcpStream::connect(addr(p)).is_err(),
            "nothing listens on the file's {p}"
        );
    }
    drop(gw);

    // What the flags say is checked like the file: an admin API open to
    // the network with no key is refused.
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--config", &file, "--admin-listen", "0.0.0.0:0"])
        .env_remove("SWITCHYARD_LISTEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("server.admin_listen: `0.0.0.0:0` is not a loopback address")
            && stderr.contains("(from SWITCHYARD_ADMIN_LISTEN)"),
        "{stderr}"
    );
}

#[test]
fn help_names_the_listen_flags_and_variables() {
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for want in [
        "--listen <ADDR>",
        "--admin-listen <ADDR>",
        "SWITCHYARD_LISTEN",
    ] {
        assert!(help.contains(want), "{want} in:\n{help}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8(out.stdout).unwrap();
    for want in [
        "--listen <ADDR>",
        "SWITCHYARD_ADMIN_LISTEN",
        "built-in demo",
    ] {
        assert!(help.contains(want), "{want} in:\n{help}");
    }
}
