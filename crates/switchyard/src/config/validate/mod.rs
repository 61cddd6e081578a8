//! Whole-config checks: raw mirror → [`Config`] with defaults applied.
//!
//! Each section file decodes its part of the tree into the raw mirror and
//! checks it. A broken part is still built (with defaults) so that references
//! to it do not cascade into more errors; the caller discards the `Config`
//! whenever any diagnostic was reported.

mod clients;
pub mod globals;
pub mod models;
pub mod providers;
pub mod routes;
mod unsupported;

use std::time::Duration;

use super::env::Env;
use super::model::*;
use super::node::Sp;
use super::raw::RawConfig;
use super::Diags;

pub fn validate(d: &mut Diags, raw: RawConfig, env: Env, version: String) -> Config {
    let server = globals::server(d, &raw.server, env);
    let providers = providers::check(d, &raw.providers, env);
    let (deployments, deployment_order) = models::check(d, &raw.models, &providers);
    providers::check_probe_models(d, &raw.providers, &providers, &deployments);
    let routes = routes::check(d, &raw.routes, &deployments);
    let task_rules = routes::check_task_rules(d, &raw.task_rules);
    let clients = raw
        .clients
        .as_ref()
        .map(|cs| clients::check(d, cs, env, &routes, &deployments));
    let (cache, state, usage) = globals::stores(d, &raw);
    let observability = globals::observability(d, &raw.observability);
    unsupported::check(d, &raw);
    globals::requirements(d, &raw);
    Config {
        version,
        server,
        clients,
        providers,
        deployments,
        deployment_order,
        routes,
        task_rules,
        cache,
        state,
        usage,
        observability,
        degraded: globals::degraded(&raw.degraded),
        reload: globals::reload(d, &raw.reload),
        shadow: globals::shadow(d, &raw.shadow),
        warnings: Vec::new(),
    }
}

/// A duration that must be > 0, or `default` when absent.
fn positive(d: &mut Diags, v: &Option<Sp<Duration>>, default: Duration) -> Duration {
    match v {
        Some(s) if s.value.is_zero() => {
            d.err(&s.at, "must be greater than zero");
            default
        }
        Some(s) => s.value,
        None => default,
    }
}

/// A count that must be ≥ 1 when set.
fn at_least_one<T: Copy + PartialEq + Default>(d: &mut Diags, v: &Option<Sp<T>>) -> Option<T> {
    let s = v.as_ref()?;
    if s.value == T::default() {
        d.err(&s.at, "must be at least 1");
    }
    Some(s.value)
}

/// A non-negative number (prices, weights).
fn non_negative(d: &mut Diags, v: &Option<Sp<f64>>) -> Option<f64> {
    let s = v.as_ref()?;
    if s.value < 0.0 {
        d.err(&s.at, format!("must not be negative, found {}", s.value));
    }
    Some(s.value)
}

/// An absolute URL with one of `schemes`; returned without a trailing slash.
fn url(d: &mut Diags, s: &Sp<String>, schemes: &[&str]) -> Option<String> {
    let ok = s.value.parse::<http::Uri>().ok().filter(|u| {
        u.scheme_str().is_some_and(|sc| schemes.contains(&sc))
            && u.host().is_some_and(|h| !h.is_empty())
    });
    if ok.is_none() {
        let want = schemes
            .iter()
            .map(|s| format!("{s}://"))
            .collect::<Vec<_>>()
            .join(" or ");
        // A URL with userinfo may hold a password: not echoed.
        let shown = if s.value.contains('@') {
            "this".to_string()
        } else {
            format!("`{}`", s.value)
        };
        d.err(
            &s.at,
            format!("{shown} is not a valid URL (expected {want}…)"),
        );
        return None;
    }
    Some(s.value.trim_end_matches('/').to_string())
}
