//! A ZooKeeper-shaped model (issue 15 starts here): the sequential-node backend of
//! `tests/engine_backend.rs` (copied: a test file cannot import another's items; issue 15's
//! real backend in `core/src/zookeeper/` replaces `SeqBackend` here) over a server with
//! sessions that expire. Each waiter creates a sequential node under the lock's path in its
//! session and is told when the node before it goes; every node lives in the session, which
//! lives while the client is heard from within `session_timeout`; the sequence number is the
//! fencing token. Session opens travel on the session connection; node operations and
//! heartbeats on the command connection (lossy); the server's pushes (a predecessor gone, the
//! session expired) come back on the session connection.

use std::collections::{BTreeMap, HashMap};

use lockgate_core::engine::{
    Action, Answer, Attempt, Backend, Ctx, Done, LockEngine, Pexpire, Purpose, Release, Signal, Verdict,
};
use lockgate_core::random::{RandomSource, SeededRandom};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, ErrorKind, LockOptions, Primitive, RequestId, Result};

use super::harness::Sim;
use super::model::{ClientId, Conn, Model};

// ---- the backend (as in tests/engine_backend.rs) ----

/// What the server is asked to do.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    OpenSession,
    /// Create the token's sequential node under `path` (or find it in this session) and say
    /// whether it is first.
    Enqueue { path: String, token: String },
    Delete { path: String, token: String },
    /// The session heartbeat: a renewal of every lease.
    Ping,
}

#[derive(Clone, Debug)]
pub struct Req {
    pub id: RequestId,
    pub op: Op,
}

#[derive(Clone, Debug)]
pub enum Rep {
    Session,
    Place { seq: u64, first: bool },
    Deleted(bool),
    Pong(bool),
}

/// What the server pushes.
#[derive(Clone, Debug)]
pub enum Push {
    /// The node the waiter `token` watched is gone.
    PredecessorGone { token: String },
    SessionExpired,
}

pub struct SeqBackend {
    /// Validity of every lease: what a client counts on after a heartbeat (at most the
    /// session timeout, counted by the server from when it heard the heartbeat).
    lease: Duration,
    in_flight: HashMap<RequestId, (Purpose, Instant)>,
}

impl Backend for SeqBackend {
    type Target = String;
    type Request = Req;
    type Reply = Result<Rep>;
    type Notice<'a> = Push;
    type Outcome = Done;

    fn target(&self, name: &str, primitive: &Primitive, _options: &LockOptions) -> Result<String> {
        match primitive {
            Primitive::Mutex => Ok(format!("/locks/{name}")),
            _ => Err(Error::unsupported("this backend offers mutexes only")),
        }
    }

    fn check_observe(&self) -> Result<()> {
        Err(Error::unsupported("no elections here"))
    }

    /// A session promises only `lease` after each heartbeat, whatever a grant or an extend
    /// asked for: the rest of a longer lease cannot be counted on. (tests/engine_backend.rs's
    /// copy lacks this; the simulator showed two holders without it, see simulation_zk.rs.)
    fn drift(&self, d: Duration) -> Duration {
        d.saturating_sub(self.lease)
    }

    fn attempts_need_session(&self) -> bool {
        true
    }

    fn retry_delay(&self, backoff: &mut Duration, _rng: &mut dyn RandomSource) -> Duration {
        let d = *backoff;
        *backoff = (*backoff * 2).min(Duration::from_secs(1));
        d
    }

    fn open_session(&mut self, ctx: &mut Ctx<'_, Req>) -> Option<RequestId> {
        let id = ctx.ids.request();
        ctx.out.push_back(Req { id, op: Op::OpenSession });
        Some(id)
    }

    fn session_reply(&mut self, reply: Result<Rep>) -> Result<()> {
        match reply? {
            Rep::Session => Ok(()),
            other => Err(Error::protocol(format!("session answered with {other:?}"))),
        }
    }

    fn call(&mut self, ctx: &mut Ctx<'_, Req>, purpose: Purpose, action: Action<'_, String>) {
        let op = match action {
            Action::Acquire { target, token, .. } => Op::Enqueue { path: target.to_string(), token: token.into() },
            Action::Extend { .. } => Op::Ping,
            Action::Release { target, token } => Op::Delete { path: target.to_string(), token: token.into() },
            Action::Observe { .. } => unreachable!("check_observe refuses"),
        };
        let id = ctx.ids.request();
        self.in_flight.insert(id, (purpose, ctx.now));
        ctx.out.push_back(Req { id, op });
    }

