//! Redlock: one lock held on a majority of N independent Redis masters (PROTOCOL.md §8), as a
//! sans-IO engine like [`Engine`](crate::engine::Engine): it never opens a socket, sleeps or
//! reads a clock; requests go out addressed to a master, replies come back as data.
//!
//! What it promises: at most one holder whose lease is valid, provided the masters' clocks run
//! at rates within the drift allowance, a master that lost its data (restart without
//! persistence) grants nothing for one maximum lease, and the holder stops acting when its
//! lease's validity ends. What it does not offer: fencing tokens. A majority of independent
//! Redis servers is not a linearizable counter, so a token taken from it could go backwards
//! under the failures Redlock tolerates; use the single-instance mutex (or a consensus backend)
//! where the protected resource needs tokens.

mod round;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::engine::timers::Timers;
use crate::engine::{hex, Command, Event, LeaseId, OpId, RequestId, Wait};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{self, whole_millis, LockOptions};
use crate::random::RandomSource;
use crate::redis::redlock as scripts;
use crate::redis::reply::{self, Reply};
use crate::redis::Script;
use crate::time::{Duration, Instant};

use round::{Round, Tally, Vote};

/// Most masters one Redlock may span.
pub const MAX_MASTERS: usize = 31;

/// Settings of one Redlock deployment; every client of it must use the same `max_lease`.
#[derive(Clone, Debug)]
pub struct RedlockConfig {
    /// Prepended to every key (default `lockgate:`).
    pub key_prefix: String,
    /// How many independent masters there are (the quorum is `masters / 2 + 1`).
    pub masters: usize,
    /// Clock-rate drift allowed between this client and the masters, as a fraction of the lease
    /// (default 0.01): validity = lease − elapsed − lease × `drift_factor` − `drift_fixed`.
    pub drift_factor: f64,
    /// Fixed part of the drift allowance (default 2 ms).
    pub drift_fixed: Duration,
    /// The longest lease any client of the deployment takes (default 30 s). A master refuses
    /// grants until it has been up this long (the delayed-restart rule), and longer leases are
    /// rejected.
    pub max_lease: Duration,
    /// How long one attempt waits for the masters' answers before counting the silent ones as
    /// failed (default 50 ms; keep it small next to the lease).
    pub node_timeout: Duration,
    /// Pause before another attempt after a failed one (default 200 ms) ...
    pub retry_delay: Duration,
    /// ... plus a random part up to this (default 200 ms), so contenders do not retry in step.
    pub retry_jitter: Duration,
}

impl Default for RedlockConfig {
    fn default() -> Self {
        RedlockConfig {
            key_prefix: "lockgate:".into(),
            masters: 3,
            drift_factor: 0.01,
            drift_fixed: Duration::from_millis(2),
            max_lease: options::DEFAULT_LEASE,
            node_timeout: Duration::from_millis(50),
            retry_delay: Duration::from_millis(200),
            retry_jitter: Duration::from_millis(200),
        }
    }
}

impl RedlockConfig {
    /// Checks every field against its documented range.
    pub fn validate(&self) -> Result<()> {
        options::validate_prefix(&self.key_prefix)?;
        if self.masters == 0 || self.masters > MAX_MASTERS {
            return Err(Error::invalid(format!(
                "a Redlock needs between 1 and {MAX_MASTERS} masters"
            )));
        }
        if !self.drift_factor.is_finite() || !(0.0..0.5).contains(&self.drift_factor) {
            return Err(Error::invalid("drift_factor must be at least 0 and below 0.5"));
        }
        if self.drift_fixed > Duration::from_secs(10) {
            return Err(Error::invalid("drift_fixed must be at most 10 s"));
        }
        options::validate_lease(self.max_lease)
            .map_err(|_| Error::invalid("max_lease must be between 10 ms and 30 days"))?;
        for (what, d) in [
            ("node_timeout", self.node_timeout),
            ("retry_delay", self.retry_delay),
        ] {
            if d < Duration::from_millis(1) || d > options::MAX_DURATION {
                return Err(Error::invalid(format!("{what} must be between 1 ms and 30 days")));
            }
        }
        if self.retry_jitter > options::MAX_DURATION {
            return Err(Error::invalid("retry_jitter must be at most 30 days"));
        }
        Ok(())
    }

