//! A deployment as the adapters call it: its config, its provider's (with
//! the adapter that speaks its protocol), its parsed endpoint, and its
//! runtime state (`registry`: limits, keys). Built once per config by
//! `live::Live::build`.

use std::sync::Arc;

use crate::adapters::endpoint::Endpoint;
use crate::adapters::provider::Provider as Api;
use crate::config::{Deployment, Provider};
use crate::registry::DeploymentState;

pub struct ProviderRt {
    /// The provider id, shared with logs and metric labels.
    pub name: Arc<str>,
    pub cfg: Provider,
    /// Its provider module (the protocol it speaks).
    pub api: Arc<dyn Api>,
}

impl ProviderRt {
    /// Its provider module.
    pub fn api(&self) -> &dyn Api {
        &*self.api
    }

    /// The key values, for redaction of upstream messages.
    pub fn secret_refs(&self) -> Vec<&str> {
        self.cfg
            .keys
            .iter()
            .map(|k| k.secret.expose().as_str())
            .collect()
    }
}

pub struct DeploymentRt {
    /// The deployment id, shared with logs and metric labels.
    pub name: Arc<str>,
    /// The upstream model name, shared with usage rows.
    pub model: Arc<str>,
    pub cfg: Deployment,
    pub provider: Arc<ProviderRt>,
    /// Where its requests go, parsed once.
    pub endpoint: Endpoint,
    /// Its circuit, health, limits and keys (survives reloads).
    pub state: Arc<DeploymentState>,
    /// The provider module that serves it (its provider's, or the
    /// provider's variant for it: a Bedrock deployment's API).
    pub api: Arc<dyn Api>,
}

impl DeploymentRt {
    /// Its provider module.
    pub fn api(&self) -> &dyn Api {
        &*self.api
    }
}
