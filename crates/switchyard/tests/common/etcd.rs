//! A real single-member etcd for a test: client and peer URLs on free
//! loopback ports, its data in a folder of its own (kept across
//! [`Etcd::stop`] and [`Etcd::restart`], removed on drop). Debian's
//! `etcd-server` is installed with apt-get when missing (`common::apt`).
//! Keys are written with the `etcd-client` crate, the gateway's own client.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use etcd_client::Client;

pub struct Etcd {
    /// The client port (`etcd://127.0.0.1:{port}/KEY`).
    pub port: u16,
    peer_port: u16,
    bin: PathBuf,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Etcd {
    /// Started and answering reads.
    pub async fn start() -> Etcd {
        let bin = super::apt::binary(&["etcd"], &["/usr/bin"], "etcd-server");
        let port = super::free_port();
        let peer_port = std::iter::repeat_with(super::free_port)
            .find(|p| *p != port)
            .expect("a second free port");
        let mut e = Etcd {
            port,
            peer_port,
            bin,
            child: None,
            dir: tempfile::tempdir().unwrap(),
        };
        e.run().await;
        e
    }

    /// Killed at once (as a crash, or a host going away, would): its data
    /// stays for [`Self::restart`].
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Again on the same ports and data: the keys written before are there.
    pub async fn restart(&mut self) {
        self.stop();
        self.run().await;
    }

    async fn run(&mut self) {
        let url = |p: u16| format!("http://127.0.0.1:{p}");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("etcd.log"))
            .unwrap();
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--name=test")
            .arg(format!(
                "--data-dir={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--listen-client-urls={}", url(self.port)))
            .arg(format!("--advertise-client-urls={}", url(self.port)))
            .arg(format!("--listen-peer-urls={}", url(self.peer_port)))
            .arg(format!(
                "--initial-advertise-peer-urls={}",
                url(self.peer_port)
            ))
            .arg(format!("--initial-cluster=test={}", url(self.peer_port)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        // etcd 3.4 refuses to start on an architecture it does not list
        // (arm64 among them) unless told this one is meant.
        if std::env::consts::ARCH == "aarch64" {
            cmd.env("ETCD_UNSUPPORTED_ARCH", "arm64");
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        self.child = Some(child);
        let (child, port) = (&mut self.child, self.port);
        // Until a read answers: the port opens before the member has
        // elected itself leader.
        let ready = super::poll_within(super::PATIENCE, || {
            let exited = child.as_mut().and_then(|c| c.try_wait().ok().flatten());
            async move {
                if let Some(status) = exited {
                    return Some(Err(status));
                }
                let read = async { client_on(port).await.get("ready?", None).await };
                let answered = tokio::time::timeout(Duration::from_secs(1), read).await;
                matches!(answered, Ok(Ok(_))).then_some(Ok(()))
            }
        })
        .await;
        match ready {
            Some(Ok(())) => {}
            Some(Err(status)) => panic!("etcd exited at start ({status})\n{}", self.log()),
            None => panic!("etcd did not answer on {}\n{}", self.port, self.log()),
        }
    }

    /// `etcd://127.0.0.1:{port}/{key}`: what `--config` takes.
    pub fn url(&self, key: &str) -> String {
        format!("etcd://127.0.0.1:{}/{key}", self.port)
    }

    pub async fn client(&self) -> Client {
        client_on(self.port).await
    }

    pub async fn put(&self, key: &str, value: &str) {
        self.client()
            .await
            .put(key, value, None)
            .await
            .unwrap_or_else(|e| panic!("etcd put {key}: {e}"));
    }

    pub async fn delete(&self, key: &str) {
        self.client()
            .await
            .delete(key, None)
            .await
            .unwrap_or_else(|e| panic!("etcd delete {key}: {e}"));
    }

    /// The tail of etcd's own log, for failure messages.
    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.dir.path().join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

async fn client_on(port: u16) -> Client {
    Client::connect([format!("127.0.0.1:{port}")], None)
        .await
        .expect("an etcd client")
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}
