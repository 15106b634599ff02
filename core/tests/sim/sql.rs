//! The SQL model: a database serving the SQL backend's structured operations
//! (`core/src/backend/sql/request.rs`: [`SqlOp`] in, [`SqlResult`] back, [`SqlNotice`] pushed), driving
//! `LockEngine<SqlBackend>` in either dialect (`tests/simulation_sql.rs`, `tests/engine_sql.rs`).
//!
//! What it models, and how:
//! - **One table** of rows (`id`, `lock_key`, `owner`, `kind`, `permits`, `value`, `expires`),
//!   `UNIQUE (lock_key, owner)`, ids from one counter that never goes back (across restarts:
//!   the database is durable). Every operation runs atomically, as the backend's transaction
//!   serialized on the name makes it; expiry is the server's clock (the simulator's, plus a
//!   jump a restart may add).
//! - **PostgreSQL**: `LISTEN` on the client's session connection registers it; releases, reaps
//!   and closes notify the deleted ids to every listener; `NotifySelf` reaches the listeners
//!   (`notify_works = false` models PgBouncer in transaction mode: nothing arrives).
//! - **MySQL**: doorbells are named locks held by a client's main connection; they go when the
//!   client crashes or the server restarts; a wait on a held doorbell answers "not rung" at
//!   once (the model cannot block a reply), so a waiter then relies on its timer re-check; a
//!   free one answers "rung".
//! - **Faults** of the harness's network (requests lost, replies lost: a transaction applied
//!   whose reply the client never hears), crashed and paused clients, server restarts (rows
//!   kept, connections, doorbells and listeners dropped).

use std::collections::{BTreeMap, HashMap, HashSet};

use lockgate_core::engine::{Done, LockEngine};
use lockgate_core::random::SeededRandom;
use lockgate_core::backend::sql::recipe::{place, Place};
use lockgate_core::backend::sql::{
    doorbell, Dialect, EntryKind, EntryRow, Schema, SqlBackend, SqlConfig, SqlFailure, SqlNotice, SqlOp, SqlReply, SqlRequest, SqlResult,
};
use lockgate_core::time::{Duration, Instant};
use lockgate_core::{Error, Primitive, RequestId};

use super::harness::Sim;
use super::model::{ClientId, Conn, Model, WireReply};

/// The simulator over the SQL model.
pub type SqlSim = Sim<SimSql>;

/// What happened during a run (to check that the faults were exercised).
#[derive(Clone, Debug, Default)]
pub struct SqlStats {
    /// Acquire batches that found their own row already there (a retry after a lost reply).
    pub adopted: usize,
    /// Rows deleted because they expired.
    pub reaped: usize,
    /// Notifications pushed.
    pub notified: usize,
    /// Doorbell waits answered "rung".
    pub rung: usize,
    /// Server restarts.
    pub restarts: usize,
}

/// One row.
#[derive(Clone, Debug)]
pub struct Row {
    pub id: i64,
    pub lock_key: String,
    pub owner: String,
    pub kind: EntryKind,
    pub permits: u32,
    pub value: Option<String>,
    /// On the server's clock.
    pub expires: Instant,
    /// The client that inserted it.
    pub client: ClientId,
}

/// The database.
pub struct SimSql {
    pub schema: Schema,
    /// Whether notifications reach listeners (false: a pooler in transaction mode).
    pub notify_works: bool,
    /// How long the session open waits for its own notification.
    pub notify_check: Duration,
    /// The server expires a row after this percentage of the time it was set for: 100 is a
    /// database; less breaks the promise (for the test that shows the checks catch it).
    pub expiry_pct: u32,
    table: bool,
    next_id: i64,
    rows: BTreeMap<i64, Row>,
    /// Doorbell name → the client holding it.
    doorbells: HashMap<String, ClientId>,
    listeners: HashSet<ClientId>,
    /// How far the server's clock is ahead of the simulator's.
    clock_ahead: Duration,
    /// Ids of every reader's row ever inserted (what a grant was, after its row is gone).
    readers: HashSet<i64>,
    pub stats: SqlStats,
}

impl SimSql {
    /// A database of `dialect` with lockgate's default table (created by the first client).
    pub fn new(dialect: Dialect) -> SimSql {
        SimSql {
            schema: Schema::default_for(dialect),
            notify_works: true,
            notify_check: Duration::from_millis(500),
            expiry_pct: 100,
            table: false,
            next_id: 1,
            rows: BTreeMap::new(),
            doorbells: HashMap::new(),
            listeners: HashSet::new(),
            clock_ahead: Duration::ZERO,
            readers: HashSet::new(),
            stats: SqlStats::default(),
        }
    }

    fn server_now(&self, now: Instant) -> Instant {
        now + self.clock_ahead
    }

