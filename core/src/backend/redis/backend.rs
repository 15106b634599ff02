//! The Redis backend of the lock engine (single instance, Cluster, replica-acknowledged mode):
//! every engine call becomes one script call; the calls of one input go out as one pipeline
//! (one request per call with `split_pipelines`, for Cluster), with a trailing `WAIT` in
//! replica-acknowledged mode; waiters queue on the server and are woken on the client's
//! pub/sub channel. PROTOCOL.md §1–§7.

use std::collections::HashMap;
use std::sync::Arc;

use super::{holders, inspect, list, mutex};
use super::keys::client_channel;
use super::reply::{self, AcquireReply, Reply};
use super::request::{Command, Request, RequestKind};
use super::target::Target;
use super::Script;
use crate::engine::operation::MAX_BACKOFF;
use crate::engine::{
    hex, Action, Answer, Attempt, Backend, Ctx, Done, LeaderInfo, LockEngine, Outcome, Renewal, Purpose, Release,
    RequestId, Signal, Verdict, Wake,
};
use crate::error::{Error, ErrorKind, Result};
use crate::inspect::Kind;
use crate::listing::Query;
use crate::options::{self, whole_millis, LockOptions};
use crate::primitive::Primitive;
use crate::random::RandomSource;
use crate::time::{Duration, Instant};

/// The lock engine over Redis (single instance or Cluster). See
/// [`LockEngine`] for the driving contract; requests are [`Request`]s and
/// replies one [`Reply`] per pipelined command.
pub type Engine = LockEngine<RedisBackend>;

/// Settings shared by every lock of one Redis engine (one client).
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
    /// hit, not the unrelated locks batched with it. It also marks the engine as one on a
    /// Cluster for listing, which visits every master (PROTOCOL.md §16).
    pub split_pipelines: bool,
    /// The holder label stored with every entry (PROTOCOL.md §12); empty: none.
    pub label: String,
}

/// The name of [`EngineConfig`] beside the other backends' configurations.
pub type RedisConfig = EngineConfig;

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
            label: String::new(),
        }
    }
}

/// A script invocation, kept so a NOSCRIPT reply can be answered with a full EVAL.
#[derive(Clone, Debug)]
struct ScriptCall {
    script: &'static Script,
    /// The lock's keys (shared, not copied per call); the script takes the first `key_count`.
    target: Arc<Target>,
    key_count: usize,
    args: Vec<String>,
    /// Send the body with EVAL (after NOSCRIPT) instead of EVALSHA.
    full: bool,
    /// The kind an inspect reads the reply as (`None` for every other call).
    read_as: Option<Kind>,
}

/// A request on the wire and what each of its commands was for.
struct InFlight {
    sent: Instant,
    calls: Vec<(Purpose, ScriptCall)>,
    /// A trailing `WAIT` was sent after the calls (replica-acknowledged mode).
    waited: Option<ReplicaAcks>,
}

/// The Redis backend: key layout, scripts, pipelines, the client's grant channel.
pub struct RedisBackend {
    prefix: String,
    replica_acks: Option<ReplicaAcks>,
    split_pipelines: bool,
    channel: String,
    retention_ms: String,
    /// The client's label, the last ARGV of every ACQUIRE (PROTOCOL.md §12; empty: none).
    label: String,
    in_flight: HashMap<RequestId, InFlight>,
    /// The calls of the current input, sent together by `flush`.
    batch: Vec<(Purpose, ScriptCall)>,
    /// The listing pages on the wire (a SCAN each, after the masters on a Cluster: `list.rs`).
    listing: HashMap<RequestId, (Purpose, Instant, list::Step)>,
}

