//! How the backend runs an engine call: as a [`Job`] that sends one [`ZkOp`] at a time, each
//! tagged with the [`Step`] its reply answers, and ends in one verdict. Calls of one owner
//! token queue behind each other (a release never races the attempt before it); calls of
//! different tokens run side by side. Also what the backend knows of each token's nodes
//! ([`Owned`], [`Slot`]), which every step reads and updates.

use std::collections::VecDeque;
use std::sync::Arc;

use super::backend::ZooKeeperBackend;
use super::request::{ZkOp, ZkRequest};
use super::target::ZkTarget;
use crate::engine::{Answer, Attempt, Ctx, Purpose, Verdict};
use crate::time::{Duration, Instant};

/// How many steps one call may take before it gives up for now (each is progress: a
/// predecessor went, a lost create was found); a safety net, never reached in practice.
pub(super) const MAX_STEPS: u32 = 64;

/// What the backend knows of one node of a token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) enum Slot {
    /// None exists in this session (none created, or it was deleted).
    #[default]
    None,
    /// A create was sent whose reply was not seen: the node may exist (found by its prefix).
    Uncertain,
    /// It exists at `path`, created in transaction `czxid`.
    Known { path: String, czxid: i64 },
}

impl Slot {
    /// The node's path, if known.
    pub(super) fn path(&self) -> Option<&str> {
        match self {
            Slot::Known { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// The nodes of one owner token in the current session.
#[derive(Clone, Debug, Default)]
pub(super) struct Owned {
    /// The queue node (mutex, reader, writer, latch, or a semaphore's internal-mutex node).
    pub(super) node: Slot,
    /// A semaphore's lease node.
    pub(super) lease: Slot,
}

impl Owned {
    /// The lease slot if `lease`, else the queue node's.
    pub(super) fn slot_mut(&mut self, lease: bool) -> &mut Slot {
        if lease {
            &mut self.lease
        } else {
            &mut self.node
        }
    }
}

/// The step a call's request is on.
#[derive(Clone, Debug)]
pub(super) enum Step {
    /// A `Check` through the leader before `op`: its reply comes only once the server this
    /// client reads from has applied everything the leader ordered before it, so a listing
    /// that follows sees a create whose reply was lost (a follower's own view may lag).
    Sync { next: Box<Step>, op: ZkOp },
    /// Listing the queue directory for a node a lost create may have made.
    FindNode,
    /// Listing a semaphore's leases for a lease a lost create may have made.
    FindLease,
    /// Reading the stat of a node found by prefix: ours only if it belongs to this session.
    Adopt { lease: bool, path: String },
    /// Creating the queue node.
    CreateNode,
    /// Creating a semaphore's lease node.
    CreateLease,
    /// Listing the queue to learn our place.
    List,
    /// Reading the node to wait behind, setting a watch on it.
    Watch { watch: String },
    /// Counting a semaphore's leases (with a child watch while waiting).
    Count,
    /// Checking the holder node through the leader before a grant (the session's last
    /// confirmation is too old to count a lease from).
    Confirm,
    /// Deleting a semaphore's internal-mutex node once its lease holds (no answer).
    Unlock,
    /// A renewal or extend: checking the holder node through the leader.
    Check,
    /// A release: listing directories where a lost create may have left a node.
    Sweep { dirs: Vec<String>, deletes: Vec<(String, bool)> },
    /// A release: deleting each node (and whether it is the holder node).
    Delete { rest: Vec<(String, bool)>, was_held: bool },
    /// An observe: listing the candidates.
    ObserveList,
    /// An observe: reading the leader's node.
    ObserveData,
}

/// One engine call in progress (or a background step with no purpose).
#[derive(Clone, Debug)]
pub(super) struct Job {
    pub(super) purpose: Option<Purpose>,
    pub(super) target: Arc<ZkTarget>,
    pub(super) token: Arc<str>,
    /// The session epoch the call runs in ([`ZooKeeperBackend`]'s `epoch`).
    pub(super) epoch: u64,
    pub(super) lease: Duration,
    pub(super) once: bool,
    pub(super) steps: u32,
    pub(super) step: Step,
    /// When the current request was sent.
    pub(super) sent: Instant,
}

impl ZooKeeperBackend {
    /// Starts `job` now, or after the call of its token in progress.
    pub(super) fn submit(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        if let Some(queue) = self.busy.get_mut(&job.token) {
            queue.push_back(job);
            return;
        }
        self.busy.insert(Arc::clone(&job.token), VecDeque::new());
        self.start(ctx, job, answers);
    }

    /// The call of `token` in progress ended: starts the next one.
    fn finished(&mut self, ctx: &mut Ctx<'_, ZkRequest>, token: &Arc<str>, answers: &mut Vec<Answer>) {
        let next = self.busy.get_mut(token).and_then(VecDeque::pop_front);
        match next {
            Some(job) => self.start(ctx, job, answers),
            None => {
                self.busy.remove(token);
            }
        }
    }

    /// Takes the first step of `job`, in the session as it is now.
    fn start(&mut self, ctx: &mut Ctx<'_, ZkRequest>, mut job: Job, answers: &mut Vec<Answer>) {
        job.epoch = self.epoch;
        match job.purpose {
            Some(Purpose::Acquire(_)) => self.acquire_next(ctx, job, answers),
            Some(Purpose::Renew(..) | Purpose::Extend(..)) => self.check_start(ctx, job, answers),
            Some(Purpose::Release(..) | Purpose::Cleanup(_)) => self.release_start(ctx, job, answers),
            Some(Purpose::Observe(_)) | None => unreachable!("observes and background steps are sent directly"),
        }
    }

    /// Sends `op` as `job`'s next `step`.
    pub(super) fn send(&mut self, ctx: &mut Ctx<'_, ZkRequest>, mut job: Job, step: Step, op: ZkOp) {
        let id = ctx.ids.request();
        job.step = step;
        job.sent = ctx.now;
        job.steps += 1;
        self.in_flight.insert(id, job);
        ctx.out.push_back(ZkRequest { id, op });
    }

    /// Sends `op` for `step` after a [`Step::Sync`] on `path`.
    pub(super) fn send_synced(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, path: &str, step: Step, op: ZkOp) {
        let sync = Step::Sync { next: Box::new(step), op };
        self.send(ctx, job, sync, ZkOp::Check { path: path.to_string(), version: None });
    }

    /// Ends `job` with `verdict` (dated `sent`, or the job's last send), then starts the next
    /// call of its token.
    pub(super) fn settle(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, sent: Option<Instant>, verdict: Verdict, answers: &mut Vec<Answer>) {
        let Some(purpose) = job.purpose else {
            return;
        };
        answers.push(Answer { purpose, sent: sent.unwrap_or(job.sent), verdict });
        if !matches!(purpose, Purpose::Observe(_)) {
            self.finished(ctx, &job.token, answers);
        }
    }

    /// Ends an acquire with `attempt`.
    pub(super) fn settle_attempt(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, attempt: Attempt, answers: &mut Vec<Answer>) {
        self.settle(ctx, job, None, Verdict::Attempt(attempt), answers);
    }

    /// The nodes of `token`, made empty if none are known.
    pub(super) fn slots(&mut self, token: &Arc<str>) -> &mut Owned {
        self.owned.entry(Arc::clone(token)).or_default()
    }

    /// The holder node of `job`'s token: its lease for a semaphore, else its queue node.
    pub(super) fn holder(&self, job: &Job) -> Slot {
        let owned = self.owned.get(&job.token).cloned().unwrap_or_default();
        if job.target.holds_by_lease() {
            owned.lease
        } else {
            owned.node
        }
    }
}
