//! Acquiring: Curator's recipes as steps. Each attempt finds again a node a lost create may
//! have made, creates the queue node (and, for a semaphore, a lease under its internal mutex),
//! lists the queue to learn its place, and either waits behind the one node that can change it
//! (with a watch) or is granted — after checking through the leader if the session's last
//! confirmation is too old to count the lease from.

use std::sync::Arc;

use super::backend::ZooKeeperBackend;
use super::config::safe_validity;
use super::failure::{attempt_failure, attempt_transient};
use super::layout::{self, NodeKind};
use super::recipe::{self, Place};
use super::request::{CreateMode, ZkFailure, ZkOp, ZkReply, ZkRequest, ZkResult};
use super::step::{Ahead, Job, Slot, Step};
use crate::engine::job::{JobRunner, MAX_STEPS};
use crate::engine::{Answer, Attempt, Ctx, Purpose, Verdict};
use crate::error::{Error, ErrorKind};

impl ZooKeeperBackend {
    /// The next step of an acquire, from what is known of its token's nodes.
    pub(super) fn acquire_next(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        if self.session.is_none() {
            let e = Error::new(ErrorKind::Connection, "the ZooKeeper session ended; waiting for a new one");
            return self.settle_attempt(ctx, job, attempt_transient(e), answers);
        }
        // A lease shorter than the client's session gets its nodes in a session of its own.
        self.place(&job.token, job.lease);
        if let Some(k) = self.key_of(&job.token) {
            if self.extras.get(&k).and_then(|e| e.session).is_none() {
                return self.send(ctx, job, Step::Open, ZkOp::OpenSession);
            }
        }
        let mut job = job;
        if self.owned.get(&job.token).is_none_or(|o| o.node == Slot::None && o.lease == Slot::None) {
            // Nothing of an older session to confuse: run in the session's current epoch.
            job.epoch = self.epoch_of(&job.token);
        }
        if job.epoch != self.epoch_of(&job.token) {
            let e = Error::new(ErrorKind::Connection, "the ZooKeeper session ended; waiting for a new one");
            return self.settle_attempt(ctx, job, attempt_transient(e), answers);
        }
        if job.steps >= MAX_STEPS {
            let e = Error::new(ErrorKind::Connection, "the lock's queue kept changing; trying again");
            return self.settle_attempt(ctx, job, attempt_transient(e), answers);
        }
        let target = Arc::clone(&job.target);
        let owned = self.owned.entry(Arc::clone(&job.token)).or_default().clone();
        if let Some(leases) = target.leases_dir() {
            match owned.lease {
                Slot::Known { .. } => return self.send_count(ctx, job),
                Slot::Uncertain => {
                    let list = ZkOp::Children { path: leases.clone(), watch: false };
                    return self.send_synced(ctx, job, &leases, Step::FindLease, list);
                }
                Slot::None => {}
            }
        }
        let dir = target.queue_dir();
        match owned.node {
            Slot::Known { .. } => self.send(ctx, job, Step::List, ZkOp::Children { path: dir, watch: false }),
            Slot::Uncertain => {
                let list = ZkOp::Children { path: dir.clone(), watch: false };
                self.send_synced(ctx, job, &dir, Step::FindNode, list);
            }
            Slot::None => {
                let path = layout::create_path(&dir, &job.token, target.kind().lock_name());
                self.slots(&job.token).node = Slot::Uncertain;
                let op = ZkOp::Create { path, data: target.data(&self.config.label), mode: CreateMode::EphemeralSequential };
                self.create_and_list(ctx, job, op, dir);
            }
        }
    }

    /// Counts a semaphore's leases, watching them if the attempt waits.
    fn send_count(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job) {
        let leases = job.target.leases_dir().expect("only semaphores count leases");
        if !job.once {
            self.watch(&leases, &job.token);
        }
        let watch = !job.once;
        self.send(ctx, job, Step::Count, ZkOp::Children { path: leases, watch });
    }

