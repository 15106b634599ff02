//! The etcd backend driven through the engine, synchronously, over an in-memory etcd (revisions,
//! leases with TTLs, transactions, watches from a revision): `concurrency.Mutex`'s and
//! `concurrency.Election`'s key layouts and orders, create revisions as fences, one key per
//! waiter (a second handle of one client gets a lease of its own), releases conditional on the
//! create revision (etcd #22082), renewals that notice a deleted key, a revoked lease losing
//! every hold, a silent client told of the loss before the server expires its lease, a create
//! whose reply is lost adopted by the retry, one-shot attempts that take their key back out,
//! waiters kept alive past the TTL by the backend's keepalives, a broken watch re-read, and
//! extends capped by what one keepalive is worth.

use std::collections::{BTreeMap, HashMap, VecDeque};

use lockgate_core::engine::{Done, Event, LeaseId, LockEngine, OpId, Wait};
use lockgate_core::backend::etcd::{
    CompareOp, CompareTarget, EtcdBackend, EtcdConfig, EtcdFailure, EtcdNotice, EtcdOp, EtcdReply, EtcdResult, EventKind,
    KeyValue, Order, Range, Txn, TxnOp, TxnReply, WatchEvent, WatchId,
};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{LockOptions, Primitive};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// An in-memory etcd: one member, linearizable, leases expired by the test's clock.
#[derive(Default)]
struct Etcd {
    revision: i64,
    keys: BTreeMap<Vec<u8>, KeyValue>,
    /// Lease → (TTL, expiry).
    leases: HashMap<i64, (i64, Instant)>,
    next_lease: i64,
    history: Vec<(i64, WatchEvent)>,
    /// (client, watch) → (key, prefix).
    watches: HashMap<(usize, WatchId), (Vec<u8>, bool)>,
    pushes: VecDeque<(usize, EtcdNotice)>,
}

impl Etcd {
    fn matches(key: &[u8], k: &[u8], prefix: bool) -> bool {
        if prefix {
            k.starts_with(key)
        } else {
            k == key
        }
    }

    fn range(&self, r: &Range) -> (Vec<KeyValue>, i64) {
        let mut kvs: Vec<KeyValue> = self
            .keys
            .values()
            .filter(|kv| Etcd::matches(&r.key, &kv.key, r.prefix))
            .filter(|kv| r.max_create_revision == 0 || kv.create_revision <= r.max_create_revision)
            .cloned()
            .collect();
        match r.order {
            Order::Key => {}
            Order::CreateAscending => kvs.sort_by_key(|kv| kv.create_revision),
            Order::CreateDescending => kvs.sort_by_key(|kv| -kv.create_revision),
        }
        let count = kvs.len() as i64;
        if r.limit > 0 {
            kvs.truncate(r.limit as usize);
        }
        if r.count_only {
            kvs.clear();
        }
        (kvs, count)
    }

    fn emit(&mut self, event: WatchEvent) {
        let rev = event.kv.mod_revision;
        for (&(client, watch), (key, prefix)) in &self.watches {
            if Etcd::matches(key, &event.kv.key, *prefix) {
                self.pushes.push_back((client, EtcdNotice::Watch { watch, events: vec![event.clone()] }));
            }
        }
        self.history.push((rev, event));
    }

    fn delete(&mut self, key: &[u8]) -> bool {
        let Some(old) = self.keys.remove(key) else { return false };
        self.revision += 1;
        let kv = KeyValue { key: old.key, mod_revision: self.revision, ..KeyValue::default() };
        self.emit(WatchEvent { kind: EventKind::Delete, kv });
        true
    }

    /// Revokes `lease` with its keys (one revision for all of them, as etcd does; here one each).
    fn revoke(&mut self, lease: i64) {
        self.leases.remove(&lease);
        let mine: Vec<Vec<u8>> = self.keys.values().filter(|kv| kv.lease == lease).map(|kv| kv.key.clone()).collect();
        for k in mine {
            self.delete(&k);
        }
    }

    fn expire(&mut self, now: Instant) {
        let due: Vec<i64> = self.leases.iter().filter(|(_, (_, at))| *at <= now).map(|(l, _)| *l).collect();
        for l in due {
            self.revoke(l);
        }
    }

