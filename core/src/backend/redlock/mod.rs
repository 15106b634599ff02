//! The Redlock backend (PROTOCOL.md §8): one lock held on a majority of N independent Redis
//! masters, as a [`Backend`] of the lock engine. Every engine call becomes one *round*: the
//! same script sent to every master at once, decided by a majority of votes (or the node
//! timeout); requests go out addressed to a master, replies come back as data. The engine
//! supplies everything else (deadlines, retries, validity, renewal, loss, cleanups).
//!
//! What it promises: at most one holder whose lease is valid, provided the masters' clocks run
//! at rates within the drift allowance, a master that lost its data (restart without
//! persistence) grants nothing for one maximum lease, and the holder stops acting when its
//! lease's validity ends. What it does not offer: fencing tokens. A majority of independent
//! Redis servers is not a linearizable counter, so a token taken from it could go backwards
//! under the failures Redlock tolerates; use the single-instance mutex (or a consensus backend)
//! where the protected resource needs tokens.

pub mod address;
/// The scripts each master runs (PROTOCOL.md §8).
pub mod scripts;
mod inspect;
mod list;
mod round;
pub mod data;
pub mod spec;
#[cfg(feature = "tokio")]
pub(crate) mod transport;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::engine::timers::Timers;
use crate::engine::{
    Action, Answer, Attempt, Backend, Ctx, Done, LeaseId, LockEngine, Renewal, Purpose, Release, RequestId, RoundVotes,
    Signal, Verdict,
};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{self, whole_millis, LockOptions};
use crate::primitive::Primitive;
use crate::random::RandomSource;
use crate::backend::redis::reply::{self, Reply};
use crate::backend::redis::{Command, Script};
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
    /// How long a release, a break or an inspect waits for the masters' answers (default 5 s,
    /// the client's response timeout). Unlike an attempt, these protect no validity: a reply a
    /// busy client reads after the node timeout is still the master's answer, and counting it
    /// as silent would report a release as unconfirmed that every master confirmed.
    pub response_timeout: Duration,
    /// Pause before another attempt after a failed one (default 200 ms) ...
    pub retry_delay: Duration,
    /// ... plus a random part up to this (default 200 ms), so contenders do not retry in step.
    pub retry_jitter: Duration,
    /// The holder label stored beside each lock key (PROTOCOL.md §12); empty: none.
    pub label: String,
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
            response_timeout: crate::connect::options::DEFAULT_TIMEOUT,
            retry_delay: Duration::from_millis(200),
            retry_jitter: Duration::from_millis(200),
            label: String::new(),
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
            ("response_timeout", self.response_timeout),
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
    /// A lock was inspected.
    Inspected(crate::inspect::Snapshot),
    /// A lock was broken: what was removed (a label, no fencing token), or `None`.
    Broken(Option<crate::break_lock::Broken>),
    /// A page of locks was listed.
    Listed(crate::listing::Page),
    /// The operation failed; whatever it set on the masters is being undone.
    Failed(Error),
}

impl From<Done> for RedlockOutcome {
    fn from(done: Done) -> RedlockOutcome {
        match done {
            // No fencing token: see the module documentation.
            Done::Acquired { lease, valid_until, .. } => RedlockOutcome::Acquired { lease, valid_until },
            Done::NotAcquired => RedlockOutcome::NotAcquired,
            Done::Released { was_held } => RedlockOutcome::Released { was_held },
            Done::Extended { valid_until } => RedlockOutcome::Extended { valid_until },
            // The backend refuses observe_leader before anything starts (check_observe).
            Done::Observed(_) => RedlockOutcome::Failed(Error::protocol("a Redlock observed an election")),
            Done::Inspected(s) => RedlockOutcome::Inspected(s),
            Done::Broken(b) => RedlockOutcome::Broken(b),
            Done::Listed(p) => RedlockOutcome::Listed(p),
            Done::Failed(e) => RedlockOutcome::Failed(e),
        }
    }
}