impl RedisBackend {
    /// A backend for `config`; `rng` mints the client id that names its grant channel.
    pub fn new(config: EngineConfig, rng: &mut dyn RandomSource) -> Result<Self> {
        options::validate_prefix(&config.key_prefix)?;
        if config.fence_retention < Duration::from_secs(1) || config.fence_retention > options::MAX_DURATION {
            return Err(Error::invalid("fence_retention must be between 1 s and 30 days"));
        }
        if let Some(r) = config.replica_acks {
            if r.replicas == 0 || r.timeout < Duration::from_millis(1) || r.timeout > options::MAX_DURATION {
                return Err(Error::invalid(
                    "replica_acks needs at least 1 replica and a timeout between 1 ms and 30 days",
                ));
            }
        }
        let mut id = [0u8; 8];
        rng.fill(&mut id);
        Ok(RedisBackend {
            replica_acks: config.replica_acks,
            split_pipelines: config.split_pipelines,
            channel: client_channel(&config.key_prefix, &hex(&id)),
            prefix: config.key_prefix,
            retention_ms: whole_millis(config.fence_retention).to_string(),
            label: config.label,
            in_flight: HashMap::new(),
            batch: Vec::new(),
            listing: HashMap::new(),
        })
    }

    /// The pub/sub channel this client's grants arrive on.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    fn release_call(&self, target: &Arc<Target>, token: &str) -> ScriptCall {
        ScriptCall {
            script: target.release_script(),
            target: Arc::clone(target),
            key_count: target.keys.len(),
            args: vec![token.to_string(), self.retention_ms.clone()],
            full: false,
            read_as: None,
        }
    }

    /// The script call for `action`; `None` for a listing, which is no script (`list.rs`).
    fn script_call(&self, action: Action<'_, Target>) -> Option<ScriptCall> {
        Some(match action {
            Action::List { .. } => return None,
            Action::Acquire { target, token, lease, entry_ttl, once } => {
                let mut args = vec![
                    token.to_string(),
                    whole_millis(lease).to_string(),
                    if once { "try" } else { "wait" }.into(),
                    whole_millis(entry_ttl).to_string(),
                    self.channel.clone(),
                    self.retention_ms.clone(),
                ];
                // The shared ACQUIRE's own arguments come before the label, the last of both.
                if target.shared {
                    args.extend(target.acquire_extra.iter().cloned());
                }
                args.push(self.label.clone());
                ScriptCall {
                    script: target.acquire_script(),
                    target: Arc::clone(target),
                    key_count: target.keys.len(),
                    args,
                    full: false,
                    read_as: None,
                }
            }
            Action::Extend { target, token, duration } => {
                let (script, key_count) = target.extend_script();
                ScriptCall {
                    script,
                    target: Arc::clone(target),
                    key_count,
                    args: vec![token.to_string(), whole_millis(duration).to_string()],
                    full: false,
                    read_as: None,
                }
            }
            Action::Release { target, token } => self.release_call(target, token),
            // A break is the holder's own RELEASE (owner-only, promotes the next waiter); `call`
            // answers a holder without a token before it gets here.
            Action::Break { target, holder } => self.release_call(target, holder.token.as_deref().unwrap_or_default()),
            Action::Observe { target } => ScriptCall {
                script: &holders::OBSERVE,
                target: Arc::clone(target),
                key_count: 5,
                args: Vec::new(),
                full: false,
                read_as: None,
            },
            Action::Inspect { target, kind } => ScriptCall {
                script: if target.shared { &holders::INSPECT } else { &mutex::INSPECT },
                target: Arc::clone(target),
                key_count: target.keys.len(),
                args: Vec::new(),
                full: false,
                read_as: Some(kind),
            },
        })
    }

    /// Sends a listing page's first request (never batched: it names no lock).
    fn list(&mut self, ctx: &mut Ctx<'_, Request>, purpose: Purpose, query: &Query, answers: &mut Vec<Answer>) {
        let started = list::start(&self.prefix, query, self.split_pipelines);
        self.list_progress(ctx, purpose, ctx.now, started, answers);
    }

    /// Sends a listing's next request, or answers its page's names.
    fn list_progress(&mut self, ctx: &mut Ctx<'_, Request>, purpose: Purpose, sent: Instant, progress: Result<list::Progress>, answers: &mut Vec<Answer>) {
        match progress {
            Ok(list::Progress::Send(kind, step)) => {
                let id = ctx.ids.request();
                self.listing.insert(id, (purpose, sent, step));
                ctx.out.push_back(Request { id, kind });
            }
            Ok(list::Progress::Found(found)) => answers.push(Answer { purpose, sent, verdict: Verdict::Listed(Ok(found)) }),
            Err(e) => answers.push(Answer { purpose, sent, verdict: Verdict::Listed(Err(e)) }),
        }
    }
}

