//! A config kept in etcd (contract §11): `switchyard serve --config
//! etcd://HOST:PORT/KEY` against a real etcd (`common::etcd`), the gateway
//! a process of the built binary (`common::instance`). Its new versions go
//! out as a file's do (a bad one refused, a canary judged), and etcd going
//! away leaves the last good version serving.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::etcd::Etcd;
use common::instance::{metric, Instance};
use switchyard::config::text_version;
use switchyard_mock::MockServer;

const KEY: &str = "switchyard/config";

/// The config text: `routes` lines under `routes:`, then `extra`. No
/// `server:` section: each instance gets its addresses from its flags.
fn yaml(mock: &MockServer, routes: &str, extra: &str) -> String {
    format!(
        "usage: {{ store: off }}\nproviders:\n  mock: {{ protocol: openai, base_url: \"{}/v1\" }}\n  dead: {{ protocol: openai, base_url: \"http://127.0.0.1:1/v1\" }}\nmodels:\n  - {{ id: mock/a, provider: mock, model: a }}\n  - {{ id: dead/a, provider: dead, model: a }}\nroutes:\n{routes}{extra}",
        mock.base_url()
    )
}

fn route(name: &str, target: &str) -> String {
    format!("  {name}: {{ targets: [{target}] }}\n")
}

async fn mock() -> Arc<MockServer> {
    Arc::new(MockServer::start("127.0.0.1:0").await.expect("mock starts"))
}

/// The status of a chat request for `model`.
async fn ask(gw: &Instance, model: &str) -> u16 {
    common::chat_status(&gw.url(""), model).await
}

async fn version(gw: &Instance) -> String {
    gw.admin_json("/admin/state").await["config_version"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn reload(gw: &Instance) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new()
        .post(gw.admin("/admin/reload"))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// How many of the process's log lines contain `text`.
fn logged(gw: &Instance, text: &str) -> usize {
    gw.log_lines().iter().filter(|l| l.contains(text)).count()
}

/// The gateway starts from the key, and each new value of it serves
/// (a route added and one removed, the version in `/admin/state`); `POST
/// /admin/reload` reads the key again.
#[tokio::test]
async fn a_config_in_etcd_serves_and_each_new_version_goes_out() {
    let etcd = Etcd::start().await;
    let mock = mock().await;
    let v1 = yaml(&mock, &route("first", "mock/a"), "");
    etcd.put(KEY, &v1).await;
    let gw = Instance::start_from(mock.clone(), "gw", &etcd.url(KEY), &[]).await;
    assert_eq!(ask(&gw, "first").await, 200);
    assert_eq!(version(&gw).await, text_version(&v1));

    let v2 = yaml(&mock, &route("second", "mock/a"), "");
    etcd.put(KEY, &v2).await;
    common::eventually(
        || async { version(&gw).await == text_version(&v2) },
        "the key's new value in force",
    )
    .await;
    assert_eq!(ask(&gw, "second").await, 200);
    assert_eq!(ask(&gw, "first").await, 404);

    // The admin API's reload reads etcd: the value there is in force.
    let (status, body) = reload(&gw).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["config_version"], text_version(&v2));
    let m = gw.metrics().await;
    assert_eq!(
        metric(&m, "switchyard_config_reloads_total{result=\"ok\"}"),
        1.0,
        "{m}"
    );
}

/// A value that does not load is refused and counted, and so is nothing
/// else: the last good version keeps serving, and so it does when the key
/// is deleted (with a warning). The next good value goes out. The text is
/// never logged, only its version.
#[tokio::test]
async fn a_bad_or_deleted_value_leaves_the_last_good_version_serving() {
    let etcd = Etcd::start().await;
    let mock = mock().await;
    // A marker that would show the text in the log.
    let secret = "# not-for-the-log-7d1f\n";
    let v1 = yaml(&mock, &route("first", "mock/a"), secret);
    etcd.put(KEY, &v1).await;
    let gw = Instance::start_from(mock.clone(), "gw", &etcd.url(KEY), &[]).await;

    let broken = yaml(&mock, &route("second", "nowhere/x"), secret);
    etcd.put(KEY, &broken).await;
    common::eventually(
        || async {
            let m = gw.metrics().await;
            metric(&m, "switchyard_config_reloads_total{result=\"error\"}") == 1.0
        },
        "the broken value refused and counted",
    )
    .await;
    assert_eq!(version(&gw).await, text_version(&v1));
    assert_eq!(ask(&gw, "first").await, 200);
    assert!(logged(&gw, "nowhere/x") >= 1, "{}", gw.output_tails());

    etcd.delete(KEY).await;
    common::eventually(
        || async { logged(&gw, "does not exist") == 1 },
        "a warning for the deleted key",
    )
    .await;
    assert_eq!(version(&gw).await, text_version(&v1));
    assert_eq!(ask(&gw, "first").await, 200);

    let v3 = yaml(&mock, &route("third", "mock/a"), secret);
    etcd.put(KEY, &v3).await;
    common::eventually(
        || async { version(&gw).await == text_version(&v3) },
        "the next good value in force",
    )
    .await;
    assert_eq!(ask(&gw, "third").await, 200);
    let m = gw.metrics().await;
    assert_eq!(
        metric(&m, "switchyard_config_reloads_total{result=\"error\"}"),
        1.0,
        "{m}"
    );
    let out = gw.stdout() + &gw.stderr();
    assert!(!out.contains("not-for-the-log"), "the text was logged");
    assert!(out.contains(&text_version(&v3)), "its version is");
}

/// etcd killed: the gateway keeps serving its config, says so once however
/// long it stays away, and a reload meanwhile fails without touching the
/// config. etcd back on the same data: a value written then goes out.
#[tokio::test]
async fn etcd_going_away_leaves_the_config_serving_and_a_change_after_it_is_back_goes_out() {
    let mut etcd = Etcd::start().await;
    let mock = mock().await;
    let v1 = yaml(&mock, &route("first", "mock/a"), "");
    etcd.put(KEY, &v1).await;
    let gw = Instance::start_from(mock.clone(), "gw", &etcd.url(KEY), &[]).await;

    etcd.stop();
    common::eventually(
        || async { logged(&gw, "lost etcd") == 1 },
        "the lost link logged",
    )
    .await;
    let (status, body) = reload(&gw).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body["errors"][0]
            .as_str()
            .unwrap()
            .contains("etcd did not answer"),
        "{body}"
    );
    // Time for several reconnection attempts (200 ms, 400 ms, 800 ms …):
    // nothing to wait for but time, so a plain sleep.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(logged(&gw, "lost etcd"), 1, "{}", gw.output_tails());
    for _ in 0..10 {
        assert_eq!(ask(&gw, "first").await, 200);
    }
    assert_eq!(version(&gw).await, text_version(&v1));

    etcd.restart().await;
    let v2 = yaml(&mock, &route("second", "mock/a"), "");
    etcd.put(KEY, &v2).await;
    // The reconnection waits at most 5 s between tries.
    common::eventually_within(
        Duration::from_secs(20),
        || async { (version(&gw).await == text_version(&v2)).then_some(()) },
        "the value written after etcd came back in force",
    )
    .await;
    assert_eq!(ask(&gw, "second").await, 200);
    assert_eq!(logged(&gw, "etcd is reachable again"), 1);
}

