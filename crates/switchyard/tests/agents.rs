//! The real agent CLIs end to end through the gateway: Claude Code (Anthropic
//! door, `/v1/messages`) and Codex (Responses door, `/v1/responses`), pinned in
//! `agents/package.json`, each against one mock upstream per protocol whose
//! default behavior is a one-step tool loop. A run passes when the CLI ran the
//! shell command the mock asked for, sent its output back through the gateway
//! and printed the mock's final answer.
//!
//! The CLIs are installed with `npm ci --prefix agents` when missing (once per
//! test binary, under a file lock across processes); if that cannot be done the
//! tests fail — they never skip.

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard_mock::{Behavior, RecordedRequest};
use tokio::io::AsyncReadExt;

/// What the shell command prints; the mock's final answer quotes the tool result.
const MARKER: &str = "switchyard-tool-ok";
const COMMAND: &str = "echo switchyard-tool-ok";
const FINAL: &str = "FINAL: {result}";
/// A hard limit per CLI run (a run takes about a second).
const RUN_TIMEOUT: Duration = Duration::from_secs(90);

/// Route names the CLIs send as `model`: names their own model catalogues know,
/// so they use real metadata and print no warning.
const CLAUDE_MODEL: &str = "claude-sonnet-5-5";
const CODEX_MODEL: &str = "gpt-5.5";

// === upstreams ===

/// One upstream protocol: a provider with one deployment behind both routes.
struct Upstream {
    protocol: &'static str,
    yaml: &'static str,
    /// Does a mock request path belong to this protocol's generation endpoint?
    path: fn(&str) -> bool,
}

const DEPLOYMENT: &str = "up/model";

const OPENAI: Upstream = Upstream {
    protocol: "openai",
    yaml: r#"
providers:
  up: { protocol: openai, base_url: "{mock}/v1", keys: [{ env: TEST_KEY }] }
models:
  - { id: up/model, provider: up, model: gpt-4o-mini, max_output_tokens: 4096 }
"#,
    path: |p| p == "/v1/chat/completions",
};

/// An OpenAI upstream that serves the Responses API itself: the Responses door
/// passes Codex's requests through (the other doors still speak Chat
/// Completions to it, so Claude Code has no lane of its own here).
const OPENAI_RESPONSES: Upstream = Upstream {
    protocol: "openai (responses)",
    yaml: r#"
providers:
  up: { protocol: openai, base_url: "{mock}/v1", keys: [{ env: TEST_KEY }] }
models:
  - { id: up/model, provider: up, model: gpt-5.5, capabilities: [tools, streaming, responses] }
"#,
    path: |p| p.starts_with("/v1/responses"),
};

