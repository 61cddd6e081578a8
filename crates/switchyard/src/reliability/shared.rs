//! Admission on the fleet's shared counts (`state.backend: redis`).
//!
//! A request's first attempt charges, in one script and one round trip:
//! the client's rpm/tpm windows (the ingress leaves them pending in
//! [`Pending`] instead of counting them locally), the deployment's rpm/tpm
//! windows, and the raise of its budget hold. All or nothing: a refusal
//! says which window, and nothing was charged. A later attempt (a retry, a
//! fallback) charges only what it adds: its deployment's windows, and the
//! budget when the candidate is pricier.
//!
//! Redis away: the caller decides on this instance's own counters, each
//! limit divided by the instances last seen (`on_unavailable: local`), or
//! refuses (`reject`).

use std::sync::Arc;

use crate::error::{ErrorCode, GatewayError, Source};
use crate::observe::ctx::RequestCtx;
use crate::reliability::limits::{window_retry, LimitRejection, Reservation, Scope, RATE_WINDOW};
use crate::state::fleet::{now_ms, Fleet};
use crate::state::live::DeploymentRt;
use crate::state::redis::{Admission, Span, Window};

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
    pub local: Option<Arc<crate::state::store::ClientLimits>>,
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
    pub fn of(c: &crate::state::store::ClientLimits) -> Option<ClientAsk> {
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
    Budget,
}

