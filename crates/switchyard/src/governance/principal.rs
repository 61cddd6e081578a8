//! The principal of a request: the configured client it authenticated as
//! and which of that client's keys it presented. Everything downstream of
//! authentication (authorization, the client's limits, its budget, the
//! usage record) takes the principal, not the config entry, so that keys
//! issued at run time (the admin keys API) fit beside keys from the config.

use std::sync::Arc;

use crate::config::Client;

#[derive(Debug, Clone)]
pub struct Principal<'l> {
    pub client: &'l Client,
    /// The client's id, shared with the request's record.
    pub id: Arc<str>,
    /// Which key: `cfg-` and the first 12 hex digits of its sha256 for the
    /// client's key from the config (stable across reloads and instances,
    /// and no use to anyone who reads it); `key-…` for an issued key.
    pub key_id: Arc<str>,
}

impl Principal<'_> {
    pub fn client_id(&self) -> &str {
        &self.client.id
    }
}

/// The id of a key from the config.
pub fn config_key_id(sha256: &[u8; 32]) -> Arc<str> {
    let mut hex = [0u8; 64];
    let _ = hex::encode_to_slice(sha256, &mut hex);
    let short = std::str::from_utf8(&hex[..12]).unwrap_or_default();
    Arc::from(format!("cfg-{short}"))
}

#[cfg(test)]
mod tests {
    use super::config_key_id;

    #[test]
    fn config_key_ids_are_short_and_stable() {
        let mut d = [0u8; 32];
        d[0] = 0xab;
        d[5] = 0x01;
        assert_eq!(&*config_key_id(&d), "cfg-ab0000000001");
        assert_eq!(config_key_id(&d), config_key_id(&d));
    }
}