    /// Checks a lease or extension for this deployment: a valid duration, at most `max_lease`,
    /// and longer than its drift allowance.
    pub fn check_lease(&self, lease: Duration) -> Result<()> {
        options::validate_lease(lease)?;
        if lease > self.max_lease {
            return Err(Error::invalid(format!(
                "the lease exceeds this Redlock's max_lease of {} ms (every client must agree on it)",
                whole_millis(self.max_lease)
            )));
        }
        if self.drift(lease) >= lease {
            return Err(Error::invalid("the lease is shorter than the drift allowance"));
        }
        Ok(())
    }

    /// The drift allowance for a lease of `d`.
    pub fn drift(&self, d: Duration) -> Duration {
        Duration::from_secs_f64(d.as_secs_f64() * self.drift_factor) + self.drift_fixed
    }
}

/// One command for one master.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRequest {
    /// Pass back to [`RedlockEngine::handle_reply`].
    pub id: RequestId,
    /// Which master (0-based, in the order the driver was configured with).
    pub master: usize,
    /// The command to send on that master's connection.
    pub command: Command,
}

/// How a Redlock operation ended.
#[derive(Clone, Debug, PartialEq)]
pub enum RedlockOutcome {
    /// The lock is held on a majority through `lease`. There is no fencing token (see the
    /// module documentation).
    Acquired {
        /// Handle for extend/release.
        lease: LeaseId,
        /// Local monotonic instant before which the lease is certainly valid (drift deducted).
        valid_until: Instant,
    },
    /// A one-shot attempt found the lock held.
    NotAcquired,
    /// Released; `was_held` tells whether a majority still held it.
    Released {
        /// False if it had expired or been taken over on too many masters.
        was_held: bool,
    },
    /// Extended on a majority; the new local validity.
    Extended {
        /// Local instant before which the lease is certainly valid.
        valid_until: Instant,
    },
    /// The operation failed; whatever it set on the masters is being undone.
    Failed(Error),
}

/// Why a round was sent.
#[derive(Clone, Copy, Debug)]
enum Purpose {
    Acquire(OpId),
    Renew(LeaseId),
    Extend(OpId, LeaseId),
    Release(OpId),
    /// Best-effort removal of a failed, cancelled or lost attempt's keys.
    Undo,
}

struct Acquire {
    key: Arc<str>,
    token: Arc<str>,
    lease: Duration,
    auto_renew: bool,
    wait: Wait,
    deadline: Option<Instant>,
    /// The round on the wire, or when to send the next one.
    round: Option<u64>,
    retry_at: Option<Instant>,
    /// Why the last attempt failed, for the timeout's message.
    last_failure: Option<String>,
}

struct Held {
    key: Arc<str>,
    token: Arc<str>,
    lease: Duration,
    auto_renew: bool,
    valid_until: Instant,
    next_renew: Option<Instant>,
    renewing: bool,
    /// Extend/renew rounds on the wire: (round, the bound their PEXPIRE could shorten us to).
    pexpires: Vec<(u64, Instant, Duration)>,
}

/// The Redlock protocol engine. Same driving contract as [`Engine`](crate::engine::Engine),
/// except that every request names the master it goes to, carries one command, and is answered
/// with one reply (or the transport error). Requests to one master must be performed in
/// emission order on one connection; masters are independent of each other.
pub struct RedlockEngine {
    config: RedlockConfig,
    quorum: usize,
    max_lease_ms: String,
    rng: Box<dyn RandomSource>,
    next_id: u64,
    acquires: BTreeMap<OpId, Acquire>,
    leases: BTreeMap<LeaseId, Held>,
    rounds: BTreeMap<u64, Round<Purpose>>,
    /// Node timeouts of the rounds not yet decided.
    round_timers: Timers<u64>,
    /// When each acquire next has work: its wait deadline or its retry, the earlier.
    acquire_timers: Timers<OpId>,
    /// When each lease next has work: its validity's end or its renewal, the earlier.
    lease_timers: Timers<LeaseId>,
    in_flight: HashMap<RequestId, (u64, usize)>,
    /// Per master, the scripts it answered NOSCRIPT for and has not been sent in full since.
    missing_scripts: Vec<HashSet<&'static str>>,
    outgoing: VecDeque<NodeRequest>,
    events: VecDeque<Event<RedlockOutcome>>,
}

