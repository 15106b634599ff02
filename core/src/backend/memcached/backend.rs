//! The memcached backend's calls, in the engine's words (PROTOCOL.md §13):
//!
//! - **acquire**: `add` the lock's item with the owner token as value and the lease as expiry
//!   ([`exptime`]): `NOT_STORED` is a refusal, retried after [`MemcachedBackend::retry_delay`]
//!   (polling: memcached pushes nothing); `STORED` is a grant once the server's `stats` shows it
//!   was up at least `max_lease` when it stored the item ([`old_enough`]: the delayed-restart
//!   rule), else the item is removed again and the server grants nothing until then;
//! - **renew / extend**: `gets` the item; if it still holds the token, `cas` it back with the new
//!   expiry; gone or someone else's: the lease is lost (an expired or evicted item is never
//!   written again, so nothing is resurrected);
//! - **release / undo**: the same `gets`, then a `cas` with an expiry in the past, which stores
//!   the item already expired: a delete that happens only if the item is still the caller's.
//!
//! A `cas` answered `EXISTS` (the item changed between the two commands: a renewal of the same
//! lease overtook it) reads again, a few times at most.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::key::{item_key, server_for};
use super::request::{McAnswer, McCommand, McReply, McRequest};
use crate::engine::{
    Action, Answer, Attempt, Backend, Ctx, Done, LockEngine, Purpose, Release, Renewal, RequestId, Signal, Verdict,
};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{self, whole_millis, LockOptions};
use crate::primitive::Primitive;
use crate::random::RandomSource;
use crate::time::{Duration, Instant};

/// The longest expiry memcached takes as relative seconds (a larger one is a Unix time).
pub const MAX_EXPTIME: i64 = 30 * 24 * 3600;
/// What [`exptime`] adds to a lease rounded up to whole seconds: memcached's clock counts whole
/// seconds, is advanced by a timer once a second, and an item expires once that clock reaches
/// its expiry; so an item stored with expiry `n` may be gone as little as `n - 2` s after the
/// server took it (the clock may have been due to tick, lagging almost a second, when it was
/// stored). Two seconds more make the lease certain.
pub const CLOCK_SLACK_SECS: i64 = 2;
/// The longest lease (or extend) an item can carry: its [`exptime`] must stay relative.
pub const MAX_LEASE: Duration = Duration::from_secs((MAX_EXPTIME - CLOCK_SLACK_SECS - 1) as u64);
/// Waiters poll: the pause before another `add` starts at the engine's first backoff (20 ms)
/// and doubles up to this cap, each pause drawn uniformly from its upper half (jitter). So a
/// waiter sends at most 1 / (`POLL_CAP` / 2) = 10 commands a second once at the cap, and at
/// most 12 in its first second; a release is seen within `POLL_CAP` by every waiter.
pub const POLL_CAP: Duration = Duration::from_millis(200);
/// How often a renewal, extend or release reads again after a `cas` answered `EXISTS`.
const MAX_TRIES: u32 = 8;
/// What `stats`' `uptime` may exceed the time the server has really been up: memcached 1.6
/// starts its clock 62 s before its start and reports `uptime` 60 s less than that clock (a
/// fresh server says 2), whole seconds of a clock advanced once a second (up to 1 s more).
pub const UPTIME_SLACK_SECS: u64 = 3;

/// Whether a server that answered `stats` with `uptime` had been up at least `max_lease` when it
/// took a command sent `before` the `stats`' answer came (`before`: that much client time
/// earlier, counted 1 % longer for the clocks' rates). Such a server cannot have forgotten, in a
/// restart, a lease a client still counts valid: every lease is at most `max_lease`, and counts
/// from a send before the restart. A restart between the command and the `stats` only makes the
/// answer younger (the rule refuses), never older.
pub fn old_enough(uptime: u64, before: Duration, max_lease: Duration) -> bool {
    let up = Duration::from_secs(uptime.saturating_sub(UPTIME_SLACK_SECS));
    up.saturating_sub(before + before / 100) >= max_lease
}

