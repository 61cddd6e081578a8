//! The Grafana dashboard in `deploy/grafana/` names only metrics that
//! `/metrics` exports, under the names it exports them.

mod common;

use std::collections::BTreeSet;

use serde_json::Value;

fn exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(e)) = m.get("expr") {
                out.push(e.clone());
            }
            m.values().for_each(|x| exprs(x, out));
        }
        Value::Array(a) => a.iter().for_each(|x| exprs(x, out)),
        _ => {}
    }
}

#[tokio::test]
async fn every_metric_the_dashboard_queries_is_exported() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana/switchyard.json"
    );
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut all = Vec::new();
    exprs(&dash, &mut all);
    assert!(all.len() >= 14, "{all:?}");
    let re = regex::Regex::new(r"switchyard_[a-z_]+").unwrap();
    let names: BTreeSet<String> = all
        .iter()
        .flat_map(|e| re.find_iter(e).map(|m| m.as_str().to_owned()))
        .collect();
    // The contract's families the dashboard is there to show.
    for want in [
        "switchyard_requests_total",
        "switchyard_request_duration_seconds_bucket",
        "switchyard_time_to_first_token_seconds_bucket",
        "switchyard_fallbacks_total",
        "switchyard_retries_total",
        "switchyard_circuit_state",
        "switchyard_tokens_total",
        "switchyard_cost_usd_total",
        "switchyard_probes_total",
        "switchyard_token_estimate_ratio_bucket",
        "switchyard_budget_limit_usd",
        "switchyard_quota_used_ratio",
    ] {
        assert!(names.contains(want), "the dashboard shows {want}");
    }

    // A gateway that has served a request, so that labelled series exist.
    let h = common::start(common::ONE_OPENAI).await;
    let r = h
        .post(serde_json::json!({"model": "chat", "messages": common::user("hi")}))
        .await;
    assert_eq!(r.status(), 200);
    let _ = h.decision(0).await;
    let text = h.metrics().await;
    // Series, and families declared with no series yet (labels not known
    // until they happen: a fallback reason, a budgeted client).
    let mut exported: BTreeSet<String> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next().map(str::to_owned))
        .collect();
    for l in text.lines() {
        let Some(rest) = l.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split(' ');
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        exported.insert(name.to_owned());
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                exported.insert(format!("{name}{suffix}"));
            }
        }
    }
    let missing: Vec<&String> = names
        .iter()
        .filter(|n| !exported.contains(n.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "queried but not exported: {missing:?}\n{text}"
    );
}