impl RedlockEngine {
    /// A new engine for `config.masters` masters. `rng` mints owner tokens and retry jitter.
    pub fn new(config: RedlockConfig, rng: Box<dyn RandomSource>) -> Result<Self> {
        config.validate()?;
        Ok(RedlockEngine {
            quorum: config.masters / 2 + 1,
            missing_scripts: vec![HashSet::new(); config.masters],
            max_lease_ms: whole_millis(config.max_lease).to_string(),
            config,
            rng,
            next_id: 1,
            acquires: BTreeMap::new(),
            leases: BTreeMap::new(),
            rounds: BTreeMap::new(),
            round_timers: Timers::default(),
            acquire_timers: Timers::default(),
            lease_timers: Timers::default(),
            in_flight: HashMap::new(),
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
        })
    }

    /// How many masters must agree: `masters / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// The configuration.
    pub fn config(&self) -> &RedlockConfig {
        &self.config
    }

    /// Starts acquiring lock `name`: every attempt asks all masters at once and succeeds if a
    /// majority grants within the node timeout with validity left; a failed attempt is undone
    /// on every master and retried after a jittered delay while `wait` allows. Completes with
    /// [`RedlockOutcome::Acquired`], [`RedlockOutcome::NotAcquired`] (only [`Wait::Try`]) or
    /// [`RedlockOutcome::Failed`]. Invalid arguments are rejected here, before anything is sent.
    pub fn acquire(&mut self, now: Instant, name: &str, options: &LockOptions, wait: Wait) -> Result<OpId> {
        options::validate_name(name)?;
        options.validate()?;
        self.config.check_lease(options.lease)?;
        let wait = match wait {
            Wait::For(d) => {
                options::validate_wait(d)?;
                if d.is_zero() { Wait::Try } else { Wait::For(d) }
            }
            w => w,
        };
        let op = OpId(self.fresh_id());
        let mut token = [0u8; 16];
        self.rng.fill(&mut token);
        let acquire = Acquire {
            key: scripts::key(&self.config.key_prefix, name).into(),
            // The master count travels in the value, so a client of another deployment size
            // meeting the key learns that its quorum differs (PROTOCOL.md §8).
            token: scripts::owner_value(&hex(&token), self.config.masters).into(),
            lease: options.lease,
            auto_renew: options.auto_renew,
            wait,
            deadline: match wait {
                Wait::For(d) => Some(now + d),
                _ => None,
            },
            round: None,
            retry_at: None,
            last_failure: None,
        };
        self.acquires.insert(op, acquire);
        self.start_attempt(now, op);
        Ok(op)
    }

    /// Releases a lease on every master (owner-only). Completes with
    /// [`RedlockOutcome::Released`] once every master answered, or after the node timeout with
    /// a `CONNECTION` failure if too few confirmed (their keys then expire with the lease).
    pub fn release(&mut self, now: Instant, lease: LeaseId) -> OpId {
        let op = OpId(self.fresh_id());
        match self.leases.remove(&lease) {
            Some(l) => {
                self.sync_lease(lease);
                let args = vec![l.token.to_string()];
                self.start_round(now, Purpose::Release(op), &scripts::RELEASE, &l.key, args);
            }
            None => self.complete(op, RedlockOutcome::Released { was_held: false }),
        }
        op
    }

    /// Sets the lease's remaining time to `duration` on every master that still holds it;
    /// succeeds with a majority, never re-acquires where the key vanished. A majority refusing
    /// is a `NOT_HELD` failure that also marks the lease lost.
    pub fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId> {
        self.config.check_lease(duration)?;
        let op = OpId(self.fresh_id());
        if self.leases.contains_key(&lease) {
            self.send_pexpire(now, Purpose::Extend(op, lease), lease, duration);
        } else {
            self.complete(op, RedlockOutcome::Failed(not_held("the lease is no longer held")));
        }
        Ok(op)
    }

