//! Breaking a lock (PROTOCOL.md §15): the holder's key, read by the break's inspect, deleted in
//! a transaction only if it still has the create revision read (its fencing token), so a break
//! whose holder left meanwhile deletes nothing, even if a newer key got the same name. The key
//! is named by itself, not by a lockgate token: an `etcdctl lock` holder's key breaks the same
//! way. The waiter behind it is watching for exactly this deletion; the broken holder's next
//! renewal reads its key gone and reports the loss.

use std::sync::Arc;

use super::backend::EtcdBackend;
use super::failure::failure_error;
use super::request::{Compare, EtcdOp, EtcdReply, EtcdRequest, EtcdResult, Txn, TxnOp};
use super::step::{Job, Step};
use super::target::EtcdTarget;
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, Purpose, Release, Verdict};
use crate::error::Error;
use crate::inspect::Holder;

impl EtcdBackend {
    /// Starts a break of `holder`: one guarded delete of its key.
    pub(super) fn break_start(
        &mut self,
        ctx: &mut Ctx<'_, EtcdRequest>,
        purpose: Purpose,
        target: &Arc<EtcdTarget>,
        holder: &Holder,
        answers: &mut Vec<Answer>,
    ) {
        let (Some(key), Some(rev)) = (holder.entry.clone(), holder.fencing_token.and_then(|t| i64::try_from(t).ok())) else {
            // An inspect always names the key and its revision; answered, never a panic.
            let e = Error::protocol("a break's holder has no etcd key");
            return answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Release(Release::Failed(e)) });
        };
        let job = Job::read(purpose, target, self.epoch, Step::Break, ctx.now);
        let delete = TxnOp::Delete { key: key.clone().into_bytes(), prefix: false };
        let txn = Txn { compares: vec![Compare::created_at(key, rev)], success: vec![delete], failure: vec![] };
        self.send(ctx, job, Step::Break, EtcdOp::Txn(txn));
    }

    /// Handles the reply to a break's delete: `succeeded` is whether the key was still there.
    pub(super) fn break_reply(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, reply: EtcdResult, answers: &mut Vec<Answer>) {
        let release = match reply {
            Ok(EtcdReply::Txn { succeeded, .. }) => Release::Done { was_held: succeeded },
            Ok(other) => Release::Failed(Error::protocol(format!("etcd answered a break's delete with {other:?}"))),
            Err(f) => Release::Failed(failure_error(f)),
        };
        self.settle(ctx, job, None, Verdict::Release(release), answers);
    }
}