impl From<RedlockOutcome> for Done {
    /// The engine's backend-agnostic view, for drivers written once for every backend.
    fn from(outcome: RedlockOutcome) -> Done {
        match outcome {
            RedlockOutcome::Acquired { lease, valid_until } => Done::Acquired { lease, fencing_token: None, valid_until },
            RedlockOutcome::NotAcquired => Done::NotAcquired,
            RedlockOutcome::Released { was_held } => Done::Released { was_held },
            RedlockOutcome::Extended { valid_until } => Done::Extended { valid_until },
            RedlockOutcome::Inspected(s) => Done::Inspected(s),
            RedlockOutcome::Broken(b) => Done::Broken(b),
            RedlockOutcome::Listed(p) => Done::Listed(p),
            RedlockOutcome::Failed(e) => Done::Failed(e),
        }
    }
}

/// The lock engine over a Redlock deployment. Same driving contract as every
/// [`LockEngine`], except that every request names the master it goes to, carries one command,
/// and is answered with one reply (or the transport error). Requests to one master must be
/// performed in emission order on one connection; masters are independent of each other.
pub type RedlockEngine = LockEngine<RedlockBackend>;

impl LockEngine<RedlockBackend> {
    /// A new engine for `config.masters` masters. `rng` mints owner tokens and retry jitter.
    pub fn new(config: RedlockConfig, rng: Box<dyn RandomSource>) -> Result<Self> {
        Ok(LockEngine::with_backend(RedlockBackend::new(config)?, rng))
    }

    /// How many masters must agree: `masters / 2 + 1`.
    pub fn quorum(&self) -> usize {
        self.backend().quorum
    }

    /// The configuration.
    pub fn config(&self) -> &RedlockConfig {
        &self.backend().config
    }
}

/// One Redlock lock on the wire: its key on every master.
#[derive(Debug)]
pub struct RedlockTarget {
    key: Arc<str>,
}

/// The Redlock backend: rounds of votes across the masters, quorum, drift, the delayed-restart
/// rule, retries with jitter.
pub struct RedlockBackend {
    config: RedlockConfig,
    quorum: usize,
    max_lease_ms: String,
    rounds: BTreeMap<u64, Round<Purpose>>,
    /// Node timeouts of the rounds not yet decided.
    round_timers: Timers<u64>,
    in_flight: HashMap<RequestId, (u64, usize)>,
    /// Per master, the scripts it answered NOSCRIPT for and has not been sent in full since.
    missing_scripts: Vec<HashSet<&'static str>>,
    /// Rounds decided since the engine last took them, for its telemetry.
    decided: std::collections::VecDeque<(Purpose, RoundVotes)>,
    /// The listing pages in progress (`list.rs`).
    listings: list::Listings,
}

impl RedlockBackend {
    /// A backend for `config` (validated).
    pub fn new(config: RedlockConfig) -> Result<Self> {
        config.validate()?;
        Ok(RedlockBackend {
            quorum: config.masters / 2 + 1,
            missing_scripts: vec![HashSet::new(); config.masters],
            max_lease_ms: whole_millis(config.max_lease).to_string(),
            config,
            rounds: BTreeMap::new(),
            round_timers: Timers::default(),
            in_flight: HashMap::new(),
            decided: std::collections::VecDeque::new(),
            listings: list::Listings::default(),
        })
    }

    /// The error text for a holder that counts `theirs` masters.
    fn mismatch_message(&self, theirs: &str) -> String {
        format!(
            "masters mismatch: this lock is held by a client that counts {theirs} masters (recorded on a master), this client counts {} (quorum {}); every client of one Redlock must use the same masters",
            self.config.masters, self.quorum
        )
    }