    /// Abandons a pending acquire: it completes with a `CANCELLED` failure and whatever its
    /// attempt set is removed from every master. Unknown ids are ignored.
    pub fn cancel(&mut self, now: Instant, op: OpId) {
        if self.abandon(now, op) {
            let e = Error::new(ErrorKind::Cancelled, "the acquire was cancelled");
            self.complete(op, RedlockOutcome::Failed(e));
        }
    }

    /// Cancels every pending acquire and releases every lease (client shutdown).
    pub fn shutdown(&mut self, now: Instant) {
        let ops: Vec<OpId> = self.acquires.keys().copied().collect();
        for op in ops {
            self.cancel(now, op);
        }
        let leases: Vec<LeaseId> = self.leases.keys().copied().collect();
        for lease in leases {
            let _ = self.release(now, lease);
        }
    }

    /// The local instant until which `lease` is certainly valid, or `None` if it is not held.
    pub fn lease_valid_until(&self, lease: LeaseId) -> Option<Instant> {
        self.leases.get(&lease).map(|l| l.valid_until)
    }

    /// Whether nothing is pending: no acquire, lease or request in flight.
    pub fn is_idle(&self) -> bool {
        self.acquires.is_empty() && self.leases.is_empty() && self.in_flight.is_empty()
    }

    /// Hands back the reply to request `id`, or the transport error that prevented one.
    pub fn handle_reply(&mut self, now: Instant, id: RequestId, reply: Result<Reply>) {
        let Some((round_id, master)) = self.in_flight.remove(&id) else {
            return;
        };
        let Some(round) = self.rounds.get_mut(&round_id) else {
            return;
        };
        // A decided acquire attempt is not re-sent: its undo (or, after a grant, possibly the
        // release) is already queued ahead of it and the re-sent grant would outlive both. An
        // extend or release is re-sent even when decided, so every master that still holds the
        // key gets it (they only ever act on the owner's own key).
        let resend = !round.decided || !matches!(round.purpose, Purpose::Acquire(_));
        if matches!(&reply, Ok(r) if r.is_noscript()) && !round.sent_full[master] {
            // The master lost its script cache (restart, SCRIPT FLUSH). Whether or not this call
            // is re-sent, the next round's call of this script to it carries the body, so the
            // master does not sit out every round that the others decide before it answers.
            self.missing_scripts[master].insert(round.script.name);
            if !resend {
                round.votes[master] = Vote::Failed(Error::protocol("NOSCRIPT after the attempt was decided"));
                self.decide(now, round_id);
                return;
            }
            round.sent_full[master] = true;
            let command = eval_command(round.script, &round.key, &round.args, true);
            self.send(round_id, master, command);
            return;
        }
        let vote = match reply.and_then(|r| parse_vote(round.script, &r)) {
            Ok(v) => v,
            Err(e) => Vote::Failed(e),
        };
        // A disagreement reported after a majority already granted: the grant was made beside
        // a holder that counts the masters differently, so give it up at once.
        let late_mismatch = match (&vote, round.purpose, round.decided) {
            (Vote::Mismatch(theirs), Purpose::Acquire(op), true) => Some((op, theirs.clone())),
            _ => None,
        };
        round.votes[master] = vote;
        self.decide(now, round_id);
        if let Some((op, theirs)) = late_mismatch {
            let why = format!("{}; the grant is given up", self.mismatch_message(&theirs));
            self.lose(now, LeaseId(op.0), &why);
        }
    }

    /// The error text for a holder that counts `theirs` masters.
    fn mismatch_message(&self, theirs: &str) -> String {
        format!(
            "masters mismatch: this lock is held by a client that counts {theirs} masters (recorded on a master), this client counts {} (quorum {}); every client of one Redlock must use the same masters",
            self.config.masters, self.quorum
        )
    }

