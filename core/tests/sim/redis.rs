//! The Redis model: `SimRedis` runs the seven lockgate scripts against the simulated key space,
//! re-implementing in Rust exactly what the Lua in `core/src/backend/redis/mutex.rs` (mutex) and
//! `core/src/backend/redis/holders.rs` (semaphore, read-write lock, election) does (statement by
//! statement, including Redis's script cache, NOSCRIPT, WRONGTYPE and the removal of empty
//! sets/hashes), plus the three Redlock scripts of each master (`redlock.rs`). It is the
//! simulator's [`Model`] of the Redis backend: one server, pipelines on the command connection,
//! subscriptions on the session connection, `granted` messages pushed to the subscribers.
//!
//! The model is tied to the script texts by their digests ([`MODELLED`]): when a script
//! changes, `sim_models_the_current_scripts` fails until this file is brought up to date.

use std::collections::{HashMap, HashSet};

use lockgate_core::engine::LockEngine;
use lockgate_core::random::SeededRandom;
use lockgate_core::backend::redis::keys::{MutexKeys, SharedKeys};
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redis::{Command, Engine, EngineConfig, RedisBackend, Request, RequestKind, Script};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, LeaseId, OpId, Outcome, Primitive, RequestId};

use super::harness::Sim;
use super::model::{ClientId, Conn, Model};
use super::store::{Res, Store};

/// Key prefix of every simulated engine.
pub const PREFIX: &str = "lockgate:";

/// The simulator over the Redis model.
pub type RedisSim = Sim<SimRedis>;

/// Answers a command in the server's place (`None`: run it normally).
pub type CommandFault = Box<dyn FnMut(ClientId, &Command) -> Option<Reply>>;
/// Rewrites the replies of a pipeline that ran.
pub type PipelineFault = Box<dyn FnMut(ClientId, &[Command], Vec<Reply>) -> Vec<Reply>>;

/// The `kind` part of the keys of a shared primitive (`None` for the mutex).
pub fn shared_kind(p: &Primitive) -> Option<&'static str> {
    match p {
        Primitive::Mutex => None,
        Primitive::Semaphore { .. } => Some("sem"),
        Primitive::Read { .. } | Primitive::Write => Some("rw"),
        Primitive::Leader { .. } => Some("elect"),
    }
}

/// SHA-1 digests of the script texts this file re-implements (PROTOCOL.md version 4), in the
/// order of `lockgate_core::backend::redis::all()`.
///
/// Version 9's holder labels (PROTOCOL.md §12: `l:<token>` fields, the last ARGV of the
/// ACQUIREs) are not modelled: the simulated clients pass no label (`EngineConfig`'s default),
/// and with none the scripts change exactly what the version-8 scripts modelled here changed (no
/// label field is written, pruned or kept alive; no script decision reads one). Labels are
/// checked against real servers by the conformance scenarios `holder_labels_stored` and
/// `semaphore_holder_labels`.
///
/// Version 19's ACQUIRE and RELEASE run fewer commands for the same changes, which is what is
/// modelled: taking a free lock with `SET NX ... GET` before promoting (a promoted head
/// overwrites it, as `grant` does here), the fence written with `SET ... GET` (the same
/// `max(last + 1, now)`), `ZPOPMIN` + `HMGET` for the head, a new waiter known by its new hash
/// field (`ZADD NX`, so a queued token keeps its place, as the version-4 `ZSCORE` check did),
/// expiries only raised (`PEXPIRE ... GT` on a queue that always has one). The one change in
/// what is stored: a holder's release with nobody queued deletes the waiters hash with the key.
///
/// Version 11's INSPECT and SHARED_INSPECT read and write nothing a decision depends on (they
/// write nothing at all); simulated clients never send them. Their replies are parsed in unit
/// tests (`core/src/backend/redis/inspect.rs`) and read from real servers by the conformance
/// scenarios `inspect_*`.
pub const MODELLED: [(&str, &str); 9] = [
    ("acquire", "6110cb94ce3069b8c45c1f8bb51ef16848629d44"),
    ("release", "2e9b5058a777597c5c950d981aeaf7a4cc27e422"),
    ("extend", "0ca5aef7086998b147c84dade782b923ab231301"),
    ("shared_acquire", "c02f07e2ecd687c0e6bcc375c856f5b3dbe80822"),
    ("shared_release", "13c682e6236fb5e9fb9bacc481b595bb2067f69b"),
    ("shared_extend", "f9a4819e1a65cca38f4c419f4b638cd3361ea333"),
    ("shared_observe", "c5d559505a02da922d7093ad502c673c6565f387"),
    ("inspect", "540396a420542e81187c175a03358157434c86ef"),
    ("shared_inspect", "d29b0a0994118c069e2adb03ed8eb61705ccaae0"),
];

/// A fencing token handed out by `grant()`.
#[derive(Clone, Debug)]
pub struct Grant {
    pub at: Instant,
    pub key: String,
    pub token: String,
    pub fence: u64,
    /// Whether `promote()` handed it to a queued waiter (and published it).
    pub promoted: bool,
    /// `'w'` for the mutex and exclusive shared holds, `'r'` for shared ones.
    pub kind: char,
    /// The shared-hold limit the grant was made under (0: none).
    pub limit: u64,
}

