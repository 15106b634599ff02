//! The session: the client's etcd leases, kept alive by the backend itself (a keepalive of each
//! a third of the way into what its last acknowledged one counts for, as etcd's own client
//! does every third of the TTL), so waiters' keys live while nothing is held too. Holders'
//! renewals send keepalives of their own; any acknowledged keepalive confirms its lease from
//! its send time.
//!
//! A lease found gone (a keepalive or a put answered `LeaseNotFound`) ends the whole session:
//! every key of the client is reported lost (a grant on it is revoked, through the engine), the
//! other leases are revoked so that no key of the client outlives the report, and the next
//! attempt grants a new lease. A keepalive that fails otherwise is retried soon; while none is
//! acknowledged the engine's validity runs out and each lease is reported lost by the engine,
//! before the server can have expired it.

use super::backend::EtcdBackend;
use super::config::safe_validity;
use super::request::{EtcdFailure, EtcdOp, EtcdReply, EtcdRequest, EtcdResult, LeaseId};
use crate::engine::{Answer, Ctx, Purpose, Verdict};
use crate::time::{Duration, Instant};

/// How soon a keepalive that failed (not `LeaseNotFound`) is sent again, at most.
const KEEPALIVE_RETRY: Duration = Duration::from_millis(500);

/// One lease of the session.
#[derive(Clone, Debug)]
pub(super) struct SessionLease {
    pub(super) id: LeaseId,
    /// The TTL asked for, in whole seconds: which locks' keys it carries
    /// ([`EtcdConfig::key_ttl_secs`](super::config::EtcdConfig::key_ttl_secs) of their lease).
    pub(super) asked: i64,
    /// The TTL granted (or last set by a keepalive).
    pub(super) ttl: Duration,
    /// The send time of the latest acknowledged keepalive (or of the grant).
    pub(super) confirmed: Instant,
    /// A keepalive of the backend's own is on the wire.
    pub(super) keeping: bool,
    /// A failed keepalive is retried at this instant instead of the regular one.
    pub(super) retry_at: Option<Instant>,
}

impl SessionLease {
    pub(super) fn new(id: LeaseId, asked: i64, ttl_secs: i64, sent: Instant) -> Self {
        let ttl = Duration::from_secs(ttl_secs.max(1) as u64);
        SessionLease { id, asked, ttl, confirmed: sent, keeping: false, retry_at: None }
    }

    /// When the backend's own keepalive of this lease is due (`None` while one is on the wire).
    pub(super) fn due(&self) -> Option<Instant> {
        if self.keeping {
            return None;
        }
        Some(self.retry_at.unwrap_or(self.confirmed + safe_validity(self.ttl) / 3))
    }
}

/// A request no call waits for.
#[derive(Clone, Debug)]
pub(super) enum Background {
    /// The engine's session open (its reply goes to `session_reply`).
    Open { sent: Instant },
    /// The backend's own keepalive of `lease`, sent at `sent` in session epoch `epoch`.
    KeepAlive { lease: LeaseId, sent: Instant, epoch: u64 },
    /// Nothing to learn from the reply (a watch cancel, a revoke after a loss).
    Ignore,
    /// A revoke of the client's close: the backend stays busy until it is answered.
    Closing,
}

impl EtcdBackend {
    /// The lease `id` of the session, if it is one.
    pub(super) fn lease(&self, id: LeaseId) -> Option<&SessionLease> {
        self.leases.iter().find(|l| l.id == id)
    }

    /// Sends the backend's own keepalives that are due.
    pub(super) fn keep_alive_due(&mut self, ctx: &mut Ctx<'_, EtcdRequest>) {
        let due: Vec<LeaseId> = self.leases.iter().filter(|l| l.due().is_some_and(|t| t <= ctx.now)).map(|l| l.id).collect();
        for lease in due {
            if let Some(l) = self.leases.iter_mut().find(|l| l.id == lease) {
                l.keeping = true;
                l.retry_at = None;
            }
            let what = super::session::Background::KeepAlive { lease, sent: ctx.now, epoch: self.epoch };
            self.send_background(ctx, what, EtcdOp::LeaseKeepAlive { lease });
        }
    }

