//! The simulator: several engines, one `SimRedis`, a network, and one virtual clock that jumps
//! straight to the next delivery or engine timer. It drives each engine exactly as the
//! `Engine` docs require and records what each client believed, for the checks.

use std::collections::{BTreeMap, HashMap};

use lockgate_core::redis::{Command, EngineConfig};
use lockgate_core::random::SeededRandom;
use lockgate_core::redis::keys::{MutexKeys, SharedKeys};
use lockgate_core::redis::reply::Reply;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{
    Engine, Error, ErrorKind, Event, LeaseId, LockOptions, OpId, Outcome, Primitive, Request,
    RequestId, RequestKind, Wait,
};

use super::net::{mix, NetConfig, Rng};
use super::redis::SimRedis;
use super::store::far_future;

pub type ClientId = usize;

/// Key prefix of every simulated engine.
pub const PREFIX: &str = "lockgate:";

/// Something in transit, delivered at a virtual instant.
#[derive(Debug)]
enum Delivery {
    /// A pipeline reaches the server and runs.
    Execute {
        client: ClientId,
        id: RequestId,
        commands: Vec<Command>,
    },
    /// A SUBSCRIBE reaches the server.
    Subscribe {
        client: ClientId,
        id: RequestId,
        channel: String,
    },
    /// A reply (or transport error) reaches the client.
    Reply {
        client: ClientId,
        id: RequestId,
        result: Result<Vec<Reply>, Error>,
    },
    /// A pushed message reaches the client.
    Notify {
        client: ClientId,
        channel: String,
        payload: String,
    },
    /// The client notices its notification connection dropped.
    Disconnect { client: ClientId },
    /// Nothing: stops the clock so a test or workload can act at this instant.
    Wake,
}

