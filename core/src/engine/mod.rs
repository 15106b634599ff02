//! The sans-IO lock engine.

pub mod io;
mod state;
pub(crate) mod timers;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use crate::error::{Error, ErrorKind, Result};
use crate::options::{self, whole_millis, LockOptions};
use crate::random::RandomSource;
use crate::redis::keys::client_channel;
use crate::redis::reply::{self, AcquireReply, Reply};
use crate::redis::Script;
use crate::redis::holders;
use crate::time::{Duration, Instant};

pub use io::{
    Command, Event, LeaderInfo, LeaseId, OpId, Outcome, Primitive, Request, RequestId,
    RequestKind, Wait,
};
use state::{
    AcquireOp, AcquireState, Cleanup, InFlight, LeaseState, Purpose, ScriptCall, Subscription,
    Target,
};
use timers::Timers;

/// Settings shared by every lock of one engine (one client).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Prepended to every key and channel (default `lockgate:`).
    pub key_prefix: String,
    /// How long the fence counter outlives a lease; see PROTOCOL.md "Fencing tokens".
    pub fence_retention: Duration,
    /// Replica-acknowledged mode (PROTOCOL.md §4): a grant, extend or renewal counts only once
    /// `WAIT` confirms it reached this many replicas within the timeout. `None`: off.
    pub replica_acks: Option<ReplicaAcks>,
    /// Emit every script call as its own request instead of batching the calls of one input
    /// into a pipeline. For Redis Cluster, where a pipeline cannot span slots and the driver
    /// would send the calls one by one anyway: a transport failure then fails only the call it
    /// hit, not the unrelated locks batched with it.
    pub split_pipelines: bool,
}

/// The replica-acknowledged mode: how many replicas must confirm a write, and how long to wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaAcks {
    /// Replicas that must acknowledge (at least 1).
    pub replicas: u32,
    /// How long `WAIT` may block (at least 1 ms). It blocks the client's connection meanwhile.
    pub timeout: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            key_prefix: "lockgate:".into(),
            fence_retention: Duration::from_secs(3600),
            replica_acks: None,
            split_pipelines: false,
        }
    }
}

const FIRST_BACKOFF: Duration = Duration::from_millis(20);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// The lock protocol engine for Redis-backed primitives. It performs no I/O: it never opens a
/// socket, sleeps, reads a clock or spawns a task.
///
/// # Driving contract
/// The driver owns the connections and the clock, and loops:
/// 1. Feed inputs, each with the current monotonic `now`:
///    caller operations ([`acquire`](Self::acquire), [`release`](Self::release),
///    [`extend`](Self::extend), [`cancel`](Self::cancel)), server replies
///    ([`handle_reply`](Self::handle_reply), keyed by the [`RequestId`] of the request),
///    pushed messages ([`handle_notification`](Self::handle_notification)), a lost connection
///    ([`handle_disconnect`](Self::handle_disconnect)), and expired timers
///    ([`handle_timeout`](Self::handle_timeout); calling it early is harmless).
/// 2. Drain outputs after every input: [`poll_request`](Self::poll_request) until `None`
///    (perform each, in order, and later hand its reply back), [`poll_event`](Self::poll_event)
///    until `None` (deliver to callers), then [`poll_timeout`](Self::poll_timeout) (the next
///    instant at which to call `handle_timeout`).
///
/// Requests of one engine must be performed in emission order on one connection, as a
/// multiplexed Redis connection does. Every reply must eventually be handed back, as a
/// transport error if the connection failed.
pub struct Engine {
    prefix: String,
    replica_acks: Option<ReplicaAcks>,
    split_pipelines: bool,
    channel: String,
    retention_ms: String,
    rng: Box<dyn RandomSource>,
    next_id: u64,
    acquires: BTreeMap<OpId, AcquireOp>,
    waiting_tokens: HashMap<String, OpId>,
    leases: BTreeMap<LeaseId, LeaseState>,
    held_tokens: HashMap<String, LeaseId>,
    cleanups: BTreeMap<u64, Cleanup>,
    /// When each acquire next has work: its wait deadline or its recheck/retry, the earlier.
    acquire_timers: Timers<OpId>,
    /// When each lease next has work: its local expiry or its renewal, the earlier.
    lease_timers: Timers<LeaseId>,
    /// From when each lease's renewal may go out early, batched with others due (see
    /// [`renew_window`]). Not a wake-up: only read when `handle_timeout` runs anyway.
    renew_early: Timers<LeaseId>,
    /// When each cleanup not on the wire is retried.
    cleanup_timers: Timers<u64>,
    in_flight: HashMap<RequestId, InFlight>,
    subscribe_request: Option<RequestId>,
    subscription: Subscription,
    batch: Vec<(Purpose, ScriptCall)>,
    outgoing: VecDeque<Request>,
    events: VecDeque<Event>,
}

