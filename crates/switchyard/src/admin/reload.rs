//! Re-read the config file, validate it whole, and swap it in atomically.
//! In-flight requests keep the snapshot they loaded; a bad config is never
//! applied (the old one stays, the problems are logged and returned).

use std::sync::Arc;

use crate::app::App;
use crate::config;
use crate::observe::metrics::ResultLabels;
use crate::state::live::Live;

pub fn from_file(app: &App) -> Result<String, Vec<String>> {
    let Some(path) = &app.config_path else {
        return Err(vec![
            "the gateway runs the built-in demo config; there is no file to reload".into(),
        ]);
    };
    let result = config::load_file(path)
        .map_err(|ds| ds.iter().map(ToString::to_string).collect::<Vec<_>>())
        .and_then(|cfg| Live::build(cfg, &app.live.load().registry).map_err(|e| vec![e]));
    match result {
        Ok(live) => {
            app.metrics
                .config_reloads
                .get_or_create(&ResultLabels { result: "ok" })
                .inc();
            let version = live.config.version.clone();
            app.live.store(Arc::new(live));
            tracing::info!(config_version = %version, "config reloaded");
            Ok(version)
        }
        Err(errors) => {
            app.metrics
                .config_reloads
                .get_or_create(&ResultLabels { result: "error" })
                .inc();
            for e in &errors {
                tracing::error!("config reload rejected: {e}");
            }
            Err(errors)
        }
    }
}
