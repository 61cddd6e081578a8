//! The alert rules in `deploy/prometheus/alerts.yml` (contract §10): valid
//! for Prometheus, each checked by its unit tests in `alerts_test.yml`
//! (Debian's `promtool`, installed with apt when missing; never skipped),
//! and naming only metrics — and labels — that `/metrics` exports.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::json;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn promtool() -> PathBuf {
    common::apt::binary(&["promtool"], &[], "prometheus")
}

/// `promtool ARGS` from the repository's root; its output, or a panic
/// that shows it.
fn run_promtool(args: &[&str]) -> String {
    let bin = promtool();
    let out = Command::new(&bin)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "`promtool {}` failed ({}):\n{text}",
        args.join(" "),
        out.status
    );
    text
}

#[test]
fn the_alert_rules_are_valid_and_pass_their_unit_tests() {
    let out = run_promtool(&["check", "rules", "deploy/prometheus/alerts.yml"]);
    assert!(out.contains("SUCCESS: 7 rules found"), "{out}");
    let out = run_promtool(&["test", "rules", "deploy/prometheus/alerts_test.yml"]);
    assert!(out.contains("SUCCESS"), "{out}");
    // The scrape config loads the rules (a path relative to it).
    let out = run_promtool(&["check", "config", "deploy/prometheus.yml"]);
    assert!(out.contains("1 rule files found"), "{out}");
}

#[derive(serde::Deserialize)]
struct RuleFile {
    groups: Vec<Group>,
}

#[derive(serde::Deserialize)]
struct Group {
    rules: Vec<Rule>,
}

#[derive(serde::Deserialize)]
struct Rule {
    alert: String,
    expr: String,
}

/// What a rule needs of `/metrics`: a series of `metric`, carrying `label`
/// (with `value`, when the rule selects on one).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Need {
    metric: String,
    label: Option<(String, Option<String>)>,
}

/// Every metric each rule's expression names, the labels it selects on
/// (`{state=~"open|half_open"}`: each value) and the labels it groups by
/// (`sum by (route, le) (rate(switchyard_…`).
fn needs(rules: &[Rule]) -> BTreeMap<Need, BTreeSet<String>> {
    let name = regex::Regex::new(r"switchyard_[a-z_]+").unwrap();
    let selector = regex::Regex::new(r"(switchyard_[a-z_]+)\{([^}]*)\}").unwrap();
    let matcher = regex::Regex::new(r#"([a-z_]+)\s*(=~|=)\s*"([^"]*)""#).unwrap();
    let grouping =
        regex::Regex::new(r"by \(([a-z_, ]+)\)\s*\((?:[a-z_]+\()?(switchyard_[a-z_]+)").unwrap();
    let mut out: BTreeMap<Need, BTreeSet<String>> = BTreeMap::new();
    let mut add = |metric: &str, label: Option<(String, Option<String>)>, alert: &str| {
        let need = Need {
            metric: metric.to_owned(),
            label,
        };
        out.entry(need).or_default().insert(alert.to_owned());
    };
    for r in rules {
        for m in name.find_iter(&r.expr) {
            add(m.as_str(), None, &r.alert);
        }
        for s in selector.captures_iter(&r.expr) {
            for m in matcher.captures_iter(&s[2]) {
                let values: Vec<&str> = if &m[2] == "=~" {
                    m[3].split('|').collect()
                } else {
                    vec![&m[3]]
                };
                for v in values {
                    add(&s[1], Some((m[1].to_owned(), Some(v.to_owned()))), &r.alert);
                }
            }
        }
        for g in grouping.captures_iter(&r.expr) {
            for label in g[1].split(',').map(str::trim) {
                add(&g[2], Some((label.to_owned(), None)), &r.alert);
            }
        }
    }
    out
}

/// The sample lines of a Prometheus text exposition: name and labels.
fn series(text: &str) -> Vec<(String, BTreeMap<String, String>)> {
    let pair = regex::Regex::new(r#"([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)""#).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let name = l.split(['{', ' ']).next().unwrap_or("").to_owned();
            let labels = match (l.find('{'), l.rfind('}')) {
                (Some(a), Some(b)) if a < b => pair
                    .captures_iter(&l[a + 1..b])
                    .map(|c| (c[1].to_owned(), c[2].to_owned()))
                    .collect(),
                _ => BTreeMap::new(),
            };
            (name, labels)
        })
        .collect()
}

fn met(need: &Need, exported: &[(String, BTreeMap<String, String>)]) -> bool {
    exported.iter().any(|(name, labels)| {
        name == &need.metric
            && match &need.label {
                None => true,
                Some((k, None)) => labels.contains_key(k),
                Some((k, Some(v))) => labels.get(k) == Some(v),
            }
    })
}