    /// Runs every timer due at `now`: node timeouts, retries, wait deadlines, renewals, expiry.
    /// Only what is due is visited (O(log n) each); calling it early or twice is a no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        // Kind by kind, each in ascending id order (as the engine once scanned its tables); a
        // kind's due entries are taken only after the kinds before it ran, so what a decided
        // round left due at `now` (a retry, a renewal) runs in this same call.
        for id in self.round_timers.take_due(now) {
            if let Some(r) = self.rounds.get_mut(&id) {
                if !r.decided && r.deadline <= now {
                    r.timed_out = true;
                    self.decide(now, id);
                }
            }
            self.sync_round(id);
        }
        for op in self.acquire_timers.take_due(now) {
            let Some(a) = self.acquires.get(&op) else {
                continue;
            };
            if a.deadline.is_some_and(|d| d <= now) {
                let why = a.last_failure.clone();
                self.abandon(now, op);
                let message = match why {
                    Some(why) => format!("timed out waiting for the lock (last attempt: {why})"),
                    None => "timed out waiting for the lock".into(),
                };
                self.complete(op, RedlockOutcome::Failed(Error::new(ErrorKind::Timeout, message)));
            } else if a.retry_at.is_some_and(|t| t <= now) {
                self.start_attempt(now, op);
            }
            self.sync_acquire(op);
        }
        for id in self.lease_timers.take_due(now) {
            let Some(l) = self.leases.get(&id) else {
                continue;
            };
            if l.valid_until <= now {
                self.lose(now, id, "the lease's validity ran out before a majority renewed it");
            } else if !l.renewing && l.next_renew.is_some_and(|t| t <= now) {
                let lease = l.lease;
                self.leases.get_mut(&id).expect("present").renewing = true;
                self.send_pexpire(now, Purpose::Renew(id), id, lease);
            }
            self.sync_lease(id);
        }
    }

    /// The next instant at which [`handle_timeout`](Self::handle_timeout) has work, if any
    /// (O(log n): the first entry of each timer table).
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.round_timers.next(), self.acquire_timers.next(), self.lease_timers.next()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Re-schedules round `id`'s node timeout (none once decided or forgotten).
    fn sync_round(&mut self, id: u64) {
        let at = self.rounds.get(&id).filter(|r| !r.decided).map(|r| r.deadline);
        self.round_timers.set(id, at);
    }

    /// Re-schedules `op`'s deadline or retry from its state (or cancels it if gone).
    fn sync_acquire(&mut self, op: OpId) {
        let at = self.acquires.get(&op).and_then(|a| match (a.deadline, a.retry_at) {
            (Some(d), Some(r)) => Some(d.min(r)),
            (d, r) => d.or(r),
        });
        self.acquire_timers.set(op, at);
    }

    /// Re-schedules `id`'s expiry and renewal from its state (or cancels them if it is gone).
    /// Called after every change to a lease's validity or renewal.
    fn sync_lease(&mut self, id: LeaseId) {
        let at = self.leases.get(&id).map(|l| match l.next_renew.filter(|_| !l.renewing) {
            Some(r) => r.min(l.valid_until),
            None => l.valid_until,
        });
        self.lease_timers.set(id, at);
    }

    /// The next request to perform, in emission order.
    pub fn poll_request(&mut self) -> Option<NodeRequest> {
        self.outgoing.pop_front()
    }

    /// The next event to deliver.
    pub fn poll_event(&mut self) -> Option<Event<RedlockOutcome>> {
        self.events.pop_front()
    }

    fn start_attempt(&mut self, now: Instant, op: OpId) {
        let a = self.acquires.get_mut(&op).expect("caller checked");
        a.retry_at = None;
        let args = vec![a.token.to_string(), whole_millis(a.lease).to_string(), self.max_lease_ms.clone()];
        let key = Arc::clone(&a.key);
        let round = self.start_round(now, Purpose::Acquire(op), &scripts::ACQUIRE, &key, args);
        self.acquires.get_mut(&op).expect("caller checked").round = Some(round);
        self.sync_acquire(op);
    }

    /// Sends one script to every master as one round of votes.
    fn start_round(&mut self, now: Instant, purpose: Purpose, script: &'static Script, key: &Arc<str>, args: Vec<String>) -> u64 {
        let id = self.fresh_id();
        let round = Round::new(purpose, script, Arc::clone(key), args, now, now + self.config.node_timeout, self.config.masters);
        let command = eval_command(script, key, &round.args, false);
        let mut round = round;
        for master in 0..self.config.masters {
            if self.missing_scripts[master].remove(script.name) {
                round.sent_full[master] = true;
                self.send(id, master, eval_command(script, key, &round.args, true));
            } else {
                self.send(id, master, command.clone());
            }
        }
        self.rounds.insert(id, round);
        self.sync_round(id);
        id
    }

    fn send(&mut self, round: u64, master: usize, command: Command) {
        let id = RequestId(self.fresh_id());
        self.in_flight.insert(id, (round, master));
        self.outgoing.push_back(NodeRequest { id, master, command });
    }

    fn send_pexpire(&mut self, now: Instant, purpose: Purpose, lease: LeaseId, d: Duration) {
        let bound = now + d.saturating_sub(self.config.drift(d));
        let l = self.leases.get_mut(&lease).expect("caller checked");
        let args = vec![l.token.to_string(), whole_millis(d).to_string()];
        let key = Arc::clone(&l.key);
        let round = self.start_round(now, purpose, &scripts::EXTEND, &key, args);
        let l = self.leases.get_mut(&lease).expect("caller checked");
        // Until answered, the PEXPIRE may shorten the lease on the masters when it runs.
        l.valid_until = l.valid_until.min(bound);
        l.pexpires.push((round, bound, d));
        self.sync_lease(lease);
    }

    /// Acts on a round once its result is certain (or its time is up); forgets it once every
    /// master answered.
    fn decide(&mut self, now: Instant, id: u64) {
        let quorum = self.quorum;
        let round = self.rounds.get_mut(&id).expect("caller checked");
        let tally = round.tally();
        let settled = match round.purpose {
            // An acquire or extend is settled by a majority either way; a release hears everyone.
            Purpose::Acquire(_) => {
                tally.yes >= quorum || tally.yes + tally.pending < quorum || round.mismatch().is_some()
            }
            Purpose::Renew(_) | Purpose::Extend(..) => {
                tally.yes >= quorum || tally.yes + tally.pending < quorum
            }
            Purpose::Release(_) | Purpose::Undo => tally.pending == 0,
        };
        let conclude = !round.decided && (settled || round.timed_out || tally.pending == 0);
        round.decided |= conclude;
        let (purpose, sent) = (round.purpose, round.sent);
        let first_error = round.first_error().map(|e| e.message().to_string());
        let mismatch = round.mismatch().map(str::to_string);
        if tally.pending == 0 {
            self.rounds.remove(&id);
        }
        self.sync_round(id);
        if !conclude {
            return;
        }
        match purpose {
            Purpose::Acquire(op) => {
                match mismatch {
                    Some(theirs) => self.refuse_acquire(now, op, id, &theirs),
                    None => self.conclude_acquire(now, op, id, sent, tally, first_error),
                }
                self.sync_acquire(op);
            }
            Purpose::Renew(lease) => {
                self.conclude_pexpire(now, None, lease, id, sent, tally);
                self.sync_lease(lease);
            }
            Purpose::Extend(op, lease) => {
                self.conclude_pexpire(now, Some(op), lease, id, sent, tally);
                self.sync_lease(lease);
            }
            Purpose::Release(op) => {
                let unconfirmed = tally.failed + tally.pending;
                let outcome = if tally.yes >= quorum || unconfirmed == 0 {
                    RedlockOutcome::Released { was_held: tally.yes >= quorum }
                } else {
                    RedlockOutcome::Failed(Error::new(
                        ErrorKind::Connection,
                        format!(
                            "the release was not confirmed on {unconfirmed} of {} masters; they keep the key until the lease ends",
                            self.config.masters
                        ),
                    ))
                };
                self.complete(op, outcome);
            }
            Purpose::Undo => {}
        }
    }

    fn conclude_acquire(&mut self, now: Instant, op: OpId, round: u64, sent: Instant, tally: Tally, first_error: Option<String>) {
        let Some(a) = self.acquires.get(&op).filter(|a| a.round == Some(round)) else {
            return; // Cancelled or timed out meanwhile; its undo round is already on the wire.
        };
        let quorum = self.quorum;
        let failure = if tally.yes >= quorum {
            let valid_until = sent + a.lease.saturating_sub(self.config.drift(a.lease));
            if now < valid_until {
                let a = self.acquires.remove(&op).expect("present");
                self.grant(op, a, sent, valid_until);
                return;
            }
            format!(
                "a majority granted, but only after the lease's validity had run out ({} ms after sending)",
                whole_millis(now.saturating_duration_since(sent))
            )
        } else {
            let mut why = format!(
                "{} of {} masters granted, {} are needed ({} held by another owner, {} restarted less than max_lease ago, {} failed or silent)",
                tally.yes, self.config.masters, quorum, tally.no, tally.restarting, tally.failed + tally.pending
            );
            if let Some(e) = first_error {
                why.push_str(&format!("; first error: {e}"));
            }
            why
        };
        let a = self.acquires.get_mut(&op).expect("present");
        a.round = None;
        let key = Arc::clone(&a.key);
        let token = a.token.to_string();
        self.start_round(now, Purpose::Undo, &scripts::RELEASE, &key, vec![token]);
        let a = self.acquires.get_mut(&op).expect("present");
        if a.wait == Wait::Try {
            let outcome = if tally.no > 0 && tally.yes < quorum {
                RedlockOutcome::NotAcquired
            } else {
                RedlockOutcome::Failed(Error::new(ErrorKind::Connection, failure))
            };
            self.acquires.remove(&op);
            self.complete(op, outcome);
            return;
        }
        let jitter_ms = whole_millis(self.config.retry_jitter);
        let jitter = if jitter_ms == 0 { 0 } else { self.rng.next_u64() % (jitter_ms + 1) };
        let a = self.acquires.get_mut(&op).expect("present");
        let mut at = now + self.config.retry_delay + Duration::from_millis(jitter);
        if let Some(d) = a.deadline {
            at = at.min(d);
        }
        a.retry_at = Some(at);
        a.last_failure = Some(failure);
    }

    /// Ends an attempt that met a holder counting another number of masters: undone on every
    /// master, failed with INVALID_ARGUMENT (a configuration error; retrying cannot help).
    fn refuse_acquire(&mut self, now: Instant, op: OpId, round: u64, theirs: &str) {
        if self.acquires.get(&op).is_none_or(|a| a.round != Some(round)) {
            return; // Cancelled or timed out meanwhile; its undo round is already on the wire.
        }
        let a = self.acquires.remove(&op).expect("present");
        self.start_round(now, Purpose::Undo, &scripts::RELEASE, &a.key, vec![a.token.to_string()]);
        let message = self.mismatch_message(theirs);
        self.complete(op, RedlockOutcome::Failed(Error::invalid(message)));
    }

    fn grant(&mut self, op: OpId, a: Acquire, sent: Instant, valid_until: Instant) {
        let lease = LeaseId(op.0);
        self.leases.insert(
            lease,
            Held {
                key: a.key,
                token: a.token,
                lease: a.lease,
                auto_renew: a.auto_renew,
                valid_until,
                next_renew: a.auto_renew.then(|| sent + a.lease / 3),
                renewing: false,
                pexpires: Vec::new(),
            },
        );
        self.sync_lease(lease);
        self.complete(op, RedlockOutcome::Acquired { lease, valid_until });
    }

    fn conclude_pexpire(&mut self, now: Instant, op: Option<OpId>, lease: LeaseId, round: u64, sent: Instant, tally: Tally) {
        let quorum = self.quorum;
        let masters = self.config.masters;
        let Some(l) = self.leases.get_mut(&lease) else {
            if let Some(op) = op {
                self.complete(op, RedlockOutcome::Failed(not_held("the lease is no longer held")));
            }
            return;
        };
        let Some(i) = l.pexpires.iter().position(|p| p.0 == round) else {
            return;
        };
        let (_, bound, d) = l.pexpires.remove(i);
        if op.is_none() {
            l.renewing = false;
        }
        if tally.yes >= quorum {
            // A majority now expires no earlier than `bound`; a PEXPIRE still unanswered may run
            // after this one and shorten it, so its bound still caps ours.
            l.valid_until = l.pexpires.iter().map(|p| p.1).fold(bound, Instant::min);
            l.lease = d;
            l.next_renew = l.auto_renew.then(|| sent + d / 3);
            let valid_until = l.valid_until;
            if valid_until <= now {
                self.lose(now, lease, "the extension was confirmed only after the lease's validity had run out");
                if let Some(op) = op {
                    self.complete(op, RedlockOutcome::Failed(not_held("the lease's validity ran out")));
                }
            } else if let Some(op) = op {
                self.complete(op, RedlockOutcome::Extended { valid_until });
            } else {
                self.events.push_back(Event::Renewed { lease, valid_until });
            }
        } else if tally.no > masters - quorum {
            // Too many masters no longer hold our key (expired, taken over, restarted): a
            // majority cannot come back without re-acquiring, which an extend never does.
            self.lose(now, lease, "the lock was lost on a majority of masters (extend refused)");
            if let Some(op) = op {
                self.complete(op, RedlockOutcome::Failed(not_held("the lock was lost on a majority of masters; extend never re-acquires")));
            }
        } else {
            let message = format!("{} of {} masters confirmed the extension, {} are needed", tally.yes, masters, quorum);
            match op {
                Some(op) => self.complete(op, RedlockOutcome::Failed(Error::new(ErrorKind::Connection, message))),
                None => l.next_renew = Some(now + (l.lease / 10).min(Duration::from_millis(500))),
            }
        }
    }

    /// Marks a lease lost and removes what may remain of it on the masters.
    fn lose(&mut self, now: Instant, lease: LeaseId, why: &str) {
        if let Some(l) = self.leases.remove(&lease) {
            self.lease_timers.cancel(lease);
            let token = l.token.to_string();
            self.start_round(now, Purpose::Undo, &scripts::RELEASE, &l.key, vec![token]);
            self.events.push_back(Event::Lost { lease, error: not_held(why) });
        }
    }

    /// Forgets a pending acquire and undoes whatever it may have set; false if unknown.
    fn abandon(&mut self, now: Instant, op: OpId) -> bool {
        let Some(a) = self.acquires.remove(&op) else {
            return false;
        };
        self.acquire_timers.cancel(op);
        if a.round.is_some() {
            // Queued behind the attempt on every master's connection, so it runs after it.
            self.start_round(now, Purpose::Undo, &scripts::RELEASE, &a.key, vec![a.token.to_string()]);
        }
        true
    }

    fn complete(&mut self, op: OpId, outcome: RedlockOutcome) {
        self.events.push_back(Event::Completed { op, outcome });
    }

    fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }
}