impl Engine {
    /// A new engine. `rng` mints owner tokens (use [`OsRandom`](crate::random::OsRandom) outside tests).
    pub fn new(config: EngineConfig, mut rng: Box<dyn RandomSource>) -> Result<Self> {
        options::validate_prefix(&config.key_prefix)?;
        if config.fence_retention < Duration::from_secs(1)
            || config.fence_retention > options::MAX_DURATION
        {
            return Err(Error::invalid(
                "fence_retention must be between 1 s and 30 days",
            ));
        }
        if let Some(r) = config.replica_acks {
            if r.replicas == 0 || r.timeout < Duration::from_millis(1) || r.timeout > options::MAX_DURATION {
                return Err(Error::invalid(
                    "replica_acks needs at least 1 replica and a timeout between 1 ms and 30 days",
                ));
            }
        }
        let client_id = hex(&random_bytes::<8>(rng.as_mut()));
        Ok(Engine {
            replica_acks: config.replica_acks,
            split_pipelines: config.split_pipelines,
            channel: client_channel(&config.key_prefix, &client_id),
            prefix: config.key_prefix,
            retention_ms: whole_millis(config.fence_retention).to_string(),
            rng,
            next_id: 1,
            acquires: BTreeMap::new(),
            waiting_tokens: HashMap::new(),
            leases: BTreeMap::new(),
            held_tokens: HashMap::new(),
            cleanups: BTreeMap::new(),
            acquire_timers: Timers::default(),
            lease_timers: Timers::default(),
            renew_early: Timers::default(),
            cleanup_timers: Timers::default(),
            in_flight: HashMap::new(),
            subscribe_request: None,
            subscription: Subscription::None,
            batch: Vec::new(),
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
        })
    }

    /// The pub/sub channel this engine's grants arrive on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// Starts acquiring mutex `name`; shorthand for [`acquire_primitive`](Self::acquire_primitive)
    /// with [`Primitive::Mutex`].
    pub fn acquire(
        &mut self,
        now: Instant,
        name: &str,
        options: &LockOptions,
        wait: Wait,
    ) -> Result<OpId> {
        self.acquire_primitive(now, name, &Primitive::Mutex, options, wait)
    }

