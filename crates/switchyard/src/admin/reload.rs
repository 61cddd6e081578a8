//! Re-read the config's source (its file, or its etcd key:
//! `admin::etcd_source`), validate it whole, and swap it in atomically —
//! or, as a canary (contract §11), serve it to a share of requests beside
//! the one in force, promote it after its time and roll it back at once
//! when it does worse (`live::canary`).
//! In-flight requests keep the snapshot they loaded; a bad config is never
//! applied (the old one stays, the problems are logged and returned).

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::app::App;
use crate::config;
use crate::config::source::Source;
use crate::live::canary::{self, Run, Verdict};
use crate::live::Live;
use crate::observe::metrics::ResultLabels;

/// A canary reload: the share of requests the new config serves and how
/// long before it is promoted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CanaryAsk {
    pub share: f64,
    pub lasts: Duration,
}

/// How a reload goes out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rollout {
    /// As the config in force says (`reload.canary`): a canary, or at once.
    AsConfigured,
    AtOnce,
    Canary(CanaryAsk),
}

impl Rollout {
    fn resolve(self, now: &config::Config) -> Option<CanaryAsk> {
        match self {
            Rollout::AsConfigured => now.reload.canary.map(|share| CanaryAsk {
                share,
                lasts: now.reload.lasts,
            }),
            Rollout::AtOnce => None,
            Rollout::Canary(c) => Some(c),
        }
    }
}

/// How often a running canary is judged.
const JUDGE_EVERY: Duration = Duration::from_millis(100);

/// SIGHUP's reload: as the config in force says.
pub async fn from_source(app: &App) -> Result<String, Vec<String>> {
    from_source_as(app, Rollout::AsConfigured).await
}

/// Re-read the config's source (its file, or its etcd key), going out as
/// `rollout` says.
pub async fn from_source_as(app: &App, rollout: Rollout) -> Result<String, Vec<String>> {
    let Some(source) = &app.config_source else {
        return Err(vec![
            "the gateway runs the built-in demo config; there is no file to reload".into(),
        ]);
    };
    match read(source).await {
        Ok(src) => from_text(app, &source.to_string(), &src, rollout).await,
        Err(e) => Err(rejected(app, vec![e])),
    }
}

/// The config's text, from its file or its etcd key.
pub async fn read(source: &Source) -> Result<String, String> {
    match source {
        Source::File(path) => std::fs::read_to_string(path)
            .map_err(|e| format!("{}: cannot read: {e}", path.display())),
        Source::Etcd(at) => super::etcd_source::read(at).await,
    }
}

/// The source changed (its file was written; a canary ended, and a version
/// written meanwhile may be waiting): read it and reload as [`on_text`]
/// does. An unreadable source is left for its next change (a file
/// mid-rename, deleted; an etcd that is away is read again by its watcher
/// when it is back).
///
/// Boxed: a canary's judge task calls it when the canary ends, and the
/// reload it makes can start the next canary's task — a cycle the compiler
/// cannot prove `Send` through unless one link has a named type.
pub fn on_change(app: &App) -> BoxFuture<'_, ()> {
    Box::pin(async move {
        let Some(source) = &app.config_source else {
            return;
        };
        let Ok(src) = read(source).await else {
            return;
        };
        on_text(app, &source.to_string(), &src).await;
    })
}

/// A new text from the source (`name` in diagnostics): reload as the config
/// in force says, unless it is the config in force or the one a reload
/// last tried (an explicit reload of the same write, a save that changed
/// nothing, a bad version read again after etcd came back).
pub async fn on_text(app: &App, name: &str, src: &str) {
    let version = config::text_version(src);
    let tried = app.last_reload.lock().ok().and_then(|g| g.clone());
    if *app.live.load().version == *version || tried.as_deref() == Some(version.as_str()) {
        return;
    }
    // Problems are logged and counted by the reload itself.
    let _ = from_text(app, name, src, Rollout::AsConfigured).await;
}

/// A reload refused because a canary is running: nothing changes until it
/// is promoted or rolled back.
pub const CANARY_RUNNING: &str = "a canary config is being served";