    fn compare(&self, c: &lockgate_core::backend::etcd::Compare) -> bool {
        let kv = self.keys.get(&c.key);
        let ord = match &c.target {
            CompareTarget::CreateRevision(r) => kv.map_or(0, |k| k.create_revision).cmp(r),
            CompareTarget::ModRevision(r) => kv.map_or(0, |k| k.mod_revision).cmp(r),
            CompareTarget::Version(v) => kv.map_or(0, |k| k.version).cmp(v),
            CompareTarget::Lease(l) => kv.map_or(0, |k| k.lease).cmp(l),
            CompareTarget::Value(v) => kv.map_or(&Vec::new(), |k| &k.value).cmp(v),
        };
        match c.op {
            CompareOp::Equal => ord.is_eq(),
            CompareOp::NotEqual => ord.is_ne(),
            CompareOp::Less => ord.is_lt(),
            CompareOp::Greater => ord.is_gt(),
        }
    }

    fn txn(&mut self, t: &Txn) -> EtcdResult {
        let succeeded = t.compares.iter().all(|c| self.compare(c));
        let ops = if succeeded { &t.success } else { &t.failure };
        for op in ops {
            if let TxnOp::Put { lease, .. } = op {
                if *lease != 0 && !self.leases.contains_key(lease) {
                    return Err(EtcdFailure::LeaseNotFound);
                }
            }
        }
        let writes = ops.iter().any(|op| !matches!(op, TxnOp::Range(_)));
        let rev = if writes { self.revision + 1 } else { self.revision };
        let mut replies = Vec::new();
        let mut events = Vec::new();
        for op in ops {
            match op {
                TxnOp::Put { key, value, lease } => {
                    let created = self.keys.get(key).map(|k| (k.create_revision, k.version));
                    let (create_revision, version) = created.map_or((rev, 1), |(c, v)| (c, v + 1));
                    let kv = KeyValue { key: key.clone(), value: value.clone(), create_revision, mod_revision: rev, version, lease: *lease };
                    self.keys.insert(key.clone(), kv.clone());
                    events.push(WatchEvent { kind: EventKind::Put, kv });
                    replies.push(TxnReply::Put);
                }
                TxnOp::Delete { key, prefix } => {
                    let gone: Vec<Vec<u8>> = self.keys.keys().filter(|k| Etcd::matches(key, k, *prefix)).cloned().collect();
                    for k in &gone {
                        self.keys.remove(k);
                        events.push(WatchEvent { kind: EventKind::Delete, kv: KeyValue { key: k.clone(), mod_revision: rev, ..KeyValue::default() } });
                    }
                    replies.push(TxnReply::Delete { deleted: gone.len() as i64 });
                }
                TxnOp::Range(r) => {
                    let (kvs, count) = self.range(r);
                    replies.push(TxnReply::Range { kvs, count });
                }
            }
        }
        self.revision = rev;
        for e in events {
            self.emit(e);
        }
        Ok(EtcdReply::Txn { revision: rev, succeeded, replies })
    }

    fn serve(&mut self, now: Instant, client: usize, op: &EtcdOp) -> EtcdResult {
        self.expire(now);
        match op {
            EtcdOp::LeaseGrant { ttl_secs } => {
                self.next_lease += 1;
                let id = 0x694d_0000 + self.next_lease;
                self.leases.insert(id, (*ttl_secs, now + secs(*ttl_secs as u64)));
                Ok(EtcdReply::LeaseGranted { lease: id, ttl_secs: *ttl_secs })
            }
            EtcdOp::LeaseKeepAlive { lease } => match self.leases.get_mut(lease) {
                Some((ttl, at)) => {
                    *at = now + secs(*ttl as u64);
                    Ok(EtcdReply::KeptAlive { lease: *lease, ttl_secs: *ttl })
                }
                None => Err(EtcdFailure::LeaseNotFound),
            },
            EtcdOp::LeaseRevoke { lease } => {
                if !self.leases.contains_key(lease) {
                    return Err(EtcdFailure::LeaseNotFound);
                }
                self.revoke(*lease);
                Ok(EtcdReply::LeaseRevoked)
            }
            EtcdOp::Range(r) => {
                let (kvs, count) = self.range(r);
                Ok(EtcdReply::Range { revision: self.revision, kvs, count })
            }
            EtcdOp::Txn(t) => self.txn(t),
            EtcdOp::Watch { watch, key, prefix, start_revision } => {
                for (rev, e) in &self.history {
                    if *rev >= *start_revision && Etcd::matches(key, &e.kv.key, *prefix) {
                        self.pushes.push_back((client, EtcdNotice::Watch { watch: *watch, events: vec![e.clone()] }));
                    }
                }
                self.watches.insert((client, *watch), (key.clone(), *prefix));
                Ok(EtcdReply::Watching)
            }
            EtcdOp::CancelWatch { watch } => {
                self.watches.remove(&(client, *watch));
                Ok(EtcdReply::WatchCanceled)
            }
        }
    }