    /// Starts acquiring `primitive` named `name` (a mutex, a semaphore permit, a read or write
    /// hold, or leadership). Completes with [`Outcome::Acquired`], [`Outcome::NotAcquired`]
    /// (only for [`Wait::Try`]) or [`Outcome::Failed`] (a `TIMEOUT` error when the wait runs out).
    /// Waiters of every primitive are served in arrival order and woken only when granted.
    /// Invalid arguments are rejected here, before anything is sent.
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
        let op = OpId(self.fresh_id());
        let token = hex(&random_bytes::<16>(self.rng.as_mut()));
        let mut acquire = AcquireOp {
            target: Arc::new(Target::new(&self.prefix, name, primitive)),
            token: token.clone(),
            lease: options.lease,
            auto_renew: options.auto_renew,
            entry_ttl: options.entry_ttl,
            wait,
            deadline: match wait {
                Wait::For(d) => Some(now + d),
                _ => None,
            },
            state: AcquireState::AwaitSubscribe,
            grant_lower_bound: None,
            seen_fence: 0,
            backoff: FIRST_BACKOFF,
        };
        if wait == Wait::Try || self.subscription == Subscription::Active {
            self.send_acquire(op, &mut acquire, now);
        } else if self.subscription == Subscription::None {
            self.subscribe(now);
        }
        self.waiting_tokens.insert(token, op);
        self.put_acquire(op, acquire);
        self.flush(now);
        Ok(op)
    }

    /// Re-enters a held lease (reentrant locking): completes at once, with no request, as
    /// [`Outcome::Acquired`] for the same lease and fencing token, and adds one hold that a
    /// [`release`](Self::release) must give back before the lease is really released. Fails with
    /// `NOT_HELD` if the lease is no longer certainly held.
    pub fn reacquire(&mut self, now: Instant, lease: LeaseId) -> OpId {
        let op = OpId(self.fresh_id());
        let outcome = match self.leases.get_mut(&lease) {
            Some(l) if !l.releasing && now < l.valid_until && l.holds < u32::MAX => {
                l.holds += 1;
                Outcome::Acquired { lease, fencing_token: l.fence, valid_until: l.valid_until }
            }
            _ => Outcome::Failed(not_held("the lease is no longer held")),
        };
        self.complete(op, outcome);
        op
    }

    /// Reads who leads election `name` (the value it published, its term and remaining lease).
    /// Completes with [`Outcome::Observed`].
    pub fn observe_leader(&mut self, now: Instant, name: &str) -> Result<OpId> {
        options::validate_name(name)?;
        let op = OpId(self.fresh_id());
        let target = Arc::new(Target::new(
            &self.prefix,
            name,
            &Primitive::Leader { value: String::new() },
        ));
        let call = ScriptCall {
            script: &holders::OBSERVE,
            target,
            key_count: 5,
            args: Vec::new(),
            full: false,
        };
        self.batch.push((Purpose::Observe(op), call));
        self.flush(now);
        Ok(op)
    }

    /// Releases a lease (owner-only). Completes with [`Outcome::Released`]; `was_held` is false
    /// if it had already expired or been taken over. Releasing twice is harmless. A reentered
    /// lease only gives back one hold (`was_held: true`) until its last.
    pub fn release(&mut self, now: Instant, lease: LeaseId) -> OpId {
        let op = OpId(self.fresh_id());
        match self.leases.get_mut(&lease) {
            Some(l) if l.holds > 1 => {
                l.holds -= 1;
                let was_held = now < l.valid_until;
                self.complete(op, Outcome::Released { was_held });
            }
            Some(l) => {
                l.releasing = true;
                let call = release_call(&l.target, &l.token, &self.retention_ms);
                self.batch.push((Purpose::Release(op, lease), call));
                self.sync_lease(lease);
            }
            None => self.complete(op, Outcome::Released { was_held: false }),
        }
        self.flush(now);
        op
    }

    /// Sets the lease's remaining time to `duration`, only if still held; never re-acquires.
    /// Completes with [`Outcome::Extended`] or a `NOT_HELD` failure (which also marks it lost).
    pub fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId> {
        options::validate_lease(duration)?;
        let op = OpId(self.fresh_id());
        match self.leases.get_mut(&lease) {
            Some(l) if !l.releasing => {
                let call = extend_call(&l.target, &l.token, duration);
                let tag = l.send_pexpire(now, duration);
                self.batch
                    .push((Purpose::Extend(op, lease, duration, tag), call));
                self.sync_lease(lease);
            }
            _ => self.complete(op, Outcome::Failed(not_held("the lease is no longer held"))),
        }
        self.flush(now);
        Ok(op)
    }

    /// Abandons a pending acquire: it completes with a `CANCELLED` failure, and its queue entry
    /// (or a grant that raced the cancel) is removed from the server. Unknown ids are ignored.
    pub fn cancel(&mut self, now: Instant, op: OpId) {
        if let Some(acquire) = self.take_acquire(op) {
            self.abandon(now, acquire);
            self.complete(
                op,
                Outcome::Failed(Error::new(
                    ErrorKind::Cancelled,
                    "the acquire was cancelled",
                )),
            );
        }
        self.flush(now);
    }

    /// Cancels every pending acquire and releases every lease (client shutdown).
    pub fn shutdown(&mut self, now: Instant) {
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
            && self.leases.is_empty()
            && self.cleanups.is_empty()
            && self.in_flight.is_empty()
    }

    /// Hands back the reply to request `id`: one [`Reply`] per command for a pipeline (empty for
    /// a subscribe), or the transport error that prevented an answer.
    pub fn handle_reply(&mut self, now: Instant, id: RequestId, result: Result<Vec<Reply>>) {
        if self.subscribe_request == Some(id) {
            self.subscribe_request = None;
            self.on_subscribed(now, result.map(|_| ()));
            self.flush(now);
            return;
        }
        let Some(flight) = self.in_flight.remove(&id) else {
            return;
        };
        let (result, unreplicated) = match (flight.waited, result) {
            (Some(acks), Ok(mut r)) if r.len() == flight.calls.len() + 1 => {
                let wait = r.pop().expect("length checked");
                match wait {
                    Reply::Int(n) if n >= acks.replicas as i64 => (Ok(r), None),
                    Reply::Int(n) => (Ok(r), Some(Error::new(
                        ErrorKind::Connection,
                        format!("the write reached {n} of the {} replicas required within {:?}; it does not count", acks.replicas, acks.timeout),
                    ))),
                    Reply::Error(e) if reply::is_transient_error(&e) => {
                        (Ok(r), Some(Error::new(ErrorKind::Connection, format!("WAIT was not answered: {e}"))))
                    }
                    other => (Ok(r), Some(Error::protocol(format!("WAIT returned {other:?}")))),
                }
            }
            (_, r) => (r, None),
        };
        let replies: Vec<Result<Reply>> = match result {
            Ok(r) if r.len() == flight.calls.len() => r.into_iter().map(Ok).collect(),
            Ok(r) => {
                let e = Error::protocol(format!(
                    "expected {} replies, got {}",
                    flight.calls.len(),
                    r.len()
                ));
                flight.calls.iter().map(|_| Err(e.clone())).collect()
            }
            Err(e) => flight.calls.iter().map(|_| Err(e.clone())).collect(),
        };
        for ((purpose, call), mut reply) in flight.calls.into_iter().zip(replies) {
            if let (Some(e), Ok(r)) = (&unreplicated, &reply) {
                // A grant or extension that did not reach enough replicas could be lost in a
                // failover: treat it as unconfirmed (acquires retry or are undone, renewals retry).
                let confirms = match purpose {
                    Purpose::Acquire(_) => matches!(reply::parse_acquire(r), Ok(AcquireReply::Held { .. })),
                    Purpose::Renew(..) | Purpose::Extend(..) => matches!(r, Reply::Int(1)),
                    _ => false,
                };
                if confirms {
                    reply = Err(e.clone());
                }
            }
            if matches!(&reply, Ok(r) if r.is_noscript()) && !call.full {
                // The server lost its script cache (restart, SCRIPT FLUSH): send the body once.
                self.batch
                    .push((purpose, ScriptCall { full: true, ..call }));
                continue;
            }
            self.dispatch(now, flight.sent, purpose, call, reply);
        }
        self.flush(now);
    }

    /// Hands over a message that arrived on a subscribed channel.
    pub fn handle_notification(&mut self, now: Instant, channel: &[u8], payload: &[u8]) {
        if channel != self.channel.as_bytes() {
            return;
        }
        if let Some((token, fence)) = reply::parse_grant(payload) {
            if let Some(&op) = self.waiting_tokens.get(token) {
                let a = self.acquires.get_mut(&op).expect("token index matches acquires");
                if fence <= a.seen_fence {
                    // A grant older than a "busy" answer we already had: stale. Ask the server.
                    if let AcquireState::Queued { .. } = a.state {
                        a.state = AcquireState::Queued { recheck_at: now };
                    }
                    self.sync_acquire(op);
                    self.handle_timeout(now);
                    return;
                }
                if self.replica_acks.is_some() {
                    // Replica-acknowledged mode: a pushed grant proves nothing about replicas;
                    // re-run ACQUIRE (which answers "held") with its WAIT at once.
                    if let AcquireState::Queued { .. } = a.state {
                        a.state = AcquireState::Queued { recheck_at: now };
                    }
                    self.sync_acquire(op);
                    self.handle_timeout(now);
                    return;
                }
                // The grant came after the last "busy" answer, hence after its request was sent.
                if let Some(lower_bound) = a.grant_lower_bound {
                    let acquire = self.take_acquire(op).expect("token index matches acquires");
                    // Mirrors ACQUIRE: a handoff grants min(lease, entry_ttl) in whole ms.
                    let handoff = whole_millis(acquire.lease).min(whole_millis(acquire.entry_ttl));
                    self.grant(op, acquire, fence, lower_bound, Duration::from_millis(handoff));
                }
            }
        }
        self.flush(now);
    }

    /// The notification connection dropped: grants may have been missed. The engine
    /// re-subscribes and re-checks every queued wait at once.
    pub fn handle_disconnect(&mut self, now: Instant) {
        self.subscription = Subscription::None;
        self.subscribe_request = None;
        let any_waiting = self.acquires.values().any(|a| a.wait != Wait::Try);
        for (&op, a) in self.acquires.iter_mut() {
            if let AcquireState::Queued { .. } = a.state {
                a.state = AcquireState::Queued { recheck_at: now };
                self.acquire_timers.set(op, acquire_timer(a));
            }
        }
        if any_waiting {
            self.subscribe(now);
        }
        self.handle_timeout(now);
    }

    /// Runs every timer due at `now`: wait deadlines, queue heartbeats, watchdog renewals
    /// (batched into one pipeline), local lease expiry, cleanup retries. Only what is due is
    /// visited (O(log n) each); calling it early or twice is a no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Subscription::RetryAt(t) = self.subscription {
            if t <= now {
                self.subscribe(now);
            }
        }
        // Each kind is taken in ascending id order, as the engine once visited its tables, so
        // the pipeline it sends is the same.
        for op in self.acquire_timers.take_due(now) {
            let Some(a) = self.acquires.get(&op) else {
                continue;
            };
            if a.deadline.is_some_and(|d| d <= now) {
                let a = self.take_acquire(op).expect("present");
                self.abandon(now, a);
                self.complete(
                    op,
                    Outcome::Failed(Error::new(
                        ErrorKind::Timeout,
                        "timed out waiting for the lock",
                    )),
                );
                continue;
            }
            let due = match a.state {
                AcquireState::Queued { recheck_at } => recheck_at <= now,
                AcquireState::RetryAt(t) => t <= now,
                _ => false,
            };
            let mut a = self.acquires.remove(&op).expect("present");
            if due {
                self.send_acquire(op, &mut a, now);
            }
            self.put_acquire(op, a);
        }
        // A renewal goes out early when another one is sent anyway (see renew_window), so the
        // leases to visit are those whose expiry or renewal is due plus those in their window.
        let mut leases = self.lease_timers.take_due(now);
        leases.extend(self.renew_early.take_due(now));
        leases.sort_unstable();
        leases.dedup();
        for id in leases {
            let Some(l) = self.leases.get_mut(&id) else {
                continue;
            };
            if l.valid_until <= now {
                self.lose(now, id, "the lease expired before it could be renewed");
                continue;
            }
            let window = renew_window(l.lease);
            if let Some(at) = l.next_renew {
                if !l.renewing && !l.releasing && at <= now + window {
                    l.renewing = true;
                    let call = extend_call(&l.target, &l.token, l.lease);
                    let tag = l.send_pexpire(now, l.lease);
                    self.batch.push((Purpose::Renew(id, tag), call));
                }
            }
            self.sync_lease(id);
        }
        for id in self.cleanup_timers.take_due(now) {
            if let Some(c) = self.cleanups.get_mut(&id) {
                if !c.in_flight && c.due <= now {
                    c.in_flight = true;
                    let call = release_call(&c.target, &c.token, &self.retention_ms);
                    self.batch.push((Purpose::Cleanup(id), call));
                }
            }
            self.sync_cleanup(id);
        }
        self.flush(now);
    }

    /// The next instant at which [`handle_timeout`](Self::handle_timeout) has work, if any
    /// (O(log n): the first entry of each timer table).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let retry = match self.subscription {
            Subscription::RetryAt(t) => Some(t),
            _ => None,
        };
        [retry, self.acquire_timers.next(), self.lease_timers.next(), self.cleanup_timers.next()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The next request for the driver to perform.
    pub fn poll_request(&mut self) -> Option<Request> {
        self.outgoing.pop_front()
    }

    /// The next event for callers.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    // ---- internals ----

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    fn complete(&mut self, op: OpId, outcome: Outcome) {
        self.events.push_back(Event::Completed { op, outcome });
    }

    fn take_acquire(&mut self, op: OpId) -> Option<AcquireOp> {
        let a = self.acquires.remove(&op)?;
        self.waiting_tokens.remove(&a.token);
        self.acquire_timers.cancel(op);
        Some(a)
    }

    /// Stores an acquire and schedules its timer from its state.
    fn put_acquire(&mut self, op: OpId, a: AcquireOp) {
        self.acquire_timers.set(op, acquire_timer(&a));
        self.acquires.insert(op, a);
    }

    /// Re-schedules `op`'s timer after its state changed in place (or cancels it if gone).
    fn sync_acquire(&mut self, op: OpId) {
        let at = self.acquires.get(&op).and_then(acquire_timer);
        self.acquire_timers.set(op, at);
    }

    /// Re-schedules `id`'s expiry, renewal and early-renewal timers from its state (or cancels
    /// them if the lease is gone). Called after every change to a lease's validity or renewal.
    fn sync_lease(&mut self, id: LeaseId) {
        let (wake, early) = match self.leases.get(&id) {
            Some(l) => {
                let renew = l.next_renew.filter(|_| !l.renewing && !l.releasing);
                let wake = renew.map_or(l.valid_until, |r| r.min(l.valid_until));
                (Some(wake), renew.map(|r| r - renew_window(l.lease)))
            }
            None => (None, None),
        };
        self.lease_timers.set(id, wake);
        self.renew_early.set(id, early);
    }

    /// Re-schedules cleanup `id`'s retry (none while it is on the wire or once it is gone).
    fn sync_cleanup(&mut self, id: u64) {
        let at = self.cleanups.get(&id).filter(|c| !c.in_flight).map(|c| c.due);
        self.cleanup_timers.set(id, at);
    }

    fn subscribe(&mut self, now: Instant) {
        let _ = now;
        let id = RequestId(self.fresh_id());
        self.subscribe_request = Some(id);
        self.subscription = Subscription::Pending;
        self.outgoing.push_back(Request {
            id,
            kind: RequestKind::Subscribe(self.channel.clone()),
        });
    }

    fn on_subscribed(&mut self, now: Instant, result: Result<()>) {
        match result {
            Ok(()) => {
                self.subscription = Subscription::Active;
                let ops: Vec<OpId> = self.acquires.keys().copied().collect();
                for op in ops {
                    let mut a = self.acquires.remove(&op).expect("listed above");
                    match a.state {
                        AcquireState::AwaitSubscribe => self.send_acquire(op, &mut a, now),
                        // A reconnect may have dropped grants: re-check at once.
                        AcquireState::Queued { .. } => {
                            a.state = AcquireState::Queued { recheck_at: now }
                        }
                        _ => {}
                    }
                    self.put_acquire(op, a);
                }
                self.handle_timeout(now);
            }
            Err(e) => {
                if e.kind() == ErrorKind::Authentication {
                    // Refused credentials or a user without the right to subscribe: waiting
                    // would only end in TIMEOUT and hide the cause, so every acquire ends
                    // now with the refusal (later ones try the subscription again).
                    let ops: Vec<OpId> = self.acquires.keys().copied().collect();
                    for op in ops {
                        let a = self.take_acquire(op).expect("listed above");
                        self.abandon(now, a);
                        self.complete(op, Outcome::Failed(e.clone()));
                    }
                }
                let jitter = Duration::from_millis(self.rng.next_u64() % 50);
                self.subscription =
                    Subscription::RetryAt(now + Duration::from_millis(100) + jitter);
            }
        }
    }

    fn send_acquire(&mut self, op: OpId, a: &mut AcquireOp, now: Instant) {
        if a.grant_lower_bound.is_none() {
            a.grant_lower_bound = Some(now);
        }
        a.state = AcquireState::InFlight;
        let mode = if a.wait == Wait::Try { "try" } else { "wait" };
        let mut args = vec![
            a.token.clone(),
            whole_millis(a.lease).to_string(),
            mode.into(),
            whole_millis(a.entry_ttl).to_string(),
            self.channel.clone(),
            self.retention_ms.clone(),
        ];
        if a.target.shared {
            args.extend(a.target.acquire_extra.iter().cloned());
        }
        let call = ScriptCall {
            script: a.target.acquire_script(),
            target: Arc::clone(&a.target),
            key_count: a.target.keys.len(),
            args,
            full: false,
        };
        self.batch.push((Purpose::Acquire(op), call));
    }

    fn dispatch(
        &mut self,
        now: Instant,
        sent: Instant,
        purpose: Purpose,
        call: ScriptCall,
        reply: Result<Reply>,
    ) {
        match purpose {
            Purpose::Acquire(op) => self.on_acquire_reply(now, sent, op, call, reply),
            Purpose::Renew(id, tag) => self.on_renew_reply(now, sent, id, tag, reply),
            Purpose::Extend(op, id, d, tag) => {
                self.on_extend_reply(now, sent, op, id, d, tag, reply)
            }
            Purpose::Release(op, id) => self.on_release_reply(now, op, id, reply),
            Purpose::Cleanup(id) => self.on_cleanup_reply(now, id, reply),
            Purpose::Observe(op) => {
                let outcome = match reply.and_then(|r| reply::parse_observe(&r)) {
                    Ok(leader) => Outcome::Observed(leader.map(|(value, term, pttl_ms)| {
                        LeaderInfo { value, term, remaining: Duration::from_millis(pttl_ms) }
                    })),
                    Err(e) => Outcome::Failed(e),
                };
                self.complete(op, outcome);
            }
        }
    }

    fn on_acquire_reply(
        &mut self,
        now: Instant,
        sent: Instant,
        op: OpId,
        call: ScriptCall,
        reply: Result<Reply>,
    ) {
        let Some(mut a) = self.take_acquire(op) else {
            // Cancelled (or timed out) while this was on the wire: undo whatever it did,
            // unless the same token was granted to us by a notification in the meantime.
            let token = &call.args[0];
            if !self.held_tokens.contains_key(token) {
                let keys = Arc::clone(&call.target);
                let lease = Duration::from_millis(call.args[1].parse().unwrap_or(0));
                let ttl = Duration::from_millis(call.args[3].parse().unwrap_or(0));
                self.add_cleanup(now, keys, token.clone(), lease.max(ttl));
            }
            return;
        };
        let parsed = reply.and_then(|r| reply::parse_acquire(&r));
        match parsed {
            Ok(AcquireReply::Held { fence, pttl_ms }) => {
                self.grant(op, a, fence, sent, Duration::from_millis(pttl_ms));
            }
            Ok(AcquireReply::Mismatch { setting, recorded }) => {
                // The script returned before touching anything (and a client can be queued only
                // while the recorded value is its own), so there is nothing to clean up.
                let asked = &a.target.acquire_extra[5];
                let message = format!(
                    "{setting} mismatch: this {what} is in use with {setting} = {recorded} (recorded on the server), this handle uses {setting} = {asked}; every client of one name must use the same value, which can change only while the {what} is idle (no holder, no waiter)",
                    what = a.target.what,
                );
                self.complete(op, Outcome::Failed(Error::invalid(message)));
            }
            Ok(AcquireReply::Busy { holder_pttl_ms, fence }) => {
                if a.wait == Wait::Try {
                    self.complete(op, Outcome::NotAcquired);
                    return;
                }
                a.grant_lower_bound = Some(sent);
                a.seen_fence = a.seen_fence.max(fence);
                a.backoff = FIRST_BACKOFF;
                let mut wait = a.recheck_interval();
                if let Some(p) = holder_pttl_ms {
                    // Re-check right after the holder's lease ends, so a holder that crashed
                    // (and never released) cannot stall us past its lease.
                    wait = wait.min(Duration::from_millis(p + 1));
                }
                a.state = AcquireState::Queued {
                    recheck_at: now + wait,
                };
                self.waiting_tokens.insert(a.token.clone(), op);
                self.put_acquire(op, a);
            }
            Err(e) if e.kind() == ErrorKind::Connection && a.wait != Wait::Try => {
                let jitter = Duration::from_millis(self.rng.next_u64() % 20);
                a.state = AcquireState::RetryAt(now + a.backoff + jitter);
                a.backoff = (a.backoff * 2).min(MAX_BACKOFF);
                self.waiting_tokens.insert(a.token.clone(), op);
                self.put_acquire(op, a);
            }
            Err(e) => {
                // The script may have run before its reply was lost or garbled (queued us, or
                // even granted us the lock): clean up as for an acquire abandoned in flight.
                let span = a.lease.max(a.entry_ttl);
                self.add_cleanup(now, a.target, a.token, span);
                self.complete(op, Outcome::Failed(e));
            }
        }
    }

    /// Records a grant. `since` is the earliest instant the server lease can have started and
    /// `server_lease` its length; a handoff grant shorter than the requested lease is extended
    /// to the full lease a third of the way into it (see PROTOCOL.md, promote).
    fn grant(&mut self, op: OpId, a: AcquireOp, fence: u64, since: Instant, server_lease: Duration) {
        let lease = LeaseId(op.0);
        let valid_until = since + server_lease.min(a.lease);
        let next_renew = if whole_millis(server_lease) < whole_millis(a.lease) {
            // A handoff grant: extend to the full lease a third of the way into the short one,
            // like a watchdog renewal (a short holding never needs the extra command).
            Some(since + server_lease / 3)
        } else {
            a.auto_renew.then(|| since + a.lease / 3)
        };
        self.held_tokens.insert(a.token.clone(), lease);
        self.leases.insert(
            lease,
            LeaseState {
                target: a.target,
                token: a.token,
                lease: a.lease,
                auto_renew: a.auto_renew,
                valid_until,
                next_renew,
                renewing: false,
                releasing: false,
                pexpires: Vec::new(),
                next_tag: 0,
                fence,
                holds: 1,
            },
        );
        self.sync_lease(lease);
        self.complete(op, Outcome::Acquired { lease, fencing_token: fence, valid_until });
    }

    fn on_renew_reply(
        &mut self,
        now: Instant,
        sent: Instant,
        id: LeaseId,
        tag: u64,
        reply: Result<Reply>,
    ) {
        let Some(l) = self.leases.get_mut(&id) else {
            return;
        };
        l.renewing = false;
        match reply.and_then(|r| reply::parse_flag("extend", &r)) {
            Ok(true) => {
                // Not `max` with the old validity: an extend sent before this renewal ran
                // before it, and this renewal's (possibly shorter) lease is what counts now.
                let d = l.settle_pexpire(tag, Some(sent)).unwrap_or(l.lease);
                l.next_renew = l.auto_renew.then(|| sent + d / 3);
                let valid_until = l.valid_until;
                self.events.push_back(Event::Renewed {
                    lease: id,
                    valid_until,
                });
            }
            Ok(false) => self.lose(
                now,
                id,
                "the lock was deleted or taken over (renewal refused)",
            ),
            Err(e) if e.kind() == ErrorKind::Connection => {
                l.settle_pexpire(tag, None);
                l.next_renew = Some(now + (l.lease / 10).min(Duration::from_millis(500)));
            }
            Err(e) => self.lose(now, id, &format!("renewal failed: {}", e.message())),
        }
        self.sync_lease(id);
    }

    #[allow(clippy::too_many_arguments)]
    fn on_extend_reply(
        &mut self,
        now: Instant,
        sent: Instant,
        op: OpId,
        id: LeaseId,
        d: Duration,
        tag: u64,
        reply: Result<Reply>,
    ) {
        let outcome = match reply.and_then(|r| reply::parse_flag("extend", &r)) {
            Ok(true) => match self.leases.get_mut(&id) {
                Some(l) => {
                    l.settle_pexpire(tag, Some(sent));
                    l.lease = d;
                    if l.auto_renew {
                        l.next_renew = Some(sent + d / 3);
                    }
                    Outcome::Extended {
                        valid_until: l.valid_until,
                    }
                }
                None => Outcome::Failed(not_held("the lease is no longer held")),
            },
            Ok(false) => {
                self.lose(
                    now,
                    id,
                    "the lock was deleted or taken over (extend refused)",
                );
                Outcome::Failed(not_held(
                    "the lock was deleted or taken over; extend never re-acquires",
                ))
            }
            Err(e) => {
                if let Some(l) = self.leases.get_mut(&id) {
                    l.settle_pexpire(tag, None);
                }
                Outcome::Failed(e)
            }
        };
        self.sync_lease(id);
        self.complete(op, outcome);
    }

    fn on_release_reply(&mut self, now: Instant, op: OpId, id: LeaseId, reply: Result<Reply>) {
        match reply.and_then(|r| reply::parse_flag("release", &r)) {
            Ok(was_held) => {
                self.remove_lease(id);
                self.complete(op, Outcome::Released { was_held });
            }
            Err(e) if e.kind() == ErrorKind::Connection => {
                // The owner gave the lock up: stop renewing it and keep retrying the release in
                // the background until it lands or the lease runs out, so a release that failed
                // in transport (or a dropped handle's release) cannot keep the lock forever.
                if let Some(l) = self.remove_lease(id) {
                    let span = l.pexpires.iter().map(|p| p.1).fold(l.lease, Duration::max);
                    self.add_cleanup(now, l.target, l.token, span);
                }
                let message = format!("the release was not confirmed (retrying in the background): {}", e.message());
                self.complete(op, Outcome::Failed(Error::new(ErrorKind::Connection, message)));
            }
            Err(e) => {
                self.remove_lease(id);
                self.complete(op, Outcome::Failed(e));
            }
        }
    }

    fn on_cleanup_reply(&mut self, now: Instant, id: u64, reply: Result<Reply>) {
        let Some(c) = self.cleanups.get_mut(&id) else {
            return;
        };
        c.in_flight = false;
        // A transient server error (BUSY, LOADING, ...) arrives as a reply, not a transport
        // error: parsing it makes it the retryable CONNECTION error it is.
        match reply.and_then(|r| reply::parse_flag("release", &r)) {
            Err(e) if e.kind() == ErrorKind::Connection && now < c.give_up_at => {
                c.due = now + c.backoff;
                c.backoff = (c.backoff * 2).min(MAX_BACKOFF);
            }
            _ => {
                self.cleanups.remove(&id);
            }
        }
        self.sync_cleanup(id);
    }

    fn remove_lease(&mut self, id: LeaseId) -> Option<LeaseState> {
        let l = self.leases.remove(&id)?;
        self.held_tokens.remove(&l.token);
        self.lease_timers.cancel(id);
        self.renew_early.cancel(id);
        Some(l)
    }

    fn lose(&mut self, now: Instant, id: LeaseId, why: &str) {
        if let Some(l) = self.remove_lease(id) {
            // If the server still has our token (we merely failed to renew in time), free it so
            // nobody waits on a lease its owner has given up. An unanswered extend may have
            // set a longer expiry than the lease, so keep trying for the longest of them.
            let span = l.pexpires.iter().map(|p| p.1).fold(l.lease, Duration::max);
            self.add_cleanup(now, l.target, l.token, span);
            self.events.push_back(Event::Lost {
                lease: id,
                error: not_held(why),
            });
        }
    }

    /// Removes from the server whatever an abandoned acquire may have left: its queue entry,
    /// or the lock itself if a grant raced the abandonment.
    fn abandon(&mut self, now: Instant, a: AcquireOp) {
        match a.state {
            AcquireState::AwaitSubscribe if a.grant_lower_bound.is_none() => {}
            // The reply of the in-flight ACQUIRE triggers the cleanup (see on_acquire_reply).
            AcquireState::InFlight => {}
            _ => {
                let span = a.lease.max(a.entry_ttl);
                self.add_cleanup(now, a.target, a.token, span);
            }
        }
    }

    fn add_cleanup(&mut self, now: Instant, target: Arc<Target>, token: String, span: Duration) {
        let id = self.fresh_id();
        let call = release_call(&target, &token, &self.retention_ms);
        self.cleanups.insert(
            id,
            Cleanup {
                target,
                token,
                due: now,
                give_up_at: now + span,
                in_flight: true,
                backoff: FIRST_BACKOFF,
            },
        );
        self.batch.push((Purpose::Cleanup(id), call));
    }

    /// Turns everything batched during one input into one pipelined request.
    fn flush(&mut self, now: Instant) {
        if self.batch.is_empty() {
            return;
        }
        let calls = std::mem::take(&mut self.batch);
        if self.split_pipelines && calls.len() > 1 {
            for call in calls {
                self.batch.push(call);
                self.flush(now);
            }
            return;
        }
        let mut commands: Vec<Command> = calls.iter().map(|(_, c)| eval_command(c)).collect();
        let waited = self.replica_acks.filter(|_| {
            calls.iter().any(|(p, _)| matches!(p, Purpose::Acquire(_) | Purpose::Renew(..) | Purpose::Extend(..)))
        });
        if let Some(acks) = waited {
            commands.push(Command(vec![
                b"WAIT".to_vec(),
                acks.replicas.to_string().into_bytes(),
                whole_millis(acks.timeout).to_string().into_bytes(),
            ]));
        }
        let id = RequestId(self.fresh_id());
        self.in_flight.insert(id, InFlight { sent: now, calls, waited });
        self.outgoing.push_back(Request {
            id,
            kind: RequestKind::Pipeline(commands),
        });
    }
}

