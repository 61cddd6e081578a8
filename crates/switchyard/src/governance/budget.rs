//! Client budgets that hold under concurrency (contract §2).
//!
//! Before an attempt is sent, the request's [`Hold`] covers its worst case
//! on that deployment (estimated input × input price + the output cap ×
//! output price) against what is left of the client's calendar window
//! (UTC hour, day or month): spent + reserved + this ≤ budget, checked and
//! taken under the client's own lock, so parallel requests can never
//! together reserve past it. When the request ends its reservation is
//! replaced by what it really cost (zero for a failure; what a cut stream
//! used); a fallback to a pricier deployment raises the hold first.
//!
//! One lock per client (never a global one). Spend at start-up is rebuilt
//! from the usage store ([`Account::seed`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use dashmap::DashMap;

use crate::config::{Budget, BudgetPeriod, Deployment};
use crate::state::redis::Adjust;
use crate::state::shared::Shared;

/// Every client's account, kept across reloads.
#[derive(Default)]
pub struct Budgets {
    accounts: DashMap<Arc<str>, Arc<Account>>,
}

impl Budgets {
    /// The client's account (created empty, for the current window).
    pub fn account(&self, client: &Arc<str>) -> Arc<Account> {
        if let Some(a) = self.accounts.get(client) {
            return a.clone();
        }
        self.accounts.entry(client.clone()).or_default().clone()
    }

    /// A request's hold on the client's budget (nothing reserved yet).
    pub fn hold(&self, client: &Arc<str>, budget: Budget) -> Hold {
        Hold {
            account: self.account(client),
            budget,
            held: 0.0,
            client: client.clone(),
            shared: None,
        }
    }

    /// What this instance's requests hold on the fleet's budget counters
    /// now, per client (USD; clients holding nothing left out): its part of
    /// the fleet's reservations, said in its heartbeat.
    pub fn fleet_held(&self) -> HashMap<String, f64> {
        self.accounts
            .iter()
            .filter_map(|a| {
                let held = a.value().fleet_held.load(Ordering::Relaxed);
                (held > 0).then(|| (a.key().to_string(), held as f64 / 1e6))
            })
            .collect()
    }

    /// The client's spend must be read from the store: a client not seen
    /// yet, or one whose budget changed its period (a reload).
    pub fn needs_seed(&self, client: &str, per: BudgetPeriod) -> bool {
        self.accounts
            .get(client)
            .is_none_or(|a| a.period() != Some(per))
    }
}

#[derive(Default)]
pub struct Account {
    window: Mutex<Window>,
    /// micro-USD this instance's requests hold on the fleet's counter (the
    /// counter itself holds spend and every instance's holds as one sum).
    fleet_held: AtomicI64,
}

#[derive(Debug, Default, Clone, Copy)]
struct Window {
    /// The period the window was made for.
    per: Option<BudgetPeriod>,
    /// `[start, end)` in Unix ms; `end == 0` before first use.
    start_ms: i64,
    end_ms: i64,
    spent: f64,
    reserved: f64,
}

/// What `/admin/clients` shows of an account.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    pub spent_usd: f64,
    pub reserved_usd: f64,
    pub resets_at_ms: i64,
}

impl Window {
    /// Move to the window `now` is in; spend starts over, reservations of
    /// requests still in flight stay.
    fn roll(&mut self, per: BudgetPeriod, now_ms: i64) {
        if self.per == Some(per) && now_ms >= self.start_ms && now_ms < self.end_ms {
            return;
        }
        self.per = Some(per);
        let (start, end) = window(per, now_ms);
        self.start_ms = start;
        self.end_ms = end;
        self.spent = 0.0;
    }
}

/// Spend is compared with a little slack for float sums (a millionth of a cent).
const EPS: f64 = 1e-8;

impl Account {
    fn with<T>(&self, per: BudgetPeriod, now_ms: i64, f: impl FnOnce(&mut Window) -> T) -> T {
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        w.roll(per, now_ms);
        f(&mut w)
    }

    /// Reserve `usd` if it fits what is left (and something is left).
    fn reserve(&self, b: &Budget, usd: f64, now_ms: i64) -> bool {
        self.with(b.per, now_ms, |w| {
            let fits = w.spent < b.usd - EPS && w.spent + w.reserved + usd <= b.usd + EPS;
            if fits {
                w.reserved += usd;
            }
            fits
        })
    }

