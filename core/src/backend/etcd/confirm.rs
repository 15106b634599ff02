//! Renewals and extends: an etcd key keeps no lease of its own, so renewing a hold is keeping
//! the session lease its key is on alive (the acknowledged keepalive's send time is what the
//! engine counts from, [`Backend::confirmation_span`](crate::engine::Backend::confirmation_span))
//! and then reading the key: still there, with its create revision, on that lease (a key
//! deleted by hand, `etcdctl del`, is a lost hold).

use super::backend::EtcdBackend;
use super::failure::renewal_failure;
use super::request::{EtcdOp, EtcdReply, EtcdRequest, EtcdResult, Range};
use super::step::{Job, Slot, Step};
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, Renewal, Verdict};
use crate::error::Error;

impl EtcdBackend {
    /// Starts a renewal or extend: keep the key's lease alive, or refuse at once if the key is
    /// gone.
    pub(super) fn confirm_start(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, answers: &mut Vec<Answer>) {
        match self.slot(&job.token) {
            Slot::Known { lease, .. } if self.lease(lease).is_some() => {
                self.send(ctx, job, Step::KeepAlive, EtcdOp::LeaseKeepAlive { lease });
            }
            _ => {
                let subject = "the lock key is gone (its etcd lease ended)".to_string();
                self.settle(ctx, job, None, Verdict::Renewal(Renewal::Refused { subject }), answers);
            }
        }
    }

    /// Handles the reply to a renewal's or extend's step.
    pub(super) fn confirm_reply(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, reply: EtcdResult, answers: &mut Vec<Answer>) {
        let gone = |subject: &str| Verdict::Renewal(Renewal::Refused { subject: subject.to_string() });
        if job.epoch != self.epoch {
            return self.settle(ctx, job, None, gone("the etcd session lease ended"), answers);
        }
        let Slot::Known { key, lease, rev } = self.slot(&job.token) else {
            return self.settle(ctx, job, None, gone("the lock key is gone"), answers);
        };
        match job.step {
            Step::KeepAlive => match self.kept_alive(ctx, lease, job.sent, reply, answers) {
                Ok(()) => {
                    let confirmed = job.sent;
                    self.send(ctx, job, Step::CheckKey { confirmed }, EtcdOp::Range(Range::key(key)));
                }
                Err(super::request::EtcdFailure::LeaseNotFound) => {
                    self.settle(ctx, job, None, gone("the etcd session lease expired"), answers)
                }
                Err(f) => self.settle(ctx, job, None, Verdict::Renewal(renewal_failure(f)), answers),
            },
            Step::CheckKey { confirmed } => {
                let verdict = match reply {
                    Ok(EtcdReply::Range { kvs, .. }) => match kvs.first() {
                        Some(kv) if kv.create_revision == rev && kv.lease == lease => Verdict::Renewal(Renewal::Confirmed),
                        _ => {
                            self.forget(&job);
                            self.held.remove(&job.token);
                            gone("the lock key was deleted or replaced")
                        }
                    },
                    Ok(other) => Verdict::Renewal(Renewal::Failed(Error::protocol(format!("etcd answered a key read with {other:?}")))),
                    Err(f) => Verdict::Renewal(renewal_failure(f)),
                };
                self.settle(ctx, job, Some(confirmed), verdict, answers);
            }
            ref step => {
                let e = Error::protocol(format!("a renewal step {step:?} answered"));
                self.settle(ctx, job, None, Verdict::Renewal(Renewal::Failed(e)), answers);
            }
        }
    }
}