    /// Sends one script to every master as one round of votes.
    fn start_round(&mut self, ctx: &mut Ctx<'_, NodeRequest>, purpose: Purpose, script: &'static Script, key: &Arc<str>, args: Vec<String>, lease: Duration) {
        let id = ctx.ids.fresh();
        // Only what counts votes against a validity (and the undo a failed attempt's caller
        // waits for) is cut short at the node timeout.
        let wait = match purpose {
            Purpose::Acquire(_) | Purpose::Renew(..) | Purpose::Extend(..) | Purpose::Cleanup(_) => self.config.node_timeout,
            Purpose::Release(..) | Purpose::Break(_) | Purpose::Inspect(_) | Purpose::Observe(_) | Purpose::List(_) => self.config.response_timeout,
        };
        let mut round = Round::new(purpose, script, Arc::clone(key), args, ctx.now, ctx.now + wait, self.config.masters);
        round.lease = lease;
        let command = eval_command(script, key, &round.args, false);
        for master in 0..self.config.masters {
            if self.missing_scripts[master].remove(script.name) {
                round.sent_full[master] = true;
                self.send(ctx, id, master, eval_command(script, key, &round.args, true));
            } else {
                self.send(ctx, id, master, command.clone());
            }
        }
        self.rounds.insert(id, round);
        self.sync_round(id);
    }

    fn send(&mut self, ctx: &mut Ctx<'_, NodeRequest>, round: u64, master: usize, command: Command) {
        let id = ctx.ids.request();
        self.in_flight.insert(id, (round, master));
        ctx.out.push_back(NodeRequest { id, master, command });
    }

    /// Re-schedules round `id`'s node timeout (none once decided or forgotten).
    fn sync_round(&mut self, id: u64) {
        let at = self.rounds.get(&id).filter(|r| !r.decided).map(|r| r.deadline);
        self.round_timers.set(id, at);
    }

    /// Settles a round once its result is certain (or its time is up); forgets it once every
    /// master answered.
    fn decide(&mut self, now: Instant, id: u64, answers: &mut Vec<Answer>) {
        let quorum = self.quorum;
        let masters = self.config.masters;
        let round = self.rounds.get_mut(&id).expect("caller checked");
        let tally = round.tally();
        let settled = match round.purpose {
            // An acquire or extend is settled by a majority either way; a release hears everyone.
            Purpose::Acquire(_) => {
                tally.yes >= quorum || tally.yes + tally.pending < quorum || round.mismatch().is_some()
            }
            Purpose::Renew(..) | Purpose::Extend(..) => tally.yes >= quorum || tally.yes + tally.pending < quorum,
            Purpose::Release(..) | Purpose::Cleanup(_) | Purpose::Observe(_) | Purpose::Inspect(_) | Purpose::Break(_) | Purpose::List(_) => {
                tally.pending == 0
            }
        };
        let conclude = !round.decided && (settled || round.timed_out || tally.pending == 0);
        round.decided |= conclude;
        // An inspect's replies, read once when it concludes (a master silent by then is left out).
        let reads = if conclude { std::mem::take(&mut round.reads) } else { Vec::new() };
        let (purpose, sent, lease) = (round.purpose, round.sent, round.lease);
        let first_error = round.first_error().map(|e| e.message().to_string());
        let mismatch = round.mismatch().map(str::to_string);
        if tally.pending == 0 {
            self.rounds.remove(&id);
        }
        self.sync_round(id);
        if !conclude {
            return;
        }
        let verdict = match purpose {
            Purpose::Acquire(_) => Verdict::Attempt(match mismatch {
                // A holder counting other masters: a configuration error, retrying cannot help.
                Some(theirs) => Attempt::Failed { error: Error::invalid(self.mismatch_message(&theirs)), undo: true },
                None => self.attempt(now, sent, lease, tally, first_error),
            }),
            Purpose::Renew(..) | Purpose::Extend(..) => Verdict::Renewal(if tally.yes >= quorum {
                Renewal::Confirmed
            } else if tally.no > masters - quorum {
                // Too many masters no longer hold our key (expired, taken over, restarted): a
                // majority cannot come back without re-acquiring, which an extend never does.
                Renewal::Refused { subject: "the lock was lost on a majority of masters".into() }
            } else {
                Renewal::Transient(Error::new(
                    ErrorKind::Connection,
                    format!("{} of {masters} masters confirmed the extension, {quorum} are needed", tally.yes),
                ))
            }),
            Purpose::Release(..) => {
                let unconfirmed = tally.failed + tally.pending;
                Verdict::Release(if tally.yes >= quorum || unconfirmed == 0 {
                    Release::Done { was_held: tally.yes >= quorum }
                } else {
                    Release::Unconfirmed {
                        error: Error::new(
                            ErrorKind::Connection,
                            format!("the release was not confirmed on {unconfirmed} of {masters} masters; they keep the key until the lease ends"),
                        ),
                        retry: false,
                    }
                })
            }
            // A break is the holder's RELEASE on every master (no tokens to name it by): it broke
            // the lock where any master still had the holder's key.
            Purpose::Break(_) => Verdict::Release(if tally.yes > 0 || tally.failed + tally.pending == 0 {
                Release::Done { was_held: tally.yes > 0 }
            } else {
                Release::Failed(Error::new(ErrorKind::Connection, format!("no master of {masters} confirmed the break")))
            }),
            // An undo is sent once: what it misses expires with the lease.
            Purpose::Cleanup(_) => Verdict::Release(Release::Done { was_held: tally.yes >= quorum }),
            Purpose::Observe(_) => Verdict::Observed(Err(Error::protocol("a Redlock observed an election"))),
            Purpose::Inspect(_) => {
                Verdict::Inspected(inspect::snapshot(&reads, quorum))
            }
            // A listing is no round (`list.rs` answers it).
            Purpose::List(_) => Verdict::Listed(Err(Error::protocol("a Redlock round listed locks"))),
        };
        if let Some(votes) = round_votes(purpose, &verdict, tally, quorum, masters, now.saturating_duration_since(sent)) {
            self.decided.push_back((purpose, votes));
        }
        answers.push(Answer { purpose, sent, verdict });
    }