    fn on_reply(&mut self, _ctx: &mut Ctx<'_, Req>, id: RequestId, reply: Result<Rep>, answers: &mut Vec<Answer>) {
        let Some((purpose, sent)) = self.in_flight.remove(&id) else {
            return;
        };
        let verdict = match (purpose, reply) {
            (Purpose::Acquire(_), Ok(Rep::Place { seq, first: true })) => {
                Verdict::Attempt(Attempt::Granted { fence: Some(seq), granted: self.lease })
            }
            // Behind another node: woken when the predecessor goes (Signal::Recheck).
            (Purpose::Acquire(_), Ok(Rep::Place { .. })) => {
                Verdict::Attempt(Attempt::Queued { holder_remaining: None, fence: 0 })
            }
            (Purpose::Acquire(_), Err(e)) => Verdict::Attempt(Attempt::Transient { error: e, why: None, undo: false }),
            (Purpose::Renew(..) | Purpose::Extend(..), Ok(Rep::Pong(true))) => Verdict::Pexpire(Pexpire::Confirmed),
            (Purpose::Renew(..) | Purpose::Extend(..), Ok(Rep::Pong(false))) => {
                Verdict::Pexpire(Pexpire::Refused { subject: "the session expired".into() })
            }
            (Purpose::Renew(..) | Purpose::Extend(..), Err(e)) => Verdict::Pexpire(Pexpire::Transient(e)),
            (Purpose::Release(..) | Purpose::Cleanup(_), Ok(Rep::Deleted(was_held))) => {
                Verdict::Release(Release::Done { was_held })
            }
            (Purpose::Release(..) | Purpose::Cleanup(_), Err(e)) => {
                Verdict::Release(Release::Unconfirmed { error: e, retry: true })
            }
            (purpose, reply) => {
                let e = Error::protocol(format!("{purpose:?} answered with {reply:?}"));
                match purpose {
                    Purpose::Acquire(_) => Verdict::Attempt(Attempt::Failed { error: e, undo: true }),
                    Purpose::Renew(..) | Purpose::Extend(..) => Verdict::Pexpire(Pexpire::Failed(e)),
                    _ => Verdict::Release(Release::Failed(e)),
                }
            }
        };
        answers.push(Answer { purpose, sent, verdict });
    }

    fn on_notice(&mut self, _ctx: &mut Ctx<'_, Req>, notice: Push, _answers: &mut Vec<Answer>) -> Signal {
        match notice {
            Push::PredecessorGone { token } => Signal::Recheck(token),
            Push::SessionExpired => Signal::SessionLost("the server expired it".into()),
        }
    }

    fn is_idle(&self) -> bool {
        self.in_flight.is_empty()
    }
}

// ---- the server model ----

/// One node: its sequence number, owner token, session and client.
#[derive(Clone, Debug)]
struct Node {
    seq: u64,
    token: String,
    session: u64,
    client: ClientId,
}

/// The server: sessions that expire unless heard from, sequential nodes per path.
pub struct SimZk {
    /// How long a session lives after the server last heard from its client.
    pub session_timeout: Duration,
    /// The validity clients count on after a heartbeat (at most `session_timeout`).
    pub lease: Duration,
    /// Live sessions: id → (client, last heard).
    sessions: BTreeMap<u64, (ClientId, Instant)>,
    /// Each client's current session.
    current: HashMap<ClientId, u64>,
    next_id: u64,
    /// Per path, the queue of nodes; the first holds the lock.
    nodes: BTreeMap<String, Vec<Node>>,
    /// Every session that expired (for tests).
    pub expired: usize,
}

impl SimZk {
    pub fn new(session_timeout: Duration, lease: Duration) -> SimZk {
        SimZk {
            session_timeout,
            lease,
            sessions: BTreeMap::new(),
            current: HashMap::new(),
            next_id: 1,
            nodes: BTreeMap::new(),
            expired: 0,
        }
    }

    /// The client's live session, heard from now.
    fn heard(&mut self, now: Instant, client: ClientId) -> Option<u64> {
        let id = *self.current.get(&client)?;
        let s = self.sessions.get_mut(&id)?;
        s.1 = now;
        Some(id)
    }