    /// Replace `held` by `cost`; what is left of the window after it (one
    /// lock for both).
    fn settle(&self, b: &Budget, held: f64, cost: f64, now_ms: i64) -> f64 {
        self.with(b.per, now_ms, |w| {
            w.reserved -= held;
            // Holds come and go in any order: float sums leave dust.
            if w.reserved < EPS {
                w.reserved = 0.0;
            }
            w.spent += cost;
            (b.usd - w.spent - w.reserved).max(0.0)
        })
    }

    fn period(&self) -> Option<BudgetPeriod> {
        self.window.lock().map_or(None, |w| w.per)
    }

    /// Spend found in the usage store for the window that holds `now_ms`.
    pub fn seed(&self, per: BudgetPeriod, spent: f64, now_ms: i64) {
        self.with(per, now_ms, |w| w.spent = spent);
    }

    /// A hold of `usd` on the fleet's counter is over.
    fn fleet_release(&self, usd: f64) {
        self.fleet_held
            .fetch_sub(micros(usd) as i64, Ordering::Relaxed);
    }

    pub fn snapshot(&self, per: BudgetPeriod, now_ms: i64) -> Snapshot {
        self.with(per, now_ms, |w| Snapshot {
            spent_usd: w.spent,
            reserved_usd: w.reserved,
            resets_at_ms: w.end_ms,
        })
    }
}

/// One request's reservation against its client's budget.
pub struct Hold {
    account: Arc<Account>,
    budget: Budget,
    held: f64,
    client: Arc<str>,
    /// Held on the fleet's shared counter instead (`state.backend: redis`).
    shared: Option<SharedHold>,
}

/// A hold on the fleet's budget counter: one integer of micro-USD per
/// client and calendar window in Redis, charged by the admission script.
struct SharedHold {
    shared: Arc<dyn Shared>,
    key: Arc<str>,
    /// The counter after this request's charge (micro-USD).
    used: u64,
}

/// The fleet's budget counter for one window.
pub struct SharedWindow {
    pub key: String,
    /// micro-USD.
    pub limit: u64,
    pub ttl_ms: u64,
    /// What this instance knows was spent (from the usage store), for a
    /// counter Redis does not have yet.
    pub seed: u64,
}

pub fn micros(usd: f64) -> u64 {
    (usd.max(0.0) * 1e6).round() as u64
}

impl Hold {
    /// Make the hold at least `usd` (the worst case on the deployment about
    /// to be tried). `false`: it does not fit; nothing changed.
    pub fn cover(&mut self, usd: f64) -> bool {
        self.cover_at(usd, now_ms())
    }

    fn cover_at(&mut self, usd: f64, now: i64) -> bool {
        let more = usd - self.held;
        if more <= 0.0 {
            // Already covered; still refuse once the window is spent.
            return self
                .account
                .with(self.budget.per, now, |w| w.spent < self.budget.usd - EPS);
        }
        if self.account.reserve(&self.budget, more, now) {
            self.held = usd;
            true
        } else {
            false
        }
    }

    /// Replace the reservation with what the request really cost; what is
    /// left of the window after it.
    pub fn settle(mut self, cost: f64) -> f64 {
        let held = std::mem::take(&mut self.held);
        if let Some(sh) = self.shared.take() {
            self.account.fleet_release(held);
            let delta = micros(cost) as i64 - micros(held) as i64;
            sh.shared.adjust(Adjust {
                key: sh.key,
                field: None,
                delta,
            });
            // This instance's own spend, for a time without Redis.
            self.account.settle(&self.budget, 0.0, cost, now_ms());
            let used = (sh.used as i64 + delta).max(0) as u64;
            return shared_left(&self.budget, used);
        }
        self.account.settle(&self.budget, held, cost, now_ms())
    }

    /// What is left of the window, this request's reservation taken out.
    pub fn remaining(&self) -> f64 {
        if let Some(sh) = &self.shared {
            return shared_left(&self.budget, sh.used);
        }
        let s = self.account.snapshot(self.budget.per, now_ms());
        (self.budget.usd - s.spent_usd - s.reserved_usd).max(0.0)
    }

    /// In a fleet: the micro-USD more that covering `usd` takes (0 when
    /// held already).
    pub fn shared_more(&self, usd: f64) -> u64 {
        micros(usd).saturating_sub(micros(self.held))
    }

    /// The fleet's counter this hold is charged on (`None`: nothing is
    /// shared).
    pub fn shared_window(&self, shared: &dyn Shared) -> Option<SharedWindow> {
        let now = now_ms();
        let (start, end) = window(self.budget.per, now);
        let spent = self.account.snapshot(self.budget.per, now).spent_usd;
        Some(SharedWindow {
            key: shared
                .counter(&counter_name(&self.client, start))?
                .to_string(),
            limit: micros(self.budget.usd),
            // A little past the window's end: the counter must outlive
            // requests still settling into it.
            ttl_ms: (end - now).max(0) as u64 + 3_600_000,
            seed: micros(spent),
        })
    }

