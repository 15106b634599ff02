//! The ZooKeeper backend of the lock engine (PROTOCOL.md "ZooKeeper"): each engine call becomes
//! a short chain of [`ZkOp`]s performed one after another (find a node a lost reply may have
//! created, create, list, watch the predecessor; check; delete), with Curator's recipes deciding
//! who holds ([`recipe`](super::recipe)) and Curator's names and paths ([`layout`](super::layout)).
//!
//! What the backend keeps is wire state only: the session (its id and negotiated timeout), the
//! nodes each owner token has in it, which watch wakes which token, and the latest instant the
//! ensemble's leader confirmed the session ([`ZooKeeperBackend::confirmed`]). Calls of one
//! token run one after another (a release never races the attempt before it), calls of
//! different tokens side by side.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use super::layout::{self, NodeKind};
use super::recipe::{self, Place};
use super::request::{CreateMode, SessionEvent, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkRequest, ZkResult};
use crate::engine::operation::MAX_BACKOFF;
use crate::engine::{
    Action, Answer, Attempt, Backend, Ctx, Done, LeaderInfo, LockEngine, Pexpire, Purpose, Release, RequestId, Signal,
    Verdict,
};
use crate::error::{Error, ErrorKind, Result};
use crate::options::LockOptions;
use crate::primitive::Primitive;
use crate::random::RandomSource;
use crate::time::{Duration, Instant};

/// The lock engine over a ZooKeeper ensemble. See [`LockEngine`] for the driving contract;
/// requests are [`ZkRequest`]s, replies [`ZkResult`]s, pushes [`ZkNotice`]s.
pub type ZooKeeperEngine = LockEngine<ZooKeeperBackend>;

/// The session timeout a client asks for unless told otherwise: Curator's default (60 s). The
/// ensemble may grant less (by default at most 20 ticks: 40 s with a 2 s tick).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// The shortest session timeout a client may ask for.
pub const MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(100);
/// The longest session timeout a client may ask for (ZooKeeper counts it in an `int` of ms).
pub const MAX_SESSION_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

/// How many steps one call may take before it gives up for now (each is progress: a
/// predecessor went, a lost create was found); a safety net, never reached in practice.
const MAX_STEPS: u32 = 64;

/// Settings of one ZooKeeper client's engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkConfig {
    /// The session timeout asked for; the ensemble's answer (the negotiated timeout) is what
    /// validity is counted from.
    pub session_timeout: Duration,
}

impl Default for ZkConfig {
    fn default() -> Self {
        ZkConfig { session_timeout: DEFAULT_SESSION_TIMEOUT }
    }
}

impl ZkConfig {
    /// Checks the session timeout's range.
    pub fn validate(&self) -> Result<()> {
        if self.session_timeout < MIN_SESSION_TIMEOUT || self.session_timeout > MAX_SESSION_TIMEOUT {
            return Err(Error::invalid(format!(
                "session_timeout must be between {MIN_SESSION_TIMEOUT:?} and {MAX_SESSION_TIMEOUT:?}, got {:?}",
                self.session_timeout
            )));
        }
        Ok(())
    }
}

/// The part of the negotiated session timeout one confirmation is counted for: half. The
/// leader learns of a client's requests through its follower's next ping report (up to half a
/// tick later), and the client may have been silent for a third of the timeout before (the
/// client library's ping period), so a session confirmed at `t` may expire as early as
/// `t + T − T/3 − tick/2`; half of `T` stays below that while `tick ≤ T/4`. PROTOCOL.md §9,
/// "Sessions are leases".
pub fn safe_validity(session_timeout: Duration) -> Duration {
    session_timeout / 2
}

/// Which Curator recipe a lock uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recipe {
    /// `InterProcessMutex`.
    Mutex,
    /// `InterProcessReadWriteLock`'s read lock.
    Read,
    /// `InterProcessReadWriteLock`'s write lock.
    Write,
    /// `InterProcessSemaphoreV2` with this many permits.
    Semaphore {
        /// The permits.
        permits: u32,
    },
    /// `LeaderLatch`, publishing `value` as the node's data.
    Leader {
        /// What observers read.
        value: String,
    },
}

/// A lock as the ZooKeeper backend names it: its base path and recipe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkTarget {
    /// The base path ([`layout::base_path`]).
    pub path: String,
    /// The recipe.
    pub recipe: Recipe,
}

impl ZkTarget {
    /// The kind of node the holder queues with (a semaphore queues on its internal mutex).
    pub fn kind(&self) -> NodeKind {
        match self.recipe {
            Recipe::Mutex | Recipe::Semaphore { .. } => NodeKind::Lock,
            Recipe::Read => NodeKind::Read,
            Recipe::Write => NodeKind::Write,
            Recipe::Leader { .. } => NodeKind::Latch,
        }
    }

    /// Where the queue nodes live: the base path, or a semaphore's `<path>/locks`.
    pub fn queue_dir(&self) -> String {
        match self.recipe {
            Recipe::Semaphore { .. } => layout::child_path(&self.path, layout::SEMAPHORE_LOCKS),
            _ => self.path.clone(),
        }
    }

    /// A semaphore's `<path>/leases`.
    pub fn leases_dir(&self) -> Option<String> {
        match self.recipe {
            Recipe::Semaphore { .. } => Some(layout::child_path(&self.path, layout::SEMAPHORE_LEASES)),
            _ => None,
        }
    }

    fn permits(&self) -> Option<u32> {
        match self.recipe {
            Recipe::Semaphore { permits } => Some(permits),
            _ => None,
        }
    }

