//! The backend-agnostic, sans-IO lock engine: pending acquires (deadline, cancel, backoff),
//! held leases (validity from send time, renewal, extends on the wire, spells at risk, loss,
//! reentrant holds), background cleanups, the backend's session and one ordered timer table,
//! driven by one contract for every backend. A backend ([`Backend`]) says how each step is
//! spoken on its wire.
//!
//! `tests/engine_backend.rs` is a complete backend (ZooKeeper-shaped, over an in-memory server)
//! written against [`Backend`] alone: the template for a new backend folder.
//!
//! This folder imports nothing from any backend folder (`tests/engine_layering.rs` checks it).

/// A [`Ctx`] borrowing the engine's fields (not `self`, so the backend can be borrowed too).
macro_rules! ctx {
    ($self:ident, $now:expr) => {
        &mut Ctx { now: $now, ids: &mut $self.ids, out: &mut $self.outgoing, rng: $self.rng.as_mut() }
    };
}

pub mod backend;
mod adopting;
mod breaking;
mod cleanup;
mod ids;
pub mod io;
pub mod metrics;
pub mod numbering;
// The runner of multi-step calls: a build without a backend that has them leaves it unused.
#[allow(dead_code)]
pub(crate) mod job;
mod lease;
mod listing;
pub mod operation;
mod session;
pub mod telemetry;
mod risk;
pub(crate) mod timers;
mod verdicts;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::inspect::Kind;
use crate::options::{self, LockOptions};
use crate::random::RandomSource;
use crate::time::{Duration, Instant};

pub use backend::{Action, Answer, Attempt, Backend, Ctx, Ids, Renewal, Purpose, Release, Signal, Verdict, Wake};
pub use ids::{LeaseId, OpId, RequestId};
pub use io::{Done, Event, LeaderInfo, Outcome, Primitive, Wait};
use cleanup::Cleanup;
use lease::Lease;
use operation::{AcquireState, PendingAcquire, FIRST_BACKOFF};
use session::Session;
pub use telemetry::{EventKind, Happened, LossReason, Measure, RoundVotes, Telemetry, TelemetryConfig, EVENTS};
use timers::Timers;

/// A lock engine over backend `B`. It performs no I/O: it never opens a socket, sleeps, reads a
/// clock or spawns a task. The Redis `Engine` and the `RedlockEngine` are this type over their
/// backends (`crate::backend::redis`, `crate::backend::redlock`).
///
/// # Driving contract (every backend)
/// The driver owns the connections and the clock, and loops:
/// 1. Feed one input, with the current monotonic `now`: a caller operation
///    ([`acquire_primitive`](Self::acquire_primitive), [`release`](Self::release),
///    [`extend`](Self::extend), [`cancel`](Self::cancel), ...), a reply
///    ([`handle_reply`](Self::handle_reply), keyed by the [`RequestId`] of its request), a
///    pushed message ([`handle_notice`](Self::handle_notice), in the backend's notice type),
///    a lost notification connection ([`handle_disconnect`](Self::handle_disconnect)), or an
///    expired timer ([`handle_timeout`](Self::handle_timeout); calling it early is harmless).
/// 2. After *any* input, drain: [`poll_request`](Self::poll_request) until `None` (perform
///    each; hand its reply back later), [`poll_event`](Self::poll_event) until `None` (deliver
///    to callers), then [`poll_timeout`](Self::poll_timeout): the instant at which to call
///    `handle_timeout` next (replacing any earlier answer).
///
/// Requests must be performed in emission order per connection (the backend's request type
/// says which connection: Redis has one, Redlock one per master). Every request's reply must
/// be handed back exactly once — a transport failure as the error reply — or the operation it
/// serves never completes.
///
/// ```
/// # use lockgate_core::{Engine, EngineConfig, LockOptions, Wait, Event, Outcome, RequestKind};
/// # use lockgate_core::random::SeededRandom;
/// # use lockgate_core::backend::redis::reply::Reply;
/// # use lockgate_core::time::{Duration, Instant};
/// // A stand-in server that grants every ACQUIRE and confirms everything else.
/// fn serve(kind: &RequestKind) -> Vec<Reply> {
///     match kind {
///         RequestKind::Pipeline(cmds) => cmds.iter().map(|_| {
///             Reply::Array(vec![Reply::Int(1), Reply::Data(b"7".to_vec()), Reply::Int(5000)])
///         }).collect(),
///         _ => Vec::new(),
///     }
/// }
/// let mut engine = Engine::new(EngineConfig::default(), Box::new(SeededRandom::new(1))).unwrap();
/// let now = Instant::from_origin(Duration::from_secs(1));
/// let op = engine.acquire(now, "orders", &LockOptions::fixed_lease(Duration::from_secs(5)), Wait::Try).unwrap();
/// let mut acquired = None;
/// // The loop: after every input, drain requests (performing each), then events.
/// loop {
///     let Some(req) = engine.poll_request() else { break };
///     let reply = serve(&req.kind);
///     engine.handle_reply(now, req.id, Ok(reply)); // an input: drain again
/// }
/// while let Some(ev) = engine.poll_event() {
///     if let Event::Completed { op: done, outcome: Outcome::Acquired { fencing_token, .. } } = ev {
///         assert_eq!(done, op);
///         acquired = Some(fencing_token);
///     }
/// }
/// assert_eq!(acquired, Some(7));
/// // Then sleep until poll_timeout (the lease's local expiry here) and call handle_timeout.
/// assert!(engine.poll_timeout().is_some());
/// ```
pub struct LockEngine<B: Backend> {
    backend: B,
    rng: Box<dyn RandomSource>,
    ids: Ids,
    acquires: BTreeMap<OpId, PendingAcquire<B::Target>>,
    /// The token of each pending acquire, for wake-ups pushed by the server.
    waiting_tokens: HashMap<Arc<str>, OpId>,
    /// Acquires abandoned while an attempt was on the wire: undone once its reply shows what
    /// it did (backends that do not undo at once; see [`Backend::undo_in_flight_at_once`]).
    orphans: HashMap<OpId, PendingAcquire<B::Target>>,
    /// How acquires that ended (refused once, timed out, cancelled, failed) end, held back
    /// until what they left on the server is removed: a call returns only once its entry is
    /// gone (see [`UNDO_WAIT`]).
    held_back: BTreeMap<OpId, Done>,
    leases: BTreeMap<LeaseId, Lease<B::Target>>,
    /// Leases at risk, each told once per spell (see `risk.rs`).
    at_risk: BTreeSet<LeaseId>,
    cleanups: BTreeMap<u64, Cleanup<B::Target>>,
    session: Session,
    /// The session's connection is lost and not back ([`Signal::Unreachable`] until
    /// [`Signal::Reachable`]): a wait whose deadline passes meanwhile could not have learnt a
    /// release, so it ends with `CONNECTION`, not `TIMEOUT`.
    cut_off: bool,
    /// When each acquire, lease and cleanup next has work (see [`Due`]), in one ordered table.
    timers: Timers<Due>,
    /// From when each lease's renewal may go out early, batched with others due (see
    /// [`Backend::renew_window`]). Not a wake-up: only read when `handle_timeout` runs anyway.
    renew_early: Timers<LeaseId>,
    outgoing: VecDeque<B::Request>,
    events: VecDeque<Event<B::Outcome>>,
    answers: Vec<Answer>,
    /// Calls the backend settled without a request, handled before the input ends (see
    /// [`flush`](Self::flush)).
    settled_now: Vec<Answer>,
    /// Observes waiting for the session, where every request needs it
    /// ([`Backend::attempts_need_session`]); sent once it is open.
    observes: Vec<(OpId, Arc<B::Target>, Read)>,
    /// Adoptions in progress (see `adopting.rs`): their confirming extends.
    adopts: HashMap<OpId, adopting::PendingAdopt<B::Target>>,
    /// Breaks in progress (see `breaking.rs`): their inspect reads and removals.
    breaks: HashMap<OpId, breaking::PendingBreak<B::Target>>,
    /// Listings in progress (see `listing.rs`).
    listings: listing::Listings,
    /// Telemetry, off until a driver turns it on (see `telemetry.rs`).
    telemetry: telemetry::Recorder,
}

