//! Breaking a lock, written once for every backend (see [`crate::break_lock`]): an inspect
//! read, the holder chosen from it, then the backend's owner-only removal of that one entry.

use std::sync::Arc;

use super::backend::{Action, Backend, Ctx, Purpose, Release};
use super::ids::OpId;
use super::io::Done;
use super::{LockEngine, Read};
use crate::break_lock::{self, Broken};
use crate::error::Result;
use crate::inspect::{Kind, Snapshot};
use crate::options::{self, LockOptions};
use crate::time::Instant;

/// A break in progress: its lock, the fencing token it names, and once its read chose a
/// holder, what removing that holder removes.
pub(super) struct PendingBreak<T> {
    target: Arc<T>,
    fencing_token: Option<u64>,
    removing: Option<Broken>,
}

impl<B: Backend> LockEngine<B> {
    /// Breaks lock `name` read as a `kind`: removes its current holder's entry — only the one
    /// whose fencing token is `fencing_token` when given — and wakes the next waiter as a
    /// release would. Completes with a broken outcome: what was removed (label, fencing token),
    /// or `None` when nothing was (the lock was free, its holder left meanwhile, or no holder
    /// has that token). The name is validated as for an acquire. The broken holder's client
    /// learns of its loss at its next renewal and its release finds nothing; the next grant's
    /// fencing token is larger. Safe only with fencing (see PROTOCOL.md §15).
    pub fn break_lock(&mut self, now: Instant, name: &str, kind: Kind, fencing_token: Option<u64>) -> Result<OpId> {
        options::validate_name(name)?;
        self.backend.check_inspect()?;
        self.backend.check_break(fencing_token.is_some())?;
        let read = LockOptions { lease: options::MIN_LEASE, ..LockOptions::default() };
        let target = Arc::new(self.backend.target(name, &kind.primitive(), &read)?);
        let op = OpId(self.ids.fresh());
        self.breaks.insert(op, PendingBreak { target: Arc::clone(&target), fencing_token, removing: None });
        self.start_read(now, op, target, Read::Inspect(kind));
        Ok(op)
    }

    /// Whether inspect `op` is the read of a break.
    pub(super) fn is_break(&self, op: OpId) -> bool {
        self.breaks.contains_key(&op)
    }

    /// A break's read came back: remove the holder it names, or end with nothing broken.
    pub(super) fn on_break_read(&mut self, now: Instant, op: OpId, read: Result<Snapshot>) {
        let snapshot = match read {
            Ok(s) => s,
            Err(e) => {
                self.breaks.remove(&op);
                return self.complete(op, Done::Failed(e));
            }
        };
        let Some(pending) = self.breaks.get_mut(&op) else { return };
        let Some(holder) = break_lock::choose(&snapshot, pending.fencing_token) else {
            self.breaks.remove(&op);
            return self.complete(op, Done::Broken(None));
        };
        pending.removing = Some(Broken::of(holder));
        let target = Arc::clone(&pending.target);
        let action = Action::Break { target: &target, holder };
        self.backend.call(ctx!(self, now), Purpose::Break(op), action, &mut self.settled_now);
    }

    /// A break's removal came back.
    pub(super) fn on_break_removed(&mut self, op: OpId, release: Release) {
        let removing = self.breaks.remove(&op).and_then(|p| p.removing);
        let done = match release {
            Release::Done { was_held: true } => Done::Broken(removing),
            Release::Done { was_held: false } => Done::Broken(None),
            Release::Unconfirmed { error, .. } | Release::Failed(error) => Done::Failed(error),
        };
        self.complete(op, done);
    }
}