    /// The fleet charged `usd` in all on `key`; the counter is at `used`.
    pub fn shared_charged(&mut self, shared: &Arc<dyn Shared>, key: Arc<str>, usd: f64, used: u64) {
        if self.shared.is_some() {
            self.account.fleet_release(self.held);
        }
        self.account
            .fleet_held
            .fetch_add(micros(usd) as i64, Ordering::Relaxed);
        self.held = usd;
        self.shared = Some(SharedHold {
            shared: shared.clone(),
            key,
            used,
        });
    }

    /// Held on the fleet's counter already (a pricier fallback adds to it).
    pub fn shared_key(&self) -> Option<&Arc<str>> {
        self.shared.as_ref().map(|s| &s.key)
    }

    pub fn budget(&self) -> Budget {
        self.budget
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Hold({:.6} of {:?})", self.held, self.budget)
    }
}

impl Drop for Hold {
    /// A hold never settled (a panic, a path that forgot) gives its
    /// reservation back rather than leak it.
    fn drop(&mut self) {
        if let Some(sh) = self.shared.take() {
            self.account.fleet_release(self.held);
            sh.shared.adjust(Adjust {
                key: sh.key,
                field: None,
                delta: -(micros(self.held) as i64),
            });
            return;
        }
        if self.held > 0.0 {
            let _ = self.account.settle(&self.budget, self.held, 0.0, now_ms());
        }
    }
}

/// The name of `client`'s budget counter for the window starting at
/// `start_ms`, before the fleet's prefix ([`Shared::counter`]; micro-USD:
/// spend and the holds of requests in flight, as one sum).
pub fn counter_name(client: &str, start_ms: i64) -> String {
    format!("budget:{client}:{start_ms}")
}

fn shared_left(b: &Budget, used: u64) -> f64 {
    (b.usd - used as f64 / 1e6).max(0.0)
}

fn now_ms() -> i64 {
    crate::usage::query::now_ms()
}

/// When no output cap is known at all (no `max_tokens`, no
/// `max_output_tokens`, no `context_window`), the worst case assumes this.
pub const UNKNOWN_OUTPUT_CAP: u64 = 4096;

/// The most a request can cost on `dep` (contract §2, §8): estimated input
/// × input price + the output cap (`max_tokens`, else the deployment's
/// `max_output_tokens`, else the room left in its context window) × the
/// choices asked for (`n`) × output price. `choices: 0` for calls that
/// produce no tokens (embeddings).
pub fn worst_case(dep: &Deployment, prompt: u64, max_tokens: Option<u32>, choices: u32) -> f64 {
    let Some(p) = &dep.pricing else { return 0.0 };
    let cap = if choices == 0 {
        0
    } else if let Some(m) = max_tokens {
        u64::from(m)
    } else if let Some(m) = dep.max_output_tokens {
        u64::from(m)
    } else if let Some(cw) = dep.context_window {
        u64::from(cw).saturating_sub(prompt)
    } else {
        UNKNOWN_OUTPUT_CAP
    };
    let output = cap.saturating_mul(u64::from(choices));
    (prompt as f64 * p.input + output as f64 * p.output) / 1e6
}