/// A message sent with PUBLISH.
#[derive(Clone, Debug)]
pub struct Published {
    pub at: Instant,
    pub channel: String,
    pub payload: String,
}

/// One script execution, for assertions about how the engine talks to the server.
#[derive(Clone, Debug)]
pub struct Executed {
    pub at: Instant,
    pub script: &'static str,
    /// Sent with EVAL (the body) rather than EVALSHA.
    pub full: bool,
    pub reply: Reply,
}

#[derive(Default)]
pub struct SimRedis {
    /// The engines' configuration (set before adding clients).
    pub config: EngineConfig,
    pub store: Store,
    loaded: HashSet<String>,
    pub grants: Vec<Grant>,
    pub published: Vec<Published>,
    pub executed: Vec<Executed>,
    /// Messages published by the last `exec`, for the network to route.
    outbox: Vec<(String, String)>,
    pub restarts: usize,
    /// EVALSHA calls answered NOSCRIPT.
    pub noscript: usize,
    /// Pub/sub registrations of the clients' session connections.
    subscribers: HashMap<String, Vec<ClientId>>,
    /// Replaces the server's handling of a command: `Some(reply)` is answered without running it.
    pub fault: Option<CommandFault>,
    /// Rewrites a whole pipeline's replies after it ran (e.g. to return the wrong number).
    pub pipeline_fault: Option<PipelineFault>,
    /// When the server process last started (INFO server's `uptime_in_seconds` counts from it).
    pub started: Instant,
    /// Uptime it already had at `started` (a master up long before the simulation began).
    pub uptime_before: Duration,
}

impl Model for SimRedis {
    type Backend = RedisBackend;
    type Request = Request;
    type Answer = Vec<Reply>;
    /// A published message: `(channel, payload)`.
    type Push = (String, String);
    type Outcome = Outcome;

    fn engine(&self, rng: SeededRandom) -> Engine {
        Engine::new(self.config.clone(), Box::new(rng)).expect("valid engine config")
    }

    fn has_session(&self) -> bool {
        true
    }

    fn request_id(req: &Request) -> RequestId {
        req.id
    }

    fn route(&self, req: &Request) -> Conn {
        match &req.kind {
            RequestKind::Pipeline(_) => Conn::Server(0),
            RequestKind::Subscribe(_) => Conn::Session,
            other => panic!("the simulator does not know request {other:?}"),
        }
    }

    fn serve(
        &mut self,
        now: Instant,
        client: ClientId,
        crashed: bool,
        req: Request,
        pushes: &mut Vec<(ClientId, (String, String))>,
    ) -> Result<Vec<Reply>, Error> {
        match req.kind {
            RequestKind::Pipeline(commands) => {
                let mut replies = Vec::with_capacity(commands.len());
                for cmd in &commands {
                    let injected = self.fault.as_mut().and_then(|f| f(client, cmd));
                    let reply = injected.unwrap_or_else(|| self.exec(now, cmd));
                    replies.push(reply);
                    for (channel, payload) in self.take_outbox() {
                        for &s in self.subscribers.get(&channel).into_iter().flatten() {
                            pushes.push((s, (channel.clone(), payload.clone())));
                        }
                    }
                }
                if let (false, Some(f)) = (crashed, self.pipeline_fault.as_mut()) {
                    replies = f(client, &commands, replies);
                }
                Ok(replies)
            }
            RequestKind::Subscribe(channel) => {
                let subs = self.subscribers.entry(channel).or_default();
                if !subs.contains(&client) {
                    subs.push(client);
                }
                Ok(vec![])
            }
            other => panic!("the simulator does not know request {other:?}"),
        }
    }

    fn notify(engine: &mut LockEngine<RedisBackend>, now: Instant, (channel, payload): &(String, String)) {
        engine.handle_notification(now, channel.as_bytes(), payload.as_bytes());
    }

    fn restart(&mut self, _server: usize, now: Instant, drop_connections: bool, clock_jump: Duration) {
        self.restart_without_persistence(now, clock_jump.as_micros() as u64);
        if drop_connections {
            self.subscribers.clear();
        }
    }

    fn client_crashed(&mut self, client: ClientId) {
        self.subscribers.values_mut().for_each(|v| v.retain(|&s| s != client));
    }

    fn session_dropped(&mut self, client: ClientId) {
        self.client_crashed(client);
    }

    /// The mutex's lock key or the primitive's holders set.
    fn belief_key(&self, name: &str, primitive: &Primitive) -> String {
        match shared_kind(primitive) {
            None => MutexKeys::new(PREFIX, name).lock,
            Some(kind) => SharedKeys::new(PREFIX, kind, name).holders,
        }
    }

