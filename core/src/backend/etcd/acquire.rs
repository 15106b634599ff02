//! Acquiring: `concurrency.Mutex`'s recipe as steps. An attempt picks the token's key (a lease
//! of the session whose TTL is the lock's lease, in whole seconds, with no key of this client in
//! the family yet, or a new lease of that TTL), creates it in
//! one transaction that also reads the holder (`create_revision == 0` → put, else get: a retry
//! after a lost reply finds its own key), and either holds, or reads the key with the greatest
//! create revision below its own and watches that key's deletion — granted, after a keepalive
//! if the lease's last confirmation is too old to count the lease from.

use std::sync::Arc;

use super::backend::EtcdBackend;
use super::config::safe_validity;
use super::failure::{attempt_failure, attempt_transient};
use super::lease::{Background, SessionLease};
use super::recipe::{self, Wait};
use super::request::{Compare, EtcdFailure, EtcdOp, EtcdReply, EtcdRequest, EtcdResult, KeyValue, Range, Txn, TxnOp, TxnReply};
use super::step::{Job, Slot, Step};
use crate::engine::job::{JobRunner, MAX_STEPS};
use crate::engine::{Answer, Attempt, Ctx, Purpose, Verdict};
use crate::error::{Error, ErrorKind};

impl EtcdBackend {
    /// The next step of an acquire, from what is known of its token's key.
    pub(super) fn acquire_next(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, answers: &mut Vec<Answer>) {
        if job.steps >= MAX_STEPS {
            let e = Error::new(ErrorKind::Connection, "the lock's queue kept changing; trying again");
            return self.settle_attempt(ctx, job, attempt_transient(e), answers);
        }
        let target = Arc::clone(&job.target);
        let owner = TxnOp::Range(recipe::owner_range(&target));
        match self.slot(&job.token) {
            Slot::None => {
                let family = target.family_prefix();
                // The key's lease has the lock's lease as its TTL, so a crashed holder's key goes
                // within it; one key per waiter: a lease of that TTL with no key here yet.
                let ttl = self.config.key_ttl_secs(job.lease);
                let free = self
                    .leases
                    .iter()
                    .filter(|l| l.asked == ttl)
                    .map(|l| l.id)
                    .find(|id| !self.used.contains_key(&(family.clone(), *id)));
                let Some(lease) = free else {
                    return self.send(ctx, job, Step::Grant, EtcdOp::LeaseGrant { ttl_secs: ttl });
                };
                self.used.insert((family, lease), Arc::clone(&job.token));
                let key = target.key(lease);
                self.owned.insert(Arc::clone(&job.token), Slot::Uncertain { key: key.clone(), lease });
                self.send_create(ctx, job, key, lease, owner);
            }
            Slot::Uncertain { key, lease } => self.send_create(ctx, job, key, lease, owner),
            Slot::Known { key, rev, .. } => {
                let txn = Txn { compares: vec![Compare::created_at(key, rev)], success: vec![owner], failure: vec![] };
                self.send(ctx, job, Step::Check, EtcdOp::Txn(txn));
            }
        }
    }

    /// `concurrency.Mutex.tryAcquire`'s transaction.
    fn send_create(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, key: String, lease: i64, owner: TxnOp) {
        let put = TxnOp::Put { key: key.clone().into_bytes(), value: job.target.value(&self.config.label), lease };
        let get = TxnOp::Range(Range::key(key.clone()));
        let txn = Txn { compares: vec![Compare::created_at(key, 0)], success: vec![put, owner.clone()], failure: vec![get, owner] };
        self.send(ctx, job, Step::Create, EtcdOp::Txn(txn));
    }