/// The memcached expiry (whole seconds) that keeps an item for at least `lease`: the lease
/// rounded up, plus [`CLOCK_SLACK_SECS`].
pub fn exptime(lease: Duration) -> i64 {
    let ms = whole_millis(lease).min(MAX_EXPTIME as u64 * 1000) as i64;
    (ms + 999) / 1000 + CLOCK_SLACK_SECS
}

/// Checks a lease or extend for memcached: the generic range, at most the deployment's
/// `max_lease`, and short enough that its [`exptime`] is still relative.
pub fn check_lease(lease: Duration, max_lease: Duration) -> Result<()> {
    options::validate_lease(lease)?;
    if lease > max_lease {
        return Err(Error::invalid(format!(
            "the lease exceeds this memcached deployment's max_lease of {} ms (every client must agree on it: \
             a server restarted less than max_lease ago grants nothing, PROTOCOL.md §13)",
            whole_millis(max_lease)
        )));
    }
    if lease > MAX_LEASE {
        return Err(Error::invalid(format!(
            "a memcached lease is at most {} s (memcached reads an expiry over 30 days as a date, and each \
             item is kept {CLOCK_SLACK_SECS} s longer than its lease)",
            MAX_LEASE.as_secs()
        )));
    }
    Ok(())
}

/// Why a server younger than `max_lease` granted nothing.
fn young(uptime: u64) -> String {
    format!("the lock's server restarted less than max_lease ago (uptime {uptime} s) and grants nothing yet")
}

/// Checks a deployment's `max_lease`: a valid lease memcached can carry.
pub fn check_max_lease(max_lease: Duration) -> Result<()> {
    options::validate_lease(max_lease).map_err(|_| Error::invalid("max_lease must be between 10 ms and 30 days"))?;
    if max_lease > MAX_LEASE {
        return Err(Error::invalid(format!("a memcached max_lease is at most {} s", MAX_LEASE.as_secs())));
    }
    Ok(())
}

/// Settings of one memcached client's engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemcachedConfig {
    /// Prepended to every key (the client's `key_prefix`, default `lockgate:`).
    pub key_prefix: String,
    /// The servers as `host:port`, in the URL's order (keys are spread over these names).
    pub servers: Vec<String>,
    /// The longest lease of any client of the deployment (the client's `max_lease`, default
    /// 30 s; every client must agree): a server restarted less than this long ago has
    /// forgotten leases that may still be valid, and takes part in no grant until then.
    pub max_lease: Duration,
}

impl MemcachedConfig {
    /// Checks the prefix and the server list.
    pub fn validate(&self) -> Result<()> {
        options::validate_prefix(&self.key_prefix)?;
        check_max_lease(self.max_lease)?;
        if self.servers.is_empty() {
            return Err(Error::invalid("a memcached client needs at least one server"));
        }
        Ok(())
    }
}

/// One lock on the wire: its item's key and the server holding it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemcachedTarget {
    /// The item's key.
    pub key: String,
    /// The server's index.
    pub server: usize,
}

/// The lock engine over memcached servers. Requests name their server; requests to one server
/// must be performed in emission order on one connection.
pub type MemcachedEngine = LockEngine<MemcachedBackend>;

impl LockEngine<MemcachedBackend> {
    /// A new engine for `config`. `rng` mints owner tokens and polling jitter.
    pub fn new(config: MemcachedConfig, rng: Box<dyn RandomSource>) -> Result<Self> {
        Ok(LockEngine::with_backend(MemcachedBackend::new(config)?, rng))
    }
}

/// What a call is waiting for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The `add` of an attempt (granting `lease`).
    Add { lease: Duration },
    /// The `stats` after a stored `add` that was sent at `add_sent`.
    Uptime { lease: Duration, add_sent: Instant },
    /// The `gets` before a write.
    Read,
    /// The `cas` of a write.
    Write,
    /// The `gets` of an inspect.
    Inspect,
}