/// A read waiting for the session: an election's leader, or a lock inspected as a kind.
#[derive(Clone, Copy, Debug)]
enum Read {
    Leader,
    Inspect(Kind),
}

/// What a timer entry is for. The derived order (acquires, leases, cleanups; then by id) is the
/// order `handle_timeout` handles what is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Due {
    /// An acquire's wait deadline or its recheck/retry, the earlier.
    Acquire(OpId),
    /// A lease's local expiry or its renewal, the earlier.
    Lease(LeaseId),
    /// A cleanup's retry (none while it is on the wire).
    Cleanup(u64),
    /// The latest instant a held-back completion waits for its undo (see [`UNDO_WAIT`]).
    Answer(OpId),
}

/// How long an acquire that ended waits for the removal of what it left on the server (a
/// queue entry, a lease a minority granted) before its caller is told anyway. Normally the
/// removal's reply comes first, a round trip later, and the caller learns the outcome only
/// once nothing of the call is left; only a server that does not answer (unreachable, silent)
/// makes the outcome go out first, the removal going on in the background. A release whose
/// first try was lost in transport waits as long for a retry to land.
pub const UNDO_WAIT: Duration = Duration::from_secs(1);


impl<B: Backend> LockEngine<B> {
    /// An engine over `backend`. `rng` mints owner tokens and jitter (use
    /// [`OsRandom`](crate::random::OsRandom) outside tests).
    pub fn with_backend(backend: B, rng: Box<dyn RandomSource>) -> Self {
        LockEngine {
            backend,
            rng,
            ids: Ids::default(),
            acquires: BTreeMap::new(),
            waiting_tokens: HashMap::new(),
            orphans: HashMap::new(),
            held_back: BTreeMap::new(),
            leases: BTreeMap::new(),
            at_risk: BTreeSet::new(),
            cleanups: BTreeMap::new(),
            session: Session::None,
            cut_off: false,
            timers: Timers::default(),
            renew_early: Timers::default(),
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
            answers: Vec::new(),
            settled_now: Vec::new(),
            observes: Vec::new(),
            adopts: HashMap::new(),
            breaks: HashMap::new(),
            listings: listing::Listings::default(),
            telemetry: telemetry::Recorder::default(),
        }
    }

    /// Turns telemetry on: from now on the engine also raises [`Event::Telemetry`] events
    /// (acquires started and ended, leases released, lost, at risk, the session's connection
    /// lost and back). Off by default.
    pub fn enable_telemetry(&mut self, config: TelemetryConfig) {
        self.telemetry.enable(config);
    }

