//! The governance part of the admin API: `/admin/usage`, `/admin/clients`
//! and the keys API (contract §5).

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::app::App;
use crate::config::BudgetPeriod;
use crate::usage::query::{self, format_time, GroupBy, Range};
use crate::usage::record::IssuedKey;
use crate::usage::UsageStore;

/// An admin error: `{"error": {"message", "code"}}`.
pub fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({"error": {"message": message.into(), "type": "admin_error", "code": code}});
    (status, axum::Json(body)).into_response()
}

fn no_store(what: &str) -> Response {
    error(
        StatusCode::CONFLICT,
        "usage_store_off",
        format!("{what} needs the usage store, and `usage.store` is off in this gateway's config: set it to sqlite or postgres"),
    )
}

fn store_failed(store: &UsageStore, e: &str) -> Response {
    tracing::error!(store = %store.name, "usage store: {e}");
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "usage_store_unavailable",
        format!("the usage store ({}) did not answer: {e}", store.name),
    )
}

#[derive(Debug, Deserialize)]
pub struct UsageParams {
    group_by: Option<String>,
    since: Option<String>,
    until: Option<String>,
}

/// What `/admin/usage` and `switchyard usage` ask the store.
pub struct UsageAsk {
    pub by: GroupBy,
    pub range: Range,
}

/// `group_by` (default `client`), `since` (default 24 h back), `until`
/// (default now), as the admin API and the command take them.
pub fn usage_ask(
    group_by: Option<&str>,
    since: Option<&str>,
    until: Option<&str>,
) -> Result<UsageAsk, String> {
    let by = match group_by {
        None => GroupBy::Client,
        Some(g) => GroupBy::parse(g).ok_or_else(|| {
            format!("group_by `{g}` is not one of client, model, route, deployment")
        })?,
    };
    let now = query::now_ms();
    let until_ms = until.map_or(Ok(now), |u| query::parse_time(u, now))?;
    let default_since = until_ms - query::DEFAULT_SPAN.as_millis() as i64;
    let since_ms = since.map_or(Ok(default_since), |s| query::parse_time(s, now))?;
    if since_ms > until_ms {
        return Err("`since` is after `until`".into());
    }
    Ok(UsageAsk {
        by,
        range: Range {
            since_ms,
            until_ms,
            client: None,
        },
    })
}

/// The answer's JSON (contract §5).
pub async fn usage_answer(store: &UsageStore, ask: UsageAsk) -> Result<Value, String> {
    let (since, until) = (ask.range.since_ms, ask.range.until_ms);
    let rows = store.totals(ask.by, ask.range).await?;
    let rows: Vec<Value> = rows
        .into_iter()
        .map(|(key, t)| {
            json!({
                "key": if key.is_empty() { Value::Null } else { Value::String(key) },
                "requests": t.requests,
                "errors": t.errors,
                "cache_hits": t.cache_hits,
                "input_tokens": t.input_tokens,
                "output_tokens": t.output_tokens,
                "cached_input_tokens": t.cached_input_tokens,
                "cost_usd": t.cost_usd,
            })
        })
        .collect();
    Ok(json!({
        "since": format_time(since),
        "until": format_time(until),
        "group_by": ask.by.as_str(),
        "rows": rows,
    }))
}

/// `GET /admin/usage?group_by=…&since=…&until=…`.
pub async fn usage(State(app): State<App>, Query(p): Query<UsageParams>) -> Response {
    let Some(store) = &app.usage else {
        return no_store("usage reporting");
    };
    let ask = match usage_ask(
        p.group_by.as_deref(),
        p.since.as_deref(),
        p.until.as_deref(),
    ) {
        Ok(a) => a,
        Err(e) => return error(StatusCode::BAD_REQUEST, "invalid_request", e),
    };
    match usage_answer(store, ask).await {
        Ok(v) => axum::Json(v).into_response(),
        Err(e) => store_failed(store, &e),
    }
}

fn per(p: BudgetPeriod) -> &'static str {
    match p {
        BudgetPeriod::Hour => "hour",
        BudgetPeriod::Day => "day",
        BudgetPeriod::Month => "month",
    }
}

/// `GET /admin/clients`: each configured client, its limits, its budget
/// now, and its keys (the config's and the issued ones; never the keys).
pub async fn clients(State(app): State<App>) -> Response {
    let live = app.live.load_full();
    let used: HashMap<String, i64> = match &app.usage {
        Some(s) => s.key_use().await.unwrap_or_else(|e| {
            tracing::warn!("usage store: key use unavailable: {e}");
            HashMap::new()
        }),
        None => HashMap::new(),
    };
    let at = |ms: Option<i64>| ms.map_or(Value::Null, |t| Value::String(format_time(t)));
    let now = query::now_ms();
    let fleet = FleetBudgets::read(&live, now).await;
    let config_key_ids: HashMap<usize, &str> = live
        .clients_by_key
        .values()
        .map(|(i, id)| (*i, &**id))
        .collect();
    let list: Vec<Value> = live
        .config
        .clients
        .iter()
        .flatten()
        .zip(&live.client_ids)
        .enumerate()
        .map(|(i, (c, id))| {
            let budget = c.budget.map_or(Value::Null, |b| {
                let mut s = live.governance.budgets.account(id).snapshot(b.per, now);
                if let Some(f) = &fleet {
                    f.apply(id, &mut s);
                }
                json!({
                    "usd": b.usd,
                    "per": per(b.per),
                    "spent_usd": s.spent_usd,
                    "reserved_usd": s.reserved_usd,
                    "resets_at": format_time(s.resets_at_ms),
                })
            });
            let mut keys: Vec<Value> = config_key_ids
                .get(&i)
                .map(|k| {
                    json!({"id": k, "source": "config", "created_at": Value::Null,
                           "last_used_at": at(used.get(*k).copied())})
                })
                .into_iter()
                .collect();
            keys.extend(live.governance.issued_keys.of(id).into_iter().map(|k| {
                json!({"id": &*k.id, "source": "admin", "created_at": format_time(k.created_at_ms),
                       "last_used_at": at(used.get(&*k.id).copied())})
            }));
            json!({
                "id": id.as_ref(),
                "routes": c.routes,
                "rpm": c.rpm,
                "tpm": c.tpm,
                "budget": budget,
                "keys": keys,
            })
        })
        .collect();
    axum::Json(json!({"clients": list})).into_response()
}