/// Charge one attempt on `dep` (`estimate` tokens) on the fleet.
pub async fn admit(
    fleet: &Arc<Fleet>,
    dep: &DeploymentRt,
    estimate: u64,
    ctx: &mut RequestCtx,
) -> Verdict {
    let lim = dep.state.limits.config();
    let Some((dep_rpm, dep_tpm)) = dep.state.shared_windows.clone() else {
        return Verdict::Local;
    };
    let budget = match (ctx.shared.budget, ctx.budget.as_ref()) {
        (Some(usd), Some(h)) if h.shared_more(usd) > 0 => {
            Some((usd, h.shared_more(usd), h.shared_window(fleet)))
        }
        _ => None,
    };
    let span = Span::Sliding(RATE_WINDOW.as_millis() as u64);
    let mut parts = Vec::with_capacity(5);
    let mut windows = Vec::with_capacity(5);
    let mut push = |part, w| {
        parts.push(part);
        windows.push(w);
    };
    let client = ctx.shared.client.as_ref();
    if let Some(c) = client {
        if let Some(rpm) = c.rpm {
            push(
                Part::ClientRpm,
                Window {
                    key: &c.rpm_key,
                    limit: u64::from(rpm),
                    cost: 1,
                    span,
                    alone_ok: false,
                },
            );
        }
        if let Some(tpm) = c.tpm {
            push(
                Part::ClientTpm,
                Window {
                    key: &c.tpm_key,
                    limit: tpm,
                    cost: estimate,
                    span,
                    alone_ok: true,
                },
            );
        }
    }
    if let Some(rpm) = lim.rpm {
        push(
            Part::DepRpm,
            Window {
                key: &dep_rpm,
                limit: u64::from(rpm),
                cost: 1,
                span,
                alone_ok: false,
            },
        );
    }
    if let Some(tpm) = lim.tpm {
        push(
            Part::DepTpm,
            Window {
                key: &dep_tpm,
                limit: tpm,
                cost: estimate,
                span,
                alone_ok: true,
            },
        );
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
    // A key issued at run time is checked against the fleet's revocations
    // in the same round trip (even when nothing else is shared).
    let issued = ctx.key_id.clone().filter(|k| k.starts_with("key-"));
    if windows.is_empty() && issued.is_none() {
        return Verdict::Local;
    }
    let now = now_ms();
    let field = |w: &Window<'_>| w.field(now);
    let fields: Vec<Option<u64>> = windows.iter().map(field).collect();
    let answer = fleet.admit(&windows, issued.as_deref(), now).await;
    drop(windows);
    let used = match answer {
        Err(u) => return Verdict::Unavailable { reject: u.reject },
        Ok(Admission::Refused { index, .. }) => return refused(parts[index], dep, ctx),
        Ok(Admission::Revoked) => {
            ctx.client_rejected = true;
            return Verdict::Refused(GatewayError::client(
                ErrorCode::AuthFailed,
                "invalid API key",
            ));
        }
        Ok(Admission::Admitted(used)) => used,
    };
    let at = |p: Part| parts.iter().position(|&q| q == p);
    let used_of = |p: Part| at(p).and_then(|i| used.get(i).copied()).unwrap_or(0);
    let field_of = |p: Part| at(p).and_then(|i| fields[i]);
    if let Some(c) = ctx.shared.client.take() {
        let reservation = Reservation::shared(
            fleet.clone(),
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
        h.shared_charged(fleet, key, usd, used_of(Part::Budget));
        ctx.shared.budget = None;
    }
    let dep_shared = lim.rpm.is_some() || lim.tpm.is_some();
    Verdict::Admitted(dep_shared.then(|| {
        Reservation::shared(
            fleet.clone(),
            (dep_rpm, field_of(Part::DepRpm)),
            (dep_tpm, field_of(Part::DepTpm)),
            if lim.tpm.is_some() { estimate } else { 0 },
            (used_of(Part::DepRpm), used_of(Part::DepTpm)),
        )
    }))
}

fn refused(part: Part, dep: &DeploymentRt, ctx: &mut RequestCtx) -> Verdict {
    let limit = |scope, reason| LimitRejection {
        scope,
        reason,
        retry_after: window_retry(),
    };
    Verdict::Refused(match part {
        Part::ClientRpm | Part::ClientTpm => {
            ctx.client_rejected = true;
            let reason = if part == Part::ClientRpm {
                "rpm"
            } else {
                "tpm"
            };
            limit(Scope::Client, reason).to_error()
        }
        Part::DepRpm | Part::DepTpm => {
            let reason = if part == Part::DepRpm { "rpm" } else { "tpm" };
            let mut e = limit(Scope::Deployment, reason).to_error();
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
pub async fn admit_client(fleet: &Arc<Fleet>, ctx: &mut RequestCtx) -> Result<(), GatewayError> {
    let Some(c) = ctx.shared.client.take() else {
        return Ok(());
    };
    let span = Span::Sliding(RATE_WINDOW.as_millis() as u64);
    let mut windows = Vec::with_capacity(2);
    if let Some(rpm) = c.rpm {
        windows.push(Window {
            key: &c.rpm_key,
            limit: u64::from(rpm),
            cost: 1,
            span,
            alone_ok: false,
        });
    }
    let issued = ctx.key_id.clone().filter(|k| k.starts_with("key-"));
    if windows.is_empty() && issued.is_none() {
        return Ok(());
    }
    let now = now_ms();
    let field = windows.first().and_then(|w| w.field(now));
    match fleet.admit(&windows, issued.as_deref(), now).await {
        Ok(Admission::Admitted(used)) => {
            let reservation = Reservation::shared(
                fleet.clone(),
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
        Ok(Admission::Refused { .. }) => {
            ctx.client_rejected = true;
            Err(LimitRejection {
                scope: Scope::Client,
                reason: "rpm",
                retry_after: window_retry(),
            }
            .to_error())
        }
        Ok(Admission::Revoked) => {
            ctx.client_rejected = true;
            Err(GatewayError::client(
                ErrorCode::AuthFailed,
                "invalid API key",
            ))
        }
        // Redis away: this instance's share, on its own counter.
        Err(u) if u.reject => {
            ctx.client_rejected = true;
            Err(unavailable())
        }
        Err(_) => {
            let Some(limits) = ctx.shared.local.clone() else {
                return Ok(());
            };
            let rpm = c.rpm.map(|r| fleet.local_share(u64::from(r)) as u32);
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