    /// The backend (its configuration and wire state).
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Starts acquiring mutex `name`; shorthand for [`acquire_primitive`](Self::acquire_primitive)
    /// with [`Primitive::Mutex`].
    pub fn acquire(&mut self, now: Instant, name: &str, options: &LockOptions, wait: Wait) -> Result<OpId> {
        self.acquire_primitive(now, name, &Primitive::Mutex, options, wait)
    }

    /// Starts acquiring `primitive` named `name` (a mutex, a semaphore permit, a read or write
    /// hold, or leadership, as the backend offers). Completes with an acquired outcome, a
    /// not-acquired one (only for [`Wait::Try`]) or a failure (a `TIMEOUT` error when the wait
    /// runs out). Invalid arguments are rejected here, before anything is sent.
    pub fn acquire_primitive(
        &mut self,
        now: Instant,
        name: &str,
        primitive: &Primitive,
        options: &LockOptions,
        wait: Wait,
    ) -> Result<OpId> {
        options::validate_name(name)?;
        options.validate()?;
        options::validate_primitive(primitive)?;
        let target = self.backend.target(name, primitive, options)?;
        let wait = match wait {
            Wait::For(d) => {
                options::validate_wait(d)?;
                if d.is_zero() {
                    Wait::Try
                } else {
                    Wait::For(d)
                }
            }
            w => w,
        };
        let op = OpId(self.ids.fresh());
        self.telemetry.at(now);
        if let Some(t) = self.telemetry.started(now, op, primitive, name) {
            self.events.push_back(Event::Telemetry(t));
        }
        let token: Arc<str> = self.backend.owner_token(hex(&random_bytes::<16>(self.rng.as_mut()))).into();
        let mut acquire = PendingAcquire {
            target: Arc::new(target),
            held: Arc::new(crate::adopt::Held { name: name.to_string(), primitive: primitive.clone() }),
            token: Arc::clone(&token),
            lease: options.lease,
            auto_renew: options.auto_renew,
            entry_ttl: options.entry_ttl,
            min_hold: options.min_hold,
            max_hold: options.max_hold,
            wait,
            deadline: match wait {
                Wait::For(d) => Some(now + d),
                _ => None,
            },
            state: AcquireState::AwaitSession,
            grant_lower_bound: None,
            dirty: false,
            seen_fence: 0,
            backoff: FIRST_BACKOFF,
            last_failure: None,
            unreachable: None,
            recheck_soon: false,
        };
        let needs_session = wait != Wait::Try || self.backend.attempts_need_session();
        if needs_session && self.session == Session::None {
            self.open_session(now);
        }
        if !needs_session || self.session == Session::Active {
            self.send_acquire(op, &mut acquire, now);
        }
        self.waiting_tokens.insert(token, op);
        self.put_acquire(op, acquire);
        self.flush(now);
        Ok(op)
    }

    /// Re-enters a held lease (reentrant locking): completes at once, with no request, as
    /// acquired for the same lease and fencing token, and adds one hold that a
    /// [`release`](Self::release) must give back before the lease is really released. Fails with
    /// `NOT_HELD` if the lease is no longer certainly held.
    pub fn reacquire(&mut self, now: Instant, lease: LeaseId) -> OpId {
        let op = OpId(self.ids.fresh());
        let done = match self.leases.get_mut(&lease) {
            Some(l) if !l.releasing && now < l.valid_until && l.holds < u32::MAX => {
                l.holds += 1;
                Done::Acquired { lease, fencing_token: l.fence, valid_until: l.valid_until }
            }
            _ => Done::Failed(not_held("the lease is no longer held")),
        };
        self.complete(op, done);
        op
    }

    /// Reads who leads election `name` (the value it published, its term and remaining lease),
    /// where the backend can. Completes with an observed outcome. Where every request needs the
    /// session ([`Backend::attempts_need_session`]) it opens it first if need be.
    pub fn observe_leader(&mut self, now: Instant, name: &str) -> Result<OpId> {
        options::validate_name(name)?;
        self.backend.check_observe()?;
        let leader = Primitive::Leader { value: String::new() };
        let target = Arc::new(self.backend.target(name, &leader, &LockOptions::default())?);
        let op = OpId(self.ids.fresh());
        self.start_read(now, op, target, Read::Leader);
        Ok(op)
    }

    /// Reads lock `name` as a `kind` (its holders with their labels, fencing tokens and leases,
    /// its waiters in queue order), changing nothing; completes with an inspected outcome.
    /// An unknown name reads as empty. Holders that are this engine's own leases carry their
    /// reentrant holds. Racy by nature: for humans and dashboards.
    pub fn inspect(&mut self, now: Instant, name: &str, kind: Kind) -> Result<OpId> {
        self.inspect_as(now, name, &kind.primitive())
    }

    /// [`inspect`](Self::inspect) through a handle of `primitive`: what the handle knows (a
    /// semaphore's permits) helps a backend that stores no count (etcd) tell holders from
    /// waiters.
    pub fn inspect_as(&mut self, now: Instant, name: &str, primitive: &Primitive) -> Result<OpId> {
        let kind = Kind::of(primitive);
        options::validate_name(name)?;
        self.backend.check_inspect()?;
        // A read asks for no lease: the shortest every backend accepts keeps a backend's lease
        // rule (a maximum lease) out of its way.
        let read = LockOptions { lease: options::MIN_LEASE, ..LockOptions::default() };
        let target = Arc::new(self.backend.target(name, primitive, &read)?);
        let op = OpId(self.ids.fresh());
        self.start_read(now, op, target, Read::Inspect(kind));
        Ok(op)
    }