    fn hold_mode(&self, key: &str, fence: Option<u64>) -> (char, u64) {
        self.grants
            .iter()
            .find(|g| g.key == key && Some(g.fence) == fence)
            .map_or(('w', 0), |g| (g.kind, g.limit))
    }

    fn lock_state_left(&mut self, now: Instant) -> Vec<String> {
        self.lock_state_keys(now)
    }
}

/// What only the Redis model knows: its key layout and fencing tokens as plain numbers.
impl Sim<SimRedis> {
    pub fn keys(&self, name: &str) -> MutexKeys {
        MutexKeys::new(PREFIX, name)
    }

    /// The keys of shared primitive `kind` (`sem`, `rw`, `elect`) named `name`.
    pub fn shared_keys(&self, kind: &str, name: &str) -> SharedKeys {
        SharedKeys::new(PREFIX, kind, name)
    }

    /// The key a belief about `primitive` named `name` refers to: the mutex's lock key or the
    /// primitive's holders set.
    pub fn belief_key(&self, name: &str, primitive: &Primitive) -> String {
        self.server.belief_key(name, primitive)
    }

    /// Someone deletes a key behind the engines' backs.
    pub fn delete_key(&mut self, key: &str) {
        self.server.store.set_now(self.now);
        self.server.store.del(key);
    }

    /// When `op` acquired, its lease and fencing token.
    pub fn acquired(&self, c: ClientId, op: OpId) -> Option<(Instant, LeaseId, u64)> {
        match self.outcome(c, op)? {
            (at, Outcome::Acquired { lease, fencing_token, .. }) => Some((at, lease, fencing_token)),
            _ => None,
        }
    }
}

impl SimRedis {
    /// Runs one command at `now`; published messages wait in [`take_outbox`](Self::take_outbox).
    pub fn exec(&mut self, now: Instant, cmd: &Command) -> Reply {
        self.store.set_now(now);
        let args: Vec<String> = cmd
            .0
            .iter()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let name = args
            .first()
            .map(|s| s.to_ascii_uppercase())
            .unwrap_or_default();
        let (script, full) = match (name.as_str(), args.get(1)) {
            ("EVALSHA", Some(sha)) => match every_script()
                .find(|s| s.sha1() == sha.to_ascii_lowercase())
            {
                Some(s) if self.loaded.contains(s.sha1()) => (s, false),
                _ => {
                    self.noscript += 1;
                    return Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into());
                }
            },
            ("EVAL", Some(body)) => match every_script().find(|s| s.source == body) {
                Some(s) => {
                    self.loaded.insert(s.sha1().to_string());
                    (s, true)
                }
                None => {
                    return Reply::Error("ERR the simulator only runs lockgate's scripts".into())
                }
            },
            _ => return Reply::Error(format!("ERR unknown command '{name}'")),
        };
        let reply = match parse_keys_args(&args[2..]) {
            Some((keys, argv)) => {
                let mut ctx = Ctx {
                    db: self,
                    keys,
                    argv,
                    now,
                };
                let result = match script.name {
                    "acquire" => ctx.acquire(),
                    "release" => ctx.release(),
                    "extend" => ctx.extend(),
                    "shared_acquire" => ctx.shared_acquire(),
                    "shared_release" => ctx.shared_release(),
                    "shared_extend" => ctx.shared_extend(),
                    "shared_observe" => ctx.shared_observe(),
                    "REDLOCK_ACQUIRE" | "REDLOCK_RELEASE" | "REDLOCK_EXTEND" => {
                        let (keys, argv) = (std::mem::take(&mut ctx.keys), std::mem::take(&mut ctx.argv));
                        super::redlock::run_script(self, now, script.name, &keys, &argv)
                    }
                    other => Err(format!("ERR unknown script {other}")),
                };
                result.unwrap_or_else(|e| script_error(script, &e))
            }
            None => Reply::Error("ERR Number of keys can't be greater than number of args".into()),
        };
        self.executed.push(Executed {
            at: now,
            script: script.name,
            full,
            reply: reply.clone(),
        });
        reply
    }

    pub fn take_outbox(&mut self) -> Vec<(String, String)> {
        std::mem::take(&mut self.outbox)
    }

    /// A restart without persistence (or a failover to an empty replica): every key and the
    /// script cache are gone; the server clock keeps running (`clock_jump` moves it forward).
    pub fn restart_without_persistence(&mut self, now: Instant, clock_jump_us: u64) {
        self.started = now;
        self.uptime_before = Duration::ZERO;
        self.store.set_now(now);
        self.store.wipe();
        self.store.clock_jump_us += clock_jump_us;
        self.loaded.clear();
        self.restarts += 1;
    }

    /// Keys that must not outlive their users: everything but the fence counters.
    pub fn lock_state_keys(&mut self, now: Instant) -> Vec<String> {
        self.store.set_now(now);
        self.store
            .keys()
            .into_iter()
            .filter(|k| !k.ends_with(":fence"))
            .collect()
    }

    /// INFO server's `uptime_in_seconds`.
    pub fn uptime_secs(&self, now: Instant) -> u64 {
        // Counted by the server's own clock, which may run fast.
        let up = now.saturating_duration_since(self.started).as_micros() as u64;
        let fast_us = up + (up as u128 * self.store.fast_ppm as u128 / 1_000_000) as u64;
        (self.uptime_before + Duration::from_micros(fast_us)).as_secs()
    }
}

