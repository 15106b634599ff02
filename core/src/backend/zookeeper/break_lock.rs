//! Breaking a lock (PROTOCOL.md §15): the holder's node, read by the break's inspect, deleted
//! by its path. Sequential node names are never reused under a parent, so the path names that
//! one grant: a break whose holder left meanwhile finds no node and deletes nothing. The node
//! is named by itself, not by a lockgate token: a Curator holder's node breaks the same way.
//! The waiter behind it is watching for exactly this deletion; the broken holder's next
//! renewal (a check of its node) finds it gone and reports the loss.

use std::sync::Arc;

use super::backend::ZooKeeperBackend;
use super::failure::failure_error;
use super::request::{ZkFailure, ZkOp, ZkReply, ZkRequest, ZkResult};
use super::step::{Job, Step};
use super::target::ZkTarget;
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, Purpose, Release, Verdict};
use crate::error::Error;
use crate::inspect::Holder;

impl ZooKeeperBackend {
    /// Starts a break of `holder`: one delete of its node.
    pub(super) fn break_start(
        &mut self,
        ctx: &mut Ctx<'_, ZkRequest>,
        purpose: Purpose,
        target: &Arc<ZkTarget>,
        holder: &Holder,
        answers: &mut Vec<Answer>,
    ) {
        let Some(path) = holder.entry.clone() else {
            // An inspect always names the node; answered, never a panic.
            let e = Error::protocol("a break's holder has no ZooKeeper node");
            return answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Release(Release::Failed(e)) });
        };
        let job = Job::read(purpose, target, self.epoch, Step::Break, ctx.now);
        self.send(ctx, job, Step::Break, ZkOp::Delete { path, version: None });
    }

    /// Handles the reply to a break's delete.
    pub(super) fn break_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        let release = match reply {
            Ok(ZkReply::Deleted) => Release::Done { was_held: true },
            Err(ZkFailure::NoNode) => Release::Done { was_held: false },
            Ok(other) => Release::Failed(Error::protocol(format!("ZooKeeper answered a break's delete with {other:?}"))),
            Err(f) => Release::Failed(failure_error(f)),
        };
        self.settle(ctx, job, None, Verdict::Release(release), answers);
    }
}