/// `reload.canary` applies to a value from etcd as to a file: the new
/// version serves half the requests, sends them to a dead upstream, and is
/// rolled back by itself.
#[tokio::test]
async fn a_canary_rollout_applies_to_a_value_from_etcd() {
    let etcd = Etcd::start().await;
    let mock = mock().await;
    let rollout = "reload: { canary: 50, for: 10m }\n";
    let v1 = yaml(&mock, &route("chat", "mock/a"), rollout);
    etcd.put(KEY, &v1).await;
    let gw = Instance::start_from(mock.clone(), "gw", &etcd.url(KEY), &[]).await;

    let v2 = yaml(&mock, &route("chat", "dead/a"), rollout);
    etcd.put(KEY, &v2).await;
    let canary = common::eventually_some(
        || async { gw.admin_json("/admin/state").await.get("canary").cloned() },
        "the key's new value serving as a canary",
    )
    .await;
    assert_eq!(canary["share"], 0.5);
    assert_eq!(canary["versions"][1]["config_version"], text_version(&v2));
    common::eventually(
        || async {
            for _ in 0..4 {
                ask(&gw, "chat").await;
            }
            gw.admin_json("/admin/state").await.get("canary").is_none()
        },
        "the failing canary rolled back",
    )
    .await;
    assert_eq!(version(&gw).await, text_version(&v1));
    for _ in 0..10 {
        assert_eq!(ask(&gw, "chat").await, 200);
    }
    let m = gw.metrics().await;
    assert_eq!(
        metric(
            &m,
            "switchyard_config_reloads_total{result=\"rolled_back\"}"
        ),
        1.0,
        "{m}"
    );
}

/// The binary with `args`: its exit code and standard error.
fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// There is no last good version at start-up: an etcd that does not
/// answer, or a key that is not there, stops the start with a clear error.
/// `check` reads the key and validates it.
#[tokio::test]
async fn start_up_needs_the_key_and_check_validates_it() {
    let nobody = format!("etcd://127.0.0.1:{}/{KEY}", common::free_port());
    let (code, stderr) = run(&["serve", "--config", &nobody]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("etcd did not answer"), "{stderr}");

    let etcd = Etcd::start().await;
    let (code, stderr) = run(&["serve", "--config", &etcd.url("missing")]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("the key does not exist"), "{stderr}");

    let mock = mock().await;
    etcd.put(KEY, &yaml(&mock, &route("first", "mock/a"), ""))
        .await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(["check", "--config", &etcd.url(KEY)])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains(&format!("{}: ok", etcd.url(KEY))),
        "{stdout}"
    );

    etcd.put("broken", "routes: { x: { targets: [nowhere/x] } }\n")
        .await;
    let (code, stderr) = run(&["check", "--config", &etcd.url("broken")]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:1:", etcd.url("broken"))) && stderr.contains("nowhere/x"),
        "{stderr}"
    );

    let (code, stderr) = run(&["check", "--config", "etcd://127.0.0.1/k"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("is not HOST:PORT"), "{stderr}");
}
