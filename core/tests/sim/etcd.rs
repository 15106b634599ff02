//! The etcd model: a cluster serving the real wire types of `core/src/backend/etcd/request.rs`
//! ([`EtcdOp`] in, [`EtcdResult`] back, [`EtcdNotice`] pushed), driving
//! `LockEngine<EtcdBackend>` (`tests/simulation_etcd.rs`).
//!
//! What it models, and how:
//! - **One linearizable store** (the Raft leader's): keys with create/mod revisions, version,
//!   value and lease; one revision counter that every write takes the next of and that never
//!   goes back, across leader failovers too. Transactions (compares, then the success or the
//!   failure ops, one revision), ranges by prefix with create-revision order, limit and
//!   `max_create_revision`.
//! - **Leases** with the TTL asked for (at least 1 s). The leader sets a lease to expire a TTL
//!   after it *takes* a keepalive (not after the client sent it: the request's latency is the
//!   client's margin), and expires it exactly then (the adversarial end of etcd's revoke loop):
//!   one revision deletes every key attached to it. `expiry_pct` below 100 makes the cluster
//!   break that promise (for the test that shows the checks catch it).
//! - **Watches** from a start revision: events already in the history are replayed at once,
//!   later ones pushed as they happen, on the client's watch stream (the harness's notify
//!   channel).
//! - **Leader failovers**: during the election every request is refused (`Unavailable`, not
//!   applied) and every watch stream breaks (`WatchEnded`); the new leader extends every lease
//!   to a full TTL from when it takes over (etcd's `Promote`), never shortens one.
//! - **Faults** of the harness's network: requests lost (never ran) and replies lost (ran, the
//!   client hears `ConnectionLost`: the create a backend must find again); clients crash (their
//!   leases expire a TTL after the last keepalive the leader took) and pause (SIGSTOP).

use std::collections::{BTreeMap, HashMap};

use lockgate_core::engine::{Done, LockEngine};
use lockgate_core::backend::etcd::{
    Compare, CompareOp, CompareTarget, EtcdBackend, EtcdConfig, EtcdFailure, EtcdNotice, EtcdOp, EtcdReply, EtcdRequest,
    EtcdResult, EventKind, KeyValue, Order, Range, Txn, TxnOp, TxnReply, WatchEvent, WatchId,
};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, Primitive, RequestId};

use super::harness::Sim;
use super::model::{ClientId, Conn, Model, WireReply};

/// The simulator over the etcd cluster model.
pub type EtcdSim = Sim<SimEtcd>;

/// How the cluster behaves.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// The session lease TTL clients ask for.
    pub ttl: Duration,
    /// The leader expires a lease after this percentage of its TTL: 100 is etcd; less breaks
    /// the promise leases make (for the tests that show the checks catch what follows).
    pub expiry_pct: u32,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig { ttl: Duration::from_secs(1), expiry_pct: 100 }
    }
}

/// What happened during a run (to check that the faults were exercised).
#[derive(Clone, Debug, Default)]
pub struct EtcdStats {
    /// Leases the leader expired.
    pub leases_expired: usize,
    /// Leader failovers.
    pub failovers: usize,
    /// Requests refused during an election.
    pub unavailable: usize,
    /// Watch events pushed.
    pub watch_events: usize,
    /// Leases granted.
    pub grants: usize,
    /// Puts that found their key already there (a retry after a lost reply).
    pub adopted: usize,
}

/// One lease on the leader.
#[derive(Clone, Debug)]
struct Lease {
    ttl: Duration,
    expiry: Instant,
}

/// The etcd cluster.
pub struct SimEtcd {
    pub cfg: ClusterConfig,
    revision: i64,
    keys: BTreeMap<Vec<u8>, KeyValue>,
    leases: HashMap<i64, Lease>,
    next_lease: i64,
    history: Vec<WatchEvent>,
    watches: HashMap<(ClientId, WatchId), (Vec<u8>, bool)>,
    election_until: Option<Instant>,
    /// Create revision → key, for what a grant was.
    created: HashMap<i64, String>,
    /// Lease → the client it was granted to.
    owners: HashMap<i64, ClientId>,
    pub stats: EtcdStats,
}

impl SimEtcd {
    pub fn new(cfg: ClusterConfig) -> SimEtcd {
        SimEtcd {
            cfg,
            revision: 1,
            keys: BTreeMap::new(),
            leases: HashMap::new(),
            next_lease: 0,
            history: Vec::new(),
            watches: HashMap::new(),
            election_until: None,
            created: HashMap::new(),
            owners: HashMap::new(),
            stats: EtcdStats::default(),
        }
    }