    /// When a row set to live `ms` from `t` expires.
    fn expiry(&self, t: Instant, ms: u64) -> Instant {
        t + Duration::from_millis(ms) * self.expiry_pct / 100
    }

    fn pg(&self) -> bool {
        self.schema.dialect == Dialect::Postgres
    }

    /// Every row (live or expired, not yet reaped).
    pub fn rows(&self) -> Vec<Row> {
        self.rows.values().cloned().collect()
    }

    /// The live rows of `lock_key` at `now`, in id order.
    pub fn live(&self, now: Instant, lock_key: &str) -> Vec<Row> {
        let t = self.server_now(now);
        self.rows.values().filter(|r| r.lock_key == lock_key && r.expires > t).cloned().collect()
    }

    /// Who holds the doorbell of `owner`.
    pub fn doorbell_holder(&self, owner: &str) -> Option<ClientId> {
        self.doorbells.get(&doorbell(owner)).copied()
    }

    fn entry(&self, r: &Row, t: Instant) -> EntryRow {
        EntryRow {
            id: r.id,
            owner: r.owner.clone(),
            kind: Some(r.kind),
            permits: i64::from(r.permits),
            value: r.value.clone(),
            remaining_ms: r.expires.saturating_duration_since(t).as_millis() as i64,
        }
    }

    fn notify_ids(&mut self, ids: &[i64], pushes: &mut Vec<(ClientId, SqlNotice)>) {
        if !self.pg() || !self.notify_works {
            return;
        }
        let mut listeners: Vec<ClientId> = self.listeners.iter().copied().collect();
        listeners.sort();
        for id in ids {
            for &c in &listeners {
                self.stats.notified += 1;
                pushes.push((c, SqlNotice::Notified { channel: self.schema.channel(), payload: id.to_string() }));
            }
        }
    }

    fn delete(&mut self, ids: Vec<i64>, pushes: &mut Vec<(ClientId, SqlNotice)>) {
        for id in &ids {
            self.rows.remove(id);
        }
        self.notify_ids(&ids, pushes);
    }

