//! The etcd backend of the lock engine (PROTOCOL.md §10): each engine call becomes a short
//! chain of [`EtcdOp`]s performed one after another (grant a lease if needed, create the key
//! in a transaction that also reads the holder, read the predecessor, watch it; keep the lease
//! alive and check the key; delete the key only if it has its create revision), with the
//! recipes of [`recipe`](super::recipe) deciding who holds and [`layout`](super::layout)
//! naming the keys.
//!
//! What the backend keeps is wire state only: the client's session leases and when each was
//! last confirmed (the `session` module), the key each owner token has, which lease a
//! token's key uses under each key family (one key per waiter: a second token of this client
//! on one name gets a lease of its own), which watch wakes which token, and which tokens hold
//! (so a lost lease can be reported on each).

use std::collections::HashMap;
use std::sync::Arc;

use super::config::{safe_validity, EtcdConfig};
use super::failure::failure_error;
use super::lease::{Background, SessionLease};
use super::request::{EtcdNotice, EtcdOp, EtcdReply, EtcdRequest, EtcdResult, EventKind, LeaseId, WatchId};
use super::step::{Job, Slot, Step};
use super::target::EtcdTarget;
use crate::engine::operation::MAX_BACKOFF;
use crate::engine::job::{JobRunner, Jobs};
use crate::engine::{Action, Answer, Backend, Ctx, Done, LockEngine, OpId, Purpose, RequestId, Signal};
use crate::error::{Error, Result};
use crate::listing::Query;
use crate::options::LockOptions;
use crate::primitive::Primitive;
use crate::random::RandomSource;
use crate::time::{Duration, Instant};

/// The lock engine over an etcd cluster. See [`LockEngine`] for the driving contract; requests
/// are [`EtcdRequest`]s, replies [`EtcdResult`]s, pushes [`EtcdNotice`]s.
pub type EtcdEngine = LockEngine<EtcdBackend>;

/// The etcd backend: etcd's concurrency recipes over leases this client keeps alive.
pub struct EtcdBackend {
    pub(super) config: EtcdConfig,
    /// The session's leases, the first one the client's own (`concurrency.Session`'s); more
    /// are granted when a token needs a key under a family where every lease of its TTL (its
    /// lock's lease, [`EtcdConfig::key_ttl_secs`]) has one already.
    pub(super) leases: Vec<SessionLease>,
    /// Incremented whenever the session is lost: replies to calls of an older epoch speak of
    /// keys that died with their lease.
    pub(super) epoch: u64,
    /// Each token's key.
    pub(super) owned: HashMap<Arc<str>, Slot>,
    /// (family prefix, lease) → the token whose key it is, until its release is done: no other
    /// token may write (or adopt) that key meanwhile.
    pub(super) used: HashMap<(String, LeaseId), Arc<str>>,
    /// Tokens granted, with the acquire that got the grant (its lease id is the op's).
    pub(super) held: HashMap<Arc<str>, OpId>,
    /// Leases whose key in some family went since the last `retire_idle`.
    pub(super) freed: Vec<LeaseId>,
    /// Each live watch and the token it wakes.
    pub(super) watches: HashMap<WatchId, Arc<str>>,
    pub(super) next_watch: u64,
    /// The calls on the wire or waiting behind another of their token.
    pub(super) jobs: Jobs<EtcdTarget, Step>,
    /// Requests no call waits for (keepalives of the timer, watch cancels, revokes).
    pub(super) background: HashMap<RequestId, Background>,
    /// The client closed: no lease is granted or kept alive any more.
    pub(super) closed: bool,
    /// The listing pages on the wire, with the kind each reads (`list.rs`).
    listing: HashMap<RequestId, (Purpose, Instant, Query, usize)>,
}