/// Validate `src` (named `name` in diagnostics) whole and apply it: at once,
/// or as a canary.
async fn from_text(
    app: &App,
    name: &str,
    src: &str,
    rollout: Rollout,
) -> Result<String, Vec<String>> {
    let canary = rollout.resolve(&app.live.load().config);
    if let Some(run) = app.canary.current() {
        let left = run
            .until
            .saturating_duration_since(tokio::time::Instant::now());
        let msg = format!(
            "{CANARY_RUNNING} (version {}, {}s before its promotion): wait for its verdict",
            run.live.version,
            left.as_secs()
        );
        return Err(rejected(app, vec![msg]));
    }
    let version = config::text_version(src);
    if *app.live.load().version == *version {
        // Already in force: nothing to swap (and circuits keep their state
        // either way).
        return Ok(version);
    }
    if let Ok(mut g) = app.last_reload.lock() {
        *g = Some(version);
    }
    let result = config::load_str(src, name, &|var| std::env::var(var).ok())
        .map_err(|ds| ds.iter().map(ToString::to_string).collect::<Vec<_>>())
        .and_then(|cfg| same_store(&app.live.load().config, &cfg).map(|()| cfg))
        .and_then(|cfg| same_exporter(&app.live.load().config, &cfg).map(|()| cfg))
        .and_then(|cfg| same_state(&app.live.load().config, &cfg).map(|()| cfg))
        .and_then(|cfg| same_listeners(&app.live.load().config, &cfg).map(|()| cfg))
        .and_then(|cfg| same_shadow_queue(&app.live.load().config, &cfg).map(|()| cfg))
        .and_then(|cfg| {
            let now = app.live.load();
            let build = if canary.is_some() {
                Live::build_beside
            } else {
                Live::build
            };
            build(cfg, &now.registry, &now.governance).map_err(|e| vec![e])
        });
    match result {
        Ok(live) => {
            if let Some(store) = &app.usage {
                // Budgets of clients the new config added, before they
                // can send a request.
                if let Err(e) =
                    crate::governance::restore::restore(live.clients(), live.governed(), store)
                        .await
                {
                    tracing::error!("reload: the usage store did not answer ({e}); budgets of new clients start from zero");
                }
            }
            match canary {
                None => Ok(swap(app, Arc::new(live))),
                Some(ask) => begin_canary(app, Arc::new(live), ask).await,
            }
        }
        Err(errors) => Err(rejected(app, errors)),
    }
}

/// Serves `live` beside the config in force and judges it until it is
/// promoted or rolled back. In a fleet, on the terms of the first instance
/// to start the same run (`live::canary`).
async fn begin_canary(app: &App, live: Arc<Live>, ask: CanaryAsk) -> Result<String, Vec<String>> {
    let version = live.config.version.clone();
    let now = app.live.load_full();
    let shared = now.registry.shared.clone();
    let run_id = canary::fleet_run(&live.version, &now.version);
    let terms = shared
        .canary_terms(&run_id, canary::proposed(ask.share, ask.lasts))
        .await;
    let run = Run::new(live, &now, terms);
    let Some(run) = app.canary.start(run) else {
        return Err(rejected(app, vec![CANARY_RUNNING.into()]));
    };
    tracing::info!(
        config_version = %version,
        share = run.share,
        promoted_in_s = run.until.saturating_duration_since(run.started_at).as_secs_f64(),
        "canary config serving beside the one in force"
    );
    let app = app.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(JUDGE_EVERY);
        loop {
            tick.tick().await;
            let verdict = run.judge(&*shared, tokio::time::Instant::now()).await;
            if verdict == Verdict::Continue {
                continue;
            }
            // Ended elsewhere (never today, but then it is not ours to act on).
            if !app.canary.end(&run) {
                return;
            }
            match verdict {
                Verdict::RollBack(why) => roll_back(&app, &run, &why),
                _ => promote(&app, &run),
            }
            // A version of the source written while the canary ran was
            // refused then: it goes out now (the canary's own version, or
            // one already tried, is not reloaded again).
            drop(run);
            on_change(&app).await;
            return;
        }
    });
    Ok(version)
}