const ANTHROPIC: Upstream = Upstream {
    protocol: "anthropic",
    yaml: r#"
providers:
  up: { protocol: anthropic, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
models:
  - { id: up/model, provider: up, model: claude-sonnet-4-5, max_output_tokens: 4096 }
"#,
    path: |p| p == "/v1/messages" || p.starts_with("/v1/messages?"),
};

const GEMINI: Upstream = Upstream {
    protocol: "gemini",
    yaml: r#"
providers:
  up: { protocol: gemini, base_url: "{mock}", keys: [{ env: TEST_KEY }] }
models:
  - { id: up/model, provider: up, model: gemini-2.5-flash, max_output_tokens: 4096 }
"#,
    path: |p| {
        p.starts_with("/v1beta/models/gemini-2.5-flash:")
            && (p.contains(":streamGenerateContent") || p.contains(":generateContent"))
    },
};

const AZURE: Upstream = Upstream {
    protocol: "azure",
    yaml: r#"
providers:
  up: { protocol: azure, base_url: "{mock}", api_version: 2024-10-21, keys: [{ env: TEST_KEY }] }
models:
  - { id: up/model, provider: up, model: my-deployment, max_output_tokens: 4096 }
"#,
    path: |p| p.starts_with("/openai/deployments/my-deployment/"),
};

/// Amazon Bedrock, Converse (SigV4 the mock verifies, event-stream frames).
const BEDROCK: Upstream = Upstream {
    protocol: "bedrock (converse)",
    yaml: r#"
providers:
  up: { protocol: bedrock, region: us-east-1, base_url: "{mock}", credentials: { env_prefix: MOCK_AWS } }
models:
  - { id: up/model, provider: up, model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", max_output_tokens: 4096 }
"#,
    path: |p| p.ends_with("/converse") || p.ends_with("/converse-stream"),
};

/// Amazon Bedrock, InvokeModel with the Anthropic body.
const BEDROCK_INVOKE: Upstream = Upstream {
    protocol: "bedrock (invoke)",
    yaml: r#"
providers:
  up: { protocol: bedrock, region: us-east-1, base_url: "{mock}", credentials: { env_prefix: MOCK_AWS } }
models:
  - { id: up/model, provider: up, model: "anthropic.claude-sonnet-4-5-20250929-v1:0", api: invoke, max_output_tokens: 4096 }
"#,
    path: |p| p.ends_with("/invoke") || p.ends_with("/invoke-with-response-stream"),
};

/// Claude on Google Vertex AI (a service account's token from the mock).
const VERTEX: Upstream = Upstream {
    protocol: "vertex (claude)",
    yaml: r#"
providers:
  up: { protocol: vertex, project: p, location: us-east5, base_url: "{mock}", credentials: { file: "{dir}/sa.json" } }
models:
  - { id: up/model, provider: up, model: "claude-sonnet-4-5@20250929", max_output_tokens: 4096 }
"#,
    path: |p| p.contains("/publishers/anthropic/models/claude-sonnet-4-5@20250929:"),
};

/// The gateway over `up`, its mock answering every request with the tool loop
/// of `tool(arguments)`. The directory holds a service account whose
/// `token_uri` is the mock's (for Vertex).
async fn gateway(up: &Upstream, tool: &str, arguments: Value) -> common::Harness {
    let yaml = format!(
        "{}routes:\n  {CLAUDE_MODEL}: {{ targets: [{DEPLOYMENT}] }}\n  {CODEX_MODEL}: {{ targets: [{DEPLOYMENT}] }}\n",
        up.yaml
    );
    let mock = switchyard_mock::MockServer::start("127.0.0.1:0")
        .await
        .expect("mock starts");
    let dir = std::sync::Arc::new(tempfile::tempdir().expect("temporary directory"));
    let mut sa: Value =
        serde_json::from_str(switchyard_mock::DEFAULT_SERVICE_ACCOUNT).expect("service account");
    sa["token_uri"] = json!(format!("{}/token", mock.base_url()));
    std::fs::write(dir.path().join("sa.json"), sa.to_string()).expect("service account file");
    let h = common::start_on(mock, &yaml, "", dir).await;
    h.mock
        .set_default(Behavior::tool_loop(tool, arguments, FINAL));
    h
}

// === installing the CLIs ===

struct Clis {
    claude: PathBuf,
    codex: PathBuf,
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
}

fn path_var() -> String {
    std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into())
}

/// The installed CLIs; installs them on first use. Panics (fails the test)
/// when they cannot be installed.
fn clis() -> &'static Clis {
    static CLIS: OnceLock<Result<Clis, String>> = OnceLock::new();
    match CLIS.get_or_init(install) {
        Ok(c) => c,
        Err(e) => panic!("the agent CLIs are not installed and could not be installed:\n{e}"),
    }
}

fn install() -> Result<Clis, String> {
    let agents = repo_root().join("agents");
    let bin = agents.join("node_modules/.bin");
    let clis = Clis {
        claude: bin.join("claude"),
        codex: bin.join("codex"),
    };
    // One installer at a time, across test processes too.
    let lock_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("agents-install.lock");
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("cannot lock {}: {e}", lock_path.display()))?;
    if clis.check().is_ok() {
        return Ok(clis);
    }
    if !succeeds(std::process::Command::new("npm").arg("--version")) {
        eprintln!("agents: npm not found; trying `apt-get install -y nodejs npm`");
        let apt = |args: &[&str]| {
            let mut c = std::process::Command::new("apt-get");
            c.args(args).env("DEBIAN_FRONTEND", "noninteractive");
            run_blocking(&mut c)
        };
        apt(&["update"])
            .and_then(|_| apt(&["install", "-y", "nodejs", "npm"]))
            .map_err(|e| {
                format!("npm is not on PATH and installing it failed ({e}); install Node.js (>= 20) and npm, then run `npm ci --prefix agents`")
            })?;
    }
    eprintln!("agents: running `npm ci --prefix agents`");
    let started = Instant::now();
    run_blocking(
        std::process::Command::new("npm")
            .arg("ci")
            .arg("--prefix")
            .arg(&agents)
            .arg("--cache")
            .arg(agents.join(".npm-cache"))
            .args(["--no-audit", "--no-fund"]),
    )
    .map_err(|e| format!("`npm ci --prefix {}` failed: {e}", agents.display()))?;
    eprintln!("agents: installed in {:.1?}", started.elapsed());
    clis.check()
        .map_err(|e| format!("after `npm ci` the CLIs still do not run: {e}"))?;
    Ok(clis)
}