/// The scripts a simulated server runs: lockgate's nine and the three of a Redlock master.
fn every_script() -> impl Iterator<Item = &'static Script> {
    lockgate_core::backend::redis::all().into_iter().chain(lockgate_core::backend::redlock::scripts::all())
}

/// Which lockgate script a command runs (by digest or body), if any.
pub fn script_of(cmd: &Command) -> Option<&'static str> {
    let arg = cmd.0.get(1)?;
    lockgate_core::backend::redis::all()
        .into_iter()
        .find(|s| s.sha1().as_bytes() == arg.as_slice() || s.source.as_bytes() == arg.as_slice())
        .map(|s| s.name)
}

fn parse_keys_args(rest: &[String]) -> Option<(Vec<String>, Vec<String>)> {
    let n: usize = rest.first()?.parse().ok()?;
    if rest.len() < 1 + n {
        return None;
    }
    Some((rest[1..1 + n].to_vec(), rest[1 + n..].to_vec()))
}

/// How Redis 7 reports an error raised by `redis.call` inside a script.
fn script_error(script: &Script, e: &str) -> Reply {
    Reply::Error(format!("{e} script: {}, on @user_script:1.", script.sha1()))
}

/// Lua's `tonumber` on a string (decimal only; enough for every value the scripts read).
fn tonumber(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|n| n.is_finite())
}

/// The scripts' `fmt(n)`: `string.format('%.0f', n)`.
fn fmt(n: f64) -> String {
    format!("{n:.0}")
}

fn array(items: Vec<Reply>) -> Reply {
    Reply::Array(items)
}

fn data(s: &str) -> Reply {
    Reply::Data(s.as_bytes().to_vec())
}

/// One script run: `KEYS`, `ARGV` and the database.
struct Ctx<'a> {
    db: &'a mut SimRedis,
    keys: Vec<String>,
    argv: Vec<String>,
    now: Instant,
}