    /// A keepalive of `lease` sent at `sent` was answered: the lease's confirmation moves up,
    /// or (`LeaseNotFound`) the session is lost. Returns the failure for the caller's verdict.
    pub(super) fn kept_alive(
        &mut self,
        ctx: &mut Ctx<'_, EtcdRequest>,
        lease: LeaseId,
        sent: Instant,
        reply: EtcdResult,
        answers: &mut Vec<Answer>,
    ) -> Result<(), EtcdFailure> {
        match reply {
            Ok(EtcdReply::KeptAlive { ttl_secs, .. }) if ttl_secs > 0 => {
                if let Some(l) = self.leases.iter_mut().find(|l| l.id == lease) {
                    l.confirmed = l.confirmed.max(sent);
                    l.ttl = Duration::from_secs(ttl_secs as u64);
                    l.retry_at = None;
                }
                Ok(())
            }
            // A keepalive answered with no TTL left: the lease is gone (a transport should have
            // said `LeaseNotFound`; the meaning is the same).
            Ok(EtcdReply::KeptAlive { .. }) | Err(EtcdFailure::LeaseNotFound) => {
                self.lose_session(ctx, "the etcd session lease expired or was revoked", answers);
                Err(EtcdFailure::LeaseNotFound)
            }
            Ok(other) => Err(EtcdFailure::Other(crate::error::Error::protocol(format!(
                "etcd answered a keepalive with {other:?}"
            )))),
            Err(f) => {
                if let Some(l) = self.leases.iter_mut().find(|l| l.id == lease) {
                    let soon = ctx.now + (safe_validity(l.ttl) / 10).min(KEEPALIVE_RETRY);
                    l.retry_at = Some(l.retry_at.map_or(soon, |t| t.min(soon)));
                }
                Err(f)
            }
        }
    }

    /// The reply to a request no call waits for.
    pub(super) fn background_reply(
        &mut self,
        ctx: &mut Ctx<'_, EtcdRequest>,
        what: Background,
        reply: EtcdResult,
        answers: &mut Vec<Answer>,
    ) {
        if let Background::KeepAlive { lease, sent, epoch } = what {
            if let Some(l) = self.leases.iter_mut().find(|l| l.id == lease) {
                l.keeping = false;
            }
            // A lease revoked meanwhile (an extra one with no key left: its revoke may overtake
            // this keepalive on another stream) says nothing about the session.
            if epoch == self.epoch && self.lease(lease).is_some() {
                // Failures are retried by the timer (`retry_at`); a loss is handled inside.
                let _ = self.kept_alive(ctx, lease, sent, reply, answers);
            }
        }
    }

    /// The client closes (every lease was released): revokes every lease of the session so
    /// that no key of the client outlives `close`, and ends every watch. Later attempts are
    /// refused; a lease whose grant is answered after this is revoked at once.
    pub(super) fn close(&mut self, ctx: &mut Ctx<'_, EtcdRequest>) {
        self.closed = true;
        for lease in std::mem::take(&mut self.leases) {
            self.send_background(ctx, Background::Closing, EtcdOp::LeaseRevoke { lease: lease.id });
        }
        let watches: Vec<_> = self.watches.drain().map(|(w, _)| w).collect();
        for watch in watches {
            self.send_background(ctx, Background::Ignore, EtcdOp::CancelWatch { watch });
        }
        self.epoch += 1;
    }

    /// The session is lost: every grant on it is reported lost, every other lease revoked (its
    /// keys must not outlive the report), every watch cancelled; the next attempt grants anew.
    pub(super) fn lose_session(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, why: &str, answers: &mut Vec<Answer>) {
        if self.leases.is_empty() && self.owned.is_empty() {
            return;
        }
        let mut held: Vec<_> = self.held.drain().collect();
        held.sort_by_key(|(_, op)| *op);
        for (_, op) in held {
            answers.push(Answer { purpose: Purpose::Acquire(op), sent: ctx.now, verdict: Verdict::Revoked(why.to_string()) });
        }
        for lease in std::mem::take(&mut self.leases) {
            self.send_background(ctx, Background::Ignore, EtcdOp::LeaseRevoke { lease: lease.id });
        }
        let watches: Vec<_> = self.watches.drain().map(|(w, _)| w).collect();
        for watch in watches {
            self.send_background(ctx, Background::Ignore, EtcdOp::CancelWatch { watch });
        }
        self.owned.clear();
        self.used.clear();
        self.freed.clear();
        self.epoch += 1;
    }
}
