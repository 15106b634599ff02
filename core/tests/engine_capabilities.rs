//! `Capabilities` (each backend's spec, core/src/backend/<name>/spec.rs) is the single source of what a backend offers:
//! for every `connect::Backend`, its engine must accept exactly what the capabilities promise
//! and refuse the rest with `UNSUPPORTED` before sending anything. Checked on the sans-IO
//! engines with a stand-in server that grants everything: semaphores, read-write locks,
//! elections, observing a leader, reentrant holds and fencing tokens (ZooKeeper's over the
//! in-memory server of `engine_zk`, etcd's over a small in-memory store here).

mod engine_zk;

use lockgate_core::connect::Backend as Scheme;
use lockgate_core::engine::{Backend, Done, LockEngine, RequestId};
use lockgate_core::random::SeededRandom;
use lockgate_core::backend::redis::reply::Reply;
use lockgate_core::backend::redis::{Engine, EngineConfig, RedisBackend, Request, RequestKind};
use lockgate_core::backend::redlock::{NodeRequest, RedlockBackend, RedlockConfig, RedlockEngine};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::backend::etcd::{EtcdBackend, EtcdConfig, EtcdEngine, EtcdOp, EtcdReply, EtcdRequest, KeyValue, Order, TxnOp, TxnReply};
use lockgate_core::backend::sql::{Dialect, EntryRow, Schema, SqlBackend, SqlConfig, SqlEngine, SqlOp, SqlReply, SqlRequest};
use lockgate_core::backend::zookeeper::{ZkConfig, ZkRequest, ZooKeeperBackend, ZooKeeperEngine};
use lockgate_core::backend::memcached::{McAnswer, McCommand, McRequest, MemcachedBackend, MemcachedConfig, MemcachedEngine};
use lockgate_core::{Capabilities, ErrorKind, Event, LockOptions, Primitive, Wait};

/// A server that grants every attempt and confirms everything else, for one backend.
trait GrantAll: Backend {
    /// What the server remembers between requests.
    type Server: Default;
    fn grant(server: &mut Self::Server, request: Self::Request) -> (RequestId, Self::Reply);
}

impl GrantAll for RedisBackend {
    type Server = ();
    fn grant(_: &mut (), Request { id, kind }: Request) -> (RequestId, Self::Reply) {
        let replies = match kind {
            RequestKind::Pipeline(commands) => commands
                .iter()
                .map(|_| Reply::Array(vec![Reply::Int(1), Reply::Data(b"7".to_vec()), Reply::Int(5000)]))
                .collect(),
            _ => Vec::new(),
        };
        (id, Ok(replies))
    }
}

impl GrantAll for RedlockBackend {
    type Server = ();
    fn grant(_: &mut (), NodeRequest { id, .. }: NodeRequest) -> (RequestId, Self::Reply) {
        (id, Ok(Reply::Int(1)))
    }
}

/// One memcached server's items: `add` stores an absent key, `gets` reads it with its cas
/// unique, `cas` stores (or, with a negative expiry, deletes) an item still at that unique;
/// `stats` says it has been up a day.
#[derive(Default)]
struct McItems {
    next_cas: u64,
    items: std::collections::HashMap<String, (String, u64)>,
}

impl GrantAll for MemcachedBackend {
    type Server = McItems;
    fn grant(s: &mut McItems, McRequest { id, command, .. }: McRequest) -> (RequestId, Self::Reply) {
        let answer = match command {
            McCommand::Add { key, value, .. } if !s.items.contains_key(&key) => {
                s.next_cas += 1;
                s.items.insert(key, (value, s.next_cas));
                McAnswer::Stored
            }
            McCommand::Add { .. } => McAnswer::NotStored,
            McCommand::Gets { key } => match s.items.get(&key) {
                Some((value, cas)) => McAnswer::Value { value: value.clone().into_bytes(), cas: *cas },
                None => McAnswer::Miss,
            },
            McCommand::Cas { key, value, exptime, cas } => match s.items.get(&key) {
                Some((_, current)) if *current == cas => {
                    if exptime < 0 {
                        s.items.remove(&key);
                    } else {
                        s.next_cas += 1;
                        s.items.insert(key, (value, s.next_cas));
                    }
                    McAnswer::Stored
                }
                Some(_) => McAnswer::Exists,
                None => McAnswer::NotFound,
            },
            // A server up a day: past any max_lease, so the delayed-restart rule grants.
            McCommand::Stats => McAnswer::Uptime(86_400),
        };
        (id, Ok(answer))
    }
}

/// One client's session on an in-memory ZooKeeper server (every lock is free at first, so
/// every attempt is granted).
struct ZkServer(engine_zk::Server, Option<i64>);

impl Default for ZkServer {
    fn default() -> Self {
        ZkServer(engine_zk::Server::new(Duration::from_secs(30)), None)
    }
}

