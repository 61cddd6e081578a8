//! Gateways as separate processes of the built binary (`switchyard serve
//! --config FILE`), for what one process cannot show: several instances on
//! one shared store, a kill, a graceful stop. The mock provider they call
//! runs in the test's process (it is the upstream being mocked, not a
//! gateway).
//!
//! The YAML is what [`super::start`] takes: no `server:` section (the
//! instance adds one on fresh loopback ports), `{mock}` is the mock's base
//! URL, `{dir}` the instance's own temporary directory, and without a
//! `usage:` section the usage store is `{dir}/usage.db`. The process gets
//! the same variables the in-process harness resolves (`TEST_KEY`,
//! `CLIENT_KEY`, `ADMIN_KEY`), plus the ones the test passes. Its standard
//! output (log lines and the decision log) and standard error go to files
//! in that directory: [`Instance::stdout`], [`Instance::stderr`].

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use switchyard_mock::MockServer;

/// How long a process gets to answer `GET /readyz` with 200.
const READY_WITHIN: Duration = Duration::from_secs(15);
/// How long a SIGTERM'd process gets to exit.
const STOP_WITHIN: Duration = Duration::from_secs(20);
/// Tries with fresh ports when another process took one of ours between
/// choosing it and the gateway binding it.
const PORT_TRIES: usize = 3;

/// The variables the in-process harness resolves, with the same values.
const DEFAULT_ENVS: &[(&str, &str)] = &[
    ("TEST_KEY", "sk-test-secret-value-1234"),
    ("CLIENT_KEY", "client-secret"),
    ("ADMIN_KEY", "admin-secret"),
];

pub struct Instance {
    /// The client-facing port (`server.listen`).
    pub port: u16,
    /// The admin port (`server.admin_listen`).
    pub admin_port: u16,
    /// `gw0`, `gw1`, … (for messages).
    pub name: String,
    /// The admin key [`Self::admin_json`] and [`Self::metrics`] send, when
    /// `server.admin_key_env` names a variable the process was given.
    pub admin_key: Option<String>,
    /// The mock provider `{mock}` named (shared by a [`fleet`]).
    pub mock: Arc<MockServer>,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

/// `n` instances of the same config on one mock provider, started
/// concurrently (`gw0` … `gw{n-1}`).
pub async fn fleet(yaml: &str, n: usize, envs: &[(&str, &str)]) -> Vec<Instance> {
    let mock = Arc::new(MockServer::start("127.0.0.1:0").await.expect("mock starts"));
    let names: Vec<String> = (0..n).map(|i| format!("gw{i}")).collect();
    let starts = names
        .iter()
        .map(|name| Instance::start_on(mock.clone(), name, yaml, "", envs));
    futures_util::future::join_all(starts).await
}

impl Instance {
    /// Writes `yaml` (with a `server:` section on fresh ports) to a
    /// temporary directory, runs `switchyard serve --config <file>` there
    /// with `envs`, and waits until `GET /readyz` on the admin port answers
    /// 200; panics with the process's output if it exits first or is not
    /// ready within 15 s.
    pub async fn start(yaml: &str, envs: &[(&str, &str)]) -> Instance {
        Self::start_with(yaml, "", envs).await
    }

    /// [`Self::start`] with more `server:` keys (`server_extra`, indented
    /// two spaces as under `server:`, e.g. `"  admin_key_env: ADMIN_KEY"`).
    pub async fn start_with(yaml: &str, server_extra: &str, envs: &[(&str, &str)]) -> Instance {
        let mock = Arc::new(MockServer::start("127.0.0.1:0").await.expect("mock starts"));
        Self::start_on(mock, "gw", yaml, server_extra, envs).await
    }