/// In a fleet, the budgets as the fleet counts them (contract §7): the
/// shared counter of each window holds the fleet's spend and every
/// instance's holds as one sum; the holds are this instance's own and what
/// the others said in their last heartbeat, the spend is the rest.
struct FleetBudgets {
    /// Each client's counter (micro-USD), when the fleet has one this window.
    used: HashMap<String, u64>,
    held: HashMap<String, f64>,
}

impl FleetBudgets {
    /// `None` when there is no fleet or Redis is away: the instance's own
    /// figures are all there is.
    async fn read(live: &crate::live::Live, now: i64) -> Option<FleetBudgets> {
        let shared = &live.registry.shared;
        let clients: Vec<(String, String)> = live
            .config
            .clients
            .iter()
            .flatten()
            .filter_map(|c| {
                let (start, _) = crate::governance::budget::window(c.budget?.per, now);
                let name = crate::governance::budget::counter_name(&c.id, start);
                Some((c.id.clone(), shared.counter(&name)?.to_string()))
            })
            .collect();
        let keys: Vec<String> = clients.iter().map(|(_, k)| k.clone()).collect();
        let (counters, mut held) = shared.budget_counters(keys).await?;
        let used = clients
            .into_iter()
            .zip(counters)
            .filter_map(|((id, _), n)| Some((id, n?.max(0) as u64)))
            .collect();
        for (client, usd) in live.governance.budgets.fleet_held() {
            *held.entry(client).or_default() += usd;
        }
        Some(FleetBudgets { used, held })
    }

    /// `s` (this instance's view) as the fleet's.
    fn apply(&self, client: &str, s: &mut crate::governance::budget::Snapshot) {
        let held = self.held.get(client).copied().unwrap_or(0.0);
        if let Some(used) = self.used.get(client) {
            s.spent_usd = (*used as f64 / 1e6 - held).max(0.0);
        }
        s.reserved_usd = held;
    }
}

/// `POST /admin/clients/{id}/keys`: a new key, shown once.
pub async fn create_key(State(app): State<App>, Path(client): Path<String>) -> Response {
    let live = app.live.load_full();
    let Some(i) = live.client_index(&client) else {
        return unknown_client(&client);
    };
    let Some(store) = &app.usage else {
        return no_store("issuing keys");
    };
    let new = crate::governance::keys::generate();
    let created_at_ms = query::now_ms();
    let record = IssuedKey {
        id: new.id.clone(),
        client: client.clone(),
        sha256: hex::encode(new.sha256),
        created_at_ms,
    };
    if let Err(e) = store.insert_key(record).await {
        return store_failed(store, &e);
    }
    live.governance.issued_keys.insert(
        new.sha256,
        crate::governance::keys::Issued {
            client: live.client_ids[i].clone(),
            id: new.id.as_str().into(),
            created_at_ms,
        },
    );
    let shared = crate::state::fleet::SharedKey {
        sha256: hex::encode(new.sha256),
        client: client.clone(),
        id: new.id.clone(),
        created_at_ms,
    };
    if let Err(e) = live.registry.shared.share_key_issued(&shared).await {
        tracing::warn!(client = %client, key_id = %new.id, "virtual key issued here, but not shared with the fleet yet ({e}): other instances learn it from the usage store");
    }
    tracing::info!(client = %client, key_id = %new.id, "virtual key issued");
    let body = json!({
        "id": new.id,
        "key": new.key,
        "client": client,
        "created_at": format_time(created_at_ms),
    });
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

/// `DELETE /admin/clients/{id}/keys/{key_id}`: refused from now on.
pub async fn revoke_key(
    State(app): State<App>,
    Path((client, key_id)): Path<(String, String)>,
) -> Response {
    let live = app.live.load_full();
    if live.client_index(&client).is_none() {
        return unknown_client(&client);
    }
    if key_id.starts_with("cfg-") {
        return error(
            StatusCode::CONFLICT,
            "config_key",
            format!(
                "`{key_id}` is the key from the config file: remove or change it there and reload"
            ),
        );
    }
    let Some(store) = &app.usage else {
        return no_store("revoking keys");
    };
    // Refused here at once, whatever the store says next.
    let here = live.governance.issued_keys.remove(&client, &key_id);
    let stored = match store.revoke_key(&client, &key_id).await {
        Ok(found) => found,
        Err(e) => return store_failed(store, &e),
    };
    if !(here || stored) {
        return error(
            StatusCode::NOT_FOUND,
            "key_not_found",
            format!("client `{client}` has no live key `{key_id}`"),
        );
    }
    if let Err(e) = live
        .registry
        .shared
        .share_key_revoked(&client, &key_id)
        .await
    {
        tracing::error!(client = %client, key_id = %key_id, "virtual key revoked here and in the usage store, but the fleet could not be told ({e}): other instances refuse it only once they sync from the store");
    }
    tracing::info!(client = %client, key_id = %key_id, "virtual key revoked");
    axum::Json(json!({"id": key_id, "revoked": true})).into_response()
}

fn unknown_client(client: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "client_not_found",
        format!("no client `{client}` in the config"),
    )
}
