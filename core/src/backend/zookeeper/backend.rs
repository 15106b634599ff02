//! The ZooKeeper backend of the lock engine (PROTOCOL.md "ZooKeeper"): each engine call becomes
//! a short chain of [`ZkOp`]s performed one after another (find a node a lost reply may have
//! created, create, list, watch the predecessor; check; delete), with Curator's recipes deciding
//! who holds ([`recipe`](super::recipe)) and Curator's names and paths ([`layout`]).
//!
//! What the backend keeps is wire state only: the session (its id and negotiated timeout), the
//! nodes each owner token has in it, which watch wakes which token, and the latest instant the
//! ensemble's leader confirmed the session ([`ZooKeeperBackend::confirmed`]). This module holds
//! that state and the [`Backend`] impl, which hands each call and reply to the module of its
//! kind: `step` names a call's steps (the engine's job runner runs them), `acquire`, `confirm`,
//! `release` and `observe` take them, `failure` says what a failed request means.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::config::{safe_validity, ZkConfig};
use super::failure::failure_error;
use super::layout;
use super::request::{SessionEvent, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkRequest, ZkResult};
use super::session_state::{Extra, Held, SessionInfo};
use super::step::{Ahead, Job, Owned, Slot, Step};
use super::target::ZkTarget;
use crate::engine::operation::MAX_BACKOFF;
use crate::engine::job::{JobRunner, Jobs};
use crate::engine::{Action, Answer, Backend, Ctx, Done, LockEngine, Purpose, RequestId, Signal};
use crate::error::{Error, Result};
use crate::listing::Query;
use crate::options::LockOptions;
use crate::primitive::Primitive;
use crate::random::RandomSource;
use crate::time::{Duration, Instant};

/// The lock engine over a ZooKeeper ensemble. See [`LockEngine`] for the driving contract;
/// requests are [`ZkRequest`]s, replies [`ZkResult`]s, pushes [`ZkNotice`]s.
pub type ZooKeeperEngine = LockEngine<ZooKeeperBackend>;

/// The ZooKeeper backend: Curator's recipes over one session per client.
pub struct ZooKeeperBackend {
    pub(super) config: ZkConfig,
    pub(super) session: Option<SessionInfo>,
    /// Incremented whenever a session ends or a new one opens: replies to calls of an older
    /// epoch speak of nodes that died with their session.
    pub(super) epoch: u64,
    /// The send time of the latest request the leader answered in this session (a write,
    /// refused or not): the session was alive then, so it lives at least a session timeout
    /// after it.
    pub(super) confirmed: Option<Instant>,
    pub(super) owned: HashMap<Arc<str>, Owned>,
    /// Watched path → tokens to re-check when it fires.
    pub(super) watchers: HashMap<String, Vec<Arc<str>>>,
    /// The calls on the wire or waiting behind another of their token.
    pub(super) jobs: Jobs<ZkTarget, Step>,
    /// A reply said the session expired, and the engine was not told yet (the transport's
    /// expiry notice tells it).
    pub(super) unsignalled_end: bool,
    /// Nodes of an ended session of ours, deleted as soon as a new session is open: this client
    /// gave that session up, but the server may keep it (and its nodes, holders and waiters
    /// alike) a whole session timeout more, as it does for sessions it restored after a
    /// restart. Left there, they would hold the lock for nobody and queue a new node of the
    /// same acquire behind its own old one.
    pub(super) stale: Vec<String>,
    /// The deletes of `stale` nodes on the wire, each with the value of `own_back` when it was
    /// sent.
    pub(super) stale_in_flight: HashMap<RequestId, (String, u64)>,
    /// A stale delete failed on a connection loss: the others wait until the session is
    /// reachable again (reconnected, or a new one open). Sent again with the next input, a
    /// transport that answers at once while disconnected (Node's) would spin without end.
    pub(super) stale_parked: bool,
    /// How many times the client's own session was seen reachable (reconnected, a new one
    /// open, a reply of it). A stale delete that fails on a connection loss parks only if
    /// this has not moved since it was sent: the failure and the reconnect come by separate
    /// ways and either may be handled first, and a delete parked after the reconnect that
    /// should have freed it would wait for the next one, which an idle session never has
    /// (its node, of a session the ensemble restored, then held the queue until the ensemble
    /// expired that session).
    pub(super) own_back: u64,
    /// The queue listings sent right behind creates (`list_ahead.rs`).
    pub(super) ahead: HashMap<RequestId, Ahead>,
    /// The listing pages on the wire, with the kind each reads (`list.rs`).
    listing: HashMap<RequestId, (Purpose, Instant, Query, usize)>,
    /// The client's extra sessions, by the timeout asked (`sessions.rs`).
    pub(super) extras: HashMap<Duration, Extra>,
    /// The tokens whose nodes live in an extra session, and which.
    pub(super) placed: HashMap<Arc<str>, Duration>,
    /// The acquire of each token that holds (revoked if its extra session ends).
    pub(super) held: Held,
    /// Extra sessions to close (no token lives there any more).
    pub(super) closing: Vec<Duration>,
    /// Waiters of an ended extra session not yet told to re-check.
    pub(super) requeue: Vec<String>,
}