impl Ctx<'_> {
    fn key(&self, i: usize) -> Res<String> {
        // KEYS[i] is nil → redis.call rejects the argument.
        self.keys
            .get(i - 1)
            .cloned()
            .ok_or_else(|| "ERR Lua redis lib command arguments must be strings or integers".into())
    }

    fn arg(&self, i: usize) -> Res<String> {
        self.argv
            .get(i - 1)
            .cloned()
            .ok_or_else(|| "ERR Lua redis lib command arguments must be strings or integers".into())
    }

    fn st(&mut self) -> &mut Store {
        &mut self.db.store
    }

    fn now_us(&self) -> u64 {
        self.db.store.server_us()
    }

    /// prelude `grant(token, lease_ms, t_us, retention_ms)`.
    fn grant(
        &mut self,
        token: &str,
        lease_ms: &str,
        t_us: u64,
        retention_ms: &str,
        promoted: bool,
    ) -> Res<String> {
        let (k1, k2) = (self.key(1)?, self.key(2)?);
        self.st().set_px(&k1, token, lease_ms)?;
        let last = self
            .st()
            .get(&k2)?
            .and_then(|s| tonumber(&s))
            .unwrap_or(0.0);
        let mut fence = last + 1.0;
        let t = t_us as f64;
        if t > fence {
            fence = t;
        }
        let f = fmt(fence);
        let bad = || "ERR attempt to perform arithmetic on a nil value".to_string();
        let px = tonumber(lease_ms).ok_or_else(bad)? + tonumber(retention_ms).ok_or_else(bad)?;
        self.st().set_px(&k2, &f, &fmt(px))?;
        let fence_u64 = f.parse().expect("fence is an integer");
        self.db.grants.push(Grant {
            at: self.now,
            key: k1,
            token: token.into(),
            fence: fence_u64,
            promoted,
            kind: 'w',
            limit: 0,
        });
        Ok(f)
    }

    /// prelude `promote(t_us, retention_ms)`: hand a free lock to the oldest live waiter.
    /// `t_us = None` reads the clock only once someone is queued.
    fn promote(&mut self, t_us: Option<u64>, retention_ms: &str) -> Res<Option<String>> {
        let (k3, k4) = (self.key(3)?, self.key(4)?);
        let mut t_us = t_us;
        loop {
            let Some(head) = self.st().zfirst(&k3)? else {
                return Ok(None);
            };
            let t = *t_us.get_or_insert_with(|| self.now_us());
            let entry = self.st().hget(&k4, &head)?;
            self.st().zrem(&k3, &head)?;
            self.st().hdel(&k4, &head)?;
            if let Some((deadline, lease, channel)) = entry.as_deref().and_then(parse_entry) {
                if tonumber(deadline).is_some_and(|d| d >= (t / 1000) as f64) {
                    let f = self.grant(&head, lease, t, retention_ms, true)?;
                    let payload = format!("granted {head} {f}");
                    self.db.published.push(Published {
                        at: self.now,
                        channel: channel.into(),
                        payload: payload.clone(),
                    });
                    self.db.outbox.push((channel.into(), payload));
                    return Ok(Some(head));
                }
            }
        }
    }

    /// ACQUIRE. KEYS: lock, fence, queue, waiters. ARGV: token, lease_ms, mode, entry_ttl_ms,
    /// channel, retention_ms.
    fn acquire(&mut self) -> Res<Reply> {
        let (k1, k2, k3, k4) = (self.key(1)?, self.key(2)?, self.key(3)?, self.key(4)?);
        let token = self.arg(1)?;
        let mut holder = self.st().get(&k1)?;
        let mut t_us = None;
        if holder.is_none() {
            let t = self.now_us();
            t_us = Some(t);
            holder = self.promote(Some(t), &self.arg(6)?)?;
            if holder.is_none() {
                let f = self.grant(&token, &self.arg(2)?, t, &self.arg(6)?, false)?;
                let lease = tonumber(&self.arg(2)?).unwrap_or(0.0) as i64;
                return Ok(array(vec![Reply::Int(1), data(&f), Reply::Int(lease)]));
            }
        }
        if holder.as_deref() == Some(token.as_str()) {
            // Granted to us earlier (or just now, as the head of the queue).
            let f = self.st().get(&k2)?.unwrap_or_else(|| "0".into());
            let pttl = self.st().pttl(&k1);
            return Ok(array(vec![Reply::Int(1), data(&f), Reply::Int(pttl)]));
        }
        if self.arg(3)? == "wait" {
            let t = t_us.unwrap_or_else(|| self.now_us());
            let ttl = tonumber(&self.arg(4)?).ok_or("ERR attempt to compare nil with number")?;
            if self.st().zscore(&k3, &token)?.is_none() {
                let tail = self.st().zlast(&k3)?;
                let mut seq = t as f64;
                if let Some((score, _)) = tail {
                    if score >= seq {
                        seq = score + 1.0;
                    }
                }
                // ZADD parses the formatted score back.
                let score: f64 = fmt(seq).parse().expect("formatted number");
                self.st().zadd(&k3, score, &token)?;
            }
            let lease = tonumber(&self.arg(2)?)
                .ok_or("ERR bad argument #1 to 'min' (number expected, got nil)")?;
            let handoff = lease.min(ttl);
            let entry = format!(
                "{}|{}|{}",
                fmt((t / 1000) as f64 + ttl),
                fmt(handoff),
                self.arg(5)?
            );
            self.st().hset(&k4, &token, &entry)?;
            for k in [&k3, &k4] {
                if (self.st().pttl(k) as f64) < ttl {
                    self.st().pexpire(k, ttl as i64);
                }
            }
        }
        let f = self.st().get(&k2)?.unwrap_or_else(|| "0".into());
        let pttl = self.st().pttl(&k1);
        Ok(array(vec![Reply::Int(0), data(&f), Reply::Int(pttl)]))
    }

    /// RELEASE. KEYS: lock, fence, queue, waiters. ARGV: token, retention_ms.
    fn release(&mut self) -> Res<Reply> {
        let (k1, k3, k4) = (self.key(1)?, self.key(3)?, self.key(4)?);
        let token = self.arg(1)?;
        let holder = self.st().get(&k1)?;
        if holder.as_deref() == Some(token.as_str()) {
            // Handing over overwrites the key, so it is deleted only when nobody is waiting; then
            // (since version 19) the waiters hash holds nothing live and goes with it.
            if self.promote(None, &self.arg(2)?)?.is_none() {
                self.st().del(&k1);
                self.st().del(&k4);
            }
            return Ok(Reply::Int(1));
        }
        self.st().zrem(&k3, &token)?;
        self.st().hdel(&k4, &token)?;
        if holder.is_none() {
            self.promote(None, &self.arg(2)?)?;
        }
        Ok(Reply::Int(0))
    }

    /// EXTEND. KEYS: lock, fence, queue, waiters (the waiters hash only for a label, not
    /// modelled). ARGV: token, lease_ms.
    fn extend(&mut self) -> Res<Reply> {
        let k1 = self.key(1)?;
        if self.st().get(&k1)? == Some(self.arg(1)?) {
            let ms: i64 = self
                .arg(2)?
                .parse()
                .map_err(|_| "ERR value is not an integer or out of range".to_string())?;
            self.st().pexpire(&k1, ms);
            return Ok(Reply::Int(1));
        }
        Ok(Reply::Int(0))
    }
}

/// `string.match(entry, '^(%d+)|(%d+)|(.+)$')`.
fn parse_entry(entry: &str) -> Option<(&str, &str, &str)> {
    let (deadline, rest) = entry.split_once('|')?;
    let (lease, channel) = rest.split_once('|')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(deadline) && digits(lease) && !channel.is_empty()).then_some((deadline, lease, channel))
}