/// The calendar window (UTC) that holds `now_ms`: `[start, end)` in ms.
pub fn window(per: BudgetPeriod, now_ms: i64) -> (i64, i64) {
    const HOUR: i64 = 3_600_000;
    const DAY: i64 = 86_400_000;
    match per {
        BudgetPeriod::Hour => {
            let s = now_ms.div_euclid(HOUR) * HOUR;
            (s, s + HOUR)
        }
        BudgetPeriod::Day => {
            let s = now_ms.div_euclid(DAY) * DAY;
            (s, s + DAY)
        }
        BudgetPeriod::Month => {
            let Ok(t) = time::OffsetDateTime::from_unix_timestamp(now_ms.div_euclid(1000)) else {
                let s = now_ms.div_euclid(DAY) * DAY;
                return (s, s + DAY);
            };
            let first = |y: i32, m: time::Month| {
                time::Date::from_calendar_date(y, m, 1)
                    .map(|d| d.midnight().assume_utc().unix_timestamp() * 1000)
                    .unwrap_or(0)
            };
            let (y, m) = (t.year(), t.month());
            let (ny, nm) = if m == time::Month::December {
                (y + 1, time::Month::January)
            } else {
                (y, m.next())
            };
            (first(y, m), first(ny, nm))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(usd: f64) -> Budget {
        Budget {
            usd,
            per: BudgetPeriod::Day,
        }
    }

    #[test]
    fn windows_are_utc_calendar_periods() {
        // 2026-12-01T13:45:00Z
        let t = 1_796_132_700_000;
        assert_eq!(
            window(BudgetPeriod::Hour, t),
            (1_796_130_000_000, 1_796_133_600_000)
        );
        assert_eq!(
            window(BudgetPeriod::Day, t),
            (1_796_083_200_000, 1_796_169_600_000)
        );
        // December 2026 → January 2027.
        assert_eq!(
            window(BudgetPeriod::Month, t),
            (1_796_083_200_000, 1_798_761_600_000)
        );
        // A February.
        let feb = 1_771_200_000_000; // 2026-02-16
        assert_eq!(
            window(BudgetPeriod::Month, feb),
            (1_769_904_000_000, 1_772_323_200_000)
        );
    }

    #[test]
    fn holds_never_reserve_past_the_budget() {
        let budgets = Budgets::default();
        let c: Arc<str> = Arc::from("c");
        let mut holds: Vec<Hold> = Vec::new();
        for _ in 0..10 {
            let mut h = budgets.hold(&c, b(1.0));
            if h.cover(0.3) {
                holds.push(h);
            }
        }
        assert_eq!(holds.len(), 3, "0.3 fits three times into 1.0");
        // Settling below the reservations makes room again.
        for h in holds.drain(..) {
            h.settle(0.1);
        }
        let mut h = budgets.hold(&c, b(1.0));
        assert!(h.cover(0.7));
        assert!((h.remaining() - 0.0).abs() < 1e-9);
        // Raising the hold (a pricier fallback) needs room for the difference.
        assert!(!h.cover(0.8));
        drop(h);
        let s = budgets.account(&c).snapshot(BudgetPeriod::Day, now_ms());
        assert!((s.spent_usd - 0.3).abs() < 1e-9);
        assert_eq!(
            s.reserved_usd, 0.0,
            "a dropped hold gives its reservation back"
        );
    }

    #[test]
    fn a_spent_window_refuses_even_free_requests_and_resets() {
        let a = Account::default();
        let bud = b(1.0);
        let t = 1_796_132_700_000;
        a.seed(BudgetPeriod::Day, 1.0, t);
        assert!(!a.reserve(&bud, 0.0, t));
        // The next day starts at zero.
        assert!(a.reserve(&bud, 0.5, t + 86_400_000));
        // A reload that makes it monthly: a new window, to be seeded again.
        let budgets = Budgets::default();
        let c: Arc<str> = Arc::from("c");
        assert!(budgets.needs_seed(&c, BudgetPeriod::Day));
        budgets.account(&c).seed(BudgetPeriod::Day, 0.2, t);
        assert!(!budgets.needs_seed(&c, BudgetPeriod::Day));
        assert!(budgets.needs_seed(&c, BudgetPeriod::Month));
        budgets.account(&c).seed(BudgetPeriod::Month, 0.9, t);
        let s = budgets.account(&c).snapshot(BudgetPeriod::Month, t);
        assert_eq!((s.spent_usd, s.resets_at_ms), (0.9, 1_798_761_600_000));
    }

    #[test]
    fn the_worst_case_uses_the_first_cap_known() {
        let mut d = Deployment {
            pricing: Some(crate::config::Pricing {
                input: 2.0,
                output: 10.0,
                cached_input: None,
                cache_write: None,
            }),
            max_output_tokens: Some(1000),
            context_window: Some(8000),
            id: "p/m".into(),
            provider: "p".into(),
            model: "m".into(),
            capabilities: Default::default(),
            region: None,
            api: Default::default(),
            reasoning_replay: Default::default(),
            limits: Default::default(),
        };
        let mtok = 1e6;
        assert!(
            (worst_case(&d, 500, Some(100), 1) - (500.0 * 2.0 + 100.0 * 10.0) / mtok).abs() < 1e-12
        );
        assert!(
            (worst_case(&d, 500, None, 1) - (500.0 * 2.0 + 1000.0 * 10.0) / mtok).abs() < 1e-12
        );
        d.max_output_tokens = None;
        assert!(
            (worst_case(&d, 500, None, 1) - (500.0 * 2.0 + 7500.0 * 10.0) / mtok).abs() < 1e-12
        );
        assert!((worst_case(&d, 500, None, 0) - 500.0 * 2.0 / mtok).abs() < 1e-12);
        d.pricing = None;
        assert_eq!(worst_case(&d, 500, None, 1), 0.0);
    }
}