impl Delivery {
    fn recipient(&self) -> Option<ClientId> {
        match self {
            Delivery::Reply { client, .. }
            | Delivery::Notify { client, .. }
            | Delivery::Disconnect { client } => Some(*client),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
enum OpKind {
    Acquire { key: String },
    Reacquire(LeaseId),
    Release,
    Extend(LeaseId),
    Observe,
}

/// The `kind` part of the keys of a shared primitive (`None` for the mutex).
pub fn shared_kind(p: &Primitive) -> Option<&'static str> {
    match p {
        Primitive::Mutex => None,
        Primitive::Semaphore { .. } => Some("sem"),
        Primitive::Read { .. } | Primitive::Write => Some("rw"),
        Primitive::Leader { .. } => Some("elect"),
    }
}

/// One simulated client process.
pub struct Client {
    pub engine: Engine,
    pub crashed: bool,
    /// Every event, with the instant the engine emitted it.
    pub events: Vec<(Instant, Event)>,
    /// Every request, with the instant the engine emitted it.
    pub requests: Vec<(Instant, Request)>,
    ops: HashMap<OpId, OpKind>,
    /// Arrival time of the last command / reply / pushed message: each connection is FIFO.
    cmd_fifo: Instant,
    reply_fifo: Instant,
    notify_fifo: Instant,
}

/// What one client believed about one lease: each claim `(at, valid_until)` comes from an
/// `Acquired`, `Renewed` or `Extended`; the belief ends at release, loss or crash.
#[derive(Clone, Debug)]
pub struct Belief {
    pub client: ClientId,
    pub lease: LeaseId,
    pub key: String,
    pub fence: u64,
    pub claims: Vec<(Instant, Instant)>,
    pub end: Option<Instant>,
    /// Reentrant holds not yet given back (the belief ends with the last).
    pub holds: u32,
}

impl Belief {
    /// The instants at which the client considered itself the holder, as `[from, to)` pieces:
    /// from each claim until the next claim replaced it (an extend may shorten the lease).
    pub fn segments(&self) -> Vec<(Instant, Instant)> {
        let end = self.end.unwrap_or_else(far_future);
        let mut out = Vec::new();
        for (i, &(at, valid_until)) in self.claims.iter().enumerate() {
            let next = self.claims.get(i + 1).map_or(end, |c| c.0);
            let to = valid_until.min(next).min(end);
            if at < to {
                out.push((at, to));
            }
        }
        out
    }
}

pub struct Sim {
    pub now: Instant,
    pub redis: SimRedis,
    pub net: NetConfig,
    pub clients: Vec<Client>,
    pub beliefs: Vec<Belief>,
    belief_index: HashMap<(ClientId, LeaseId), usize>,
    /// Server-side pub/sub registrations.
    subscribers: HashMap<String, Vec<ClientId>>,
    agenda: BTreeMap<(Instant, u64), Delivery>,
    seq: u64,
    pub rng: Rng,
    seed: u64,
    /// Replaces the server's handling of a command: `Some(reply)` is answered without running it.
    pub fault: Option<CommandFault>,
    /// Rewrites a whole pipeline's replies after it ran (e.g. to return the wrong number).
    pub pipeline_fault: Option<PipelineFault>,
    /// Events not yet taken with [`take_events`](Self::take_events).
    fresh: Vec<(ClientId, Event)>,
    pub dropped_notifications: usize,
    pub engine_config: EngineConfig,
    /// Clients whose command connection is broken (see [`Isolation`]).
    pub isolated: HashMap<ClientId, Isolation>,
}

/// How a client's command connection fails: every pipeline gets a transport error, either
/// before reaching the server or after running there (only the reply is lost).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    DropRequests,
    DropReplies,
}

/// Answers a command in the server's place (`None`: run it normally).
pub type CommandFault = Box<dyn FnMut(ClientId, &Command) -> Option<Reply>>;
/// Rewrites the replies of a pipeline that ran.
pub type PipelineFault = Box<dyn FnMut(ClientId, &[Command], Vec<Reply>) -> Vec<Reply>>;

pub fn connection_error(why: &str) -> Error {
    Error::new(ErrorKind::Connection, why)
}

impl Sim {
    pub fn new(seed: u64, net: NetConfig) -> Sim {
        Sim {
            now: Instant::from_origin(Duration::from_secs(1)),
            redis: SimRedis::default(),
            net,
            clients: Vec::new(),
            beliefs: Vec::new(),
            belief_index: HashMap::new(),
            subscribers: HashMap::new(),
            agenda: BTreeMap::new(),
            seq: 0,
            rng: Rng::new(seed),
            seed,
            fault: None,
            pipeline_fault: None,
            fresh: Vec::new(),
            dropped_notifications: 0,
            engine_config: EngineConfig::default(),
            isolated: HashMap::new(),
        }
    }

    pub fn add_client(&mut self) -> ClientId {
        let id = self.clients.len();
        let rng = SeededRandom::new(mix(self.seed, id as u64 + 1));
        let engine =
            Engine::new(self.engine_config.clone(), Box::new(rng)).expect("valid engine config");
        self.clients.push(Client {
            engine,
            crashed: false,
            events: Vec::new(),
            requests: Vec::new(),
            ops: HashMap::new(),
            cmd_fifo: self.now,
            reply_fifo: self.now,
            notify_fifo: self.now,
        });
        id
    }

    pub fn add_clients(&mut self, n: usize) -> Vec<ClientId> {
        (0..n).map(|_| self.add_client()).collect()
    }

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
        match shared_kind(primitive) {
            None => self.keys(name).lock,
            Some(kind) => self.shared_keys(kind, name).holders,
        }
    }

    // ---- caller operations (at the current virtual instant) ----

    pub fn acquire(&mut self, c: ClientId, name: &str, opts: &LockOptions, wait: Wait) -> OpId {
        let now = self.now;
        let op = self.clients[c]
            .engine
            .acquire(now, name, opts, wait)
            .expect("valid acquire arguments");
        let key = self.keys(name).lock;
        self.clients[c].ops.insert(op, OpKind::Acquire { key });
        self.drain(c);
        op
    }

