//! Handing a lease to another process, written once for every backend (see [`crate::adopt`]):
//! the holder's engine exports the lease's identity; the adopting engine confirms it with one
//! owner-only extend of the holder's token (the same request a renewal sends) and, once the
//! server confirms that the token still holds, keeps it as a lease of its own: renewed by its
//! watchdog, extended, released, lost. Nothing is granted a second time and no waiter moves.

use std::sync::Arc;

use super::backend::{Action, Backend, Ctx, Purpose, Renewal};
use super::ids::{LeaseId, OpId};
use super::io::Done;
use super::lease::{Granted, Lease};
use super::verdicts::{confirmed_until, next_renewal};
use super::{not_held, LockEngine};
use crate::adopt::{Held, Identity};
use crate::error::Result;
use crate::options::{self, LockOptions};
use crate::time::{Duration, Instant};

/// An adoption whose confirming extend is on the wire.
pub(super) struct PendingAdopt<T> {
    target: Arc<T>,
    held: Arc<Held>,
    token: Arc<str>,
    fence: Option<u64>,
    auto_renew: bool,
}

impl<B: Backend> LockEngine<B> {
    /// The identity of `lease` (its lock's name and kind, owner token and fencing token) as
    /// the opaque string another client passes to [`adopt`](Self::adopt). `NOT_HELD` if the
    /// lease is not certainly held at `now`; `UNSUPPORTED` where the backend cannot hand a
    /// lease over (its entries live in the holder's session) or for leadership. The string is a
    /// capability: whoever has it can release the lock.
    pub fn export(&self, now: Instant, lease: LeaseId) -> Result<String> {
        self.backend.check_adopt()?;
        match self.leases.get(&lease) {
            Some(l) if !l.releasing && now < l.valid_until => Ok(Identity::of(&l.held, &l.token, l.fence)?.encode()),
            _ => Err(not_held("the lease is no longer held")),
        }
    }

    /// Adopts the lease `identity` names (made by [`export`](Self::export) in any client of
    /// the same deployment), with `options`' lease and watchdog: one owner-only extend of its
    /// owner token to `options.lease` confirms it is still current, and it completes acquired,
    /// with the identity's fencing token, as a lease of this engine from then on. A lease that
    /// is no longer current (released, expired, broken, taken over) completes with `NOT_HELD`
    /// and changes nothing; a malformed identity is `INVALID_ARGUMENT` here, before anything is
    /// sent. Both clients can then renew, extend and release the one hold: the first release
    /// frees the lock and the other client learns of it at its next renewal.
    pub fn adopt(&mut self, now: Instant, identity: &str, options: &LockOptions) -> Result<OpId> {
        self.telemetry.at(now);
        let identity = Identity::parse(identity)?;
        options.validate()?;
        options::validate_lease(options.lease)?;
        self.backend.check_adopt()?;
        self.backend.check_extend(options.lease)?;
        let target = Arc::new(self.backend.target(&identity.name, &identity.primitive, options)?);
        self.backend.adopt(&target, &identity.token, identity.fencing_token)?;
        let op = OpId(self.ids.fresh());
        let token: Arc<str> = identity.token.as_str().into();
        let held = Arc::new(Held { name: identity.name, primitive: identity.primitive });
        let action = Action::Extend { target: &target, token: &token, duration: options.lease };
        self.backend.call(ctx!(self, now), Purpose::Extend(op, LeaseId(op.0), options.lease, 0), action, &mut self.settled_now);
        let fence = identity.fencing_token;
        self.adopts.insert(op, PendingAdopt { target, held, token, fence, auto_renew: options.auto_renew });
        self.flush(now);
        Ok(op)
    }

    /// Whether extend `op` confirms an adoption.
    pub(super) fn is_adopt(&self, op: OpId) -> bool {
        self.adopts.contains_key(&op)
    }

    /// An adoption's extend came back (sent at `sent`, to `lease`): the lease is this engine's,
    /// or the adoption fails.
    pub(super) fn on_adopted(&mut self, now: Instant, sent: Instant, op: OpId, lease: Duration, verdict: Renewal) {
        let Some(a) = self.adopts.remove(&op) else { return };
        let done = match verdict {
            Renewal::Confirmed => {
                let id = LeaseId(op.0);
                let valid_until = confirmed_until(&self.backend, &a.token, sent, lease, None);
                if valid_until <= now {
                    // Confirmed too late to count on: the hold stays the exporter's.
                    Done::Failed(not_held("the adoption was confirmed only after its validity had run out"))
                } else {
                    let next_renew = next_renewal(&self.backend, &a.token, a.auto_renew, sent, lease, None);
                    // The exporter's holds are not in the identity: an adopted lease has
                    // neither a shortest nor a longest hold.
                    let l = Lease::new(Granted {
                        target: a.target,
                        held: a.held,
                        token: a.token,
                        lease,
                        auto_renew: a.auto_renew,
                        valid_until,
                        next_renew,
                        fence: a.fence,
                        end: None,
                        hold_until: None,
                        max_until: None,
                    });
                    let t = self.telemetry.adopted(now, id, &l.held.primitive, &l.held.name);
                    self.raise(t);
                    self.leases.insert(id, l);
                    self.sync_lease(id);
                    Done::Acquired { lease: id, fencing_token: a.fence, valid_until }
                }
            }
            Renewal::Refused { subject } => Done::Failed(not_held(&format!("{subject}: the lease to adopt is no longer current"))),
            Renewal::Transient(e) | Renewal::Failed(e) => Done::Failed(e),
        };
        self.complete(op, done);
    }

    /// Shutdown: adoptions still on the wire end `CANCELLED` (a late confirmation finds none).
    pub(super) fn cancel_adopts(&mut self) {
        let ops: Vec<OpId> = self.adopts.keys().copied().collect();
        for op in ops {
            self.adopts.remove(&op);
            let e = crate::error::Error::new(crate::error::ErrorKind::Cancelled, "the client is shutting down");
            self.complete(op, Done::Failed(e));
        }
    }
}
