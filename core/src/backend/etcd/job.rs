//! How the backend runs an engine call: as a [`Job`] that sends one [`EtcdOp`] at a time, each
//! tagged with the [`Step`] its reply answers, and ends in one verdict. Calls of one owner token
//! queue behind each other (a release never races the attempt before it); calls of different
//! tokens run side by side. Also what the backend knows of each token's key ([`Slot`]).

use std::collections::VecDeque;
use std::sync::Arc;

use super::backend::EtcdBackend;
use super::request::{EtcdOp, EtcdRequest, LeaseId, WatchId};
use super::target::EtcdTarget;
use crate::engine::{Answer, Attempt, Ctx, Purpose, Verdict};
use crate::time::{Duration, Instant};

/// How many steps one call may take before it gives up for now (each is progress: a
/// predecessor went, a lease was granted); a safety net, never reached in practice.
pub(super) const MAX_STEPS: u32 = 64;

/// What the backend knows of a token's key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) enum Slot {
    /// None exists (none written, or it was deleted).
    #[default]
    None,
    /// A create was sent whose reply was not seen: the key may exist (its name is known).
    Uncertain { key: String, lease: LeaseId },
    /// It exists, created at revision `rev` on `lease`.
    Known { key: String, lease: LeaseId, rev: i64 },
}

impl Slot {
    /// The key's name, if one was written or may have been.
    pub(super) fn key(&self) -> Option<&str> {
        match self {
            Slot::None => None,
            Slot::Uncertain { key, .. } | Slot::Known { key, .. } => Some(key),
        }
    }

    /// The lease the key is (or would be) attached to.
    pub(super) fn lease(&self) -> Option<LeaseId> {
        match self {
            Slot::None => None,
            Slot::Uncertain { lease, .. } | Slot::Known { lease, .. } => Some(*lease),
        }
    }
}

/// The step a call's request is on.
#[derive(Clone, Debug)]
pub(super) enum Step {
    /// Not started.
    Start,
    /// Granting a lease of its own for the token's key (every session lease has a key in
    /// this family already).
    Grant,
    /// The create transaction: put the key if absent (else read it), and read the holder(s).
    Create,
    /// The check transaction: the key still has its create revision, and the holder(s).
    Check,
    /// Reading the key to wait behind.
    Predecessor,
    /// Creating the watch on it.
    Watch { watch: WatchId },
    /// A keepalive before a grant (the lease's last confirmation is too old to count from).
    Confirm,
    /// A renewal or extend: the keepalive.
    KeepAlive,
    /// A renewal or extend: reading the key (still ours, on our lease).
    CheckKey,
    /// A release: reading a key whose create reply was lost.
    Find,
    /// A release: deleting the key if it still has its create revision.
    Delete,
    /// An observe: reading the first key.
    Observe,
}

/// One engine call in progress.
#[derive(Clone, Debug)]
pub(super) struct Job {
    pub(super) purpose: Option<Purpose>,
    pub(super) target: Arc<EtcdTarget>,
    pub(super) token: Arc<str>,
    /// The session epoch the call runs in.
    pub(super) epoch: u64,
    pub(super) lease: Duration,
    pub(super) once: bool,
    pub(super) steps: u32,
    pub(super) step: Step,
    /// When the current request was sent.
    pub(super) sent: Instant,
    /// A renewal's acknowledged keepalive's send time (what the renewal is counted from).
    pub(super) confirmed: Option<Instant>,
}

impl EtcdBackend {
    /// Starts `job` now, or after the call of its token in progress.
    pub(super) fn submit(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, answers: &mut Vec<Answer>) {
        if let Some(queue) = self.busy.get_mut(&job.token) {
            queue.push_back(job);
            return;
        }
        self.busy.insert(Arc::clone(&job.token), VecDeque::new());
        self.start(ctx, job, answers);
    }

    /// The call of `token` in progress ended: starts the next one.
    fn finished(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, token: &Arc<str>, answers: &mut Vec<Answer>) {
        let next = self.busy.get_mut(token).and_then(VecDeque::pop_front);
        match next {
            Some(job) => self.start(ctx, job, answers),
            None => {
                self.busy.remove(token);
            }
        }
    }

    /// Takes the first step of `job`, in the session as it is now.
    fn start(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, mut job: Job, answers: &mut Vec<Answer>) {
        job.epoch = self.epoch;
        match job.purpose {
            Some(Purpose::Acquire(_)) => {
                // A new attempt sets its own watch: the one of the last attempt has done its part.
                let token = Arc::clone(&job.token);
                self.unwatch(ctx, &token);
                self.acquire_next(ctx, job, answers)
            }
            Some(Purpose::Renew(..) | Purpose::Extend(..)) => self.confirm_start(ctx, job, answers),
            Some(Purpose::Release(..) | Purpose::Cleanup(_)) => self.release_start(ctx, job, answers),
            Some(Purpose::Observe(_)) | None => unreachable!("observes are sent directly"),
        }
    }

    /// Sends `op` as `job`'s next `step`.
    pub(super) fn send(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, mut job: Job, step: Step, op: EtcdOp) {
        let id = ctx.ids.request();
        job.step = step;
        job.sent = ctx.now;
        job.steps += 1;
        self.in_flight.insert(id, job);
        ctx.out.push_back(EtcdRequest { id, op });
    }

    /// Ends `job` with `verdict` (dated `sent`, or the job's last send), then starts the next
    /// call of its token.
    pub(super) fn settle(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, sent: Option<Instant>, verdict: Verdict, answers: &mut Vec<Answer>) {
        let Some(purpose) = job.purpose else {
            return;
        };
        answers.push(Answer { purpose, sent: sent.unwrap_or(job.sent), verdict });
        self.retire_idle(ctx);
        if !matches!(purpose, Purpose::Observe(_)) {
            self.finished(ctx, &job.token, answers);
        }
    }

    /// Ends an acquire with `attempt`.
    pub(super) fn settle_attempt(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, attempt: Attempt, answers: &mut Vec<Answer>) {
        self.settle(ctx, job, None, Verdict::Attempt(attempt), answers);
    }

    /// The token's key, as known.
    pub(super) fn slot(&self, token: &str) -> Slot {
        self.owned.get(token).cloned().unwrap_or_default()
    }

    /// Forgets the token's key and frees its (family, lease) for another token.
    pub(super) fn forget(&mut self, job: &Job) {
        if let Some(slot) = self.owned.remove(&job.token) {
            if let Some(lease) = slot.lease() {
                let k = (job.target.family_prefix(), lease);
                if self.used.get(&k).is_some_and(|t| *t == job.token) {
                    self.used.remove(&k);
                    self.freed.push(lease);
                }
            }
        }
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
            self.send_background(ctx, super::session::Background::Ignore, EtcdOp::LeaseRevoke { lease });
        }
    }
}