    pub fn perform(&mut self, now: Instant, client: ClientId, op: &SqlOp, pushes: &mut Vec<(ClientId, SqlNotice)>) -> SqlResult {
        let t = self.server_now(now);
        let missing = || Err(SqlFailure::Server { code: "42P01".into(), message: "relation does not exist".into() });
        match op {
            SqlOp::Probe => {
                if self.table {
                    Ok(SqlReply::Done)
                } else {
                    missing()
                }
            }
            SqlOp::CreateSchema => {
                self.table = true;
                Ok(SqlReply::Done)
            }
            SqlOp::Listen => {
                self.listeners.insert(client);
                Ok(SqlReply::Done)
            }
            SqlOp::NotifySelf { payload } => {
                if self.notify_works {
                    let mut listeners: Vec<ClientId> = self.listeners.iter().copied().collect();
                    listeners.sort();
                    for c in listeners {
                        pushes.push((c, SqlNotice::Notified { channel: self.schema.channel(), payload: payload.clone() }));
                    }
                }
                Ok(SqlReply::Done)
            }
            SqlOp::Ping => Ok(SqlReply::Done),
            _ if !self.table => missing(),
            SqlOp::Acquire(a) => {
                if !self.pg() {
                    self.doorbells.entry(doorbell(&a.owner)).or_insert(client);
                }
                let exists = self.rows.values().any(|r| r.lock_key == a.lock_key && r.owner == a.owner);
                if exists {
                    self.stats.adopted += 1;
                } else {
                    let id = self.next_id;
                    self.next_id += 1;
                    let row = Row {
                        id,
                        lock_key: a.lock_key.clone(),
                        owner: a.owner.clone(),
                        kind: a.kind,
                        permits: a.permits,
                        value: a.value.clone(),
                        expires: self.expiry(t, a.entry_ttl_ms),
                        client,
                    };
                    self.rows.insert(id, row);
                    if a.kind == EntryKind::Read {
                        self.readers.insert(id);
                    }
                }
                let expired: Vec<i64> = self.rows.values().filter(|r| r.lock_key == a.lock_key && r.expires <= t).map(|r| r.id).collect();
                self.stats.reaped += expired.len();
                self.delete(expired, pushes);
                // The expiry by the recipe's count, as the UPDATE computes it.
                let live: Vec<EntryRow> = self.live(now, &a.lock_key).iter().map(|r| self.entry(r, t)).collect();
                let holds = matches!(place(a.kind, a.permits, &live, &a.owner), Place::Holds(_));
                let ttl = if holds { a.lease_ms } else { a.entry_ttl_ms };
                let expires = self.expiry(t, ttl);
                if let Some(r) = self.rows.values_mut().find(|r| r.lock_key == a.lock_key && r.owner == a.owner) {
                    r.expires = expires;
                }
                let rows = self.live(now, &a.lock_key).iter().map(|r| self.entry(r, t)).collect();
                Ok(SqlReply::Entries { rows })
            }
            SqlOp::Check(a) => {
                let expired: Vec<i64> = self.rows.values().filter(|r| r.lock_key == a.lock_key && r.expires <= t).map(|r| r.id).collect();
                self.stats.reaped += expired.len();
                self.delete(expired, pushes);
                let live: Vec<EntryRow> = self.live(now, &a.lock_key).iter().map(|r| self.entry(r, t)).collect();
                let holds = matches!(place(a.kind, a.permits, &live, &a.owner), Place::Holds(_));
                let expires = self.expiry(t, if holds { a.lease_ms } else { a.entry_ttl_ms });
                if let Some(r) = self.rows.values_mut().find(|r| r.lock_key == a.lock_key && r.owner == a.owner && r.expires > t) {
                    r.expires = expires;
                }
                let rows = self.live(now, &a.lock_key).iter().map(|r| self.entry(r, t)).collect();
                Ok(SqlReply::Entries { rows })
            }
            SqlOp::Renew { id, owner, ttl_ms } => match self.rows.get_mut(id) {
                Some(r) if &r.owner == owner && r.expires > t => {
                    r.expires = t + Duration::from_millis(*ttl_ms) * self.expiry_pct / 100;
                    Ok(SqlReply::Renewed { renewed: true })
                }
                _ => Ok(SqlReply::Renewed { renewed: false }),
            },
            SqlOp::Release { lock_key, owner } => {
                let found = self.rows.values().find(|r| &r.lock_key == lock_key && &r.owner == owner).map(|r| (r.id, r.expires > t));
                if !self.pg() {
                    let name = doorbell(owner);
                    if self.doorbells.get(&name) == Some(&client) {
                        self.doorbells.remove(&name);
                    }
                }
                match found {
                    Some((id, live)) => {
                        self.delete(vec![id], pushes);
                        Ok(SqlReply::Released { deleted: true, was_held: live })
                    }
                    None => Ok(SqlReply::Released { deleted: false, was_held: false }),
                }
            }
            SqlOp::Observe { lock_key } => {
                let first = self.live(now, lock_key).first().map(|r| self.entry(r, t));
                Ok(SqlReply::Leader(first))
            }
            SqlOp::Inspect { lock_key } => {
                let rows = self.live(now, lock_key).iter().map(|r| self.entry(r, t)).collect();
                Ok(SqlReply::Entries { rows })
            }
            SqlOp::List { prefix, after, limit } => {
                // As the statement reads: distinct live keys after `after`, a kind's directory
                // then the prefix, in key order (no anchors in the simulator).
                let mut keys: Vec<String> = self
                    .rows
                    .values()
                    .filter(|r| r.expires > t && r.lock_key.as_str() > after.as_str())
                    .filter(|r| r.lock_key.split_once('/').is_some_and(|(_, name)| name.starts_with(prefix.as_str())))
                    .map(|r| r.lock_key.clone())
                    .collect();
                keys.sort();
                keys.dedup();
                keys.truncate(*limit as usize);
                Ok(SqlReply::Keys { keys })
            }
            SqlOp::WaitDoorbell { owner, .. } => {
                let rang = !self.doorbells.contains_key(&doorbell(owner));
                if rang {
                    self.stats.rung += 1;
                }
                Ok(SqlReply::Rang { rang })
            }
            SqlOp::TakeDoorbells { owners } => {
                let taken = owners
                    .iter()
                    .map(|o| {
                        let holder = *self.doorbells.entry(doorbell(o)).or_insert(client);
                        holder == client
                    })
                    .collect();
                Ok(SqlReply::Doorbells { taken })
            }
            SqlOp::Refresh { groups, watch } => {
                // Each live listed row lives at least `ttl` more; never shortened, never revived.
                let mut count = 0;
                for (ttl_ms, ids) in groups {
                    let until = self.expiry(t, *ttl_ms);
                    for id in ids {
                        if let Some(r) = self.rows.get_mut(id).filter(|r| r.expires > t) {
                            r.expires = r.expires.max(until);
                            count += 1;
                        }
                    }
                }
                // Then the watched rows that live, with their remaining time.
                let live = watch
                    .iter()
                    .filter_map(|id| self.rows.get(id).filter(|r| r.expires > t).map(|r| (*id, r.expires.saturating_duration_since(t).as_millis() as i64)))
                    .collect();
                Ok(SqlReply::Refreshed { count, live })
            }
            SqlOp::DeleteOwners { owners } => {
                let ids: Vec<i64> = self.rows.values().filter(|r| owners.contains(&r.owner)).map(|r| r.id).collect();
                let count = ids.len() as u64;
                self.delete(ids, pushes);
                if !self.pg() {
                    self.doorbells.retain(|_, c| *c != client);
                }
                Ok(SqlReply::Deleted { count })
            }
        }
    }

