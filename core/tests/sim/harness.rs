//! The simulator: several engines over one backend, that backend's server model (`Model`), a
//! network, and one virtual clock that jumps straight to the next delivery or timer. It drives
//! each engine exactly as the `LockEngine` docs require and records what each client believed,
//! for the checks. Nothing here knows a backend's wire: requests, replies and pushes are the
//! model's types, routed by the connection the model names (`Conn`).

use std::collections::{BTreeMap, HashMap};

use lockgate_core::engine::{Done, LockEngine};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, ErrorKind, Event, LeaseId, LockOptions, OpId, Primitive, RequestId, Wait};

use super::model::{Conn, Model, SimOutcome, WireReply};
use super::net::{mix, NetConfig, Rng};
use super::store::far_future;

pub use super::model::ClientId;

type Reply<M> = Result<<M as Model>::Answer, Error>;

/// Something in transit, delivered at a virtual instant.
enum Delivery<M: Model> {
    /// A request reaches its server and runs.
    Request { client: ClientId, conn: Conn, req: M::Request },
    /// A reply (or transport error) reaches the client.
    Reply { client: ClientId, conn: Conn, id: RequestId, result: Reply<M> },
    /// A pushed message reaches the client.
    Notify { client: ClientId, push: M::Push },
    /// The client notices its session connection dropped.
    Disconnect { client: ClientId },
    /// Nothing: stops the clock so a test or workload can act at this instant.
    Wake,
}