    /// Acquires a semaphore permit, a read or write hold, leadership or the mutex.
    pub fn acquire_primitive(
        &mut self,
        c: ClientId,
        name: &str,
        primitive: &Primitive,
        opts: &LockOptions,
        wait: Wait,
    ) -> OpId {
        let now = self.now;
        let op = self.clients[c]
            .engine
            .acquire_primitive(now, name, primitive, opts, wait)
            .expect("valid acquire arguments");
        let key = self.belief_key(name, primitive);
        self.clients[c].ops.insert(op, OpKind::Acquire { key });
        self.drain(c);
        op
    }

    /// Re-enters a held lease (one more hold).
    pub fn reacquire(&mut self, c: ClientId, lease: LeaseId) -> OpId {
        let op = self.clients[c].engine.reacquire(self.now, lease);
        self.clients[c].ops.insert(op, OpKind::Reacquire(lease));
        self.drain(c);
        op
    }

    /// Asks who leads election `name`.
    pub fn observe_leader(&mut self, c: ClientId, name: &str) -> OpId {
        let op = self.clients[c]
            .engine
            .observe_leader(self.now, name)
            .expect("valid name");
        self.clients[c].ops.insert(op, OpKind::Observe);
        self.drain(c);
        op
    }

    pub fn release(&mut self, c: ClientId, lease: LeaseId) -> OpId {
        let reentered = self
            .belief_index
            .get(&(c, lease))
            .map(|&i| &mut self.beliefs[i])
            .filter(|b| b.end.is_none() && b.holds > 1);
        match reentered {
            Some(b) => b.holds -= 1,
            None => self.end_belief(c, lease),
        }
        let op = self.clients[c].engine.release(self.now, lease);
        self.clients[c].ops.insert(op, OpKind::Release);
        self.drain(c);
        op
    }

    pub fn extend(&mut self, c: ClientId, lease: LeaseId, d: Duration) -> OpId {
        let op = self.clients[c]
            .engine
            .extend(self.now, lease, d)
            .expect("valid extend arguments");
        self.clients[c].ops.insert(op, OpKind::Extend(lease));
        self.drain(c);
        op
    }

    pub fn cancel(&mut self, c: ClientId, op: OpId) {
        self.clients[c].engine.cancel(self.now, op);
        self.drain(c);
    }

    pub fn shutdown(&mut self, c: ClientId) {
        let leases: Vec<LeaseId> = self
            .beliefs
            .iter()
            .filter(|b| b.client == c)
            .map(|b| b.lease)
            .collect();
        leases.into_iter().for_each(|l| self.end_belief(c, l));
        self.clients[c].engine.shutdown(self.now);
        self.drain(c);
    }

    // ---- faults ----

    /// The client process dies: it never drives its engine again and releases nothing.
    /// Commands already on the wire still reach the server.
    pub fn crash(&mut self, c: ClientId) {
        self.clients[c].crashed = true;
        let leases: Vec<LeaseId> = self
            .beliefs
            .iter()
            .filter(|b| b.client == c)
            .map(|b| b.lease)
            .collect();
        leases.into_iter().for_each(|l| self.end_belief(c, l));
        self.subscribers
            .values_mut()
            .for_each(|v| v.retain(|&s| s != c));
        self.agenda.retain(|_, d| d.recipient() != Some(c));
    }

    /// The server restarts without persistence. With `drop_connections` (a real restart) every
    /// command and reply in transit fails, subscriptions vanish and clients see a disconnect;
    /// without it (a proxy in front of a failover) in-flight commands just meet the empty server.
    pub fn restart_server(&mut self, drop_connections: bool, clock_jump: Duration) {
        let now = self.now;
        self.redis
            .restart_without_persistence(now, clock_jump.as_micros() as u64);
        if !drop_connections {
            return;
        }
        self.subscribers.clear();
        let pending = std::mem::take(&mut self.agenda);
        for ((at, seq), d) in pending {
            let d = match d {
                Delivery::Execute { client, id, .. } | Delivery::Subscribe { client, id, .. } => {
                    Delivery::Reply {
                        client,
                        id,
                        result: Err(connection_error("connection reset by server restart")),
                    }
                }
                Delivery::Reply { client, id, .. } => Delivery::Reply {
                    client,
                    id,
                    result: Err(connection_error("connection reset by server restart")),
                },
                Delivery::Notify { .. } => continue,
                other => other,
            };
            self.agenda.insert((at.max(now), seq), d);
        }
        for c in 0..self.clients.len() {
            if !self.clients[c].crashed {
                let at = now + self.rng.duration(self.net.notify_latency);
                self.schedule(at, Delivery::Disconnect { client: c });
            }
        }
    }