    /// Whether a request of a new call must wait for the session (where every request needs
    /// one: [`Backend::attempts_need_session`]), opening it if none is being opened; such a
    /// request is sent from `on_session`.
    fn waits_for_session(&mut self, now: Instant) -> bool {
        if !self.backend.attempts_need_session() || self.session == Session::Active {
            return false;
        }
        if self.session == Session::None {
            self.open_session(now);
        }
        true
    }

    /// Sends read `op` of `target` now, or once the session is open.
    fn start_read(&mut self, now: Instant, op: OpId, target: Arc<B::Target>, read: Read) {
        if self.waits_for_session(now) {
            self.observes.push((op, target, read));
        } else {
            self.send_read(now, op, &target, read);
        }
        self.flush(now);
    }

    fn send_read(&mut self, now: Instant, op: OpId, target: &Arc<B::Target>, read: Read) {
        let (purpose, action) = match read {
            Read::Leader => (Purpose::Observe(op), Action::Observe { target }),
            Read::Inspect(kind) => (Purpose::Inspect(op), Action::Inspect { target, kind }),
        };
        self.backend.call(ctx!(self, now), purpose, action, &mut self.settled_now);
    }

    /// The reentrant holds of this engine's lease whose owner token is `token`, if it has one.
    pub(crate) fn own_holds(&self, token: &str) -> Option<u32> {
        self.leases.values().find(|l| &*l.token == token).map(|l| l.holds)
    }

    /// Releases a lease (owner-only). Completes with a released outcome; `was_held` is false
    /// if it had already expired or been taken over. Releasing twice is harmless. A reentered
    /// lease only gives back one hold (`was_held: true`) until its last.
    pub fn release(&mut self, now: Instant, lease: LeaseId) -> OpId {
        self.telemetry.at(now);
        let op = OpId(self.ids.fresh());
        match self.leases.get_mut(&lease) {
            Some(l) if l.holds > 1 => {
                l.holds -= 1;
                let was_held = now < l.valid_until;
                self.complete(op, Done::Released { was_held });
            }
            Some(l) => {
                l.releasing = true;
                // Before the shortest hold's end the entry stays on the server until then (an
                // expiry change, not a delete), so it outlives this process too (PROTOCOL.md
                // "Minimum and maximum holds").
                let left = l.hold_until.map(|h| h.saturating_duration_since(now)).filter(|d| *d >= options::MIN_LEASE);
                match left {
                    Some(d) if self.backend.check_extend(d).is_ok() => {
                        l.hold_release = Some(op);
                        self.send_renewal(now, lease, d, false, |tag| Purpose::Extend(op, lease, d, tag));
                    }
                    _ => {
                        let (target, token) = (Arc::clone(&l.target), Arc::clone(&l.token));
                        let action = Action::Release { target: &target, token: &token };
                        self.backend.call(ctx!(self, now), Purpose::Release(op, lease), action, &mut self.settled_now);
                        self.sync_lease(lease);
                    }
                }
            }
            None => self.complete(op, Done::Released { was_held: false }),
        }
        self.flush(now);
        op
    }

    /// Sets the lease's remaining time to `duration`, only if still held; never re-acquires.
    /// Completes with an extended outcome or a `NOT_HELD` failure (which also marks it lost).
    pub fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId> {
        self.telemetry.at(now);
        options::validate_lease(duration)?;
        self.backend.check_extend(duration)?;
        let op = OpId(self.ids.fresh());
        if self.leases.get(&lease).is_some_and(|l| !l.releasing) {
            let tag = self.send_renewal(now, lease, duration, false, |tag| Purpose::Extend(op, lease, duration, tag));
            let _ = tag;
        } else {
            self.complete(op, Done::Failed(not_held("the lease is no longer held")));
        }
        self.flush(now);
        Ok(op)
    }

    /// Abandons a pending acquire: whatever its attempts left on the server (a queue entry, a
    /// grant that raced the cancel) is removed, and then (or after [`UNDO_WAIT`] at most) it
    /// completes with a `CANCELLED` failure. Unknown ids are ignored.
    pub fn cancel(&mut self, now: Instant, op: OpId) {
        self.telemetry.at(now);
        if let Some(acquire) = self.take_acquire(op) {
            let cancelled = Done::Failed(Error::new(ErrorKind::Cancelled, "the acquire was cancelled"));
            self.end_acquire(now, op, acquire, cancelled);
        }
        self.flush(now);
    }

    /// Cancels every pending acquire and releases every lease (client shutdown).
    pub fn shutdown(&mut self, now: Instant) {
        self.telemetry.at(now);
        for (op, ..) in std::mem::take(&mut self.observes) {
            self.breaks.remove(&op);
            self.complete(op, Done::Failed(Error::new(ErrorKind::Cancelled, "the client is shutting down")));
        }
        self.fail_waiting_lists(&listing::shutting_down());
        self.cancel_adopts();
        let ops: Vec<OpId> = self.acquires.keys().copied().collect();
        for op in ops {
            self.cancel(now, op);
        }
        let leases: Vec<LeaseId> = self.leases.keys().copied().collect();
        for lease in leases {
            // Shutdown gives the lease up whatever reentrant holds are outstanding.
            if let Some(l) = self.leases.get_mut(&lease) {
                l.holds = 1;
            }
            let _ = self.release(now, lease);
        }
        self.backend.close_session(ctx!(self, now));
        self.flush(now);
    }