    /// What a decided acquire round means: granted with validity left, or why not.
    fn attempt(&self, now: Instant, sent: Instant, lease: Duration, tally: Tally, first_error: Option<String>) -> Attempt {
        let quorum = self.quorum;
        if tally.yes >= quorum {
            let valid_until = sent + lease.saturating_sub(self.config.drift(lease));
            if now < valid_until {
                return Attempt::Granted { fence: None, granted: lease };
            }
            let why = format!(
                "a majority granted, but only after the lease's validity had run out ({} ms after sending)",
                whole_millis(now.saturating_duration_since(sent))
            );
            return Attempt::Transient { error: Error::new(ErrorKind::Connection, why.clone()), why: Some(why), undo: true };
        }
        let mut why = format!(
            "{} of {} masters granted, {} are needed ({} held by another owner, {} restarted less than max_lease ago, {} failed or silent)",
            tally.yes, self.config.masters, quorum, tally.no, tally.restarting, tally.failed + tally.pending
        );
        if let Some(e) = first_error {
            why.push_str(&format!("; first error: {e}"));
        }
        if tally.no > 0 {
            Attempt::Refused { why }
        } else {
            Attempt::Transient { error: Error::new(ErrorKind::Connection, why.clone()), why: Some(why), undo: true }
        }
    }
}

/// How a decided round of an acquire, renewal, extend or release ended, with its votes (none
/// for reads, breaks and undos: they are not a lock's own calls).
fn round_votes(purpose: Purpose, verdict: &Verdict, tally: Tally, quorum: usize, masters: usize, took: Duration) -> Option<RoundVotes> {
    let call = match purpose {
        Purpose::Acquire(_) => "acquire",
        Purpose::Renew(..) => "renew",
        Purpose::Extend(..) => "extend",
        Purpose::Release(..) => "release",
        _ => return None,
    };
    let outcome = match verdict {
        Verdict::Attempt(Attempt::Granted { .. }) => "granted",
        Verdict::Attempt(Attempt::Refused { .. }) => "refused",
        Verdict::Attempt(Attempt::Failed { .. }) => "mismatch",
        Verdict::Attempt(_) if tally.yes >= quorum => "too_late",
        Verdict::Attempt(_) => "no_quorum",
        Verdict::Renewal(Renewal::Confirmed) => "confirmed",
        Verdict::Renewal(Renewal::Refused { .. }) => "refused",
        Verdict::Renewal(_) => "no_quorum",
        Verdict::Release(Release::Done { .. }) => "confirmed",
        Verdict::Release(_) => "unconfirmed",
        _ => return None,
    };
    let count = |n: usize| n as u32;
    Some(RoundVotes {
        call,
        outcome,
        masters: count(masters),
        yes: count(tally.yes),
        no: count(tally.no),
        restarting: count(tally.restarting),
        failed: count(tally.failed),
        unanswered: count(tally.pending),
        took,
    })
}

