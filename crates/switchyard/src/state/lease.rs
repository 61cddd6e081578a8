//! Leased admission (contract §7, revision 4): an instance takes a slice of
//! a shared window (rpm, tpm, a budget's counter) in one round trip and
//! admits from it on its own, so a busy fleet asks Redis a few times a
//! second per window instead of once per request.
//!
//! This module is the instance's book of what it holds; [`super::redis`]
//! keeps the fleet's side and [`super::fleet`] runs the renewals.
//!
//! - A lease is a reservation on Redis (`{window}:l`, one field per
//!   instance): the others count it as used until it expires
//!   ([`LEASE_TTL_MS`] after its last renewal), so a slice can never be
//!   admitted twice and an instance that dies gives its slices back within
//!   one lease's lifetime.
//! - What an instance admits from its slice is *committed* (added to the
//!   window's count) at the next renewal, at most [`COMMIT_EVERY_MS`] later,
//!   together with the corrections of answers that settled meanwhile.
//! - Sizes adapt: a slice is about [`LEASE_FOR_S`] of the instance's own
//!   demand on that window, never more than half of what is free divided
//!   among the live instances, and all slices together never more than
//!   [`SHARE`] of the limit: a quiet instance holds nothing, a nearly full
//!   window is shared out thinly, and slices idle at their holders keep
//!   little from the others.
//!   Below two requests' worth of demand there is no lease at all: every
//!   request asks Redis, as before leasing.
//! - A request the slices do not cover asks Redis itself (one round trip,
//!   counting every instance's slices as used); a window Redis says is full
//!   is refused here without asking for [`FULL_FOR_MS`].

use std::sync::{Arc, Mutex, MutexGuard};

use dashmap::DashMap;

use super::redis::{Admission, Span, Window, BUCKETS};

/// All slices of a window together hold at most this share of its limit
/// (each instance its part): what they keep from the others while their
/// holders have nothing to spend them on stays inside the contract's 5%.
/// Small limits are therefore not leased at all (a 60 rpm window is asked
/// of Redis per request, as before leasing); they are not what loads Redis.
pub const SHARE: f64 = 0.03;
/// How long a lease lives on Redis without a renewal.
pub const LEASE_TTL_MS: u64 = 2_000;
/// A slice is no longer spent this long before Redis forgets it (the
/// renewal's flight, the clocks of different hosts).
const GUARD_MS: u64 = 500;
/// A slice is sized for this much of the instance's demand.
const LEASE_FOR_S: f64 = 1.0;
/// Renewed when less than this much demand is left in it.
const LOW_S: f64 = 0.5;
/// What was admitted from a slice is written to the window this late at most.
pub const COMMIT_EVERY_MS: u64 = 250;
/// A live slice is renewed when it has less than this left to live.
const RENEW_BEFORE_MS: u64 = 1_000;
/// A window Redis found full is refused locally this long.
const FULL_FOR_MS: u64 = 100;
/// A window nobody asked for this long is forgotten.
const IDLE_MS: u64 = 60_000;

/// The instance's account of one shared window.
#[derive(Debug, Default)]
struct Account {
    limit: u64,
    span: Option<Span>,
    alone_ok: bool,
    /// The slice held on Redis, and what of it was admitted since.
    granted: u64,
    taken: u64,
    /// The slice is spent until then (ms).
    usable_until: u64,
    /// What goes to the window at the next renewal, per bucket (`None`: a
    /// fixed counter).
    pending: Vec<(Option<u64>, i64)>,
    /// Units asked for (admitted or not) since the last renewal.
    demand: u64,
    /// Units asked for in the wall-clock second `second`, and in the one
    /// before: the rate over the last second.
    second: u64,
    this_second: u64,
    last_second: u64,
    /// The largest recent cost of one request (halves at each renewal).
    typical: u64,
    /// A renewal is out; `taken` when it left.
    renewing: Option<u64>,
    last_sent: u64,
    /// Redis said the window is full: refused here until then (ms).
    full_until: u64,
    /// The window's count and the others' slices, as Redis last said.
    shared_base: u64,
    last_asked: u64,
}

