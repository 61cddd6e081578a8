//! A provider's pool (contract §10): `providers.<p>.limits` bound the
//! provider's deployments together, as an account's quota does. One pool
//! per provider, an `Arc` its deployments share (so a request's check is
//! one more window, no lookup); kept across reloads, its limits updated.
//!
//! Its rpm/tpm window is `prov:{provider}` in the state store, or on the
//! fleet's Redis with `state.backend: redis` (charged in the same round
//! trip as the deployment's); its concurrency is this instance's, like a
//! deployment's.

use std::sync::Arc;

use super::limits::{DeploymentLimits, Scope};
use super::quota::Counts;
use crate::config::Limits;
use crate::state::shared::Shared;
use crate::state::store::StateStore;

pub struct Pool {
    pub provider: Arc<str>,
    pub limits: DeploymentLimits,
    /// Its rpm and tpm windows' names on the fleet's Redis (made once).
    pub shared_windows: Option<(Arc<str>, Arc<str>)>,
    /// The shares of its limits its counts last showed: part of every one
    /// of its deployments' quota.
    pub counts: Counts,
}

impl Pool {
    pub fn new(
        store: Arc<dyn StateStore>,
        shared: &dyn Shared,
        provider: &str,
        cfg: Limits,
    ) -> Pool {
        let scope = format!("prov:{provider}");
        Pool {
            provider: provider.into(),
            limits: DeploymentLimits::scoped(store, Scope::Provider, &scope, cfg),
            shared_windows: shared
                .counter(&format!("{scope}:rpm"))
                .zip(shared.counter(&format!("{scope}:tpm"))),
            counts: Counts::default(),
        }
    }

    /// It bounds rpm or tpm: requests are counted in its window.
    pub fn bounds_rate(&self) -> bool {
        let c = self.limits.config();
        c.rpm.is_some() || c.tpm.is_some()
    }

    /// It bounds concurrency: requests take one of its slots.
    pub fn bounds_concurrency(&self) -> bool {
        self.limits.config().concurrency.is_some()
    }
}
