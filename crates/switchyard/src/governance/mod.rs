//! GOVERNANCE: who a request is from and what it may spend. Today the
//! principal; budgets (reserve → settle) and client limits move here with
//! the budgets issue.

pub mod principal;

pub use principal::Principal;
