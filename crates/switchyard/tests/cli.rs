//! The `switchyard` binary's `check` command on real files.

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
        stdout.contains("ok (3 providers, 3 deployments, 2 routes)"),
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
