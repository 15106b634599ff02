//! An in-memory ZooKeeper server serving the ZooKeeper backend's requests (`ZkOp`) with the
//! semantics the recipes rely on: sessions whose ephemeral nodes die with them, sequential
//! names from the parent's child-change counter, parents made as containers, one-shot data and
//! child watches, zxids from one counter, `Check` answered only for a live session. Faults:
//! a reply can be dropped after the request was applied (the client sees a connection loss),
//! and a session can be expired. Driven synchronously by `World`, with virtual time.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use lockgate_core::engine::{Done, Event, LeaseId, LockEngine, OpId, Wait};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::backend::zookeeper::{
    CreateMode, SessionEvent, Stat, WatchEvent, ZkConfig, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkResult, ZooKeeperBackend,
};
use lockgate_core::{LockOptions, Primitive};

/// One znode.
#[derive(Clone, Debug)]
pub struct Node {
    pub data: Vec<u8>,
    pub czxid: i64,
    pub ephemeral_owner: i64,
    pub container: bool,
    /// Child changes so far (ZooKeeper's `cversion`; the next sequence number).
    pub cversion: i32,
}

/// The server: nodes, sessions, watches.
pub struct Server {
    pub nodes: BTreeMap<String, Node>,
    pub zxid: i64,
    next_session: i64,
    /// Live sessions → owning client.
    pub sessions: HashMap<i64, usize>,
    /// The negotiated timeout of every session.
    pub timeout: Duration,
    data_watches: HashMap<String, HashSet<i64>>,
    child_watches: HashMap<String, HashSet<i64>>,
    /// Pushes for clients, in order.
    pub pushes: VecDeque<(usize, ZkNotice)>,
    /// Every write applied, as `(op name, path)`, for assertions.
    pub writes: Vec<(String, String)>,
    /// The extra sessions (a client's session for short leases) → the timeout asked.
    pub extra_of: HashMap<i64, Duration>,
}

impl Server {
    pub fn new(timeout: Duration) -> Server {
        let mut nodes = BTreeMap::new();
        nodes.insert("/".to_string(), Node { data: Vec::new(), czxid: 0, ephemeral_owner: 0, container: false, cversion: 0 });
        Server {
            nodes,
            zxid: 100,
            next_session: 0x1000,
            sessions: HashMap::new(),
            timeout,
            data_watches: HashMap::new(),
            child_watches: HashMap::new(),
            pushes: VecDeque::new(),
            writes: Vec::new(),
            extra_of: HashMap::new(),
        }
    }

    /// Closes `session` at its client's request: its ephemeral nodes go, nothing is pushed.
    pub fn close(&mut self, session: i64) {
        if self.sessions.remove(&session).is_none() {
            return;
        }
        let mine: Vec<String> = self.nodes.iter().filter(|(_, n)| n.ephemeral_owner == session).map(|(k, _)| k.clone()).collect();
        for path in mine {
            self.remove(&path);
        }
        for w in self.data_watches.values_mut().chain(self.child_watches.values_mut()) {
            w.remove(&session);
        }
    }

    fn parent(path: &str) -> String {
        match path.rfind('/') {
            Some(0) => "/".to_string(),
            Some(i) => path[..i].to_string(),
            None => "/".to_string(),
        }
    }

    /// The names of `path`'s children.
    pub fn children(&self, path: &str) -> Vec<String> {
        let prefix = if path == "/" { "/".to_string() } else { format!("{path}/") };
        self.nodes
            .keys()
            .filter(|k| k.starts_with(&prefix) && k.len() > prefix.len() && !k[prefix.len()..].contains('/'))
            .map(|k| k[prefix.len()..].to_string())
            .collect()
    }

    /// Every ephemeral node left.
    pub fn ephemerals(&self) -> Vec<String> {
        self.nodes.iter().filter(|(_, n)| n.ephemeral_owner != 0).map(|(k, _)| k.clone()).collect()
    }

    fn stat(n: &Node, children: usize) -> Stat {
        Stat {
            czxid: n.czxid,
            mzxid: n.czxid,
            version: 0,
            cversion: n.cversion,
            ephemeral_owner: n.ephemeral_owner,
            num_children: children as i32,
        }
    }

    fn fire(&mut self, table: bool, path: &str, event: WatchEvent) {
        let watchers = if table { self.data_watches.remove(path) } else { self.child_watches.remove(path) };
        for session in watchers.unwrap_or_default() {
            if let Some(&client) = self.sessions.get(&session) {
                self.pushes.push_back((client, ZkNotice::Watch { path: path.to_string(), event }));
            }
        }
    }