impl Backend for RedisBackend {
    type Target = Target;
    type Request = Request;
    type Reply = Result<Vec<Reply>>;
    /// A message on a subscribed channel: `(channel, payload)`.
    type Notice<'a> = (&'a [u8], &'a [u8]);
    type Outcome = Outcome;

    fn target(&self, name: &str, primitive: &Primitive, _options: &LockOptions) -> Result<Target> {
        Ok(Target::new(&self.prefix, name, primitive))
    }

    fn check_observe(&self) -> Result<()> {
        Ok(())
    }

    fn check_inspect(&self) -> Result<()> {
        Ok(())
    }

    /// The holder's hold is its owner token's: an EXTEND with it, from any client, is its own
    /// renewal (PROTOCOL.md §17).
    fn check_adopt(&self) -> Result<()> {
        Ok(())
    }

    /// Every Redis grant carries a fencing token: an identity without one was exported by a
    /// client of another backend (a Redlock, memcached).
    fn adopt(&mut self, _target: &Target, _token: &str, fence: Option<u64>) -> Result<()> {
        match fence {
            Some(_) => Ok(()),
            None => Err(Error::invalid("identity has no fencing token: it was not exported by a Redis client")),
        }
    }

    fn check_break(&self, _fenced: bool) -> Result<()> {
        Ok(())
    }

    /// SCAN on the one primary, or on each master of a Cluster in turn (PROTOCOL.md §16).
    fn check_list(&self) -> Result<()> {
        Ok(())
    }

    /// A twelfth of the lease, so renewals due close together share one pipeline.
    fn renew_window(&self, lease: Duration) -> Option<Duration> {
        Some(lease / 12)
    }

    fn retry_delay(&self, backoff: &mut Duration, rng: &mut dyn RandomSource) -> Duration {
        let jitter = Duration::from_millis(rng.next_u64() % 20);
        let delay = *backoff + jitter;
        *backoff = (*backoff * 2).min(MAX_BACKOFF);
        delay
    }

    /// Mirrors ACQUIRE: a handoff grants min(lease, entry_ttl) in whole ms. In
    /// replica-acknowledged mode a pushed grant proves nothing about replicas: the waiter
    /// re-runs ACQUIRE (which answers "held") with its WAIT.
    fn handoff_lease(&self, lease: Duration, entry_ttl: Duration) -> Option<Duration> {
        if self.replica_acks.is_some() {
            return None;
        }
        Some(Duration::from_millis(whole_millis(lease).min(whole_millis(entry_ttl))))
    }

    fn open_session(&mut self, ctx: &mut Ctx<'_, Request>) -> Option<RequestId> {
        let id = ctx.ids.request();
        ctx.out.push_back(Request { id, kind: RequestKind::Subscribe(self.channel.clone()) });
        Some(id)
    }

    fn session_reply(&mut self, reply: Result<Vec<Reply>>) -> Result<()> {
        reply.map(|_| ())
    }

    fn call(&mut self, ctx: &mut Ctx<'_, Request>, purpose: Purpose, action: Action<'_, Target>, answers: &mut Vec<Answer>) {
        if let Action::Break { holder, .. } = &action {
            if holder.token.is_none() {
                // Every Redis entry has its owner token: nothing of lockgate's to remove.
                answers.push(Answer { purpose, sent: ctx.now, verdict: Verdict::Release(Release::Done { was_held: false }) });
                return;
            }
        }
        if let Action::List { query } = action {
            return self.list(ctx, purpose, query, answers);
        }
        if let Some(call) = self.script_call(action) {
            self.batch.push((purpose, call));
        }
    }