/// Two deployments on one route and a client with a budget; a request, then
/// one more with the first choice's circuit opened by hand (a fallback).
const GATEWAY: &str = r#"
providers:
  mock: { protocol: openai, base_url: "{mock}/v1" }
models:
  - { id: mock/a, provider: mock, model: a, capabilities: [streaming], pricing: { input: 1.0, output: 2.0 } }
  - { id: mock/b, provider: mock, model: b, capabilities: [streaming], pricing: { input: 1.0, output: 2.0 } }
routes:
  chat: { targets: [mock/a, mock/b] }
clients:
  - { id: team, key_env: CLIENT_KEY, budget: { usd: 50, per: day } }
"#;

/// An alert on a renamed metric (or a label it no longer has) would never
/// fire: every series the rules select or group by is on `/metrics`, with
/// those labels, once the gateway has served traffic.
#[tokio::test]
async fn every_metric_and_label_the_alerts_use_is_exported() {
    let path = repo().join("deploy/prometheus/alerts.yml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let file: RuleFile = serde_saphyr::from_str(&text).unwrap();
    let rules: Vec<Rule> = file.groups.into_iter().flat_map(|g| g.rules).collect();
    assert_eq!(rules.len(), 7, "the seven alerts of contract §10");
    let needs = needs(&rules);
    let names: BTreeSet<&str> = needs.keys().map(|n| n.metric.as_str()).collect();
    for want in [
        "switchyard_request_duration_seconds_bucket",
        "switchyard_requests_total",
        "switchyard_fallbacks_total",
        "switchyard_stream_interruptions_total",
        "switchyard_circuit_state",
        "switchyard_budget_spent_usd",
        "switchyard_usage_store_writes_total",
        "switchyard_token_estimate_ratio_sum",
        "switchyard_budget_limit_usd",
    ] {
        assert!(names.contains(want), "the alerts use {want}: {names:?}");
    }

    let h = common::start(GATEWAY).await;
    // A prompt long enough that the mock's billing (characters / 4) and
    // the gateway's estimate should agree, message framing aside.
    let prose = "The quick brown fox jumps over the lazy dog. ".repeat(45);
    let ask = |stream: bool| {
        reqwest::Client::new()
            .post(h.url("/v1/chat/completions"))
            .bearer_auth("client-secret")
            .json(&json!({"model": "chat", "stream": stream, "messages": common::user(&prose)}))
            .send()
    };
    // A plain request and a streamed one (the streams' share of requests).
    for stream in [false, true] {
        let r = ask(stream).await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["x-switchyard-deployment"], "mock/a");
        // Read to the end: a stream is recorded once it is done.
        let body = r.text().await.unwrap();
        assert!(!stream || body.contains("[DONE]"), "{body}");
    }
    let r = reqwest::Client::new()
        .post(h.admin("/admin/deployments/mock%2Fa/open"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let r = ask(false).await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["x-switchyard-deployment"], "mock/b");

    let missing = |m: &str| -> Vec<String> {
        let exported = series(m);
        needs
            .iter()
            .filter(|(n, _)| !met(n, &exported))
            .map(|(n, alerts)| format!("{n:?} (used by {alerts:?})"))
            .collect()
    };
    let all_there = common::poll_within(common::PATIENCE, || async {
        let m = h.metrics().await;
        missing(&m).is_empty().then_some(())
    })
    .await;
    if all_there.is_none() {
        let m = h.metrics().await;
        panic!(
            "alerts use series /metrics does not export:\n{}\n\n{m}",
            missing(&m).join("\n")
        );
    }
    // The estimate's ratio is what the upstream billed over what was
    // estimated: two answered requests on mock/a, near 1.
    let m = h.metrics().await;
    let value = |name: &str| {
        series(&m)
            .into_iter()
            .find(|(n, l)| n == name && l.get("deployment").map(String::as_str) == Some("mock/a"))
            .and_then(|_| {
                m.lines()
                    .find(|l| l.starts_with(&format!("{name}{{deployment=\"mock/a\"}}")))
                    .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            })
            .unwrap_or_else(|| panic!("{name} for mock/a in\n{m}"))
    };
    let (sum, count) = (
        value("switchyard_token_estimate_ratio_sum"),
        value("switchyard_token_estimate_ratio_count"),
    );
    assert_eq!(count, 2.0, "{m}");
    assert!(
        (0.5..2.0).contains(&(sum / count)),
        "mean ratio {}",
        sum / count
    );
}