impl ZooKeeperBackend {
    /// A backend for `config` (validated).
    pub fn new(config: ZkConfig) -> Result<Self> {
        config.validate()?;
        Ok(ZooKeeperBackend {
            config,
            session: None,
            epoch: 0,
            confirmed: None,
            owned: HashMap::new(),
            watchers: HashMap::new(),
            jobs: Jobs::default(),
            unsignalled_end: false,
            stale: Vec::new(),
            stale_in_flight: HashMap::new(),
            stale_parked: false,
            own_back: 0,
            ahead: HashMap::new(),
            listing: HashMap::new(),
            extras: HashMap::new(),
            placed: HashMap::new(),
            held: Held::new(),
            closing: Vec::new(),
            requeue: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ZkConfig {
        &self.config
    }

    /// The session's id and negotiated timeout, once open.
    pub fn session(&self) -> Option<(i64, Duration)> {
        self.session.map(|s| (s.id, s.timeout))
    }

    /// The send time of the latest request the ensemble's leader answered in this session.
    pub fn confirmed(&self) -> Option<Instant> {
        self.confirmed
    }

    /// The path of the node `token` holds or queues with, if known (for tests and tools).
    pub fn node_of(&self, token: &str) -> Option<&str> {
        let owned = self.owned.get(token)?;
        owned.lease.path().or(owned.node.path())
    }

    /// The timeout validity is counted from: the negotiated one, or the configured one before
    /// any session opened.
    pub(super) fn session_timeout(&self) -> Duration {
        self.session.map_or(self.config.session_timeout, |s| s.timeout)
    }

    /// Notes that the leader answered a request sent at `sent`: the session lived then.
    pub(super) fn confirm(&mut self, sent: Instant) {
        self.confirmed = Some(self.confirmed.map_or(sent, |c| c.max(sent)));
    }

    /// Forgets the session and everything that lived in it; its known nodes are deleted once a
    /// new session is open (see `stale`).
    fn end_session(&mut self) {
        self.session = None;
        self.epoch += 1;
        self.confirmed = None;
        for (_, owned) in self.owned.drain() {
            self.stale.extend([owned.node.path(), owned.lease.path()].into_iter().flatten().map(str::to_string));
        }
        self.watchers.clear();
        self.end_extras();
    }

    /// Sends the deletes of the nodes an ended session of ours left, once a session is open.
    fn drop_stale(&mut self, ctx: &mut Ctx<'_, ZkRequest>) {
        if self.session.is_none() || self.stale_parked {
            return;
        }
        for path in std::mem::take(&mut self.stale) {
            let id = ctx.ids.request();
            ctx.out.push_back(ZkRequest::own(id, ZkOp::Delete { path: path.clone(), version: None }));
            self.stale_in_flight.insert(id, (path, self.own_back));
        }
    }

    /// The client's own session is reachable again: stale deletes go out again.
    fn own_session_back(&mut self) {
        self.stale_parked = false;
        self.own_back += 1;
    }

    /// The reply to deleting a stale node (sent when `own_back` was `sent_back`): done, gone
    /// already, or (the connection failed) sent again once the session is reachable again,
    /// which it may already be.
    fn stale_reply(&mut self, path: String, sent_back: u64, reply: ZkResult) {
        match reply {
            Ok(_) | Err(ZkFailure::NoNode) => {}
            Err(ZkFailure::ConnectionLoss(_)) => {
                self.stale.push(path);
                if sent_back == self.own_back {
                    self.stale_parked = true;
                }
            }
            Err(ZkFailure::SessionExpired) => {
                self.stale.push(path);
                self.end_session_by_reply();
            }
            // Refused (an ACL): the server removes it when it expires the old session.
            Err(_) => {}
        }
    }

    /// A reply said the session expired: everything in it is gone. The transport also pushes
    /// [`SessionEvent::Expired`], which tells the engine.
    pub(super) fn end_session_by_reply(&mut self) {
        if self.session.is_some() {
            self.end_session();
            self.unsignalled_end = true;
        }
    }

    /// Sends `op` for `step` after a [`Step::Sync`] on `path`.
    pub(super) fn send_synced(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, path: &str, step: Step, op: ZkOp) {
        let sync = Step::Sync { next: Box::new(step), op };
        self.send(ctx, job, sync, ZkOp::Check { path: path.to_string(), version: None });
    }

    /// The nodes of `token`, made empty if none are known.
    pub(super) fn slots(&mut self, token: &Arc<str>) -> &mut Owned {
        self.owned.entry(Arc::clone(token)).or_default()
    }

    /// The holder node of `job`'s token: its lease for a semaphore, else its queue node.
    pub(super) fn holder(&self, job: &Job) -> Slot {
        let owned = self.owned.get(&job.token).cloned().unwrap_or_default();
        if job.target.holds_by_lease() {
            owned.lease
        } else {
            owned.node
        }
    }
}

impl JobRunner for ZooKeeperBackend {
    type Target = ZkTarget;
    type Step = Step;
    type Op = ZkOp;
    type Request = ZkRequest;

    fn jobs(&mut self) -> &mut Jobs<ZkTarget, Step> {
        &mut self.jobs
    }

    fn request(&self, job: &Job, id: RequestId, op: ZkOp) -> ZkRequest {
        self.request_of(&job.token, id, op)
    }

    fn start(&mut self, ctx: &mut Ctx<'_, ZkRequest>, mut job: Job, answers: &mut Vec<Answer>) {
        job.epoch = self.epoch_of(&job.token);
        match job.purpose {
            Some(Purpose::Acquire(_)) => self.acquire_next(ctx, job, answers),
            Some(Purpose::Renew(..) | Purpose::Extend(..)) => self.check_start(ctx, job, answers),
            Some(Purpose::Release(..) | Purpose::Cleanup(_)) => self.release_start(ctx, job, answers),
            Some(Purpose::Observe(_) | Purpose::Inspect(_) | Purpose::Break(_) | Purpose::List(_)) | None => {
                unreachable!("observes, inspects, breaks, listings and background steps are sent directly")
            }
        }
    }
}

impl Backend for ZooKeeperBackend {
    type Target = ZkTarget;
    type Request = ZkRequest;
    type Reply = ZkResult;
    type Notice<'a> = ZkNotice;
    type Outcome = Done;

    fn target(&self, name: &str, primitive: &Primitive, _options: &LockOptions) -> Result<ZkTarget> {
        ZkTarget::new(name, primitive)
    }

    fn check_observe(&self) -> Result<()> {
        Ok(())
    }

    fn check_list(&self) -> Result<()> {
        Ok(())
    }

    fn check_inspect(&self) -> Result<()> {
        Ok(())
    }

    fn check_break(&self, _fenced: bool) -> Result<()> {
        Ok(())
    }

    /// Curator's protected-mode id: a UUID.
    fn owner_token(&self, random_hex: String) -> String {
        layout::owner_uuid(&random_hex)
    }

    /// One confirmation proves the session alive at its send time, and the session (with every
    /// node in it) then lives about the negotiated timeout more: half of it counts.
    /// Per token: its nodes' session may be an extra one sized from its lease.
    fn confirmation_span(&self, token: &str) -> Option<Duration> {
        Some(safe_validity(self.timeout_of(token)))
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

    /// Every node is ephemeral: it lives as long as the session, whatever the lease.
    fn leftovers_live_with_session(&self) -> bool {
        true
    }

    fn open_session(&mut self, ctx: &mut Ctx<'_, ZkRequest>) -> Option<RequestId> {
        let id = ctx.ids.request();
        ctx.out.push_back(ZkRequest::own(id, ZkOp::OpenSession));
        Some(id)
    }

    fn session_reply(&mut self, reply: ZkResult) -> Result<()> {
        match reply {
            Ok(ZkReply::Session { id, timeout }) if !timeout.is_zero() => {
                // The same session again (the engine asked while it lived) keeps its nodes.
                if self.session.map(|s| s.id) != Some(id) {
                    self.end_session();
                }
                self.unsignalled_end = false;
                self.own_session_back();
                self.session = Some(SessionInfo { id, timeout });
                Ok(())
            }
            Ok(other) => Err(Error::protocol(format!("ZooKeeper answered the session request with {other:?}"))),
            Err(f) => Err(failure_error(f)),
        }
    }

    fn call(&mut self, ctx: &mut Ctx<'_, ZkRequest>, purpose: Purpose, action: Action<'_, ZkTarget>, answers: &mut Vec<Answer>) {
        let (target, token, lease, once) = match action {
            Action::Acquire { target, token, lease, once, .. } => (target, token, lease, once),
            Action::Extend { target, token, duration } => (target, token, duration, false),
            Action::Release { target, token } => (target, token, Duration::ZERO, false),
            Action::Observe { target } => return self.observe_start(ctx, purpose, target),
            Action::Inspect { target, kind } => return self.inspect_start(ctx, purpose, target, kind),
            Action::Break { target, holder } => return self.break_start(ctx, purpose, target, holder, answers),
            Action::List { query } => {
                match super::list::dir(query) {
                    Ok((path, kind)) => {
                        let id = ctx.ids.request();
                        self.listing.insert(id, (purpose, ctx.now, query.clone(), kind));
                        ctx.out.push_back(ZkRequest::own(id, ZkOp::Children { path, watch: false }));
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
            step: Step::List,
            sent: ctx.now,
        };
        self.submit(ctx, job, answers);
    }

    fn flush(&mut self, ctx: &mut Ctx<'_, ZkRequest>) {
        if !self.stale.is_empty() {
            self.drop_stale(ctx);
        }
        if !self.closing.is_empty() {
            self.close_idle(ctx);
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, id: RequestId, reply: ZkResult, answers: &mut Vec<Answer>) {
        if let Some((purpose, sent, query, kind)) = self.listing.remove(&id) {
            let found = match reply {
                Ok(ZkReply::Children(children)) => super::list::found(&query, kind, Some(children)),
                Err(ZkFailure::NoNode) => super::list::found(&query, kind, None),
                Ok(other) => Err(Error::protocol(format!("ZooKeeper answered a listing with {other:?}"))),
                Err(f) => Err(failure_error(f)),
            };
            return answers.push(Answer { purpose, sent, verdict: crate::engine::Verdict::Listed(found) });
        }
        if let Some((path, sent_back)) = self.stale_in_flight.remove(&id) {
            return self.stale_reply(path, sent_back, reply);
        }
        let Some(reply) = self.listed_ahead(id, reply) else {
            return;
        };
        let Some(job) = self.jobs.answered(id) else {
            return;
        };
        if reply.is_ok() && self.key_of(&job.token).is_none() {
            // The client's own session answered: its connection is back.
            self.own_session_back();
        }
        if let Step::Sync { next, op } = &job.step {
            // Answered by the leader (the path exists or not): the session was alive, and this
            // server has caught up. Anything else goes to the call's own handling below.
            if job.epoch == self.epoch_of(&job.token) && matches!(reply, Ok(ZkReply::Checked) | Err(ZkFailure::NoNode | ZkFailure::BadVersion)) {
                self.confirm_of(&job.token, job.sent);
                let (next, op) = ((**next).clone(), op.clone());
                return self.send(ctx, job, next, op);
            }
        }
        match job.purpose {
            // The semaphore's internal mutex given back (the only step without a purpose).
            None => self.unlock_reply(ctx.now, job, reply, answers),
            Some(Purpose::Acquire(_)) => self.acquire_reply(ctx, job, reply, answers),
            Some(Purpose::Renew(..) | Purpose::Extend(..)) => self.check_reply(ctx, job, reply, answers),
            Some(Purpose::Release(..) | Purpose::Cleanup(_)) => self.release_reply(ctx, job, reply, answers),
            Some(Purpose::Observe(_)) => self.observe_reply(ctx, job, reply, answers),
            Some(Purpose::Inspect(_)) => self.inspect_reply(ctx, job, reply, answers),
            Some(Purpose::Break(_)) => self.break_reply(ctx, job, reply, answers),
            Some(Purpose::List(_)) => {}
        }
    }

    fn on_notice(&mut self, ctx: &mut Ctx<'_, ZkRequest>, notice: ZkNotice, answers: &mut Vec<Answer>) -> Signal {
        match notice {
            // An extra session's holds are revoked and its waiters queue again in a new one.
            ZkNotice::Extra { timeout, event: SessionEvent::Expired } => {
                self.end_extra(timeout, ctx.now, answers);
                let mut tokens = std::mem::take(&mut self.requeue);
                tokens.sort();
                tokens.dedup();
                if tokens.is_empty() {
                    Signal::Nothing
                } else {
                    Signal::Recheck(tokens)
                }
            }
            ZkNotice::Extra { timeout, event: SessionEvent::Disconnected } => match self.extras.get(&timeout) {
                Some(e) if e.session.is_some() => Signal::Unreachable,
                _ => Signal::Nothing,
            },
            ZkNotice::Extra { timeout, event: SessionEvent::Reconnected } => {
                let mut tokens: HashSet<String> = HashSet::new();
                for (_, ts) in self.watchers.iter_mut() {
                    for t in ts.iter() {
                        if self.placed.get(t) == Some(&timeout) {
                            tokens.insert(t.to_string());
                        }
                    }
                }
                let placed = &self.placed;
                self.watchers.retain(|_, ts| {
                    ts.retain(|t| placed.get(t) != Some(&timeout));
                    !ts.is_empty()
                });
                let mut tokens: Vec<String> = tokens.into_iter().collect();
                tokens.sort();
                Signal::Reachable(tokens)
            }
            ZkNotice::Watch { path, .. } => match self.watchers.remove(&path) {
                Some(tokens) => Signal::Recheck(tokens.iter().map(|t| t.to_string()).collect()),
                None => Signal::Nothing,
            },
            ZkNotice::Session(SessionEvent::Expired) => {
                if self.session.is_none() && !self.unsignalled_end {
                    // Already told (a second notice of one expiry).
                    return Signal::Nothing;
                }
                self.end_session();
                self.unsignalled_end = false;
                Signal::SessionLost("the ZooKeeper session expired".into())
            }
            // The session may live on, but nothing can be confirmed until the client reconnects:
            // every lease is at risk (it is lost when its validity, counted for half the
            // session from the last confirmation, runs out first). Without a session yet, the
            // waits still learn that the server cannot be reached.
            ZkNotice::Session(SessionEvent::Disconnected) => Signal::Unreachable,
            // Within the same session: nodes are kept and leases are confirmed again at once,
            // but a watch event may have been missed while disconnected, so every waiter looks
            // at its place again.
            ZkNotice::Session(SessionEvent::Reconnected) => {
                self.own_session_back();
                let mut tokens: HashSet<String> = HashSet::new();
                for (_, ts) in self.watchers.drain() {
                    tokens.extend(ts.iter().map(|t| t.to_string()));
                }
                let mut tokens: Vec<String> = tokens.into_iter().collect();
                tokens.sort();
                Signal::Reachable(tokens)
            }
        }
    }

    fn is_idle(&self) -> bool {
        self.jobs.is_idle() && self.ahead.is_empty() && self.stale_in_flight.is_empty() && self.listing.is_empty() && self.closing.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::backend::zookeeper::config::MAX_SESSION_TIMEOUT;

    #[test]
    fn half_the_negotiated_session_timeout_counts() {
        for bad in [Duration::from_millis(99), MAX_SESSION_TIMEOUT + Duration::from_millis(1)] {
            let e = ZooKeeperBackend::new(ZkConfig { session_timeout: bad, ..ZkConfig::default() }).err().expect("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        let b = ZooKeeperBackend::new(ZkConfig { session_timeout: Duration::from_secs(3), ..ZkConfig::default() }).unwrap();
        // Before any session: what was asked for; the negotiated timeout replaces it.
        assert_eq!(b.confirmation_span(""), Some(Duration::from_millis(1500)));
        let mut b = b;
        b.session_reply(Ok(ZkReply::Session { id: 7, timeout: Duration::from_millis(1500) })).unwrap();
        assert_eq!(b.confirmation_span(""), Some(Duration::from_millis(750)));
        assert_eq!(b.session(), Some((7, Duration::from_millis(1500))));
        assert!(b.session_reply(Ok(ZkReply::Deleted)).is_err());
        assert!(b.session_reply(Ok(ZkReply::Session { id: 8, timeout: Duration::ZERO })).is_err());
    }

    #[test]
    fn targets_and_tokens_follow_curator() {
        let b = ZooKeeperBackend::new(ZkConfig::default()).unwrap();
        let o = LockOptions::default();
        let t = b.target("pool", &Primitive::Semaphore { permits: 3 }, &o).unwrap();
        assert_eq!(t, ZkTarget::new("pool", &Primitive::Semaphore { permits: 3 }).unwrap());
        let e = b.target("rw", &Primitive::Read { writers_first: false }, &o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(b.owner_token("0123456789abcdef0123456789abcdef".into()), "01234567-89ab-cdef-0123-456789abcdef");
    }
}