    /// The client's notification connection breaks: its subscription and any message in
    /// transit are gone, and the driver reports the disconnect to the engine right away.
    pub fn drop_notification_connection(&mut self, c: ClientId) {
        self.subscribers
            .values_mut()
            .for_each(|v| v.retain(|&s| s != c));
        self.agenda.retain(|_, d| !matches!(d, Delivery::Notify { client, .. } | Delivery::Subscribe { client, .. } if *client == c));
        let now = self.now;
        self.schedule(now, Delivery::Disconnect { client: c });
    }

    /// Someone deletes a key behind the engines' backs.
    pub fn delete_key(&mut self, key: &str) {
        self.redis.store.set_now(self.now);
        self.redis.store.del(key);
    }

    // ---- observing ----

    /// The outcome of `op` and when it was reported.
    pub fn outcome(&self, c: ClientId, op: OpId) -> Option<(Instant, Outcome)> {
        self.clients[c].events.iter().find_map(|(at, e)| match e {
            Event::Completed { op: o, outcome } if *o == op => Some((*at, outcome.clone())),
            _ => None,
        })
    }

    pub fn acquired(&self, c: ClientId, op: OpId) -> Option<(Instant, LeaseId, u64)> {
        match self.outcome(c, op)? {
            (
                at,
                Outcome::Acquired {
                    lease,
                    fencing_token,
                    ..
                },
            ) => Some((at, lease, fencing_token)),
            _ => None,
        }
    }

    /// Events since the last call, in order.
    pub fn take_events(&mut self) -> Vec<(ClientId, Event)> {
        std::mem::take(&mut self.fresh)
    }

    /// Every live engine is idle and nothing is in transit to one.
    pub fn quiescent(&self) -> bool {
        self.clients.iter().all(|c| c.crashed || c.engine.is_idle())
            && self
                .agenda
                .values()
                .all(|d| matches!(d, Delivery::Wake | Delivery::Notify { .. }))
    }

    pub fn lock_state_keys(&mut self) -> Vec<String> {
        let now = self.now;
        self.redis.lock_state_keys(now)
    }

    // ---- running ----

    /// Stops the clock at `at` (for workloads that act at chosen instants).
    pub fn wake_at(&mut self, at: Instant) {
        self.schedule(at.max(self.now), Delivery::Wake);
    }

