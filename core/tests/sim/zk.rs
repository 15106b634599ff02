//! The ZooKeeper model: an ensemble serving the real wire types of `core/src/backend/zookeeper/request.rs`
//! ([`ZkOp`] in, [`ZkResult`] back, [`ZkNotice`] pushed), driving `LockEngine<ZooKeeperBackend>`
//! (`tests/simulation_zk.rs`).
//!
//! What it models, and how:
//! - **A znode tree** per member: paths, data, [`Stat`] (czxid, mzxid, version, cversion,
//!   ephemeral owner, children), ephemeral-sequential names (the parent's `cversion` as 10
//!   digits, as ZooKeeper's `PrepRequestProcessor` does), containers (reaped by the leader
//!   every `container_check` once they had a child and have none left: ZooKeeper's
//!   `ContainerManager`), missing parents created as containers by a create.
//! - **One zxid counter** at the leader: every transaction (a create, a delete, a session open
//!   or close) takes the next; a leader failover starts a new epoch (`epoch << 32`), so zxids
//!   only grow, across failovers too.
//! - **Members and a leader**: writes (`Create`, `Delete`, `Check`) run at the leader, which
//!   is always up to date; each follower applies the leader's log after a lag
//!   (`follower_lag`), so reads (`Children`, `Exists`, `GetData`) served by a follower may be
//!   stale. A client connected to a follower sees its own writes (the follower answers a write
//!   once it has applied it) and never connects to a member behind the last zxid it saw
//!   (ZooKeeper refuses such a connection).
//! - **One-shot watches** set by reads fire when the member the client is connected to
//!   applies the change ([`ZkNotice::Watch`]); a dropped connection keeps them client-side and
//!   the reconnect re-sets them against the last zxid the client saw, firing those that
//!   changed meanwhile (ZooKeeper's `SetWatches`).
//! - **Sessions** with the negotiated timeout (clamped to 2..20 ticks). The leader expires a
//!   session `timeout` after it last heard from the client; expiry is one transaction that
//!   deletes every ephemeral node of the session, and the member the client is connected to
//!   closes its connection when it applies it (a lagging follower serves the expired session's
//!   reads until then; writes and `Check` go through the leader and fail). *Heartbeats:* every request that reaches a
//!   member touches the session, and so does the client library's own ping, sent every
//!   `timeout / 3` on a live connection from when it connected (the real transports ping when
//!   idle; pinging on a fixed schedule means the last ping before a connection dies may be up
//!   to a third of the timeout old, the adversarial case). The leader learns of activity on a
//!   follower only from that follower's reports, every half tick (a request the follower
//!   forwards to the leader does not refresh the session there); a stopped follower never
//!   reports what it had not yet. The engine never sees pings: its leases can count only on
//!   its own requests' replies.
//! - **The client library's connection** (state in [`Link`]): on a drop it tells the engine
//!   `Disconnected` and fails every request sent on that connection with `ConnectionLoss`
//!   (also those sent while it is down); it reconnects after an outage (`reconnect`, now and
//!   then `long_outage`: a partition), to a member that has seen the client's last zxid, and
//!   says `Reconnected` if the session lived, else `Expired` (requests then fail with
//!   `SessionExpired` until an `OpenSession` opens a new session). As the native transport
//!   does, the first session opens when the client connects (here: its first request);
//!   `OpenSession` on a live session answers that session; while the connection is down it
//!   fails with `ConnectionLoss` at once (the native transport waits up to its connect timeout
//!   for the reconnect; the engine retries either way).
//! - **Faults**: a connection drops with `p_drop` at a request, half the time before the
//!   request ran (request lost) and half after (applied, reply lost: the create a backend must
//!   find again by its protected prefix); the tests add partitions, crashes, client pauses
//!   (SIGSTOP: no pings, nothing handled until it resumes), stopped followers (their clients'
//!   pings no longer reach the leader; each client gives the connection up after its read
//!   timeout, two thirds of the session timeout, and moves to another member, or carries on if
//!   the follower resumes first) and leader failovers (every connection drops, nothing is
//!   served during the election, the new leader restarts every session's timer, as
//!   ZooKeeper's does).
//!
//! Everything travels on the client's one connection to the ensemble (`Conn::Server(0)`, the
//! harness's own request/reply loss switched off: a TCP connection loses nothing without
//! dropping, which this model does itself); pushes come back on the harness's notify channel.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use lockgate_core::engine::{Done, LockEngine};
use lockgate_core::random::SeededRandom;
use lockgate_core::time::{Duration, Instant};
use lockgate_core::backend::zookeeper::{
    CreateMode, SessionEvent, Stat, WatchEvent, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkRequest, ZkResult,
};
use lockgate_core::backend::zookeeper::{ZkConfig, ZooKeeperBackend};
use lockgate_core::{Error, Primitive, RequestId};

use super::harness::Sim;
use super::model::{ClientId, Conn, Model, WireReply};
use super::net::Rng;

/// The simulator over the ZooKeeper ensemble model.
pub type ZkSim = Sim<SimZk>;

/// How the ensemble and the client libraries behave.
#[derive(Clone, Debug)]
pub struct EnsembleConfig {
    /// Members of the ensemble (1 for a single server).
    pub members: usize,
    /// The ensemble's tick: session timeouts are clamped to 2..20 ticks.
    pub tick: Duration,
    /// The session timeout clients ask for.
    pub session_timeout: Duration,
    /// How far behind the leader a follower applies each transaction (uniform).
    pub follower_lag: (Duration, Duration),
    /// Probability that the connection drops at a request (half before it ran, half after).
    pub p_drop: f64,
    /// How long the client library takes to reconnect after a drop (uniform).
    pub reconnect: (Duration, Duration),
    /// Probability that an outage is a long one (a partition), lasting `long_outage`.
    pub p_long_outage: f64,
    /// A long outage's length (uniform): may outlast the session.
    pub long_outage: (Duration, Duration),
    /// How often the leader reaps empty containers.
    pub container_check: Duration,
    /// The leader expires a silent session after this percentage of the timeout it granted:
    /// 100 is ZooKeeper; less breaks the promise sessions make (for the tests that show the
    /// checks catch what follows).
    pub expiry_pct: u32,
    /// The timeout `OpenSession` reports, if not the negotiated one: a transport that reports
    /// what it asked for rather than what the ensemble granted (for the tests that show the
    /// checks catch what follows).
    pub reported_timeout: Option<Duration>,
    /// Whether the client library sets its watches again after a reconnect (ZooKeeper's
    /// `SetWatches`, as the Java client does); without it they are gone, silently, and only the
    /// `Reconnected` notice says something may have been missed.
    pub rewatch: bool,
}

impl Default for EnsembleConfig {
    fn default() -> Self {
        EnsembleConfig {
            members: 3,
            tick: Duration::from_millis(50),
            session_timeout: Duration::from_millis(600),
            follower_lag: (Duration::ZERO, Duration::from_millis(20)),
            p_drop: 0.0,
            reconnect: (Duration::from_millis(1), Duration::from_millis(30)),
            p_long_outage: 0.0,
            long_outage: (Duration::from_millis(300), Duration::from_millis(1200)),
            container_check: Duration::from_millis(200),
            expiry_pct: 100,
            reported_timeout: None,
            rewatch: true,
        }
    }
}