impl Backend for RedlockBackend {
    type Target = RedlockTarget;
    type Request = NodeRequest;
    type Reply = Result<Reply>;
    /// Masters push nothing: no waiter queues on them.
    type Notice<'a> = std::convert::Infallible;
    type Outcome = RedlockOutcome;

    fn target(&self, name: &str, primitive: &Primitive, options: &LockOptions) -> Result<RedlockTarget> {
        if *primitive != Primitive::Mutex {
            return Err(Error::unsupported("a Redlock offers mutexes only (no semaphores, read-write locks or elections)"));
        }
        self.config.check_lease(options.lease)?;
        Ok(RedlockTarget { key: scripts::key(&self.config.key_prefix, name).into() })
    }

    fn check_extend(&self, duration: Duration) -> Result<()> {
        self.config.check_lease(duration)
    }

    fn check_observe(&self) -> Result<()> {
        Err(Error::unsupported("observing a leader is not supported by a Redlock: it has no elections"))
    }

    fn check_inspect(&self) -> Result<()> {
        Ok(())
    }

    /// The hold is its owner value on each master: REDLOCK_EXTEND with it, from any client of
    /// the same masters, is its own renewal (PROTOCOL.md §17).
    fn check_adopt(&self) -> Result<()> {
        Ok(())
    }

    /// A SCAN of the first `masters − quorum + 1` masters, each lock listed once (PROTOCOL.md
    /// §16, `list.rs`).
    fn check_list(&self) -> Result<()> {
        Ok(())
    }

    /// A Redlock issues no fencing tokens: a break cannot name a holder by one (and breaking
    /// can let two holders work, PROTOCOL.md §15).
    fn check_break(&self, fenced: bool) -> Result<()> {
        if fenced {
            return Err(Error::unsupported("a Redlock issues no fencing tokens: break it without a token"));
        }
        Ok(())
    }

    /// The master count travels in the value, so a client of another deployment size meeting
    /// the key learns that its quorum differs (PROTOCOL.md §8).
    fn owner_token(&self, random_hex: String) -> String {
        scripts::owner_value(&random_hex, self.config.masters)
    }

    fn drift(&self, d: Duration) -> Duration {
        self.config.drift(d)
    }

    /// An undo sent at once queues behind the attempt on every master's connection, so it runs
    /// after it wherever the attempt ran.
    fn undo_in_flight_at_once(&self) -> bool {
        true
    }

    /// `retry_delay` plus up to `retry_jitter`, so contenders do not retry in step.
    fn retry_delay(&self, _backoff: &mut Duration, rng: &mut dyn RandomSource) -> Duration {
        let jitter_ms = whole_millis(self.config.retry_jitter);
        let jitter = if jitter_ms == 0 { 0 } else { rng.next_u64() % (jitter_ms + 1) };
        self.config.retry_delay + Duration::from_millis(jitter)
    }

    fn take_round(&mut self) -> Option<(Purpose, RoundVotes)> {
        self.decided.pop_front()
    }

    fn session_reply(&mut self, _reply: Result<Reply>) -> Result<()> {
        // A Redlock has no session (open_session returns None): no reply is ever routed here.
        Ok(())
    }