    /// Creates `path` (a container parent, or the node asked for).
    fn make(&mut self, path: &str, data: Vec<u8>, owner: i64, container: bool) {
        self.zxid += 1;
        let parent = Server::parent(path);
        if let Some(p) = self.nodes.get_mut(&parent) {
            p.cversion += 1;
        }
        self.nodes.insert(path.to_string(), Node { data, czxid: self.zxid, ephemeral_owner: owner, container, cversion: 0 });
        self.fire(true, path, WatchEvent::Created);
        self.fire(false, &parent, WatchEvent::ChildrenChanged);
    }

    /// Deletes `path` (no children), firing its watches and its parent's; a container left
    /// empty goes too (ZooKeeper reaps them a little later).
    pub fn remove(&mut self, path: &str) {
        if self.nodes.remove(path).is_none() {
            return;
        }
        self.zxid += 1;
        let parent = Server::parent(path);
        if let Some(p) = self.nodes.get_mut(&parent) {
            p.cversion += 1;
        }
        self.fire(true, path, WatchEvent::Deleted);
        self.fire(false, path, WatchEvent::Deleted);
        self.fire(false, &parent, WatchEvent::ChildrenChanged);
        if self.nodes.get(&parent).is_some_and(|p| p.container) && self.children(&parent).is_empty() {
            self.remove(&parent);
        }
    }

    /// Expires `session`: its ephemeral nodes go and its client is told.
    pub fn expire(&mut self, session: i64) {
        let Some(client) = self.sessions.remove(&session) else { return };
        let mine: Vec<String> = self.nodes.iter().filter(|(_, n)| n.ephemeral_owner == session).map(|(k, _)| k.clone()).collect();
        for path in mine {
            self.remove(&path);
        }
        for w in self.data_watches.values_mut().chain(self.child_watches.values_mut()) {
            w.remove(&session);
        }
        let notice = match self.extra_of.get(&session) {
            None => ZkNotice::Session(SessionEvent::Expired),
            Some(&timeout) => ZkNotice::Extra { timeout, event: SessionEvent::Expired },
        };
        self.pushes.push_back((client, notice));
    }

    /// Serves one request of `client` in `session`.
    pub fn serve(&mut self, client: usize, session: &mut Option<i64>, op: &ZkOp) -> ZkResult {
        // Extra sessions are closed by the World (`serve_extra`); a close of the client's own
        // session is answered and changes nothing (no backend sends one).
        if let ZkOp::CloseSession = op {
            return Ok(ZkReply::Closed);
        }
        if let ZkOp::OpenSession = op {
            if let Some(s) = session.filter(|s| self.sessions.contains_key(s)) {
                return Ok(ZkReply::Session { id: s, timeout: self.timeout });
            }
            self.next_session += 1;
            let id = self.next_session;
            self.sessions.insert(id, client);
            *session = Some(id);
            return Ok(ZkReply::Session { id, timeout: self.timeout });
        }
        let Some(sid) = session.filter(|s| self.sessions.contains_key(s)) else {
            return Err(ZkFailure::SessionExpired);
        };
        match op {
            ZkOp::OpenSession | ZkOp::CloseSession => unreachable!(),
            ZkOp::Create { path, data, mode } => {
                let parent = Server::parent(path);
                // Missing parents are made as containers (the transport's rule).
                let mut missing = Vec::new();
                let mut p = parent.clone();
                while !self.nodes.contains_key(&p) {
                    missing.push(p.clone());
                    p = Server::parent(&p);
                }
                for m in missing.into_iter().rev() {
                    self.make(&m, Vec::new(), 0, true);
                }
                let full = match mode {
                    CreateMode::EphemeralSequential => {
                        let seq = self.nodes[&parent].cversion;
                        format!("{path}{seq:010}")
                    }
                    _ => path.clone(),
                };
                if self.nodes.contains_key(&full) {
                    return Err(ZkFailure::NodeExists);
                }
                let owner = match mode {
                    CreateMode::Ephemeral | CreateMode::EphemeralSequential => sid,
                    _ => 0,
                };
                self.make(&full, data.clone(), owner, *mode == CreateMode::Container);
                self.writes.push(("create".into(), full.clone()));
                let stat = Server::stat(&self.nodes[&full], 0);
                Ok(ZkReply::Created { path: full, stat })
            }
            ZkOp::Delete { path, .. } => {
                if !self.nodes.contains_key(path) {
                    return Err(ZkFailure::NoNode);
                }
                if !self.children(path).is_empty() {
                    return Err(ZkFailure::NotEmpty);
                }
                self.remove(path);
                self.writes.push(("delete".into(), path.clone()));
                Ok(ZkReply::Deleted)
            }
            ZkOp::Children { path, watch } => {
                if !self.nodes.contains_key(path) {
                    return Err(ZkFailure::NoNode);
                }
                if *watch {
                    self.child_watches.entry(path.clone()).or_default().insert(sid);
                }
                Ok(ZkReply::Children(self.children(path)))
            }
            ZkOp::Exists { path, watch } => {
                if *watch {
                    self.data_watches.entry(path.clone()).or_default().insert(sid);
                }
                Ok(ZkReply::Exists(self.nodes.get(path).map(|n| Server::stat(n, 0))))
            }
            ZkOp::GetData { path, watch } => {
                let Some(n) = self.nodes.get(path) else { return Err(ZkFailure::NoNode) };
                let reply = ZkReply::Data(n.data.clone(), Server::stat(n, 0));
                if *watch {
                    self.data_watches.entry(path.clone()).or_default().insert(sid);
                }
                Ok(reply)
            }
            ZkOp::Check { path, .. } => {
                self.writes.push(("check".into(), path.clone()));
                if self.nodes.contains_key(path) {
                    Ok(ZkReply::Checked)
                } else {
                    Err(ZkFailure::NoNode)
                }
            }
        }
    }
}

