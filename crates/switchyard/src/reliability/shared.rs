//! Admission on the fleet's shared counts (`state.backend: redis`).
//!
//! A request's first attempt charges, in one script and one round trip:
//! the client's rpm/tpm windows (the ingress leaves them pending in
//! [`Pending`] instead of counting them locally), the deployment's rpm/tpm
//! windows and its provider pool's, and the raise of its budget hold. All
//! or nothing: a refusal says which window, and nothing was charged. A
//! later attempt (a retry, a fallback) charges only what it adds: its
//! deployment's (and pool's) windows, and the budget when the candidate is
//! pricier. What each window has used goes to the deployment's quota.
//!
//! Redis away: the caller decides on this instance's own counters, each
//! limit divided by the instances last seen (`on_unavailable: local`), or
//! refuses (`reject`).

use std::sync::Arc;

use crate::adapters::deployment::DeploymentRt;
use crate::error::{ErrorCode, GatewayError, Source};
use crate::registry::limits::{window_retry, LimitRejection, Reservation, Scope, RATE_WINDOW};
use crate::reliability::ctx::RequestCtx;
use crate::state::fleet::now_ms;
use crate::state::redis::{Admission, Span, Window};
use crate::state::shared::Shared;

/// What a request still has to charge on the fleet, and what it got.
#[derive(Default)]
pub struct Pending {
    /// The client's windows, until an attempt charges them.
    pub client: Option<ClientAsk>,
    /// The budget hold the next attempt must raise to (USD).
    pub budget: Option<f64>,
    /// The client's charge, once made (for `x-ratelimit-*` and settling).
    pub granted: Option<ClientGranted>,
    /// The client's own counter, for a decision made locally while Redis
    /// is away.
    pub local: Option<Arc<crate::registry::ClientLimits>>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("client", &self.client.is_some())
            .field("budget", &self.budget)
            .field("granted", &self.granted.is_some())
            .finish()
    }
}

/// A client's limits and its shared window keys.
pub struct ClientAsk {
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    pub rpm_key: Arc<str>,
    pub tpm_key: Arc<str>,
}

impl ClientAsk {
    /// The client's limits and window names (`None` outside a fleet).
    pub fn of(c: &crate::registry::ClientLimits) -> Option<ClientAsk> {
        let (rpm_key, tpm_key) = c.shared_windows.clone()?;
        Some(ClientAsk {
            rpm: c.rpm,
            tpm: c.tpm,
            rpm_key,
            tpm_key,
        })
    }
}

pub struct ClientGranted {
    pub reservation: Reservation,
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
}

