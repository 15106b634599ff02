//! Renewals and extends: ZooKeeper keeps no lease on a node, so renewing one is checking,
//! through the leader, that the holder node still exists in this session. Each answered check
//! confirms the session, which is what the engine counts the lease from
//! ([`Backend::confirmation_span`](crate::engine::Backend::confirmation_span)).

use super::backend::ZooKeeperBackend;
use super::failure::renewal_failure;
use super::request::{ZkFailure, ZkOp, ZkReply, ZkRequest, ZkResult};
use super::step::{Job, Slot, Step};
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, Renewal, Verdict};
use crate::error::Error;

impl ZooKeeperBackend {
    /// Starts a renewal or extend: check the holder node, or refuse at once if it is gone.
    pub(super) fn check_start(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        match self.holder(&job) {
            Slot::Known { path, .. } if self.session_of(&job.token).is_some() => {
                self.send(ctx, job, Step::Check, ZkOp::Check { path, version: None });
            }
            _ => {
                let subject = "the lock node is gone (its ZooKeeper session ended)".to_string();
                self.settle(ctx, job, None, Verdict::Renewal(Renewal::Refused { subject }), answers);
            }
        }
    }

    /// Handles the reply to a renewal's or extend's check.
    pub(super) fn check_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        let gone = |subject: &str| Verdict::Renewal(Renewal::Refused { subject: subject.to_string() });
        if job.epoch != self.epoch_of(&job.token) {
            return self.settle(ctx, job, None, gone("the ZooKeeper session ended"), answers);
        }
        let verdict = match reply {
            Ok(ZkReply::Checked) => {
                self.confirm_of(&job.token, job.sent);
                Verdict::Renewal(Renewal::Confirmed)
            }
            Err(ZkFailure::NoNode | ZkFailure::BadVersion) => {
                *self.slots(&job.token).slot_mut(job.target.holds_by_lease()) = Slot::None;
                gone("the lock node was deleted")
            }
            Err(ZkFailure::SessionExpired) => {
                self.end_by_reply(&job.token, ctx.now, answers);
                gone("the ZooKeeper session expired")
            }
            Err(f @ (ZkFailure::ConnectionLoss(_) | ZkFailure::Other(_))) => Verdict::Renewal(renewal_failure(f)),
            other => Verdict::Renewal(Renewal::Failed(Error::protocol(format!("ZooKeeper answered a check with {other:?}")))),
        };
        self.settle(ctx, job, None, verdict, answers);
    }
}