    /// The local instant until which `lease` is certainly valid, or `None` if it is not held.
    pub fn lease_valid_until(&self, lease: LeaseId) -> Option<Instant> {
        self.leases.get(&lease).map(|l| l.valid_until)
    }

    /// Whether `lease` is held at `now` by this engine's knowledge.
    pub fn is_held(&self, now: Instant, lease: LeaseId) -> bool {
        self.leases.get(&lease).is_some_and(|l| now < l.valid_until)
    }

    /// Whether nothing is pending: no acquire, lease, cleanup or request in flight.
    pub fn is_idle(&self) -> bool {
        self.acquires.is_empty()
            && self.held_back.is_empty()
            && self.observes.is_empty()
            && self.listings.is_empty()
            && self.leases.is_empty()
            && self.cleanups.is_empty()
            && self.backend.is_idle()
    }

    /// Hands back the reply to request `id`, or the transport error that prevented one (in
    /// the backend's reply type). Unknown ids are ignored.
    pub fn handle_reply(&mut self, now: Instant, id: RequestId, reply: B::Reply) {
        self.telemetry.at(now);
        if self.session.request() == Some(id) {
            let result = self.backend.session_reply(reply);
            self.on_session(now, result);
            self.flush(now);
            return;
        }
        let mut answers = std::mem::take(&mut self.answers);
        self.backend.on_reply(ctx!(self, now), id, reply, &mut answers);
        self.raise_rounds();
        for answer in answers.drain(..) {
            self.dispatch(now, answer);
        }
        self.answers = answers;
        self.raised_signals(now);
        self.flush(now);
    }

    /// Handles what the backend signalled outside a notice (a blocking wait that returned, a
    /// listener set up again), as a pushed notice's signal would be handled.
    fn raised_signals(&mut self, now: Instant) {
        while let Some(signal) = self.backend.take_signal() {
            self.on_signal(now, signal);
        }
    }

    /// Hands over a message the server pushed (a pub/sub message, a watch or session event),
    /// in the backend's notice type.
    pub fn handle_notice(&mut self, now: Instant, notice: B::Notice<'_>) {
        self.telemetry.at(now);
        let mut answers = std::mem::take(&mut self.answers);
        let signal = self.backend.on_notice(ctx!(self, now), notice, &mut answers);
        for answer in answers.drain(..) {
            self.dispatch(now, answer);
        }
        self.answers = answers;
        self.on_signal(now, signal);
        self.raised_signals(now);
    }

    /// What a backend's signal does.
    fn on_signal(&mut self, now: Instant, signal: Signal) {
        match signal {
            Signal::Nothing => self.flush(now),
            Signal::Wake(wake) => self.wake(now, wake),
            Signal::Recheck(tokens) => self.recheck(now, tokens),
            Signal::Unreachable => {
                self.cut_off = true;
                self.raise(self.telemetry.client(Happened::ConnectionLost));
                self.session_unreachable(now);
                self.flush(now);
            }
            Signal::Reachable(tokens) => {
                self.cut_off = false;
                self.raise(self.telemetry.client(Happened::ConnectionRestored));
                self.session_reachable(now);
                self.recheck(now, tokens);
                // The backend may have held work back until the server was reachable again
                // (ZooKeeper's stale deletes), with no waiter to re-check.
                self.flush(now);
            }
            Signal::SessionLost(why) => {
                // A new session is opened next: its failures say whether the server is reachable.
                self.cut_off = false;
                self.raise(self.telemetry.client(Happened::SessionExpired));
                // Every lease lived in the session: all are gone on the server already, so they
                // are lost together, with nothing to clean up.
                let leases: Vec<LeaseId> = self.leases.keys().copied().collect();
                for id in leases {
                    if self.remove_lease(id).is_some() {
                        // Its telemetry first, as every loss's (`lose_and_clean`): a binding
                        // publishes it before the loss signal's listeners run.
                        let t = self.telemetry.ended(id, Some(LossReason::SessionEnded));
                        self.raise(t);
                        self.events.push_back(Event::Lost { lease: id, error: not_held(&format!("the session ended: {why}")) });
                    }
                }
                self.handle_disconnect(now);
            }
        }
    }

    /// Something the waiters of `tokens` wait behind changed: each re-runs its attempt now (or
    /// right after the one on the wire), then every due timer runs.
    fn recheck(&mut self, now: Instant, tokens: Vec<String>) {
        for token in tokens {
            if let Some(&op) = self.waiting_tokens.get(token.as_str()) {
                let a = self.acquires.get_mut(&op).expect("token index matches acquires");
                match a.state {
                    AcquireState::Queued { .. } => a.state = AcquireState::Queued { recheck_at: now },
                    // What the attempt on the wire read may predate the change.
                    AcquireState::InFlight => a.recheck_soon = true,
                    _ => {}
                }
                self.sync_acquire(op);
            }
        }
        self.handle_timeout(now);
    }

