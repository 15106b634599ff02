//! Releasing: delete the token's key only if it still has the create revision it was created
//! with (a transaction), so a retried release can never delete a newer holding of the same key
//! (etcd #22082: `concurrency.Mutex.Unlock` deletes by name). A key whose create reply was lost
//! is read first to learn its revision. The key's (family, lease) stays this token's until the
//! release is done, so no other token of this client writes that key meanwhile.

use super::backend::EtcdBackend;
use super::failure::release_failure;
use super::request::{Compare, EtcdOp, EtcdReply, EtcdRequest, EtcdResult, Range, Txn, TxnOp};
use super::step::{Job, Slot, Step};
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, Release, Verdict};
use crate::error::Error;

impl EtcdBackend {
    /// Starts a release: delete the token's key, after reading it if its create is unsure.
    pub(super) fn release_start(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, answers: &mut Vec<Answer>) {
        match self.slot(&job.token) {
            Slot::None => self.release_done(ctx, job, false, answers),
            Slot::Uncertain { key, .. } => self.send(ctx, job, Step::Find, EtcdOp::Range(Range::key(key))),
            Slot::Known { key, rev, .. } => self.send_delete(ctx, job, key, rev),
        }
    }

    fn send_delete(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, key: String, rev: i64) {
        let delete = TxnOp::Delete { key: key.clone().into_bytes(), prefix: false };
        let txn = Txn { compares: vec![Compare::created_at(key, rev)], success: vec![delete], failure: vec![] };
        self.send(ctx, job, Step::Delete, EtcdOp::Txn(txn));
    }

    /// The key is gone (or never was): forget it and free its lease for the family.
    fn release_done(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, deleted: bool, answers: &mut Vec<Answer>) {
        let was_held = deleted && self.held.remove(&job.token).is_some();
        self.held.remove(&job.token);
        self.forget(&job);
        let token = job.token.clone();
        self.unwatch(ctx, &token);
        self.settle(ctx, job, None, Verdict::Release(Release::Done { was_held }), answers);
    }

    /// Handles the reply to one step of a release.
    pub(super) fn release_reply(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, reply: EtcdResult, answers: &mut Vec<Answer>) {
        if job.epoch != self.epoch {
            // The session was lost meanwhile: its keys went with its leases.
            return self.settle(ctx, job, None, Verdict::Release(Release::Done { was_held: false }), answers);
        }
        match (job.step.clone(), reply) {
            (Step::Find, Ok(EtcdReply::Range { kvs, .. })) => {
                let lease = self.slot(&job.token).lease();
                match kvs.first() {
                    Some(kv) if Some(kv.lease) == lease => {
                        let key = String::from_utf8_lossy(&kv.key).into_owned();
                        let rev = kv.create_revision;
                        if let (Some(slot), Some(lease)) = (self.owned.get_mut(&job.token), lease) {
                            *slot = Slot::Known { key: key.clone(), lease, rev };
                        }
                        self.send_delete(ctx, job, key, rev);
                    }
                    _ => self.release_done(ctx, job, false, answers),
                }
            }
            (Step::Delete, Ok(EtcdReply::Txn { succeeded, .. })) => self.release_done(ctx, job, succeeded, answers),
            (_, Err(f)) => self.settle(ctx, job, None, Verdict::Release(release_failure(f)), answers),
            (step, Ok(other)) => {
                let e = Error::protocol(format!("etcd answered {step:?} with {other:?}"));
                self.settle(ctx, job, None, Verdict::Release(Release::Failed(e)), answers);
            }
        }
    }
}
