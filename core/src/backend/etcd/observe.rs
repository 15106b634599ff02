//! Observing an election: read the key with the lowest create revision under its prefix
//! (`concurrency.Election.Leader`): its value is the leader's, its create revision the term.
//! An observe takes no owner token and never waits behind another call.

use std::sync::Arc;

use super::backend::EtcdBackend;
use super::failure::failure_error;
use super::request::{EtcdOp, EtcdReply, EtcdRequest, EtcdResult, Order, Range};
use super::step::{Job, Step};
use super::target::EtcdTarget;
use crate::engine::job::JobRunner;
use crate::engine::{Answer, Ctx, LeaderInfo, Purpose, Verdict};
use crate::error::Error;
use crate::time::Duration;

impl EtcdBackend {
    /// Starts an observe of `target`.
    pub(super) fn observe_start(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, purpose: Purpose, target: &Arc<EtcdTarget>) {
        let job = Job::read(purpose, target, self.epoch, Step::Observe, ctx.now);
        let range = Range::prefix(target.queue_prefix(), Order::CreateAscending, 1);
        self.send(ctx, job, Step::Observe, EtcdOp::Range(range));
    }

    /// Handles the reply to an observe.
    pub(super) fn observe_reply(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, reply: EtcdResult, answers: &mut Vec<Answer>) {
        let observed = match reply {
            // The leader's remaining time would need its lease's TTL (another request, and a
            // permission on another client's lease): reported as unknown, as on ZooKeeper.
            Ok(EtcdReply::Range { kvs, .. }) => Ok(kvs.first().map(|kv| LeaderInfo {
                value: String::from_utf8_lossy(&kv.value).into_owned(),
                term: kv.create_revision as u64,
                remaining: Duration::ZERO,
            })),
            Ok(other) => Err(Error::protocol(format!("etcd answered an election read with {other:?}"))),
            Err(f) => Err(failure_error(f)),
        };
        self.settle(ctx, job, None, Verdict::Observed(observed), answers);
    }
}