    fn data(&self) -> Vec<u8> {
        match &self.recipe {
            Recipe::Leader { value } => value.as_bytes().to_vec(),
            _ => Vec::new(),
        }
    }
}

/// What the backend knows of one node of a token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Slot {
    /// None exists in this session (none created, or it was deleted).
    #[default]
    None,
    /// A create was sent whose reply was not seen: the node may exist (found by its prefix).
    Uncertain,
    /// It exists at `path`, created in transaction `czxid`.
    Known { path: String, czxid: i64 },
}

impl Slot {
    fn path(&self) -> Option<&str> {
        match self {
            Slot::Known { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// The nodes of one owner token in the current session.
#[derive(Clone, Debug, Default)]
struct Owned {
    /// The queue node (mutex, reader, writer, latch, or a semaphore's internal-mutex node).
    node: Slot,
    /// A semaphore's lease node.
    lease: Slot,
}

/// The step a call's request is on.
#[derive(Clone, Debug)]
enum Step {
    /// A `Check` through the leader before `op`: its reply comes only once the server this
    /// client reads from has applied everything the leader ordered before it, so a listing
    /// that follows sees a create whose reply was lost (a follower's own view may lag).
    Sync { next: Box<Step>, op: ZkOp },
    /// Listing the queue directory for a node a lost create may have made.
    FindNode,
    /// Listing a semaphore's leases for a lease a lost create may have made.
    FindLease,
    /// Reading the stat of a node found by prefix: ours only if it belongs to this session.
    Adopt { lease: bool, path: String },
    /// Creating the queue node.
    CreateNode,
    /// Creating a semaphore's lease node.
    CreateLease,
    /// Listing the queue to learn our place.
    List,
    /// Reading the node to wait behind, setting a watch on it.
    Watch { watch: String },
    /// Counting a semaphore's leases (with a child watch while waiting).
    Count,
    /// Checking the holder node through the leader before a grant (the session's last
    /// confirmation is too old to count a lease from).
    Confirm,
    /// Deleting a semaphore's internal-mutex node once its lease holds (no answer).
    Unlock,
    /// A renewal or extend: checking the holder node through the leader.
    Check,
    /// A release: listing directories where a lost create may have left a node.
    Sweep { dirs: Vec<String>, deletes: Vec<(String, bool)> },
    /// A release: deleting each node (and whether it is the holder node).
    Delete { rest: Vec<(String, bool)>, was_held: bool },
    /// An observe: listing the candidates.
    ObserveList,
    /// An observe: reading the leader's node.
    ObserveData,
}

/// One engine call in progress (or a background step with no purpose).
#[derive(Clone, Debug)]
struct Job {
    purpose: Option<Purpose>,
    target: Arc<ZkTarget>,
    token: Arc<str>,
    epoch: u64,
    lease: Duration,
    once: bool,
    steps: u32,
    step: Step,
    /// When the current request was sent.
    sent: Instant,
}

/// What the backend knows of its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct SessionInfo {
    id: i64,
    timeout: Duration,
}

/// The ZooKeeper backend: Curator's recipes over one session per client.
pub struct ZooKeeperBackend {
    config: ZkConfig,
    session: Option<SessionInfo>,
    /// Incremented whenever a session ends or a new one opens: replies to calls of an older
    /// epoch speak of nodes that died with their session.
    epoch: u64,
    /// The send time of the latest request the leader answered in this session (a write,
    /// refused or not): the session was alive then, so it lives at least a session timeout
    /// after it.
    confirmed: Option<Instant>,
    owned: HashMap<Arc<str>, Owned>,
    /// Watched path → tokens to re-check when it fires.
    watchers: HashMap<String, Vec<Arc<str>>>,
    in_flight: HashMap<RequestId, Job>,
    /// Tokens with a call in progress, and the calls waiting behind it.
    busy: HashMap<Arc<str>, VecDeque<Job>>,
    /// Answers settled without a request, handed over at the next `on_timeout`.
    ready: Vec<Answer>,
    ready_at: Option<Instant>,
    /// A reply said the session expired, and the engine was not told yet (the transport's
    /// expiry notice tells it).
    unsignalled_end: bool,
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
            in_flight: HashMap::new(),
            busy: HashMap::new(),
            ready: Vec::new(),
            ready_at: None,
            unsignalled_end: false,
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
    fn session_timeout(&self) -> Duration {
        self.session.map_or(self.config.session_timeout, |s| s.timeout)
    }

    fn confirm(&mut self, sent: Instant) {
        self.confirmed = Some(self.confirmed.map_or(sent, |c| c.max(sent)));
    }

    /// Forgets the session and everything that lived in it.
    fn end_session(&mut self) {
        self.session = None;
        self.epoch += 1;
        self.confirmed = None;
        self.owned.clear();
        self.watchers.clear();
    }

    // ---- running calls ----

    /// Starts `job` now, or after the call of its token in progress.
    fn submit(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        if let Some(queue) = self.busy.get_mut(&job.token) {
            queue.push_back(job);
            return;
        }
        self.busy.insert(Arc::clone(&job.token), VecDeque::new());
        self.start(ctx, job, answers);
    }

    /// The call of `token` in progress ended: starts the next one.
    fn finished(&mut self, ctx: &mut Ctx<'_, ZkRequest>, token: &Arc<str>, answers: &mut Vec<Answer>) {
        let next = self.busy.get_mut(token).and_then(VecDeque::pop_front);
        match next {
            Some(job) => self.start(ctx, job, answers),
            None => {
                self.busy.remove(token);
            }
        }
    }

    fn start(&mut self, ctx: &mut Ctx<'_, ZkRequest>, mut job: Job, answers: &mut Vec<Answer>) {
        job.epoch = self.epoch;
        match job.purpose {
            Some(Purpose::Acquire(_)) => self.acquire_next(ctx, job, answers),
            Some(Purpose::Renew(..) | Purpose::Extend(..)) => {
                let owned = self.owned.get(&job.token).cloned().unwrap_or_default();
                let holder = if job.target.permits().is_some() { owned.lease } else { owned.node };
                match holder {
                    Slot::Known { path, .. } if self.session.is_some() => {
                        self.send(ctx, job, Step::Check, ZkOp::Check { path, version: None });
                    }
                    _ => {
                        let subject = "the lock node is gone (its ZooKeeper session ended)".to_string();
                        self.settle(ctx, job, None, Verdict::Pexpire(Pexpire::Refused { subject }), answers);
                    }
                }
            }
            Some(Purpose::Release(..) | Purpose::Cleanup(_)) => self.release_start(ctx, job, answers),
            Some(Purpose::Observe(_)) | None => unreachable!("observes and background steps are sent directly"),
        }
    }

    fn send(&mut self, ctx: &mut Ctx<'_, ZkRequest>, mut job: Job, step: Step, op: ZkOp) {
        let id = ctx.ids.request();
        job.step = step;
        job.sent = ctx.now;
        job.steps += 1;
        self.in_flight.insert(id, job);
        ctx.out.push_back(ZkRequest { id, op });
    }

    /// Ends `job` with `verdict` (dated `sent`, or the job's last send), then starts the next
    /// call of its token.
    fn settle(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, sent: Option<Instant>, verdict: Verdict, answers: &mut Vec<Answer>) {
        let Some(purpose) = job.purpose else {
            return;
        };
        answers.push(Answer { purpose, sent: sent.unwrap_or(job.sent), verdict });
        if !matches!(purpose, Purpose::Observe(_)) {
            self.finished(ctx, &job.token, answers);
        }
    }
}

// ---- the recipes' steps ----
impl ZooKeeperBackend {
    /// The next step of an acquire, from what is known of its token's nodes.
    fn acquire_next(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        if self.session.is_none() || job.epoch != self.epoch {
            let e = Error::new(ErrorKind::Connection, "the ZooKeeper session ended; waiting for a new one");
            return self.settle_attempt(ctx, job, attempt_transient(e), answers);
        }
        if job.steps >= MAX_STEPS {
            let e = Error::new(ErrorKind::Connection, "the lock's queue kept changing; trying again");
            return self.settle_attempt(ctx, job, attempt_transient(e), answers);
        }
        let target = Arc::clone(&job.target);
        let owned = self.owned.entry(Arc::clone(&job.token)).or_default().clone();
        if let Some(leases) = target.leases_dir() {
            match owned.lease {
                Slot::Known { .. } => return self.send_count(ctx, job),
                Slot::Uncertain => {
                    let list = ZkOp::Children { path: leases.clone(), watch: false };
                    return self.send_synced(ctx, job, &leases, Step::FindLease, list);
                }
                Slot::None => {}
            }
        }
        let dir = target.queue_dir();
        match owned.node {
            Slot::Known { .. } => self.send(ctx, job, Step::List, ZkOp::Children { path: dir, watch: false }),
            Slot::Uncertain => {
                let list = ZkOp::Children { path: dir.clone(), watch: false };
                self.send_synced(ctx, job, &dir, Step::FindNode, list);
            }
            Slot::None => {
                let path = layout::create_path(&dir, &job.token, target.kind().lock_name());
                self.slots(&job.token).node = Slot::Uncertain;
                let op = ZkOp::Create { path, data: target.data(), mode: CreateMode::EphemeralSequential };
                self.send(ctx, job, Step::CreateNode, op);
            }
        }
    }

    fn slots(&mut self, token: &Arc<str>) -> &mut Owned {
        self.owned.entry(Arc::clone(token)).or_default()
    }

    /// Sends `op` for `step` after a [`Step::Sync`] on `path`.
    fn send_synced(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, path: &str, step: Step, op: ZkOp) {
        let sync = Step::Sync { next: Box::new(step), op };
        self.send(ctx, job, sync, ZkOp::Check { path: path.to_string(), version: None });
    }

    fn send_count(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job) {
        let leases = job.target.leases_dir().expect("only semaphores count leases");
        if !job.once {
            self.watch(&leases, &job.token);
        }
        let watch = !job.once;
        self.send(ctx, job, Step::Count, ZkOp::Children { path: leases, watch });
    }

    /// Notes that a watch on `path` wakes `token`.
    fn watch(&mut self, path: &str, token: &Arc<str>) {
        let tokens = self.watchers.entry(path.to_string()).or_default();
        if !tokens.iter().any(|t| t == token) {
            tokens.push(Arc::clone(token));
        }
    }

    /// Forgets every watch that would wake `token`.
    fn unwatch(&mut self, token: &str) {
        self.watchers.retain(|_, tokens| {
            tokens.retain(|t| &**t != token);
            !tokens.is_empty()
        });
    }

    fn settle_attempt(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, attempt: Attempt, answers: &mut Vec<Answer>) {
        self.settle(ctx, job, None, Verdict::Attempt(attempt), answers);
    }

    /// The holder node of `job`'s token: its lease for a semaphore, else its queue node.
    fn holder(&self, job: &Job) -> Slot {
        let owned = self.owned.get(&job.token).cloned().unwrap_or_default();
        if job.target.permits().is_some() {
            owned.lease
        } else {
            owned.node
        }
    }

    /// The token holds: grant, after checking the holder node through the leader if the
    /// session's last confirmation is too old to count the lease from.
    fn grant_or_confirm(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        let Slot::Known { path, .. } = self.holder(&job) else {
            let e = Error::new(ErrorKind::Connection, "the lock node vanished; trying again");
            return self.settle_attempt(ctx, job, attempt_transient(e), answers);
        };
        let span = job.lease.min(safe_validity(self.session_timeout()));
        let fresh = self.confirmed.is_some_and(|c| ctx.now.saturating_duration_since(c) <= span / 3);
        if fresh {
            self.grant(ctx, job, answers);
        } else {
            self.send(ctx, job, Step::Confirm, ZkOp::Check { path, version: None });
        }
    }

    fn grant(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        let (Slot::Known { czxid, .. }, Some(confirmed)) = (self.holder(&job), self.confirmed) else {
            let e = Error::new(ErrorKind::Connection, "the lock node vanished; trying again");
            return self.settle_attempt(ctx, job, attempt_transient(e), answers);
        };
        self.unwatch(&job.token);
        if job.target.permits().is_some() {
            // InterProcessSemaphoreV2 gives its internal mutex back once the lease holds.
            if let Some(path) = self.owned.get(&job.token).and_then(|o| o.node.path()).map(str::to_string) {
                let unlock = Job { purpose: None, steps: 0, ..job.clone() };
                self.send(ctx, unlock, Step::Unlock, ZkOp::Delete { path, version: None });
            }
        }
        // The lease is counted from the last instant the leader vouched for the session: the
        // node lives at least as long as the session, which lives a session timeout past it.
        let verdict = Verdict::Attempt(Attempt::Granted { fence: Some(czxid as u64), granted: job.lease });
        self.settle(ctx, job, Some(confirmed), verdict, answers);
    }

    /// Handles the reply to one step of an acquire.
    fn acquire_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        if job.epoch != self.epoch {
            return self.acquire_next(ctx, job, answers);
        }
        let target = Arc::clone(&job.target);
        let token = Arc::clone(&job.token);
        match (job.step.clone(), reply) {
            (Step::FindNode, Ok(ZkReply::Children(kids))) => {
                match layout::find_owned(&kids, &token, target.kind()) {
                    Some(name) => {
                        let path = layout::child_path(&target.queue_dir(), name);
                        self.send(ctx, job, Step::Adopt { lease: false, path: path.clone() }, ZkOp::Exists { path, watch: false });
                    }
                    None => {
                        self.slots(&token).node = Slot::None;
                        self.acquire_next(ctx, job, answers);
                    }
                }
            }
            (Step::FindLease, Ok(ZkReply::Children(kids))) => match layout::find_owned(&kids, &token, NodeKind::Lease) {
                Some(name) => {
                    let path = layout::child_path(&target.leases_dir().unwrap_or_default(), name);
                    self.send(ctx, job, Step::Adopt { lease: true, path: path.clone() }, ZkOp::Exists { path, watch: false });
                }
                None => {
                    self.slots(&token).lease = Slot::None;
                    self.acquire_next(ctx, job, answers);
                }
            },
            (Step::FindNode, Err(ZkFailure::NoNode)) => {
                self.slots(&token).node = Slot::None;
                self.acquire_next(ctx, job, answers);
            }
            (Step::FindLease, Err(ZkFailure::NoNode)) => {
                self.slots(&token).lease = Slot::None;
                self.acquire_next(ctx, job, answers);
            }
            (Step::Adopt { lease, path }, Ok(ZkReply::Exists(stat))) => {
                let session = self.session.map(|s| s.id);
                // A node of an earlier session of ours dies with it: not ours to hold.
                let slot = match stat {
                    Some(stat) if Some(stat.ephemeral_owner) == session => Slot::Known { path, czxid: stat.czxid },
                    _ => Slot::None,
                };
                let owned = self.slots(&token);
                if lease {
                    owned.lease = slot;
                } else {
                    owned.node = slot;
                }
                self.acquire_next(ctx, job, answers);
            }
            (Step::CreateNode, Ok(ZkReply::Created { path, stat })) => {
                self.confirm(job.sent);
                self.slots(&token).node = Slot::Known { path, czxid: stat.czxid };
                self.acquire_next(ctx, job, answers);
            }
            (Step::CreateLease, Ok(ZkReply::Created { path, stat })) => {
                self.confirm(job.sent);
                self.slots(&token).lease = Slot::Known { path, czxid: stat.czxid };
                self.acquire_next(ctx, job, answers);
            }
            // A parent container was reaped between its creation and ours: create again.
            (Step::CreateNode, Err(ZkFailure::NoNode | ZkFailure::NodeExists)) => {
                self.confirm(job.sent);
                self.slots(&token).node = Slot::None;
                self.acquire_next(ctx, job, answers);
            }
            (Step::CreateLease, Err(ZkFailure::NoNode | ZkFailure::NodeExists)) => {
                self.confirm(job.sent);
                self.slots(&token).lease = Slot::None;
                self.acquire_next(ctx, job, answers);
            }
            (Step::List, Ok(ZkReply::Children(kids))) => {
                let ours = self.owned.get(&token).and_then(|o| o.node.path()).map(|p| layout::node_name(p).to_string());
                let place = match ours {
                    Some(ours) => recipe::place(target.kind(), kids, &ours),
                    None => Place::Missing,
                };
                match place {
                    Place::Missing => self.vanished(ctx, job, false, answers),
                    Place::Holds => match target.leases_dir() {
                        // The semaphore's internal mutex is ours: take a lease under it.
                        Some(leases) => {
                            let path = layout::create_path(&leases, &token, layout::LEASE_NAME);
                            self.slots(&token).lease = Slot::Uncertain;
                            let op = ZkOp::Create { path, data: Vec::new(), mode: CreateMode::EphemeralSequential };
                            self.send(ctx, job, Step::CreateLease, op);
                        }
                        None => self.grant_or_confirm(ctx, job, answers),
                    },
                    Place::Waits { .. } if job.once => {
                        let why = "another owner holds it".to_string();
                        self.settle_attempt(ctx, job, Attempt::Refused { why }, answers);
                    }
                    Place::Waits { watch } => {
                        let path = layout::child_path(&target.queue_dir(), &watch);
                        self.watch(&path, &token);
                        self.send(ctx, job, Step::Watch { watch: path.clone() }, ZkOp::GetData { path, watch: true });
                    }
                }
            }
            (Step::List, Err(ZkFailure::NoNode)) => self.vanished(ctx, job, false, answers),
            (Step::Watch { .. }, Ok(ZkReply::Data(..))) => {
                let verdict = Attempt::Queued { holder_remaining: None, fence: 0 };
                self.settle_attempt(ctx, job, verdict, answers);
            }
            // The predecessor went before the watch was set: look again.
            (Step::Watch { watch }, Err(ZkFailure::NoNode)) => {
                if let Some(tokens) = self.watchers.get_mut(&watch) {
                    tokens.retain(|t| *t != token);
                    if tokens.is_empty() {
                        self.watchers.remove(&watch);
                    }
                }
                self.acquire_next(ctx, job, answers);
            }
            (Step::Count, Ok(ZkReply::Children(kids))) => {
                let ours = self.owned.get(&token).and_then(|o| o.lease.path()).map(|p| layout::node_name(p).to_string());
                let permits = target.permits().unwrap_or(1);
                match ours.and_then(|ours| recipe::lease_holds(&kids, &ours, permits)) {
                    None => self.vanished(ctx, job, true, answers),
                    Some(true) => self.grant_or_confirm(ctx, job, answers),
                    Some(false) if job.once => {
                        let why = format!("all {permits} permits are taken");
                        self.settle_attempt(ctx, job, Attempt::Refused { why }, answers);
                    }
                    Some(false) => {
                        let verdict = Attempt::Queued { holder_remaining: None, fence: 0 };
                        self.settle_attempt(ctx, job, verdict, answers);
                    }
                }
            }
            (Step::Count, Err(ZkFailure::NoNode)) => self.vanished(ctx, job, true, answers),
            (Step::Confirm, Ok(ZkReply::Checked)) => {
                self.confirm(job.sent);
                self.grant(ctx, job, answers);
            }
            (Step::Confirm, Err(ZkFailure::NoNode | ZkFailure::BadVersion)) => {
                let lease = target.permits().is_some();
                self.vanished(ctx, job, lease, answers)
            }
            (_, Err(f)) => {
                if matches!(f, ZkFailure::SessionExpired) {
                    self.end_session_by_reply();
                }
                let attempt = attempt_failure(f);
                self.settle_attempt(ctx, job, attempt, answers);
            }
            (step, Ok(other)) => {
                let e = Error::protocol(format!("ZooKeeper answered {step:?} with {other:?}"));
                self.settle_attempt(ctx, job, Attempt::Failed { error: e, undo: true }, answers);
            }
        }
    }

    /// Our node (or lease) is gone while the session lives (deleted by someone, or the
    /// session is expiring): forget it and try again with a new one.
    fn vanished(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, lease: bool, answers: &mut Vec<Answer>) {
        let owned = self.slots(&job.token);
        if lease {
            owned.lease = Slot::None;
        } else {
            owned.node = Slot::None;
        }
        let e = Error::new(ErrorKind::Connection, "the lock node vanished; trying again");
        self.settle_attempt(ctx, job, attempt_transient(e), answers);
    }

    /// A reply said the session expired: everything in it is gone. The transport also pushes
    /// [`SessionEvent::Expired`], which tells the engine.
    fn end_session_by_reply(&mut self) {
        if self.session.is_some() {
            self.end_session();
            self.unsignalled_end = true;
        }
    }

    /// Handles the reply to a renewal's or extend's check.
    fn check_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        let gone = |subject: &str| Verdict::Pexpire(Pexpire::Refused { subject: subject.to_string() });
        if job.epoch != self.epoch {
            return self.settle(ctx, job, None, gone("the ZooKeeper session ended"), answers);
        }
        let verdict = match reply {
            Ok(ZkReply::Checked) => {
                self.confirm(job.sent);
                Verdict::Pexpire(Pexpire::Confirmed)
            }
            Err(ZkFailure::NoNode | ZkFailure::BadVersion) => {
                let owned = self.slots(&job.token);
                if job.target.permits().is_some() {
                    owned.lease = Slot::None;
                } else {
                    owned.node = Slot::None;
                }
                gone("the lock node was deleted")
            }
            Err(ZkFailure::SessionExpired) => {
                self.end_session_by_reply();
                gone("the ZooKeeper session expired")
            }
            Err(ZkFailure::ConnectionLoss(why)) => Verdict::Pexpire(Pexpire::Transient(connection_lost(&why))),
            Err(ZkFailure::Other(e)) if e.retryable() => Verdict::Pexpire(Pexpire::Transient(e)),
            Err(ZkFailure::Other(e)) => Verdict::Pexpire(Pexpire::Failed(e)),
            other => Verdict::Pexpire(Pexpire::Failed(Error::protocol(format!("ZooKeeper answered a check with {other:?}")))),
        };
        self.settle(ctx, job, None, verdict, answers);
    }

    /// Starts a release: delete the token's known nodes, after finding any a lost create left.
    fn release_start(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, answers: &mut Vec<Answer>) {
        let owned = match self.session {
            Some(_) => self.owned.get(&job.token).cloned().unwrap_or_default(),
            // Without a session every ephemeral node of ours is gone already.
            None => Owned::default(),
        };
        let semaphore = job.target.permits().is_some();
        let mut dirs = Vec::new();
        if owned.node == Slot::Uncertain {
            dirs.push(job.target.queue_dir());
        }
        if owned.lease == Slot::Uncertain {
            dirs.extend(job.target.leases_dir());
        }
        let mut deletes = Vec::new();
        if let Some(p) = owned.lease.path() {
            deletes.push((p.to_string(), true));
        }
        if let Some(p) = owned.node.path() {
            deletes.push((p.to_string(), !semaphore));
        }
        if let Some(dir) = dirs.first().cloned() {
            // A create whose fate is unknown: find its node once this server has caught up.
            let op = ZkOp::Children { path: dir.clone(), watch: false };
            return self.send_synced(ctx, job, &dir, Step::Sweep { dirs, deletes }, op);
        }
        self.release_next(ctx, job, dirs, deletes, false, answers);
    }

    /// The next step of a release: sweep a directory, delete a node, or finish.
    fn release_next(
        &mut self,
        ctx: &mut Ctx<'_, ZkRequest>,
        job: Job,
        dirs: Vec<String>,
        deletes: Vec<(String, bool)>,
        was_held: bool,
        answers: &mut Vec<Answer>,
    ) {
        if let Some(dir) = dirs.first() {
            let op = ZkOp::Children { path: dir.clone(), watch: false };
            return self.send(ctx, job, Step::Sweep { dirs, deletes }, op);
        }
        if !deletes.is_empty() {
            let path = deletes[0].0.clone();
            return self.send(ctx, job, Step::Delete { rest: deletes, was_held }, ZkOp::Delete { path, version: None });
        }
        // Every node of the token is gone: forget it.
        self.owned.remove(&job.token);
        self.unwatch(&job.token);
        self.settle(ctx, job, None, Verdict::Release(Release::Done { was_held }), answers);
    }

    /// Handles the reply to one step of a release.
    fn release_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        if job.epoch != self.epoch {
            // The session ended meanwhile: its nodes went with it.
            return self.settle(ctx, job, None, Verdict::Release(Release::Done { was_held: false }), answers);
        }
        match (job.step.clone(), reply) {
            (Step::Sweep { mut dirs, mut deletes }, Ok(ZkReply::Children(kids))) => {
                let dir = dirs.remove(0);
                let holds = job.target.leases_dir().is_none_or(|l| l == dir);
                let mut found = None;
                for name in layout::owned_by(&kids, &job.token) {
                    let path = layout::child_path(&dir, name);
                    found.get_or_insert_with(|| path.clone());
                    if !deletes.iter().any(|(p, _)| *p == path) {
                        deletes.push((path, holds));
                    }
                }
                // What the lost create made is known now: a retry of this release deletes it
                // by path even if this delete's reply is lost too.
                self.resolve_uncertain(&job, &dir, found);
                self.release_next(ctx, job, dirs, deletes, false, answers);
            }
            (Step::Sweep { mut dirs, deletes }, Err(ZkFailure::NoNode)) => {
                let dir = dirs.remove(0);
                self.resolve_uncertain(&job, &dir, None);
                self.release_next(ctx, job, dirs, deletes, false, answers);
            }
            (Step::Delete { mut rest, was_held }, reply @ (Ok(ZkReply::Deleted) | Err(ZkFailure::NoNode))) => {
                let (path, holds) = rest.remove(0);
                if let Some(owned) = self.owned.get_mut(&job.token) {
                    for slot in [&mut owned.node, &mut owned.lease] {
                        if slot.path() == Some(path.as_str()) {
                            *slot = Slot::None;
                        }
                    }
                }
                let was_held = was_held || (holds && reply.is_ok());
                self.release_next(ctx, job, Vec::new(), rest, was_held, answers);
            }
            (_, Err(ZkFailure::SessionExpired)) => {
                self.end_session_by_reply();
                self.settle(ctx, job, None, Verdict::Release(Release::Done { was_held: false }), answers);
            }
            (_, Err(ZkFailure::ConnectionLoss(why))) => {
                let verdict = Release::Unconfirmed { error: connection_lost(&why), retry: true };
                self.settle(ctx, job, None, Verdict::Release(verdict), answers);
            }
            (_, Err(ZkFailure::Other(e))) => {
                let retry = e.retryable();
                self.settle(ctx, job, None, Verdict::Release(Release::Unconfirmed { error: e, retry }), answers);
            }
            (step, other) => {
                let e = Error::protocol(format!("ZooKeeper answered {step:?} with {other:?}"));
                self.settle(ctx, job, None, Verdict::Release(Release::Failed(e)), answers);
            }
        }
    }