impl<M: Model> Delivery<M> {
    fn recipient(&self) -> Option<ClientId> {
        match self {
            Delivery::Reply { client, .. } | Delivery::Notify { client, .. } | Delivery::Disconnect { client } => {
                Some(*client)
            }
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

/// One simulated client process.
pub struct Client<M: Model> {
    pub engine: LockEngine<M::Backend>,
    pub crashed: bool,
    /// Every event, with the instant the engine emitted it.
    pub events: Vec<(Instant, Event<M::Outcome>)>,
    /// Every request, with the instant the engine emitted it.
    pub requests: Vec<(Instant, M::Request)>,
    ops: HashMap<OpId, OpKind>,
    /// Per server, arrival time of the last request / reply on its command connection, and of
    /// the last pushed message: each connection is FIFO.
    cmd_fifo: Vec<Instant>,
    reply_fifo: Vec<Instant>,
    notify_fifo: Instant,
}

/// What one client believed about one lease: each claim `(at, valid_until)` comes from an
/// `Acquired`, `Renewed` or `Extended`; the belief ends at release, loss or crash.
#[derive(Clone, Debug)]
pub struct Belief {
    pub client: ClientId,
    pub lease: LeaseId,
    pub key: String,
    /// The grant's fencing token (`None` where the backend issues none).
    pub fence: Option<u64>,
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

pub struct Sim<M: Model> {
    pub now: Instant,
    /// The backend's server(s).
    pub server: M,
    pub net: NetConfig,
    pub clients: Vec<Client<M>>,
    pub beliefs: Vec<Belief>,
    belief_index: HashMap<(ClientId, LeaseId), usize>,
    agenda: BTreeMap<(Instant, u64), Delivery<M>>,
    seq: u64,
    pub rng: Rng,
    seed: u64,
    /// Events not yet taken with [`take_events`](Self::take_events).
    fresh: Vec<(ClientId, Event<M::Outcome>)>,
    pub dropped_notifications: usize,
    /// Clients whose command connections are broken (see [`Isolation`]).
    pub isolated: HashMap<ClientId, Isolation>,
    /// Servers paused until the instant given: what reaches them waits (see
    /// [`pause_server`](Self::pause_server)).
    paused: HashMap<usize, Instant>,
    /// Client processes stopped until the instant given (see [`pause_client`](Self::pause_client)).
    paused_clients: HashMap<ClientId, Instant>,
}

/// How a client's command connection fails: every request gets a transport error, either
/// before reaching the server or after running there (only the reply is lost).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    DropRequests,
    DropReplies,
}

pub fn connection_error(why: &str) -> Error {
    Error::new(ErrorKind::Connection, why)
}

impl<M: Model + Default> Sim<M> {
    pub fn new(seed: u64, net: NetConfig) -> Sim<M> {
        Sim::with_model(M::default(), seed, net)
    }
}

impl<M: Model> Sim<M> {
    pub fn with_model(server: M, seed: u64, net: NetConfig) -> Sim<M> {
        Sim {
            now: Instant::from_origin(Duration::from_secs(1)),
            server,
            net,
            clients: Vec::new(),
            beliefs: Vec::new(),
            belief_index: HashMap::new(),
            agenda: BTreeMap::new(),
            seq: 0,
            rng: Rng::new(seed),
            seed,
            fresh: Vec::new(),
            dropped_notifications: 0,
            isolated: HashMap::new(),
            paused: HashMap::new(),
            paused_clients: HashMap::new(),
        }
    }

    pub fn add_client(&mut self) -> ClientId {
        let id = self.clients.len();
        let rng = SeededRandom::new(mix(self.seed, id as u64 + 1));
        let engine = self.server.engine(rng);
        let servers = self.server.servers();
        self.clients.push(Client {
            engine,
            crashed: false,
            events: Vec::new(),
            requests: Vec::new(),
            ops: HashMap::new(),
            cmd_fifo: vec![self.now; servers],
            reply_fifo: vec![self.now; servers],
            notify_fifo: self.now,
        });
        id
    }

    pub fn add_clients(&mut self, n: usize) -> Vec<ClientId> {
        (0..n).map(|_| self.add_client()).collect()
    }

    // ---- caller operations (at the current virtual instant) ----

    pub fn acquire(&mut self, c: ClientId, name: &str, opts: &LockOptions, wait: Wait) -> OpId {
        self.acquire_primitive(c, name, &Primitive::Mutex, opts, wait)
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
        let key = self.server.belief_key(name, primitive);
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
        let op = self.clients[c].engine.observe_leader(self.now, name).expect("valid name");
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
        let op = self.clients[c].engine.extend(self.now, lease, d).expect("valid extend arguments");
        self.clients[c].ops.insert(op, OpKind::Extend(lease));
        self.drain(c);
        op
    }

    pub fn cancel(&mut self, c: ClientId, op: OpId) {
        self.clients[c].engine.cancel(self.now, op);
        self.drain(c);
    }

    pub fn shutdown(&mut self, c: ClientId) {
        let leases: Vec<LeaseId> = self.beliefs.iter().filter(|b| b.client == c).map(|b| b.lease).collect();
        leases.into_iter().for_each(|l| self.end_belief(c, l));
        self.clients[c].engine.shutdown(self.now);
        self.drain(c);
    }

    // ---- faults ----

    /// The client process dies: it never drives its engine again and releases nothing.
    /// Requests already on the wire still reach the server.
    pub fn crash(&mut self, c: ClientId) {
        self.clients[c].crashed = true;
        let leases: Vec<LeaseId> = self.beliefs.iter().filter(|b| b.client == c).map(|b| b.lease).collect();
        leases.into_iter().for_each(|l| self.end_belief(c, l));
        self.server.client_crashed_at(c, self.now);
        self.agenda.retain(|_, d| d.recipient() != Some(c));
    }

    /// Server 0 restarts without persistence (see [`restart`](Self::restart)).
    pub fn restart_server(&mut self, drop_connections: bool, clock_jump: Duration) {
        self.restart(0, drop_connections, clock_jump);
    }

    /// Server `server` restarts without persistence. With `drop_connections` (a real restart)
    /// every request and reply in transit on its connections fails, what the connections
    /// registered vanishes and clients with a session on it see a disconnect; without it (a
    /// proxy in front of a failover) requests in flight just meet the empty server.
    pub fn restart(&mut self, server: usize, drop_connections: bool, clock_jump: Duration) {
        let now = self.now;
        self.server.restart(server, now, drop_connections, clock_jump);
        if !drop_connections {
            return;
        }
        let session = server == 0 && self.server.has_session();
        let on_it = |conn: Conn| conn == Conn::Server(server) || (session && conn == Conn::Session);
        let pending = std::mem::take(&mut self.agenda);
        for ((at, seq), d) in pending {
            let reset = || Err(connection_error("connection reset by server restart"));
            let d = match d {
                Delivery::Request { client, conn, req } if on_it(conn) => {
                    Delivery::Reply { client, conn, id: M::request_id(&req), result: reset() }
                }
                Delivery::Reply { client, conn, id, .. } if on_it(conn) => {
                    Delivery::Reply { client, conn, id, result: reset() }
                }
                Delivery::Notify { .. } if session => continue,
                other => other,
            };
            self.agenda.insert((at.max(now), seq), d);
        }
        if session {
            for c in 0..self.clients.len() {
                if !self.clients[c].crashed {
                    let at = now + self.rng.duration(self.net.notify_latency);
                    self.schedule(at, Delivery::Disconnect { client: c });
                }
            }
        }
    }

    /// Server `server` stops answering until `until` (a stalled process, a long GC): what
    /// reaches it meanwhile runs, in arrival order, when it resumes; its clock keeps running.
    pub fn pause_server(&mut self, server: usize, until: Instant) {
        self.paused.insert(server, until);
    }

    /// Client `c`'s process stops now until `until` (SIGSTOP, a long GC pause): what reaches it
    /// meanwhile waits, its engine's timers do not run, and the model learns it (no heartbeats).
    /// Its clock keeps running: when it resumes, its engine sees the time that passed. A test
    /// must not drive a paused client's engine itself (the process cannot act).
    pub fn pause_client(&mut self, c: ClientId, until: Instant) {
        let now = self.now;
        self.paused_clients.insert(c, until);
        self.server.client_paused(c, now, until);
        self.schedule(until, Delivery::Wake);
    }

    /// Whether client `c`'s process is stopped at the current instant.
    pub fn client_is_paused(&self, c: ClientId) -> bool {
        self.paused_clients.get(&c).is_some_and(|&u| u > self.now)
    }

    /// Sends messages the model pushed outside any request (a fault a test injected).
    pub fn push(&mut self, pushes: Vec<(ClientId, M::Push)>) {
        self.push_all(pushes);
    }

    /// The client's session connection breaks: what it registered and any message in transit
    /// are gone, and the driver reports the disconnect to the engine right away.
    pub fn drop_notification_connection(&mut self, c: ClientId) {
        self.server.session_dropped(c);
        self.agenda.retain(|_, d| {
            !matches!(d, Delivery::Notify { client, .. } | Delivery::Request { client, conn: Conn::Session, .. } if *client == c)
        });
        let now = self.now;
        self.schedule(now, Delivery::Disconnect { client: c });
    }

    // ---- observing ----

    /// The outcome of `op` and when it was reported.
    pub fn outcome(&self, c: ClientId, op: OpId) -> Option<(Instant, M::Outcome)> {
        self.clients[c].events.iter().find_map(|(at, e)| match e {
            Event::Completed { op: o, outcome } if *o == op => Some((*at, outcome.clone())),
            _ => None,
        })
    }

    /// The outcome of `op` in the engine's generic words.
    pub fn done(&self, c: ClientId, op: OpId) -> Option<(Instant, Done)> {
        self.outcome(c, op).map(|(at, o)| (at, o.done()))
    }

    /// When `op` acquired, its lease and fencing token (if the backend issues them).
    pub fn granted(&self, c: ClientId, op: OpId) -> Option<(Instant, LeaseId, Option<u64>)> {
        match self.done(c, op)? {
            (at, Done::Acquired { lease, fencing_token, .. }) => Some((at, lease, fencing_token)),
            _ => None,
        }
    }

    /// Events since the last call, in order.
    pub fn take_events(&mut self) -> Vec<(ClientId, Event<M::Outcome>)> {
        std::mem::take(&mut self.fresh)
    }

    /// Every live engine is idle and nothing is in transit to one.
    pub fn quiescent(&self) -> bool {
        self.clients.iter().all(|c| c.crashed || c.engine.is_idle())
            && self.agenda.values().all(|d| matches!(d, Delivery::Wake | Delivery::Notify { .. }))
    }

    /// What is left on the servers that must not outlive its users.
    pub fn lock_state_keys(&mut self) -> Vec<String> {
        let now = self.now;
        self.server.lock_state_left(now)
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
            .enumerate()
            .filter(|(_, c)| !c.crashed)
            .filter_map(|(i, c)| {
                let t = c.engine.poll_timeout()?;
                Some(self.paused_clients.get(&i).map_or(t, |&until| t.max(until)))
            })
            .chain(self.server.poll_timeout())
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
            assert!(round < 10_000, "livelock: the engines keep asking for work at {now:?}");
            let mut worked = false;
            if self.server.poll_timeout().is_some_and(|t| t <= now) {
                let mut pushes = Vec::new();
                self.server.on_timeout(now, &mut pushes);
                self.push_all(pushes);
                worked = true;
            }
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
                    && !self.client_is_paused(c)
                    && self.clients[c].engine.poll_timeout().is_some_and(|t| t <= now);
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
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&Sim<M>) -> bool) -> bool {
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

    fn schedule(&mut self, at: Instant, d: Delivery<M>) {
        self.seq += 1;
        self.agenda.insert((at, self.seq), d);
    }

    fn deliver(&mut self, d: Delivery<M>) {
        let now = self.now;
        if d.recipient().is_some_and(|c| self.clients[c].crashed) {
            return;
        }
        if let Some(&until) = d.recipient().and_then(|c| self.paused_clients.get(&c)) {
            if until > now {
                // The stopped process reads it when it runs again, in arrival order.
                self.schedule(until, d);
                return;
            }
        }
        match d {
            Delivery::Request { client, conn, req } => {
                let server = match conn {
                    Conn::Server(i) => i,
                    Conn::Session => 0,
                };
                if let Some(&until) = self.paused.get(&server) {
                    if until > now {
                        // Runs when the server resumes, behind what reached it earlier.
                        self.schedule(until, Delivery::Request { client, conn, req });
                        return;
                    }
                    self.paused.remove(&server);
                }
                match conn {
                    Conn::Server(i) => self.execute(client, i, req),
                    Conn::Session => self.open_session(client, req),
                }
            }
            Delivery::Reply { client, id, result, .. } => {
                self.clients[client].engine.handle_reply(now, id, WireReply::from_sim(result));
                self.drain(client);
            }
            Delivery::Notify { client, push } => {
                M::notify(&mut self.clients[client].engine, now, &push);
                self.drain(client);
            }
            Delivery::Disconnect { client } => {
                self.clients[client].engine.handle_disconnect(now);
                self.drain(client);
            }
            Delivery::Wake => {}
        }
    }

    /// A request on the session connection (a subscription, a session open) reaches server 0.
    fn open_session(&mut self, client: ClientId, req: M::Request) {
        if self.clients[client].crashed {
            return;
        }
        let id = M::request_id(&req);
        let mut pushes = Vec::new();
        let result = self.server.serve(self.now, client, false, req, &mut pushes);
        self.push_all(pushes);
        let at = self.notify_slot(client);
        self.schedule(at, Delivery::Reply { client, conn: Conn::Session, id, result });
    }

    /// A request on the command connection reaches server `i` and runs.
    fn execute(&mut self, client: ClientId, i: usize, req: M::Request) {
        let now = self.now;
        let id = M::request_id(&req);
        let crashed = self.clients[client].crashed;
        let mut pushes = Vec::new();
        let answer = self.server.serve(now, client, crashed, req, &mut pushes);
        self.push_all(pushes);
        if crashed {
            return;
        }
        let lose = self.isolated.get(&client) == Some(&Isolation::DropReplies);
        let result = if lose || self.rng.chance(self.net.drop_reply) {
            Err(connection_error("reply lost"))
        } else {
            answer
        };
        let at = (now + self.rng.duration(self.net.latency)).max(self.clients[client].reply_fifo[i]);
        self.clients[client].reply_fifo[i] = at;
        self.schedule(at, Delivery::Reply { client, conn: Conn::Server(i), id, result });
    }

    /// Sends what a server pushed, each message to its client's session connection (or lost).
    fn push_all(&mut self, pushes: Vec<(ClientId, M::Push)>) {
        for (s, push) in pushes {
            if self.rng.chance(self.net.drop_notification) {
                self.dropped_notifications += 1;
                continue;
            }
            let at = self.notify_slot(s);
            self.schedule(at, Delivery::Notify { client: s, push });
        }
    }

    fn notify_slot(&mut self, c: ClientId) -> Instant {
        let at = (self.now + self.rng.duration(self.net.notify_latency)).max(self.clients[c].notify_fifo);
        self.clients[c].notify_fifo = at;
        at
    }

    /// Performs everything the engine asked for and records its events.
    fn drain(&mut self, c: ClientId) {
        let now = self.now;
        while let Some(req) = self.clients[c].engine.poll_request() {
            self.clients[c].requests.push((now, req.clone()));
            self.server.on_send(now, c, &req);
            match self.server.route(&req) {
                Conn::Server(i) => {
                    let lose = self.isolated.get(&c) == Some(&Isolation::DropRequests);
                    if lose || self.rng.chance(self.net.drop_request) {
                        let at = now + self.rng.duration(self.net.latency) * 2;
                        let at = at.max(self.clients[c].reply_fifo[i]);
                        self.clients[c].reply_fifo[i] = at;
                        let result = Err(connection_error("request lost"));
                        let id = M::request_id(&req);
                        self.schedule(at, Delivery::Reply { client: c, conn: Conn::Server(i), id, result });
                    } else {
                        let at = (now + self.rng.duration(self.net.latency)).max(self.clients[c].cmd_fifo[i]);
                        self.clients[c].cmd_fifo[i] = at;
                        self.schedule(at, Delivery::Request { client: c, conn: Conn::Server(i), req });
                    }
                }
                Conn::Session => {
                    let at = now + self.rng.duration(self.net.notify_latency);
                    self.schedule(at, Delivery::Request { client: c, conn: Conn::Session, req });
                }
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
        for b in self.beliefs.iter_mut().filter(|b| b.client == c && b.end.is_none()) {
            if let Some(v) = self.clients[c].engine.lease_valid_until(b.lease) {
                if b.claims.last().map(|cl| cl.1) != Some(v) {
                    b.claims.push((now, v));
                }
            }
        }
    }

    fn observe(&mut self, c: ClientId, ev: &Event<M::Outcome>) {
        let now = self.now;
        match ev {
            Event::Completed { op, outcome } => match (self.clients[c].ops.get(op).cloned(), outcome.done()) {
                (Some(OpKind::Acquire { key }), Done::Acquired { lease, fencing_token, valid_until }) => {
                    self.belief_index.insert((c, lease), self.beliefs.len());
                    self.beliefs.push(Belief {
                        client: c,
                        lease,
                        key,
                        fence: fencing_token,
                        claims: vec![(now, valid_until)],
                        end: None,
                        holds: 1,
                    });
                }
                (Some(OpKind::Reacquire(lease)), Done::Acquired { .. }) => {
                    if let Some(&i) = self.belief_index.get(&(c, lease)) {
                        if self.beliefs[i].end.is_none() {
                            self.beliefs[i].holds += 1;
                        }
                    }
                }
                (Some(OpKind::Extend(lease)), Done::Extended { valid_until }) => self.claim(c, lease, valid_until),
                _ => {}
            },
            Event::Renewed { lease, valid_until } => self.claim(c, *lease, *valid_until),
            Event::Lost { lease, .. } => self.end_belief(c, *lease),
            // A lease at risk is still believed held until its validity ends (checked as claimed).
            Event::AtRisk { .. } => {}
            // Telemetry tells what the other events already did.
            Event::Telemetry(_) => {}
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