    /// The rows that hold by the recipes' rules (the workload's semaphores have 2 permits),
    /// each with its id and client.
    pub fn heads(&self, now: Instant) -> Vec<(String, i64, Option<ClientId>)> {
        let t = self.server_now(now);
        let keys: HashSet<String> = self.rows.values().map(|r| r.lock_key.clone()).collect();
        let mut out = Vec::new();
        for key in keys {
            let live = self.live(now, &key);
            let entries: Vec<EntryRow> = live.iter().map(|r| self.entry(r, t)).collect();
            for r in &live {
                if let Place::Holds(_) = place(r.kind, r.permits, &entries, &r.owner) {
                    out.push((format!("{key}#{}", r.id), r.id, Some(r.client)));
                }
            }
        }
        out.sort();
        out
    }
}

impl Model for SimSql {
    type Backend = SqlBackend;
    type Request = SqlRequest;
    type Answer = SqlResult;
    type Push = SqlNotice;
    type Outcome = Done;

    fn engine(&self, rng: SeededRandom) -> LockEngine<SqlBackend> {
        let config = SqlConfig { schema: self.schema.clone(), notify_check: self.notify_check, label: "sim".into() };
        LockEngine::with_backend(SqlBackend::new(config), Box::new(rng))
    }

    fn has_session(&self) -> bool {
        self.pg()
    }

    fn request_id(req: &SqlRequest) -> RequestId {
        req.id
    }

    fn route(&self, req: &SqlRequest) -> Conn {
        match req.op {
            SqlOp::Listen => Conn::Session,
            _ => Conn::Server(0),
        }
    }

    fn serve(
        &mut self,
        now: Instant,
        client: ClientId,
        _crashed: bool,
        req: SqlRequest,
        pushes: &mut Vec<(ClientId, SqlNotice)>,
    ) -> Result<SqlResult, Error> {
        Ok(self.perform(now, client, &req.op, pushes))
    }

    fn notify(engine: &mut LockEngine<SqlBackend>, now: Instant, push: &SqlNotice) {
        engine.handle_notice(now, push.clone());
    }

    /// A database restart keeps every row and the id counter (durable); connections go, with
    /// their named locks and `LISTEN`s.
    fn restart(&mut self, _server: usize, _now: Instant, _drop_connections: bool, clock_jump: Duration) {
        self.stats.restarts += 1;
        self.doorbells.clear();
        self.listeners.clear();
        self.clock_ahead += clock_jump;
    }

    fn client_crashed(&mut self, client: ClientId) {
        self.doorbells.retain(|_, c| *c != client);
        self.listeners.remove(&client);
    }

    fn session_dropped(&mut self, client: ClientId) {
        self.listeners.remove(&client);
    }

    fn belief_key(&self, name: &str, primitive: &Primitive) -> String {
        match primitive {
            Primitive::Mutex => format!("mutex:{name}"),
            Primitive::Read { .. } | Primitive::Write => format!("rw:{name}"),
            Primitive::Semaphore { permits } => format!("sem{permits}:{name}"),
            Primitive::Leader { .. } => format!("leader:{name}"),
        }
    }

    /// A read-write lock's grant is shared if its row is a reader's, a semaphore's shared up to
    /// its permits; everything else exclusive.
    fn hold_mode(&self, key: &str, fence: Option<u64>) -> (char, u64) {
        if let Some(permits) = key.strip_prefix("sem").and_then(|k| k.split(':').next()).and_then(|n| n.parse().ok()) {
            return ('r', permits);
        }
        if key.starts_with("rw:") && fence.is_some_and(|f| self.readers.contains(&(f as i64))) {
            return ('r', 0);
        }
        ('w', 0)
    }

    /// The rows still live (an expired row is dead whether or not an acquire reaped it yet).
    fn lock_state_left(&mut self, now: Instant) -> Vec<String> {
        let t = self.server_now(now);
        self.rows.values().filter(|r| r.expires > t).map(|r| format!("{}#{} ({})", r.lock_key, r.id, r.owner)).collect()
    }
}

/// A transport failure of the harness (a lost request or reply) reads as a lost connection.
impl WireReply<SqlResult> for SqlResult {
    fn from_sim(result: Result<SqlResult, Error>) -> SqlResult {
        result.unwrap_or_else(|e| Err(SqlFailure::ConnectionLost(e.to_string())))
    }
}

/// What only the SQL model offers.
impl Sim<SimSql> {
    /// A SQL simulation of `dialect`, with `net`'s latencies and losses.
    pub fn sql(dialect: Dialect, seed: u64, net: super::NetConfig) -> SqlSim {
        Sim::with_model(SimSql::new(dialect), seed, net)
    }
}
