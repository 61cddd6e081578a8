//! A client that closes its stream mid-way (the user pressed Esc), and
//! what it was charged, checked everywhere it is kept: the upstream call
//! abandoned, the budget, the usage row.

use super::Harness;

/// Open an OpenAI-door stream as the budgeted client (`client-secret`),
/// read it until its text so far satisfies `enough`, then drop the
/// connection. What was read.
pub async fn read_then_close(h: &Harness, model: &str, enough: impl Fn(&str) -> bool) -> String {
    let http = reqwest::Client::new();
    let mut resp = http
        .post(h.url("/v1/chat/completions"))
        .bearer_auth("client-secret")
        .json(&serde_json::json!({"model": model, "stream": true, "max_tokens": 200,
                      "messages": super::user("Tell me about the weather in Paris today, please.")}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{model}");
    let mut seen = String::new();
    let read = async {
        while let Some(chunk) = resp.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if enough(&super::sse_text(&seen)) {
                return;
            }
        }
        panic!("{model}: the stream ended before its text was enough: {seen}");
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("the content arrives");
    drop(resp);
    drop(http);
    seen
}

/// The one request `h` served was closed by its client after `output`
/// tokens and charged `cost`: the upstream stream was dropped, the
/// budget spent and the usage row (estimated, `client_closed`) agree.
pub async fn closed_and_charged(h: &Harness, route: &str, cost: f64, output: u64) {
    super::eventually(
        || async { h.mock.abandoned_bodies() == 1 },
        "the upstream stream abandoned",
    )
    .await;
    let clients = h.admin_json("/admin/clients").await;
    let spent = clients["clients"][0]["budget"]["spent_usd"]
        .as_f64()
        .unwrap();
    assert!(
        (spent - cost).abs() < 1e-9,
        "{route}: spent {spent} vs {cost}"
    );
    h.flush_usage().await;
    let db = rusqlite::Connection::open(h.dir.path().join("usage.db")).unwrap();
    let (outcome, estimated, out, row_cost): (String, i64, u64, f64) = db
        .query_row(
            "SELECT outcome, usage_estimated, output_tokens, cost_usd FROM usage_requests",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .unwrap();
    assert_eq!(
        (outcome.as_str(), estimated, out),
        ("client_closed", 1, output),
        "{route}"
    );
    assert!(
        (row_cost - cost).abs() < 1e-9,
        "{route}: row {row_cost} vs {cost}"
    );
}