    /// Notes that a watch on `path` wakes `token`.
    fn watch(&mut self, path: &str, token: &Arc<str>) {
        let tokens = self.watchers.entry(path.to_string()).or_default();
        if !tokens.iter().any(|t| t == token) {
            tokens.push(Arc::clone(token));
        }
    }

    /// Forgets every watch that would wake `token`.
    pub(super) fn unwatch(&mut self, token: &str) {
        self.watchers.retain(|_, tokens| {
            tokens.retain(|t| &**t != token);
            !tokens.is_empty()
        });
    }

    /// The token holds: grant, after checking the holder node through the leader if the
    /// session's last confirmation is too old to count the lease from.
    fn grant_or_confirm(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        let Slot::Known { path, .. } = self.holder(&job) else {
            return self.settle_attempt(ctx, job, node_vanished(), answers);
        };
        let span = job.lease.min(safe_validity(self.timeout_of(&job.token)));
        let fresh = self.confirmed_of(&job.token).is_some_and(|c| ctx.now.saturating_duration_since(c) <= span / 3);
        if fresh {
            self.grant(ctx, job, answers);
        } else {
            self.send(ctx, job, Step::Confirm, ZkOp::Check { path, version: None });
        }
    }

    /// Grants the attempt (and gives a semaphore's internal mutex back).
    fn grant(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        let (Slot::Known { czxid, .. }, Some(confirmed)) = (self.holder(&job), self.confirmed_of(&job.token)) else {
            return self.settle_attempt(ctx, job, node_vanished(), answers);
        };
        self.unwatch(&job.token);
        if let Some(Purpose::Acquire(op)) = job.purpose {
            self.held.insert(Arc::clone(&job.token), op);
        }
        if job.target.holds_by_lease() {
            // InterProcessSemaphoreV2 gives its internal mutex back once the lease holds.
            if let Some(path) = self.owned.get(&job.token).and_then(|o| o.node.path()).map(str::to_string) {
                let unlock = Job { purpose: None, steps: 0, ..job.clone() };
                self.send(ctx, unlock, Step::Unlock, ZkOp::Delete { path, version: None });
            }
        }
        // The lease is counted from the last instant the leader vouched for the session: the
        // node lives at least as long as the session, which lives a session timeout past it.
        let verdict = Verdict::Attempt(Attempt::Granted { fence: Some(czxid as u64), granted: job.lease });
        self.settle(ctx, job, Some(confirmed), verdict, answers);
    }