    /// Turns everything batched during one input into one pipelined request (one per call
    /// with `split_pipelines`).
    fn flush(&mut self, ctx: &mut Ctx<'_, Request>) {
        if self.batch.is_empty() {
            return;
        }
        let calls = std::mem::take(&mut self.batch);
        if self.split_pipelines && calls.len() > 1 {
            for call in calls {
                self.batch.push(call);
                self.flush(ctx);
            }
            return;
        }
        let mut commands: Vec<Command> = calls.iter().map(|(_, c)| eval_command(c)).collect();
        let waited = self.replica_acks.filter(|_| calls.iter().any(|(p, _)| p.confirms_validity()));
        if let Some(acks) = waited {
            commands.push(Command(vec![
                b"WAIT".to_vec(),
                acks.replicas.to_string().into_bytes(),
                whole_millis(acks.timeout).to_string().into_bytes(),
            ]));
        }
        let id = ctx.ids.request();
        self.in_flight.insert(id, InFlight { sent: ctx.now, calls, waited });
        ctx.out.push_back(Request { id, kind: RequestKind::Pipeline(commands) });
    }

    fn on_reply(&mut self, ctx: &mut Ctx<'_, Request>, id: RequestId, result: Result<Vec<Reply>>, answers: &mut Vec<Answer>) {
        if let Some((purpose, sent, step)) = self.listing.remove(&id) {
            let progress = list::advance(&self.prefix, step, result);
            return self.list_progress(ctx, purpose, sent, progress, answers);
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
                let e = Error::protocol(format!("expected {} replies, got {}", flight.calls.len(), r.len()));
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
                self.batch.push((purpose, ScriptCall { full: true, ..call }));
                continue;
            }
            let verdict = verdict(purpose, &call, reply);
            answers.push(Answer { purpose, sent: flight.sent, verdict });
        }
    }

    /// A `granted <token> <fence>` message on this client's channel wakes its waiter.
    fn on_notice(&mut self, _ctx: &mut Ctx<'_, Request>, (channel, payload): (&[u8], &[u8]), _answers: &mut Vec<Answer>) -> Signal {
        if channel != self.channel.as_bytes() {
            return Signal::Nothing;
        }
        match reply::parse_grant(payload) {
            Some((token, fence)) => Signal::Wake(Wake { token: token.to_string(), fence }),
            None => Signal::Nothing,
        }
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty() && self.listing.is_empty()
    }
}