    /// A waiter was woken by a grant the server pushed.
    fn wake(&mut self, now: Instant, wake: Wake) {
        if let Some(&op) = self.waiting_tokens.get(wake.token.as_str()) {
            let a = self.acquires.get_mut(&op).expect("token index matches acquires");
            let handoff = self.backend.handoff_lease(a.lease, a.entry_ttl);
            match handoff {
                // A grant older than a "queued" answer we already had is stale, and a grant
                // the backend cannot trust unconfirmed must be re-checked: ask the server.
                _ if wake.fence <= a.seen_fence || handoff.is_none() => {
                    if let AcquireState::Queued { .. } = a.state {
                        a.state = AcquireState::Queued { recheck_at: now };
                    }
                    self.sync_acquire(op);
                    self.handle_timeout(now);
                    return;
                }
                // The grant came after the last "queued" answer, hence after its request was
                // sent: the lease started no earlier than that send.
                Some(granted) => {
                    if let Some(lower_bound) = a.grant_lower_bound {
                        let acquire = self.take_acquire(op).expect("token index matches acquires");
                        self.grant(now, op, acquire, Some(wake.fence), lower_bound, granted);
                    }
                }
                None => {}
            }
        }
        self.flush(now);
    }

    /// The notification connection (or session) dropped: wake-ups may have been missed. The
    /// engine opens the session again and re-checks every queued wait at once.
    pub fn handle_disconnect(&mut self, now: Instant) {
        self.telemetry.at(now);
        self.session = Session::None;
        let any_waiting = self.acquires.values().any(|a| a.wait != Wait::Try) || !self.observes.is_empty() || !self.listings.is_empty();
        for (&op, a) in self.acquires.iter_mut() {
            if let AcquireState::Queued { .. } = a.state {
                a.state = AcquireState::Queued { recheck_at: now };
                self.timers.set(Due::Acquire(op), a.timer());
            }
        }
        if any_waiting {
            self.open_session(now);
        }
        self.handle_timeout(now);
    }