impl Account {
    fn room(&self, now: u64) -> u64 {
        if self.usable_until > now {
            self.granted.saturating_sub(self.taken)
        } else {
            0
        }
    }

    fn asked(&mut self, w: &Window<'_>, now: u64) {
        self.limit = w.limit;
        self.span = Some(w.span);
        self.alone_ok = w.alone_ok;
        let second = now / 1000;
        if second != self.second {
            self.last_second = if second == self.second + 1 {
                self.this_second
            } else {
                0
            };
            self.this_second = 0;
            self.second = second;
        }
        self.this_second += w.cost;
        self.demand += w.cost;
        self.typical = self.typical.max(w.cost);
        self.last_asked = now;
    }

    fn commit(&mut self, field: Option<u64>, delta: i64) {
        match self.pending.iter_mut().find(|(f, _)| *f == field) {
            Some((_, d)) => *d += delta,
            None => self.pending.push((field, delta)),
        }
        self.pending.retain(|(_, d)| *d != 0);
    }

    /// The bucket a sliding window charges at `now`.
    fn field(&self, now: u64) -> Option<u64> {
        match self.span {
            Some(Span::Sliding(span)) => Some(now / (span / BUCKETS).max(1)),
            _ => None,
        }
    }

    /// Units asked for over the last second (the second before this one
    /// weighted by how much of it is still within the last 1000 ms).
    fn rate_at(&self, now: u64) -> f64 {
        let into = (now % 1000) as f64 / 1000.0;
        match (now / 1000).checked_sub(self.second) {
            Some(0) => self.this_second as f64 + self.last_second as f64 * (1.0 - into),
            Some(1) => self.this_second as f64 * (1.0 - into),
            _ => 0.0,
        }
    }

    fn due(&self, now: u64) -> bool {
        if self.renewing.is_some() {
            return false;
        }
        // Idle with a slice: give it back.
        if self.demand == 0 && self.room(now) > 0 && now >= self.last_sent + COMMIT_EVERY_MS {
            return true;
        }
        let room = self.room(now);
        let live = self.usable_until > now && self.granted > self.taken;
        let pending = !self.pending.is_empty() && now >= self.last_sent + COMMIT_EVERY_MS;
        let rate = self.rate_at(now);
        // Running low on a slice worth having (at most every 50 ms: a
        // full window answers with nothing to hand out).
        let low = rate * LEASE_FOR_S >= 2.0 * self.typical.max(1) as f64
            && (room as f64) < rate * LOW_S
            && now >= self.last_sent + 50;
        let expiring = live && self.usable_until < now + RENEW_BEFORE_MS;
        // A leftover too small for a request is given back to the others.
        let leftover = room > 0 && room < self.typical;
        pending || low || expiring || leftover
    }

    fn idle(&self, now: u64) -> bool {
        self.renewing.is_none()
            && self.pending.is_empty()
            && self.room(now) == 0
            && now > self.last_asked + IDLE_MS
    }
}

/// One window's renewal: what to commit, what of the slice to keep, how
/// much more to ask for.
#[derive(Debug, Clone, PartialEq)]
pub struct Renewal {
    pub key: Arc<str>,
    pub limit: u64,
    pub span: Span,
    pub alone_ok: bool,
    pub commits: Vec<(Option<u64>, i64)>,
    /// The part of the current slice kept (it may be spent during the flight).
    pub carry: u64,
    /// More asked for (0: none; the slice ends with `carry`).
    pub want: u64,
    /// A slice smaller than this (one request's cost) is not worth holding.
    pub least: u64,
}

/// Redis's answer to one [`Renewal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    /// The window's count after the commits.
    pub total: u64,
    /// The other instances' live slices.
    pub others: u64,
    /// What of `carry` is still held (all of it, unless the slice had
    /// already expired on Redis and the window filled meanwhile).
    pub carry: u64,
    pub extra: u64,
}