/// What the reply to one script call means, in the engine's words.
fn verdict(purpose: Purpose, call: &ScriptCall, reply: Result<Reply>) -> Verdict {
    match purpose {
        Purpose::Acquire(_) => Verdict::Attempt(match reply.and_then(|r| reply::parse_acquire(&r)) {
            Ok(AcquireReply::Held { fence, pttl_ms }) => {
                Attempt::Granted { fence: Some(fence), granted: Duration::from_millis(pttl_ms) }
            }
            Ok(AcquireReply::Mismatch { setting, recorded }) => {
                // The script returned before touching anything (and a client can be queued only
                // while the recorded value is its own), so there is nothing to clean up.
                let asked = &call.target.acquire_extra[5];
                let message = format!(
                    "{setting} mismatch: this {what} is in use with {setting} = {recorded} (recorded on the server), this handle uses {setting} = {asked}; every client of one name must use the same value, which can change only while the {what} is idle (no holder, no waiter)",
                    what = call.target.what,
                );
                Attempt::Failed { error: Error::invalid(message), undo: false }
            }
            Ok(AcquireReply::Busy { holder_pttl_ms, fence }) => {
                Attempt::Queued { holder_remaining: holder_pttl_ms.map(Duration::from_millis), fence }
            }
            // The queue keeps our entry across a transport failure: retry with the same token.
            Err(e) if e.kind() == ErrorKind::Connection => Attempt::Transient { error: e, why: None, undo: false },
            // The script may have run before its reply was lost or garbled (queued us, or even
            // granted us the lock): undo as for an acquire abandoned in flight.
            Err(e) => Attempt::Failed { error: e, undo: true },
        }),
        Purpose::Renew(..) | Purpose::Extend(..) => Verdict::Renewal(match reply.and_then(|r| reply::parse_flag("extend", &r)) {
            Ok(true) => Renewal::Confirmed,
            Ok(false) => Renewal::Refused { subject: "the lock was deleted or taken over".into() },
            Err(e) if e.kind() == ErrorKind::Connection => Renewal::Transient(e),
            Err(e) => Renewal::Failed(e),
        }),
        // A transient server error (BUSY, LOADING, ...) arrives as a reply, not a transport
        // error: parsing it makes it the retryable CONNECTION error it is.
        Purpose::Release(..) | Purpose::Cleanup(_) | Purpose::Break(_) => Verdict::Release(match reply.and_then(|r| reply::parse_flag("release", &r)) {
            Ok(was_held) => Release::Done { was_held },
            Err(e) if e.kind() == ErrorKind::Connection => Release::Unconfirmed {
                error: Error::new(
                    ErrorKind::Connection,
                    format!("the release was not confirmed (retrying in the background): {}", e.message()),
                ),
                retry: true,
            },
            Err(e) => Release::Failed(e),
        }),
        Purpose::Observe(_) => Verdict::Observed(reply.and_then(|r| reply::parse_observe(&r)).map(|leader| {
            leader.map(|(value, term, pttl_ms)| LeaderInfo { value, term, remaining: Duration::from_millis(pttl_ms) })
        })),
        Purpose::Inspect(_) => Verdict::Inspected(reply.and_then(|r| match call.read_as {
            Some(kind) if call.target.shared => inspect::parse_shared(kind, &r),
            _ => inspect::parse_mutex(&r),
        })),
        // Listing pages are answered in `on_reply`, never batched with scripts.
        Purpose::List(_) => Verdict::Listed(Err(Error::protocol("a listing page was batched with scripts"))),
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

impl From<Done> for Outcome {
    fn from(done: Done) -> Outcome {
        match done {
            // Every Redis grant carries a fencing token (the scripts mint one per grant).
            Done::Acquired { lease, fencing_token, valid_until } => {
                Outcome::Acquired { lease, fencing_token: fencing_token.unwrap_or_default(), valid_until }
            }
            Done::NotAcquired => Outcome::NotAcquired,
            Done::Released { was_held } => Outcome::Released { was_held },
            Done::Extended { valid_until } => Outcome::Extended { valid_until },
            Done::Observed(leader) => Outcome::Observed(leader),
            Done::Inspected(s) => Outcome::Inspected(s),
            Done::Broken(b) => Outcome::Broken(b),
            Done::Listed(p) => Outcome::Listed(p),
            Done::Failed(e) => Outcome::Failed(e),
        }
    }
}

impl From<Outcome> for Done {
    /// The engine's backend-agnostic view, for drivers written once for every backend.
    fn from(outcome: Outcome) -> Done {
        match outcome {
            Outcome::Acquired { lease, fencing_token, valid_until } => {
                Done::Acquired { lease, fencing_token: Some(fencing_token), valid_until }
            }
            Outcome::NotAcquired => Done::NotAcquired,
            Outcome::Released { was_held } => Done::Released { was_held },
            Outcome::Extended { valid_until } => Done::Extended { valid_until },
            Outcome::Observed(leader) => Done::Observed(leader),
            Outcome::Inspected(s) => Done::Inspected(s),
            Outcome::Broken(b) => Done::Broken(b),
            Outcome::Listed(p) => Done::Listed(p),
            Outcome::Failed(e) => Done::Failed(e),
        }
    }
}

impl LockEngine<RedisBackend> {
    /// A Redis engine. `rng` mints the client id and owner tokens (use
    /// [`OsRandom`](crate::random::OsRandom) outside tests).
    pub fn new(config: EngineConfig, mut rng: Box<dyn RandomSource>) -> Result<Self> {
        let backend = RedisBackend::new(config, rng.as_mut())?;
        Ok(LockEngine::with_backend(backend, rng))
    }

    /// The pub/sub channel this engine's grants arrive on.
    pub fn channel(&self) -> &str {
        self.backend().channel()
    }

    /// Hands over a message that arrived on a subscribed channel: a grant wakes its waiter
    /// ([`handle_notice`](LockEngine::handle_notice) with `(channel, payload)`).
    pub fn handle_notification(&mut self, now: Instant, channel: &[u8], payload: &[u8]) {
        self.handle_notice(now, (channel, payload));
    }
}