impl Clis {
    /// Both CLIs answer `--version`.
    fn check(&self) -> Result<(), String> {
        for (bin, expect) in [(&self.claude, "Claude Code"), (&self.codex, "codex-cli")] {
            let out = std::process::Command::new(bin)
                .arg("--version")
                .env_clear()
                .env("PATH", path_var())
                .stdin(Stdio::null())
                .output()
                .map_err(|e| format!("{}: {e}", bin.display()))?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() || !stdout.contains(expect) {
                return Err(format!(
                    "`{} --version`: {}, stdout {stdout:?}, stderr {:?}",
                    bin.display(),
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        Ok(())
    }
}

fn succeeds(cmd: &mut std::process::Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Run to completion, output passed through to the test's stderr.
fn run_blocking(cmd: &mut std::process::Command) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    eprint!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{:?} exited with {}: {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim_end()
        ))
    }
}

// === running a CLI ===

struct Run {
    status: Option<std::process::ExitStatus>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(s) => write!(f, "{s} after {:.1?}", self.elapsed)?,
            None => write!(f, "killed after {RUN_TIMEOUT:?}")?,
        }
        write!(
            f,
            "\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        )
    }
}

/// Kill the process group `pgid` (the CLI and whatever it started).
fn kill_group(pgid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// Run `cmd` (stdin null) in its own process group, at most [`RUN_TIMEOUT`].
async fn run(mut cmd: tokio::process::Command) -> Run {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let started = Instant::now();
    let mut child = cmd.spawn().expect("the CLI starts");
    let pgid = child.id().expect("a pid");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = tokio::spawn(async move {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b).await;
        b
    });
    let err = tokio::spawn(async move {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b).await;
        b
    });
    let status = tokio::time::timeout(RUN_TIMEOUT, child.wait())
        .await
        .ok()
        .map(|s| s.expect("wait for the CLI"));
    let elapsed = started.elapsed();
    // Whatever is left of the group (all of it on timeout) goes, so the pipes close.
    kill_group(pgid);
    let _ = child.kill().await;
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    let grace = Duration::from_secs(5);
    let stdout = tokio::time::timeout(grace, out)
        .await
        .map_or_else(|_| "<unread>".into(), |r| text(r.unwrap()));
    let stderr = tokio::time::timeout(grace, err)
        .await
        .map_or_else(|_| "<unread>".into(), |r| text(r.unwrap()));
    Run {
        status,
        stdout,
        stderr,
        elapsed,
    }
}

async fn claude_code(h: &common::Harness) -> Run {
    let clis = clis();
    let dir = tempfile::tempdir().unwrap();
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    let mut cmd = tokio::process::Command::new(&clis.claude);
    cmd.current_dir(&work)
        .env_clear()
        .env("PATH", path_var())
        .env("HOME", &home)
        .env("TERM", "dumb")
        .env("ANTHROPIC_BASE_URL", h.gw.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "0")
        // Loopback http only: any https request elsewhere is refused at once.
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .args(["-p", "run the marker command", "--model", CLAUDE_MODEL])
        .args(["--allowedTools", "Bash"]);
    run(cmd).await
}

async fn codex(h: &common::Harness) -> Run {
    let clis = clis();
    let dir = tempfile::tempdir().unwrap();
    let (home, work) = (dir.path().join("home"), dir.path().join("work"));
    let codex_home = home.join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            r#"model = "{CODEX_MODEL}"
model_provider = "switchyard"
check_for_update_on_startup = false

[model_providers.switchyard]
name = "switchyard"
base_url = "{}/v1"
env_key = "SWITCHYARD_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 30000

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
unbounded_connection_retries = false
"#,
            h.gw.base_url()
        ),
    )
    .unwrap();
    let mut cmd = tokio::process::Command::new(&clis.codex);
    cmd.current_dir(&work)
        .env_clear()
        .env("PATH", path_var())
        .env("HOME", &home)
        .env("CODEX_HOME", &codex_home)
        .env("SWITCHYARD_API_KEY", "test-key")
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .args([
            "exec",
            "--strict-config",
            "--skip-git-repo-check",
            "--ephemeral",
        ])
        .arg("--dangerously-bypass-approvals-and-sandbox")
        .arg("run the marker command");
    run(cmd).await
}

// === what a good run looks like ===

/// Every tool result in a request body, whatever the protocol: OpenAI
/// `role: tool` messages, Anthropic `tool_result` blocks, Gemini
/// `functionResponse` parts, Responses `function_call_output` items,
/// Bedrock Converse `toolResult` blocks.
fn tool_results(v: &Value, found: &mut Vec<String>) {
    match v {
        Value::Object(o) => {
            let is_result = o.get("role").and_then(Value::as_str) == Some("tool")
                || matches!(
                    o.get("type").and_then(Value::as_str),
                    Some("tool_result" | "function_call_output")
                )
                || o.contains_key("functionResponse")
                || o.contains_key("toolResult");
            if is_result {
                found.push(Value::Object(o.clone()).to_string());
            } else {
                o.values().for_each(|x| tool_results(x, found));
            }
        }
        Value::Array(a) => a.iter().for_each(|x| tool_results(x, found)),
        _ => {}
    }
}

