//! What governance rebuilds from the usage store: each budgeted client's
//! spend in its current window, and the keys issued at run time. Runs at
//! start-up (before the listeners open) and after a reload (for clients the
//! new config added, or whose budget period it changed); issued keys also every few seconds (`sync_keys`), so
//! instances sharing a store agree on them.

use std::sync::Arc;

use crate::config::Client;
use crate::state::shared::{FleetKeys, Shared};
use crate::usage::UsageStore;

use super::budget::Budgets;
use super::keys::IssuedKeys;

/// What governance keeps at run time and rebuilds: the budgets, the issued
/// keys, and the fleet they are shared with (`state.backend: redis`).
pub struct Governed<'a> {
    pub budgets: &'a Budgets,
    pub issued_keys: &'a IssuedKeys,
    pub shared: &'a dyn Shared,
}

/// Each budgeted client's spend in its window (`clients` with their ids),
/// then the issued keys.
pub async fn restore<'c>(
    clients: impl Iterator<Item = (&'c Client, &'c Arc<str>)>,
    g: Governed<'_>,
    store: &UsageStore,
) -> Result<(), String> {
    let now = crate::usage::query::now_ms();
    let budgets = g.budgets;
    for (c, id) in clients {
        let Some(b) = c.budget else { continue };
        if !budgets.needs_seed(id, b.per) {
            continue;
        }
        let (start, _) = super::budget::window(b.per, now);
        let spent = store.spent(id, start).await?;
        budgets.account(id).seed(b.per, spent, now);
        if spent > 0.0 {
            tracing::info!(client = %id, spent_usd = spent, "budget: spend of this window restored from the usage store");
        }
    }
    sync_keys(g, store).await
}

/// The issued keys as the store has them now: what another instance sharing
/// the store issued works here, what it revoked stops working here.
pub async fn sync_keys(g: Governed<'_>, store: &UsageStore) -> Result<(), String> {
    let snapshot_ms = crate::usage::query::now_ms();
    // In a fleet the keys are the store's and the fleet's, less the ones
    // revoked anywhere; without Redis the set stays as it is.
    let shared = match g.shared.all_keys().await {
        FleetKeys::NotShared => None,
        FleetKeys::Unavailable => return Ok(()),
        FleetKeys::Shared(live, revoked) => Some((live, revoked)),
    };
    let mut keys: Vec<_> = store
        .active_keys()
        .await?
        .into_iter()
        .filter_map(|k| {
            let sha = hex::decode(&k.sha256)
                .ok()
                .and_then(|b| <[u8; 32]>::try_from(b).ok())?;
            let issued = super::keys::Issued {
                client: k.client.as_str().into(),
                id: k.id.as_str().into(),
                created_at_ms: k.created_at_ms,
            };
            Some((sha, issued))
        })
        .collect();
    if let Some((fleet_keys, revoked)) = shared {
        keys.extend(fleet_keys.iter().filter_map(super::keys::from_shared));
        keys.retain(|(_, k)| !revoked.iter().any(|r| **r == *k.id));
    }
    g.issued_keys.replace(keys, snapshot_ms);
    Ok(())
}
