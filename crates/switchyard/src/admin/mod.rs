//! ADMIN: health, readiness, config reload, state, manual circuit and
//! provider-key control, and the dashboard, on `server.admin_listen` only.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;

use crate::app::App;
use crate::live::Live;

pub mod auth;
pub mod dashboard;
pub mod etcd_source;
pub mod governance;
pub mod reload;
pub mod watch;

pub async fn healthz() -> &'static str {
    "ok"
}

/// Ready while at least one deployment can take traffic (its circuit is not
/// open), or when the config deliberately has none.
pub async fn readyz(State(app): State<App>) -> Response {
    let live = app.live.load();
    let now = tokio::time::Instant::now();
    let usable = live
        .deployments
        .values()
        .any(|d| d.state.circuit.is_admissible(now));
    if usable || live.deployments.is_empty() {
        (StatusCode::OK, "ready").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "every deployment's circuit is open",
        )
            .into_response()
    }
}

/// `GET /metrics`: the Prometheus text format, or OpenMetrics when the
/// scraper's `Accept` asks for it (contract §6).
pub async fn metrics(State(app): State<App>, headers: http::HeaderMap) -> Response {
    publish_gauges(&app);
    let openmetrics = headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("application/openmetrics-text"));
    let content_type = if openmetrics {
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    } else {
        "text/plain; version=0.0.4; charset=utf-8"
    };
    let body = app.metrics.render(openmetrics);
    ([(http::header::CONTENT_TYPE, content_type)], body).into_response()
}

/// `POST /admin/reload[?canary=N&for=D]`: the config's source (its file or
/// its etcd key) read again and applied now, or as a
/// canary serving N% of requests for D (default 10m) first.
pub async fn reload(
    State(app): State<App>,
    axum::extract::Query(q): axum::extract::Query<ReloadQuery>,
) -> Response {
    let canary = match q.rollout(&app.live.load().config) {
        Ok(c) => c,
        Err(e) => {
            let body = serde_json::json!({"result": "error", "errors": [e]});
            return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
        }
    };
    match reload::from_source_as(&app, canary).await {
        Ok(version) => {
            let mut body = serde_json::json!({"result": "ok", "config_version": version});
            // A canary (asked here, or as the config in force says).
            if let Some(run) = app.canary.current().filter(|r| *r.live.version == *version) {
                body["result"] = "canary".into();
                body["canary"] = serde_json::json!({
                    "share": run.share,
                    "for_s": run.until.saturating_duration_since(run.started_at).as_secs_f64(),
                });
            }
            (StatusCode::OK, axum::Json(body)).into_response()
        }
        Err(errors) => {
            // A canary in progress is a conflict, not a bad config.
            let busy = errors.iter().any(|e| e.starts_with(reload::CANARY_RUNNING));
            let status = if busy {
                StatusCode::CONFLICT
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            let body = serde_json::json!({"result": "error", "errors": errors});
            (status, axum::Json(body)).into_response()
        }
    }
}

/// `?canary=N&for=D` of a reload.
#[derive(Debug, Default, serde::Deserialize)]
pub struct ReloadQuery {
    canary: Option<String>,
    #[serde(rename = "for")]
    lasts: Option<String>,
}

impl ReloadQuery {
    /// `canary` absent: as the config in force says; `canary=100`: at once.
    fn rollout(&self, now: &crate::config::Config) -> Result<reload::Rollout, String> {
        let Some(share) = &self.canary else {
            return match self.lasts {
                Some(_) => Err("`for` goes with `canary`: ?canary=10&for=10m".into()),
                None => Ok(reload::Rollout::AsConfigured),
            };
        };
        let percent: f64 = share
            .trim()
            .parse()
            .ok()
            .filter(|p: &f64| *p > 0.0 && *p <= 100.0)
            .ok_or_else(|| {
                format!("canary: `{share}` is not a percentage of requests above 0 and at most 100")
            })?;
        if percent == 100.0 {
            return Ok(reload::Rollout::AtOnce);
        }
        let lasts = match &self.lasts {
            None => now.reload.lasts,
            Some(d) => crate::config::units::parse_duration(d.trim())
                .ok()
                .filter(|d| !d.is_zero())
                .ok_or_else(|| {
                    format!("for: `{d}` is not a duration above zero, e.g. 10m or 30s")
                })?,
        };
        Ok(reload::Rollout::Canary(reload::CanaryAsk {
            share: percent / 100.0,
            lasts,
        }))
    }
}

/// `GET /admin/state`: config version, every deployment's circuit,
/// health, latency, load, limits and keys, and the routes.
pub async fn state(State(app): State<App>) -> Response {
    let live = app.live.load();
    let deployments: Vec<_> = live
        .registry
        .admin_state()
        .into_iter()
        .map(|d| DeploymentView::new(&live, d))
        .collect();
    let routes: Vec<_> = live.config.routes.values().map(RouteView::new).collect();
    let mut body = serde_json::json!({
        "config_version": &*live.version,
        "deployments": deployments,
        "routes": routes,
    });
    if let Some(run) = app.canary.current() {
        body["canary"] = canary_view(&run);
    }
    // A fleet's members, by their heartbeats (contract §7: config drift
    // is visible), and its leases.
    if let Some(serde_json::Value::Object(fleet)) = live.registry.shared.describe() {
        for (k, v) in fleet {
            body[k] = v;
        }
    }
    axum::Json(body).into_response()
}

/// A running canary in `/admin/state`: both versions side by side, as
/// this instance counted them and, in a fleet, as the fleet did (what the
/// verdict is on).
fn canary_view(run: &crate::live::canary::Run) -> serde_json::Value {
    use crate::live::canary::{error_rate, p95_ms};
    use crate::state::fleet_canary::CanaryCounts;
    let version = |v: &str, role: &str, c: &CanaryCounts| {
        serde_json::json!({
            "config_version": v,
            "role": role,
            "requests": c.requests,
            "errors": c.errors,
            "error_rate": error_rate(c),
            "p95_ms": p95_ms(&c.latency),
        })
    };
    let left = run
        .until
        .saturating_duration_since(tokio::time::Instant::now());
    let mut view = serde_json::json!({
        "share": run.share,
        "promoted_in_s": left.as_secs_f64(),
        "promoted_at_ms": run.terms.until_ms,
        "rollback_on": {
            "error_rate": run.rollback_on.error_rate,
            "p95": run.rollback_on.p95,
        },
        "versions": [
            version(&run.old_version, "in_force", &run.old.counts()),
            version(&run.live.version, "canary", &run.new.counts()),
        ],
    });
    if let Some((old, new)) = run.fleet_counts() {
        view["fleet_versions"] = serde_json::json!([
            version(&run.old_version, "in_force", &old),
            version(&run.live.version, "canary", &new),
        ]);
    }
    view
}

/// A `/admin/state` deployment: the registry's numbers plus what the
/// config says about it (provider, upstream model, rpm/tpm limits: its own,
/// or its provider pool's when tighter or when it has none).
#[derive(serde::Serialize)]
struct DeploymentView<'a> {
    #[serde(flatten)]
    state: crate::registry::DeploymentAdmin,
    provider: Option<&'a str>,
    model: Option<&'a str>,
    rpm_limit: Option<u32>,
    tpm_limit: Option<u64>,
}