    /// [`Self::start_with`] against a given mock provider.
    pub async fn start_on(
        mock: Arc<MockServer>,
        name: &str,
        yaml: &str,
        server_extra: &str,
        envs: &[(&str, &str)],
    ) -> Instance {
        let mut last = String::new();
        for _ in 0..PORT_TRIES {
            let mut i = Self::spawn(mock.clone(), name, yaml, server_extra, envs);
            match i.wait_ready().await {
                Ok(()) => return i,
                Err(e) if e.contains("ddress already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("{last}");
    }

    fn spawn(
        mock: Arc<MockServer>,
        name: &str,
        yaml: &str,
        server_extra: &str,
        envs: &[(&str, &str)],
    ) -> Instance {
        let dir = tempfile::tempdir().expect("temporary directory");
        let port = super::free_port();
        let admin_port = std::iter::repeat_with(super::free_port)
            .find(|p| *p != port)
            .expect("a second free port");
        let yaml = yaml
            .replace("{mock}", &mock.base_url())
            .replace("{dir}", &dir.path().display().to_string());
        let has_usage = yaml.starts_with("usage:") || yaml.contains("\nusage:");
        let usage = if has_usage {
            String::new()
        } else {
            format!("usage:\n  path: {}/usage.db\n", dir.path().display())
        };
        let full = format!(
            "server:\n  listen: 127.0.0.1:{port}\n  admin_listen: 127.0.0.1:{admin_port}\n{server_extra}\n{yaml}\n{usage}"
        );
        let config = dir.path().join("gateway.yaml");
        std::fs::write(&config, full).expect("config written");
        let env_value = |k: &str| {
            envs.iter()
                .chain(DEFAULT_ENVS)
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        };
        let admin_key = admin_key_env(server_extra).and_then(|k| env_value(&k));
        let args = ["serve".into(), "--config".into(), config.into_os_string()];
        let mut i = Self::run(mock, name, dir, (port, admin_port), &args, envs);
        i.admin_key = admin_key;
        i
    }

    /// A gateway whose config is kept elsewhere (`source` is what
    /// `--config` takes: an etcd key the test wrote), on fresh ports given
    /// as `--listen` and `--admin-listen`: instances started so share one
    /// config text, and so its version. Waited for as [`Self::start`].
    pub async fn start_from(
        mock: Arc<MockServer>,
        name: &str,
        source: &str,
        envs: &[(&str, &str)],
    ) -> Instance {
        let mut last = String::new();
        for _ in 0..PORT_TRIES {
            let port = super::free_port();
            let admin_port = std::iter::repeat_with(super::free_port)
                .find(|p| *p != port)
                .expect("a second free port");
            let args = [
                "serve".to_owned(),
                "--config".into(),
                source.into(),
                "--listen".into(),
                format!("127.0.0.1:{port}"),
                "--admin-listen".into(),
                format!("127.0.0.1:{admin_port}"),
            ]
            .map(std::ffi::OsString::from);
            let dir = tempfile::tempdir().expect("temporary directory");
            let mut i = Self::run(mock.clone(), name, dir, (port, admin_port), &args, envs);
            match i.wait_ready().await {
                Ok(()) => return i,
                Err(e) if e.contains("ddress already in use") => last = e,
                Err(e) => panic!("{e}"),
            }
        }
        panic!("{last}");
    }

    /// The binary with `args`, in `dir`, its output in files there.
    fn run(
        mock: Arc<MockServer>,
        name: &str,
        dir: tempfile::TempDir,
        (port, admin_port): (u16, u16),
        args: &[std::ffi::OsString],
        envs: &[(&str, &str)],
    ) -> Instance {
        let out = std::fs::File::create(dir.path().join("stdout.log")).expect("stdout file");
        let err = std::fs::File::create(dir.path().join("stderr.log")).expect("stderr file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchyard"));
        cmd.args(args)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err);
        for (k, v) in DEFAULT_ENVS.iter().chain(envs) {
            cmd.env(k, v);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", env!("CARGO_BIN_EXE_switchyard")));
        Instance {
            port,
            admin_port,
            name: name.to_owned(),
            admin_key: None,
            mock,
            child: Some(child),
            dir,
        }
    }

    async fn wait_ready(&mut self) -> Result<(), String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .build()
            .unwrap();
        let readyz = self.admin("/readyz");
        let last = std::cell::RefCell::new(String::from("no answer"));
        let child = &mut self.child;
        // `Some(Ok)` ready, `Some(Err)` exited, `None` not yet.
        let outcome = super::poll_within(READY_WITHIN, || {
            let exited = child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            let probe = match exited {
                Some(status) => Err(status),
                None => Ok(http.get(&readyz).send()),
            };
            let last = &last;
            async move {
                match probe {
                    Err(status) => Some(Err(status)),
                    Ok(ready) => match ready.await {
                        Ok(r) if r.status() == 200 => Some(Ok(())),
                        Ok(r) => {
                            *last.borrow_mut() = format!("/readyz answered {}", r.status());
                            None
                        }
                        Err(e) => {
                            *last.borrow_mut() = e.to_string();
                            None
                        }
                    },
                }
            }
        })
        .await;
        match outcome {
            Some(Ok(())) => Ok(()),
            Some(Err(status)) => {
                self.child = None;
                Err(format!(
                    "{} exited before it was ready ({status})\n{}",
                    self.name,
                    self.output_tails()
                ))
            }
            None => {
                self.kill();
                Err(format!(
                    "{} was not ready within {READY_WITHIN:?} ({})\n{}",
                    self.name,
                    last.into_inner(),
                    self.output_tails()
                ))
            }
        }
    }

    /// `http://127.0.0.1:{port}{path}`: the client-facing API.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `http://127.0.0.1:{admin_port}{path}`: the admin API.
    pub fn admin(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.admin_port)
    }