    /// Runs every timer due at `now`: the backend's own (node timeouts), the session retry,
    /// wait deadlines, queue re-checks and retries, watchdog renewals, local lease expiry and
    /// cleanup retries. Only what is due is visited (O(log n) each); calling it early or twice
    /// is a no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.telemetry.at(now);
        // Nothing due anywhere (a driver waking early, a timer already handled): nothing would
        // change, since every input flushes what it batched, so skip the walk.
        if self.poll_timeout().is_none_or(|t| t > now) && self.renew_early.next().is_none_or(|t| t > now) {
            return;
        }
        for t in self.telemetry.held_too_long(now) {
            self.raise(Some(t));
        }
        let mut answers = std::mem::take(&mut self.answers);
        self.backend.on_timeout(ctx!(self, now), &mut answers);
        self.raise_rounds();
        for answer in answers.drain(..) {
            self.dispatch(now, answer);
        }
        self.answers = answers;
        if let Session::RetryAt(t) = self.session {
            if t <= now {
                self.open_session(now);
            }
        }
        // Keys come out in `Due` order: acquires, then leases, then cleanups, each kind in
        // ascending id order, so a batch of calls goes out in the same order whatever the
        // table's internals. Handling one never makes another kind due at `now`.
        let mut leases = Vec::new();
        let mut cleanups = Vec::new();
        for due in self.timers.take_due(now) {
            let op = match due {
                Due::Acquire(op) => op,
                Due::Answer(op) => {
                    // Its undo did not answer in time: the caller is told now.
                    self.answer_held(op);
                    continue;
                }
                Due::Lease(id) => {
                    leases.push(id);
                    continue;
                }
                Due::Cleanup(id) => {
                    cleanups.push(id);
                    continue;
                }
            };
            let Some(a) = self.acquires.get(&op) else {
                continue;
            };
            if a.deadline.is_some_and(|d| d <= now) {
                let a = self.take_acquire(op).expect("present");
                let error = wait_ended(&a, self.cut_off);
                self.end_acquire(now, op, a, Done::Failed(error));
                continue;
            }
            let due = match a.state {
                AcquireState::Queued { recheck_at } => recheck_at <= now,
                AcquireState::RetryAt(t) => t <= now,
                _ => false,
            };
            let mut a = self.acquires.remove(&op).expect("present");
            if due {
                if self.backend.attempts_need_session() && self.session != Session::Active {
                    // Sent once the session is open again (on_session).
                    a.state = AcquireState::AwaitSession;
                } else {
                    self.send_acquire(op, &mut a, now);
                }
            }
            self.put_acquire(op, a);
        }
        // A renewal goes out early when another one is sent anyway (see renew_window), so the
        // leases to visit are those whose expiry or renewal is due plus those in their window.
        let early = self.renew_early.take_due(now);
        if !early.is_empty() {
            leases.extend(early);
            leases.sort_unstable();
            leases.dedup();
        }
        for id in leases {
            let Some(l) = self.leases.get(&id) else {
                continue;
            };
            if l.valid_until <= now {
                if l.at_max && !l.releasing {
                    // Its end is the longest hold's: ended on purpose, and removed from the
                    // server (the loss's cleanup) so the next waiter gets it now.
                    self.lose(now, id, LossReason::MaxHold, "the lease reached its max_hold and is not renewed past it");
                    continue;
                }
                let why = match &l.unreachable {
                    Some(e) => format!("the lease expired before it could be renewed: the server could not be reached ({e})"),
                    None => "the lease expired before it could be renewed".to_string(),
                };
                self.lose(now, id, LossReason::Expired, &why);
                continue;
            }
            let window = self.backend.renew_window(l.lease).unwrap_or(Duration::ZERO);
            if let Some(at) = l.next_renew {
                if !l.renewing && !l.releasing && at <= now + window {
                    let l = self.leases.get_mut(&id).expect("present");
                    if let Some(d) = l.renewal_at(now) {
                        l.renewing = true;
                        self.send_renewal(now, id, d, true, |tag| Purpose::Renew(id, tag));
                    }
                }
            }
            self.sync_lease(id);
        }
        for id in cleanups {
            if let Some(c) = self.cleanups.get_mut(&id) {
                if !c.in_flight && c.due <= now {
                    c.in_flight = true;
                    let (target, token) = (Arc::clone(&c.target), Arc::clone(&c.token));
                    let action = Action::Release { target: &target, token: &token };
                    self.backend.call(ctx!(self, now), Purpose::Cleanup(id), action, &mut self.settled_now);
                }
            }
            self.sync_cleanup(id);
        }
        self.flush(now);
    }

    /// The next instant at which [`handle_timeout`](Self::handle_timeout) has work, if any
    /// (O(log n): the first entry of the timer table and of the backend's own).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next = self.timers.next();
        let mut earliest = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        if let Session::RetryAt(t) = self.session {
            earliest(t);
        }
        if let Some(t) = self.backend.poll_timeout() {
            earliest(t);
        }
        if let Some(t) = self.telemetry.next_due() {
            earliest(t);
        }
        next
    }

    /// The next request for the driver to perform, in emission order.
    pub fn poll_request(&mut self) -> Option<B::Request> {
        self.outgoing.pop_front()
    }

    /// The next event for callers.
    pub fn poll_event(&mut self) -> Option<Event<B::Outcome>> {
        self.events.pop_front()
    }

    // ---- internals ----

    fn complete(&mut self, op: OpId, done: Done) {
        let t = match &done {
            Done::Acquired { .. } => self.telemetry.completed(op, true, None),
            Done::NotAcquired => self.telemetry.completed(op, false, None),
            Done::Failed(e) => self.telemetry.completed(op, false, Some(e)),
            _ => None,
        };
        self.raise(t);
        self.events.push_back(Event::Completed { op, outcome: done.into() });
    }

    /// Queues a telemetry event, if telemetry made one.
    fn raise(&mut self, t: Option<Telemetry>) {
        if let Some(t) = t {
            self.events.push_back(Event::Telemetry(t));
        }
    }

    /// Raises the rounds of votes the backend decided (Redlock), before what they settled, so
    /// a grant's event follows the round that made it.
    fn raise_rounds(&mut self) {
        while let Some((purpose, votes)) = self.backend.take_round() {
            let (of, acquire) = match purpose {
                Purpose::Acquire(op) => (op.0, true),
                Purpose::Renew(lease, _) | Purpose::Extend(_, lease, ..) | Purpose::Release(_, lease) => (lease.0, false),
                _ => continue,
            };
            let t = self.telemetry.round(of, acquire, votes);
            self.raise(t);
        }
    }

    /// The end of an input: handles the calls settled without a request (each may make more
    /// calls, settled at once too), then lets the backend send what it batched. Everything one
    /// input causes is done before it returns; no answer waits for a timer.
    fn flush(&mut self, now: Instant) {
        while !self.settled_now.is_empty() {
            for answer in std::mem::take(&mut self.settled_now) {
                self.dispatch(now, answer);
            }
        }
        self.backend.flush(ctx!(self, now));
    }

    fn take_acquire(&mut self, op: OpId) -> Option<PendingAcquire<B::Target>> {
        let a = self.acquires.remove(&op)?;
        self.waiting_tokens.remove(&a.token);
        self.timers.cancel(Due::Acquire(op));
        Some(a)
    }

    /// Stores an acquire and schedules its timer from its state.
    fn put_acquire(&mut self, op: OpId, a: PendingAcquire<B::Target>) {
        self.timers.set(Due::Acquire(op), a.timer());
        self.acquires.insert(op, a);
    }

    /// Re-schedules `op`'s timer after its state changed in place (or cancels it if gone).
    fn sync_acquire(&mut self, op: OpId) {
        let at = self.acquires.get(&op).and_then(PendingAcquire::timer);
        self.timers.set(Due::Acquire(op), at);
    }

    /// Re-schedules `id`'s expiry, renewal and early-renewal timers from its state (or cancels
    /// them if the lease is gone). Called after every change to a lease's validity or renewal.
    fn sync_lease(&mut self, id: LeaseId) {
        let (wake, early) = match self.leases.get(&id) {
            Some(l) => {
                let renew = l.next_renew.filter(|_| !l.renewing && !l.releasing);
                let wake = renew.map_or(l.valid_until, |r| r.min(l.valid_until));
                let window = self.backend.renew_window(l.lease);
                (Some(wake), renew.zip(window).map(|(r, w)| r - w))
            }
            None => (None, None),
        };
        self.timers.set(Due::Lease(id), wake);
        // A backend that never renews early leaves that table empty (no cost per change).
        if early.is_some() || self.backend.renew_window(Duration::ZERO).is_some() {
            self.renew_early.set(id, early);
        }
    }

    /// Re-schedules cleanup `id`'s retry (none while it is on the wire or once it is gone).
    fn sync_cleanup(&mut self, id: u64) {
        let at = self.cleanups.get(&id).filter(|c| !c.in_flight).map(|c| c.due);
        self.timers.set(Due::Cleanup(id), at);
    }

    fn open_session(&mut self, now: Instant) {
        self.session = match self.backend.open_session(ctx!(self, now)) {
            Some(id) => Session::Pending(id),
            None => Session::Active,
        };
    }

    fn on_session(&mut self, now: Instant, result: Result<()>) {
        match result {
            Ok(()) => {
                self.session = Session::Active;
                for (op, target, read) in std::mem::take(&mut self.observes) {
                    self.send_read(now, op, &target, read);
                }
                self.send_waiting_lists(now);
                let ops: Vec<OpId> = self.acquires.keys().copied().collect();
                for op in ops {
                    let mut a = self.acquires.remove(&op).expect("listed above");
                    match a.state {
                        AcquireState::AwaitSession => self.send_acquire(op, &mut a, now),
                        // A reconnect may have dropped wake-ups: re-check at once.
                        AcquireState::Queued { .. } => a.state = AcquireState::Queued { recheck_at: now },
                        _ => {}
                    }
                    self.put_acquire(op, a);
                }
                self.handle_timeout(now);
            }
            Err(e) => {
                if e.kind() == ErrorKind::Connection {
                    // The waits cannot reach the server either: a deadline now says so.
                    for a in self.acquires.values_mut() {
                        a.unreachable = Some(e.clone());
                    }
                }
                if matches!(e.kind(), ErrorKind::Authentication | ErrorKind::Unsupported) {
                    // Refused credentials or a user without the right to open the session, or a
                    // server that cannot give this backend its session (PostgreSQL behind a
                    // pooler that drops notifications): waiting would only end in TIMEOUT and
                    // hide the cause, so every acquire ends now with the refusal (later ones try
                    // the session again).
                    let ops: Vec<OpId> = self.acquires.keys().copied().collect();
                    for op in ops {
                        let a = self.take_acquire(op).expect("listed above");
                        self.end_acquire(now, op, a, Done::Failed(e.clone()));
                    }
                    for (op, ..) in std::mem::take(&mut self.observes) {
                        self.breaks.remove(&op);
                        self.complete(op, Done::Failed(e.clone()));
                    }
                    self.fail_waiting_lists(&e);
                }
                let jitter = Duration::from_millis(self.rng.next_u64() % 50);
                self.session = Session::RetryAt(now + Duration::from_millis(100) + jitter);
            }
        }
    }

    fn send_acquire(&mut self, op: OpId, a: &mut PendingAcquire<B::Target>, now: Instant) {
        if a.grant_lower_bound.is_none() {
            a.grant_lower_bound = Some(now);
        }
        a.state = AcquireState::InFlight;
        a.dirty = true;
        a.recheck_soon = false;
        let action = Action::Acquire {
            target: &a.target,
            token: &a.token,
            lease: a.lease,
            entry_ttl: a.entry_ttl,
            once: a.wait == Wait::Try,
        };
        self.backend.call(ctx!(self, now), Purpose::Acquire(op), action, &mut self.settled_now);
    }

    /// Sends a renewal or extend of `lease` to `d` and notes it on the lease. A renewal of a
    /// fixed lease confirms it up to its end at most; an extend sets a new end.
    fn send_renewal(&mut self, now: Instant, id: LeaseId, d: Duration, renewal: bool, purpose: impl FnOnce(u64) -> Purpose) -> u64 {
        let l = self.leases.get_mut(&id).expect("caller checked");
        let end = if renewal { l.end } else { None };
        let bound = verdicts::confirmed_until(&self.backend, &l.token, now, d, end);
        let tag = l.send_renewal(d, bound);
        let (target, token) = (Arc::clone(&l.target), Arc::clone(&l.token));
        let action = Action::Extend { target: &target, token: &token, duration: d };
        self.backend.call(ctx!(self, now), purpose(tag), action, &mut self.settled_now);
        self.sync_lease(id);
        tag
    }
}