/// What a renewal, extend or release writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Goal {
    /// The item's new expiry.
    Keep(i64),
    /// Delete it (an expiry in the past).
    Drop,
}

/// One engine call on the wire.
#[derive(Debug)]
struct Call {
    purpose: Purpose,
    target: Arc<MemcachedTarget>,
    token: Arc<str>,
    goal: Goal,
    step: Step,
    tries: u32,
    sent: Instant,
}

/// A call waiting for the call of its token in progress (the engine's calls of one token run
/// one at a time: an undo never races the retry after it, a release never races a renewal).
#[derive(Debug)]
struct Queued {
    purpose: Purpose,
    target: Arc<MemcachedTarget>,
    token: Arc<str>,
    what: What,
}

/// What a queued call does.
#[derive(Clone, Copy, Debug)]
enum What {
    Acquire(Duration),
    Extend(Duration),
    Release,
    /// An operator's break: the holder's item deleted by its value (`gets` + `cas`-guarded
    /// delete, as a release), whoever stored it.
    Break,
}

/// The memcached backend: the calls on the wire and which owner tokens may have an item.
pub struct MemcachedBackend {
    config: MemcachedConfig,
    calls: HashMap<RequestId, Call>,
    /// Per token with a call in progress, the calls waiting behind it.
    busy: HashMap<Arc<str>, std::collections::VecDeque<Queued>>,
    /// Tokens whose item may exist: an `add` was sent and not answered `NOT_STORED`, and no
    /// release has found the item gone since. A release or undo of any other token settles at
    /// once: a refused poll costs one command, not a read besides.
    maybe_stored: HashSet<Arc<str>>,
    /// Of those, the tokens whose `add` got no answer (a later `NOT_STORED` of the same token
    /// may then be its own item).
    uncertain: HashSet<Arc<str>>,
    /// Per server, until when it is known to be younger than `max_lease` (an `add` for it is
    /// refused without being sent; after that instant, the next grant asks again).
    young_until: HashMap<usize, Instant>,
}