    fn admin_get(&self, path: &str) -> reqwest::RequestBuilder {
        let r = reqwest::Client::new().get(self.admin(path));
        match &self.admin_key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    /// `GET` an admin path (with the admin key, if any): its JSON; panics
    /// unless it answers 200.
    pub async fn admin_json(&self, path: &str) -> serde_json::Value {
        let r = self
            .admin_get(path)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{} {path}: {e}", self.name));
        let status = r.status();
        let text = r.text().await.unwrap();
        assert_eq!(status, 200, "{} {path}: {text}", self.name);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} {path}: not JSON ({e}): {text}", self.name))
    }

    /// `/metrics` as text.
    pub async fn metrics(&self) -> String {
        let r = self.admin_get("/metrics").send().await.unwrap();
        assert_eq!(r.status(), 200, "{} /metrics", self.name);
        r.text().await.unwrap()
    }

    /// The instance's own directory (its config, logs, SQLite store).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The config file the process runs on.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("gateway.yaml")
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Everything the process wrote on standard output so far: its log
    /// lines and the decision log.
    pub fn stdout(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stdout.log")).unwrap_or_default()
    }

    /// Everything the process wrote on standard error so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr.log")).unwrap_or_default()
    }

    /// The decision-log lines so far (stdout's JSON lines with a
    /// `request_id` and `candidates`), parsed.
    pub fn decisions(&self) -> Vec<serde_json::Value> {
        self.stdout()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v.get("request_id").is_some() && v.get("candidates").is_some())
            .collect()
    }

    /// Stdout's lines that are not decision-log lines: the process's own
    /// log (start-up, warnings, errors).
    pub fn log_lines(&self) -> Vec<String> {
        self.stdout()
            .lines()
            .filter(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .map_or(true, |v| v.get("candidates").is_none())
            })
            .map(str::to_owned)
            .collect()
    }

    /// The last lines of stderr and of the log on stdout (decision lines
    /// left out), for failure messages.
    pub fn output_tails(&self) -> String {
        let log = self.log_lines();
        format!(
            "--- {} stderr (tail) ---\n{}\n--- {} log on stdout (tail, no decision lines) ---\n{}",
            self.name,
            tail(&self.stderr(), 40),
            self.name,
            log[log.len().saturating_sub(40)..].join("\n")
        )
    }

    /// SIGKILL, and wait for the process to be gone.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM (a graceful stop: in-flight requests finish, usage rows and
    /// decision lines are written), and wait for the exit; panics if it
    /// takes over 20 s (after a SIGKILL).
    pub async fn stop(&mut self) -> ExitStatus {
        let Some(mut c) = self.child.take() else {
            panic!("{} is not running", self.name);
        };
        let sent = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        if sent {
            let exited = super::poll_within(STOP_WITHIN, || {
                let status = c.try_wait().ok().flatten();
                async move { status }
            });
            if let Some(status) = exited.await {
                return status;
            }
        }
        let _ = c.kill();
        let _ = c.wait();
        panic!(
            "{} did not exit within {STOP_WITHIN:?} of SIGTERM (sent: {sent})\n{}",
            self.name,
            self.output_tails()
        );
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The variable `server_extra` names in `admin_key_env:`, if any.
fn admin_key_env(server_extra: &str) -> Option<String> {
    let rest = server_extra.split("admin_key_env:").nth(1)?;
    let name: String = rest
        .trim_start()
        .trim_start_matches(['"', '\''])
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A sample's value in Prometheus text (`name{labels}` exactly as written),
/// 0 when absent.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| {
            l.strip_prefix(name)
                .filter(|v| v.starts_with(' '))
                .and_then(|v| v.trim().parse::<f64>().ok())
        })
        .unwrap_or(0.0)
}