fn parse_vote(script: &Script, r: &Reply) -> Result<Vote> {
    match r {
        Reply::Int(1) => Ok(Vote::Yes),
        Reply::Int(0) => Ok(Vote::No),
        Reply::Int(-1) if std::ptr::eq(script, &scripts::ACQUIRE) => Ok(Vote::Restarting),
        Reply::Array(items) if std::ptr::eq(script, &scripts::ACQUIRE) => match items.as_slice() {
            [Reply::Int(-2), Reply::Data(n)] => match std::str::from_utf8(n) {
                Ok(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => Ok(Vote::Mismatch(n.to_string())),
                _ => reply::parse_flag(script.name, r).map(|_| Vote::No),
            },
            _ => reply::parse_flag(script.name, r).map(|_| Vote::No),
        },
        other => reply::parse_flag(script.name, other).map(|_| Vote::No),
    }
}

fn not_held(why: &str) -> Error {
    Error::new(ErrorKind::NotHeld, why)
}

fn eval_command(script: &Script, key: &str, args: &[String], full: bool) -> Command {
    let mut parts: Vec<Vec<u8>> = Vec::with_capacity(4 + args.len());
    if full {
        parts.push(b"EVAL".to_vec());
        parts.push(script.source.as_bytes().to_vec());
    } else {
        parts.push(b"EVALSHA".to_vec());
        parts.push(script.sha1().as_bytes().to_vec());
    }
    parts.push(b"1".to_vec());
    parts.push(key.as_bytes().to_vec());
    parts.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    Command(parts)
}