    /// Advances to the next instant with work, no later than `limit`, and does all of it.
    /// Returns false (with the clock at `limit`) if nothing happens before then.
    pub fn step(&mut self, limit: Instant) -> bool {
        let next_delivery = self.agenda.keys().next().map(|k| k.0);
        let next_timer = self
            .clients
            .iter()
            .filter(|c| !c.crashed)
            .filter_map(|c| c.engine.poll_timeout())
            .min();
        let next = match (next_delivery, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => {
                    self.now = self.now.max(limit);
                    return false;
                }
            },
        };
        if next > limit {
            self.now = self.now.max(limit);
            return false;
        }
        self.now = self.now.max(next);
        let now = self.now;
        for round in 0.. {
            assert!(
                round < 10_000,
                "livelock: the engines keep asking for work at {now:?}"
            );
            let mut worked = false;
            while let Some(entry) = self.agenda.first_entry() {
                if entry.key().0 > now {
                    break;
                }
                let d = entry.remove();
                self.deliver(d);
                worked = true;
            }
            for c in 0..self.clients.len() {
                let due = !self.clients[c].crashed
                    && self.clients[c]
                        .engine
                        .poll_timeout()
                        .is_some_and(|t| t <= now);
                if due {
                    self.clients[c].engine.handle_timeout(now);
                    self.drain(c);
                    worked = true;
                }
            }
            if !worked {
                break;
            }
        }
        true
    }

    /// Runs until `done` holds (checked after every step) or `limit`; returns whether it held.
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&Sim) -> bool) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if !self.step(limit) && self.now >= limit {
                return done(self);
            }
        }
    }

    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        while self.step(limit) {}
    }

    /// Runs until every live engine is idle (everything released, cleaned up and answered).
    pub fn settle(&mut self, within: Duration) {
        let limit = self.now + within;
        let ok = self.run_until(limit, |s| s.quiescent());
        assert!(ok, "the engines did not become idle within {within:?}");
    }

    // ---- internals ----

    fn schedule(&mut self, at: Instant, d: Delivery) {
        self.seq += 1;
        self.agenda.insert((at, self.seq), d);
    }

    fn deliver(&mut self, d: Delivery) {
        let now = self.now;
        if d.recipient().is_some_and(|c| self.clients[c].crashed) {
            return;
        }
        match d {
            Delivery::Execute {
                client,
                id,
                commands,
            } => self.execute(client, id, commands),
            Delivery::Subscribe {
                client,
                id,
                channel,
            } => {
                if self.clients[client].crashed {
                    return;
                }
                let subs = self.subscribers.entry(channel).or_default();
                if !subs.contains(&client) {
                    subs.push(client);
                }
                let at = self.notify_slot(client);
                self.schedule(
                    at,
                    Delivery::Reply {
                        client,
                        id,
                        result: Ok(vec![]),
                    },
                );
            }
            Delivery::Reply { client, id, result } => {
                self.clients[client].engine.handle_reply(now, id, result);
                self.drain(client);
            }
            Delivery::Notify {
                client,
                channel,
                payload,
            } => {
                self.clients[client].engine.handle_notification(
                    now,
                    channel.as_bytes(),
                    payload.as_bytes(),
                );
                self.drain(client);
            }
            Delivery::Disconnect { client } => {
                self.clients[client].engine.handle_disconnect(now);
                self.drain(client);
            }
            Delivery::Wake => {}
        }
    }

    fn execute(&mut self, client: ClientId, id: RequestId, commands: Vec<Command>) {
        let now = self.now;
        let mut replies = Vec::with_capacity(commands.len());
        for cmd in &commands {
            let injected = self.fault.as_mut().and_then(|f| f(client, cmd));
            let reply = injected.unwrap_or_else(|| self.redis.exec(now, cmd));
            replies.push(reply);
            for (channel, payload) in self.redis.take_outbox() {
                let subs = self.subscribers.get(&channel).cloned().unwrap_or_default();
                for s in subs {
                    if self.rng.chance(self.net.drop_notification) {
                        self.dropped_notifications += 1;
                        continue;
                    }
                    let at = self.notify_slot(s);
                    self.schedule(
                        at,
                        Delivery::Notify {
                            client: s,
                            channel: channel.clone(),
                            payload: payload.clone(),
                        },
                    );
                }
            }
        }
        if self.clients[client].crashed {
            return;
        }
        if let Some(f) = self.pipeline_fault.as_mut() {
            replies = f(client, &commands, replies);
        }
        let lose = self.isolated.get(&client) == Some(&Isolation::DropReplies);
        let result = if lose || self.rng.chance(self.net.drop_reply) {
            Err(connection_error("reply lost"))
        } else {
            Ok(replies)
        };
        let at = (now + self.rng.duration(self.net.latency)).max(self.clients[client].reply_fifo);
        self.clients[client].reply_fifo = at;
        self.schedule(at, Delivery::Reply { client, id, result });
    }

    fn notify_slot(&mut self, c: ClientId) -> Instant {
        let at = (self.now + self.rng.duration(self.net.notify_latency))
            .max(self.clients[c].notify_fifo);
        self.clients[c].notify_fifo = at;
        at
    }

    /// Performs everything the engine asked for and records its events.
    fn drain(&mut self, c: ClientId) {
        let now = self.now;
        while let Some(req) = self.clients[c].engine.poll_request() {
            self.clients[c].requests.push((now, req.clone()));
            match req.kind {
                RequestKind::Pipeline(commands) => {
                    let lose = self.isolated.get(&c) == Some(&Isolation::DropRequests);
                    if lose || self.rng.chance(self.net.drop_request) {
                        let at = now + self.rng.duration(self.net.latency) * 2;
                        let at = at.max(self.clients[c].reply_fifo);
                        self.clients[c].reply_fifo = at;
                        self.schedule(
                            at,
                            Delivery::Reply {
                                client: c,
                                id: req.id,
                                result: Err(connection_error("request lost")),
                            },
                        );
                    } else {
                        let at = (now + self.rng.duration(self.net.latency))
                            .max(self.clients[c].cmd_fifo);
                        self.clients[c].cmd_fifo = at;
                        self.schedule(
                            at,
                            Delivery::Execute {
                                client: c,
                                id: req.id,
                                commands,
                            },
                        );
                    }
                }
                RequestKind::Subscribe(channel) => {
                    let at = now + self.rng.duration(self.net.notify_latency);
                    self.schedule(
                        at,
                        Delivery::Subscribe {
                            client: c,
                            id: req.id,
                            channel,
                        },
                    );
                }
                other => panic!("the simulator does not know request {other:?}"),
            }
        }
        while let Some(ev) = self.clients[c].engine.poll_event() {
            self.observe(c, &ev);
            self.clients[c].events.push((now, ev.clone()));
            self.fresh.push((c, ev));
        }
        self.poll_validity(c);
    }

    /// What `is_held` would answer can change without an event (an extend that may shorten
    /// the lease caps it when sent): record it as a claim too.
    fn poll_validity(&mut self, c: ClientId) {
        let now = self.now;
        for b in self
            .beliefs
            .iter_mut()
            .filter(|b| b.client == c && b.end.is_none())
        {
            if let Some(v) = self.clients[c].engine.lease_valid_until(b.lease) {
                if b.claims.last().map(|cl| cl.1) != Some(v) {
                    b.claims.push((now, v));
                }
            }
        }
    }

    fn observe(&mut self, c: ClientId, ev: &Event) {
        let now = self.now;
        match ev {
            Event::Completed { op, outcome } => {
                match (self.clients[c].ops.get(op).cloned(), outcome) {
                    (
                        Some(OpKind::Acquire { key }),
                        Outcome::Acquired {
                            lease,
                            fencing_token,
                            valid_until,
                        },
                    ) => {
                        self.belief_index.insert((c, *lease), self.beliefs.len());
                        self.beliefs.push(Belief {
                            client: c,
                            lease: *lease,
                            key,
                            fence: *fencing_token,
                            claims: vec![(now, *valid_until)],
                            end: None,
                            holds: 1,
                        });
                    }
                    (Some(OpKind::Reacquire(lease)), Outcome::Acquired { .. }) => {
                        if let Some(&i) = self.belief_index.get(&(c, lease)) {
                            if self.beliefs[i].end.is_none() {
                                self.beliefs[i].holds += 1;
                            }
                        }
                    }
                    (Some(OpKind::Extend(lease)), Outcome::Extended { valid_until }) => {
                        self.claim(c, lease, *valid_until)
                    }
                    _ => {}
                }
            }
            Event::Renewed { lease, valid_until } => self.claim(c, *lease, *valid_until),
            Event::Lost { lease, .. } => self.end_belief(c, *lease),
        }
    }

    fn claim(&mut self, c: ClientId, lease: LeaseId, valid_until: Instant) {
        let now = self.now;
        if let Some(&i) = self.belief_index.get(&(c, lease)) {
            let b = &mut self.beliefs[i];
            if b.end.is_none() {
                b.claims.push((now, valid_until));
            }
        }
    }

    fn end_belief(&mut self, c: ClientId, lease: LeaseId) {
        let now = self.now;
        if let Some(&i) = self.belief_index.get(&(c, lease)) {
            let b = &mut self.beliefs[i];
            b.end = Some(b.end.map_or(now, |e| e.min(now)));
        }
    }
}