    fn call(&mut self, ctx: &mut Ctx<'_, NodeRequest>, purpose: Purpose, action: Action<'_, RedlockTarget>, answers: &mut Vec<Answer>) {
        match action {
            Action::List { query } => self.list(ctx, purpose, query, answers),
            Action::Acquire { target, token, lease, .. } => {
                let args = vec![token.to_string(), whole_millis(lease).to_string(), self.max_lease_ms.clone(), self.config.label.clone()];
                self.start_round(ctx, purpose, &scripts::ACQUIRE, &target.key, args, lease);
            }
            Action::Extend { target, token, duration } => {
                let args = vec![token.to_string(), whole_millis(duration).to_string()];
                self.start_round(ctx, purpose, &scripts::EXTEND, &target.key, args, duration);
            }
            Action::Release { target, token } => {
                self.start_round(ctx, purpose, &scripts::RELEASE, &target.key, vec![token.to_string()], Duration::ZERO);
            }
            // The engine asks check_observe first, which refuses.
            Action::Observe { .. } => unreachable!("observe on a Redlock"),
            Action::Inspect { target, .. } => {
                self.start_round(ctx, purpose, &scripts::INSPECT, &target.key, Vec::new(), Duration::ZERO);
            }
            Action::Break { target, holder } => {
                let token = holder.token.clone().unwrap_or_default();
                self.start_round(ctx, purpose, &scripts::RELEASE, &target.key, vec![token], Duration::ZERO);
            }
        }
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, NodeRequest>, id: RequestId, reply: Result<Reply>, answers: &mut Vec<Answer>) {
        if self.listings.is_listing(id) {
            self.on_list_reply(ctx, id, reply, answers);
            return;
        }
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
                self.decide(ctx.now, round_id, answers);
                return;
            }
            round.sent_full[master] = true;
            let command = eval_command(round.script, &round.key, &round.args, true);
            self.send(ctx, round_id, master, command);
            return;
        }
        if std::ptr::eq(round.script, &scripts::INSPECT) {
            // A read, not a vote: kept for the decision, which reads every master's.
            round.votes[master] = match reply {
                Ok(Reply::Error(e)) => Vote::Failed(Error::protocol(format!("redlock_inspect failed on the server: {e}"))),
                Ok(r) => {
                    round.reads[master] = Some(r);
                    Vote::Yes
                }
                Err(e) => Vote::Failed(e),
            };
            return self.decide(ctx.now, round_id, answers);
        }
        let vote = match reply.and_then(|r| parse_vote(round.script, &r)) {
            Ok(v) => v,
            Err(e) => Vote::Failed(e),
        };
        // A disagreement reported after a majority already granted: the grant was made beside
        // a holder that counts the masters differently, so give it up at once.
        let late_mismatch = match (&vote, round.purpose, round.decided) {
            (Vote::Mismatch(theirs), Purpose::Acquire(op), true) => Some((op, round.sent, theirs.clone())),
            _ => None,
        };
        round.votes[master] = vote;
        self.decide(ctx.now, round_id, answers);
        if let Some((op, sent, theirs)) = late_mismatch {
            let why = format!("{}; the grant is given up", self.mismatch_message(&theirs));
            answers.push(Answer { purpose: Purpose::Acquire(op), sent, verdict: Verdict::Revoked(why) });
        }
    }

    fn on_notice(&mut self, _ctx: &mut Ctx<'_, NodeRequest>, notice: std::convert::Infallible, _answers: &mut Vec<Answer>) -> Signal {
        match notice {}
    }

    /// Node timeouts: masters silent by then count as failed for the round's decision.
    fn on_timeout(&mut self, ctx: &mut Ctx<'_, NodeRequest>, answers: &mut Vec<Answer>) {
        for id in self.round_timers.take_due(ctx.now) {
            if let Some(r) = self.rounds.get_mut(&id) {
                if !r.decided && r.deadline <= ctx.now {
                    r.timed_out = true;
                    self.decide(ctx.now, id, answers);
                }
            }
            self.sync_round(id);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.round_timers.next()
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.listings.is_idle()
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

fn eval_command(script: &Script, key: &str, args: &[String], full: bool) -> Command {
    let mut parts: Vec<Vec<u8>> = Vec::with_capacity(4 + args.len());
    if full {
        parts.push(b"EVAL".to_vec());
        parts.push(script.source.as_bytes().to_vec());
    } else {
        parts.push(b"EVALSHA".to_vec());
        parts.push(script.sha1().as_bytes().to_vec());
    }
    parts.push(b"2".to_vec());
    parts.push(key.as_bytes().to_vec());
    parts.push(scripts::label_key(key).into_bytes());
    parts.extend(args.iter().map(|a| a.as_bytes().to_vec()));
    Command(parts)
}
