//! The repo's nginx config (`deploy/nginx/switchyard.conf`) in front of two
//! gateways, run by the real nginx: a stream goes through it event by event
//! (not buffered until the end), answers are spread over both instances, and
//! a flood from one caller is turned away by its `limit_req`.

mod common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use switchyard_mock::Behavior;

struct Nginx {
    child: Child,
    port: u16,
    /// `nginx -p DIR -c CONF`: how `-s stop` finds this instance.
    bin: std::path::PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for Nginx {
    /// `-s stop` (SIGTERM to the master, which stops its workers): killing
    /// the master outright would leave its workers running.
    fn drop(&mut self) {
        let _ = nginx_cmd(&self.bin, self.dir.path())
            .args(["-s", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // A blocking poll: `drop` cannot await.
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The repo's file with its two `server` lines and its `listen` pointed at
/// this test; the replacements must all match (the test follows the file).
fn site(upstreams: [&str; 2], port: u16) -> String {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/nginx/switchyard.conf"
    );
    let text = std::fs::read_to_string(path).expect("deploy/nginx/switchyard.conf");
    let mut out = text.clone();
    for (from, to) in [
        (
            "server 127.0.0.1:8080;".to_string(),
            format!("server {};", upstreams[0]),
        ),
        (
            "server 127.0.0.1:8081;".to_string(),
            format!("server {};", upstreams[1]),
        ),
        (
            "listen 80;".to_string(),
            format!("listen 127.0.0.1:{port};"),
        ),
    ] {
        assert!(
            out.contains(&from),
            "deploy/nginx/switchyard.conf has no `{from}`"
        );
        out = out.replace(&from, &to);
    }
    out
}

/// `nginx -p DIR -c DIR/nginx.conf -e DIR/logs/error.log`: this instance.
fn nginx_cmd(bin: &std::path::Path, dir: &std::path::Path) -> Command {
    let d = dir.display().to_string();
    let mut cmd = Command::new(bin);
    cmd.args([
        "-p",
        &d,
        "-c",
        &format!("{d}/nginx.conf"),
        "-e",
        &format!("{d}/logs/error.log"),
    ]);
    cmd
}

fn start_nginx(upstreams: [&str; 2]) -> Nginx {
    let bin = common::apt::binary(&["nginx"], &["/usr/sbin"], "nginx");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display().to_string();
    let port = common::free_port();
    // (`dir` moves into the guard below; `d` keeps its path.)
    std::fs::write(dir.path().join("switchyard.conf"), site(upstreams, port)).unwrap();
    for sub in ["logs", "tmp"] {
        std::fs::create_dir_all(dir.path().join(sub)).unwrap();
    }
    let main = format!(
        "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/logs/error.log warn;\nevents {{ worker_connections 1024; }}\nhttp {{\n  access_log off;\n  client_body_temp_path {d}/tmp/body;\n  proxy_temp_path {d}/tmp/proxy;\n  fastcgi_temp_path {d}/tmp/fastcgi;\n  uwsgi_temp_path {d}/tmp/uwsgi;\n  scgi_temp_path {d}/tmp/scgi;\n  include {d}/switchyard.conf;\n}}\n"
    );
    std::fs::write(dir.path().join("nginx.conf"), main).unwrap();
    let child = nginx_cmd(&bin, dir.path())
        .args(["-g", "daemon off;"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let mut nginx = Nginx {
        child,
        port,
        bin: bin.clone(),
        dir,
    };
    // A blocking poll: `start_nginx` is sync, like `Redis::start`.
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return nginx;
        }
        if let Ok(Some(status)) = nginx.child.try_wait() {
            let log = std::fs::read_to_string(format!("{d}/logs/error.log")).unwrap_or_default();
            panic!("nginx exited ({status}): {log}");
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    panic!("nginx did not listen on {port}");
}

fn addr(h: &common::Harness) -> String {
    h.gw.base_url().trim_start_matches("http://").to_owned()
}

#[tokio::test]
async fn a_stream_goes_through_nginx_event_by_event() {
    let (a, b) = (
        common::start(common::ONE_OPENAI).await,
        common::start(common::ONE_OPENAI).await,
    );
    // Five chunks 300 ms apart: buffered, nothing would arrive before ~1.2 s.
    for h in [&a, &b] {
        h.mock
            .set_default(Behavior::default().chunks(5).chunk_delay(300));
    }
    let nginx = start_nginx([&addr(&a), &addr(&b)]);
    let url = format!("http://127.0.0.1:{}/v1/chat/completions", nginx.port);
    let http = reqwest::Client::new();
    for _ in 0..2 {
        let started = Instant::now();
        let mut resp = http
            .post(&url)
            .json(&json!({"model": "chat", "stream": true, "messages": common::user("hi")}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let mut body = String::new();
        let mut first = None;
        while let Some(chunk) = resp.chunk().await.unwrap() {
            let text = String::from_utf8_lossy(&chunk);
            if first.is_none() && text.contains("data: {") {
                first = Some(started.elapsed());
            }
            body.push_str(&text);
        }
        let (first, all) = (first.expect("an event"), started.elapsed());
        assert!(all >= Duration::from_millis(1100), "{all:?}");
        // Unbuffered, the first event arrives while four more are still
        // 300 ms apart; buffered, it arrives with the last. Measured as the
        // gap to the end, so a busy machine slowing the whole stream down
        // does not pass for buffering.
        assert!(
            all.saturating_sub(first) >= Duration::from_millis(900),
            "the first event waited {first:?} of {all:?}: buffered"
        );
        assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
        assert!(!common::sse_text(&body).is_empty());
    }
    // Both instances served (nginx's round robin over the two lines).
    assert_eq!((a.mock.request_count(), b.mock.request_count()), (1, 1));
}

#[tokio::test]
async fn a_flood_from_one_caller_is_turned_away_in_front() {
    let (a, b) = (
        common::start(common::ONE_OPENAI).await,
        common::start(common::ONE_OPENAI).await,
    );
    let nginx = start_nginx([&addr(&a), &addr(&b)]);
    let url = format!("http://127.0.0.1:{}/v1/chat/completions", nginx.port);
    let http = reqwest::Client::new();
    // 200 at once against `rate=50r/s burst=100`: some are refused with 429.
    let calls = (0..200).map(|_| {
        http.post(&url)
            .bearer_auth("one-caller")
            .json(&json!({"model": "chat", "messages": common::user("hi")}))
            .send()
    });
    let statuses: Vec<u16> = futures_util::future::join_all(calls)
        .await
        .into_iter()
        .map(|r| r.unwrap().status().as_u16())
        .collect();
    let refused = statuses.iter().filter(|s| **s == 429).count();
    let ok = statuses.iter().filter(|s| **s == 200).count();
    assert!(refused > 0 && ok >= 100, "{ok} ok, {refused} refused");
    assert_eq!(ok + refused, 200);
    assert_eq!(a.mock.request_count() + b.mock.request_count(), ok);
}