    /// Handles the reply to one step of an acquire.
    pub(super) fn acquire_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, mut job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        if let Step::Open = job.step {
            return match reply {
                Ok(ZkReply::Session { id, timeout }) if !timeout.is_zero() => {
                    if let Some(k) = self.key_of(&job.token) {
                        job.epoch = self.extra_opened(k, id, timeout, ctx.now, answers);
                    }
                    self.acquire_next(ctx, job, answers)
                }
                Ok(other) => {
                    let e = Error::protocol(format!("ZooKeeper answered the session request with {other:?}"));
                    self.settle_attempt(ctx, job, Attempt::Failed { error: e, undo: true }, answers)
                }
                Err(f) => self.settle_attempt(ctx, job, attempt_failure(f), answers),
            };
        }
        if let Step::CreateNode { listed } = job.step {
            // The listing behind the create is of use only once the create made our node.
            if job.epoch != self.epoch_of(&job.token) || !matches!(reply, Ok(ZkReply::Created { .. })) {
                self.unwanted(listed);
            }
        }
        if job.epoch != self.epoch_of(&job.token) {
            return self.acquire_next(ctx, job, answers);
        }
        let target = Arc::clone(&job.target);
        let token = Arc::clone(&job.token);
        match (job.step.clone(), reply) {
            (step @ (Step::FindNode | Step::FindLease), Ok(ZkReply::Children(kids))) => {
                let lease = matches!(step, Step::FindLease);
                let kind = if lease { NodeKind::Lease } else { target.kind() };
                match layout::find_owned(&kids, &token, kind) {
                    Some(name) => {
                        let dir = if lease { target.leases_dir().unwrap_or_default() } else { target.queue_dir() };
                        let path = layout::child_path(&dir, name);
                        self.send(ctx, job, Step::Adopt { lease, path: path.clone() }, ZkOp::Exists { path, watch: false });
                    }
                    None => {
                        *self.slots(&token).slot_mut(lease) = Slot::None;
                        self.acquire_next(ctx, job, answers);
                    }
                }
            }
            (step @ (Step::FindNode | Step::FindLease), Err(ZkFailure::NoNode)) => {
                *self.slots(&token).slot_mut(matches!(step, Step::FindLease)) = Slot::None;
                self.acquire_next(ctx, job, answers);
            }
            (Step::Adopt { lease, path }, Ok(ZkReply::Exists(stat))) => {
                let session = self.session_of(&token).map(|s| s.id);
                // A node of an earlier session of ours dies with it: not ours to hold.
                let slot = match stat {
                    Some(stat) if Some(stat.ephemeral_owner) == session => Slot::Known { path, czxid: stat.czxid },
                    _ => Slot::None,
                };
                *self.slots(&token).slot_mut(lease) = slot;
                self.acquire_next(ctx, job, answers);
            }
            (step @ (Step::CreateNode { .. } | Step::CreateLease), Ok(ZkReply::Created { path, stat })) => {
                self.confirm_of(&token, job.sent);
                *self.slots(&token).slot_mut(matches!(step, Step::CreateLease)) = Slot::Known { path, czxid: stat.czxid };
                if let Step::CreateNode { listed } = step {
                    // Go on with the listing sent behind the create: its reply now, or once it comes.
                    job.step = Step::ListedAhead;
                    job.steps += 1;
                    match self.ahead.remove(&listed) {
                        Some(Ahead::Answered(listing)) => return self.acquire_reply(ctx, job, listing, answers),
                        Some(Ahead::Pending) => return self.jobs.awaiting(listed, job),
                        Some(Ahead::Unwanted) | None => {}
                    }
                }
                self.acquire_next(ctx, job, answers);
            }
            // A parent container was reaped between its creation and ours: create again.
            (step @ (Step::CreateNode { .. } | Step::CreateLease), Err(ZkFailure::NoNode | ZkFailure::NodeExists)) => {
                self.confirm_of(&token, job.sent);
                *self.slots(&token).slot_mut(matches!(step, Step::CreateLease)) = Slot::None;
                self.acquire_next(ctx, job, answers);
            }
            (step @ (Step::List | Step::ListedAhead), Ok(ZkReply::Children(kids))) => {
                let ours = self.owned.get(&token).and_then(|o| o.node.path()).map(|p| layout::node_name(p).to_string());
                let place = match ours {
                    Some(ours) => recipe::place(target.kind(), kids, &ours),
                    None => Place::Missing,
                };
                match place {
                    // Not seen by the listing sent behind the create: list again to be sure.
                    Place::Missing if matches!(step, Step::ListedAhead) => self.acquire_next(ctx, job, answers),
                    Place::Missing => self.vanished(ctx, job, false, answers),
                    Place::Holds => match target.leases_dir() {
                        // The semaphore's internal mutex is ours: take a lease under it.
                        Some(leases) => {
                            let path = layout::create_path(&leases, &token, layout::LEASE_NAME);
                            self.slots(&token).lease = Slot::Uncertain;
                            let op = ZkOp::Create { path, data: target.data(&self.config.label), mode: CreateMode::EphemeralSequential };
                            self.send(ctx, job, Step::CreateLease, op);
                        }
                        None => self.grant_or_confirm(ctx, job, answers),
                    },
                    Place::Waits { .. } if job.once => {
                        let why = "another owner holds it".to_string();
                        self.settle_attempt(ctx, job, Attempt::Refused { why }, answers);
                    }
                    Place::Waits { watch } => {
                        let path = layout::child_path(&target.queue_dir(), &watch);
                        self.watch(&path, &token);
                        self.send(ctx, job, Step::Watch { watch: path.clone() }, ZkOp::GetData { path, watch: true });
                    }
                }
            }
            (Step::List, Err(ZkFailure::NoNode)) => self.vanished(ctx, job, false, answers),
            (Step::ListedAhead, Err(ZkFailure::NoNode)) => self.acquire_next(ctx, job, answers),
            (Step::Watch { .. }, Ok(ZkReply::Data(..))) => {
                let verdict = Attempt::Queued { holder_remaining: None, fence: 0 };
                self.settle_attempt(ctx, job, verdict, answers);
            }
            // The predecessor went before the watch was set: look again.
            (Step::Watch { watch }, Err(ZkFailure::NoNode)) => {
                if let Some(tokens) = self.watchers.get_mut(&watch) {
                    tokens.retain(|t| *t != token);
                    if tokens.is_empty() {
                        self.watchers.remove(&watch);
                    }
                }
                self.acquire_next(ctx, job, answers);
            }
            (Step::Count, Ok(ZkReply::Children(kids))) => {
                let ours = self.owned.get(&token).and_then(|o| o.lease.path()).map(|p| layout::node_name(p).to_string());
                let permits = target.permits().unwrap_or(1);
                match ours.and_then(|ours| recipe::lease_holds(&kids, &ours, permits)) {
                    None => self.vanished(ctx, job, true, answers),
                    Some(true) => self.grant_or_confirm(ctx, job, answers),
                    Some(false) if job.once => {
                        let why = format!("all {permits} permits are taken");
                        self.settle_attempt(ctx, job, Attempt::Refused { why }, answers);
                    }
                    Some(false) => {
                        let verdict = Attempt::Queued { holder_remaining: None, fence: 0 };
                        self.settle_attempt(ctx, job, verdict, answers);
                    }
                }
            }
            (Step::Count, Err(ZkFailure::NoNode)) => self.vanished(ctx, job, true, answers),
            (Step::Confirm, Ok(ZkReply::Checked)) => {
                self.confirm_of(&token, job.sent);
                self.grant(ctx, job, answers);
            }
            (Step::Confirm, Err(ZkFailure::NoNode | ZkFailure::BadVersion)) => {
                let lease = target.holds_by_lease();
                self.vanished(ctx, job, lease, answers)
            }
            (_, Err(f)) => {
                if matches!(f, ZkFailure::SessionExpired) {
                    self.end_by_reply(&token, ctx.now, answers);
                }
                let attempt = attempt_failure(f);
                self.settle_attempt(ctx, job, attempt, answers);
            }
            (step, Ok(other)) => {
                let e = Error::protocol(format!("ZooKeeper answered {step:?} with {other:?}"));
                self.settle_attempt(ctx, job, Attempt::Failed { error: e, undo: true }, answers);
            }
        }
    }

    /// Our node (or lease) is gone while the session lives (deleted by someone, or the
    /// session is expiring): forget it and try again with a new one.
    fn vanished(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, lease: bool, answers: &mut Vec<Answer>) {
        *self.slots(&job.token).slot_mut(lease) = Slot::None;
        self.settle_attempt(ctx, job, node_vanished(), answers);
    }


    /// Handles the reply to deleting a semaphore's internal-mutex node once its lease holds
    /// (the only step without a purpose: nobody waits for it).
    pub(super) fn unlock_reply(&mut self, now: crate::time::Instant, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        if job.epoch != self.epoch_of(&job.token) {
            return;
        }
        match &reply {
            Ok(ZkReply::Deleted) | Err(ZkFailure::NoNode) => {
                if let Some(owned) = self.owned.get_mut(&job.token) {
                    owned.node = Slot::None;
                }
            }
            Err(ZkFailure::SessionExpired) => self.end_by_reply(&job.token, now, answers),
            // Not confirmed: the release deletes it with the lease.
            _ => {}
        }
    }
}

/// The attempt's node went while the session lives: a retry queues a new one.
fn node_vanished() -> Attempt {
    attempt_transient(Error::new(ErrorKind::Connection, "the lock node vanished; trying again"))
}