impl GrantAll for ZooKeeperBackend {
    type Server = ZkServer;
    fn grant(server: &mut ZkServer, ZkRequest { id, op, .. }: ZkRequest) -> (RequestId, Self::Reply) {
        (id, server.0.serve(0, &mut server.1, &op))
    }
}

/// One client's keys on an in-memory etcd store: every transaction's compares hold where the
/// key is absent (as on a fresh store), ranges read what was put, by create revision.
#[derive(Default)]
struct EtcdStore {
    revision: i64,
    keys: std::collections::BTreeMap<Vec<u8>, KeyValue>,
}

impl EtcdStore {
    fn range(&self, r: &lockgate_core::backend::etcd::Range) -> Vec<KeyValue> {
        let mut kvs: Vec<KeyValue> =
            self.keys.values().filter(|kv| if r.prefix { kv.key.starts_with(&r.key) } else { kv.key == r.key }).cloned().collect();
        kvs.retain(|kv| r.max_create_revision == 0 || kv.create_revision <= r.max_create_revision);
        match r.order {
            Order::CreateDescending => kvs.sort_by_key(|kv| -kv.create_revision),
            _ => kvs.sort_by_key(|kv| kv.create_revision),
        }
        if r.limit > 0 {
            kvs.truncate(r.limit as usize);
        }
        kvs
    }
}

impl GrantAll for EtcdBackend {
    type Server = EtcdStore;
    fn grant(store: &mut EtcdStore, EtcdRequest { id, op }: EtcdRequest) -> (RequestId, Self::Reply) {
        let reply = match op {
            EtcdOp::LeaseGrant { ttl_secs } => EtcdReply::LeaseGranted { lease: 0x51, ttl_secs },
            EtcdOp::LeaseKeepAlive { lease } => EtcdReply::KeptAlive { lease, ttl_secs: 30 },
            EtcdOp::LeaseRevoke { .. } => EtcdReply::LeaseRevoked,
            EtcdOp::Range(r) => EtcdReply::Range { revision: store.revision, kvs: store.range(&r), count: 0 },
            EtcdOp::Watch { .. } => EtcdReply::Watching,
            EtcdOp::CancelWatch { .. } => EtcdReply::WatchCanceled,
            EtcdOp::Txn(t) => {
                let succeeded = t.compares.iter().all(|c| {
                    let rev = store.keys.get(&c.key).map_or(0, |kv| kv.create_revision);
                    c.target == lockgate_core::backend::etcd::CompareTarget::CreateRevision(rev)
                });
                store.revision += 1;
                let mut replies = Vec::new();
                for op in if succeeded { t.success } else { t.failure } {
                    replies.push(match op {
                        TxnOp::Put { key, value, lease } => {
                            let create_revision = store.keys.get(&key).map_or(store.revision, |kv| kv.create_revision);
                            let kv = KeyValue { key: key.clone(), value, create_revision, mod_revision: store.revision, version: 1, lease };
                            store.keys.insert(key, kv);
                            TxnReply::Put
                        }
                        TxnOp::Delete { key, .. } => TxnReply::Delete { deleted: store.keys.remove(&key).map_or(0, |_| 1) },
                        TxnOp::Range(r) => TxnReply::Range { kvs: store.range(&r), count: 0 },
                    });
                }
                EtcdReply::Txn { revision: store.revision, succeeded, replies }
            }
        };
        (id, Ok(reply))
    }
}

impl GrantAll for SqlBackend {
    /// The next row id.
    type Server = i64;
    fn grant(next: &mut i64, SqlRequest { id, op }: SqlRequest) -> (RequestId, Self::Reply) {
        let reply = match op {
            SqlOp::Acquire(a) => {
                *next += 1;
                let row = EntryRow { id: *next, owner: a.owner, kind: Some(a.kind), permits: 1, value: a.value, remaining_ms: 5000 };
                SqlReply::Entries { rows: vec![row] }
            }
            SqlOp::Renew { .. } => SqlReply::Renewed { renewed: true },
            SqlOp::Release { .. } => SqlReply::Released { deleted: true, was_held: true },
            SqlOp::Observe { .. } => SqlReply::Leader(None),
            _ => SqlReply::Done,
        };
        (id, Ok(reply))
    }
}

/// Feeds every request to the granting server and returns how the operations ended.
fn serve<B: GrantAll>(engine: &mut LockEngine<B>, server: &mut B::Server, now: Instant) -> Vec<Done>
where
    B::Outcome: Into<Done>,
{
    let mut done = Vec::new();
    loop {
        while let Some(request) = engine.poll_request() {
            let (id, reply) = B::grant(server, request);
            engine.handle_reply(now, id, reply);
        }
        let Some(event) = engine.poll_event() else { break };
        if let Event::Completed { outcome, .. } = event {
            done.push(outcome.into());
        }
    }
    done
}

