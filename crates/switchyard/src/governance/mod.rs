//! GOVERNANCE: who a request is from and what it may spend: the principal
//! (client and key), keys issued at run time, and budgets (reserve →
//! settle).

pub mod budget;
pub mod keys;
pub mod principal;
pub mod restore;

pub use principal::Principal;