impl EnsembleConfig {
    /// The timeout the ensemble grants for the one asked for.
    pub fn negotiated_timeout(&self) -> Duration {
        self.session_timeout.clamp(self.tick * 2, self.tick * 20)
    }
}

// ---- the tree ----

/// One znode.
#[derive(Clone, Debug)]
struct Znode {
    data: Vec<u8>,
    stat: Stat,
    /// The zxid of the last change of the child list (what `SetWatches` compares).
    pzxid: i64,
    children: BTreeSet<String>,
    container: bool,
}

/// One change of a transaction.
#[derive(Clone, Debug)]
enum Change {
    Create { path: String, data: Vec<u8>, owner: i64, container: bool },
    Delete { path: String },
}

/// One committed transaction.
#[derive(Clone, Debug)]
struct Txn {
    zxid: i64,
    changes: Vec<Change>,
    /// A session this transaction closes, and its client: each member closes the client's
    /// connection when it applies it (until then a follower still serves its reads).
    closes: Option<(i64, ClientId)>,
}

/// A kind of watch, as the client sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// `GetData`, or `Exists` on an existing node: fires on change or deletion.
    Data,
    /// `Exists` on a missing node: fires on creation.
    Exist,
    /// `Children`: fires on a child change or the node's deletion.
    Child,
}

