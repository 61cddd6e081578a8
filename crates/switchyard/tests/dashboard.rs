//! The dashboard (`GET /` on the admin listener) in a real headless
//! Chromium: every deployment and its circuit in the DOM, the routes, the
//! recent decisions, spend and shadow traffic; a circuit opened through the admin API shows
//! up on the same page without a reload; the screenshot is not blank. Also
//! the admin key over HTTP Basic (what a browser can send) beside Bearer.

#[path = "common/chromium.rs"]
mod chromium;
mod common;

use chromium::Browser;
use serde_json::{json, Value};

const FLEET: &str = r#"
providers:
  oa:
    protocol: openai
    base_url: "{mock}/v1"
    limits: { rpm: 600, tpm: 200000 }
  an: { protocol: anthropic, base_url: "{mock}" }
models:
  - { id: oa/gpt-4o, provider: oa, model: gpt-4o, pricing: { input: 2.5, output: 10 } }
  - { id: oa/gpt-4o-mini, provider: oa, model: gpt-4o-mini, pricing: { input: 0.15, output: 0.6 } }
  - { id: an/claude-sonnet, provider: an, model: claude-sonnet, pricing: { input: 3, output: 15 } }
routes:
  chat: { targets: [oa/gpt-4o, an/claude-sonnet], fallbacks: [oa/gpt-4o-mini], shadow: { target: oa/gpt-4o-mini, share: 1.0 } }
  cheap: { strategy: cost, targets: [oa/gpt-4o-mini, an/claude-sonnet] }
clients:
  - { id: team, key_env: CLIENT_KEY, rpm: 120, tpm: 100000 }
"#;

const ADMIN: &str = "  admin_key_env: ADMIN_KEY";
const ADMIN_KEY: &str = "admin-secret";
const DEPLOYMENTS: [&str; 3] = ["an/claude-sonnet", "oa/gpt-4o", "oa/gpt-4o-mini"];

/// What the page shows, read from its DOM hooks.
const READ_DOM: &str = r#"(() => {
  const rows = (sel) => [...document.querySelectorAll(sel)];
  return {
    deployments: Object.fromEntries(rows('#deployments tr[data-deployment]').map((tr) =>
      [tr.dataset.deployment, tr.querySelector('td[data-field="circuit"]').textContent])),
    routes: rows('#routes tr[data-route]').map((tr) => tr.dataset.route),
    decisions: rows('#decisions tr[data-request-id]').map((tr) => tr.dataset.requestId),
    clients: rows('#spend-client tr[data-row]').map((tr) => tr.dataset.row),
    models: rows('#spend-model tr[data-row]').map((tr) => tr.dataset.row),
    shadow: Object.fromEntries(rows('#shadow tr[data-shadow]').map((tr) =>
      [tr.dataset.shadow, tr.querySelector('td[data-field="requests"]').textContent])),
    spend_note: document.getElementById('spend-client-empty').hidden ? '' : document.getElementById('spend-client-empty').textContent,
    connection: document.getElementById('conn').textContent,
    marker: window.__sameDocument || null,
  };
})()"#;

async fn send(h: &common::Harness, route: &str, id: &str) {
    let r = reqwest::Client::new()
        .post(h.url("/v1/chat/completions"))
        .bearer_auth("client-secret")
        .header("x-request-id", id)
        .json(&json!({"model": route, "messages": common::user("hello dashboard")}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}

/// Polls the page until `ok` holds for what it shows (10 s at most).
async fn until(b: &Browser, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let last = std::cell::RefCell::new(Value::Null);
    let shown = common::poll_within(common::PATIENCE, || async {
        let seen = match b.eval(READ_DOM).await {
            Ok(v) if ok(&v) => return Some(v),
            Ok(v) => v,
            Err(e) => Value::String(e),
        };
        *last.borrow_mut() = seen;
        None
    });
    shown.await.unwrap_or_else(|| {
        panic!(
            "the dashboard never showed {what}; it last showed {:#}\nbrowser log:\n{}",
            last.borrow(),
            b.log()
        )
    })
}

/// The browser's answer to the admin listener's Basic challenge, as if an
/// operator typed the key into the prompt; every paused request goes on.
fn answer_auth(b: &mut Browser) -> tokio::sync::watch::Receiver<u32> {
    let (count_tx, count) = tokio::sync::watch::channel(0u32);
    let cdp = b.cdp.clone();
    let mut events = std::mem::replace(&mut b.events, tokio::sync::mpsc::unbounded_channel().1);
    tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            let id = ev["params"]["requestId"].clone();
            match ev["method"].as_str() {
                Some("Fetch.authRequired") => {
                    count_tx.send_modify(|n| *n += 1);
                    let answer = json!({"response": "ProvideCredentials", "username": "operator", "password": ADMIN_KEY});
                    cdp.call(
                        "Fetch.continueWithAuth",
                        json!({"requestId": id, "authChallengeResponse": answer}),
                    )
                    .await;
                }
                Some("Fetch.requestPaused") => {
                    cdp.call("Fetch.continueRequest", json!({"requestId": id}))
                        .await;
                }
                _ => {}
            }
        }
    });
    count
}