/// Which request a fault applies to.
pub type OpMatch = fn(&ZkOp) -> bool;

/// Clients over one server, with virtual time.
pub struct World {
    pub now: Instant,
    pub server: Server,
    pub clients: Vec<LockEngine<ZooKeeperBackend>>,
    pub sessions: Vec<Option<i64>>,
    /// Each client's extra sessions, by the timeout asked (granted as asked here).
    pub extras: HashMap<(usize, Duration), Option<i64>>,
    pub events: Vec<Vec<Event<Done>>>,
    /// Every request sent, per client.
    pub sent: Vec<Vec<ZkOp>>,
    /// Per client: drop the reply of the next request matching each of these (the server
    /// applies it; the client sees a connection loss); each is used once.
    pub drop_reply: Vec<Vec<OpMatch>>,
    /// Per client: hold every request instead of serving it (a client cut off from the server).
    pub cut_off: Vec<bool>,
    /// Requests held for cut-off clients.
    pub held: Vec<VecDeque<lockgate_core::backend::zookeeper::ZkRequest>>,
    /// Per client: its own session's connection is down and every request on it is answered
    /// at once with a connection loss (as the Node transport does), while its extra sessions
    /// and the server's notices still get through.
    pub refused: Vec<bool>,
}

impl World {
    /// `clients` clients of a server granting sessions of `timeout`.
    pub fn new(clients: usize, timeout: Duration) -> World {
        World {
            now: Instant::from_origin(Duration::from_secs(1)),
            server: Server::new(timeout),
            clients: (0..clients)
                .map(|i| {
                    let backend = ZooKeeperBackend::new(ZkConfig::default()).unwrap();
                    LockEngine::with_backend(backend, Box::new(SeededRandom::new(i as u64 + 1)))
                })
                .collect(),
            sessions: vec![None; clients],
            extras: HashMap::new(),
            events: vec![Vec::new(); clients],
            sent: vec![Vec::new(); clients],
            drop_reply: vec![Vec::new(); clients],
            cut_off: vec![false; clients],
            held: vec![VecDeque::new(); clients],
            refused: vec![false; clients],
        }
    }

    /// Performs every request and push until nothing is left.
    pub fn settle(&mut self) {
        let mut refusals = 0;
        loop {
            let mut progressed = false;
            for c in 0..self.clients.len() {
                while let Some(req) = self.clients[c].poll_request() {
                    progressed = true;
                    if self.cut_off[c] {
                        self.held[c].push_back(req);
                        continue;
                    }
                    if self.refused[c] && req.session.is_none() {
                        refusals += 1;
                        // A request sent again at once on a connection loss, with nothing else
                        // happening in between, spins without end (and starves a JS event loop).
                        assert!(refusals < 100, "client {c} re-sends {:?} at once on every connection loss", req.op);
                        self.sent[c].push(req.op);
                        self.clients[c].handle_reply(self.now, req.id, Err(ZkFailure::ConnectionLoss("not connected".into())));
                        continue;
                    }
                    let reply = match req.session {
                        None => {
                            let mut session = self.sessions[c];
                            let reply = self.server.serve(c, &mut session, &req.op);
                            self.sessions[c] = session;
                            reply
                        }
                        Some(k) => self.serve_extra(c, k, &req.op),
                    };
                    let dropped = self.drop_reply[c].iter().position(|f| f(&req.op));
                    self.sent[c].push(req.op);
                    let reply = if let Some(i) = dropped {
                        self.drop_reply[c].remove(i);
                        Err(ZkFailure::ConnectionLoss("reply dropped by the test".into()))
                    } else {
                        reply
                    };
                    self.clients[c].handle_reply(self.now, req.id, reply);
                }
                while let Some(ev) = self.clients[c].poll_event() {
                    progressed = true;
                    self.events[c].push(ev);
                }
            }
            if let Some((c, push)) = self.server.pushes.pop_front() {
                progressed = true;
                if !self.cut_off[c] {
                    self.clients[c].handle_notice(self.now, push);
                }
            }
            if !progressed {
                return;
            }
        }
    }