impl EtcdBackend {
    /// A backend for `config` (validated).
    pub fn new(config: EtcdConfig) -> Result<Self> {
        config.validate()?;
        Ok(EtcdBackend {
            config,
            leases: Vec::new(),
            epoch: 0,
            owned: HashMap::new(),
            used: HashMap::new(),
            held: HashMap::new(),
            freed: Vec::new(),
            watches: HashMap::new(),
            next_watch: 1,
            jobs: Jobs::default(),
            background: HashMap::new(),
            listing: HashMap::new(),
            closed: false,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EtcdConfig {
        &self.config
    }

    /// The session's leases (the client's own first) with the TTL each was granted.
    pub fn leases(&self) -> Vec<(LeaseId, Duration)> {
        self.leases.iter().map(|l| (l.id, l.ttl)).collect()
    }

    /// The key `token` holds or waits with, if known (for tests and tools).
    pub fn key_of(&self, token: &str) -> Option<&str> {
        self.owned.get(token).and_then(Slot::key)
    }

    /// The TTL validity is counted from: the shortest granted, or the configured one before
    /// any lease was granted.
    pub(super) fn ttl(&self) -> Duration {
        self.leases.iter().map(|l| l.ttl).min().unwrap_or(self.config.session_ttl)
    }

    /// A new watch id.
    pub(super) fn fresh_watch(&mut self) -> WatchId {
        let w = WatchId(self.next_watch);
        self.next_watch += 1;
        w
    }

    /// Cancels every watch that would wake `token`.
    pub(super) fn unwatch(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, token: &str) {
        let mine: Vec<WatchId> = self.watches.iter().filter(|(_, t)| &***t == token).map(|(w, _)| *w).collect();
        for watch in mine {
            self.watches.remove(&watch);
            self.send_background(ctx, Background::Ignore, EtcdOp::CancelWatch { watch });
        }
    }

    /// Sends a request no call waits for.
    pub(super) fn send_background(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, what: Background, op: EtcdOp) {
        let id = ctx.ids.request();
        self.background.insert(id, what);
        ctx.out.push_back(EtcdRequest { id, op });
    }

    /// The token's key, as known.
    pub(super) fn slot(&self, token: &str) -> Slot {
        self.owned.get(token).cloned().unwrap_or_default()
    }

    /// Forgets the token's key and frees its (family, lease) for another token.
    pub(super) fn forget(&mut self, job: &Job) {
        if let Some(slot) = self.owned.remove(&job.token) {
            if let Some(lease) = slot.lease() {
                let k = (job.target.family_prefix(), lease);
                if self.used.get(&k).is_some_and(|t| *t == job.token) {
                    self.used.remove(&k);
                    self.freed.push(lease);
                }
            }
        }
    }
}

impl JobRunner for EtcdBackend {
    type Target = EtcdTarget;
    type Step = Step;
    type Op = EtcdOp;
    type Request = EtcdRequest;

    fn jobs(&mut self) -> &mut Jobs<EtcdTarget, Step> {
        &mut self.jobs
    }

    fn request(&self, _job: &Job, id: RequestId, op: EtcdOp) -> EtcdRequest {
        EtcdRequest { id, op }
    }

    fn start(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, mut job: Job, answers: &mut Vec<Answer>) {
        job.epoch = self.epoch;
        match job.purpose {
            Some(Purpose::Acquire(_)) => {
                // A new attempt sets its own watch: the one of the last attempt has done its part.
                let token = Arc::clone(&job.token);
                self.unwatch(ctx, &token);
                self.acquire_next(ctx, job, answers)
            }
            Some(Purpose::Renew(..) | Purpose::Extend(..)) => self.confirm_start(ctx, job, answers),
            Some(Purpose::Release(..) | Purpose::Cleanup(_)) => self.release_start(ctx, job, answers),
            Some(Purpose::Observe(_) | Purpose::Inspect(_) | Purpose::Break(_) | Purpose::List(_)) | None => {
                unreachable!("observes, inspects, breaks and listings are sent directly")
            }
        }
    }

    fn settled(&mut self, ctx: &mut Ctx<'_, EtcdRequest>) {
        self.retire_idle(ctx);
    }
}

impl Backend for EtcdBackend {
    type Target = EtcdTarget;
    type Request = EtcdRequest;
    type Reply = EtcdResult;
    type Notice<'a> = EtcdNotice;
    type Outcome = Done;

    fn target(&self, name: &str, primitive: &Primitive, _options: &LockOptions) -> Result<EtcdTarget> {
        EtcdTarget::new(name, primitive)
    }

    fn check_observe(&self) -> Result<()> {
        Ok(())
    }

    fn check_inspect(&self) -> Result<()> {
        Ok(())
    }

    fn check_break(&self, _fenced: bool) -> Result<()> {
        Ok(())
    }

    fn check_list(&self) -> Result<()> {
        Ok(())
    }

    /// An acknowledged keepalive proves the lease alive at its send time, and the lease (with
    /// every key on it) then lives its TTL more: two thirds count.
    fn confirmation_span(&self, _token: &str) -> Option<Duration> {
        Some(safe_validity(self.ttl()))
    }

    fn retry_delay(&self, backoff: &mut Duration, rng: &mut dyn RandomSource) -> Duration {
        let jitter = Duration::from_millis(rng.next_u64() % 20);
        let delay = *backoff + jitter;
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
        delay
    }

    fn attempts_need_session(&self) -> bool {
        true
    }

    /// Every key is attached to a lease of the client: it lives as long as that lease is kept
    /// alive, whatever the lock's lease (a fixed lease's key is deleted at its end).
    fn leftovers_live_with_session(&self) -> bool {
        true
    }

    fn open_session(&mut self, ctx: &mut Ctx<'_, EtcdRequest>) -> Option<RequestId> {
        let id = ctx.ids.request();
        ctx.out.push_back(EtcdRequest { id, op: EtcdOp::LeaseGrant { ttl_secs: self.config.ttl_secs() } });
        // The grant's send time is its first confirmation.
        self.background.insert(id, Background::Open { sent: ctx.now });
        Some(id)
    }

    fn session_reply(&mut self, reply: EtcdResult) -> Result<()> {
        // `open_session`'s request: the engine hands its reply here, not to `on_reply`.
        let sent = self.background.iter().find_map(|(_, b)| match b {
            Background::Open { sent } => Some(*sent),
            _ => None,
        });
        self.background.retain(|_, b| !matches!(b, Background::Open { .. }));
        match reply {
            Ok(EtcdReply::LeaseGranted { lease, ttl_secs }) if ttl_secs > 0 => {
                let sent = sent.unwrap_or_default();
                self.leases.push(SessionLease::new(lease, self.config.ttl_secs(), ttl_secs, sent));
                Ok(())
            }
            Ok(other) => Err(Error::protocol(format!("etcd answered the lease grant with {other:?}"))),
            Err(f) => Err(failure_error(f)),
        }
    }

    fn call(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, purpose: Purpose, action: Action<'_, EtcdTarget>, answers: &mut Vec<Answer>) {
        let (target, token, lease, once) = match action {
            Action::Acquire { target, token, lease, once, .. } => (target, token, lease, once),
            Action::Extend { target, token, duration } => (target, token, duration, false),
            Action::Release { target, token } => (target, token, Duration::ZERO, false),
            Action::Observe { target } => return self.observe_start(ctx, purpose, target),
            Action::Inspect { target, .. } => return self.inspect_start(ctx, purpose, target),
            Action::Break { target, holder } => return self.break_start(ctx, purpose, target, holder, answers),
            Action::List { query } => {
                match super::list::range(query) {
                    Ok((range, kind)) => {
                        let id = ctx.ids.request();
                        self.listing.insert(id, (purpose, ctx.now, query.clone(), kind));
                        ctx.out.push_back(EtcdRequest { id, op: EtcdOp::Range(range) });
                    }
                    Err(e) => answers.push(Answer { purpose, sent: ctx.now, verdict: crate::engine::Verdict::Listed(Err(e)) }),
                }
                return;
            }
        };
        let job = Job {
            purpose: Some(purpose),
            target: Arc::clone(target),
            token: Arc::from(token),
            epoch: self.epoch,
            lease,
            once,
            steps: 0,
            step: Step::Start,
            sent: ctx.now,
        };
        self.submit(ctx, job, answers);
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, id: RequestId, reply: EtcdResult, answers: &mut Vec<Answer>) {
        if let Some((purpose, sent, query, kind)) = self.listing.remove(&id) {
            let found = match reply {
                Ok(EtcdReply::Range { kvs, count, .. }) => Ok(super::list::found(&query, kind, &kvs, count)),
                Ok(other) => Err(Error::protocol(format!("etcd answered a listing's read with {other:?}"))),
                Err(f) => Err(failure_error(f)),
            };
            return answers.push(Answer { purpose, sent, verdict: crate::engine::Verdict::Listed(found) });
        }
        if let Some(what) = self.background.remove(&id) {
            return self.background_reply(ctx, what, reply, answers);
        }
        let Some(job) = self.jobs.answered(id) else {
            return;
        };
        match job.purpose {
            Some(Purpose::Acquire(_)) => self.acquire_reply(ctx, job, reply, answers),
            Some(Purpose::Renew(..) | Purpose::Extend(..)) => self.confirm_reply(ctx, job, reply, answers),
            Some(Purpose::Release(..) | Purpose::Cleanup(_)) => self.release_reply(ctx, job, reply, answers),
            Some(Purpose::Observe(_)) => self.observe_reply(ctx, job, reply, answers),
            Some(Purpose::Inspect(_)) => self.inspect_reply(ctx, job, reply, answers),
            Some(Purpose::Break(_)) => self.break_reply(ctx, job, reply, answers),
            Some(Purpose::List(_)) => {}
            None => {}
        }
    }

    fn on_notice(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, notice: EtcdNotice, _answers: &mut Vec<Answer>) -> Signal {
        let (watch, fired) = match notice {
            // Only a deletion can move a waiter up (a put is a new waiter, or a value change).
            EtcdNotice::Watch { watch, events } => (watch, events.iter().any(|e| e.kind == EventKind::Delete)),
            // Events may have been missed: the waiter looks at its place again.
            EtcdNotice::WatchEnded { watch, .. } => (watch, true),
        };
        if !fired {
            return Signal::Nothing;
        }
        match self.watches.remove(&watch) {
            Some(token) => {
                // Each watch wakes once: the re-run attempt sets the next one.
                self.send_background(ctx, Background::Ignore, EtcdOp::CancelWatch { watch });
                Signal::Recheck(vec![token.to_string()])
            }
            None => Signal::Nothing,
        }
    }

    fn on_timeout(&mut self, ctx: &mut Ctx<'_, EtcdRequest>, _answers: &mut Vec<Answer>) {
        self.keep_alive_due(ctx);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.leases.iter().filter_map(SessionLease::due).min()
    }

    fn close_session(&mut self, ctx: &mut Ctx<'_, EtcdRequest>) {
        self.close(ctx);
    }

    fn is_idle(&self) -> bool {
        self.jobs.is_idle()
            && self.listing.is_empty()
            && !self.background.values().any(|b| matches!(b, Background::Closing))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn two_thirds_of_the_granted_ttl_counts() {
        let e = EtcdBackend::new(EtcdConfig { session_ttl: Duration::from_millis(10), ..EtcdConfig::default() }).err().expect("refused");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        let mut b = EtcdBackend::new(EtcdConfig { session_ttl: Duration::from_secs(3), ..EtcdConfig::default() }).unwrap();
        assert_eq!(b.confirmation_span(""), Some(Duration::from_secs(2)));
        b.session_reply(Ok(EtcdReply::LeaseGranted { lease: 7, ttl_secs: 6 })).unwrap();
        assert_eq!(b.confirmation_span(""), Some(Duration::from_secs(4)));
        assert_eq!(b.leases(), [(7, Duration::from_secs(6))]);
        assert!(b.session_reply(Ok(EtcdReply::LeaseRevoked)).is_err());
        assert!(b.session_reply(Ok(EtcdReply::LeaseGranted { lease: 8, ttl_secs: 0 })).is_err());
    }
}