impl<'a> DeploymentView<'a> {
    fn new(live: &'a Live, state: crate::registry::DeploymentAdmin) -> Self {
        let rt = live.deployments.get(&state.id);
        let (rpm_limit, tpm_limit) = rt.map_or((None, None), |d| d.state.rate_bounds());
        DeploymentView {
            provider: rt.map(|d| &*d.provider.name),
            model: rt.map(|d| &*d.model),
            rpm_limit,
            tpm_limit,
            state,
        }
    }
}

/// A `/admin/state` route.
#[derive(serde::Serialize)]
struct RouteView<'a> {
    name: &'a str,
    strategy: &'static str,
    targets: Vec<&'a str>,
    fallbacks: &'a [String],
}

impl<'a> RouteView<'a> {
    fn new(r: &'a crate::config::Route) -> Self {
        use crate::config::Strategy;
        let strategy = match r.strategy {
            Strategy::Priority => "priority",
            Strategy::Weighted => "weighted",
            Strategy::Latency => "latency",
            Strategy::Cost => "cost",
            Strategy::Balanced => "balanced",
        };
        RouteView {
            name: &r.name,
            strategy,
            targets: r.targets.iter().map(|t| t.deployment.as_str()).collect(),
            fallbacks: &r.fallbacks,
        }
    }
}

#[derive(serde::Deserialize)]
pub struct DecisionsParams {
    limit: Option<usize>,
}

/// `GET /admin/decisions?limit=N`: the most recent finished requests,
/// newest first (at most the last 100).
pub async fn decisions(
    State(app): State<App>,
    axum::extract::Query(p): axum::extract::Query<DecisionsParams>,
) -> Response {
    let list = app.recent.latest(p.limit.unwrap_or(usize::MAX));
    let list: Vec<_> = list.iter().map(|d| &**d).collect();
    axum::Json(serde_json::json!({"decisions": list})).into_response()
}

/// `GET /admin/shadow`: shadow traffic (contract §11) per route and shadow
/// target — requests, errors, latency beside the primary's, cost ratio,
/// agreement, schema validity, text similarity — and the queue.
pub async fn shadow(State(app): State<App>) -> Response {
    let live = app.live.load();
    axum::Json(app.shadows.snapshot(&live)).into_response()
}