impl MemcachedBackend {
    /// A backend for `config` (validated).
    pub fn new(config: MemcachedConfig) -> Result<Self> {
        config.validate()?;
        Ok(MemcachedBackend {
            config,
            calls: HashMap::new(),
            busy: HashMap::new(),
            maybe_stored: HashSet::new(),
            uncertain: HashSet::new(),
            young_until: HashMap::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MemcachedConfig {
        &self.config
    }

    /// The target of lock `name` (its key and server).
    pub fn target_of(&self, name: &str) -> MemcachedTarget {
        let key = item_key(&self.config.key_prefix, name);
        let server = server_for(&self.config.servers, &key);
        MemcachedTarget { key, server }
    }

    fn send(&mut self, ctx: &mut Ctx<'_, McRequest>, mut call: Call, step: Step, command: McCommand) {
        let id = ctx.ids.request();
        call.step = step;
        call.sent = ctx.now;
        ctx.out.push_back(McRequest { id, server: call.target.server, command });
        self.calls.insert(id, call);
    }

    fn read(&mut self, ctx: &mut Ctx<'_, McRequest>, call: Call) {
        let key = call.target.key.clone();
        self.send(ctx, call, Step::Read, McCommand::Gets { key });
    }

    /// The item is no longer the token's (gone, expired, evicted, someone else's).
    fn gone(&mut self, call: &Call, answers: &mut Vec<Answer>) {
        let verdict = match call.goal {
            Goal::Keep(_) => Verdict::Renewal(Renewal::Refused {
                subject: "the lock's item expired, was evicted or deleted, or another owner holds it".into(),
            }),
            Goal::Drop => {
                self.forget(&call.token);
                Verdict::Release(Release::Done { was_held: false })
            }
        };
        answers.push(Answer { purpose: call.purpose, sent: call.sent, verdict });
    }

    fn forget(&mut self, token: &Arc<str>) {
        self.maybe_stored.remove(token);
        self.uncertain.remove(token);
    }

    /// A transport failure of a renewal, extend or release.
    fn failed(call: &Call, error: Error, answers: &mut Vec<Answer>) {
        let verdict = match call.goal {
            Goal::Keep(_) => Verdict::Renewal(Renewal::Transient(error)),
            Goal::Drop => Verdict::Release(Release::Unconfirmed { error, retry: true }),
        };
        answers.push(Answer { purpose: call.purpose, sent: call.sent, verdict });
    }

    fn on_add(&mut self, ctx: &mut Ctx<'_, McRequest>, call: Call, lease: Duration, reply: McReply, answers: &mut Vec<Answer>) {
        let attempt = match reply {
            Ok(McAnswer::Stored) => {
                self.uncertain.remove(&call.token);
                // A grant only once the server shows it is old enough.
                let add_sent = call.sent;
                self.send(ctx, call, Step::Uptime { lease, add_sent }, McCommand::Stats);
                return;
            }
            Ok(McAnswer::NotStored) => {
                if !self.uncertain.contains(&call.token) {
                    self.maybe_stored.remove(&call.token);
                }
                Attempt::Refused { why: "the lock's item exists (another owner holds it)".into() }
            }
            Ok(other) => {
                self.uncertain.insert(Arc::clone(&call.token));
                Attempt::Failed { error: Error::protocol(format!("add answered {other:?}")), undo: true }
            }
            Err(error) => {
                self.uncertain.insert(Arc::clone(&call.token));
                let why = Some(format!("memcached did not answer the add: {}", error.message()));
                Attempt::Transient { error, why, undo: true }
            }
        };
        answers.push(Answer { purpose: call.purpose, sent: call.sent, verdict: Verdict::Attempt(attempt) });
    }

    /// The `stats` after a stored `add`: a grant if the server was old enough when it stored
    /// the item; else the item is the attempt's to remove (the engine undoes a refusal), and
    /// the server is refused without a command until it may be old enough.
    fn on_uptime(&mut self, mut call: Call, lease: Duration, add_sent: Instant, now: Instant, reply: McReply, answers: &mut Vec<Answer>) {
        let attempt = match reply {
            Ok(McAnswer::Uptime(uptime)) if old_enough(uptime, now.saturating_duration_since(add_sent), self.config.max_lease) => {
                self.young_until.remove(&call.target.server);
                self.drop_stale_undos(&call.token, now, answers);
                Attempt::Granted { fence: None, granted: lease }
            }
            Ok(McAnswer::Uptime(uptime)) => {
                let up = Duration::from_secs(uptime.saturating_sub(UPTIME_SLACK_SECS));
                let wait = self.config.max_lease.saturating_sub(up);
                self.young_until.insert(call.target.server, now + wait);
                Attempt::Refused { why: young(uptime) }
            }
            Ok(other) => Attempt::Failed { error: Error::protocol(format!("stats answered {other:?}")), undo: true },
            Err(error) => {
                let why = Some(format!("memcached did not answer the stats after a grant: {}", error.message()));
                Attempt::Transient { error, why, undo: true }
            }
        };
        call.sent = add_sent;
        answers.push(Answer { purpose: call.purpose, sent: call.sent, verdict: Verdict::Attempt(attempt) });
    }

    /// Settles, without a command, the engine's undos of `token` that waited behind the attempt
    /// just granted: they were to remove what an earlier attempt of the same acquire (same
    /// token) may have left, and would now delete the grant itself (the engine ends those not
    /// yet sent to the backend; these were, and wait here because a token's calls run one at a
    /// time).
    fn drop_stale_undos(&mut self, token: &Arc<str>, now: Instant, answers: &mut Vec<Answer>) {
        let Some(waiting) = self.busy.get_mut(token) else { return };
        let (stale, keep): (std::collections::VecDeque<Queued>, _) =
            std::mem::take(waiting).into_iter().partition(|q| matches!((q.purpose, q.what), (Purpose::Cleanup(_), What::Release)));
        *waiting = keep;
        for q in stale {
            answers.push(Answer { purpose: q.purpose, sent: now, verdict: Verdict::Release(Release::Done { was_held: false }) });
        }
    }

    fn on_read(&mut self, ctx: &mut Ctx<'_, McRequest>, call: Call, reply: McReply, answers: &mut Vec<Answer>) {
        match reply {
            Ok(McAnswer::Value { value, cas }) if value == call.token.as_bytes() => {
                let (key, value) = (call.target.key.clone(), call.token.to_string());
                let exptime = match call.goal {
                    Goal::Keep(e) => e,
                    Goal::Drop => -1,
                };
                self.send(ctx, call, Step::Write, McCommand::Cas { key, value, exptime, cas });
            }
            Ok(McAnswer::Value { .. } | McAnswer::Miss) => self.gone(&call, answers),
            Ok(other) => Self::failed(&call, Error::protocol(format!("gets answered {other:?}")), answers),
            Err(e) => Self::failed(&call, e, answers),
        }
    }

    fn on_write(&mut self, ctx: &mut Ctx<'_, McRequest>, mut call: Call, reply: McReply, answers: &mut Vec<Answer>) {
        match reply {
            Ok(McAnswer::Stored) => {
                let verdict = match call.goal {
                    Goal::Keep(_) => Verdict::Renewal(Renewal::Confirmed),
                    Goal::Drop => {
                        self.forget(&call.token);
                        Verdict::Release(Release::Done { was_held: true })
                    }
                };
                answers.push(Answer { purpose: call.purpose, sent: call.sent, verdict });
            }
            Ok(McAnswer::Exists) if call.tries + 1 < MAX_TRIES => {
                call.tries += 1;
                self.read(ctx, call);
            }
            Ok(McAnswer::Exists) => {
                let e = Error::new(ErrorKind::Connection, "the lock's item kept changing between gets and cas");
                Self::failed(&call, e, answers);
            }
            Ok(McAnswer::NotFound) => self.gone(&call, answers),
            Ok(other) => Self::failed(&call, Error::protocol(format!("cas answered {other:?}")), answers),
            Err(e) => Self::failed(&call, e, answers),
        }
    }
}

/// An inspect's `gets` (PROTOCOL.md §14): the item's value is the holder's owner token; an item
/// records no label, fence or expiry the text protocol reads back, and waiters poll without
/// leaving an entry, so a snapshot has at most that one holder and never a waiter.
fn inspected(reply: McReply) -> Result<crate::inspect::Snapshot> {
    use crate::inspect::{Holder, Kind, Mode, Snapshot};
    let mut s = Snapshot::empty(Kind::Mutex);
    match reply? {
        McAnswer::Value { value, .. } => {
            let token = String::from_utf8(value).map_err(|_| Error::protocol("gets answered a value that is not text"))?;
            s.holders.push(Holder::new(Some(token), None, None, Mode::Exclusive));
        }
        McAnswer::Miss => {}
        other => return Err(Error::protocol(format!("gets answered {other:?}"))),
    }
    Ok(s)
}

#[cfg(test)]
pub(super) fn inspected_for_test(reply: McReply) -> Result<crate::inspect::Snapshot> {
    inspected(reply)
}

impl MemcachedBackend {
    /// Starts `q` (its token's turn came).
    fn start(&mut self, ctx: &mut Ctx<'_, McRequest>, q: Queued, answers: &mut Vec<Answer>) {
        let Queued { purpose, target, token, what } = q;
        let call = |goal| Call { purpose, target: Arc::clone(&target), token: Arc::clone(&token), goal, step: Step::Read, tries: 0, sent: ctx.now };
        match what {
            What::Acquire(_) if self.young_until.get(&target.server).is_some_and(|t| *t > ctx.now) => {
                // Restarted less than max_lease ago: nothing is sent (nothing to undo).
                let why = "the lock's server restarted less than max_lease ago and grants nothing yet (PROTOCOL.md §13)".to_string();
                answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Attempt(Attempt::Refused { why }) });
                self.next(ctx, &token, answers);
            }
            What::Acquire(lease) => {
                self.maybe_stored.insert(Arc::clone(&token));
                let command = McCommand::Add { key: target.key.clone(), value: token.to_string(), exptime: exptime(lease) };
                let c = call(Goal::Drop);
                self.send(ctx, c, Step::Add { lease }, command);
            }
            What::Extend(duration) => {
                let c = call(Goal::Keep(exptime(duration)));
                self.read(ctx, c);
            }
            What::Release if !self.maybe_stored.contains(&token) => {
                // Its every add was refused: there is nothing of it to remove.
                let verdict = Verdict::Release(Release::Done { was_held: false });
                answers.push(Answer { purpose, sent: ctx.now, verdict });
                self.next(ctx, &token, answers);
            }
            What::Release | What::Break => {
                let c = call(Goal::Drop);
                self.read(ctx, c);
            }
        }
    }

    /// The call of `token` in progress settled: starts the next one waiting, if any.
    fn next(&mut self, ctx: &mut Ctx<'_, McRequest>, token: &Arc<str>, answers: &mut Vec<Answer>) {
        let next = self.busy.get_mut(token).and_then(std::collections::VecDeque::pop_front);
        match next {
            Some(q) => self.start(ctx, q, answers),
            None => {
                self.busy.remove(token);
            }
        }
    }
}

impl Backend for MemcachedBackend {
    type Target = MemcachedTarget;
    type Request = McRequest;
    type Reply = McReply;
    /// memcached pushes nothing: waiters poll.
    type Notice<'a> = std::convert::Infallible;
    type Outcome = Done;

