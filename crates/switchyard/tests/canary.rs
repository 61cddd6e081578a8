//! Canary reloads (contract §11): a new config serves a share of requests
//! beside the one in force, is rolled back by itself when it does worse,
//! and promoted after its time when it does not — in a fleet, on every
//! instance alike (`fleet::`: two gateway processes on one etcd key and
//! one real Redis).

mod common;

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use switchyard::observe::decision_log::DecisionSink;
use switchyard::{config, server};
use switchyard_mock::MockServer;

/// A gateway on the config file `path` (reloaded from it, watched).
async fn gateway(path: &Path) -> server::Running {
    server::start(
        config::load_file(path).unwrap(),
        server::Options {
            decisions: DecisionSink::Off,
            config_source: Some(config::source::Source::File(path.into())),
            workers: server::Workers::Current,
        },
    )
    .await
    .unwrap()
}

/// `chat` on the mock; `extra` adds lines (providers, models, routes,
/// `reload`) after it.
fn yaml(mock: &str, chat_target: &str, extra: &str) -> String {
    format!(
        "server: {{ listen: 127.0.0.1:0, admin_listen: 127.0.0.1:0 }}\nusage: {{ store: off }}\nproviders:\n  mock: {{ protocol: openai, base_url: \"{mock}/v1\" }}\n  dead: {{ protocol: openai, base_url: \"http://127.0.0.1:1/v1\" }}\nmodels:\n  - {{ id: mock/a, provider: mock, model: a }}\n  - {{ id: dead/a, provider: dead, model: a }}\nroutes:\n  chat: {{ targets: [{chat_target}] }}\n{extra}"
    )
}

async fn ask(gw: &server::Running, model: &str) -> u16 {
    common::chat_status(&gw.base_url(), model).await
}