/// The error of a wait whose deadline passed. If its last attempt (or the session it needed)
/// failed with `CONNECTION` (the server unreachable, too few masters or replicas answering),
/// the wait fails with `CONNECTION` carrying that error (for a transport failure: the server's
/// redacted address and what went wrong): a dead server must not look like a held lock.
/// `TIMEOUT` means the server was answering and the lock stayed taken, with why the last
/// attempt did not get it. One rule for every backend (PROTOCOL.md, "Errors"). `cut_off`: the
/// session's connection is lost and not back (ZooKeeper's `Disconnected`), so no attempt could
/// even be sent: `CONNECTION` too.
fn wait_ended<T>(a: &PendingAcquire<T>, cut_off: bool) -> Error {
    let waited = match a.wait {
        Wait::For(d) => format!(" within {} ms", d.as_millis()),
        _ => String::new(),
    };
    if let Some(e) = &a.unreachable {
        return Error::new(ErrorKind::Connection, format!("gave up waiting for the lock{waited}: the last attempt failed: {}", e.message()));
    }
    if cut_off {
        let why = "the connection to the server was lost and is not back (the session lives on the server until its timeout)";
        return Error::new(ErrorKind::Connection, format!("gave up waiting for the lock{waited}: {why}"));
    }
    let message = match &a.last_failure {
        Some(why) => format!("timed out waiting for the lock (last attempt: {why})"),
        None => "timed out waiting for the lock".into(),
    };
    Error::new(ErrorKind::Timeout, message)
}

fn not_held(why: &str) -> Error {
    Error::new(ErrorKind::NotHeld, why)
}

fn random_bytes<const N: usize>(rng: &mut dyn RandomSource) -> [u8; N] {
    let mut b = [0u8; N];
    rng.fill(&mut b);
    b
}

/// Lowercase hex, as owner tokens and client ids are written.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}