    /// Serves a request of client `c`'s extra session asked for `k`: its own session on the
    /// server, granted the timeout asked, closed (its nodes gone) by `CloseSession`.
    fn serve_extra(&mut self, c: usize, k: Duration, op: &ZkOp) -> ZkResult {
        let mut session = self.extras.get(&(c, k)).copied().flatten();
        if let ZkOp::CloseSession = op {
            if let Some(s) = session.take() {
                self.server.close(s);
            }
            self.extras.insert((c, k), None);
            return Ok(ZkReply::Closed);
        }
        let reply = self.server.serve(c, &mut session, op);
        self.extras.insert((c, k), session);
        match reply {
            Ok(ZkReply::Session { id, .. }) => {
                self.server.extra_of.insert(id, k);
                Ok(ZkReply::Session { id, timeout: k })
            }
            other => other,
        }
    }

    /// The live extra session of client `c` asked for `k`, if any.
    pub fn extra(&self, c: usize, k: Duration) -> Option<i64> {
        self.extras.get(&(c, k)).copied().flatten().filter(|s| self.server.sessions.contains_key(s))
    }

    /// Moves virtual time forward by `d`, running every timer due on the way.
    pub fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let next = self.clients.iter().filter_map(|e| e.poll_timeout()).filter(|t| *t <= end).min();
            let Some(t) = next else { break };
            self.now = self.now.max(t);
            for c in 0..self.clients.len() {
                self.clients[c].handle_timeout(self.now);
            }
            self.settle();
        }
        self.now = end;
    }

    /// Client `c` reconnects after being cut off: held requests fail with a connection loss
    /// (their fate unknown to it), then it hears `Reconnected`.
    pub fn reconnect(&mut self, c: usize) {
        self.cut_off[c] = false;
        while let Some(req) = self.held[c].pop_front() {
            self.clients[c].handle_reply(self.now, req.id, Err(ZkFailure::ConnectionLoss("disconnected".into())));
        }
        self.clients[c].handle_notice(self.now, ZkNotice::Session(SessionEvent::Reconnected));
        self.settle();
    }

    pub fn acquire(&mut self, c: usize, name: &str, primitive: &Primitive, options: &LockOptions, wait: Wait) -> OpId {
        let op = self.clients[c].acquire_primitive(self.now, name, primitive, options, wait).unwrap();
        self.settle();
        op
    }

    pub fn outcome(&self, c: usize, op: OpId) -> Option<&Done> {
        self.events[c].iter().find_map(|e| match e {
            Event::Completed { op: o, outcome } if *o == op => Some(outcome),
            _ => None,
        })
    }

    pub fn acquired(&self, c: usize, op: OpId) -> (LeaseId, u64) {
        match self.outcome(c, op) {
            Some(Done::Acquired { lease, fencing_token: Some(f), .. }) => (*lease, *f),
            other => panic!("client {c} op {op:?} not acquired: {other:?}"),
        }
    }

    pub fn release(&mut self, c: usize, lease: LeaseId) -> Option<Done> {
        let op = self.clients[c].release(self.now, lease);
        self.settle();
        self.outcome(c, op).cloned()
    }

    /// The leases client `c` was told it lost.
    pub fn lost(&self, c: usize) -> Vec<LeaseId> {
        self.events[c].iter().filter_map(|e| if let Event::Lost { lease, .. } = e { Some(*lease) } else { None }).collect()
    }

    /// The requests client `c` sent from index `from` on, by kind and path.
    pub fn ops_since(&self, c: usize, from: usize) -> Vec<String> {
        self.sent[c][from..]
            .iter()
            .map(|op| match op {
                ZkOp::OpenSession => "session".to_string(),
                ZkOp::CloseSession => "close".to_string(),
                ZkOp::Create { .. } => "create".to_string(),
                ZkOp::Delete { .. } => "delete".to_string(),
                ZkOp::Children { watch, .. } => if *watch { "children+watch" } else { "children" }.to_string(),
                ZkOp::Exists { .. } => "exists".to_string(),
                ZkOp::GetData { watch, .. } => if *watch { "get+watch" } else { "get" }.to_string(),
                ZkOp::Check { .. } => "check".to_string(),
            })
            .collect()
    }
}