#[tokio::test]
async fn dashboard_shows_the_fleet_live() {
    eprintln!("browser: {}", chromium::version());
    let h = common::start_with(FLEET, ADMIN).await;
    for (i, route) in ["chat", "cheap", "chat", "oa/gpt-4o-mini"]
        .iter()
        .enumerate()
    {
        send(&h, route, &format!("dash-req-{i}")).await;
    }
    h.flush_usage().await;

    let mut b = Browser::launch(1440, 900).await;
    let auths = answer_auth(&mut b);
    b.cdp
        .call(
            "Fetch.enable",
            json!({"handleAuthRequests": true, "patterns": [{"urlPattern": "*"}]}),
        )
        .await;
    b.navigate(&h.admin("/")).await;
    let shown = until(
        &b,
        "every deployment closed, the routes, a decision and the shadow row",
        |v| {
            DEPLOYMENTS.iter().all(|d| v["deployments"][d] == "closed")
                && v["routes"] == json!(["chat", "cheap"])
                && v["decisions"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|id| id == "dash-req-3"))
                && v["clients"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|c| c == "team"))
                // Route `chat` shadows both its requests.
                && v["shadow"]["chat>oa/gpt-4o-mini"] == "2"
        },
    )
    .await;
    assert_eq!(shown["connection"], "live");
    assert!(
        *auths.borrow() >= 1,
        "the page was not behind the Basic challenge"
    );
    // From here on the browser answers no challenge: the page's own
    // requests must carry the credentials the operator gave.
    b.cdp.call("Fetch.disable", json!({})).await;
    b.eval("window.__sameDocument = 'yes'").await.unwrap();

    let r = reqwest::Client::new()
        .post(h.admin("/admin/deployments/oa%2Fgpt-4o/open"))
        .bearer_auth(ADMIN_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let shown = until(&b, "oa/gpt-4o open without a reload", |v| {
        v["deployments"]["oa/gpt-4o"] == "open" && v["marker"] == "yes"
    })
    .await;
    assert_eq!(shown["deployments"]["an/claude-sonnet"], "closed");
    assert_eq!(shown["connection"], "live");
    send(&h, "cheap", "dash-req-late").await;
    until(&b, "a decision made after the page loaded", |v| {
        v["decisions"][0] == "dash-req-late"
    })
    .await;

    let png = b.screenshot().await;
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!("screenshot: {}", path.display());
    assert_not_blank(&png, 1440, 900);
}

#[tokio::test]
async fn dashboard_without_a_usage_store_and_disconnected() {
    let h = common::start(&format!("{FLEET}usage: {{ store: off }}\n")).await;
    send(&h, "chat", "no-store-1").await;
    let b = Browser::launch(1280, 800).await;
    b.navigate(&h.admin("/")).await;
    let shown = until(&b, "the deployments and `usage store off`", |v| {
        v["deployments"]["oa/gpt-4o"] == "closed"
            && v["decisions"][0] == "no-store-1"
            && v["spend_note"]
                .as_str()
                .is_some_and(|s| s.starts_with("usage store off"))
    })
    .await;
    assert_eq!(shown["connection"], "live");
    assert_eq!(shown["clients"], json!([]));
    // The gateway goes away: the page says so, and keeps what it showed.
    h.gw.shutdown().await;
    let shown = until(&b, "disconnected", |v| v["connection"] == "disconnected").await;
    assert_eq!(shown["deployments"]["oa/gpt-4o"], "closed");
    let png = b.screenshot().await;
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-disconnected.png");
    std::fs::write(&path, &png).unwrap();
    eprintln!("screenshot: {}", path.display());
    assert_not_blank(&png, 1280, 800);
}

