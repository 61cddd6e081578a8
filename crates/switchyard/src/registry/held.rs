//! What a served stream holds of its deployment until it ends: its
//! concurrency slot, its in-flight count and its tpm reservation.

use super::{health, limits};

/// What a served stream holds of its deployment until it ends.
pub struct Held {
    _permit: limits::Permit,
    _inflight: health::InflightGuard,
    reservation: limits::Reservation,
}

impl Held {
    pub fn new(
        permit: limits::Permit,
        inflight: health::InflightGuard,
        reservation: limits::Reservation,
    ) -> Self {
        Held {
            _permit: permit,
            _inflight: inflight,
            reservation,
        }
    }

    /// The stream's call is over: tpm counts the tokens it used, and the
    /// slot is free.
    pub fn settle(self, tokens: u64) {
        self.reservation.settle_used(tokens);
    }

    /// The call is over but its tokens are still being counted: the slot is
    /// free now, the tpm reservation is settled when the count is in.
    pub fn release(self) -> limits::Reservation {
        self.reservation
    }
}