    /// Handles the reply to one step of an acquire.
    pub(super) fn acquire_reply(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, reply: EtcdResult, answers: &mut Vec<Answer>) {
        if self.closed {
            // The client closed while this step was on the wire: a lease granted now would be
            // kept by nobody, so it goes at once; the attempt ends (its caller is gone).
            if let Ok(EtcdReply::LeaseGranted { lease, .. }) = reply {
                self.send_background(ctx, Background::Closing, EtcdOp::LeaseRevoke { lease });
            }
            self.forget(&job);
            let e = Error::new(ErrorKind::Closed, "the client is closed");
            return self.settle_attempt(ctx, job, Attempt::Failed { error: e, undo: false }, answers);
        }
        if job.epoch != self.epoch {
            // The session was lost meanwhile: start over in the new one.
            let job = Job { epoch: self.epoch, ..job };
            return self.acquire_next(ctx, job, answers);
        }
        let token = Arc::clone(&job.token);
        match (job.step.clone(), reply) {
            (Step::Grant, Ok(EtcdReply::LeaseGranted { lease, ttl_secs })) if ttl_secs > 0 => {
                let asked = self.config.key_ttl_secs(job.lease);
                self.leases.push(SessionLease::new(lease, asked, ttl_secs, job.sent));
                // Another lease may have come free meanwhile and be taken instead: then this one
                // carries no key and is revoked at the next settle.
                self.freed.push(lease);
                self.acquire_next(ctx, job, answers);
            }
            (Step::Create, Ok(EtcdReply::Txn { revision, succeeded, replies })) => {
                let Slot::Uncertain { key, lease } = self.slot(&token) else {
                    return self.protocol(ctx, job, "a create reply for a key not being created", answers);
                };
                let (rev, owners) = if succeeded {
                    (revision, range_kvs(replies.get(1)))
                } else {
                    // The key exists: ours, from a create whose reply was lost.
                    match range_kvs(replies.first()).first() {
                        Some(kv) if kv.lease == lease => (kv.create_revision, range_kvs(replies.get(1))),
                        _ => {
                            self.forget(&job);
                            let e = Error::protocol(format!("etcd key {key:?} exists without this client's lease {lease:x}"));
                            return self.settle_attempt(ctx, job, Attempt::Failed { error: e, undo: false }, answers);
                        }
                    }
                };
                self.owned.insert(Arc::clone(&token), Slot::Known { key, lease, rev });
                self.decide(ctx, job, rev, &owners, revision, answers);
            }
            (Step::Check, Ok(EtcdReply::Txn { revision, succeeded, replies })) => {
                let Slot::Known { rev, .. } = self.slot(&token) else {
                    return self.protocol(ctx, job, "a check reply for a key not known", answers);
                };
                if !succeeded {
                    return self.vanished(ctx, job, answers);
                }
                self.decide(ctx, job, rev, &range_kvs(replies.first()), revision, answers);
            }
            (Step::Predecessor, Ok(EtcdReply::Range { revision, kvs, .. })) => match kvs.first() {
                // Nothing before ours blocks it any more: check again (and hold).
                None => self.acquire_next(ctx, job, answers),
                Some(kv) => {
                    let key = kv.key.clone();
                    self.watch(ctx, job, key, false, revision + 1);
                }
            },
            (Step::Watch { .. }, Ok(EtcdReply::Watching)) => {
                let verdict = Attempt::Queued { holder_remaining: None, fence: 0 };
                self.settle_attempt(ctx, job, verdict, answers);
            }
            (Step::Confirm, reply) => {
                let Some(lease) = self.slot(&token).lease() else {
                    return self.vanished(ctx, job, answers);
                };
                match self.kept_alive(ctx, lease, job.sent, reply, answers) {
                    Ok(()) => self.grant(ctx, job, answers),
                    Err(f) => self.settle_attempt(ctx, job, attempt_failure(f), answers),
                }
            }
            (step, Err(f)) => {
                if let Step::Watch { watch } = step {
                    self.watches.remove(&watch);
                }
                if matches!(f, EtcdFailure::LeaseNotFound) {
                    // A put on a lease that is gone: the session is lost.
                    self.lose_session(ctx, "the etcd session lease expired or was revoked", answers);
                }
                self.settle_attempt(ctx, job, attempt_failure(f), answers);
            }
            (step, Ok(other)) => {
                let why = format!("etcd answered {step:?} with {other:?}");
                self.protocol(ctx, job, &why, answers)
            }
        }
    }

