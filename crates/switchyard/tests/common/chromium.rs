//! Headless Chromium for the tests that look at a page, driven over the
//! Chrome DevTools Protocol: JSON messages on the browser page's websocket.
//! Finds Debian's `chromium` (or `chromium-browser`, `google-chrome`),
//! installs it with apt-get when none is there, and fails with a clear
//! message when it cannot — never skips. The browser (its whole process
//! group) is killed when dropped.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

const NAMES: [&str; 4] = [
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// The browser binary, installed with apt-get if missing.
pub fn binary() -> PathBuf {
    crate::common::apt::binary(&NAMES, &[], "chromium")
}

pub fn version() -> String {
    let out = Command::new(binary()).arg("--version").output();
    out.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// One headless browser with one page, and a CDP session on that page.
pub struct Browser {
    child: tokio::process::Child,
    pub cdp: Cdp,
    /// Events the browser sent (`Fetch.authRequired`, …), in order.
    pub events: mpsc::UnboundedReceiver<Value>,
    profile: tempfile::TempDir,
}

impl Browser {
    pub async fn launch(width: u32, height: u32) -> Browser {
        let bin = binary();
        let profile = tempfile::tempdir().expect("a profile directory");
        let log = std::fs::File::create(profile.path().join("chromium.log")).expect("log file");
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--hide-scrollbars",
            "--mute-audio",
            "--force-device-scale-factor=1",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},{height}"))
        .arg("about:blank")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log)
        // Its own process group: the renderers and helpers go with it.
        .process_group(0)
        .kill_on_drop(true);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let b = Browser::attach(child, profile).await;
        b.cdp
            .call(
                "Emulation.setDeviceMetricsOverride",
                json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
            )
            .await;
        b
    }

    async fn attach(child: tokio::process::Child, profile: tempfile::TempDir) -> Browser {
        let port = devtools_port(profile.path()).await;
        let list: Value = reqwest::get(format!("http://127.0.0.1:{port}/json/list"))
            .await
            .expect("the DevTools HTTP endpoint answers")
            .json()
            .await
            .expect("/json/list is JSON");
        let ws_url = list
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["type"] == "page")
            .and_then(|t| t["webSocketDebuggerUrl"].as_str())
            .unwrap_or_else(|| panic!("no page target in {list}"))
            .to_owned();
        let (cdp, events) = Cdp::connect(&ws_url).await;
        Browser {
            child,
            cdp,
            events,
            profile,
        }
    }

    /// The browser's stderr so far (for a failure message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.profile.path().join("chromium.log")).unwrap_or_default()
    }

    pub async fn navigate(&self, url: &str) {
        let r = self.cdp.call("Page.navigate", json!({"url": url})).await;
        assert!(r.get("errorText").is_none(), "navigating to {url}: {r}");
    }

    /// The value of a JavaScript expression (JSON-able), or the exception.
    pub async fn eval(&self, expression: &str) -> Result<Value, String> {
        let r = self
            .cdp
            .call(
                "Runtime.evaluate",
                json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
            )
            .await;
        if let Some(ex) = r.get("exceptionDetails") {
            return Err(ex.to_string());
        }
        Ok(r["result"]["value"].clone())
    }

    /// A PNG of the viewport.
    pub async fn screenshot(&self) -> Vec<u8> {
        use base64::Engine;
        let r = self
            .cdp
            .call("Page.captureScreenshot", json!({"format": "png"}))
            .await;
        let data = r["data"].as_str().expect("screenshot data");
        base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("screenshot is base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
        let _ = self.child.start_kill();
    }
}

/// Chromium writes its DevTools port to the profile once it listens.
async fn devtools_port(profile: &Path) -> u16 {
    let file = profile.join("DevToolsActivePort");
    let port = crate::common::poll_within(Duration::from_secs(30), || async {
        let text = std::fs::read_to_string(&file).ok()?;
        text.lines().next().and_then(|l| l.trim().parse().ok())
    });
    if let Some(port) = port.await {
        return port;
    }
    let log = std::fs::read_to_string(profile.join("chromium.log")).unwrap_or_default();
    panic!("chromium wrote no DevToolsActivePort within 30 s; its log:\n{log}");
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;

/// A CDP session: commands with ids, answers matched back to them by a
/// reader task, events passed on in order.
#[derive(Clone)]
pub struct Cdp {
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    next: Arc<AtomicU64>,
}

impl Cdp {
    async fn connect(url: &str) -> (Cdp, mpsc::UnboundedReceiver<Value>) {
        let (ws, _) = tokio_tungstenite::connect_async(url)
            .await
            .unwrap_or_else(|e| panic!("cannot open the DevTools websocket {url}: {e}"));
        let (mut sink, mut stream) = ws.split();
        let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
        tokio::spawn(async move {
            while let Some(m) = outgoing.recv().await {
                if sink.send(m).await.is_err() {
                    break;
                }
            }
        });
        let pending: Pending = Default::default();
        let (events_tx, events) = mpsc::unbounded_channel();
        let answers = pending.clone();
        tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                let Message::Text(text) = m else { continue };
                let Ok(v) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                match v["id"].as_u64() {
                    Some(id) => {
                        if let Some(tx) = answers.lock().unwrap().remove(&id) {
                            let _ = tx.send(v);
                        }
                    }
                    None => drop(events_tx.send(v)),
                }
            }
        });
        let cdp = Cdp {
            out,
            pending,
            next: Arc::new(AtomicU64::new(1)),
        };
        (cdp, events)
    }

    /// Sends a command and waits (up to 30 s) for its result.
    pub async fn call(&self, method: &str, params: Value) -> Value {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let msg = json!({"id": id, "method": method, "params": params}).to_string();
        self.out
            .send(Message::text(msg))
            .unwrap_or_else(|_| panic!("{method}: the DevTools connection is closed"));
        let answer = tokio::time::timeout(Duration::from_secs(30), rx)
            .await
            .unwrap_or_else(|_| panic!("{method}: no answer in 30 s"))
            .unwrap_or_else(|_| panic!("{method}: the DevTools connection closed"));
        if let Some(e) = answer.get("error") {
            panic!("{method} failed: {e}");
        }
        answer["result"].clone()
    }
}