    fn keys_under(&self, prefix: &str) -> Vec<String> {
        self.keys.keys().filter(|k| k.starts_with(prefix.as_bytes())).map(|k| String::from_utf8_lossy(k).into_owned()).collect()
    }

    fn kv(&self, key: &str) -> Option<&KeyValue> {
        self.keys.get(key.as_bytes())
    }
}

type OpMatch = fn(&EtcdOp) -> bool;

struct World {
    now: Instant,
    server: Etcd,
    clients: Vec<LockEngine<EtcdBackend>>,
    events: Vec<Vec<Event<Done>>>,
    sent: Vec<Vec<EtcdOp>>,
    drop_reply: Vec<Vec<OpMatch>>,
    /// Requests matching one of these are kept unanswered in `stashed` (the test answers).
    stash: Vec<Vec<OpMatch>>,
    stashed: Vec<Vec<lockgate_core::backend::etcd::EtcdRequest>>,
    cut_off: Vec<bool>,
}

impl World {
    fn new(clients: usize, ttl: Duration) -> World {
        World {
            now: Instant::from_origin(secs(1)),
            server: Etcd::default(),
            clients: (0..clients)
                .map(|i| {
                    let backend = EtcdBackend::new(EtcdConfig { session_ttl: ttl, ..EtcdConfig::default() }).unwrap();
                    LockEngine::with_backend(backend, Box::new(SeededRandom::new(i as u64 + 1)))
                })
                .collect(),
            events: vec![Vec::new(); clients],
            sent: vec![Vec::new(); clients],
            drop_reply: vec![Vec::new(); clients],
            stash: vec![Vec::new(); clients],
            stashed: vec![Vec::new(); clients],
            cut_off: vec![false; clients],
        }
    }

