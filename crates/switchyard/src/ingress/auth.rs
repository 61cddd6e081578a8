//! Virtual keys: `Authorization: Bearer <key>` or `x-api-key: <key>`, looked up
//! by sha256 (keys are never stored in clear) to the request's principal
//! (client and key id), then the client's allowed routes.

use std::sync::Arc;

use http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::error::{ErrorCode, GatewayError};
use crate::governance::Principal;
use crate::live::{Live, Target};

/// `Ok(None)` when the gateway is open (no `clients:` section).
pub fn authenticate<'l>(
    live: &'l Live,
    headers: &HeaderMap,
) -> Result<Option<Principal<'l>>, GatewayError> {
    let Some(clients) = &live.config.clients else {
        return Ok(None);
    };
    let key = presented_key(headers).ok_or_else(|| {
        GatewayError::client(
            ErrorCode::AuthFailed,
            "missing API key: send `Authorization: Bearer <key>` or `x-api-key`",
        )
    })?;
    let digest: [u8; 32] = Sha256::digest(key.as_bytes()).into();
    let principal = |i: usize, key_id: Arc<str>| {
        Some(Principal {
            client: clients.get(i)?,
            id: live.client_ids.get(i)?.clone(),
            key_id,
        })
    };
    let found = match live.clients_by_key.get(&digest) {
        Some((i, key_id)) => principal(*i, key_id.clone()),
        // A key issued at run time, for a client the config still has.
        None => live
            .governance
            .issued_keys
            .get(&digest)
            .and_then(|k| principal(live.client_index(&k.client)?, k.id)),
    };
    found
        .map(Some)
        .ok_or_else(|| GatewayError::client(ErrorCode::AuthFailed, "invalid API key"))
}

/// The sha256 of the key the request presents, if any.
pub fn presented_digest(headers: &HeaderMap) -> Option<[u8; 32]> {
    presented_key(headers).map(|k| Sha256::digest(k.as_bytes()).into())
}

/// A key this instance does not know may have been issued on another
/// instance of the fleet a moment ago: one read, only on such a miss; the
/// key is kept here after it.
pub async fn learn_issued_key(live: &Live, headers: &HeaderMap) -> bool {
    let Some(digest) = presented_digest(headers) else {
        return false;
    };
    let Some(k) = live.registry.shared.find_key(&hex::encode(digest)).await else {
        return false;
    };
    match crate::governance::keys::from_shared(&k) {
        Some((sha, issued)) if sha == digest && live.client_index(&issued.client).is_some() => {
            live.governance.issued_keys.insert(sha, issued);
            true
        }
        _ => false,
    }
}

/// The key the request presents. An empty one is no key: it would match a
/// client whose key is the empty string (which `check` refuses anyway).
fn presented_key(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    let api_key = || {
        headers
            .get(&crate::names::X_API_KEY)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    bearer
        .filter(|k| !k.is_empty())
        .or_else(|| api_key().filter(|k| !k.is_empty()))
}

/// May this client use what `model` names?
pub fn authorize(
    who: Option<&Principal<'_>>,
    model: &str,
    target: &Target<'_>,
) -> Result<(), GatewayError> {
    if may_use(who, model, target) {
        return Ok(());
    }
    let who = who.map_or("this client", |p| p.client_id());
    Err(GatewayError::client(
        ErrorCode::Forbidden,
        format!("{who} may not use model `{model}`"),
    ))
}

pub fn may_use(who: Option<&Principal<'_>>, model: &str, target: &Target<'_>) -> bool {
    let Some(allowed) = who.and_then(|p| p.client.routes.as_ref()) else {
        return true;
    };
    allowed.iter().any(|a| {
        a == model
            || match target {
                Target::Route(r) => *a == r.name,
                Target::Deployment(d) => *a == d.cfg.id,
            }
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::registry::Registry;
    use crate::state::memory::MemoryStore;

    /// A gateway whose one client's key is the empty string: what `check`
    /// refuses, built anyway (a config from before that check, an issued key).
    fn live_with_empty_key() -> Live {
        let src = format!(
            "clients:\n  - {{ id: bot, key_sha256: \"{}\" }}\n",
            "ab".repeat(32)
        );
        let mut cfg = crate::config::load_str(&src, "t.yaml", &|_| None).unwrap();
        if let Some(cs) = cfg.clients.as_mut() {
            cs[0].key_sha256 = Sha256::digest(b"").into();
        }
        Live::build(
            cfg,
            &Arc::new(Registry::new(Arc::new(MemoryStore::new()))),
            &Default::default(),
        )
        .unwrap()
    }

    #[test]
    fn an_empty_key_never_authenticates() {
        let live = live_with_empty_key();
        for (name, value) in [
            ("x-api-key", ""),
            ("x-api-key", "   "),
            ("authorization", "Bearer "),
            ("authorization", "Bearer   "),
        ] {
            let mut h = HeaderMap::new();
            h.insert(
                http::HeaderName::from_static(name),
                http::HeaderValue::from_static(value),
            );
            let e = authenticate(&live, &h)
                .err()
                .unwrap_or_else(|| panic!("{name}: `{value}` got in"));
            assert_eq!(e.code, ErrorCode::AuthFailed, "{name}");
            assert!(e.message.starts_with("missing API key"), "{}", e.message);
        }
        // An empty bearer does not hide a real `x-api-key`.
        let mut h = HeaderMap::new();
        h.insert(
            http::header::AUTHORIZATION,
            http::HeaderValue::from_static("Bearer "),
        );
        h.insert(
            &crate::names::X_API_KEY,
            http::HeaderValue::from_static("k"),
        );
        assert_eq!(presented_key(&h), Some("k"));
    }
}