/// What the slices decide for a request.
#[derive(Debug, PartialEq)]
pub enum Local {
    /// Taken from the slices; each window's count as far as is known here.
    Admitted(Vec<u64>),
    /// Window `index` is full (Redis said so a moment ago).
    Refused { index: usize, used: u64 },
    /// Not all covered here: the windows marked `true` were taken from the
    /// slices (their counts in `used`), the others must be asked of Redis;
    /// should it refuse, [`Leases::give_back`] the taken ones.
    Ask { taken: Vec<bool>, used: Vec<u64> },
}

/// The instance's accounts of every shared window it used lately.
#[derive(Default)]
pub struct Leases {
    accounts: DashMap<Arc<str>, Arc<Mutex<Account>>>,
}

fn lock(m: &Mutex<Account>) -> MutexGuard<'_, Account> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Leases {
    fn account(&self, key: &str) -> Arc<Mutex<Account>> {
        if let Some(a) = self.accounts.get(key) {
            return a.clone();
        }
        self.accounts.entry(Arc::from(key)).or_default().clone()
    }

    /// Admit `windows` from this instance's slices: all of them, or none.
    pub fn take(&self, windows: &[Window<'_>], now: u64) -> Local {
        let accounts: Vec<_> = windows.iter().map(|w| self.account(w.key)).collect();
        // Locked in one order (by address), so two requests sharing
        // windows never wait on each other in a circle.
        let mut order: Vec<usize> = (0..accounts.len()).collect();
        order.sort_by_key(|&i| Arc::as_ptr(&accounts[i]) as usize);
        if order
            .windows(2)
            .any(|p| Arc::ptr_eq(&accounts[p[0]], &accounts[p[1]]))
        {
            return Local::Ask {
                taken: vec![false; windows.len()],
                used: vec![0; windows.len()],
            };
        }
        let mut guards: Vec<Option<MutexGuard<'_, Account>>> =
            accounts.iter().map(|_| None).collect();
        for i in order {
            guards[i] = Some(lock(&accounts[i]));
        }
        let mut guards: Vec<MutexGuard<'_, Account>> = guards.into_iter().flatten().collect();
        for (a, w) in guards.iter_mut().zip(windows) {
            a.asked(w, now);
        }
        for (i, (a, w)) in guards.iter().zip(windows).enumerate() {
            if w.cost > 0 && a.full_until > now {
                return Local::Refused {
                    index: i,
                    used: a.shared_base,
                };
            }
        }
        // What the slices cover is taken; the rest is asked of Redis (a
        // slice of one window is never counted against its own holder
        // because another window has none).
        let mut used = Vec::with_capacity(windows.len());
        let mut taken = Vec::with_capacity(windows.len());
        for (a, w) in guards.iter_mut().zip(windows) {
            let covered = a.room(now) >= w.cost;
            if covered && w.cost > 0 {
                a.taken += w.cost;
                a.commit(w.field(now), w.cost as i64);
            }
            used.push(a.shared_base + a.taken);
            taken.push(covered);
        }
        if taken.iter().all(|t| *t) {
            Local::Admitted(used)
        } else {
            Local::Ask { taken, used }
        }
    }

    /// Undo what [`Leases::take`] took for the windows marked in `taken`
    /// (Redis refused the rest, or could not be asked).
    pub fn give_back(&self, windows: &[Window<'_>], taken: &[bool], now: u64) {
        for (w, _) in windows.iter().zip(taken).filter(|(w, t)| **t && w.cost > 0) {
            if let Some(a) = self.accounts.get(w.key) {
                let mut a = lock(&a);
                a.taken = a.taken.saturating_sub(w.cost);
                a.commit(w.field(now), -(w.cost as i64));
            }
        }
    }

    /// Redis's answer to a request the slices did not cover: a window it
    /// found full is refused here for a moment.
    pub fn answered(&self, windows: &[Window<'_>], answer: &Admission, now: u64) {
        match answer {
            Admission::Refused { index, used } => {
                if let Some(w) = windows.get(*index) {
                    if *used >= w.limit {
                        let a = self.account(w.key);
                        let mut a = lock(&a);
                        a.full_until = now + FULL_FOR_MS;
                        a.shared_base = *used;
                    }
                }
            }
            Admission::Admitted(used) => {
                for (w, u) in windows.iter().zip(used) {
                    if let Some(a) = self.accounts.get(w.key) {
                        lock(&a).shared_base = *u;
                    }
                }
            }
            Admission::Revoked => {}
        }
    }

    /// A correction (an answer's real tokens or cost against its estimate)
    /// for a window this instance keeps an account of: written with the
    /// next renewal, and what it gives back can be admitted again from the
    /// slice. `false`: no account, the caller writes it itself.
    pub fn correct(&self, key: &str, field: Option<u64>, delta: i64, now: u64) -> bool {
        let Some(a) = self.accounts.get(key).map(|a| a.clone()) else {
            return false;
        };
        let mut a = lock(&a);
        // Without a slice the correction is written at once, as before
        // leasing: a budget's holds are given back to the others promptly.
        if a.granted == 0 && a.renewing.is_none() {
            return false;
        }
        a.commit(field, delta);
        // A correction to a bucket that slid out is dropped by Redis: it
        // must not refill the slice either.
        let current = match (field, a.field(now)) {
            (Some(f), Some(cur)) => f + BUCKETS > cur,
            _ => true,
        };
        if current {
            a.taken = (a.taken as i64 + delta).max(0) as u64;
        }
        true
    }

    /// The renewals due now; each account is marked as renewing until
    /// [`Leases::renewed`] (what is admitted meanwhile counts on the new slice).
    pub fn due(&self, now: u64) -> Vec<Renewal> {
        self.accounts.retain(|_, a| !lock(a).idle(now));
        let all: Vec<(Arc<str>, Arc<Mutex<Account>>)> = self
            .accounts
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        let mut due = Vec::new();
        for (key, a) in all {
            let mut a = lock(&a);
            if !a.due(now) {
                continue;
            }
            due.extend(Self::renewal(key, &mut a, now, true));
        }
        due
    }

    /// Every account's slice given back and its commits written (the
    /// instance is stopping).
    pub fn release_all(&self, now: u64) -> Vec<Renewal> {
        let all: Vec<(Arc<str>, Arc<Mutex<Account>>)> = self
            .accounts
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        all.into_iter()
            .filter_map(|(key, a)| Self::renewal(key, &mut lock(&a), now, false))
            .collect()
    }

    fn renewal(key: Arc<str>, a: &mut Account, now: u64, keep: bool) -> Option<Renewal> {
        let span = a.span?;
        let room = a.room(now);
        let rate = a.rate_at(now);
        let asked = a.demand > 0;
        a.demand = 0;
        let typical = a.typical.max(1);
        let mut want = (rate * LEASE_FOR_S).ceil() as u64;
        // Nothing asked since the last renewal: the slice goes back to the
        // others now, not when its rate has decayed.
        if !keep || !asked || want < 2 * typical {
            want = 0;
        }
        let carry = if want > 0 && room >= typical { room } else { 0 };
        // What is admitted during the flight comes out of `carry`.
        a.granted = a.taken + carry;
        a.renewing = Some(a.taken);
        a.last_sent = now;
        a.typical /= 2;
        Some(Renewal {
            key,
            limit: a.limit,
            span,
            alone_ok: a.alone_ok,
            commits: std::mem::take(&mut a.pending),
            carry,
            want,
            least: typical,
        })
    }

    /// The answer to a renewal sent at `sent`; `None`: it failed (its
    /// commits are kept for the next one, and the slice is not spent).
    pub fn renewed(&self, r: &Renewal, answer: Option<Granted>, sent: u64) {
        let Some(a) = self.accounts.get(&*r.key).map(|a| a.clone()) else {
            return;
        };
        let mut a = lock(&a);
        let at_send = a.renewing.take().unwrap_or(0);
        a.taken = a.taken.saturating_sub(at_send);
        match answer {
            Some(g) => {
                a.granted = g.carry + g.extra;
                a.usable_until = sent + LEASE_TTL_MS - GUARD_MS;
                a.shared_base = g.total + g.others;
                if g.total + g.others < r.limit {
                    a.full_until = 0;
                }
            }
            None => {
                for &(f, d) in &r.commits {
                    a.commit(f, d);
                }
                a.granted = 0;
                a.usable_until = 0;
            }
        }
    }

    /// Redis is away: slices and commits are forgotten (the instance
    /// decides on its share; what Redis never saw is not written later
    /// into a state that moved on).
    pub fn clear(&self) {
        self.accounts.clear();
    }

    /// The accounts kept (for tests and `/admin/state`).
    pub fn len(&self) -> usize {
        self.accounts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.accounts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpm(key: &str, limit: u64) -> Window<'_> {
        Window {
            key,
            limit,
            cost: 1,
            span: Span::Sliding(60_000),
            alone_ok: false,
        }
    }

    /// Ask `n` times at `now`, as `n` requests would.
    fn ask(l: &Leases, w: &Window<'_>, n: usize, now: u64) -> usize {
        (0..n)
            .filter(|_| matches!(l.take(std::slice::from_ref(w), now), Local::Admitted(_)))
            .count()
    }

    fn grant(l: &Leases, now: u64, extra: u64) -> Vec<Renewal> {
        let due = l.due(now);
        for r in &due {
            let g = Granted {
                total: 0,
                others: 0,
                carry: r.carry,
                extra: extra.min(r.want),
            };
            l.renewed(r, Some(g), now);
        }
        due
    }

    #[test]
    fn nothing_is_admitted_locally_without_a_slice() {
        let l = Leases::default();
        let w = rpm("k", 100);
        assert!(matches!(
            l.take(std::slice::from_ref(&w), 1_000),
            Local::Ask { .. }
        ));
        assert_eq!(l.len(), 1, "the demand is counted");
    }

    #[test]
    fn a_slice_is_sized_by_demand_and_spent_without_asking() {
        let l = Leases::default();
        let w = rpm("k", 100_000);
        // 200 requests at once: 200 a second at least.
        ask(&l, &w, 200, 1_000);
        let due = grant(&l, 1_100, u64::MAX);
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].want, 200, "{:?}", due[0]);
        assert_eq!(ask(&l, &w, 250, 1_150), 200);
        // What was admitted goes to the window with the next renewal.
        let due = grant(&l, 1_400, u64::MAX);
        assert_eq!(due[0].commits, vec![(Some(1_400 / 6_000), 200)]);
    }

    #[test]
    fn a_slice_is_never_spent_past_its_lifetime() {
        let l = Leases::default();
        let w = rpm("k", 100_000);
        ask(&l, &w, 200, 1_000);
        grant(&l, 1_100, 10_000);
        assert!(ask(&l, &w, 1, 1_100 + LEASE_TTL_MS - GUARD_MS - 1) == 1);
        assert_eq!(ask(&l, &w, 1, 1_100 + LEASE_TTL_MS - GUARD_MS), 0);
    }

    #[test]
    fn a_quiet_instance_holds_nothing() {
        let l = Leases::default();
        let w = rpm("k", 100_000);
        // One request a second: no slice is worth it, so none is asked
        // for and every request asks Redis.
        for s in 0..5 {
            assert_eq!(ask(&l, &w, 1, 1_000 + s * 1_000), 0);
            for r in grant(&l, 1_000 + s * 1_000 + 300, u64::MAX) {
                assert_eq!(r.want, 0, "{r:?}");
            }
        }
        // Two a second is: a slice is asked for.
        ask(&l, &w, 4, 7_000);
        let due = grant(&l, 7_300, u64::MAX);
        assert!(due.iter().any(|r| r.want > 0), "{due:?}");
    }

    #[test]
    fn a_slice_nobody_asks_for_goes_back_at_the_next_renewal() {
        let l = Leases::default();
        let w = rpm("k", 100_000);
        ask(&l, &w, 200, 1_000);
        grant(&l, 1_100, u64::MAX);
        ask(&l, &w, 10, 1_150);
        let due = grant(&l, 1_400, u64::MAX);
        assert!(due[0].carry > 0 && due[0].want > 0, "{:?}", due[0]);
        // Nothing asked since: the next look gives the whole slice back.
        let due = l.due(1_400 + COMMIT_EVERY_MS);
        assert_eq!((due[0].carry, due[0].want), (0, 0), "{:?}", due[0]);
    }

    #[test]
    fn what_is_admitted_during_a_renewal_counts_on_the_new_slice() {
        let l = Leases::default();
        let w = rpm("k", 100_000);
        ask(&l, &w, 200, 1_000);
        grant(&l, 1_100, 100);
        assert_eq!(ask(&l, &w, 80, 1_200), 80);
        // Running low: a renewal leaves, carrying the 20 left.
        let due = l.due(1_300);
        assert_eq!(due[0].carry, 20);
        // Meanwhile at most those 20 are admitted.
        assert_eq!(ask(&l, &w, 30, 1_310), 20);
        l.renewed(
            &due[0],
            Some(Granted {
                total: 80,
                others: 0,
                carry: 20,
                extra: 50,
            }),
            1_300,
        );
        // The new slice is 70, 20 of it already spent.
        assert_eq!(ask(&l, &w, 100, 1_320), 50);
    }

    #[test]
    fn a_correction_refills_the_slice_and_is_committed() {
        let l = Leases::default();
        let w = Window {
            cost: 100,
            ..rpm("t", 1_000_000)
        };
        ask(&l, &w, 50, 1_000);
        grant(&l, 1_100, 1_000);
        assert_eq!(ask(&l, &w, 20, 1_200), 10);
        assert!(l.correct("t", w.field(1_200), -70, 1_250));
        assert_eq!(ask(&l, &w, 1, 1_260), 0, "70 back is not a whole request");
        assert!(l.correct("t", w.field(1_200), -40, 1_250));
        assert_eq!(ask(&l, &w, 2, 1_260), 1);
        assert!(!l.correct("unknown", None, -5, 1_300));
    }

    #[test]
    fn a_window_found_full_is_refused_without_asking_for_a_moment() {
        let l = Leases::default();
        let w = rpm("k", 10);
        let ws = [w.clone()];
        assert!(matches!(l.take(&ws, 1_000), Local::Ask { .. }));
        l.answered(&ws, &Admission::Refused { index: 0, used: 10 }, 1_000);
        assert!(matches!(
            l.take(&ws, 1_050),
            Local::Refused { index: 0, .. }
        ));
        assert!(matches!(
            l.take(&ws, 1_000 + FULL_FOR_MS),
            Local::Ask { .. }
        ));
    }

    #[test]
    fn a_failed_renewal_keeps_its_commits_and_spends_nothing() {
        let l = Leases::default();
        let w = rpm("k", 100_000);
        ask(&l, &w, 200, 1_000);
        grant(&l, 1_100, 1_000);
        ask(&l, &w, 10, 1_200);
        let due = l.due(1_400);
        l.renewed(&due[0], None, 1_400);
        assert_eq!(ask(&l, &w, 1, 1_410), 0);
        let due = l.due(1_700);
        assert_eq!(due[0].commits, vec![(Some(0), 10)]);
    }

    #[test]
    fn a_window_without_a_slice_is_asked_and_a_refusal_gives_the_rest_back() {
        let l = Leases::default();
        let (a, b) = (rpm("a", 100_000), rpm("b", 100_000));
        ask(&l, &a, 200, 1_000);
        grant(&l, 1_100, 1_000);
        // `b` holds nothing: `a` is taken from its slice, `b` asked.
        let pair = [a.clone(), b.clone()];
        let Local::Ask { taken, .. } = l.take(&pair, 1_200) else {
            panic!("b has no slice");
        };
        assert_eq!(taken, vec![true, false]);
        // Redis refused `b`: what `a` gave is back (its whole slice can be
        // spent), and only what was spent is committed.
        l.give_back(&pair, &taken, 1_200);
        assert_eq!(ask(&l, &a, 300, 1_300), 200);
        let due = l.due(1_600);
        let a_commits: i64 = due
            .iter()
            .filter(|r| &*r.key == "a")
            .flat_map(|r| r.commits.iter().map(|c| c.1))
            .sum();
        assert_eq!(a_commits, 200);
    }
}