    fn settle(&mut self) {
        loop {
            let mut progressed = false;
            for c in 0..self.clients.len() {
                if self.clients[c].poll_timeout().is_some_and(|t| t <= self.now) {
                    self.clients[c].handle_timeout(self.now);
                }
                while let Some(req) = self.clients[c].poll_request() {
                    progressed = true;
                    if let Some(i) = self.stash[c].iter().position(|f| f(&req.op)) {
                        self.stash[c].remove(i);
                        self.stashed[c].push(req);
                        continue;
                    }
                    let reply = if self.cut_off[c] {
                        Err(EtcdFailure::ConnectionLost("cut off by the test".into()))
                    } else {
                        let reply = self.server.serve(self.now, c, &req.op);
                        match self.drop_reply[c].iter().position(|f| f(&req.op)) {
                            Some(i) => {
                                self.drop_reply[c].remove(i);
                                Err(EtcdFailure::ConnectionLost("reply dropped by the test".into()))
                            }
                            None => reply,
                        }
                    };
                    self.sent[c].push(req.op);
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

    /// Moves the clock to `now + d`, running every timer due on the way (and the server's
    /// lease expiries, at each step).
    fn advance(&mut self, d: Duration) {
        let end = self.now + d;
        loop {
            let next = self.clients.iter().filter_map(|e| e.poll_timeout()).filter(|t| *t <= end).min();
            let Some(t) = next else { break };
            self.now = self.now.max(t);
            self.server.expire(self.now);
            for c in 0..self.clients.len() {
                self.clients[c].handle_timeout(self.now);
            }
            self.settle();
        }
        self.now = end;
        self.server.expire(self.now);
        self.settle();
    }

    fn acquire(&mut self, c: usize, name: &str, primitive: &Primitive, wait: Wait) -> OpId {
        let options = LockOptions::renewed_lease(secs(30));
        let op = self.clients[c].acquire_primitive(self.now, name, primitive, &options, wait).unwrap();
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

    fn release(&mut self, c: usize, lease: LeaseId) -> Option<Done> {
        let op = self.clients[c].release(self.now, lease);
        self.settle();
        self.outcome(c, op).cloned()
    }

    fn lost(&self, c: usize) -> Vec<LeaseId> {
        self.events[c].iter().filter_map(|e| if let Event::Lost { lease, .. } = e { Some(*lease) } else { None }).collect()
    }

    fn ops(&self, c: usize) -> Vec<&'static str> {
        self.sent[c]
            .iter()
            .map(|op| match op {
                EtcdOp::LeaseGrant { .. } => "grant",
                EtcdOp::LeaseKeepAlive { .. } => "keepalive",
                EtcdOp::LeaseRevoke { .. } => "revoke",
                EtcdOp::Range(_) => "range",
                EtcdOp::Txn(_) => "txn",
                EtcdOp::Watch { .. } => "watch",
                EtcdOp::CancelWatch { .. } => "cancel",
            })
            .collect()
    }

    fn watched(&self, c: usize) -> Vec<String> {
        self.sent[c]
            .iter()
            .filter_map(|op| match op {
                EtcdOp::Watch { key, .. } => Some(String::from_utf8_lossy(key).into_owned()),
                _ => None,
            })
            .collect()
    }

    /// Client `c`'s session leases, first its own.
    fn leases(&self, c: usize) -> Vec<i64> {
        self.clients[c].backend().leases().into_iter().map(|(l, _)| l).collect()
    }
}

const TTL: Duration = Duration::from_secs(6);
const MUTEX: Primitive = Primitive::Mutex;

#[test]
fn a_mutex_is_concurrency_mutexs_layout_served_in_order_with_create_revision_fences() {
    let mut w = World::new(3, TTL);
    let a = w.acquire(0, "orders", &MUTEX, Wait::Forever);
    let (la, fa) = w.acquired(0, a);
    // Uncontended: the session lease, then one transaction (concurrency.Mutex costs the same).
    assert_eq!(w.ops(0), ["grant", "txn"]);
    let lease = w.leases(0)[0];
    let key = format!("/lockgate/mutex/orders/{lease:x}");
    assert_eq!(w.server.keys_under("/lockgate/mutex/orders/"), std::slice::from_ref(&key));
    let kv = w.server.kv(&key).unwrap();
    assert_eq!((kv.lease, kv.create_revision as u64), (lease, fa));

    let b = w.acquire(1, "orders", &MUTEX, Wait::Forever);
    let c = w.acquire(2, "orders", &MUTEX, Wait::Forever);
    assert!(w.outcome(1, b).is_none() && w.outcome(2, c).is_none());
    // Each waiter watches only the key created just before its own.
    let kb = format!("/lockgate/mutex/orders/{:x}", w.leases(1)[0]);
    assert_eq!(w.watched(1), std::slice::from_ref(&key));
    assert_eq!(w.watched(2), [kb.clone()]);

    assert_eq!(w.release(0, la), Some(Done::Released { was_held: true }));
    let (lb, fb) = w.acquired(1, b);
    assert!(fb > fa, "fences increase: {fa} then {fb}");
    assert!(w.outcome(2, c).is_none(), "the third waits for the second");
    assert_eq!(w.release(1, lb), Some(Done::Released { was_held: true }));
    let (lc, fc) = w.acquired(2, c);
    assert!(fc > fb);
    w.release(2, lc);
    assert!(w.server.keys_under("/").is_empty(), "{:?}", w.server.keys_under("/"));
}

#[test]
fn a_name_starting_with_a_slash_is_the_etcdctl_lock_prefix_and_an_etcdctl_holder_excludes() {
    let mut w = World::new(1, TTL);
    // `etcdctl lock /jobs/nightly` holds: its key is `/jobs/nightly/<its lease>`.
    w.server.leases.insert(0x99, (10, w.now + secs(10)));
    let put = TxnOp::Put { key: b"/jobs/nightly/99".to_vec(), value: Vec::new(), lease: 0x99 };
    w.server.txn(&Txn { compares: vec![], success: vec![put], failure: vec![] }).unwrap();
    let a = w.acquire(0, "/jobs/nightly", &MUTEX, Wait::Forever);
    assert!(w.outcome(0, a).is_none(), "the etcdctl holder excludes lockgate");
    assert_eq!(w.watched(0), ["/jobs/nightly/99"]);
    // etcdctl exits: its lease is revoked with its key, and lockgate is next.
    w.server.revoke(0x99);
    w.settle();
    let (la, _) = w.acquired(0, a);
    assert_eq!(w.server.keys_under("/jobs/nightly/"), [format!("/jobs/nightly/{:x}", w.leases(0)[0])]);
    w.release(0, la);
    for bad in ["/", "a/", ""] {
        assert!(w.clients[0].acquire(w.now, bad, &LockOptions::default(), Wait::Try).is_err(), "{bad}");
    }
}

#[test]
fn two_handles_of_one_client_on_one_name_get_a_key_each_and_exclude_each_other() {
    let mut w = World::new(1, TTL);
    let a = w.acquire(0, "shared", &MUTEX, Wait::Forever);
    let (la, fa) = w.acquired(0, a);
    let b = w.acquire(0, "shared", &MUTEX, Wait::Forever);
    assert!(w.outcome(0, b).is_none(), "the second handle waits: it must not take the first one's key for its own");
    let leases = w.leases(0);
    assert_eq!(leases.len(), 2, "a lease of its own for the second key");
    let keys = w.server.keys_under("/lockgate/mutex/shared/");
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(w.watched(0), [format!("/lockgate/mutex/shared/{:x}", leases[0])]);
    w.release(0, la);
    let (lb, fb) = w.acquired(0, b);
    assert!(fb > fa);
    // A third acquire while the second holds reuses the free first lease: no third lease.
    let c = w.acquire(0, "shared", &MUTEX, Wait::Forever);
    assert!(w.outcome(0, c).is_none());
    assert_eq!(w.leases(0).len(), 2);
    w.release(0, lb);
    let (lc, _) = w.acquired(0, c);
    w.release(0, lc);
    assert!(w.server.keys_under("/").is_empty());
    // The second lease lived only while a second key needed it: revoked, the client's own kept.
    assert_eq!(w.leases(0), [leases[0]]);
    assert!(!w.server.leases.contains_key(&leases[1]) && w.server.leases.contains_key(&leases[0]));
}

#[test]
fn a_retried_release_never_deletes_a_newer_holding_etcd_22082() {
    let mut w = World::new(1, TTL);
    let a = w.acquire(0, "job", &MUTEX, Wait::Forever);
    let (la, _) = w.acquired(0, a);
    // The release's delete is applied, its reply lost, and so are its retries' for UNDO_WAIT:
    // the caller is told, and the engine goes on retrying in the background.
    for _ in 0..12 {
        w.drop_reply[0].push(|op| matches!(op, EtcdOp::Txn(t) if t.success.iter().any(|o| matches!(o, TxnOp::Delete { .. }))));
    }
    let op = w.clients[0].release(w.now, la);
    w.settle();
    assert!(w.outcome(0, op).is_none(), "told before a retry landed or UNDO_WAIT ran out");
    w.advance(lockgate_core::engine::UNDO_WAIT);
    assert!(matches!(w.outcome(0, op), Some(Done::Failed(_))), "{:?}", w.outcome(0, op));
    w.drop_reply[0].clear();
    // A new holding of the same name by the same client, before the retry.
    let b = w.acquire(0, "job", &MUTEX, Wait::Forever);
    let (lb, _) = w.acquired(0, b);
    let held = w.server.keys_under("/lockgate/mutex/job/");
    assert_eq!(held.len(), 1);
    w.advance(secs(1));
    // The retry (conditional on the old create revision) left the new holding alone.
    assert_eq!(w.server.keys_under("/lockgate/mutex/job/"), held);
    assert!(w.clients[0].is_held(w.now, lb));
    let deletes: Vec<_> = w.sent[0]
        .iter()
        .filter_map(|op| match op {
            EtcdOp::Txn(t) if t.success.iter().any(|o| matches!(o, TxnOp::Delete { .. })) => Some(t.compares.clone()),
            _ => None,
        })
        .collect();
    assert!(deletes.len() >= 2, "the release was retried: {deletes:?}");
    assert!(deletes.iter().all(|c| c.len() == 1 && matches!(c[0].target, CompareTarget::CreateRevision(r) if r > 0)), "{deletes:?}");
    w.release(0, lb);
    assert!(w.server.keys_under("/").is_empty());
}

#[test]
fn an_election_is_concurrency_elections_layout_and_observe_reads_value_and_term() {
    let mut w = World::new(2, TTL);
    let leader = |v: &str| Primitive::Leader { value: v.into() };
    let a = w.acquire(0, "/svc", &leader("10.0.0.1:80"), Wait::Forever);
    let (la, fa) = w.acquired(0, a);
    let key = format!("/svc/{:x}", w.leases(0)[0]);
    assert_eq!(w.server.kv(&key).map(|kv| kv.value.clone()), Some(b"10.0.0.1:80".to_vec()));
    let b = w.acquire(1, "/svc", &leader("10.0.0.2:80"), Wait::Forever);
    let obs = w.clients[1].observe_leader(w.now, "/svc").unwrap();
    w.settle();
    match w.outcome(1, obs) {
        Some(Done::Observed(Some(info))) => assert_eq!((info.value.as_str(), info.term), ("10.0.0.1:80", fa)),
        other => panic!("{other:?}"),
    }
    w.release(0, la);
    let (_, fb) = w.acquired(1, b);
    assert!(fb > fa);
}

#[test]
fn read_write_locks_and_semaphores_queue_by_create_revision() {
    let mut w = World::new(4, TTL);
    let read = Primitive::Read { writers_first: true };
    let r0 = w.acquire(0, "rw", &read, Wait::Forever);
    let (l0, _) = w.acquired(0, r0);
    let w1 = w.acquire(1, "rw", &Primitive::Write, Wait::Forever);
    let r2 = w.acquire(2, "rw", &read, Wait::Forever);
    assert!(w.outcome(1, w1).is_none(), "a writer waits for the reader before it");
    assert!(w.outcome(2, r2).is_none(), "a reader waits for the writer before it");
    assert_eq!(w.server.keys_under("/lockgate/rw/rw/read/").len(), 2);
    assert_eq!(w.server.keys_under("/lockgate/rw/rw/write/").len(), 1);
    w.release(0, l0);
    let (l1, _) = w.acquired(1, w1);
    assert!(w.outcome(2, r2).is_none());
    w.release(1, l1);
    let (l2, _) = w.acquired(2, r2);
    w.release(2, l2);

    let sem = Primitive::Semaphore { permits: 2 };
    let s: Vec<OpId> = (0..4).map(|c| w.acquire(c, "pool", &sem, Wait::Forever)).collect();
    let (s0, _) = w.acquired(0, s[0]);
    let (s1, _) = w.acquired(1, s[1]);
    assert!(w.outcome(2, s[2]).is_none() && w.outcome(3, s[3]).is_none());
    w.release(1, s1);
    let (s2, _) = w.acquired(2, s[2]);
    assert!(w.outcome(3, s[3]).is_none(), "two permits: the fourth still waits");
    w.release(0, s0);
    let (s3, _) = w.acquired(3, s[3]);
    w.release(2, s2);
    w.release(3, s3);
    assert!(w.server.keys_under("/").is_empty());
}

#[test]
fn a_deleted_key_is_a_lost_hold_at_the_next_renewal_and_a_revoked_lease_loses_every_hold() {
    let mut w = World::new(2, TTL);
    let a = w.acquire(0, "m", &MUTEX, Wait::Forever);
    let (la, _) = w.acquired(0, a);
    // `etcdctl del` of the holder's key: the next renewal finds it gone.
    let key = w.server.keys_under("/lockgate/mutex/m/")[0].clone();
    w.server.delete(key.as_bytes());
    w.advance(secs(3));
    assert_eq!(w.lost(0), [la]);

    // Two holds on one session; its lease revoked on the server: both are lost at the next
    // keepalive, and a waiter of the same client queues again on a new lease.
    let x = w.acquire(0, "x", &MUTEX, Wait::Forever);
    let y = w.acquire(0, "y", &MUTEX, Wait::Forever);
    let (lx, _) = w.acquired(0, x);
    let (ly, _) = w.acquired(0, y);
    let first = w.leases(0)[0];
    w.server.revoke(first);
    w.advance(secs(3));
    let lost = w.lost(0);
    assert!(lost.contains(&lx) && lost.contains(&ly), "{lost:?}");
    assert!(!w.leases(0).contains(&first));
    let again = w.acquire(0, "x", &MUTEX, Wait::Forever);
    w.acquired(0, again);
    assert_ne!(w.leases(0)[0], first, "a new session lease");
}

#[test]
fn a_silent_client_is_told_of_the_loss_before_the_server_expires_its_lease() {
    let mut w = World::new(2, TTL);
    let a = w.acquire(0, "m", &MUTEX, Wait::Forever);
    let (la, _) = w.acquired(0, a);
    let b = w.acquire(1, "m", &MUTEX, Wait::Forever);
    let cut = w.now;
    w.cut_off[0] = true;
    let mut lost_at = None;
    let mut granted_at = None;
    for _ in 0..100 {
        w.advance(Duration::from_millis(100));
        if lost_at.is_none() && w.lost(0).contains(&la) {
            lost_at = Some(w.now);
        }
        if granted_at.is_none() && w.outcome(1, b).is_some() {
            granted_at = Some(w.now);
        }
    }
    let (lost_at, granted_at) = (lost_at.expect("the loss is signalled"), granted_at.expect("the waiter is granted"));
    assert!(lost_at < granted_at, "lost at {lost_at:?}, next grant at {granted_at:?}");
    assert!(lost_at.saturating_duration_since(cut) <= TTL * 2 / 3 + Duration::from_millis(100), "{lost_at:?}");
    assert!(granted_at.saturating_duration_since(cut) >= TTL - secs(1), "the server expired the lease only after its TTL");
}

#[test]
fn a_lost_create_reply_is_found_by_the_retry_and_a_one_shot_attempt_leaves_no_key() {
    let mut w = World::new(2, TTL);
    // The transaction that creates the key is applied, its reply lost: the retry's transaction
    // finds the key (create_revision != 0: the else branch reads it) and adopts it.
    w.drop_reply[0].push(|op| matches!(op, EtcdOp::Txn(t) if t.success.iter().any(|o| matches!(o, TxnOp::Put { .. }))));
    let a = w.acquire(0, "m", &MUTEX, Wait::Forever);
    assert!(w.outcome(0, a).is_none(), "a lost reply is retried, not a failure");
    w.advance(Duration::from_millis(200));
    let (la, fa) = w.acquired(0, a);
    let keys = w.server.keys_under("/lockgate/mutex/m/");
    assert_eq!(keys.len(), 1, "the key the lost reply made is adopted, no second one: {keys:?}");
    assert_eq!(w.server.kv(&keys[0]).map(|kv| kv.create_revision as u64), Some(fa));
    // A one-shot attempt of another client finds it held and takes its key back out.
    let b = w.clients[1].acquire(w.now, "m", &LockOptions::renewed_lease(secs(30)), Wait::Try).unwrap();
    w.settle();
    assert_eq!(w.outcome(1, b), Some(&Done::NotAcquired));
    w.advance(Duration::from_millis(100));
    assert_eq!(w.server.keys_under("/lockgate/mutex/m/"), keys, "the one-shot attempt's key is gone");
    w.release(0, la);
    assert!(w.server.keys_under("/").is_empty());
}

#[test]
fn a_waiter_outlives_the_ttl_by_keepalives_and_a_broken_watch_makes_it_look_again() {
    let mut w = World::new(2, TTL);
    let a = w.acquire(0, "m", &MUTEX, Wait::Forever);
    let (la, _) = w.acquired(0, a);
    let b = w.acquire(1, "m", &MUTEX, Wait::Forever);
    let waiter_key = format!("/lockgate/mutex/m/{:x}", w.leases(1)[0]);
    // Four TTLs of waiting: the waiter's lease is kept alive by its backend (about every 2/9
    // of the TTL), so its key and its place stay.
    let before = w.sent[1].len();
    w.advance(TTL * 4);
    assert!(w.server.kv(&waiter_key).is_some(), "the waiter's key outlived its TTL");
    let keepalives = w.sent[1][before..].iter().filter(|op| matches!(op, EtcdOp::LeaseKeepAlive { .. })).count();
    assert!((12..=24).contains(&keepalives), "{keepalives} keepalives in 4 TTLs");
    assert!(w.clients[0].is_held(w.now, la), "the holder renews");
    // The watch stream breaks: the waiter reads its place again and watches anew.
    let watch = w.sent[1].iter().rev().find_map(|op| match op {
        EtcdOp::Watch { watch, .. } => Some(*watch),
        _ => None,
    });
    let watches = w.watched(1).len();
    w.clients[1].handle_notice(w.now, EtcdNotice::WatchEnded { watch: watch.unwrap(), why: "stream broke".into() });
    w.settle();
    assert_eq!(w.watched(1).len(), watches + 1, "a new watch after the broken one");
    w.release(0, la);
    let (lb, _) = w.acquired(1, b);
    w.release(1, lb);
}

#[test]
fn an_extend_keeps_the_lease_alive_and_counts_from_the_keepalive() {
    let mut w = World::new(1, TTL);
    // A lease of the session's TTL: its key is on the client's own lease (6 s).
    let options = LockOptions::fixed_lease(TTL);
    let a = w.clients[0].acquire(w.now, "m", &options, Wait::Try).unwrap();
    w.settle();
    let (la, _) = w.acquired(0, a);
    w.advance(secs(1));
    let sent = w.now;
    let e = w.clients[0].extend(w.now, la, secs(30)).unwrap();
    w.settle();
    match w.outcome(0, e) {
        // Capped by what one keepalive is worth: two thirds of the 6 s TTL.
        Some(Done::Extended { valid_until }) => assert_eq!(*valid_until, sent + secs(4)),
        other => panic!("{other:?}"),
    }
    let n = w.sent[0].len();
    assert_eq!(w.ops(0)[n - 2..], ["keepalive", "range"]);
}

#[test]
fn a_keepalive_answered_after_its_extra_lease_was_retired_loses_nothing() {
    let mut w = World::new(1, TTL);
    let a = w.acquire(0, "m", &MUTEX, Wait::Forever);
    let (la, _) = w.acquired(0, a);
    let b = w.acquire(0, "m", &MUTEX, Wait::Forever);
    let extra = w.leases(0)[1];
    // The backend's own keepalive of the extra lease goes out; its answer is held back.
    w.stash[0].push(|op| matches!(op, EtcdOp::LeaseKeepAlive { lease } if *lease != 0x694d_0000 + 1));
    w.advance(TTL * 2 / 9 + Duration::from_millis(10));
    let keepalive = w.stashed[0].pop().expect("the extra lease's keepalive");
    assert_eq!(keepalive.op, EtcdOp::LeaseKeepAlive { lease: extra });
    // The second acquire is cancelled, its key deleted, the extra lease retired (revoked) ...
    w.clients[0].cancel(w.now, b);
    w.settle();
    assert_eq!(w.leases(0).len(), 1);
    assert!(!w.server.leases.contains_key(&extra), "revoked");
    // ... and only then is the keepalive answered (its stream slower than the revoke's call):
    // LeaseNotFound about a retired lease loses nothing.
    w.clients[0].handle_reply(w.now, keepalive.id, Err(EtcdFailure::LeaseNotFound));
    w.advance(secs(2));
    assert!(w.lost(0).is_empty(), "{:?}", w.lost(0));
    assert!(w.clients[0].is_held(w.now, la));
    w.release(0, la);
}

/// Issue 23: a key lives on a lease whose TTL is its lock's lease (in whole seconds), not the
/// client's session lease, so a holder that stops (a SIGKILL) frees the lock within its lease
/// even when its session TTL is longer; locks of the session's TTL share the client's own lease.
#[test]
fn a_key_lives_on_a_lease_of_its_locks_lease_not_the_sessions() {
    let mut w = World::new(1, secs(60));
    for (name, options) in [("r", LockOptions::renewed_lease(secs(2))), ("f", LockOptions::fixed_lease(Duration::from_millis(1500)))] {
        let a = w.clients[0].acquire(w.now, name, &options, Wait::Forever).unwrap();
        w.settle();
        w.acquired(0, a);
        let keys = w.server.keys_under(&format!("/lockgate/mutex/{name}/"));
        let lease = w.server.kv(&keys[0]).unwrap().lease;
        let (ttl, expiry) = w.server.leases[&lease];
        assert_eq!(ttl, 2, "{name}: the key's lease has the lock's lease as its TTL");
        assert!(expiry <= w.now + secs(2), "{name}: nothing keeps the key past its lease");
    }
    // Both 2 s keys share one extra lease; a lock of the session's TTL uses the client's own.
    assert_eq!(w.leases(0).len(), 2);
    let s = w.clients[0].acquire(w.now, "s", &LockOptions::renewed_lease(secs(60)), Wait::Forever).unwrap();
    w.settle();
    w.acquired(0, s);
    let key = w.server.keys_under("/lockgate/mutex/s/")[0].clone();
    assert_eq!(w.server.kv(&key).unwrap().lease, w.leases(0)[0]);
    assert_eq!(w.leases(0).len(), 2);
}