fn results_of(r: &RecordedRequest) -> Vec<String> {
    let mut found = Vec::new();
    tool_results(r.json.as_ref().unwrap_or(&Value::Null), &mut found);
    found
}

async fn assert_tool_loop(h: &common::Harness, up: &Upstream, route: &str, run: &Run) {
    let who = format!("{route} via {}", up.protocol);
    assert!(
        run.status.is_some_and(|s| s.success()),
        "{who}: the CLI failed: {run}"
    );
    assert!(
        run.stdout.contains("FINAL:") && run.stdout.contains(MARKER),
        "{who}: no final answer with the tool's output on stdout: {run}"
    );
    // The mock: only this protocol's endpoint, the call, then its result
    // (besides, for Vertex, one access token fetched for the whole run).
    assert!(
        h.mock.token_requests() <= 1,
        "{who}: tokens fetched per request"
    );
    let reqs: Vec<RecordedRequest> = h
        .mock
        .requests()
        .into_iter()
        .filter(|r| r.path_and_query != "/token")
        .collect();
    let paths: Vec<&str> = reqs.iter().map(|r| r.path_and_query.as_str()).collect();
    assert!(
        reqs.len() >= 2 && paths.iter().all(|p| (up.path)(p)),
        "{who}: the mock saw {paths:?}"
    );
    assert_eq!(
        results_of(&reqs[0]),
        Vec::<String>::new(),
        "{who}: request 1"
    );
    let second = results_of(&reqs[1]);
    assert!(
        second
            .iter()
            .any(|r| r.contains(MARKER) && !r.contains(COMMAND)),
        "{who}: request 2 does not carry the command's output: {second:?}"
    );
    // The gateway: one decision per request, on this route and deployment, 200.
    h.decision(reqs.len() - 1).await;
    let decisions = h.decisions();
    assert_eq!(decisions.len(), reqs.len(), "{who}: {decisions:?}");
    for d in &decisions {
        assert_eq!(
            (
                d["route"].as_str(),
                d["selected"].as_str(),
                d["status"].as_u64()
            ),
            (Some(route), Some(DEPLOYMENT), Some(200)),
            "{who}: {d}"
        );
    }
    eprintln!("{who}: ok in {:.1?}", run.elapsed);
}

async fn claude_code_via(up: &Upstream) {
    let h = gateway(up, "Bash", json!({"command": COMMAND})).await;
    let run = claude_code(&h).await;
    assert_tool_loop(&h, up, CLAUDE_MODEL, &run).await;
}

async fn codex_via(up: &Upstream) {
    let h = gateway(up, "exec_command", json!({"cmd": COMMAND})).await;
    let run = codex(&h).await;
    assert_tool_loop(&h, up, CODEX_MODEL, &run).await;
}

// === Claude Code ===

#[tokio::test]
async fn claude_code_via_openai() {
    claude_code_via(&OPENAI).await;
}

#[tokio::test]
async fn claude_code_via_anthropic() {
    claude_code_via(&ANTHROPIC).await;
}

#[tokio::test]
async fn claude_code_via_gemini() {
    claude_code_via(&GEMINI).await;
}

#[tokio::test]
async fn claude_code_via_azure() {
    claude_code_via(&AZURE).await;
}

#[tokio::test]
async fn claude_code_via_bedrock() {
    claude_code_via(&BEDROCK).await;
}

#[tokio::test]
async fn claude_code_via_bedrock_invoke() {
    claude_code_via(&BEDROCK_INVOKE).await;
}

#[tokio::test]
async fn claude_code_via_vertex() {
    claude_code_via(&VERTEX).await;
}

// === Codex ===

#[tokio::test]
async fn codex_via_openai() {
    codex_via(&OPENAI).await;
}

#[tokio::test]
async fn codex_via_openai_responses() {
    codex_via(&OPENAI_RESPONSES).await;
}

#[tokio::test]
async fn codex_via_anthropic() {
    codex_via(&ANTHROPIC).await;
}

#[tokio::test]
async fn codex_via_gemini() {
    codex_via(&GEMINI).await;
}

#[tokio::test]
async fn codex_via_azure() {
    codex_via(&AZURE).await;
}

#[tokio::test]
async fn codex_via_bedrock() {
    codex_via(&BEDROCK).await;
}
