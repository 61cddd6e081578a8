//! The last probe of a deployment and of each of its provider's keys
//! (contract §10), as `/admin/state` and the dashboard show them. Written
//! by the prober (`reliability::probe`), a few times a minute: a mutex is
//! fine here, nothing on the request path reads it.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// One probe's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastProbe {
    /// When it was sent (Unix ms).
    pub at_ms: u64,
    /// `auth` or `completion`.
    pub kind: String,
    /// `ok`, `failed` (the deployment did not answer well),
    /// `key_rejected` (the upstream refused the key) or `rate_limited`.
    pub result: String,
    /// Why it was probed: `idle`, `circuit` (open, its cooldown over),
    /// `spare_key`.
    pub reason: String,
    pub latency_ms: u64,
    /// What went wrong, as a §4 code and message (never a secret).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The instance that probed (in a fleet).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
}

/// A deployment's last probe and its keys' (by label).
#[derive(Debug, Default)]
pub struct ProbeLog {
    deployment: Mutex<Option<LastProbe>>,
    keys: Mutex<HashMap<String, LastProbe>>,
}

impl ProbeLog {
    pub fn set(&self, p: LastProbe) {
        let mut d = lock(&self.deployment);
        // A note from another instance may be older than what is here.
        if d.as_ref().is_none_or(|old| old.at_ms <= p.at_ms) {
            *d = Some(p);
        }
    }

    pub fn set_key(&self, label: &str, p: LastProbe) {
        lock(&self.keys).insert(label.to_owned(), p);
    }

    pub fn last(&self) -> Option<LastProbe> {
        lock(&self.deployment).clone()
    }

    pub fn last_key(&self, label: &str) -> Option<LastProbe> {
        lock(&self.keys).get(label).cloned()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
