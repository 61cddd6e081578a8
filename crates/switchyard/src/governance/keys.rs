//! Virtual keys issued at run time (`POST /admin/clients/{id}/keys`): the
//! key is shown once and only its sha256 is kept, here and in the usage
//! store. Looked up after the config's keys; works and is revoked at once.

use std::sync::Arc;

use dashmap::DashMap;
use rand::Rng;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, PartialEq)]
pub struct Issued {
    pub client: Arc<str>,
    pub id: Arc<str>,
    pub created_at_ms: i64,
}

#[derive(Default)]
pub struct IssuedKeys {
    by_hash: DashMap<[u8; 32], Issued>,
    /// Ids revoked here: a store snapshot taken before the revocation must
    /// not bring them back (bounded; revocations are rare).
    revoked: std::sync::Mutex<std::collections::VecDeque<Arc<str>>>,
}

const REVOKED_KEPT: usize = 10_000;

/// A fresh key: `sy-` and 40 hex digits of randomness, its id and hash.
pub struct NewKey {
    pub key: String,
    pub id: String,
    pub sha256: [u8; 32],
}

pub fn generate() -> NewKey {
    let mut rng = rand::rng();
    let secret: [u8; 20] = rng.random();
    let id: [u8; 6] = rng.random();
    let key = format!("sy-{}", hex::encode(secret));
    NewKey {
        sha256: Sha256::digest(key.as_bytes()).into(),
        id: format!("key-{}", hex::encode(id)),
        key,
    }
}

/// A key as the fleet shares it, as this instance keeps it.
pub fn from_shared(k: &crate::state::fleet::SharedKey) -> Option<([u8; 32], Issued)> {
    let sha = <[u8; 32]>::try_from(hex::decode(&k.sha256).ok()?).ok()?;
    Some((
        sha,
        Issued {
            client: k.client.as_str().into(),
            id: k.id.as_str().into(),
            created_at_ms: k.created_at_ms,
        },
    ))
}

impl IssuedKeys {
    pub fn get(&self, sha256: &[u8; 32]) -> Option<Issued> {
        self.by_hash.get(sha256).map(|e| e.clone())
    }

    pub fn insert(&self, sha256: [u8; 32], k: Issued) {
        self.by_hash.insert(sha256, k);
    }

    /// `true` when the client had that key.
    pub fn remove(&self, client: &str, id: &str) -> bool {
        if let Ok(mut r) = self.revoked.lock() {
            if r.len() >= REVOKED_KEPT {
                r.pop_front();
            }
            r.push_back(Arc::from(id));
        }
        let before = self.by_hash.len();
        self.by_hash
            .retain(|_, k| !(&*k.client == client && &*k.id == id));
        self.by_hash.len() < before
    }

    /// Make the set the store's view `live`, read at `snapshot_ms` (keys
    /// issued or revoked by another instance sharing it). What this
    /// instance did since the snapshot stands: keys issued after it stay,
    /// keys revoked here do not come back.
    pub fn replace(&self, live: Vec<([u8; 32], Issued)>, snapshot_ms: i64) {
        let keep: std::collections::HashSet<[u8; 32]> = live.iter().map(|(h, _)| *h).collect();
        self.by_hash
            .retain(|h, k| keep.contains(h) || k.created_at_ms >= snapshot_ms);
        let revoked = self.revoked.lock().map(|r| r.clone()).unwrap_or_default();
        for (h, k) in live {
            if !revoked.iter().any(|id| *id == k.id) {
                self.by_hash.entry(h).or_insert(k);
            }
        }
    }

    /// A client's issued keys, oldest first.
    pub fn of(&self, client: &str) -> Vec<Issued> {
        let mut v: Vec<Issued> = self
            .by_hash
            .iter()
            .filter(|e| &*e.client == client)
            .map(|e| e.clone())
            .collect();
        v.sort_by(|a, b| a.created_at_ms.cmp(&b.created_at_ms).then(a.id.cmp(&b.id)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_keys_work_until_removed() {
        let keys = IssuedKeys::default();
        let k = generate();
        assert!(k.key.starts_with("sy-") && k.key.len() == 43);
        let digest: [u8; 32] = Sha256::digest(k.key.as_bytes()).into();
        assert_eq!(digest, k.sha256);
        keys.insert(
            k.sha256,
            Issued {
                client: Arc::from("a"),
                id: Arc::from(k.id.as_str()),
                created_at_ms: 1,
            },
        );
        assert_eq!(keys.get(&k.sha256).map(|i| i.client), Some(Arc::from("a")));
        assert!(
            !keys.remove("b", &k.id),
            "another client's key is not removed"
        );
        assert!(keys.remove("a", &k.id));
        assert!(keys.get(&k.sha256).is_none());
        // A store snapshot from before the revocation does not revive it…
        let issued = |id: &str, at: i64| Issued {
            client: Arc::from("a"),
            id: Arc::from(id),
            created_at_ms: at,
        };
        keys.replace(vec![(k.sha256, issued(&k.id, 1))], 10);
        assert!(keys.get(&k.sha256).is_none());
        // …nor drops a key issued here after it was taken; one the store no
        // longer has (revoked elsewhere) goes.
        keys.insert([7; 32], issued("key-new", 20));
        keys.insert([8; 32], issued("key-old", 5));
        keys.replace(vec![([9; 32], issued("key-elsewhere", 3))], 10);
        assert!(keys.get(&[7; 32]).is_some());
        assert!(keys.get(&[8; 32]).is_none());
        assert!(keys.get(&[9; 32]).is_some());
    }
}
