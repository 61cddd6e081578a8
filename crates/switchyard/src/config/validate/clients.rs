//! `clients:` — virtual keys. Keys are kept only as sha256.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::super::raw::RawClient;
use super::super::Diags;
use super::models::{field_at, list};
use super::{at_least_one, non_negative};
use crate::config::env::Env;
use crate::config::model::*;

pub fn check(
    d: &mut Diags,
    raw: &[RawClient],
    env: Env,
    routes: &BTreeMap<String, Route>,
    deployments: &BTreeMap<String, Deployment>,
) -> Vec<Client> {
    let mut out: Vec<Client> = Vec::new();
    // A set, not a scan of `out`: a config may list thousands of clients.
    let mut ids = std::collections::HashSet::new();
    for c in raw {
        let id = match &c.id {
            Some(id) if !ids.insert(id.value.as_str()) => {
                d.err(&id.at, format!("duplicate client id `{}`", id.value));
                id.value.clone()
            }
            Some(id) => id.value.clone(),
            None => {
                d.missing(&field_at(&c.at, "id"), "missing `id`");
                String::new()
            }
        };
        let key_sha256 = match (&c.key_sha256, &c.key_env) {
            (Some(h), None) => {
                let bytes = hex::decode(h.value.trim())
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b).ok());
                match bytes {
                    // An empty `x-api-key` would then be this client's key.
                    Some(b) if b == <[u8; 32]>::from(Sha256::digest(b"")) => {
                        d.err(
                            &h.at,
                            "is the sha256 of the empty string: an empty API key would authenticate as this client",
                        );
                        [0; 32]
                    }
                    Some(b) => b,
                    None => {
                        d.err(&h.at, "must be 64 hex characters (sha256 of the key)");
                        [0; 32]
                    }
                }
            }
            (None, Some(var)) => match env(&var.value).filter(|v| !v.is_empty()) {
                Some(key) => Sha256::digest(key.as_bytes()).into(),
                None => {
                    d.err(
                        &var.at,
                        format!("environment variable `{}` is not set or empty", var.value),
                    );
                    [0; 32]
                }
            },
            (Some(h), Some(_)) => {
                d.err(&h.at, "set only one of `key_sha256` or `key_env`");
                [0; 32]
            }
            (None, None) => {
                d.err(&c.at, "a client needs `key_sha256` or `key_env`");
                [0; 32]
            }
        };
        if key_sha256 != [0; 32] {
            if let Some(other) = out.iter().find(|o| o.key_sha256 == key_sha256) {
                let at = c
                    .key_sha256
                    .as_ref()
                    .or(c.key_env.as_ref())
                    .map_or(&c.at, |v| &v.at);
                d.err(at, format!("same key as client `{}`", other.id));
            }
        }
        let allowed = c.routes.as_ref().map(|rs| {
            for r in &rs.value {
                if !routes.contains_key(&r.value) && !deployments.contains_key(&r.value) {
                    let names: Vec<&str> = routes
                        .keys()
                        .chain(deployments.keys())
                        .map(String::as_str)
                        .collect();
                    d.err(
                        &r.at,
                        format!(
                            "unknown route or deployment `{}`; defined: {}",
                            r.value,
                            list(&names)
                        ),
                    );
                }
            }
            rs.value.iter().map(|r| r.value.clone()).collect()
        });
        let budget = c.budget.as_ref().map(|(at, usd, per)| {
            if usd.is_none() {
                d.missing(&field_at(at, "usd"), "missing `usd`");
            }
            Budget {
                usd: non_negative(d, usd).unwrap_or(0.0),
                per: per.as_ref().map_or(BudgetPeriod::Day, |p| p.value),
            }
        });
        out.push(Client {
            id,
            key_sha256,
            routes: allowed,
            rpm: at_least_one(d, &c.rpm),
            tpm: at_least_one(d, &c.tpm),
            budget,
            cache_shared: c.cache.as_ref().is_some_and(|v| v.value == "shared"),
            debug: c.debug.as_ref().is_some_and(|v| v.value),
        });
    }
    out
}
