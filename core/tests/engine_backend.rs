//! A backend written outside core, against the public `Backend` trait only: a ZooKeeper-like
//! lock (issue 15's shape) over an in-memory server model. Each waiter holds a sequential node
//! and watches its predecessor; every node lives in the client's session, so a lost session
//! loses every lease at once; the sequence number is the fencing token. It shows that a new
//! backend needs nothing from the Redis or Redlock folders, and exercises the engine's own
//! rules (FIFO wake-ups by re-check, session-bound leases, abandoned grants released by the
//! engine, reentrant holds) on a second wire.

use std::collections::{BTreeMap, HashMap, VecDeque};

use lockgate_core::engine::{Done, Event, LeaseId, LockEngine, OpId, Wait};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, ErrorKind, LockOptions, Primitive, Result};

#[path = "sim/seq_backend.rs"]
mod seq_backend;
use seq_backend::{Op, Push, Rep, SeqBackend};

// ---- the model server and a synchronous driver ----

#[derive(Default)]
struct Server {
    live: HashMap<usize, bool>,
    seq: u64,
    /// Per path, the queue of (sequence number, token, client), first = holder.
    nodes: BTreeMap<String, Vec<(u64, String, usize)>>,
    pushes: VecDeque<(usize, Push)>,
}

impl Server {
    fn run(&mut self, client: usize, op: &Op) -> Result<Rep> {
        let live = self.live.get(&client).copied().unwrap_or(false);
        match op {
            Op::OpenSession => {
                self.live.insert(client, true);
                Ok(Rep::Session)
            }
            _ if !live => Err(Error::new(ErrorKind::Connection, "no session")),
            Op::Enqueue { path, token } => {
                let queue = self.nodes.entry(path.clone()).or_default();
                let seq = match queue.iter().find(|n| &n.1 == token) {
                    Some(n) => n.0,
                    None => {
                        self.seq += 1;
                        queue.push((self.seq, token.clone(), client));
                        self.seq
                    }
                };
                Ok(Rep::Place { seq, first: queue[0].0 == seq })
            }
            Op::Delete { path, token } => Ok(Rep::Deleted(self.delete(path, |n| &n.1 == token))),
            Op::Ping => Ok(Rep::Pong(true)),
        }
    }

    /// Deletes the matching nodes of `path`, telling each one's successor (its watcher).
    fn delete(&mut self, path: &str, mut matches: impl FnMut(&(u64, String, usize)) -> bool) -> bool {
        let Some(queue) = self.nodes.get_mut(path) else {
            return false;
        };
        let mut deleted = false;
        let mut i = 0;
        while i < queue.len() {
            if matches(&queue[i]) {
                queue.remove(i);
                deleted = true;
                if let Some((_, token, client)) = queue.get(i) {
                    self.pushes.push_back((*client, Push::PredecessorGone { token: token.clone() }));
                }
            } else {
                i += 1;
            }
        }
        deleted
    }

    /// The session of `client` expires: its nodes go, and it is told.
    fn expire(&mut self, client: usize) {
        self.live.insert(client, false);
        let paths: Vec<String> = self.nodes.keys().cloned().collect();
        for path in paths {
            self.delete(&path, |n| n.2 == client);
        }
        self.pushes.push_back((client, Push::SessionExpired));
    }

    fn holders(&self, path: &str) -> Vec<u64> {
        self.nodes.get(path).map(|q| q.iter().map(|n| n.0).collect()).unwrap_or_default()
    }
}

struct World {
    now: Instant,
    server: Server,
    clients: Vec<LockEngine<SeqBackend>>,
    events: Vec<Vec<Event<Done>>>,
    /// Every request sent, per client, for assertions about the wire.
    sent: Vec<Vec<Op>>,
}

const LEASE: Duration = Duration::from_secs(3);

impl World {
    fn new(clients: usize) -> World {
        World {
            now: Instant::from_origin(Duration::from_secs(1)),
            server: Server::default(),
            clients: (0..clients)
                .map(|i| {
                    let backend = SeqBackend::new(LEASE);
                    LockEngine::with_backend(backend, Box::new(SeededRandom::new(i as u64)))
                })
                .collect(),
            events: vec![Vec::new(); clients],
            sent: vec![Vec::new(); clients],
        }
    }