    fn target(&self, name: &str, primitive: &Primitive, options: &LockOptions) -> Result<MemcachedTarget> {
        if *primitive != Primitive::Mutex {
            return Err(Error::unsupported(
                "a memcached client offers mutexes only: a semaphore, read-write lock or election needs several \
                 items kept consistent, and memcached may evict any of them (PROTOCOL.md §13)",
            ));
        }
        check_lease(options.lease, self.config.max_lease)?;
        Ok(self.target_of(name))
    }

    fn check_extend(&self, duration: Duration) -> Result<()> {
        check_lease(duration, self.config.max_lease)
    }

    fn check_observe(&self) -> Result<()> {
        Err(Error::unsupported("observing a leader is not supported by a memcached client: it has no elections"))
    }

    fn check_inspect(&self) -> Result<()> {
        Ok(())
    }

    /// The item's value is the owner token: `gets`/`cas` with it, from any client, is its own
    /// renewal (PROTOCOL.md §17).
    fn check_adopt(&self) -> Result<()> {
        Ok(())
    }

    /// The adopted token's item may exist: its release must look (a release of a token whose
    /// every add was refused here settles without asking).
    fn adopt(&mut self, _target: &Self::Target, token: &str, _fence: Option<u64>) -> Result<()> {
        self.maybe_stored.insert(Arc::from(token));
        Ok(())
    }

