//! GOVERNANCE: who a request is from and what it may spend: the principal
//! (client and key), keys issued at run time, and budgets (reserve →
//! settle).

pub mod budget;
pub mod keys;
pub mod principal;
pub mod restore;

pub use principal::Principal;

/// Governance's run-time state, kept across reloads: client budgets (spend
/// and reservations per window) and the virtual keys issued at run time.
#[derive(Default)]
pub struct Governance {
    pub budgets: budget::Budgets,
    pub issued_keys: keys::IssuedKeys,
}