/// The canary becomes the config in force.
fn promote(app: &App, run: &Run) {
    run.live.registry.reconcile(&run.live.config);
    let version = swap(app, run.live.clone());
    tracing::info!(
        config_version = %version,
        requests = run.new.requests(),
        error_rate = run.new.error_rate(),
        p95_ms = run.new.p95_ms(),
        "canary config promoted"
    );
}

/// The canary is dropped; the config in force takes every request again.
fn roll_back(app: &App, run: &Run, why: &str) {
    let live = app.live.load();
    live.registry.reconcile(&live.config);
    app.metrics
        .config_reloads
        .get_or_create(&ResultLabels {
            result: "rolled_back",
        })
        .inc();
    tracing::error!(
        config_version = %run.live.version,
        "canary config rolled back: {why}; the config in force serves every request"
    );
}

/// A reload that failed: logged and counted; the running config stays.
pub(super) fn rejected(app: &App, errors: Vec<String>) -> Vec<String> {
    app.metrics
        .config_reloads
        .get_or_create(&ResultLabels { result: "error" })
        .inc();
    for e in &errors {
        tracing::error!("config reload rejected (the running config stays): {e}");
    }
    errors
}

fn swap(app: &App, live: Arc<Live>) -> String {
    app.metrics
        .config_reloads
        .get_or_create(&ResultLabels { result: "ok" })
        .inc();
    let version = live.config.version.clone();
    app.live.store(live);
    tracing::info!(config_version = %version, "config reloaded");
    version
}

/// The usage store is opened once, at start-up: a reload that moves it is
/// refused rather than half-applied.
fn same_store(old: &config::Config, new: &config::Config) -> Result<(), Vec<String>> {
    use config::UsageBackend as B;
    let same = match (&old.usage.store, &new.usage.store) {
        (B::Off, B::Off) => true,
        (B::Sqlite { path: a }, B::Sqlite { path: b }) => a == b,
        (B::Postgres { url: a }, B::Postgres { url: b }) => a.expose() == b.expose(),
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(vec![
            "usage.store, usage.path and usage.url take effect at start-up only: restart the gateway to change them".into(),
        ])
    }
}

/// The fleet's shared state is joined once, at start-up.
fn same_state(old: &config::Config, new: &config::Config) -> Result<(), Vec<String>> {
    if old.state == new.state {
        return Ok(());
    }
    Err(vec![
        "state.* takes effect at start-up only: restart the gateway to change it".into(),
    ])
}

/// The listeners are bound once, at start-up. A reload that moves one is
/// refused: applying the rest would leave a listener where the new config
/// says it is not — an admin API still on a public address after a reload
/// that moved it to loopback and, as loopback allows, dropped its key.
fn same_listeners(old: &config::Config, new: &config::Config) -> Result<(), Vec<String>> {
    let (a, b) = (&old.server, &new.server);
    if a.listen == b.listen && a.admin_listen == b.admin_listen {
        return Ok(());
    }
    Err(vec![
        "server.listen and server.admin_listen take effect at start-up only: restart the gateway to change them".into(),
    ])
}

/// The shadow queue and its workers are started once, at start-up (a
/// route's `shadow` block is read per request: a reload changes it).
fn same_shadow_queue(old: &config::Config, new: &config::Config) -> Result<(), Vec<String>> {
    if old.shadow == new.shadow {
        return Ok(());
    }
    Err(vec![
        "shadow.queue and shadow.workers take effect at start-up only: restart the gateway to change them".into(),
    ])
}

/// The trace exporter is built once, at start-up, like the usage store:
/// moving it is refused. `trace_sample` and `trace_slow` are read per
/// request, so a reload changes them.
fn same_exporter(old: &config::Config, new: &config::Config) -> Result<(), Vec<String>> {
    let (a, b) = (&old.observability, &new.observability);
    if a.otlp_endpoint == b.otlp_endpoint
        && (a.otlp_endpoint.is_none() || a.otlp_protocol == b.otlp_protocol)
    {
        return Ok(());
    }
    Err(vec![
        "observability.otlp_endpoint and otlp_protocol take effect at start-up only: restart the gateway to change them".into(),
    ])
}