/// What `caps` promises is what `engine` accepts.
fn agrees<B: GrantAll>(mut engine: LockEngine<B>, caps: Capabilities)
where
    B::Outcome: Into<Done>,
{
    let what = caps.backend;
    let server = &mut B::Server::default();
    let now = Instant::from_origin(Duration::from_secs(1));
    let options = LockOptions::fixed_lease(Duration::from_secs(5));
    let primitives = [
        (Primitive::Semaphore { permits: 2 }, caps.semaphore),
        (Primitive::Read { writers_first: true }, caps.read_write),
        (Primitive::Read { writers_first: false }, caps.read_write && caps.readers_first),
        (Primitive::Write, caps.read_write),
        (Primitive::Leader { value: "v".into() }, caps.election),
    ];
    for (primitive, offered) in primitives {
        let r = engine.acquire_primitive(now, "p", &primitive, &options, Wait::Try);
        match r {
            Ok(_) => assert!(offered, "{what}: the engine accepts {primitive:?}, the capabilities refuse it"),
            Err(e) => {
                assert!(!offered, "{what}: the capabilities offer {primitive:?}, the engine refuses it: {e}");
                assert_eq!(e.kind(), ErrorKind::Unsupported, "{what} {primitive:?}: {e}");
                assert!(engine.poll_request().is_none(), "{what}: a refusal sends nothing");
            }
        }
        serve(&mut engine, server, now);
    }
    match engine.observe_leader(now, "p") {
        Ok(_) => assert!(caps.observe, "{what}: the engine observes, the capabilities refuse it"),
        Err(e) => {
            assert!(!caps.observe, "{what}: the capabilities offer observe, the engine refuses it: {e}");
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{what}: {e}");
            assert!(engine.poll_request().is_none(), "{what}: a refusal sends nothing");
        }
    }
    serve(&mut engine, server, now);

    // A mutex, always offered: its grant carries a fencing token exactly where promised, and
    // a second hold of it is taken exactly where reentrant holds are promised.
    engine.acquire(now, "m", &options, Wait::Try).unwrap();
    let lease = match serve(&mut engine, server, now).as_slice() {
        [Done::Acquired { lease, fencing_token, .. }] => {
            assert_eq!(fencing_token.is_some(), caps.fencing, "{what}: fencing token {fencing_token:?}");
            *lease
        }
        other => panic!("{what}: the mutex was not granted: {other:?}"),
    };
    engine.reacquire(now, lease);
    match serve(&mut engine, server, now).as_slice() {
        [Done::Acquired { lease: again, .. }] => {
            assert!(caps.reentrant, "{what}: the engine re-enters, the capabilities refuse it");
            assert_eq!(*again, lease);
        }
        [Done::Failed(e)] => {
            assert!(!caps.reentrant, "{what}: the capabilities offer reentrant holds, the engine refuses: {e}");
            assert_eq!(e.kind(), ErrorKind::Unsupported, "{what}: {e}");
        }
        other => panic!("{what}: {other:?}"),
    }
}

#[test]
fn every_backend_offers_what_its_capabilities_say() {
    let rng = || Box::new(SeededRandom::new(7));
    for scheme in Scheme::all() {
        let caps = scheme.capabilities(false, false);
        match scheme {
            Scheme::Redis => agrees(Engine::new(EngineConfig::default(), rng()).unwrap(), caps),
            Scheme::RedisCluster => {
                let config = EngineConfig { split_pipelines: true, ..EngineConfig::default() };
                agrees(Engine::new(config, rng()).unwrap(), caps)
            }
            Scheme::Redlock => agrees(RedlockEngine::new(RedlockConfig::default(), rng()).unwrap(), caps),
            Scheme::ZooKeeper => {
                let backend = ZooKeeperBackend::new(ZkConfig::default()).unwrap();
                agrees::<ZooKeeperBackend>(ZooKeeperEngine::with_backend(backend, rng()), caps)
            }
            Scheme::Etcd => {
                let backend = EtcdBackend::new(EtcdConfig::default()).unwrap();
                agrees::<EtcdBackend>(EtcdEngine::with_backend(backend, rng()), caps)
            }
            // The recipes are the same in both dialects; the MySQL one needs no pushed
            // notification to open its session (this granting server pushes nothing).
            Scheme::Postgres | Scheme::MySql => {
                let backend = SqlBackend::new(SqlConfig::new(Schema::default_for(Dialect::MySql)));
                agrees::<SqlBackend>(SqlEngine::with_backend(backend, rng()), caps)
            }
            Scheme::Memcached => {
                let config = MemcachedConfig { key_prefix: "lockgate:".into(), servers: vec!["127.0.0.1:11211".into()], max_lease: Duration::from_secs(30) };
                agrees::<MemcachedBackend>(MemcachedEngine::new(config, rng()).unwrap(), caps)
            }
            other => panic!("{other}: add its engine here, so its capabilities are checked"),
        }
    }
}