/// `string.match(entry, '^(%d+)|(%d+)|([rw])|(%d+)|(.+)$')`.
fn parse_shared_entry(entry: &str) -> Option<(&str, &str, &str, &str, &str)> {
    let mut it = entry.splitn(5, '|');
    let (deadline, lease, kind, limit, channel) =
        (it.next()?, it.next()?, it.next()?, it.next()?, it.next()?);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(deadline)
        && digits(lease)
        && (kind == "r" || kind == "w")
        && digits(limit)
        && !channel.is_empty())
    .then_some((deadline, lease, kind, limit, channel))
}

/// Lua's conversion of a number passed to `redis.call` (`%.14g`): integers print plainly.
fn lua_num(n: f64) -> String {
    fmt(n)
}

/// The shared-holder scripts (`core/src/backend/redis/holders.rs`). KEYS: holders, fence, queue, waiters, info.
impl Ctx<'_> {
    /// prelude `keep(i, ms)`: raise a key's expiry to at least `ms`, never shorten it.
    fn keep(&mut self, i: usize, ms: f64) -> Res<()> {
        let k = self.key(i)?;
        let p = self.st().pttl(&k);
        if p == -1 || (p >= 0 && (p as f64) < ms) {
            self.st().pexpire(&k, ms as i64);
        }
        Ok(())
    }

    /// prelude `purge(now_ms)`: holders whose lease ran out leave.
    fn purge(&mut self, now_ms: u64) -> Res<()> {
        let (k1, k5) = (self.key(1)?, self.key(5)?);
        // '(' .. fmt(now_ms): scores strictly below now_ms.
        let dead = self.st().zbelow(&k1, now_ms as f64)?;
        for t in dead {
            self.st().zrem(&k1, &t)?;
            self.st().hdel(&k5, &format!("f:{t}"))?;
            self.st().hdel(&k5, &format!("v:{t}"))?;
        }
        Ok(())
    }

    /// prelude `fits(kind, limit)`.
    fn fits(&mut self, kind: &str, limit: f64) -> Res<bool> {
        let (k1, k5) = (self.key(1)?, self.key(5)?);
        let n = self.st().zcard(&k1)?;
        if n == 0 {
            return Ok(true);
        }
        if kind == "w" || self.st().hget(&k5, "mode")?.as_deref() != Some("r") {
            return Ok(false);
        }
        Ok(limit == 0.0 || (n as f64) < limit)
    }

    /// prelude `grant(token, kind, lease_ms, t_us, retention_ms)`.
    #[allow(clippy::too_many_arguments)]
    fn shared_grant(
        &mut self,
        token: &str,
        kind: &str,
        limit: f64,
        lease_ms: f64,
        t_us: u64,
        retention_ms: &str,
        promoted: bool,
    ) -> Res<String> {
        let (k1, k2, k5) = (self.key(1)?, self.key(2)?, self.key(5)?);
        if self.st().zcard(&k1)? == 0 {
            self.st().hset(&k5, "mode", kind)?;
        }
        let score: f64 = fmt((t_us / 1000) as f64 + lease_ms)
            .parse()
            .expect("formatted number");
        self.st().zadd(&k1, score, token)?;
        let last = self
            .st()
            .get(&k2)?
            .and_then(|s| tonumber(&s))
            .unwrap_or(0.0);
        let mut fence = last + 1.0;
        let t = t_us as f64;
        if t > fence {
            fence = t;
        }
        let f = fmt(fence);
        let retention =
            tonumber(retention_ms).ok_or("ERR attempt to perform arithmetic on a nil value")?;
        self.st().set_px(&k2, &f, &lua_num(lease_ms + retention))?;
        self.st().hset(&k5, &format!("f:{token}"), &f)?;
        self.keep(1, lease_ms)?;
        self.keep(5, lease_ms)?;
        self.db.grants.push(Grant {
            at: self.now,
            key: k1,
            token: token.into(),
            fence: f.parse().expect("fence is an integer"),
            promoted,
            kind: kind.chars().next().unwrap_or('?'),
            limit: limit as u64,
        });
        Ok(f)
    }

    /// prelude `promote(t_us, retention_ms)`: grant the queue head while it fits, waking each
    /// granted waiter on its channel; dead or unreadable entries are dropped on the way.
    fn shared_promote(&mut self, t_us: u64, retention_ms: &str) -> Res<()> {
        let (k3, k4, k5) = (self.key(3)?, self.key(4)?, self.key(5)?);
        let now_ms = (t_us / 1000) as f64;
        loop {
            let Some(head) = self.st().zfirst(&k3)? else {
                return Ok(());
            };
            let entry = self.st().hget(&k4, &head)?;
            let parsed = entry
                .as_deref()
                .and_then(parse_shared_entry)
                .map(|(d, l, k, n, c)| {
                    (
                        d.to_string(),
                        l.to_string(),
                        k.to_string(),
                        n.to_string(),
                        c.to_string(),
                    )
                });
            match parsed {
                Some((deadline, lease, kind, limit, channel))
                    if tonumber(&deadline).is_some_and(|d| d >= now_ms) =>
                {
                    let limit = tonumber(&limit).unwrap_or(0.0);
                    if !self.fits(&kind, limit)? {
                        return Ok(());
                    }
                    self.st().zrem(&k3, &head)?;
                    self.st().hdel(&k4, &head)?;
                    let lease = tonumber(&lease).unwrap_or(0.0);
                    let f =
                        self.shared_grant(&head, &kind, limit, lease, t_us, retention_ms, true)?;
                    let payload = format!("granted {head} {f}");
                    self.db.published.push(Published {
                        at: self.now,
                        channel: channel.clone(),
                        payload: payload.clone(),
                    });
                    self.db.outbox.push((channel, payload));
                }
                _ => {
                    self.st().zrem(&k3, &head)?;
                    self.st().hdel(&k4, &head)?;
                    self.st().hdel(&k5, &format!("v:{head}"))?;
                }
            }
        }
    }

    /// SHARED_ACQUIRE. ARGV: token, lease_ms, mode, entry_ttl_ms, channel, retention_ms, kind,
    /// limit, barge, value.
    fn shared_acquire(&mut self) -> Res<Reply> {
        let (k1, k2, k3, k4, k5) = (
            self.key(1)?,
            self.key(2)?,
            self.key(3)?,
            self.key(4)?,
            self.key(5)?,
        );
        let token = self.arg(1)?;
        let lease = tonumber(&self.arg(2)?);
        let kind = self.arg(7)?;
        let limit = tonumber(&self.arg(8)?);
        let t_us = self.now_us();
        let now_ms = t_us / 1000;
        self.purge(now_ms)?;
        let retention = self.arg(6)?;
        self.shared_promote(t_us, &retention)?;
        // The setting every participant must agree on: recorded while in use, free when idle.
        let setting = self.argv.get(10).cloned().unwrap_or_default();
        if !setting.is_empty() {
            let field = format!("s:{setting}");
            let ours = self.argv.get(11).cloned();
            let idle = self.st().zcard(&k1)? == 0 && self.st().zcard(&k3)? == 0;
            let recorded = if idle { None } else { self.st().hget(&k5, &field)? };
            let ours = ours.ok_or("ERR Lua redis lib command arguments must be strings or integers")?;
            if let Some(recorded) = &recorded {
                if *recorded != ours {
                    return Ok(array(vec![Reply::Int(-1), data(&setting), data(recorded)]));
                }
            }
            if recorded.as_deref() != Some(ours.as_str()) {
                self.st().hset(&k5, &field, &ours)?;
            }
        }
        if let Some(mine) = self.st().zscore(&k1, &token)? {
            // Granted to us earlier (a notification may have been lost) or just now.
            let f = self
                .st()
                .hget(&k5, &format!("f:{token}"))?
                .unwrap_or_else(|| "0".into());
            return Ok(array(vec![
                Reply::Int(1),
                data(&f),
                Reply::Int((mine - now_ms as f64) as i64),
            ]));
        }
        let queued = self.st().zscore(&k3, &token)?.is_some();
        let barge = self.arg(9)? == "1" && kind == "r" && self.st().zcard(&k1)? > 0;
        let nobody_queued = !queued && self.st().zcard(&k3)? == 0;
        let nil_cmp = || "ERR attempt to compare nil with number".to_string();
        if barge || nobody_queued {
            // `limit == 0` compares a nil limit without error; `n < limit` raises.
            let fits = match limit {
                Some(l) => self.fits(&kind, l)?,
                None => {
                    let n = self.st().zcard(&k1)?;
                    if n == 0 {
                        true
                    } else if kind == "w" || self.st().hget(&k5, "mode")?.as_deref() != Some("r") {
                        false
                    } else {
                        return Err(nil_cmp());
                    }
                }
            };
            if fits {
                if queued {
                    self.st().zrem(&k3, &token)?;
                    self.st().hdel(&k4, &token)?;
                }
                let value = self.arg(10)?;
                if !value.is_empty() {
                    self.st().hset(&k5, &format!("v:{token}"), &value)?;
                }
                let lease = lease.ok_or("ERR attempt to perform arithmetic on a nil value")?;
                let f = self.shared_grant(
                    &token,
                    &kind,
                    limit.unwrap_or(0.0),
                    lease,
                    t_us,
                    &retention,
                    false,
                )?;
                return Ok(array(vec![
                    Reply::Int(1),
                    data(&f),
                    Reply::Int(lease as i64),
                ]));
            }
        }
        if self.arg(3)? == "wait" {
            let ttl = tonumber(&self.arg(4)?).ok_or_else(nil_cmp)?;
            if !queued {
                let tail = self.st().zlast(&k3)?;
                let mut seq = t_us as f64;
                if let Some((score, _)) = tail {
                    if score >= seq {
                        seq = score + 1.0;
                    }
                }
                let score: f64 = fmt(seq).parse().expect("formatted number");
                self.st().zadd(&k3, score, &token)?;
            }
            let lease = lease.ok_or("ERR bad argument #1 to 'min' (number expected, got nil)")?;
            let handoff = lease.min(ttl);
            let limit =
                limit.ok_or("ERR bad argument #1 to 'format' (number expected, got nil)")?;
            let entry = format!(
                "{}|{}|{}|{}|{}",
                fmt(now_ms as f64 + ttl),
                fmt(handoff),
                kind,
                fmt(limit),
                self.arg(5)?
            );
            self.st().hset(&k4, &token, &entry)?;
            let value = self.arg(10)?;
            if !value.is_empty() {
                self.st().hset(&k5, &format!("v:{token}"), &value)?;
            }
            self.keep(3, ttl)?;
            self.keep(4, ttl)?;
            self.keep(5, ttl)?;
        }
        let pttl = match self.st().zfirst_scored(&k1)? {
            Some((score, _)) => (score - now_ms as f64) as i64,
            None => -2,
        };
        let f = self.st().get(&k2)?.unwrap_or_else(|| "0".into());
        Ok(array(vec![Reply::Int(0), data(&f), Reply::Int(pttl)]))
    }

    /// SHARED_RELEASE. ARGV: token, retention_ms.
    fn shared_release(&mut self) -> Res<Reply> {
        let (k1, k3, k4, k5) = (self.key(1)?, self.key(3)?, self.key(4)?, self.key(5)?);
        let token = self.arg(1)?;
        let t_us = self.now_us();
        self.purge(t_us / 1000)?;
        let held = self.st().zrem(&k1, &token)?;
        self.st().hdel(&k5, &format!("f:{token}"))?;
        self.st().hdel(&k5, &format!("v:{token}"))?;
        if !held {
            self.st().zrem(&k3, &token)?;
            self.st().hdel(&k4, &token)?;
        }
        self.shared_promote(t_us, &self.arg(2)?)?;
        if self.st().zcard(&k1)? == 0 && self.st().zcard(&k3)? == 0 {
            self.st().del(&k4);
            self.st().del(&k5);
        }
        Ok(Reply::Int(held as i64))
    }

    /// SHARED_EXTEND. ARGV: token, lease_ms.
    fn shared_extend(&mut self) -> Res<Reply> {
        let k1 = self.key(1)?;
        let now_ms = (self.now_us() / 1000) as f64;
        let token = self.arg(1)?;
        if let Some(s) = self.st().zscore(&k1, &token)? {
            if s >= now_ms {
                let lease = tonumber(&self.arg(2)?)
                    .ok_or("ERR attempt to perform arithmetic on a nil value")?;
                // ZADD XX: only an existing member (it is one).
                let score: f64 = fmt(now_ms + lease).parse().expect("formatted number");
                self.st().zadd(&k1, score, &token)?;
                self.keep(1, lease)?;
                self.keep(5, lease)?;
                return Ok(Reply::Int(1));
            }
        }
        Ok(Reply::Int(0))
    }

    /// SHARED_OBSERVE: `{value, fence, pttl_ms}` of the holder whose lease ends first, or `{}`.
    fn shared_observe(&mut self) -> Res<Reply> {
        let (k1, k5) = (self.key(1)?, self.key(5)?);
        let now_ms = self.now_us() / 1000;
        self.purge(now_ms)?;
        let Some((score, first)) = self.st().zfirst_scored(&k1)? else {
            return Ok(array(vec![]));
        };
        let v = self
            .st()
            .hget(&k5, &format!("v:{first}"))?
            .unwrap_or_default();
        let f = self
            .st()
            .hget(&k5, &format!("f:{first}"))?
            .unwrap_or_else(|| "0".into());
        Ok(array(vec![
            data(&v),
            data(&f),
            Reply::Int((score - now_ms as f64) as i64),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_entry, MODELLED};

    #[test]
    fn sim_models_the_current_scripts() {
        let all = lockgate_core::backend::redis::all();
        assert_eq!(
            all.len(),
            MODELLED.len(),
            "a script was added or removed: model it in tests/sim/redis.rs"
        );
        for (script, (name, digest)) in all.into_iter().zip(MODELLED) {
            assert_eq!(script.name, name);
            assert_eq!(
                script.sha1(),
                digest,
                "the {name} script changed: update tests/sim/redis.rs to match it"
            );
        }
    }

    #[test]
    fn shared_waiter_entries_parse_like_the_lua_pattern() {
        use super::parse_shared_entry;
        assert_eq!(
            parse_shared_entry("12|30|r|2|a|b"),
            Some(("12", "30", "r", "2", "a|b"))
        );
        assert_eq!(parse_shared_entry("12|30|x|2|c"), None);
        assert_eq!(parse_shared_entry("12|30|w||c"), None);
        assert_eq!(parse_shared_entry("12|30|w|0|"), None);
    }

    #[test]
    fn waiter_entries_parse_like_the_lua_pattern() {
        assert_eq!(parse_entry("12|30|a|b"), Some(("12", "30", "a|b")));
        assert_eq!(parse_entry("12|30|"), None);
        assert_eq!(parse_entry("x|30|c"), None);
    }
}