/// What applying one change fired, by path: (path, the kinds it fires, the event).
type Fired = Vec<(String, &'static [Kind], WatchEvent)>;

/// One member's copy of the data.
#[derive(Clone, Debug)]
struct Member {
    nodes: BTreeMap<String, Znode>,
    /// How many transactions of the log it applied.
    applied: usize,
    /// The zxid of the last one.
    zxid: i64,
    /// When it applies each of the log's transactions from `applied` on.
    due: VecDeque<Instant>,
    /// Stopped (SIGSTOP) until then: it applies nothing and answers nobody.
    stopped_until: Option<Instant>,
}

impl Member {
    fn new() -> Member {
        let root = Znode { data: Vec::new(), stat: Stat::default(), pzxid: 0, children: BTreeSet::new(), container: false };
        Member { nodes: BTreeMap::from([("/".to_string(), root)]), applied: 0, zxid: 0, due: VecDeque::new(), stopped_until: None }
    }

    fn apply(&mut self, txn: &Txn) -> Fired {
        let mut fired = Vec::new();
        for change in &txn.changes {
            match change {
                Change::Create { path, data, owner, container } => {
                    let stat = Stat { czxid: txn.zxid, mzxid: txn.zxid, ephemeral_owner: *owner, ..Stat::default() };
                    let node = Znode { data: data.clone(), stat, pzxid: txn.zxid, children: BTreeSet::new(), container: *container };
                    self.nodes.insert(path.clone(), node);
                    let (parent, name) = split(path);
                    let p = self.nodes.get_mut(parent).expect("the leader checked the parent");
                    p.children.insert(name.to_string());
                    p.stat.cversion += 1;
                    p.stat.num_children = p.children.len() as i32;
                    p.pzxid = txn.zxid;
                    fired.push((path.clone(), &[Kind::Exist, Kind::Data][..], WatchEvent::Created));
                    fired.push((parent.to_string(), &[Kind::Child][..], WatchEvent::ChildrenChanged));
                }
                Change::Delete { path } => {
                    self.nodes.remove(path);
                    let (parent, name) = split(path);
                    let p = self.nodes.get_mut(parent).expect("a node's parent outlives it");
                    p.children.remove(name);
                    p.stat.cversion += 1;
                    p.stat.num_children = p.children.len() as i32;
                    p.pzxid = txn.zxid;
                    fired.push((path.clone(), &[Kind::Data, Kind::Exist, Kind::Child][..], WatchEvent::Deleted));
                    fired.push((parent.to_string(), &[Kind::Child][..], WatchEvent::ChildrenChanged));
                }
            }
        }
        self.applied += 1;
        self.zxid = txn.zxid;
        fired
    }
}

/// `/a/b` → (`/a`, `b`); `/a` → (`/`, `a`).
fn split(path: &str) -> (&str, &str) {
    let i = path.rfind('/').expect("absolute path");
    (if i == 0 { "/" } else { &path[..i] }, &path[i + 1..])
}

fn join(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// ZooKeeper's path rules, the ones a recipe could break: absolute, no empty segment, no
/// trailing slash (the root aside).
fn valid_path(path: &str) -> bool {
    path == "/" || (path.starts_with('/') && !path.ends_with('/') && !path.contains("//"))
}

// ---- sessions and connections ----

/// A session as the leader tracks it.
#[derive(Clone, Debug)]
struct Session {
    client: ClientId,
    timeout: Duration,
    /// When the leader last heard from the client (a request or a ping).
    heard: Instant,
}

/// Where a client library's connection is.
#[derive(Clone, Debug, PartialEq)]
enum LinkState {
    /// No usable session: none opened yet (`expired` false) or the library learned that it
    /// expired (requests fail with `SessionExpired` until `OpenSession`).
    Closed { expired: bool },
    /// Connected to `member` since `since` (the ping schedule counts from then).
    Up { member: usize, since: Instant },
    /// Dropped; the library tries again at `retry_at`.
    Down { retry_at: Instant },
}

/// One client library: its session, connection and the watches it keeps.
#[derive(Clone, Debug)]
struct Link {
    session: Option<i64>,
    state: LinkState,
    /// Bumped whenever the connection changes: a request sent on an older one dies with it.
    gen: u64,
    /// The last zxid the client saw in a reply.
    last_zxid: i64,
    watches: BTreeSet<(String, Kind)>,
    /// Stopped (SIGSTOP) until then: no pings, no reconnects.
    paused_until: Option<Instant>,
    /// The member it is connected to stopped answering: the library gives the connection up
    /// then (its read timeout, two thirds of the session timeout), unless the member resumes.
    stalled_at: Option<Instant>,
    crashed: bool,
}

impl Default for Link {
    fn default() -> Self {
        Link {
            session: None,
            state: LinkState::Closed { expired: false },
            gen: 0,
            last_zxid: 0,
            watches: BTreeSet::new(),
            paused_until: None,
            stalled_at: None,
            crashed: false,
        }
    }
}

/// What happened, for tests that want a fault to have been exercised.
#[derive(Clone, Debug, Default)]
pub struct ZkStats {
    pub sessions_opened: usize,
    pub sessions_expired: usize,
    /// Connection drops at a request, and those after the request ran (reply lost).
    pub drops: usize,
    pub applied_then_dropped: usize,
    /// Creates applied whose reply was lost.
    pub lost_create_replies: usize,
    pub reconnects: usize,
    /// Connections given up because their member stopped answering.
    pub stalls: usize,
    pub failovers: usize,
    /// Reads a follower answered from behind the leader.
    pub stale_reads: usize,
    pub watches_fired: usize,
    pub containers_reaped: usize,
}

/// The ensemble and every client library's connection to it.
pub struct SimZk {
    pub cfg: EnsembleConfig,
    rng: Rng,
    log: Vec<Txn>,
    members: Vec<Member>,
    leader: usize,
    epoch: i64,
    counter: i64,
    /// No leader until then (an election): nothing is served, nothing expires.
    election_until: Option<Instant>,
    sessions: BTreeMap<i64, Session>,
    next_session: i64,
    links: Vec<Link>,
    /// The link generation each request was sent on.
    sent_on: HashMap<(ClientId, RequestId), u64>,
    /// Every node ever created, by czxid: (path, owning client) (what a fencing token was).
    pub created: HashMap<i64, (String, Option<ClientId>)>,
    next_reap: Instant,
    /// Touches of sessions that followers will report to the leader: (when, follower,
    /// session). A follower tells the leader of its clients' activity every half tick.
    reports: Vec<(Instant, usize, i64)>,
    /// Clients whose next create is applied and then loses its reply with the connection.
    pub drop_after_create: BTreeSet<ClientId>,
    pub stats: ZkStats,
}

impl SimZk {
    pub fn new(cfg: EnsembleConfig, seed: u64) -> SimZk {
        assert!(cfg.members >= 1);
        let members = vec![Member::new(); cfg.members];
        SimZk {
            rng: Rng::new(seed ^ 0x2007),
            log: Vec::new(),
            members,
            leader: 0,
            epoch: 1,
            counter: 0,
            election_until: None,
            sessions: BTreeMap::new(),
            next_session: 0x1_0000,
            links: Vec::new(),
            sent_on: HashMap::new(),
            created: HashMap::new(),
            next_reap: Instant::from_origin(Duration::from_secs(1)) + cfg.container_check,
            reports: Vec::new(),
            drop_after_create: BTreeSet::new(),
            stats: ZkStats::default(),
            cfg,
        }
    }

    fn link(&mut self, c: ClientId) -> &mut Link {
        if self.links.len() <= c {
            self.links.resize_with(c + 1, Link::default);
        }
        &mut self.links[c]
    }

    /// When the leader expires session `s` if it stays silent.
    fn deadline(&self, s: &Session) -> Instant {
        s.heard + s.timeout * self.cfg.expiry_pct / 100
    }

    fn ping_interval(timeout: Duration) -> Duration {
        timeout / 3
    }

    /// Whether the client library pings: connected, running.
    fn live(&self, c: ClientId, now: Instant) -> bool {
        let l = &self.links[c];
        matches!(l.state, LinkState::Up { .. })
            && !l.crashed
            && l.stalled_at.is_none()
            && l.paused_until.is_none_or(|u| u <= now)
    }

    /// When the leader learns of activity at `t` on a follower: at the follower's next report
    /// (every half tick).
    fn report_at(&self, t: Instant) -> Instant {
        let half = (self.cfg.tick / 2).as_nanos().max(1);
        let at = t.since_origin().as_nanos().div_ceil(half) * half;
        Instant::from_origin(Duration::from_nanos(at as u64))
    }

    /// The member client `c` is connected to, if it is a follower (whose activity the leader
    /// learns only from that follower's reports).
    fn follower_of(&self, c: ClientId) -> Option<usize> {
        match self.links.get(c)?.state {
            LinkState::Up { member, .. } if member != self.leader => Some(member),
            _ => None,
        }
    }

    /// The last ping the live connection of session `id` sent by `now`, and when the leader
    /// learns of it (at once, or at its follower's report).
    fn last_ping(&self, id: i64, now: Instant) -> Option<(Instant, Instant)> {
        let s = &self.sessions[&id];
        let l = self.links.get(s.client)?;
        if l.session != Some(id) || !self.live(s.client, now) {
            return None;
        }
        let LinkState::Up { since, .. } = l.state else { unreachable!("live") };
        let every = Self::ping_interval(s.timeout);
        let n = now.saturating_duration_since(since).as_nanos() / every.as_nanos().max(1);
        let ping = since + every * n as u32;
        let known = if self.follower_of(s.client).is_some() { self.report_at(ping) } else { ping };
        Some((ping, known))
    }

    /// What the leader knows at `now` of session `id`'s last activity: its stored instant, or
    /// the last ping of its live connection that reached the leader.
    fn heard(&self, id: i64, now: Instant) -> Instant {
        let s = &self.sessions[&id];
        match self.last_ping(id, now) {
            Some((_, known)) if known <= now => s.heard.max(known),
            Some((ping, _)) => {
                // The last ping is not reported yet: the one before it is.
                let every = Self::ping_interval(s.timeout);
                let LinkState::Up { since, .. } = self.links[s.client].state else { unreachable!("live") };
                if ping >= since + every {
                    s.heard.max(self.report_at(ping - every))
                } else {
                    s.heard
                }
            }
            None => s.heard,
        }
    }

    /// The client's pings stop now (a drop, a pause, a crash): what the leader learned of them
    /// stays; with `reported`, a ping its follower has not reported yet still will be (not if
    /// that follower is what stopped).
    fn freeze_pings(&mut self, c: ClientId, now: Instant) {
        self.freeze(c, now, true);
    }

    fn freeze(&mut self, c: ClientId, now: Instant, reported: bool) {
        if let Some(id) = self.links.get(c).and_then(|l| l.session) {
            if self.sessions.contains_key(&id) {
                let heard = self.heard(id, now);
                let pending = self.last_ping(id, now).filter(|&(_, known)| known > now);
                if let (true, Some((_, known)), Some(m)) = (reported, pending, self.follower_of(c)) {
                    self.reports.push((known, m, id));
                }
                self.sessions.get_mut(&id).expect("checked").heard = heard;
            }
        }
    }

    /// Client `c`'s request or ping reaches its member now: the leader learns of it at once if
    /// that is the leader, else at the follower's next report. (A request the follower forwards
    /// to the leader does not refresh the session there.)
    fn touch(&mut self, c: ClientId, now: Instant) {
        if let Some(id) = self.links[c].session.filter(|id| self.sessions.contains_key(id)) {
            match self.follower_of(c) {
                Some(m) => {
                    let at = self.report_at(now);
                    self.reports.push((at, m, id));
                }
                None => {
                    let s = self.sessions.get_mut(&id).expect("checked");
                    s.heard = s.heard.max(now);
                }
            }
        }
    }

    /// Followers' reports due by `now` reach the leader (a stopped follower's never do).
    fn take_reports(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.reports.len() {
            let (at, m, id) = self.reports[i];
            if at <= now {
                self.reports.swap_remove(i);
                if self.members[m].stopped_until.is_none() {
                    if let Some(s) = self.sessions.get_mut(&id) {
                        s.heard = s.heard.max(at);
                    }
                }
            } else {
                i += 1;
            }
        }
    }

    fn next_zxid(&mut self) -> i64 {
        self.counter += 1;
        (self.epoch << 32) | self.counter
    }

    /// Commits a transaction at the leader (applied there at once) and schedules it on every
    /// follower.
    fn commit(&mut self, now: Instant, changes: Vec<Change>, pushes: &mut Vec<(ClientId, ZkNotice)>) -> i64 {
        self.commit_txn(now, changes, None, pushes)
    }

    fn commit_txn(
        &mut self,
        now: Instant,
        changes: Vec<Change>,
        closes: Option<(i64, ClientId)>,
        pushes: &mut Vec<(ClientId, ZkNotice)>,
    ) -> i64 {
        let zxid = self.next_zxid();
        for ch in &changes {
            if let Change::Create { path, owner, .. } = ch {
                let client = self.sessions.get(owner).map(|s| s.client);
                self.created.insert(zxid, (path.clone(), client));
            }
        }
        self.log.push(Txn { zxid, changes, closes });
        for m in 0..self.members.len() {
            let at = if m == self.leader {
                now
            } else {
                let lag = self.rng.duration(self.cfg.follower_lag);
                let last = self.members[m].due.back().copied().unwrap_or(now);
                last.max(now + lag)
            };
            self.members[m].due.push_back(at);
        }
        self.catch_up(self.leader, self.log.len(), now, pushes);
        zxid
    }

    /// Member `m` applies the log up to (not including) index `upto`, firing the watches of
    /// the clients connected to it.
    fn catch_up(&mut self, m: usize, upto: usize, now: Instant, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        while self.members[m].applied < upto {
            let txn = self.log[self.members[m].applied].clone();
            self.members[m].due.pop_front();
            let fired = self.members[m].apply(&txn);
            self.fire(m, &fired, pushes);
            if let Some((id, c)) = txn.closes {
                let here = matches!(self.links[c].state, LinkState::Up { member, .. } if member == m);
                if here && self.links[c].session == Some(id) {
                    self.drop_link(c, now, pushes);
                }
            }
        }
    }

    /// Applies whatever each member has due by `now`.
    fn advance(&mut self, now: Instant, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        for m in 0..self.members.len() {
            if self.members[m].stopped_until.is_some() {
                continue;
            }
            let mut upto = self.members[m].applied;
            for at in &self.members[m].due {
                if *at > now {
                    break;
                }
                upto += 1;
            }
            self.catch_up(m, upto, now, pushes);
        }
    }

    /// Fires the watches set through member `m` that `fired` matches.
    fn fire(&mut self, m: usize, fired: &Fired, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        for c in 0..self.links.len() {
            if !matches!(self.links[c].state, LinkState::Up { member, .. } if member == m) {
                continue;
            }
            for (path, kinds, event) in fired {
                let mut hit = false;
                for kind in kinds.iter() {
                    hit |= self.links[c].watches.remove(&(path.clone(), *kind));
                }
                if hit {
                    self.stats.watches_fired += 1;
                    pushes.push((c, ZkNotice::Watch { path: path.clone(), event: *event }));
                }
            }
        }
    }

    /// The connection of `c` drops now: the library says so and reconnects after an outage.
    fn drop_link(&mut self, c: ClientId, now: Instant, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        if !matches!(self.links[c].state, LinkState::Up { .. }) {
            return;
        }
        self.freeze_pings(c, now);
        let outage = if self.rng.chance(self.cfg.p_long_outage) {
            self.rng.duration(self.cfg.long_outage)
        } else {
            self.rng.duration(self.cfg.reconnect)
        };
        let mut retry_at = now + outage;
        if let Some(until) = self.links[c].paused_until {
            retry_at = retry_at.max(until);
        }
        if let Some(until) = self.election_until {
            retry_at = retry_at.max(until);
        }
        let l = &mut self.links[c];
        l.state = LinkState::Down { retry_at };
        l.stalled_at = None;
        l.gen += 1;
        pushes.push((c, ZkNotice::Session(SessionEvent::Disconnected)));
    }

    /// The library of `c` tries to reconnect now.
    fn reconnect(&mut self, c: ClientId, now: Instant, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        if let Some(until) = self.election_until {
            self.links[c].state = LinkState::Down { retry_at: until + self.rng.duration(self.cfg.reconnect) };
            return;
        }
        let alive = self.links[c].session.filter(|id| self.sessions.contains_key(id));
        let Some(id) = alive else {
            let l = &mut self.links[c];
            l.state = LinkState::Closed { expired: true };
            l.gen += 1;
            l.watches.clear();
            pushes.push((c, ZkNotice::Session(SessionEvent::Expired)));
            return;
        };
        // A member that has seen what the client saw (the leader always has).
        let last = self.links[c].last_zxid;
        let fit: Vec<usize> = (0..self.members.len())
            .filter(|&m| self.members[m].zxid >= last && self.members[m].stopped_until.is_none())
            .collect();
        let member = *self.rng.pick(&fit);
        self.stats.reconnects += 1;
        let l = &mut self.links[c];
        l.state = LinkState::Up { member, since: now };
        l.gen += 1;
        self.sessions.get_mut(&id).expect("alive").heard = now;
        pushes.push((c, ZkNotice::Session(SessionEvent::Reconnected)));
        if self.cfg.rewatch {
            self.set_watches(c, member, pushes);
        } else {
            self.links[c].watches.clear();
        }
    }

    /// `SetWatches` after a reconnect: the watches whose node changed after the client's last
    /// zxid fire now; the others are set again on the new member.
    fn set_watches(&mut self, c: ClientId, m: usize, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        let last = self.links[c].last_zxid;
        let watches: Vec<(String, Kind)> = self.links[c].watches.iter().cloned().collect();
        for (path, kind) in watches {
            let node = self.members[m].nodes.get(&path);
            let event = match (kind, node) {
                (Kind::Exist, Some(_)) => Some(WatchEvent::Created),
                (Kind::Data | Kind::Child, None) => Some(WatchEvent::Deleted),
                (Kind::Data, Some(n)) if n.stat.mzxid > last => Some(WatchEvent::DataChanged),
                (Kind::Child, Some(n)) if n.pzxid > last => Some(WatchEvent::ChildrenChanged),
                _ => None,
            };
            if let Some(event) = event {
                self.links[c].watches.remove(&(path.clone(), kind));
                self.stats.watches_fired += 1;
                pushes.push((c, ZkNotice::Watch { path, event }));
            }
        }
    }

    /// The leader expires session `id`: one transaction deletes its ephemeral nodes; a
    /// connection still open for it is closed.
    fn expire(&mut self, id: i64, now: Instant, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        let Some(s) = self.sessions.remove(&id) else {
            return;
        };
        self.stats.sessions_expired += 1;
        let leader = &self.members[self.leader];
        let mut doomed: Vec<String> =
            leader.nodes.iter().filter(|(_, n)| n.stat.ephemeral_owner == id).map(|(p, _)| p.clone()).collect();
        // Children before parents (ephemerals have none, but keep the order safe).
        doomed.sort_by_key(|p| std::cmp::Reverse(p.len()));
        let changes = doomed.into_iter().map(|path| Change::Delete { path }).collect();
        self.commit_txn(now, changes, Some((id, s.client)), pushes);
    }

    /// A write at the leader for client `c`: refused if its session is gone.
    fn session_of(&self, c: ClientId) -> Result<i64, ZkFailure> {
        self.links[c].session.filter(|id| self.sessions.contains_key(id)).ok_or(ZkFailure::SessionExpired)
    }

    fn create(&mut self, now: Instant, c: ClientId, path: String, data: Vec<u8>, mode: CreateMode, pushes: &mut Vec<(ClientId, ZkNotice)>) -> ZkResult {
        let session = self.session_of(c)?;
        if !valid_path(&path) || path == "/" {
            return Err(ZkFailure::Other(Error::invalid(format!("bad path {path:?}"))));
        }
        // Missing parents first, as containers, each its own transaction.
        let parent = split(&path).0.to_string();
        let mut missing = Vec::new();
        let mut p = parent.clone();
        while !self.members[self.leader].nodes.contains_key(&p) {
            missing.push(p.clone());
            p = split(&p).0.to_string();
        }
        if let Some(n) = self.members[self.leader].nodes.get(&p) {
            if n.stat.ephemeral_owner != 0 {
                return Err(ZkFailure::Other(Error::protocol(format!("{p} is ephemeral: it cannot have children"))));
            }
        }
        for dir in missing.into_iter().rev() {
            self.commit(now, vec![Change::Create { path: dir, data: Vec::new(), owner: 0, container: true }], pushes);
        }
        let leader = &self.members[self.leader];
        let parent_node = &leader.nodes[&parent];
        if parent_node.stat.ephemeral_owner != 0 {
            return Err(ZkFailure::Other(Error::protocol(format!("{parent} is ephemeral: it cannot have children"))));
        }
        let path = match mode {
            CreateMode::EphemeralSequential => format!("{path}{:010}", parent_node.stat.cversion),
            _ => path,
        };
        if leader.nodes.contains_key(&path) {
            return Err(ZkFailure::NodeExists);
        }
        let owner = match mode {
            CreateMode::Ephemeral | CreateMode::EphemeralSequential => session,
            _ => 0,
        };
        let container = mode == CreateMode::Container;
        let change = Change::Create { path: path.clone(), data, owner, container };
        self.commit(now, vec![change], pushes);
        let stat = self.members[self.leader].nodes[&path].stat;
        Ok(ZkReply::Created { path, stat })
    }

    fn delete(&mut self, now: Instant, c: ClientId, path: String, version: Option<i32>, pushes: &mut Vec<(ClientId, ZkNotice)>) -> ZkResult {
        self.session_of(c)?;
        let Some(n) = self.members[self.leader].nodes.get(&path).filter(|_| path != "/") else {
            return Err(ZkFailure::NoNode);
        };
        if version.is_some_and(|v| v != n.stat.version) {
            return Err(ZkFailure::BadVersion);
        }
        if !n.children.is_empty() {
            return Err(ZkFailure::NotEmpty);
        }
        self.commit(now, vec![Change::Delete { path }], pushes);
        Ok(ZkReply::Deleted)
    }

    fn check(&mut self, c: ClientId, path: &str, version: Option<i32>) -> ZkResult {
        self.session_of(c)?;
        match self.members[self.leader].nodes.get(path) {
            None => Err(ZkFailure::NoNode),
            Some(n) if version.is_some_and(|v| v != n.stat.version) => Err(ZkFailure::BadVersion),
            Some(_) => Ok(ZkReply::Checked),
        }
    }

    /// A read served by member `m` (the one the client is connected to), setting a watch.
    fn read(&mut self, c: ClientId, m: usize, op: ZkOp) -> ZkResult {
        if self.members[m].applied < self.log.len() {
            self.stats.stale_reads += 1;
        }
        let nodes = &self.members[m].nodes;
        let (result, watch) = match op {
            ZkOp::Children { path, watch } => match nodes.get(&path) {
                None => (Err(ZkFailure::NoNode), None),
                Some(n) => {
                    // "Unsorted": a recipe must sort them itself.
                    let mut names: Vec<String> = n.children.iter().cloned().collect();
                    for i in (1..names.len()).rev() {
                        let j = self.rng.between(0, i as u64) as usize;
                        names.swap(i, j);
                    }
                    (Ok(ZkReply::Children(names)), watch.then_some((path, Kind::Child)))
                }
            },
            ZkOp::Exists { path, watch } => match nodes.get(&path) {
                None => (Ok(ZkReply::Exists(None)), watch.then_some((path, Kind::Exist))),
                Some(n) => (Ok(ZkReply::Exists(Some(n.stat))), watch.then_some((path, Kind::Data))),
            },
            ZkOp::GetData { path, watch } => match nodes.get(&path) {
                None => (Err(ZkFailure::NoNode), None),
                Some(n) => (Ok(ZkReply::Data(n.data.clone(), n.stat)), watch.then_some((path, Kind::Data))),
            },
            other => unreachable!("not a read: {other:?}"),
        };
        if let Some(w) = watch {
            self.links[c].watches.insert(w);
        }
        result
    }

    /// Runs `op` for client `c`, connected to member `m`.
    fn perform(&mut self, now: Instant, c: ClientId, m: usize, op: ZkOp, pushes: &mut Vec<(ClientId, ZkNotice)>) -> ZkResult {
        self.touch(c, now);
        let result = match op {
            ZkOp::Create { path, data, mode } => self.create(now, c, path, data, mode, pushes),
            ZkOp::Delete { path, version } => self.delete(now, c, path, version, pushes),
            ZkOp::Check { path, version } => self.check(c, &path, version),
            read @ (ZkOp::Children { .. } | ZkOp::Exists { .. } | ZkOp::GetData { .. }) => {
                let r = self.read(c, m, read);
                self.links[c].last_zxid = self.links[c].last_zxid.max(self.members[m].zxid);
                return r;
            }
            ZkOp::OpenSession | ZkOp::CloseSession => unreachable!("handled by open_session"),
        };
        // A follower answers a write once it applied it (and all before it): the client reads
        // its own writes there.
        let upto = self.log.len();
        self.catch_up(m, upto, now, pushes);
        self.links[c].last_zxid = self.links[c].last_zxid.max(self.members[m].zxid);
        result
    }

    fn open_session(&mut self, now: Instant, c: ClientId, pushes: &mut Vec<(ClientId, ZkNotice)>) -> ZkResult {
        if self.election_until.is_some() {
            return Err(ZkFailure::ConnectionLoss("no leader: the ensemble is electing one".into()));
        }
        let timeout = self.cfg.negotiated_timeout();
        match self.links[c].state {
            LinkState::Up { .. } => {
                if let Some(id) = self.links[c].session.filter(|id| self.sessions.contains_key(id)) {
                    self.touch(c, now);
                    let timeout = self.cfg.reported_timeout.unwrap_or(self.sessions[&id].timeout);
                    return Ok(ZkReply::Session { id, timeout });
                }
                // Up on a session the leader expired without closing the connection cannot
                // happen (expiry drops the connection); fall through to a new session.
            }
            LinkState::Down { .. } => {
                return Err(ZkFailure::ConnectionLoss("reconnecting".into()));
            }
            LinkState::Closed { .. } => {}
        }
        let id = self.next_session;
        self.next_session += 1;
        self.sessions.insert(id, Session { client: c, timeout, heard: now });
        self.stats.sessions_opened += 1;
        // createSession is a transaction too.
        self.commit(now, Vec::new(), pushes);
        let running: Vec<usize> = (0..self.members.len()).filter(|&m| self.members[m].stopped_until.is_none()).collect();
        let member = *self.rng.pick(&running);
        let upto = self.log.len();
        self.catch_up(member, upto, now, pushes);
        let l = &mut self.links[c];
        l.session = Some(id);
        l.state = LinkState::Up { member, since: now };
        l.gen += 1;
        l.watches.clear();
        l.last_zxid = l.last_zxid.max(self.members[member].zxid);
        Ok(ZkReply::Session { id, timeout: self.cfg.reported_timeout.unwrap_or(timeout) })
    }

    // ---- faults the tests inject ----

    /// The connection of `c` drops now (a network blip, or with a long `outage` a partition).
    pub fn drop_connection(&mut self, c: ClientId, now: Instant, outage: Option<Duration>, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        self.link(c);
        self.drop_link(c, now, pushes);
        if let (Some(d), LinkState::Down { retry_at }) = (outage, &mut self.links[c].state) {
            *retry_at = now + d;
        }
    }

    /// The leader fails: every connection drops, nothing is served for `election`, then a
    /// follower leads, caught up with every committed transaction, in a new epoch; every
    /// session's timer restarts.
    pub fn fail_leader(&mut self, now: Instant, election: Duration, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        self.stats.failovers += 1;
        for c in 0..self.links.len() {
            self.drop_link(c, now, pushes);
        }
        // The new leader restarts every session's timer at the election's end anyway.
        self.reports.clear();
        let until = now + election;
        self.election_until = Some(until);
        for c in 0..self.links.len() {
            if let LinkState::Down { retry_at } = &mut self.links[c].state {
                *retry_at = (*retry_at).max(until);
            }
        }
        let upto = self.log.len();
        for m in 0..self.members.len() {
            self.catch_up(m, upto, now, pushes);
        }
        if self.members.len() > 1 {
            let others: Vec<usize> =
                (0..self.members.len()).filter(|&m| m != self.leader && self.members[m].stopped_until.is_none()).collect();
            self.leader = *self.rng.pick(&others);
        }
        self.epoch += 1;
        self.counter = 0;
    }

    /// Member `m` (a follower) stops (SIGSTOP) until `until`: it applies and answers nothing;
    /// the clients connected to it are silent to the leader and give the connection up after
    /// their read timeout (then reconnect to another member) unless it resumes first.
    pub fn stop_member(&mut self, m: usize, now: Instant, until: Instant) {
        assert_ne!(m, self.leader, "a stopped leader is a failover: use fail_leader");
        self.take_reports(now);
        // What it has not reported yet, the leader never learns.
        self.reports.retain(|r| r.1 != m);
        self.members[m].stopped_until = Some(until);
        let give_up = now + self.cfg.negotiated_timeout() * 2 / 3;
        for c in 0..self.links.len() {
            if matches!(self.links[c].state, LinkState::Up { member, .. } if member == m) {
                self.freeze(c, now, false);
                self.links[c].stalled_at = Some(give_up);
            }
        }
    }

    /// The leader, and the followers (members that may be stopped).
    pub fn leader(&self) -> usize {
        self.leader
    }

    /// The client process stops (SIGSTOP) until `until`: its library sends no pings.
    pub fn pause(&mut self, c: ClientId, now: Instant, until: Instant) {
        self.link(c);
        self.freeze_pings(c, now);
        self.links[c].paused_until = Some(until);
    }

    /// The paused client runs again: if it was stopped longer than its library's read timeout
    /// (two thirds of the session timeout) the library drops the connection and reconnects.
    fn resume(&mut self, c: ClientId, now: Instant, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        let Some(until) = self.links[c].paused_until.take() else {
            return;
        };
        let _ = until;
        if let LinkState::Up { member, .. } = self.links[c].state {
            let timeout = self.cfg.negotiated_timeout();
            let since_heard = self.links[c]
                .session
                .and_then(|id| self.sessions.get(&id))
                .map_or(Duration::MAX, |s| now.saturating_duration_since(s.heard));
            if since_heard > timeout * 2 / 3 {
                self.drop_link(c, now, pushes);
            } else {
                // Pings resume on the same connection.
                self.links[c].state = LinkState::Up { member, since: now };
                self.touch(c, now);
            }
        }
    }

    // ---- what the tests read ----

    /// Every node on the leader (the root aside), as `path (owner session)`.
    pub fn nodes(&self) -> Vec<String> {
        self.members[self.leader]
            .nodes
            .iter()
            .filter(|(p, _)| p.as_str() != "/")
            .map(|(p, n)| match n.stat.ephemeral_owner {
                0 if n.container => format!("{p} (container)"),
                0 => p.clone(),
                owner => format!("{p} (session {owner:#x})"),
            })
            .collect()
    }

    /// The ephemeral nodes of live sessions whose client did not crash, as `path (client)`:
    /// once every engine is idle there must be none (a node nobody knows it holds blocks the
    /// queue for as long as its session lives, which is forever for a live client).
    pub fn orphans(&self) -> Vec<String> {
        self.members[self.leader]
            .nodes
            .iter()
            .filter_map(|(p, n)| {
                let s = self.sessions.get(&n.stat.ephemeral_owner)?;
                let crashed = self.links.get(s.client).is_some_and(|l| l.crashed);
                (!crashed).then(|| format!("{p} (client {})", s.client))
            })
            .collect()
    }

    /// The nodes that hold by the recipes' rules, of every mutex, election and read-write lock
    /// (under `/lockgate/mutex/*`, `/lockgate/election/*`, `/lockgate/rw/*`): the child with the
    /// lowest sequence, or for a read-write lock every reader (`__READ__`) before the first
    /// writer. Each as (its path, czxid, and its owner if that client runs, is connected and has
    /// the session: one that should know it holds).
    pub fn heads(&self, now: Instant) -> Vec<(String, i64, Option<ClientId>)> {
        let nodes = &self.members[self.leader].nodes;
        let seq = |name: &String| name.get(name.len().saturating_sub(10)..).and_then(|d| d.parse::<i64>().ok());
        let mut out = Vec::new();
        for (dir, n) in nodes {
            let exclusive = dir.starts_with("/lockgate/mutex/") || dir.starts_with("/lockgate/election/");
            let rw = dir.starts_with("/lockgate/rw/");
            if !(exclusive || rw) {
                continue;
            }
            let mut queue: Vec<&String> = n.children.iter().filter(|c| seq(c).is_some()).collect();
            queue.sort_by_key(|c| seq(c));
            let holders: Vec<&String> = match queue.first() {
                None => continue,
                Some(first) if exclusive || !first.contains("__READ__") => vec![*first],
                Some(_) => queue.iter().take_while(|c| c.contains("__READ__")).copied().collect(),
            };
            for name in holders {
                let path = join(dir, name);
                let node = &nodes[&path];
                let owner = self.sessions.get(&node.stat.ephemeral_owner).map(|s| s.client).filter(|&c| {
                    self.live(c, now) && self.links[c].session == Some(node.stat.ephemeral_owner)
                });
                out.push((path, node.stat.czxid, owner));
            }
        }
        out
    }

    /// The leader's zxid: the largest ever handed out.
    pub fn zxid(&self) -> i64 {
        (self.epoch << 32) | self.counter
    }

    /// The children of `path` on the leader, in sequence order (names sorted).
    pub fn children(&self, path: &str) -> Vec<String> {
        self.members[self.leader].nodes.get(path).map(|n| n.children.iter().cloned().collect()).unwrap_or_default()
    }

    /// Whether client `c` has a live session on the leader.
    pub fn has_live_session(&self, c: ClientId) -> bool {
        self.links.get(c).and_then(|l| l.session).is_some_and(|id| self.sessions.contains_key(&id))
    }
}

impl Model for SimZk {
    type Backend = ZooKeeperBackend;
    type Request = ZkRequest;
    type Answer = ZkResult;
    type Push = ZkNotice;
    type Outcome = Done;

    fn engine(&self, rng: SeededRandom) -> LockEngine<ZooKeeperBackend> {
        // One session per client in this model: the extra sessions sized from short leases are
        // tested against real servers (zookeeper_faults.rs, conformance `crash_bound_is_the_lease`).
        let config = ZkConfig { session_timeout: self.cfg.session_timeout, label: "sim".into(), extra_sessions: false };
        let backend = ZooKeeperBackend::new(config).expect("a valid session timeout");
        LockEngine::with_backend(backend, Box::new(rng))
    }

    fn request_id(req: &ZkRequest) -> RequestId {
        req.id
    }

    /// One connection per client, to whichever member the library is connected.
    fn route(&self, _req: &ZkRequest) -> Conn {
        Conn::Server(0)
    }

    fn on_send(&mut self, now: Instant, client: ClientId, req: &ZkRequest) {
        if self.link(client).state == (LinkState::Closed { expired: false }) && self.election_until.is_none() {
            // The transport opened the client's first session when it connected.
            let mut none = Vec::new();
            let _ = self.open_session(now, client, &mut none);
        }
        let gen = self.links[client].gen;
        self.sent_on.insert((client, req.id), gen);
    }

    fn serve(
        &mut self,
        now: Instant,
        client: ClientId,
        _crashed: bool,
        req: ZkRequest,
        pushes: &mut Vec<(ClientId, ZkNotice)>,
    ) -> Result<ZkResult, Error> {
        self.link(client);
        self.take_reports(now);
        self.advance(now, pushes);
        let sent_on = self.sent_on.remove(&(client, req.id));
        if req.op == ZkOp::OpenSession {
            return Ok(self.open_session(now, client, pushes));
        }
        // One session per client here: an extra session is the client's own, never closed.
        if req.op == ZkOp::CloseSession {
            return Ok(Ok(ZkReply::Closed));
        }
        let link = &self.links[client];
        let member = match link.state {
            _ if sent_on != Some(link.gen) => {
                return Ok(Err(ZkFailure::ConnectionLoss("the connection it was sent on dropped".into())))
            }
            LinkState::Closed { expired: true } => return Ok(Err(ZkFailure::SessionExpired)),
            LinkState::Closed { expired: false } => return Ok(Err(ZkFailure::ConnectionLoss("no session".into()))),
            LinkState::Down { .. } => return Ok(Err(ZkFailure::ConnectionLoss("disconnected".into()))),
            LinkState::Up { member, .. } => member,
        };
        if self.members[member].stopped_until.is_some() {
            // Never read by the stopped member: the library fails it when it gives the
            // connection up (here at once; the engine retries either way).
            return Ok(Err(ZkFailure::ConnectionLoss("the server does not answer".into())));
        }
        // The client never sees the reply of a request whose connection drops: the last zxid it
        // saw stays what it was (its reconnect may land on a follower that has not applied it).
        let seen = self.links[client].last_zxid;
        if matches!(req.op, ZkOp::Create { .. }) && self.drop_after_create.remove(&client) {
            if self.perform(now, client, member, req.op, pushes).is_ok() {
                self.stats.lost_create_replies += 1;
            }
            self.links[client].last_zxid = seen;
            self.drop_link(client, now, pushes);
            return Ok(Err(ZkFailure::ConnectionLoss("the connection dropped after the create ran".into())));
        }
        if self.rng.chance(self.cfg.p_drop) {
            self.stats.drops += 1;
            if self.rng.chance(0.5) {
                self.stats.applied_then_dropped += 1;
                let is_create = matches!(req.op, ZkOp::Create { .. });
                if self.perform(now, client, member, req.op, pushes).is_ok() && is_create {
                    self.stats.lost_create_replies += 1;
                }
                self.links[client].last_zxid = seen;
            }
            self.drop_link(client, now, pushes);
            return Ok(Err(ZkFailure::ConnectionLoss("the connection dropped".into())));
        }
        Ok(self.perform(now, client, member, req.op, pushes))
    }

    fn notify(engine: &mut LockEngine<ZooKeeperBackend>, now: Instant, push: &ZkNotice) {
        engine.handle_notice(now, push.clone());
    }

    fn restart(&mut self, _server: usize, _now: Instant, _drop_connections: bool, _clock_jump: Duration) {
        panic!("an ensemble keeps its data: use ZkSim::fail_leader");
    }

    /// The process died: its pings stop (the leader heard the last one before `now`); its
    /// session lives until it expires.
    fn client_crashed_at(&mut self, client: ClientId, now: Instant) {
        self.link(client);
        self.freeze_pings(client, now);
        self.links[client].crashed = true;
    }

    fn client_paused(&mut self, client: ClientId, now: Instant, until: Instant) {
        self.pause(client, now, until);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        for m in &self.members {
            match m.stopped_until {
                Some(u) => at(u),
                None => {
                    if let Some(&t) = m.due.front() {
                        at(t);
                    }
                }
            }
        }
        if let Some(t) = self.election_until {
            at(t);
        } else {
            at(self.next_reap);
            for (&id, s) in &self.sessions {
                // A live connection pings for ever: only a silent session has a deadline.
                let silent = self.links.get(s.client).is_none_or(|l| l.session != Some(id) || !self.live_at_any(s.client));
                if silent {
                    at(self.deadline(s));
                }
            }
        }
        for l in &self.links {
            if let Some(t) = l.stalled_at {
                at(t);
            }
            if l.crashed {
                continue;
            }
            if let Some(u) = l.paused_until {
                at(u);
                continue;
            }
            if let LinkState::Down { retry_at } = l.state {
                at(retry_at);
            }
        }
        next
    }

    fn on_timeout(&mut self, now: Instant, pushes: &mut Vec<(ClientId, ZkNotice)>) {
        self.take_reports(now);
        for m in 0..self.members.len() {
            if self.members[m].stopped_until.is_some_and(|u| u <= now) {
                self.members[m].stopped_until = None;
                // Its connections that the clients did not give up work again: pings resume.
                for c in 0..self.links.len() {
                    if let LinkState::Up { member, .. } = self.links[c].state {
                        if member == m && self.links[c].stalled_at.take().is_some() {
                            self.links[c].state = LinkState::Up { member, since: now };
                            self.touch(c, now);
                        }
                    }
                }
            }
        }
        for c in 0..self.links.len() {
            if self.links[c].stalled_at.is_some_and(|t| t <= now) {
                self.stats.stalls += 1;
                self.drop_link(c, now, pushes);
            }
        }
        self.advance(now, pushes);
        if self.election_until.is_some_and(|u| u <= now) {
            self.election_until = None;
            // The new leader gives every session a full timeout from now.
            for s in self.sessions.values_mut() {
                s.heard = s.heard.max(now);
            }
            self.next_reap = now + self.cfg.container_check;
        }
        if self.election_until.is_none() {
            let due: Vec<i64> = self
                .sessions
                .keys()
                .copied()
                .filter(|&id| {
                    let s = &self.sessions[&id];
                    let silent = self.links.get(s.client).is_none_or(|l| l.session != Some(id) || !self.live(s.client, now));
                    silent && self.deadline(s) <= now
                })
                .collect();
            for id in due {
                self.expire(id, now, pushes);
            }
            if self.next_reap <= now {
                self.next_reap = now + self.cfg.container_check;
                let leader = &self.members[self.leader];
                let empty: Vec<String> = leader
                    .nodes
                    .iter()
                    .filter(|(_, n)| n.container && n.children.is_empty() && n.stat.cversion > 0)
                    .map(|(p, _)| p.clone())
                    .collect();
                for path in empty {
                    self.stats.containers_reaped += 1;
                    self.commit(now, vec![Change::Delete { path }], pushes);
                }
            }
        }
        for c in 0..self.links.len() {
            if self.links[c].crashed {
                continue;
            }
            if self.links[c].paused_until.is_some_and(|u| u <= now) {
                self.resume(c, now, pushes);
            }
            if self.links[c].paused_until.is_some() {
                continue;
            }
            if matches!(self.links[c].state, LinkState::Down { retry_at } if retry_at <= now) {
                self.reconnect(c, now, pushes);
            }
        }
    }

    fn belief_key(&self, name: &str, primitive: &Primitive) -> String {
        match primitive {
            Primitive::Mutex => format!("mutex:{name}"),
            Primitive::Read { .. } | Primitive::Write => format!("rw:{name}"),
            Primitive::Semaphore { permits } => format!("sem{permits}:{name}"),
            Primitive::Leader { .. } => format!("leader:{name}"),
        }
    }

    /// A read-write lock's grant is shared if its node is a reader's (Curator's `__READ__`),
    /// a semaphore's shared up to its permits; everything else exclusive.
    fn hold_mode(&self, key: &str, fence: Option<u64>) -> (char, u64) {
        if let Some(permits) = key.strip_prefix("sem").and_then(|k| k.split(':').next()).and_then(|n| n.parse().ok()) {
            return ('r', permits);
        }
        if key.starts_with("rw:") {
            let node = fence.and_then(|f| self.created.get(&(f as i64)));
            if node.is_some_and(|(path, _)| path.contains("__READ__")) {
                return ('r', 0);
            }
        }
        ('w', 0)
    }

    fn lock_state_left(&mut self, _now: Instant) -> Vec<String> {
        self.nodes()
    }
}

impl SimZk {
    /// Whether the client's connection is up and its process runs (for the expiry deadline,
    /// which `poll_timeout` reads without an instant: a paused link counts as silent).
    fn live_at_any(&self, c: ClientId) -> bool {
        let l = &self.links[c];
        matches!(l.state, LinkState::Up { .. }) && !l.crashed && l.stalled_at.is_none() && l.paused_until.is_none()
    }
}

/// A transport failure the harness itself reports (it never does for this model: its own
/// request and reply loss must stay off) reads as a lost connection.
impl WireReply<ZkResult> for ZkResult {
    fn from_sim(result: Result<ZkResult, Error>) -> ZkResult {
        result.unwrap_or_else(|e| Err(ZkFailure::ConnectionLoss(e.to_string())))
    }
}

/// What only the ZooKeeper model offers: its faults at the current instant.
impl Sim<SimZk> {
    /// A ZooKeeper simulation over `cfg`'s ensemble; `net`'s latencies, never its loss.
    pub fn zookeeper(cfg: EnsembleConfig, seed: u64, net: super::NetConfig) -> ZkSim {
        assert!(
            net.drop_reply == 0.0 && net.drop_request == 0.0 && net.drop_notification == 0.0,
            "a ZooKeeper connection loses nothing without dropping: use EnsembleConfig::p_drop"
        );
        Sim::with_model(SimZk::new(cfg, seed), seed, net)
    }

    /// Client `c`'s connection drops now; with `outage` its library reconnects only then.
    pub fn drop_zk_connection(&mut self, c: ClientId, outage: Option<Duration>) {
        let mut pushes = Vec::new();
        let now = self.now;
        self.server.drop_connection(c, now, outage, &mut pushes);
        self.push(pushes);
    }

    /// Creates an ephemeral sequential node at `prefix` in client `c`'s session behind its
    /// engine's back (a node its owner does not know: what a recipe bug would leave). Returns
    /// its path.
    pub fn plant_node(&mut self, c: ClientId, prefix: &str) -> String {
        let mut pushes = Vec::new();
        let now = self.now;
        let op = ZkOp::Create { path: prefix.to_string(), data: Vec::new(), mode: CreateMode::EphemeralSequential };
        let member = match self.server.links[c].state {
            LinkState::Up { member, .. } => member,
            ref other => panic!("client {c} is not connected: {other:?}"),
        };
        let created = self.server.perform(now, c, member, op, &mut pushes);
        self.push(pushes);
        match created {
            Ok(ZkReply::Created { path, .. }) => path,
            other => panic!("planting a node failed: {other:?}"),
        }
    }

    /// Follower `m` stops now until `until` (SIGSTOP).
    pub fn stop_member(&mut self, m: usize, until: Instant) {
        let now = self.now;
        self.server.stop_member(m, now, until);
    }

    /// The ensemble's leader fails now; a new one serves after `election`.
    pub fn fail_leader(&mut self, election: Duration) {
        let mut pushes = Vec::new();
        let now = self.now;
        self.server.fail_leader(now, election, &mut pushes);
        self.push(pushes);
    }
}
