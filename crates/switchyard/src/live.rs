//! LIVE: one immutable snapshot of the config plus everything derived from
//! it (each deployment with its adapter, URL and runtime state, key
//! lookups, the response cache). Stored in an `ArcSwap`; each
//! request loads it once at the door and keeps that `Arc` to the end, so a
//! reload never changes the config under a request in flight.

use std::collections::HashMap;
use std::sync::Arc;

use crate::adapters::deployment::{DeploymentRt, ProviderRt};
use crate::adapters::endpoint;
use crate::config::{Config, Route};
use crate::governance::Governance;
use crate::registry::Registry;
use crate::state::fleet::{FleetSink, SharedCircuit, SharedKey};
use arc_swap::ArcSwap;

pub mod canary;

pub type SharedLive = Arc<ArcSwap<Live>>;

pub struct Live {
    pub config: Arc<Config>,
    /// Circuits, health, limits and sessions: kept across reloads.
    pub registry: Arc<Registry>,
    /// Budgets and issued keys: kept across reloads.
    pub governance: Arc<Governance>,
    /// `config.version`, shared with every request's log line.
    pub version: Arc<str>,
    /// Route names, shared with logs and metric labels.
    pub route_names: HashMap<String, Arc<str>>,
    pub deployments: HashMap<String, Arc<DeploymentRt>>,
    /// sha256(virtual key) → index into `config.clients` and the key's id.
    pub clients_by_key: HashMap<[u8; 32], (usize, Arc<str>)>,
    /// `config.clients`' ids, in order, shared with every request's record.
    pub client_ids: Vec<Arc<str>>,
    /// The response cache (`cache.backend: memory`), when it is on.
    pub cache: Option<Arc<dyn crate::state::cache::ResponseCache>>,
}

/// What a request's `model` names.
pub enum Target<'a> {
    Route(&'a Route),
    Deployment(&'a Arc<DeploymentRt>),
}

impl Live {
    pub fn build(
        config: Config,
        registry: &Arc<Registry>,
        governance: &Arc<Governance>,
    ) -> Result<Live, String> {
        crate::upstream::client::check()?;
        registry.reconcile(&config);
        Live::assemble(config, registry, governance)
    }

    /// A canary's snapshot, served beside the one in force: the registry
    /// gains what only it names and keeps the rest as it is
    /// ([`Registry::add_missing`]).
    pub fn build_beside(
        config: Config,
        registry: &Arc<Registry>,
        governance: &Arc<Governance>,
    ) -> Result<Live, String> {
        crate::upstream::client::check()?;
        registry.add_missing(&config);
        Live::assemble(config, registry, governance)
    }

    fn assemble(
        config: Config,
        registry: &Arc<Registry>,
        governance: &Arc<Governance>,
    ) -> Result<Live, String> {
        let mut providers = HashMap::new();
        for (id, p) in &config.providers {
            let rt = ProviderRt {
                name: Arc::from(id.as_str()),
                cfg: p.clone(),
                api: crate::adapters::provider_for(p)?,
            };
            providers.insert(id.clone(), Arc::new(rt));
        }
        let mut deployments = HashMap::new();
        for (id, d) in &config.deployments {
            let provider = providers
                .get(&d.provider)
                .ok_or_else(|| format!("models.{id}: unknown provider {}", d.provider))?
                .clone();
            let api = provider
                .api()
                .for_deployment(d)
                .unwrap_or_else(|| provider.api.clone());
            let endpoint = endpoint::endpoint(&*api, &provider.cfg, d)?;
            let state = registry
                .get(id)
                .ok_or_else(|| format!("models.{id}: no runtime state"))?;
            deployments.insert(
                id.clone(),
                Arc::new(DeploymentRt {
                    name: Arc::from(id.as_str()),
                    model: Arc::from(d.model.as_str()),
                    cfg: d.clone(),
                    provider,
                    endpoint,
                    state,
                    api,
                }),
            );
        }
        let clients_by_key = config
            .clients
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, c)| {
                let id = crate::governance::principal::config_key_id(&c.key_sha256);
                (c.key_sha256, (i, id))
            })
            .collect();
        let client_ids = config
            .clients
            .iter()
            .flatten()
            .map(|c| Arc::from(c.id.as_str()))
            .collect();
        let route_names = config
            .routes
            .keys()
            .map(|k| (k.clone(), Arc::from(k.as_str())))
            .collect();
        Ok(Live {
            cache: registry.response_cache(&config.cache),
            version: Arc::from(config.version.as_str()),
            route_names,
            registry: registry.clone(),
            governance: governance.clone(),
            config: Arc::new(config),
            deployments,
            clients_by_key,
            client_ids,
        })
    }

    /// A configured client by id: its index in `config.clients`.
    pub fn client_index(&self, id: &str) -> Option<usize> {
        self.client_ids.iter().position(|c| &**c == id)
    }

    /// The configured clients with their ids.
    pub fn clients(&self) -> impl Iterator<Item = (&crate::config::Client, &Arc<str>)> {
        self.config.clients.iter().flatten().zip(&self.client_ids)
    }

    /// Governance's run-time state, as `governance::restore` rebuilds it.
    pub fn governed(&self) -> crate::governance::restore::Governed<'_> {
        crate::governance::restore::Governed {
            budgets: &self.governance.budgets,
            issued_keys: &self.governance.issued_keys,
            shared: &*self.registry.shared,
        }
    }

    /// A route name first, then a deployment id.
    pub fn resolve(&self, model: &str) -> Option<Target<'_>> {
        if let Some(r) = self.config.routes.get(model) {
            return Some(Target::Route(r));
        }
        self.deployments.get(model).map(Target::Deployment)
    }
}

/// Events from the rest of the fleet land here: circuits on the registry's
/// breakers, virtual keys in governance's issued set.
pub struct FleetEvents {
    pub registry: Arc<Registry>,
    pub governance: Arc<Governance>,
}

impl FleetSink for FleetEvents {
    fn circuit(&self, deployment: &str, c: SharedCircuit, age_ms: u64) {
        self.registry.apply_shared_circuit(deployment, c, age_ms);
    }

    fn key_issued(&self, k: SharedKey) {
        if let Some((sha, issued)) = crate::governance::keys::from_shared(&k) {
            self.governance.issued_keys.insert(sha, issued);
        }
    }

    fn key_revoked(&self, client: &str, id: &str) {
        self.governance.issued_keys.remove(client, id);
    }
}