    fn lifetime(&self, ttl: Duration) -> Duration {
        ttl * self.cfg.expiry_pct / 100
    }

    fn matches(key: &[u8], k: &[u8], prefix: bool) -> bool {
        if prefix {
            k.starts_with(key)
        } else {
            k == key
        }
    }

    fn emit(&mut self, event: WatchEvent, pushes: &mut Vec<(ClientId, EtcdNotice)>) {
        for (&(client, watch), (key, prefix)) in &self.watches {
            if SimEtcd::matches(key, &event.kv.key, *prefix) {
                self.stats.watch_events += 1;
                pushes.push((client, EtcdNotice::Watch { watch, events: vec![event.clone()] }));
            }
        }
        self.history.push(event);
    }

    fn range(&self, r: &Range) -> (Vec<KeyValue>, i64) {
        let mut kvs: Vec<KeyValue> = self
            .keys
            .values()
            .filter(|kv| SimEtcd::matches(&r.key, &kv.key, r.prefix))
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

    fn compare(&self, c: &Compare) -> bool {
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

    fn txn(&mut self, t: &Txn, pushes: &mut Vec<(ClientId, EtcdNotice)>) -> EtcdResult {
        let succeeded = t.compares.iter().all(|c| self.compare(c));
        let ops = if succeeded { &t.success } else { &t.failure };
        for op in ops {
            if let TxnOp::Put { lease, .. } = op {
                if *lease != 0 && !self.leases.contains_key(lease) {
                    return Err(EtcdFailure::LeaseNotFound);
                }
            }
        }
        if !succeeded && t.success.iter().any(|o| matches!(o, TxnOp::Put { .. })) {
            self.stats.adopted += 1;
        }
        let writes = ops.iter().any(|op| !matches!(op, TxnOp::Range(_)));
        let rev = if writes { self.revision + 1 } else { self.revision };
        let mut replies = Vec::new();
        let mut events = Vec::new();
        for op in ops {
            match op {
                TxnOp::Put { key, value, lease } => {
                    let old = self.keys.get(key).map(|k| (k.create_revision, k.version));
                    let (create_revision, version) = old.map_or((rev, 1), |(c, v)| (c, v + 1));
                    let kv = KeyValue { key: key.clone(), value: value.clone(), create_revision, mod_revision: rev, version, lease: *lease };
                    self.created.insert(create_revision, String::from_utf8_lossy(key).into_owned());
                    self.keys.insert(key.clone(), kv.clone());
                    events.push(WatchEvent { kind: EventKind::Put, kv });
                    replies.push(TxnReply::Put);
                }
                TxnOp::Delete { key, prefix } => {
                    let gone: Vec<Vec<u8>> = self.keys.keys().filter(|k| SimEtcd::matches(key, k, *prefix)).cloned().collect();
                    for k in &gone {
                        self.keys.remove(k);
                        let kv = KeyValue { key: k.clone(), mod_revision: rev, ..KeyValue::default() };
                        events.push(WatchEvent { kind: EventKind::Delete, kv });
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
            self.emit(e, pushes);
        }
        Ok(EtcdReply::Txn { revision: rev, succeeded, replies })
    }

    /// Ends `lease` with every key attached to it, in one revision.
    fn revoke(&mut self, lease: i64, pushes: &mut Vec<(ClientId, EtcdNotice)>) {
        if self.leases.remove(&lease).is_none() {
            return;
        }
        let mine: Vec<Vec<u8>> = self.keys.values().filter(|kv| kv.lease == lease).map(|kv| kv.key.clone()).collect();
        if mine.is_empty() {
            return;
        }
        self.revision += 1;
        for k in mine {
            self.keys.remove(&k);
            let kv = KeyValue { key: k, mod_revision: self.revision, ..KeyValue::default() };
            self.emit(WatchEvent { kind: EventKind::Delete, kv }, pushes);
        }
    }

    fn perform(&mut self, now: Instant, client: ClientId, op: &EtcdOp, pushes: &mut Vec<(ClientId, EtcdNotice)>) -> EtcdResult {
        match op {
            EtcdOp::LeaseGrant { ttl_secs } => {
                self.next_lease += 1;
                self.stats.grants += 1;
                let id = 0x3f00_0000 + self.next_lease * 7919;
                let ttl = Duration::from_secs((*ttl_secs).max(1) as u64);
                self.leases.insert(id, Lease { ttl, expiry: now + self.lifetime(ttl) });
                self.owners.insert(id, client);
                Ok(EtcdReply::LeaseGranted { lease: id, ttl_secs: ttl.as_secs() as i64 })
            }
            EtcdOp::LeaseKeepAlive { lease } => {
                let lifetime = self.leases.get(lease).map(|l| self.lifetime(l.ttl));
                match (self.leases.get_mut(lease), lifetime) {
                    (Some(l), Some(life)) => {
                        l.expiry = l.expiry.max(now + life);
                        Ok(EtcdReply::KeptAlive { lease: *lease, ttl_secs: l.ttl.as_secs() as i64 })
                    }
                    _ => Err(EtcdFailure::LeaseNotFound),
                }
            }
            EtcdOp::LeaseRevoke { lease } => {
                if !self.leases.contains_key(lease) {
                    return Err(EtcdFailure::LeaseNotFound);
                }
                self.revoke(*lease, pushes);
                Ok(EtcdReply::LeaseRevoked)
            }
            EtcdOp::Range(r) => {
                let (kvs, count) = self.range(r);
                Ok(EtcdReply::Range { revision: self.revision, kvs, count })
            }
            EtcdOp::Txn(t) => self.txn(t, pushes),
            EtcdOp::Watch { watch, key, prefix, start_revision } => {
                for e in &self.history {
                    if e.kv.mod_revision >= *start_revision && SimEtcd::matches(key, &e.kv.key, *prefix) {
                        self.stats.watch_events += 1;
                        pushes.push((client, EtcdNotice::Watch { watch: *watch, events: vec![e.clone()] }));
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

    fn expire_due(&mut self, now: Instant, pushes: &mut Vec<(ClientId, EtcdNotice)>) {
        if self.election_until.is_some() {
            return;
        }
        let mut due: Vec<i64> = self.leases.iter().filter(|(_, l)| l.expiry <= now).map(|(id, _)| *id).collect();
        due.sort();
        for id in due {
            self.stats.leases_expired += 1;
            self.revoke(id, pushes);
        }
    }

    /// The leader fails now; a new one serves after `election`. Every watch stream breaks.
    pub fn fail_leader(&mut self, now: Instant, election: Duration, pushes: &mut Vec<(ClientId, EtcdNotice)>) {
        self.stats.failovers += 1;
        self.election_until = Some(now + election);
        let mut ended: Vec<(ClientId, WatchId)> = self.watches.drain().map(|(k, _)| k).collect();
        ended.sort();
        for (client, watch) in ended {
            pushes.push((client, EtcdNotice::WatchEnded { watch, why: "the member's leader failed".into() }));
        }
    }

    /// Every key on the cluster.
    pub fn key_names(&self) -> Vec<String> {
        self.keys.keys().map(|k| String::from_utf8_lossy(k).into_owned()).collect()
    }

    /// The keys that hold by the recipes' rules (the workload's names: `/lockgate/<kind>/<name>`,
    /// semaphores of 2 permits), each with its create revision and the client whose lease it is
    /// on: a mutex's or an election's first key, a read-write lock's readers before its first
    /// writer or that writer, a semaphore's first two keys.
    pub fn heads(&self) -> Vec<(String, i64, Option<ClientId>)> {
        let mut bases: BTreeMap<String, Vec<&KeyValue>> = BTreeMap::new();
        for kv in self.keys.values() {
            let key = String::from_utf8_lossy(&kv.key).into_owned();
            let parts: Vec<&str> = key.split('/').collect();
            // ["", "lockgate", kind, name, ...]
            if parts.len() < 5 || parts[1] != "lockgate" {
                continue;
            }
            bases.entry(format!("{}/{}", parts[2], parts[3])).or_default().push(kv);
        }
        let mut out = Vec::new();
        for (base, mut kvs) in bases {
            kvs.sort_by_key(|kv| kv.create_revision);
            let holding: Vec<&KeyValue> = if base.starts_with("rw/") {
                let first_writer = kvs.iter().position(|kv| kv.key.windows(7).any(|w| w == b"/write/"));
                match first_writer {
                    Some(0) => kvs[..1].to_vec(),
                    Some(w) => kvs[..w].to_vec(),
                    None => kvs.clone(),
                }
            } else if base.starts_with("semaphore/") {
                kvs.iter().take(2).copied().collect()
            } else {
                kvs.iter().take(1).copied().collect()
            };
            for kv in holding {
                out.push((String::from_utf8_lossy(&kv.key).into_owned(), kv.create_revision, self.owners.get(&kv.lease).copied()));
            }
        }
        out
    }

    /// The store's revision.
    pub fn revision(&self) -> i64 {
        self.revision
    }
}

impl Model for SimEtcd {
    type Backend = EtcdBackend;
    type Request = EtcdRequest;
    type Answer = EtcdResult;
    type Push = EtcdNotice;
    type Outcome = Done;

    fn engine(&self, rng: SeededRandom) -> LockEngine<EtcdBackend> {
        let backend = EtcdBackend::new(EtcdConfig { session_ttl: self.cfg.ttl, label: "sim".into() }).expect("a valid TTL");
        LockEngine::with_backend(backend, Box::new(rng))
    }

    fn request_id(req: &EtcdRequest) -> RequestId {
        req.id
    }

    fn route(&self, _req: &EtcdRequest) -> Conn {
        Conn::Server(0)
    }

    fn serve(
        &mut self,
        now: Instant,
        client: ClientId,
        _crashed: bool,
        req: EtcdRequest,
        pushes: &mut Vec<(ClientId, EtcdNotice)>,
    ) -> Result<EtcdResult, Error> {
        self.expire_due(now, pushes);
        if self.election_until.is_some_and(|u| u > now) {
            self.stats.unavailable += 1;
            return Ok(Err(EtcdFailure::Unavailable("no leader".into())));
        }
        Ok(self.perform(now, client, &req.op, pushes))
    }

    fn notify(engine: &mut LockEngine<EtcdBackend>, now: Instant, push: &EtcdNotice) {
        engine.handle_notice(now, push.clone());
    }

    fn restart(&mut self, _server: usize, _now: Instant, _drop_connections: bool, _clock_jump: Duration) {
        panic!("an etcd cluster keeps its data: use EtcdSim::fail_leader");
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if let Some(u) = self.election_until {
            return Some(u);
        }
        self.leases.values().map(|l| l.expiry).min()
    }

    fn on_timeout(&mut self, now: Instant, pushes: &mut Vec<(ClientId, EtcdNotice)>) {
        if self.election_until.is_some_and(|u| u <= now) {
            self.election_until = None;
            // The new leader gives every lease a full TTL from now (etcd's `Promote`).
            let lifetimes: Vec<(i64, Duration)> = self.leases.iter().map(|(id, l)| (*id, self.lifetime(l.ttl))).collect();
            for (id, life) in lifetimes {
                if let Some(l) = self.leases.get_mut(&id) {
                    l.expiry = l.expiry.max(now + life);
                }
            }
        }
        self.expire_due(now, pushes);
    }

    fn belief_key(&self, name: &str, primitive: &Primitive) -> String {
        match primitive {
            Primitive::Mutex => format!("mutex:{name}"),
            Primitive::Read { .. } | Primitive::Write => format!("rw:{name}"),
            Primitive::Semaphore { permits } => format!("sem{permits}:{name}"),
            Primitive::Leader { .. } => format!("leader:{name}"),
        }
    }

    /// A read-write lock's grant is shared if its key is a reader's (`<base>/read/<lease>`), a
    /// semaphore's shared up to its permits; everything else exclusive.
    fn hold_mode(&self, key: &str, fence: Option<u64>) -> (char, u64) {
        if let Some(permits) = key.strip_prefix("sem").and_then(|k| k.split(':').next()).and_then(|n| n.parse().ok()) {
            return ('r', permits);
        }
        if key.starts_with("rw:") && fence.and_then(|f| self.created.get(&(f as i64))).is_some_and(|k| k.contains("/read/")) {
            return ('r', 0);
        }
        ('w', 0)
    }

    fn lock_state_left(&mut self, _now: Instant) -> Vec<String> {
        self.key_names()
    }
}

/// A transport failure of the harness (a lost request or reply) reads as a lost connection.
impl WireReply<EtcdResult> for EtcdResult {
    fn from_sim(result: Result<EtcdResult, Error>) -> EtcdResult {
        result.unwrap_or_else(|e| Err(EtcdFailure::ConnectionLost(e.to_string())))
    }
}

/// What only the etcd model offers: its faults at the current instant.
impl Sim<SimEtcd> {
    /// An etcd simulation over `cfg`'s cluster, with `net`'s latencies and losses.
    pub fn etcd(cfg: ClusterConfig, seed: u64, net: super::NetConfig) -> EtcdSim {
        Sim::with_model(SimEtcd::new(cfg), seed, net)
    }

    /// The leader fails now; a new one serves after `election`.
    pub fn fail_etcd_leader(&mut self, election: Duration) {
        let mut pushes = Vec::new();
        let now = self.now;
        self.server.fail_leader(now, election, &mut pushes);
        self.push(pushes);
    }
}
