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
use super::lease::{Background, SessionLease};
use super::request::{EtcdFailure, EtcdOp, EtcdReply, EtcdRequest, EtcdResult, LeaseId};
use crate::engine::{Answer, Ctx, Purpose, Verdict};
use crate::time::{Duration, Instant};

/// How soon a keepalive that failed (not `LeaseNotFound`) is sent again, at most.
const KEEPALIVE_RETRY: Duration = Duration::from_millis(500);

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
            let what = Background::KeepAlive { lease, sent: ctx.now, epoch: self.epoch };
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

    /// Revokes the leases freed since the last call that are not the client's own and carry
    /// no key any more: a lease granted for a second key of one name lives only as long as it
    /// is needed (the next such key grants another), so a burst of concurrent acquires does
    /// not leave the client keeping many leases alive for ever.
    pub(super) fn retire_idle(&mut self, ctx: &mut Ctx<'_, EtcdRequest>) {
        for lease in std::mem::take(&mut self.freed) {
            let own = self.leases.first().is_some_and(|l| l.id == lease);
            if own || self.used.keys().any(|(_, l)| *l == lease) {
                continue;
            }
            let Some(i) = self.leases.iter().position(|l| l.id == lease) else { continue };
            self.leases.remove(i);
            self.send_background(ctx, Background::Ignore, EtcdOp::LeaseRevoke { lease });
        }
    }
}