    /// Performs every request and push until nothing is left (the driving contract: drain
    /// after every input).
    fn settle(&mut self) {
        loop {
            let mut progressed = false;
            for c in 0..self.clients.len() {
                while let Some(req) = self.clients[c].poll_request() {
                    progressed = true;
                    let reply = self.server.run(c, &req.op);
                    self.sent[c].push(req.op);
                    self.clients[c].handle_reply(self.now, req.id, reply);
                }
                while let Some(ev) = self.clients[c].poll_event() {
                    self.events[c].push(ev);
                }
            }
            if let Some((c, push)) = self.server.pushes.pop_front() {
                progressed = true;
                self.clients[c].handle_notice(self.now, push);
            }
            if !progressed {
                return;
            }
        }
    }

    /// Moves virtual time forward by `d`, running every engine timer that falls due on the way.
    fn advance(&mut self, d: Duration) {
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

    fn acquire(&mut self, c: usize, name: &str, wait: Wait) -> OpId {
        let op = self.clients[c].acquire(self.now, name, &LockOptions::renewed_lease(LEASE), wait).unwrap();
        self.settle();
        op
    }

    fn outcome(&self, c: usize, op: OpId) -> Option<&Done> {
        self.events[c].iter().find_map(|e| match e {
            Event::Completed { op: o, outcome } if *o == op => Some(outcome),
            _ => None,
        })
    }

    fn acquired(&self, c: usize, op: OpId) -> (LeaseId, u64) {
        match self.outcome(c, op) {
            Some(Done::Acquired { lease, fencing_token: Some(f), .. }) => (*lease, *f),
            other => panic!("client {c} op {op:?} not acquired: {other:?}"),
        }
    }
}

#[test]
fn waiters_are_served_in_order_with_sequence_fences() {
    let mut w = World::new(3);
    let a = w.acquire(0, "x", Wait::Try);
    // Even a one-shot attempt opens the session first: its node lives in it.
    assert_eq!(w.sent[0][..2], [Op::OpenSession, Op::Enqueue { path: "/locks/x".into(), token: w.sent[0][1].token() }]);
    let (la, fa) = w.acquired(0, a);
    let b = w.acquire(1, "x", Wait::For(Duration::from_secs(30)));
    let c = w.acquire(2, "x", Wait::For(Duration::from_secs(30)));
    assert!(w.outcome(1, b).is_none() && w.outcome(2, c).is_none(), "both wait behind the holder");
    w.advance(Duration::from_secs(2));
    assert!(w.outcome(1, b).is_none() && w.outcome(2, c).is_none(), "re-checks keep them queued");

    w.clients[0].release(w.now, la);
    w.settle();
    // The release deleted a's node; b, watching it, re-checked and was granted; c still waits.
    let (lb, fb) = w.acquired(1, b);
    assert!(w.outcome(2, c).is_none());
    w.clients[1].release(w.now, lb);
    w.settle();
    let (_, fc) = w.acquired(2, c);
    assert!(fa < fb && fb < fc, "fences follow the queue: {fa} {fb} {fc}");
}

#[test]
fn a_lost_session_loses_every_lease_together() {
    let mut w = World::new(2);
    let ops: Vec<OpId> = ["x", "y", "z"].iter().map(|n| w.acquire(0, n, Wait::Try)).collect();
    let leases: Vec<LeaseId> = ops.iter().map(|op| w.acquired(0, *op).0).collect();
    let waiter = w.acquire(1, "y", Wait::For(Duration::from_secs(30)));
    // Renewals (session heartbeats) keep all three alive well past one lease.
    w.advance(LEASE * 4);
    assert!(leases.iter().all(|l| w.clients[0].is_held(w.now, *l)));
    let renewed = w.events[0].iter().filter(|e| matches!(e, Event::Renewed { .. })).count();
    assert!(renewed >= 3 * 4, "each lease renewed about every third of its lease: {renewed}");

    let before = w.events[0].len();
    w.server.expire(0);
    w.settle();
    let lost: Vec<LeaseId> = w.events[0][before..]
        .iter()
        .filter_map(|e| match e {
            Event::Lost { lease, error } if error.kind() == ErrorKind::NotHeld => Some(*lease),
            _ => None,
        })
        .collect();
    assert_eq!(lost, leases, "all three, at once");
    assert!(leases.iter().all(|l| !w.clients[0].is_held(w.now, *l)));
    // The session's nodes went with it, so the waiter on "y" got the lock.
    w.acquired(1, waiter);
    // The next acquire opens a new session.
    let again = w.acquire(0, "x", Wait::Try);
    w.acquired(0, again);
    assert_eq!(w.sent[0].iter().filter(|op| **op == Op::OpenSession).count(), 2);
}

#[test]
fn an_attempt_cancelled_on_the_wire_has_its_grant_released_by_the_engine() {
    let mut w = World::new(1);
    let op = w.clients[0].acquire(w.now, "x", &LockOptions::renewed_lease(LEASE), Wait::Try).unwrap();
    let session = w.clients[0].poll_request().unwrap();
    let reply = w.server.run(0, &session.op);
    w.clients[0].handle_reply(w.now, session.id, reply);
    let attempt = w.clients[0].poll_request().expect("the attempt, once the session is open");
    w.clients[0].cancel(w.now, op);
    assert!(w.clients[0].poll_request().is_none(), "the undo waits for the attempt's reply");
    // The attempt ran on the server after all: the node is ours and first.
    let reply = w.server.run(0, &attempt.op);
    w.clients[0].handle_reply(w.now, attempt.id, reply);
    assert!(w.clients[0].poll_event().is_none(), "told before the orphaned grant was deleted");
    w.settle();
    assert!(matches!(w.outcome(0, op), Some(Done::Failed(e)) if e.kind() == ErrorKind::Cancelled));
    assert_eq!(w.server.holders("/locks/x"), Vec::<u64>::new(), "the engine deleted the orphaned grant");
    assert!(w.clients[0].is_idle());
}

// A wait that ends without the lock (cancelled, timed out) is told only once the delete of its
// node is answered, so a read of the server right after the call finds nothing of it; a delete
// that never answers holds the caller back for UNDO_WAIT at most.
#[test]
fn an_abandoned_wait_is_told_only_once_its_node_is_gone() {
    let mut w = World::new(2);
    let held = w.acquire(0, "x", Wait::Try);
    w.acquired(0, held);
    for (how, answered) in [("cancel", true), ("timeout", true), ("cancel", false)] {
        let op = w.acquire(1, "x", Wait::For(Duration::from_secs(1)));
        assert!(w.outcome(1, op).is_none());
        match how {
            "cancel" => w.clients[1].cancel(w.now, op),
            _ => {
                w.now = w.now + Duration::from_secs(1);
                w.clients[1].handle_timeout(w.now);
            }
        }
        let undo = w.clients[1].poll_request().expect("the delete of the waiter's node");
        assert!(matches!(undo.op, Op::Delete { .. }), "{how}: {:?}", undo.op);
        assert!(w.clients[1].poll_event().is_none(), "{how}: told before its node was deleted");
        assert_eq!(w.server.nodes["/locks/x"].len(), 2, "{how}: the node is still there");
        if !answered {
            // The server stays silent: the caller is told UNDO_WAIT later all the same.
            w.now = w.now + lockgate_core::engine::UNDO_WAIT - Duration::from_millis(1);
            w.clients[1].handle_timeout(w.now);
            assert!(w.clients[1].poll_event().is_none(), "told before UNDO_WAIT");
            w.now = w.now + Duration::from_millis(1);
            w.clients[1].handle_timeout(w.now);
        }
        let reply = w.server.run(1, &undo.op);
        if answered {
            w.clients[1].handle_reply(w.now, undo.id, reply.clone());
        }
        w.settle();
        let want = if how == "cancel" { ErrorKind::Cancelled } else { ErrorKind::Timeout };
        assert!(matches!(w.outcome(1, op), Some(Done::Failed(e)) if e.kind() == want), "{how}: {:?}", w.outcome(1, op));
        if !answered {
            w.clients[1].handle_reply(w.now, undo.id, reply);
            w.settle();
        }
        assert_eq!(w.server.nodes["/locks/x"].len(), 1, "{how}: only the holder's node is left");
        assert!(w.clients[1].is_idle());
    }
}

// A release whose delete is lost in transport is retried at once in the background, and its
// caller hears the retry: the release landed (a reconnect, a re-election is no error to the
// caller, as Curator's and kazoo's releases retry), or, with the server silent, the first
// failure UNDO_WAIT later while the retries go on.
#[test]
fn a_release_lost_in_transport_answers_with_its_retry() {
    let mut w = World::new(2);
    // The first delete lost before or after the server applied it; then a server gone silent.
    for (applied, server_answers) in [(false, true), (true, true), (false, false)] {
        let op = w.acquire(0, "x", Wait::Try);
        let (lease, _) = w.acquired(0, op);
        let release = w.clients[0].release(w.now, lease);
        let delete = w.clients[0].poll_request().expect("the delete");
        if applied {
            // The retry then finds nothing: the lock was held all the same (the lease was valid).
            w.server.run(0, &delete.op).unwrap();
        }
        w.clients[0].handle_reply(w.now, delete.id, Err(Error::new(ErrorKind::Connection, "reset")));
        while let Some(ev) = w.clients[0].poll_event() {
            w.events[0].push(ev);
        }
        assert!(w.outcome(0, release).is_none(), "told of the lost delete before its retry");
        let retry = w.clients[0].poll_request().expect("the delete, retried at once");
        assert!(matches!(retry.op, Op::Delete { .. }), "{:?}", retry.op);
        if server_answers {
            let reply = w.server.run(0, &retry.op);
            w.clients[0].handle_reply(w.now, retry.id, reply);
            w.settle();
            assert_eq!(w.outcome(0, release), Some(&Done::Released { was_held: true }));
            assert!(w.server.holders("/locks/x").is_empty());
        } else {
            w.now = w.now + lockgate_core::engine::UNDO_WAIT - Duration::from_millis(1);
            w.clients[0].handle_timeout(w.now);
            assert!(w.clients[0].poll_event().is_none(), "told before UNDO_WAIT");
            w.now = w.now + Duration::from_millis(1);
            w.clients[0].handle_timeout(w.now);
            while let Some(ev) = w.clients[0].poll_event() {
                w.events[0].push(ev);
            }
            assert!(
                matches!(w.outcome(0, release), Some(Done::Failed(e)) if e.kind() == ErrorKind::Connection && e.retryable()),
                "{:?}",
                w.outcome(0, release)
            );
            // The retry on the wire lands later: the node goes, and nobody is told twice.
            let reply = w.server.run(0, &retry.op);
            w.clients[0].handle_reply(w.now, retry.id, reply);
            w.settle();
            assert!(w.server.holders("/locks/x").is_empty());
            let told = w.events[0].iter().filter(|e| matches!(e, Event::Completed { op, .. } if *op == release)).count();
            assert_eq!(told, 1);
        }
        assert!(w.clients[0].is_idle());
    }
}

#[test]
fn reentrant_holds_are_released_on_the_last_release() {
    let mut w = World::new(1);
    let op = w.acquire(0, "x", Wait::Try);
    let (lease, fence) = w.acquired(0, op);
    let again = w.clients[0].reacquire(w.now, lease);
    w.settle();
    assert_eq!(w.acquired(0, again), (lease, fence), "the same lease and fence, with no request");
    let sent = w.sent[0].len();
    let first = w.clients[0].release(w.now, lease);
    w.settle();
    assert_eq!(w.outcome(0, first), Some(&Done::Released { was_held: true }));
    assert_eq!(w.sent[0].len(), sent, "one hold given back, nothing sent");
    assert_eq!(w.server.holders("/locks/x").len(), 1);
    let last = w.clients[0].release(w.now, lease);
    w.settle();
    assert_eq!(w.outcome(0, last), Some(&Done::Released { was_held: true }));
    assert!(w.server.holders("/locks/x").is_empty());
    // What the backend lacks is refused before anything is sent.
    let e = w.clients[0].acquire_primitive(w.now, "s", &Primitive::Semaphore { permits: 2 }, &LockOptions::default(), Wait::Try).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert_eq!(w.clients[0].observe_leader(w.now, "e").unwrap_err().kind(), ErrorKind::Unsupported);
    assert!(w.clients[0].poll_request().is_none());
}

impl Op {
    fn token(&self) -> String {
        match self {
            Op::Enqueue { token, .. } | Op::Delete { token, .. } => token.clone(),
            _ => String::new(),
        }
    }
}
