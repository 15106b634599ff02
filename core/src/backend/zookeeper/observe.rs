//! Observing an election: list the candidates and read the first one's data (its published
//! value) and `czxid` (its term), without joining or watching. An observe takes no owner token
//! and never waits behind another call.
//!
//! The listing follows a sync ([`Step::Sync`], a check through the ensemble's leader): a
//! follower serves reads from what it has applied, which may lag the leader, and an observer
//! reading a lagging follower would see no leader moments after a candidate was granted.

use std::sync::Arc;

use super::backend::ZooKeeperBackend;
use super::failure::failure_error;
use super::layout::{self, NodeKind};
use super::request::{ZkFailure, ZkOp, ZkReply, ZkRequest, ZkResult};
use super::step::{Job, Step};
use super::target::ZkTarget;
use crate::engine::job::{JobRunner, MAX_STEPS};
use crate::engine::{Answer, Ctx, LeaderInfo, Purpose, Verdict};
use crate::error::{Error, ErrorKind, Result};
use crate::time::Duration;

impl ZooKeeperBackend {
    /// Starts an observe of `target`: sync, then list its candidates.
    pub(super) fn observe_start(&mut self, ctx: &mut Ctx<'_, ZkRequest>, purpose: Purpose, target: &Arc<ZkTarget>) {
        let job = Job::read(purpose, target, self.epoch, Step::ObserveList, ctx.now);
        let path = target.path.clone();
        let list = ZkOp::Children { path: path.clone(), watch: false };
        self.send_synced(ctx, job, &path, Step::ObserveList, list);
    }

    /// Handles the reply to one step of an observe.
    pub(super) fn observe_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        let observed = |r: Result<Option<LeaderInfo>>| Verdict::Observed(r);
        match (job.step.clone(), reply) {
            // The sync answered in a session opened since it was sent: the server caught up
            // all the same (an observe holds nothing of the session's).
            (Step::Sync { next, op }, Ok(ZkReply::Checked) | Err(ZkFailure::NoNode | ZkFailure::BadVersion)) => {
                self.send(ctx, job, *next, op);
            }
            (Step::ObserveList, Ok(ZkReply::Children(mut kids))) => {
                layout::sort_children(&mut kids, layout::sort_names(NodeKind::Latch));
                match kids.first() {
                    None => self.settle(ctx, job, None, observed(Ok(None)), answers),
                    Some(first) if job.steps < MAX_STEPS => {
                        let path = layout::child_path(&job.target.path, first);
                        self.send(ctx, job, Step::ObserveData, ZkOp::GetData { path, watch: false });
                    }
                    Some(_) => {
                        let e = Error::new(ErrorKind::Connection, "the election's candidates kept changing");
                        self.settle(ctx, job, None, observed(Err(e)), answers);
                    }
                }
            }
            (Step::ObserveList, Err(ZkFailure::NoNode)) => self.settle(ctx, job, None, observed(Ok(None)), answers),
            (Step::ObserveData, Ok(ZkReply::Data(data, stat))) => {
                // ZooKeeper keeps no lease on the server: a leader leads until it resigns or
                // its session expires, so there is no remaining time to report.
                let info = LeaderInfo {
                    value: String::from_utf8_lossy(&data).into_owned(),
                    term: stat.czxid as u64,
                    remaining: Duration::ZERO,
                };
                self.settle(ctx, job, None, observed(Ok(Some(info))), answers);
            }
            // The leader went between the listing and the read: list again.
            (Step::ObserveData, Err(ZkFailure::NoNode)) => {
                let path = job.target.path.clone();
                self.send(ctx, job, Step::ObserveList, ZkOp::Children { path, watch: false });
            }
            (step, reply) => {
                let e = match reply {
                    Err(f) => failure_error(f),
                    Ok(other) => Error::protocol(format!("ZooKeeper answered {step:?} with {other:?}")),
                };
                self.settle(ctx, job, None, observed(Err(e)), answers);
            }
        }
    }
}