fn not_held(why: &str) -> Error {
    Error::new(ErrorKind::NotHeld, why)
}

/// How long before its due instant a renewal may go out with others that are sent anyway: a
/// twelfth of the lease, so renewals due close together share one pipeline.
fn renew_window(lease: Duration) -> Duration {
    lease / 12
}

/// The earliest instant an acquire has work: its wait deadline, or its queue recheck or
/// transport retry, whichever comes first.
fn acquire_timer(a: &AcquireOp) -> Option<Instant> {
    let state = match a.state {
        AcquireState::Queued { recheck_at } => Some(recheck_at),
        AcquireState::RetryAt(t) => Some(t),
        AcquireState::AwaitSubscribe | AcquireState::InFlight => None,
    };
    match (a.deadline, state) {
        (Some(d), Some(t)) => Some(d.min(t)),
        (d, t) => d.or(t),
    }
}

fn release_call(target: &Arc<Target>, token: &str, retention_ms: &str) -> ScriptCall {
    ScriptCall {
        script: target.release_script(),
        target: Arc::clone(target),
        key_count: target.keys.len(),
        args: vec![token.to_string(), retention_ms.to_string()],
        full: false,
    }
}

fn extend_call(target: &Arc<Target>, token: &str, d: Duration) -> ScriptCall {
    let (script, key_count) = target.extend_script();
    ScriptCall {
        script,
        target: Arc::clone(target),
        key_count,
        args: vec![token.to_string(), whole_millis(d).to_string()],
        full: false,
    }
}

fn eval_command(call: &ScriptCall) -> Command {
    let script: &Script = call.script;
    let keys = &call.target.keys[..call.key_count];
    let mut args: Vec<Vec<u8>> = Vec::with_capacity(3 + keys.len() + call.args.len());
    if call.full {
        args.push(b"EVAL".to_vec());
        args.push(script.source.as_bytes().to_vec());
    } else {
        args.push(b"EVALSHA".to_vec());
        args.push(script.sha1().as_bytes().to_vec());
    }
    args.push(keys.len().to_string().into_bytes());
    args.extend(keys.iter().map(|k| k.as_bytes().to_vec()));
    args.extend(call.args.iter().map(|a| a.as_bytes().to_vec()));
    Command(args)
}

fn random_bytes<const N: usize>(rng: &mut dyn RandomSource) -> [u8; N] {
    let mut b = [0u8; N];
    rng.fill(&mut b);
    b
}

/// Lowercase hex, as owner tokens and client ids are written.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}
