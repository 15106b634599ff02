//! A lease as its handles see it: held until an instant (and maybe at risk), lost with a
//! reason, or released. The driver task owns the sending half; every lease handle (and the
//! holder of a non-reentrant lock) watches it.

use std::future::Future;

use tokio::sync::watch;

use crate::error::Error;
use crate::time::Duration;

/// What a lease handle can observe about its lease.
#[derive(Clone, Debug)]
pub(crate) enum LeaseState {
    /// Held until at least `until`; `at_risk` while it cannot be confirmed (the engine's
    /// `Event::AtRisk` until its `Renewed`), and `spells` counts the spells at risk so far (so a
    /// watcher misses none, however short).
    Held {
        /// The local instant it is certainly valid until.
        until: tokio::time::Instant,
        /// Whether it cannot be confirmed now.
        at_risk: bool,
        /// Spells at risk begun so far.
        spells: u64,
    },
    /// Lost, with the reason.
    Lost(Error),
    /// Released by its owner.
    Released,
}

/// A lease handle's view of its lease.
pub(crate) struct LeaseWatch(pub watch::Receiver<LeaseState>);

impl LeaseState {
    /// Newly held until `until`, not at risk.
    pub fn held(until: tokio::time::Instant) -> Self {
        LeaseState::Held { until, at_risk: false, spells: 0 }
    }

    /// A held lease's new validity; `at_risk`: `Some(true)` when a spell at risk begins,
    /// `Some(false)` when it ends, `None` when unchanged. Nothing changes once it ended.
    pub fn update(&mut self, valid: tokio::time::Instant, risk: Option<bool>) {
        if let LeaseState::Held { until, at_risk, spells } = self {
            *until = valid;
            match risk {
                Some(true) if !*at_risk => {
                    *at_risk = true;
                    *spells += 1;
                }
                Some(r) => *at_risk = r,
                None => {}
            }
        }
    }
}

impl LeaseWatch {
    /// Held now by the local view (renewed, not expired, not lost).
    pub fn is_held(&self) -> bool {
        matches!(&*self.0.borrow(), LeaseState::Held { until, .. } if tokio::time::Instant::now() < *until)
    }

    /// Held now, but not confirmable (see [`Lease::is_at_risk`](super::Lease::is_at_risk)).
    pub fn is_at_risk(&self) -> bool {
        matches!(&*self.0.borrow(), LeaseState::Held { until, at_risk: true, .. } if tokio::time::Instant::now() < *until)
    }

    /// How long the lease is certainly still valid, if held.
    pub fn remaining(&self) -> Option<Duration> {
        match &*self.0.borrow() {
            LeaseState::Held { until, .. } => until.checked_duration_since(tokio::time::Instant::now()).filter(|d| !d.is_zero()),
            _ => None,
        }
    }

    /// The spells at risk from now on, the one under way (if any) first.
    pub fn at_risk_spells(&self) -> AtRiskSpells {
        let seen = match &*self.0.borrow() {
            LeaseState::Held { at_risk, spells, .. } => spells - u64::from(*at_risk),
            _ => u64::MAX,
        };
        AtRiskSpells { rx: self.0.clone(), seen }
    }

    /// The reason the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<Error> {
        match &*self.0.borrow() {
            LeaseState::Lost(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// `Some(reason)` when the lease is lost, `None` once it ends otherwise (released, client
    /// gone); a `'static` future that does not keep the lease handle alive.
    pub fn lost_signal(&self) -> impl Future<Output = Option<Error>> + Send + 'static {
        let mut rx = self.0.clone();
        async move {
            let state = rx.wait_for(|s| !matches!(s, LeaseState::Held { .. })).await.ok()?;
            match &*state {
                LeaseState::Lost(e) => Some(e.clone()),
                _ => None,
            }
        }
    }

    /// The reason when the lease is lost; pending forever if it ends otherwise.
    pub async fn lost(&self) -> Error {
        let mut rx = self.0.clone();
        let lost = rx.wait_for(|s| matches!(s, LeaseState::Lost(_))).await.ok().and_then(|s| match &*s {
            LeaseState::Lost(e) => Some(e.clone()),
            _ => None,
        });
        match lost {
            Some(e) => e,
            None => std::future::pending().await,
        }
    }
}


/// The spells at risk of one lease, one after another ([`Lease::at_risk_spells`]). Holds no
/// lease handle, so waiting on it never keeps a forgotten lease alive.
///
/// [`Lease::at_risk_spells`]: super::Lease::at_risk_spells
pub struct AtRiskSpells {
    rx: watch::Receiver<LeaseState>,
    /// The spells already reported.
    seen: u64,
}

impl AtRiskSpells {
    /// Waits for the next spell at risk: `true` once one has begun (at once for one under way
    /// and not reported yet), `false` once the lease has ended (lost, released, its client
    /// gone), and from then on.
    pub async fn next(&mut self) -> bool {
        let seen = self.seen;
        let Ok(state) = self.rx.wait_for(|s| !matches!(s, LeaseState::Held { spells, .. } if *spells <= seen)).await else {
            return false;
        };
        match &*state {
            LeaseState::Held { spells, .. } => {
                self.seen = *spells;
                true
            }
            _ => false,
        }
    }
}