    /// memcached issues no fencing tokens: a break cannot name a holder by one.
    fn check_break(&self, fenced: bool) -> Result<()> {
        if fenced {
            return Err(Error::unsupported("memcached issues no fencing tokens: break the lock without a token"));
        }
        Ok(())
    }

    /// One percent of the lease, for the rate difference of this client's clock and the
    /// server's (the item's whole-second expiry is covered by [`CLOCK_SLACK_SECS`]).
    fn drift(&self, d: Duration) -> Duration {
        d / 100
    }

    /// Capped exponential backoff with jitter: see [`POLL_CAP`].
    fn retry_delay(&self, backoff: &mut Duration, rng: &mut dyn RandomSource) -> Duration {
        let step = (*backoff).clamp(Duration::from_millis(2), POLL_CAP);
        *backoff = (step * 2).min(POLL_CAP);
        let half = step / 2;
        let span = whole_millis(step - half);
        half + Duration::from_millis(rng.next_u64() % (span + 1))
    }

    fn session_reply(&mut self, _reply: McReply) -> Result<()> {
        // No session (open_session returns None): no reply is routed here.
        Ok(())
    }

    fn call(&mut self, ctx: &mut Ctx<'_, McRequest>, purpose: Purpose, action: Action<'_, MemcachedTarget>, answers: &mut Vec<Answer>) {
        let queued = match action {
            // Refused by check_list before it gets here: memcached cannot enumerate its keys.
            Action::List { .. } => {
                let error = Error::unsupported("listing locks is not available on memcached: it cannot enumerate its keys");
                return answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Listed(Err(error)) });
            }
            Action::Acquire { target, token, lease, .. } => Queued { purpose, target: Arc::clone(target), token: token.into(), what: What::Acquire(lease) },
            Action::Extend { target, token, duration } => Queued { purpose, target: Arc::clone(target), token: token.into(), what: What::Extend(duration) },
            Action::Release { target, token } => Queued { purpose, target: Arc::clone(target), token: token.into(), what: What::Release },
            Action::Break { target, holder } => {
                let token: Arc<str> = holder.token.as_deref().unwrap_or_default().into();
                Queued { purpose, target: Arc::clone(target), token, what: What::Break }
            }
            Action::Inspect { target, .. } => {
                // A read of no token's: it waits behind nothing and nothing waits behind it.
                let call = Call { purpose, target: Arc::clone(target), token: Arc::from(""), goal: Goal::Drop, step: Step::Inspect, tries: 0, sent: ctx.now };
                let key = target.key.clone();
                return self.send(ctx, call, Step::Inspect, McCommand::Gets { key });
            }
            Action::Observe { .. } => {
                // check_observe refuses before the engine gets here; answered, never a panic.
                let e = Error::unsupported("observing a leader is not supported by a memcached client");
                answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Observed(Err(e)) });
                return;
            }
        };
        if let Some(waiting) = self.busy.get_mut(&queued.token) {
            waiting.push_back(queued);
            return;
        }
        self.busy.insert(Arc::clone(&queued.token), std::collections::VecDeque::new());
        self.start(ctx, queued, answers);
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, McRequest>, id: RequestId, reply: McReply, answers: &mut Vec<Answer>) {
        let Some(call) = self.calls.remove(&id) else {
            return;
        };
        let token = Arc::clone(&call.token);
        let settled = answers.len();
        match call.step {
            Step::Add { lease } => self.on_add(ctx, call, lease, reply, answers),
            Step::Uptime { lease, add_sent } => {
                let now = ctx.now;
                self.on_uptime(call, lease, add_sent, now, reply, answers);
            }
            Step::Read => self.on_read(ctx, call, reply, answers),
            Step::Write => self.on_write(ctx, call, reply, answers),
            Step::Inspect => answers.push(Answer { purpose: call.purpose, sent: call.sent, verdict: Verdict::Inspected(inspected(reply)) }),
        }
        if answers.len() > settled {
            self.next(ctx, &token, answers);
        }
    }

    fn on_notice(&mut self, _ctx: &mut Ctx<'_, McRequest>, notice: std::convert::Infallible, _answers: &mut Vec<Answer>) -> Signal {
        match notice {}
    }

    fn is_idle(&self) -> bool {
        self.calls.is_empty() && self.busy.is_empty()
    }
}
