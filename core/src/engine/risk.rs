//! Leases at risk: held, but the engine cannot confirm them now (the session's connection is
//! down, a renewal failed in transport), so each stays valid only until its `valid_until`
//! unless contact returns first. Written once for every backend: a backend only says that its
//! session is unreachable ([`Signal::Unreachable`]) or reachable again
//! ([`Signal::Reachable`]); a renewal's transient failure puts its own lease at risk (the
//! Redis backends' only way). A spell is told once ([`Event::AtRisk`]); the confirmation that
//! ends it is told as [`Event::Renewed`], a loss as [`Event::Lost`]. Nothing here scans the
//! lease table except the unreachable notice, which concerns every lease.
//!
//! [`Signal::Unreachable`]: super::Signal::Unreachable
//! [`Signal::Reachable`]: super::Signal::Reachable

use super::backend::Backend;
use super::ids::LeaseId;
use super::io::Event;
use super::telemetry::Happened;
use super::LockEngine;
use crate::time::Instant;

impl<B: Backend> LockEngine<B> {
    /// Puts lease `id` at risk at `now`, telling its holder once per spell. Not at risk: a
    /// lease being released (its owner gave it up), one that needs no further confirmation (a
    /// fixed lease already confirmed to its end loses nothing by a silence), and one whose
    /// validity already ran out (its loss is told instead).
    pub(super) fn put_at_risk(&mut self, now: Instant, id: LeaseId) {
        let Some(l) = self.leases.get(&id) else {
            return;
        };
        if l.releasing || l.next_renew.is_none() || l.valid_until <= now || !self.at_risk.insert(id) {
            return;
        }
        self.events.push_back(Event::AtRisk { lease: id, valid_until: l.valid_until });
        let t = self.telemetry.lease(Happened::AtRisk { lease: id }, id);
        self.raise(t);
    }

    /// Ends `id`'s spell at risk after a confirmation; whether it was at risk.
    pub(super) fn end_risk(&mut self, id: LeaseId) -> bool {
        let was = self.at_risk.remove(&id);
        if was {
            let t = self.telemetry.lease(Happened::Safe { lease: id }, id);
            self.raise(t);
        }
        was
    }

    /// The session cannot be reached: every lease lives in it, so every one is at risk.
    pub(super) fn session_unreachable(&mut self, now: Instant) {
        let ids: Vec<LeaseId> = self.leases.keys().copied().collect();
        for id in ids {
            self.put_at_risk(now, id);
        }
    }

    /// The session is reachable again: the renewal of every lease at risk is brought forward to
    /// `now` (one not on the wire already), so its holder learns soon that it is safe rather
    /// than at its next scheduled renewal. The caller runs the timers.
    pub(super) fn session_reachable(&mut self, now: Instant) {
        let ids: Vec<LeaseId> = self.at_risk.iter().copied().collect();
        for id in ids {
            if let Some(l) = self.leases.get_mut(&id) {
                if !l.renewing {
                    l.next_renew = l.next_renew.map(|at| at.min(now));
                }
                self.sync_lease(id);
            }
        }
    }

    /// Whether `lease` is at risk: held, but not confirmable now (see [`Event::AtRisk`]).
    pub fn is_at_risk(&self, lease: LeaseId) -> bool {
        self.at_risk.contains(&lease)
    }
}
