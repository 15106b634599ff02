//! A ZooKeeper-shaped model (issue 15 starts here): the sequential-node backend of
//! `sim/seq_backend.rs` (also what `tests/engine_backend.rs` drives) over a server with
//! sessions that expire. Each waiter creates a sequential node under the lock's path in its
//! session and is told when the node before it goes; every node lives in the session, which
//! lives while the client is heard from within `session_timeout`; the sequence number is the
//! fencing token. Session opens travel on the session connection; node operations and
//! heartbeats on the command connection (lossy); the server's pushes (a predecessor gone, the
//! session expired) come back on the session connection.

use std::collections::{BTreeMap, HashMap};

use lockgate_core::engine::{Done, LockEngine};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, ErrorKind, Primitive, RequestId, Result};

use super::harness::Sim;
use super::model::{ClientId, Conn, Model};
pub use super::seq_backend::{Op, Push, Rep, Req, SeqBackend};

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
        LockEngine::with_backend(SeqBackend::new(self.lease), Box::new(rng))
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