/// Decodes the PNG: the right size, and a page drawn on it (many colours,
/// and no one colour covering nearly all of it).
fn assert_not_blank(png: &[u8], width: u32, height: u32) {
    let decoder = png::Decoder::new(std::io::Cursor::new(png));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size().expect("a buffer size")];
    let info = reader.next_frame(&mut buf).expect("a frame");
    assert_eq!((info.width, info.height), (width, height));
    let bytes = info.color_type.samples();
    let mut counts = std::collections::HashMap::new();
    for px in buf[..info.buffer_size()].chunks(bytes) {
        *counts.entry(px[..3].to_vec()).or_insert(0u32) += 1;
    }
    let top = counts.values().max().copied().unwrap_or(0);
    let total = width * height;
    assert!(counts.len() > 200, "only {} colours", counts.len());
    assert!(
        f64::from(top) < 0.9 * f64::from(total),
        "one colour covers {top} of {total} pixels"
    );
}

#[tokio::test]
async fn admin_key_as_bearer_or_basic_password() {
    let h = common::start_with(common::ONE_OPENAI, ADMIN).await;
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(h.admin(path));

    let r = get("/").send().await.unwrap();
    assert_eq!(r.status(), 401);
    let challenge = r.headers()["www-authenticate"].to_str().unwrap();
    assert!(
        challenge.starts_with("Basic realm=\"switchyard admin\""),
        "{challenge}"
    );
    for path in ["/", "/admin/state", "/admin/decisions", "/dashboard/app.js"] {
        let r = get(path).bearer_auth(ADMIN_KEY).send().await.unwrap();
        assert_eq!(r.status(), 200, "Bearer on {path}");
        let r = get(path)
            .basic_auth("anyone", Some(ADMIN_KEY))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "Basic on {path}");
    }
    let r = get("/admin/state")
        .basic_auth("anyone", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let r = get("/").bearer_auth("wrong").send().await.unwrap();
    assert_eq!(r.status(), 401);
    // Basic with the key as the user name is not the key.
    let r = get("/")
        .basic_auth(ADMIN_KEY, None::<&str>)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(get("/healthz").send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn dashboard_assets_and_json() {
    let h = common::start(FLEET).await;
    send(&h, "chat", "json-1").await;
    for (path, kind) in [
        ("/", "text/html"),
        ("/dashboard/app.js", "text/javascript"),
        ("/dashboard/style.css", "text/css"),
    ] {
        let r = reqwest::get(h.admin(path)).await.unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let ct = r.headers()["content-type"].to_str().unwrap();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        assert_eq!(r.headers()["cache-control"], "no-cache", "{path}");
    }

    let state = h.admin_json("/admin/state").await;
    let dep = |id: &str| {
        state["deployments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["id"] == id)
            .unwrap()
            .clone()
    };
    let d = dep("oa/gpt-4o");
    assert_eq!(
        (d["provider"].clone(), d["model"].clone()),
        (json!("oa"), json!("gpt-4o"))
    );
    assert_eq!(
        (d["rpm_limit"].clone(), d["tpm_limit"].clone()),
        (json!(600), json!(200000))
    );
    assert_eq!(d["rpm_used"], 1);
    let d = dep("an/claude-sonnet");
    assert_eq!(
        (d["rpm_limit"].clone(), d["tpm_limit"].clone()),
        (Value::Null, Value::Null)
    );
    assert_eq!(
        state["routes"],
        json!([
            {"name": "chat", "strategy": "priority", "targets": ["oa/gpt-4o", "an/claude-sonnet"], "fallbacks": ["oa/gpt-4o-mini"]},
            {"name": "cheap", "strategy": "cost", "targets": ["oa/gpt-4o-mini", "an/claude-sonnet"], "fallbacks": []},
        ])
    );

    send(&h, "cheap", "json-2").await;
    let list = h.admin_json("/admin/decisions").await;
    let list = list["decisions"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    let (newest, oldest) = (&list[0], &list[1]);
    assert_eq!(newest["request_id"], "json-2");
    assert_eq!(oldest["request_id"], "json-1");
    assert_eq!(oldest["client"], "team");
    assert_eq!(oldest["route"], "chat");
    assert_eq!(oldest["selected"], "oa/gpt-4o");
    assert_eq!(oldest["status"], 200);
    assert_eq!(oldest["attempts"], 1);
    assert!(oldest["cost_usd"].as_f64().unwrap() > 0.0, "{oldest}");
    assert!(oldest["decision_reason"].is_string(), "{oldest}");
    let one = h.admin_json("/admin/decisions?limit=1").await;
    assert_eq!(one["decisions"].as_array().unwrap().len(), 1);
}