async fn state(gw: &server::Running) -> Value {
    reqwest::get(format!("{}/admin/state", gw.admin_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn reload(gw: &server::Running, query: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(format!("{}/admin/reload{query}", gw.admin_url()))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// Each version's requests in the running canary, by role.
fn served(state: &Value, role: &str) -> u64 {
    state["canary"]["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["role"] == role))
        .and_then(|v| v["requests"].as_u64())
        .unwrap_or(0)
}

/// A new version of the watched file goes out as `reload.canary` says;
/// sending `chat` to a dead upstream, it does worse than the config in
/// force and is rolled back without anyone asking.
#[tokio::test]
async fn a_failing_canary_rolls_back_by_itself() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.yaml");
    let rollout = "reload: { canary: 50, for: 10m }\n";
    std::fs::write(&path, yaml(&mock.base_url(), "mock/a", rollout)).unwrap();
    let gw = gateway(&path).await;
    let v1 = state(&gw).await["config_version"].clone();

    std::fs::write(&path, yaml(&mock.base_url(), "dead/a", rollout)).unwrap();
    let canary = common::eventually_some(
        || async {
            let s = state(&gw).await;
            s.get("canary").cloned()
        },
        "the file's new version serving as a canary",
    )
    .await;
    assert_eq!(canary["share"], 0.5);
    assert_eq!(canary["versions"][0]["config_version"], v1);
    // Nothing else is reloaded while it runs.
    let (status, body) = reload(&gw, "").await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["errors"][0].as_str().unwrap().contains("canary"),
        "{body}"
    );

    // Half the requests fail on the canary: once each version has its
    // twenty, the canary is rolled back.
    let statuses = std::cell::RefCell::new(Vec::new());
    common::eventually(
        || async {
            for _ in 0..4 {
                let s = ask(&gw, "chat").await;
                statuses.borrow_mut().push(s);
            }
            state(&gw).await.get("canary").is_none()
        },
        "the failing canary rolled back",
    )
    .await;
    let statuses = statuses.into_inner();
    assert!(
        statuses.contains(&200) && statuses.iter().any(|s| *s >= 500),
        "{statuses:?}"
    );
    let after = state(&gw).await;
    assert_eq!(after["config_version"], v1);
    for _ in 0..20 {
        assert_eq!(
            ask(&gw, "chat").await,
            200,
            "the config in force serves all"
        );
    }
    let m = reqwest::get(format!("{}/metrics", gw.admin_url()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        m.contains("switchyard_config_reloads_total{result=\"rolled_back\"} 1"),
        "{m}"
    );
    gw.shutdown().await;
}

/// The config file behind a symlink: a write to its target is not seen by
/// the watcher (it watches the link's folder), so each reload is the
/// test's own request.
fn behind_a_link() -> (PathBuf, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    std::fs::create_dir(dir.path().join("link")).unwrap();
    let real = dir.path().join("real/switchyard.yaml");
    let link = dir.path().join("link/switchyard.yaml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    (real, link, dir)
}

#[tokio::test]
async fn a_healthy_canary_serves_its_share_then_is_promoted() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let (real, link, _dir) = behind_a_link();
    std::fs::write(&real, yaml(&mock.base_url(), "mock/a", "")).unwrap();
    let gw = gateway(&link).await;
    let v1 = state(&gw).await["config_version"].clone();

    // The new version adds a route: it answers only where the canary serves.
    let second = "  second: { targets: [mock/a] }\n";
    std::fs::write(&real, yaml(&mock.base_url(), "mock/a", second)).unwrap();
    let (status, body) = reload(&gw, "?canary=50&for=2s").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"], "canary");
    assert_eq!(body["canary"]["share"], 0.5);
    let v2 = body["config_version"].clone();
    assert_ne!(v1, v2);

    let mut second_statuses = Vec::new();
    for _ in 0..40 {
        assert_eq!(ask(&gw, "chat").await, 200);
        second_statuses.push(ask(&gw, "second").await);
    }
    let s = state(&gw).await;
    assert_eq!(s["config_version"], v1, "not promoted yet");
    // Both versions served (each with odds of 2^-80 against).
    let (old, new) = (served(&s, "in_force"), served(&s, "canary"));
    assert_eq!(old + new, 80, "{s}");
    assert!(old > 0 && new > 0, "{s}");
    assert!(
        second_statuses.contains(&200) && second_statuses.contains(&404),
        "{second_statuses:?}"
    );

    common::eventually(
        || async {
            let s = state(&gw).await;
            s.get("canary").is_none() && s["config_version"] == v2
        },
        "the canary promoted after its 2 s",
    )
    .await;
    for _ in 0..10 {
        assert_eq!(ask(&gw, "second").await, 200);
    }
    gw.shutdown().await;
}

/// A version of the file written while a canary runs is refused then, and
/// goes out once the canary is over: nothing written is left behind.
#[tokio::test]
async fn a_version_written_during_a_canary_goes_out_after_it() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let (real, link, _dir) = behind_a_link();
    std::fs::write(&real, yaml(&mock.base_url(), "mock/a", "")).unwrap();
    let gw = gateway(&link).await;
    std::fs::write(
        &real,
        yaml(
            &mock.base_url(),
            "mock/a",
            "  second: { targets: [mock/a] }\n",
        ),
    )
    .unwrap();
    let (status, body) = reload(&gw, "?canary=50&for=1s").await;
    assert_eq!(status, 200, "{body}");
    let third = yaml(
        &mock.base_url(),
        "mock/a",
        "  third: { targets: [mock/a] }\n",
    );
    std::fs::write(&real, &third).unwrap();
    let (status, _) = reload(&gw, "").await;
    assert_eq!(status, 409, "refused while the canary runs");
    let v3 = config::text_version(&third);
    common::eventually(
        || async { state(&gw).await["config_version"] == *v3.as_str() },
        "the third version in force once the canary is over",
    )
    .await;
    assert!(state(&gw).await.get("canary").is_none());
    assert_eq!(ask(&gw, "third").await, 200);
    gw.shutdown().await;
}

#[tokio::test]
async fn a_canary_that_does_not_load_or_asks_wrongly_never_starts() {
    let mock = MockServer::start("127.0.0.1:0").await.unwrap();
    let (real, link, _dir) = behind_a_link();
    std::fs::write(&real, yaml(&mock.base_url(), "mock/a", "")).unwrap();
    let gw = gateway(&link).await;
    std::fs::write(
        &real,
        yaml(&mock.base_url(), "mock/a", "  x: { targets: [none/x] }\n"),
    )
    .unwrap();
    let (status, body) = reload(&gw, "?canary=10").await;
    assert_eq!(status, 422, "{body}");
    assert!(body["errors"].to_string().contains("none/x"), "{body}");
    std::fs::write(
        &real,
        yaml(&mock.base_url(), "mock/a", "  y: { targets: [mock/a] }\n"),
    )
    .unwrap();
    for query in [
        "?canary=0",
        "?canary=abc",
        "?canary=150",
        "?canary=-5",
        "?canary=10&for=0s",
        "?canary=10&for=soon",
        "?for=10m",
    ] {
        let (status, body) = reload(&gw, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(state(&gw).await.get("canary").is_none(), "{query}");
    }
    assert_eq!(ask(&gw, "y").await, 404, "nothing reloaded");
    // `canary=100` is every request: a reload like any other.
    let (status, body) = reload(&gw, "?canary=100").await;
    assert_eq!((status, &body["result"]), (200, &json!("ok")), "{body}");
    assert_eq!(ask(&gw, "y").await, 200);
    gw.shutdown().await;
}

/// Two instances of one fleet (`state.backend: redis`) on one etcd key.
mod fleet {
    use std::sync::Arc;

    use super::common;
    use common::etcd::Etcd;
    use common::instance::{metric, Instance};
    use common::redis::Redis;
    use serde_json::Value;
    use switchyard::config::text_version;
    use switchyard_mock::MockServer;

    /// One pair at a time: four debug-build gateways at once on two cores
    /// would slow the judge ticks they are timed by.
    static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

    const KEY: &str = "fleet/config";

    fn yaml(mock: &MockServer, redis: &Redis, routes: &str, rollout: &str) -> String {
        format!(
            "usage: {{ store: off }}\nstate: {{ backend: redis, redis_url: \"{}\" }}\nproviders:\n  mock: {{ protocol: openai, base_url: \"{}/v1\" }}\n  dead: {{ protocol: openai, base_url: \"http://127.0.0.1:1/v1\" }}\nmodels:\n  - {{ id: mock/a, provider: mock, model: a }}\n  - {{ id: dead/a, provider: dead, model: a }}\nroutes:\n{routes}reload: {rollout}\n",
            redis.url(),
            mock.base_url()
        )
    }

    /// Both instances started on the key's value, each seeing the other
    /// on the shared state.
    async fn pair(etcd: &Etcd, text: &str, mock: &Arc<MockServer>) -> (Instance, Instance) {
        etcd.put(KEY, text).await;
        let a = Instance::start_from(mock.clone(), "a", &etcd.url(KEY), &[]).await;
        let b = Instance::start_from(mock.clone(), "b", &etcd.url(KEY), &[]).await;
        for gw in [&a, &b] {
            common::eventually(
                || async {
                    let s = gw.admin_json("/admin/state").await;
                    s["shared_state"] == "redis"
                        && s["instances"].as_array().map(Vec::len) == Some(2)
                },
                "both instances on the shared state",
            )
            .await;
        }
        (a, b)
    }

    async fn ask(gw: &Instance, model: &str) -> u16 {
        common::chat_status(&gw.url(""), model).await
    }

    async fn canary(gw: &Instance) -> Option<Value> {
        gw.admin_json("/admin/state").await.get("canary").cloned()
    }

    /// Requests of both versions in a canary view's `key` (`versions`:
    /// this instance's, `fleet_versions`: the fleet's).
    fn requests(canary: &Value, key: &str) -> u64 {
        canary[key].as_array().map_or(0, |vs| {
            vs.iter().filter_map(|v| v["requests"].as_u64()).sum()
        })
    }

    /// The new version reaches both instances as a canary on one deadline.
    async fn both_in_canary(a: &Instance, b: &Instance) -> (Value, Value) {
        let ca = common::eventually_some(|| canary(a), "a canary on a").await;
        let cb = common::eventually_some(|| canary(b), "a canary on b").await;
        assert_eq!(
            ca["promoted_at_ms"], cb["promoted_at_ms"],
            "one deadline for the fleet: {ca} {cb}"
        );
        assert_eq!(ca["share"], cb["share"]);
        (ca, cb)
    }

    /// Traffic goes to instance `a` only, where half of it fails on the
    /// canary: `a` rolls it back, and so does `b` — whose own counts
    /// (none) and deadline (ten minutes on) would have kept it going.
    /// Alone, each instance would set a deadline of its own, and `b`,
    /// judging its own counts, would never roll back.
    #[tokio::test]
    async fn a_failing_canary_rolls_back_on_every_instance_of_a_fleet() {
        let _one = ONE_AT_A_TIME.lock().await;
        let (etcd, redis) = (Etcd::start().await, Redis::start());
        let mock = Arc::new(MockServer::start("127.0.0.1:0").await.unwrap());
        let rollout = "{ canary: 50, for: 10m }";
        let v1 = yaml(&mock, &redis, "  chat: { targets: [mock/a] }\n", rollout);
        let (a, b) = pair(&etcd, &v1, &mock).await;

        let v2 = yaml(&mock, &redis, "  chat: { targets: [dead/a] }\n", rollout);
        etcd.put(KEY, &v2).await;
        both_in_canary(&a, &b).await;

        common::eventually(
            || async {
                for _ in 0..4 {
                    ask(&a, "chat").await;
                }
                canary(&a).await.is_none()
            },
            "the failing canary rolled back on a",
        )
        .await;
        common::eventually(
            || async { canary(&b).await.is_none() },
            "the canary rolled back on b, which served none of it",
        )
        .await;
        for gw in [&a, &b] {
            let state = gw.admin_json("/admin/state").await;
            assert_eq!(state["config_version"], text_version(&v1), "{}", gw.name);
            let m = gw.metrics().await;
            assert_eq!(
                metric(
                    &m,
                    "switchyard_config_reloads_total{result=\"rolled_back\"}"
                ),
                1.0,
                "{}: {m}",
                gw.name
            );
            assert_eq!(ask(gw, "chat").await, 200, "{}", gw.name);
        }
        // `b` rolled back on `a`'s word ("rolled back by the fleet"), or on
        // the fleet's counts, `a`'s failures in them, if its tick came
        // first: either way, not on its own counts.
        assert!(
            b.log_lines()
                .iter()
                .any(|l| l.contains("canary config rolled back")),
            "{}",
            b.output_tails()
        );
    }

    /// A healthy canary: the verdict is on the fleet's counts (`b` sees
    /// `a`'s requests), and both instances promote it at the one deadline.
    #[tokio::test]
    async fn a_healthy_canary_is_promoted_on_every_instance_of_a_fleet() {
        let _one = ONE_AT_A_TIME.lock().await;
        let (etcd, redis) = (Etcd::start().await, Redis::start());
        let mock = Arc::new(MockServer::start("127.0.0.1:0").await.unwrap());
        let rollout = "{ canary: 50, for: 5s }";
        let chat = "  chat: { targets: [mock/a] }\n";
        let v1 = yaml(&mock, &redis, chat, rollout);
        let (a, b) = pair(&etcd, &v1, &mock).await;

        let v2 = yaml(
            &mock,
            &redis,
            &format!("{chat}  second: {{ targets: [mock/a] }}\n"),
            rollout,
        );
        etcd.put(KEY, &v2).await;
        both_in_canary(&a, &b).await;
        for _ in 0..10 {
            assert_eq!(ask(&a, "chat").await, 200);
        }
        // `b` served nothing; its view of the fleet has `a`'s ten.
        common::eventually(
            || async {
                canary(&b).await.is_some_and(|c| {
                    requests(&c, "versions") == 0 && requests(&c, "fleet_versions") == 10
                })
            },
            "a's requests in the fleet's counts, as b sees them",
        )
        .await;
        for gw in [&a, &b] {
            common::eventually(
                || async {
                    let s = gw.admin_json("/admin/state").await;
                    s.get("canary").is_none() && s["config_version"] == text_version(&v2)
                },
                "the canary promoted at its deadline",
            )
            .await;
            assert_eq!(ask(gw, "second").await, 200, "{}", gw.name);
            let m = gw.metrics().await;
            assert_eq!(
                metric(
                    &m,
                    "switchyard_config_reloads_total{result=\"rolled_back\"}"
                ),
                0.0,
                "{}: {m}",
                gw.name
            );
        }
    }
}