    /// Deletes the matching nodes of `path`, telling each one's successor (its watcher).
    fn delete(&mut self, path: &str, mut matches: impl FnMut(&Node) -> bool, pushes: &mut Vec<(ClientId, Push)>) -> bool {
        let Some(queue) = self.nodes.get_mut(path) else {
            return false;
        };
        let mut deleted = false;
        let mut i = 0;
        while i < queue.len() {
            if matches(&queue[i]) {
                queue.remove(i);
                deleted = true;
                if let Some(next) = queue.get(i) {
                    pushes.push((next.client, Push::PredecessorGone { token: next.token.clone() }));
                }
            } else {
                i += 1;
            }
        }
        if queue.is_empty() {
            self.nodes.remove(path);
        }
        deleted
    }

    /// Session `id` expires: its nodes go, and its client is told.
    fn expire(&mut self, id: u64, pushes: &mut Vec<(ClientId, Push)>) {
        let Some((client, _)) = self.sessions.remove(&id) else {
            return;
        };
        self.expired += 1;
        let paths: Vec<String> = self.nodes.keys().cloned().collect();
        for path in paths {
            self.delete(&path, |n| n.session == id, pushes);
        }
        if self.current.get(&client) == Some(&id) {
            self.current.remove(&client);
            pushes.push((client, Push::SessionExpired));
        }
    }
}

impl Model for SimZk {
    type Backend = SeqBackend;
    type Request = Req;
    type Answer = Rep;
    type Push = Push;
    type Outcome = Done;

    fn engine(&self, rng: SeededRandom) -> LockEngine<SeqBackend> {
        LockEngine::with_backend(SeqBackend { lease: self.lease, in_flight: HashMap::new() }, Box::new(rng))
    }

    fn has_session(&self) -> bool {
        true
    }

    fn request_id(req: &Req) -> RequestId {
        req.id
    }

    fn route(&self, req: &Req) -> Conn {
        match req.op {
            Op::OpenSession => Conn::Session,
            _ => Conn::Server(0),
        }
    }

    fn serve(&mut self, now: Instant, client: ClientId, _crashed: bool, req: Req, pushes: &mut Vec<(ClientId, Push)>) -> Result<Rep> {
        Ok(match req.op {
            Op::OpenSession => {
                let id = self.next_id;
                self.next_id += 1;
                self.sessions.insert(id, (client, now));
                self.current.insert(client, id);
                Rep::Session
            }
            Op::Ping => Rep::Pong(self.heard(now, client).is_some()),
            Op::Enqueue { path, token } => {
                let Some(session) = self.heard(now, client) else {
                    return Err(Error::new(ErrorKind::Connection, "no session"));
                };
                let queue = self.nodes.entry(path).or_default();
                // Only a node of this session is ours again; one of an older session dies with it.
                let seq = match queue.iter().find(|n| n.token == token && n.session == session) {
                    Some(n) => n.seq,
                    None => {
                        let seq = self.next_id;
                        self.next_id += 1;
                        queue.push(Node { seq, token, session, client });
                        seq
                    }
                };
                Rep::Place { seq, first: queue[0].seq == seq }
            }
            Op::Delete { path, token } => {
                self.heard(now, client);
                Rep::Deleted(self.delete(&path, |n| n.token == token, pushes))
            }
        })
    }

    fn notify(engine: &mut LockEngine<SeqBackend>, now: Instant, push: &Push) {
        engine.handle_notice(now, push.clone());
    }

    fn restart(&mut self, _server: usize, _now: Instant, _drop_connections: bool, _clock_jump: Duration) {
        panic!("the ZooKeeper model has no restart: an ensemble keeps its data");
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.sessions.values().map(|&(_, heard)| heard + self.session_timeout).min()
    }

    fn on_timeout(&mut self, now: Instant, pushes: &mut Vec<(ClientId, Push)>) {
        let due: Vec<u64> =
            self.sessions.iter().filter(|(_, &(_, heard))| heard + self.session_timeout <= now).map(|(&id, _)| id).collect();
        for id in due {
            self.expire(id, pushes);
        }
    }

    fn belief_key(&self, name: &str, _primitive: &Primitive) -> String {
        format!("/locks/{name}")
    }

    /// Every node left, as `<path>/<seq>`.
    fn lock_state_left(&mut self, _now: Instant) -> Vec<String> {
        self.nodes.iter().flat_map(|(p, q)| q.iter().map(move |n| format!("{p}/{}", n.seq))).collect()
    }
}

/// The simulator over the ZooKeeper-shaped model.
pub type ZkSim = Sim<SimZk>;