/// `POST /admin/deployments/{id}/{open|close|reset}`: manual circuit control.
pub async fn circuit(
    State(app): State<App>,
    axum::extract::Path((id, action)): axum::extract::Path<(String, String)>,
) -> Response {
    let live = app.live.load();
    let Some(dep) = live.deployments.get(&id) else {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(serde_json::json!({"error": format!("no deployment `{id}`")})),
        )
            .into_response();
    };
    let t = match dep.state.force(&action) {
        Some(t) => t,
        None => {
            let other = &action;
            let msg = format!("unknown action `{other}`: use open, close or reset");
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(serde_json::json!({"error": msg})),
            )
                .into_response();
        }
    };
    tracing::warn!(deployment = %id, from = t.from.as_str(), to = t.to.as_str(), "circuit changed by hand");
    axum::Json(serde_json::json!({"id": id, "circuit": t.to.as_str()})).into_response()
}

/// `POST /admin/providers/{name}/keys/{label}/reset`: a provider key set
/// aside (rejected, spent or cooling down) is back in use at once. `{label}`
/// as `/admin/state` lists the key, percent-encoded (`inline%230`).
pub async fn reset_key(
    State(app): State<App>,
    axum::extract::Path((name, label)): axum::extract::Path<(String, String)>,
) -> Response {
    let live = app.live.load();
    let Some(provider) = live.config.providers.get(&name) else {
        let msg = format!("no provider `{name}` in the config");
        return governance::error(StatusCode::NOT_FOUND, "provider_not_found", msg);
    };
    if !provider.keys.iter().any(|k| k.label == label) {
        let msg =
            format!("provider `{name}` has no key `{label}` (labels as /admin/state lists them)");
        return governance::error(StatusCode::NOT_FOUND, "key_not_found", msg);
    }
    // Key records are per provider: one deployment's tracker restores the
    // key for all of them (none: it was never used, nothing to restore).
    let tracker = live
        .deployments
        .values()
        .find(|d| *d.provider.name == *name)
        .map(|d| &d.state.keys);
    let was = tracker.map(|t| t.status(&label));
    if let Some(t) = tracker {
        t.restore(&label);
    }
    tracing::warn!(provider = %name, key = %label, "provider key reset by hand: back in use");
    axum::Json(serde_json::json!({
        "provider": name,
        "label": label,
        "was": was.unwrap_or(crate::registry::health::KeyStatus::Active),
        "status": crate::registry::health::KeyStatus::Active,
    }))
    .into_response()
}

/// Circuit state, health, quota used and budget spend are gauges read off
/// the registry when scraped.
fn publish_gauges(app: &App) {
    use crate::observe::metrics::{
        ClientLabels, DeploymentLabels, DimensionLabels, Name, StateLabels,
    };
    let live = app.live.load();
    let now = crate::usage::query::now_ms();
    for (c, id) in live.config.clients.iter().flatten().zip(&live.client_ids) {
        if let Some(b) = c.budget {
            let s = live.governance.budgets.account(id).snapshot(b.per, now);
            let client = ClientLabels {
                client: Name(id.clone()),
            };
            app.metrics
                .budget_spent_usd
                .get_or_create(&client)
                .set(s.spent_usd);
            app.metrics
                .budget_limit_usd
                .get_or_create(&client)
                .set(b.usd);
        }
    }
    app.metrics
        .cache_entries
        .set(live.cache.as_ref().map_or(0, |c| c.entries()) as i64);
    // The fleet counts its own failures; the counter catches up.
    for (op, n) in live.registry.shared.errors() {
        let c = app
            .metrics
            .state_backend_errors
            .get_or_create(&crate::observe::metrics::OpLabels { op });
        c.inc_by(n.saturating_sub(c.get()));
    }
    app.metrics
        .prime(live.deployments.values().map(|d| &d.name));
    for d in live.registry.admin_state() {
        let name = Name(std::sync::Arc::from(d.id.as_str()));
        for state in ["closed", "open", "half_open"] {
            let v = i64::from(d.circuit == state);
            app.metrics
                .circuit_state
                .get_or_create(&StateLabels {
                    deployment: name.clone(),
                    state,
                })
                .set(v);
        }
        app.metrics
            .health_score
            .get_or_create(&DeploymentLabels {
                deployment: name.clone(),
            })
            .set(d.health_score);
        for (dimension, used) in [("rpm", d.quota_used.rpm), ("tpm", d.quota_used.tpm)] {
            app.metrics
                .quota_used_ratio
                .get_or_create(&DimensionLabels {
                    deployment: name.clone(),
                    dimension,
                })
                .set(used);
        }
    }
}

/// `DELETE /admin/cache`: every stored answer forgotten at once.
pub async fn purge_cache(State(app): State<App>) -> Response {
    let live = app.live.load();
    let Some(cache) = live.cache.as_ref() else {
        return governance::error(
            StatusCode::CONFLICT,
            "cache_off",
            "there is no response cache to empty: `cache.backend` is off in this gateway's config",
        );
    };
    let Some(removed) = cache.clear().await else {
        return governance::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "state_unavailable",
            "the shared response cache (Redis) did not answer; nothing was removed",
        );
    };
    app.metrics.cache_entries.set(0);
    axum::Json(serde_json::json!({"result": "ok", "removed": removed})).into_response()
}
