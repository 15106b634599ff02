//! Releasing: delete every node the token has in this session — the holder node and, for a
//! semaphore, its internal-mutex node — after finding, once the server has caught up, any node
//! a create whose reply was lost may have left. A release in a session that ended has nothing
//! left to delete: ephemeral nodes went with it.

use super::backend::ZooKeeperBackend;
use super::failure::release_failure;
use super::layout;
use super::request::{ZkFailure, ZkOp, ZkReply, ZkRequest, ZkResult};
use super::step::{Job, Owned, Slot, Step};
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, Release, Verdict};
use crate::error::Error;

impl ZooKeeperBackend {
    /// Starts a release: delete the token's known nodes, after finding any a lost create left.
    pub(super) fn release_start(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        let owned = match self.session_of(&job.token) {
            Some(_) => self.owned.get(&job.token).cloned().unwrap_or_default(),
            // Without a session every ephemeral node of ours is gone already.
            None => Owned::default(),
        };
        let semaphore = job.target.holds_by_lease();
        let mut dirs = Vec::new();
        if owned.node == Slot::Uncertain {
            dirs.push(job.target.queue_dir());
        }
        if owned.lease == Slot::Uncertain {
            dirs.extend(job.target.leases_dir());
        }
        let mut deletes = Vec::new();
        if let Some(p) = owned.lease.path() {
            deletes.push((p.to_string(), true));
        }
        if let Some(p) = owned.node.path() {
            deletes.push((p.to_string(), !semaphore));
        }
        if let Some(dir) = dirs.first().cloned() {
            // A create whose fate is unknown: find its node once this server has caught up.
            let op = ZkOp::Children { path: dir.clone(), watch: false };
            return self.send_synced(ctx, job, &dir, Step::Sweep { dirs, deletes }, op);
        }
        self.release_next(ctx, job, dirs, deletes, false, answers);
    }

    /// The next step of a release: sweep a directory, delete a node, or finish.
    fn release_next(
        &mut self,
        ctx: &mut Ctx<'_, ZkRequest>,
        job: Job,
        dirs: Vec<String>,
        deletes: Vec<(String, bool)>,
        was_held: bool,
        answers: &mut Vec<Answer>,
    ) {
        if let Some(dir) = dirs.first() {
            let op = ZkOp::Children { path: dir.clone(), watch: false };
            return self.send(ctx, job, Step::Sweep { dirs, deletes }, op);
        }
        if !deletes.is_empty() {
            let path = deletes[0].0.clone();
            return self.send(ctx, job, Step::Delete { rest: deletes, was_held }, ZkOp::Delete { path, version: None });
        }
        // Every node of the token is gone: forget it (and its extra session, if it was the last).
        self.owned.remove(&job.token);
        self.unwatch(&job.token);
        self.unplace(&job.token);
        self.settle(ctx, job, None, Verdict::Release(Release::Done { was_held }), answers);
    }

    /// Handles the reply to one step of a release.
    pub(super) fn release_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        if job.epoch != self.epoch_of(&job.token) {
            // The session ended meanwhile: its nodes went with it.
            self.unplace(&job.token);
            return self.settle(ctx, job, None, Verdict::Release(Release::Done { was_held: false }), answers);
        }
        match (job.step.clone(), reply) {
            (Step::Sweep { mut dirs, mut deletes }, Ok(ZkReply::Children(kids))) => {
                let dir = dirs.remove(0);
                let holds = job.target.leases_dir().is_none_or(|l| l == dir);
                let mut found = None;
                for name in layout::owned_by(&kids, &job.token) {
                    let path = layout::child_path(&dir, name);
                    found.get_or_insert_with(|| path.clone());
                    if !deletes.iter().any(|(p, _)| *p == path) {
                        deletes.push((path, holds));
                    }
                }
                // What the lost create made is known now: a retry of this release deletes it
                // by path even if this delete's reply is lost too.
                self.resolve_uncertain(&job, &dir, found);
                self.release_next(ctx, job, dirs, deletes, false, answers);
            }
            (Step::Sweep { mut dirs, deletes }, Err(ZkFailure::NoNode)) => {
                let dir = dirs.remove(0);
                self.resolve_uncertain(&job, &dir, None);
                self.release_next(ctx, job, dirs, deletes, false, answers);
            }
            (Step::Delete { mut rest, was_held }, reply @ (Ok(ZkReply::Deleted) | Err(ZkFailure::NoNode))) => {
                let (path, holds) = rest.remove(0);
                if let Some(owned) = self.owned.get_mut(&job.token) {
                    for slot in [&mut owned.node, &mut owned.lease] {
                        if slot.path() == Some(path.as_str()) {
                            *slot = Slot::None;
                        }
                    }
                }
                let was_held = was_held || (holds && reply.is_ok());
                self.release_next(ctx, job, Vec::new(), rest, was_held, answers);
            }
            (_, Err(ZkFailure::SessionExpired)) => {
                self.end_by_reply(&job.token, ctx.now, answers);
                self.unplace(&job.token);
                self.settle(ctx, job, None, Verdict::Release(Release::Done { was_held: false }), answers);
            }
            (_, Err(f @ (ZkFailure::ConnectionLoss(_) | ZkFailure::Other(_)))) => {
                self.settle(ctx, job, None, Verdict::Release(release_failure(f)), answers);
            }
            (step, other) => {
                let e = Error::protocol(format!("ZooKeeper answered {step:?} with {other:?}"));
                self.settle(ctx, job, None, Verdict::Release(Release::Failed(e)), answers);
            }
        }
    }

    /// A sweep of `dir` found what a lost create there left (`found`, or nothing): the slot is
    /// no longer unknown.
    fn resolve_uncertain(&mut self, job: &Job, dir: &str, found: Option<String>) {
        let lease = job.target.leases_dir().is_some_and(|l| l == dir);
        if let Some(owned) = self.owned.get_mut(&job.token) {
            let slot = owned.slot_mut(lease);
            if *slot == Slot::Uncertain {
                // Its czxid is not needed to delete it (it holds nothing any more).
                *slot = found.map_or(Slot::None, |path| Slot::Known { path, czxid: 0 });
            }
        }
    }

}