/// The fleet's word on one attempt.
pub enum Verdict {
    /// Charged; the deployment's reservation (`None`: it has no rpm/tpm
    /// limit, so nothing of it is shared).
    Admitted(Option<Reservation>),
    /// Nothing to charge on the fleet: decide locally as a single gateway.
    Local,
    /// Redis is away (`reject`: refuse; else decide locally on shares).
    Unavailable {
        reject: bool,
    },
    Refused(GatewayError),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Part {
    ClientRpm,
    ClientTpm,
    DepRpm,
    DepTpm,
    PoolRpm,
    PoolTpm,
    Budget,
}

/// Charge one attempt on `dep` (`estimate` tokens) on the fleet.
pub async fn admit(
    shared: &Arc<dyn Shared>,
    dep: &DeploymentRt,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Verdict {
    let Some((dep_rpm, dep_tpm)) = dep.state.shared_windows.clone() else {
        return Verdict::Local;
    };
    let lim = dep.state.limits.config();
    let (pool_lim, pool_windows) = {
        let pool = dep.state.pool();
        match pool.shared_windows.clone() {
            Some(w) if pool.bounds_rate() => (pool.limits.config(), Some(w)),
            _ => (crate::config::Limits::default(), None),
        }
    };
    let budget = match (ctx.shared.budget, ctx.budget.as_ref()) {
        (Some(usd), Some(h)) if h.shared_more(usd) > 0 => h
            .shared_window(&**shared)
            .map(|w| (usd, h.shared_more(usd), w)),
        _ => None,
    };
    let mut parts = Vec::with_capacity(7);
    let mut windows = Vec::with_capacity(7);
    let mut push = |part, w| {
        parts.push(part);
        windows.push(w);
    };
    let client = ctx.shared.client.as_ref();
    if let Some(c) = client {
        if let Some(rpm) = c.rpm {
            push(Part::ClientRpm, sliding(&c.rpm_key, rpm.into(), 1, false));
        }
        if let Some(tpm) = c.tpm {
            push(Part::ClientTpm, sliding(&c.tpm_key, tpm, estimate, true));
        }
    }
    if let Some(rpm) = lim.rpm {
        push(Part::DepRpm, sliding(&dep_rpm, rpm.into(), 1, false));
    }
    if let Some(tpm) = lim.tpm {
        push(Part::DepTpm, sliding(&dep_tpm, tpm, estimate, true));
    }
    if let Some((pool_rpm, pool_tpm)) = &pool_windows {
        if let Some(rpm) = pool_lim.rpm {
            push(Part::PoolRpm, sliding(pool_rpm, rpm.into(), 1, false));
        }
        if let Some(tpm) = pool_lim.tpm {
            push(Part::PoolTpm, sliding(pool_tpm, tpm, estimate, true));
        }
    }
    if let Some((_, more, w)) = &budget {
        let fixed = Span::Fixed {
            ttl_ms: w.ttl_ms,
            seed: w.seed,
        };
        push(
            Part::Budget,
            Window {
                key: &w.key,
                limit: w.limit,
                cost: *more,
                span: fixed,
                alone_ok: false,
            },
        );
    }
    // A revoked key is gone from every instance's keys before its revoke
    // returns: with nothing shared to charge, Redis is not asked. When the
    // request does ask, the revoked set is checked in the same round trip.
    if windows.is_empty() {
        return Verdict::Local;
    }
    let issued = issued_key(ctx);
    let now = now_ms();
    let field = |w: &Window<'_>| w.field(now);
    let fields: Vec<Option<u64>> = windows.iter().map(field).collect();
    let answer = shared.admit(&windows, issued.as_deref(), now).await;
    drop(windows);
    let used = match answer {
        Err(u) => return Verdict::Unavailable { reject: u.reject },
        Ok(Admission::Refused { index, .. }) => {
            // A full window of the deployment's or its pool's: spent, for
            // the quota.
            let full = |limit: Option<u64>| limit.unwrap_or(1);
            let now = tokio::time::Instant::now();
            let st = &dep.state;
            match parts[index] {
                Part::DepRpm => {
                    st.observe_counts(now, Some((full(lim.rpm.map(u64::from)), 0)), None)
                }
                Part::DepTpm => st.observe_counts(now, Some((0, full(lim.tpm))), None),
                Part::PoolRpm => {
                    st.observe_counts(now, None, Some((full(pool_lim.rpm.map(u64::from)), 0)))
                }
                Part::PoolTpm => st.observe_counts(now, None, Some((0, full(pool_lim.tpm)))),
                _ => {}
            }
            return refused(parts[index], dep, ctx);
        }
        Ok(Admission::Revoked) => return Verdict::Refused(revoked(ctx)),
        Ok(Admission::Admitted(used)) => used,
    };
    let at = |p: Part| parts.iter().position(|&q| q == p);
    let used_of = |p: Part| at(p).and_then(|i| used.get(i).copied()).unwrap_or(0);
    let field_of = |p: Part| at(p).and_then(|i| fields[i]);
    if let Some(c) = ctx.shared.client.take() {
        let reservation = Reservation::shared(
            shared.clone(),
            (c.rpm_key.clone(), field_of(Part::ClientRpm)),
            (c.tpm_key.clone(), field_of(Part::ClientTpm)),
            if c.tpm.is_some() { estimate } else { 0 },
            (used_of(Part::ClientRpm), used_of(Part::ClientTpm)),
        );
        ctx.shared.granted = Some(ClientGranted {
            reservation,
            rpm: c.rpm,
            tpm: c.tpm,
        });
    }
    if let (Some((usd, _, w)), Some(h)) = (budget, ctx.budget.as_mut()) {
        let key = h.shared_key().cloned().unwrap_or_else(|| w.key.into());
        h.shared_charged(shared, key, usd, used_of(Part::Budget));
        ctx.shared.budget = None;
    }
    let dep_used = (used_of(Part::DepRpm), used_of(Part::DepTpm));
    let pool_used = (used_of(Part::PoolRpm), used_of(Part::PoolTpm));
    dep.state.observe_counts(
        tokio::time::Instant::now(),
        Some(dep_used),
        pool_windows.is_some().then_some(pool_used),
    );
    let dep_shared = lim.rpm.is_some() || lim.tpm.is_some();
    let own = dep_shared.then(|| {
        Reservation::shared(
            shared.clone(),
            (dep_rpm, field_of(Part::DepRpm)),
            (dep_tpm, field_of(Part::DepTpm)),
            if lim.tpm.is_some() { estimate } else { 0 },
            dep_used,
        )
    });
    let pooled = pool_windows.map(|(pool_rpm, pool_tpm)| {
        Reservation::shared(
            shared.clone(),
            (pool_rpm, field_of(Part::PoolRpm)),
            (pool_tpm, field_of(Part::PoolTpm)),
            if pool_lim.tpm.is_some() { estimate } else { 0 },
            pool_used,
        )
    });
    Verdict::Admitted(match (own, pooled) {
        (Some(own), Some(pooled)) => Some(own.and(pooled)),
        (own, pooled) => own.or(pooled),
    })
}

/// One of the request's rate windows (rpm, tpm) on the fleet's counts.
fn sliding(key: &str, limit: u64, cost: u64, alone_ok: bool) -> Window<'_> {
    Window {
        key,
        limit,
        cost,
        span: Span::Sliding(RATE_WINDOW.as_millis() as u64),
        alone_ok,
    }
}

/// A virtual key issued at run time (`key-…`): the fleet's revoked set is
/// checked for it.
fn issued_key(ctx: &RequestCtx) -> Option<Arc<str>> {
    ctx.key_id.clone().filter(|k| k.starts_with("key-"))
}

/// The key was revoked on some instance.
fn revoked(ctx: &mut RequestCtx) -> GatewayError {
    ctx.client_rejected = true;
    GatewayError::client(ErrorCode::AuthFailed, "invalid API key")
}

/// The client's own window (`rpm` or `tpm`) is full.
fn client_limited(reason: &'static str, ctx: &mut RequestCtx) -> GatewayError {
    ctx.client_rejected = true;
    LimitRejection {
        scope: Scope::Client,
        reason,
        retry_after: window_retry(),
    }
    .to_error()
}

fn refused(part: Part, dep: &DeploymentRt, ctx: &mut RequestCtx) -> Verdict {
    let limit = |scope, reason| LimitRejection {
        scope,
        reason,
        retry_after: window_retry(),
    };
    Verdict::Refused(match part {
        Part::ClientRpm => client_limited("rpm", ctx),
        Part::ClientTpm => client_limited("tpm", ctx),
        Part::DepRpm | Part::DepTpm | Part::PoolRpm | Part::PoolTpm => {
            let reason = if matches!(part, Part::DepRpm | Part::PoolRpm) {
                "rpm"
            } else {
                "tpm"
            };
            let scope = if matches!(part, Part::PoolRpm | Part::PoolTpm) {
                Scope::Provider
            } else {
                Scope::Deployment
            };
            let mut e = limit(scope, reason).to_error();
            e.source = Source::Gateway;
            e
        }
        Part::Budget => {
            ctx.shared.budget = None;
            let client = ctx.client.as_deref().unwrap_or("this client");
            GatewayError::new(
                ErrorCode::BudgetExceeded,
                Source::Gateway,
                format!(
                    "{client}'s budget (shared by the fleet) does not cover this request on {}",
                    dep.name
                ),
            )
        }
    })
}

/// An op this gateway answers itself (a local token count): nothing goes
/// upstream, so only the client's windows (and a revoked key) are the
/// fleet's to decide — as one gateway counts the request against the
/// client's rpm.
pub async fn admit_client(
    shared: &Arc<dyn Shared>,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let Some(c) = ctx.shared.client.take() else {
        return Ok(());
    };
    let windows: Vec<Window<'_>> = c
        .rpm
        .map(|rpm| sliding(&c.rpm_key, rpm.into(), 1, false))
        .into_iter()
        .collect();
    if windows.is_empty() {
        return Ok(());
    }
    let issued = issued_key(ctx);
    let now = now_ms();
    let field = windows.first().and_then(|w| w.field(now));
    match shared.admit(&windows, issued.as_deref(), now).await {
        Ok(Admission::Admitted(used)) => {
            let reservation = Reservation::shared(
                shared.clone(),
                (c.rpm_key.clone(), field),
                (c.tpm_key.clone(), None),
                0,
                (used.first().copied().unwrap_or(0), 0),
            );
            ctx.shared.granted = Some(ClientGranted {
                reservation,
                rpm: c.rpm,
                tpm: c.tpm,
            });
            Ok(())
        }
        Ok(Admission::Refused { .. }) => Err(client_limited("rpm", ctx)),
        Ok(Admission::Revoked) => Err(revoked(ctx)),
        // Redis away: this instance's share, on its own counter.
        Err(u) if u.reject => {
            ctx.client_rejected = true;
            Err(unavailable())
        }
        Err(_) => {
            let Some(limits) = ctx.shared.local.clone() else {
                return Ok(());
            };
            let rpm = c.rpm.map(|r| shared.local_share(u64::from(r)) as u32);
            match limits
                .counter
                .check(tokio::time::Instant::now(), rpm, None, 0)
            {
                Ok(reservation) => {
                    ctx.shared.granted = Some(ClientGranted {
                        reservation,
                        rpm,
                        tpm: c.tpm,
                    });
                    Ok(())
                }
                Err(r) => {
                    ctx.client_rejected = true;
                    Err(r.to_error())
                }
            }
        }
    }
}

/// `on_unavailable: reject`: the request needs the shared state.
pub fn unavailable() -> GatewayError {
    GatewayError::new(
        ErrorCode::NoHealthyDeployment,
        Source::Gateway,
        "the shared state (Redis) is unavailable and `state.on_unavailable` is `reject`",
    )
}