    /// The key created at `rev` holds or waits, by the owner read of the transaction at
    /// store revision `revision`.
    fn decide(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, rev: i64, owners: &[KeyValue], revision: i64, answers: &mut Vec<Answer>) {
        if recipe::holds(&job.target, owners, rev) {
            return self.grant_or_confirm(ctx, job, answers);
        }
        if job.once {
            let why = match job.target.permits() {
                Some(p) => format!("all {p} permits are taken"),
                None => "another owner holds it".to_string(),
            };
            return self.settle_attempt(ctx, job, Attempt::Refused { why }, answers);
        }
        match recipe::wait(&job.target, rev) {
            Wait::Predecessor(range) => self.send(ctx, job, Step::Predecessor, EtcdOp::Range(range)),
            // Any deletion after the read may free a permit.
            Wait::AnyUnder(prefix) => self.watch(ctx, job, prefix.into_bytes(), true, revision + 1),
        }
    }

    /// Watches `key` (or the prefix) from `start` for the token.
    fn watch(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, key: Vec<u8>, prefix: bool, start: i64) {
        let watch = self.fresh_watch();
        self.watches.insert(watch, Arc::clone(&job.token));
        let op = EtcdOp::Watch { watch, key, prefix, start_revision: start };
        self.send(ctx, job, Step::Watch { watch }, op);
    }

    /// The token holds: grant, after a keepalive if the lease's last confirmation is too old
    /// to count the lease from.
    fn grant_or_confirm(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, answers: &mut Vec<Answer>) {
        let Some(lease) = self.slot(&job.token).lease().and_then(|id| self.lease(id)).cloned() else {
            return self.vanished(ctx, job, answers);
        };
        let span = job.lease.min(safe_validity(lease.ttl));
        if ctx.now.saturating_duration_since(lease.confirmed) <= span / 3 {
            self.grant(ctx, job, answers);
        } else {
            self.send(ctx, job, Step::Confirm, EtcdOp::LeaseKeepAlive { lease: lease.id });
        }
    }

    /// Grants the attempt, counted from the lease's last confirmation: the key lives at least
    /// as long as its lease, which lives its TTL past that.
    fn grant(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, answers: &mut Vec<Answer>) {
        let slot = self.slot(&job.token);
        let (Slot::Known { rev, lease, .. }, Some(Purpose::Acquire(op))) = (slot, job.purpose) else {
            return self.vanished(ctx, job, answers);
        };
        let Some(confirmed) = self.lease(lease).map(|l| l.confirmed) else {
            return self.vanished(ctx, job, answers);
        };
        let token = Arc::clone(&job.token);
        self.unwatch(ctx, &token);
        self.held.insert(token, op);
        let verdict = Verdict::Attempt(Attempt::Granted { fence: Some(rev as u64), granted: job.lease });
        self.settle(ctx, job, Some(confirmed), verdict, answers);
    }

    /// The token's key is gone while the session lives (deleted by someone else): forget it
    /// and try again with a new one.
    fn vanished(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, answers: &mut Vec<Answer>) {
        self.forget(&job);
        let e = Error::new(ErrorKind::Connection, "the lock key vanished; trying again");
        self.settle_attempt(ctx, job, attempt_transient(e), answers);
    }

    /// A reply that makes no sense: the acquire fails and its key is undone.
    fn protocol(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, job: Job, why: &str, answers: &mut Vec<Answer>) {
        let e = Error::protocol(why.to_string());
        self.settle_attempt(ctx, job, Attempt::Failed { error: e, undo: true }, answers);
    }
}

/// The keys of a range answer within a transaction (none if it is not one).
pub(super) fn range_kvs(reply: Option<&TxnReply>) -> Vec<KeyValue> {
    match reply {
        Some(TxnReply::Range { kvs, .. }) => kvs.clone(),
        _ => Vec::new(),
    }
}