    /// A sweep of `dir` found what a lost create there left (`found`, or nothing): the slot is
    /// no longer unknown.
    fn resolve_uncertain(&mut self, job: &Job, dir: &str, found: Option<String>) {
        let lease = job.target.leases_dir().is_some_and(|l| l == dir);
        if let Some(owned) = self.owned.get_mut(&job.token) {
            let slot = if lease { &mut owned.lease } else { &mut owned.node };
            if *slot == Slot::Uncertain {
                // Its czxid is not needed to delete it (it holds nothing any more).
                *slot = found.map_or(Slot::None, |path| Slot::Known { path, czxid: 0 });
            }
        }
    }

    /// Handles the reply to one step of an observe.
    fn observe_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, job: Job, reply: ZkResult, answers: &mut Vec<Answer>) {
        let observed = |r: Result<Option<LeaderInfo>>| Verdict::Observed(r);
        match (job.step.clone(), reply) {
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

/// The error a failed request stands for.
fn failure_error(f: ZkFailure) -> Error {
    match f {
        ZkFailure::ConnectionLoss(why) => connection_lost(&why),
        ZkFailure::SessionExpired => Error::new(ErrorKind::Connection, "the ZooKeeper session expired"),
        ZkFailure::Other(e) => e,
        other => Error::protocol(format!("unexpected ZooKeeper failure: {other}")),
    }
}

fn connection_lost(why: &str) -> Error {
    Error::new(ErrorKind::Connection, format!("ZooKeeper connection lost: {why}"))
}

/// A retryable attempt failure: the node it may have created is kept (found again by its
/// prefix), not undone.
fn attempt_transient(error: Error) -> Attempt {
    let why = Some(error.message().to_string());
    Attempt::Transient { error, why, undo: false }
}

fn attempt_failure(f: ZkFailure) -> Attempt {
    let error = failure_error(f);
    if error.retryable() {
        attempt_transient(error)
    } else {
        Attempt::Failed { error, undo: true }
    }
}

impl Backend for ZooKeeperBackend {
    type Target = ZkTarget;
    type Request = ZkRequest;
    type Reply = ZkResult;
    type Notice<'a> = ZkNotice;
    type Outcome = Done;

    fn target(&self, name: &str, primitive: &Primitive, _options: &LockOptions) -> Result<ZkTarget> {
        let recipe = match primitive {
            Primitive::Mutex => Recipe::Mutex,
            Primitive::Read { writers_first: true } => Recipe::Read,
            Primitive::Read { writers_first: false } => {
                return Err(Error::unsupported(
                    "readers-first read-write locks are not supported by a ZooKeeper client: Curator's \
                     read-write lock queues every reader behind the writers before it (use writers_first)",
                ))
            }
            Primitive::Write => Recipe::Write,
            Primitive::Semaphore { permits } => Recipe::Semaphore { permits: *permits },
            Primitive::Leader { value } => Recipe::Leader { value: value.clone() },
        };
        Ok(ZkTarget { path: layout::base_path(name, primitive)?, recipe })
    }

    fn check_observe(&self) -> Result<()> {
        Ok(())
    }

    /// Curator's protected-mode id: a UUID.
    fn owner_token(&self, random_hex: String) -> String {
        layout::owner_uuid(&random_hex)
    }

    /// One confirmation proves the session alive at its send time, and the session (with every
    /// node in it) then lives about the negotiated timeout more: half of it counts.
    fn confirmation_span(&self) -> Option<Duration> {
        Some(safe_validity(self.session_timeout()))
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
        ctx.out.push_back(ZkRequest { id, op: ZkOp::OpenSession });
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
                self.session = Some(SessionInfo { id, timeout });
                Ok(())
            }
            Ok(other) => Err(Error::protocol(format!("ZooKeeper answered the session request with {other:?}"))),
            Err(f) => Err(failure_error(f)),
        }
    }

    fn call(&mut self, ctx: &mut Ctx<'_, ZkRequest>, purpose: Purpose, action: Action<'_, ZkTarget>) {
        let (target, token, lease, once) = match action {
            Action::Acquire { target, token, lease, once, .. } => (target, token, lease, once),
            Action::Extend { target, token, duration } => (target, token, duration, false),
            Action::Release { target, token } => (target, token, Duration::ZERO, false),
            Action::Observe { target } => {
                let job = Job {
                    purpose: Some(purpose),
                    target: Arc::clone(target),
                    token: Arc::from(""),
                    epoch: self.epoch,
                    lease: Duration::ZERO,
                    once: true,
                    steps: 0,
                    step: Step::ObserveList,
                    sent: ctx.now,
                };
                let path = target.path.clone();
                return self.send(ctx, job, Step::ObserveList, ZkOp::Children { path, watch: false });
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
        // A call settled without a request is answered at the next timeout (`call` cannot
        // answer), which is due at once.
        let mut answers = Vec::new();
        self.submit(ctx, job, &mut answers);
        if !answers.is_empty() {
            self.ready.append(&mut answers);
            self.ready_at = Some(self.ready_at.map_or(ctx.now, |t| t.min(ctx.now)));
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, ZkRequest>, id: RequestId, reply: ZkResult, answers: &mut Vec<Answer>) {
        let Some(job) = self.in_flight.remove(&id) else {
            return;
        };
        if let Step::Sync { next, op } = &job.step {
            // Answered by the leader (the path exists or not): the session was alive, and this
            // server has caught up. Anything else goes to the call's own handling below.
            if job.epoch == self.epoch && matches!(reply, Ok(ZkReply::Checked) | Err(ZkFailure::NoNode | ZkFailure::BadVersion)) {
                self.confirm(job.sent);
                let (next, op) = ((**next).clone(), op.clone());
                return self.send(ctx, job, next, op);
            }
        }
        match job.purpose {
            // The semaphore's internal mutex given back (the only step without a purpose).
            None => {
                if job.epoch == self.epoch {
                    match &reply {
                        Ok(ZkReply::Deleted) | Err(ZkFailure::NoNode) => {
                            if let Some(owned) = self.owned.get_mut(&job.token) {
                                owned.node = Slot::None;
                            }
                        }
                        Err(ZkFailure::SessionExpired) => self.end_session_by_reply(),
                        // Not confirmed: the release deletes it with the lease.
                        _ => {}
                    }
                }
            }
            Some(Purpose::Acquire(_)) => self.acquire_reply(ctx, job, reply, answers),
            Some(Purpose::Renew(..) | Purpose::Extend(..)) => self.check_reply(ctx, job, reply, answers),
            Some(Purpose::Release(..) | Purpose::Cleanup(_)) => self.release_reply(ctx, job, reply, answers),
            Some(Purpose::Observe(_)) => self.observe_reply(ctx, job, reply, answers),
        }
    }

    fn on_notice(&mut self, _ctx: &mut Ctx<'_, ZkRequest>, notice: ZkNotice, _answers: &mut Vec<Answer>) -> Signal {
        match notice {
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
            ZkNotice::Session(SessionEvent::Disconnected) => Signal::Nothing,
            // Within the same session: nodes are kept, but a watch event may have been missed
            // while disconnected, so every waiter looks at its place again.
            ZkNotice::Session(SessionEvent::Reconnected) => {
                let mut tokens: HashSet<String> = HashSet::new();
                for (_, ts) in self.watchers.drain() {
                    tokens.extend(ts.iter().map(|t| t.to_string()));
                }
                let mut tokens: Vec<String> = tokens.into_iter().collect();
                tokens.sort();
                if tokens.is_empty() {
                    Signal::Nothing
                } else {
                    Signal::Recheck(tokens)
                }
            }
        }
    }

    fn on_timeout(&mut self, ctx: &mut Ctx<'_, ZkRequest>, answers: &mut Vec<Answer>) {
        if self.ready_at.is_some_and(|t| t <= ctx.now) {
            answers.append(&mut self.ready);
            self.ready_at = None;
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.ready_at
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.ready.is_empty() && self.busy.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_timeouts_are_checked_and_half_counts() {
        assert_eq!(ZkConfig::default().session_timeout, Duration::from_secs(60));
        ZkConfig::default().validate().unwrap();
        for bad in [Duration::from_millis(99), MAX_SESSION_TIMEOUT + Duration::from_millis(1)] {
            let e = ZooKeeperBackend::new(ZkConfig { session_timeout: bad }).err().expect("refused");
            assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
        assert_eq!(safe_validity(Duration::from_secs(6)), Duration::from_secs(3));
        let b = ZooKeeperBackend::new(ZkConfig { session_timeout: Duration::from_secs(3) }).unwrap();
        // Before any session: what was asked for; the negotiated timeout replaces it.
        assert_eq!(b.confirmation_span(), Some(Duration::from_millis(1500)));
        let mut b = b;
        b.session_reply(Ok(ZkReply::Session { id: 7, timeout: Duration::from_millis(1500) })).unwrap();
        assert_eq!(b.confirmation_span(), Some(Duration::from_millis(750)));
        assert_eq!(b.session(), Some((7, Duration::from_millis(1500))));
        assert!(b.session_reply(Ok(ZkReply::Deleted)).is_err());
        assert!(b.session_reply(Ok(ZkReply::Session { id: 8, timeout: Duration::ZERO })).is_err());
    }

    #[test]
    fn failures_map_to_the_engines_verdicts() {
        let loss = attempt_failure(ZkFailure::ConnectionLoss("reset".into()));
        assert!(matches!(&loss, Attempt::Transient { error, undo: false, .. } if error.kind() == ErrorKind::Connection && error.retryable()), "{loss:?}");
        let expired = attempt_failure(ZkFailure::SessionExpired);
        assert!(matches!(&expired, Attempt::Transient { undo: false, .. }), "{expired:?}");
        let auth = attempt_failure(ZkFailure::Other(Error::new(ErrorKind::Authentication, "no auth")));
        assert!(matches!(&auth, Attempt::Failed { error, undo: true } if error.kind() == ErrorKind::Authentication), "{auth:?}");
        assert_eq!(failure_error(ZkFailure::NotEmpty).kind(), ErrorKind::Protocol);
    }

    #[test]
    fn targets_follow_the_layout_and_refuse_what_curator_lacks() {
        let b = ZooKeeperBackend::new(ZkConfig::default()).unwrap();
        let o = LockOptions::default();
        let t = b.target("pool", &Primitive::Semaphore { permits: 3 }, &o).unwrap();
        assert_eq!((t.path.as_str(), t.queue_dir(), t.leases_dir()), ("/lockgate/semaphore/pool", "/lockgate/semaphore/pool/locks".to_string(), Some("/lockgate/semaphore/pool/leases".to_string())));
        assert_eq!(t.kind(), NodeKind::Lock);
        let l = b.target("/svc/leader", &Primitive::Leader { value: "me".into() }, &o).unwrap();
        assert_eq!((l.path.as_str(), l.kind(), l.data()), ("/svc/leader", NodeKind::Latch, b"me".to_vec()));
        let e = b.target("rw", &Primitive::Read { writers_first: false }, &o).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(b.target("a//b", &Primitive::Mutex, &o).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(b.owner_token("0123456789abcdef0123456789abcdef".into()), "01234567-89ab-cdef-0123-456789abcdef");
    }
}
