//! The server kinds every test needs, each a set of real servers on loopback: one redis-server
//! (optionally with users from an ACL file), a primary with replicas, a 3-master Redis Cluster,
//! N independent Redlock masters, one redis-server behind the fault proxy, ZooKeeper (one
//! standalone server or an ensemble, optionally each member behind a fault proxy), etcd (one
//! member or a Raft cluster), one PostgreSQL or MariaDB server, and N memcached servers. The launcher
//! binary (`src/bin/servers.rs`) and the orchestrator's server variants both start them from
//! here.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::etcd::{EtcdCluster, ELECTION_MS, HEARTBEAT_MS};
use crate::memcached::{memcached_url, MemcachedServer};
use crate::proxy::Proxy;
use crate::server::RedisServer;
use crate::sql::{Engine, SqlServer};
use crate::tls::TlsFiles;
use crate::zookeeper::{ZkEnsemble, MAX_SESSION_MS, MIN_SESSION_MS, TICK_MS};

/// The slot ranges of the three cluster masters, in node order.
pub const SLOT_RANGES: [(u16, u16); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

/// What to start.
#[derive(Clone, Debug)]
pub enum Kind {
    /// One server.
    Single,
    /// One server whose users come from an ACL file with these lines (e.g.
    /// `user app on >pw ~* &* +@all`, `user default off`); `user`/`password` go into the URL.
    Acl { lines: Vec<String>, user: String, password: String },
    /// A primary and this many replicas (`--replicaof`), ready once all are online.
    Replica { replicas: usize },
    /// A Redis Cluster of three masters, no replicas, slots split evenly.
    Cluster,
    /// This many independent masters for Redlock.
    Redlock { masters: usize },
    /// One server reached through the fault proxy (connections can be silenced).
    Proxied,
    /// ZooKeeper: one standalone server (`members: 1`) or an ensemble; with `proxied` every
    /// member is reached through its own fault proxy. Extra arguments are `zoo.cfg` lines.
    ZooKeeper { members: usize, proxied: bool },
    /// etcd: one member (`members: 1`) or a Raft cluster; with `proxied` every member is
    /// reached through its own fault proxy. Extra arguments are etcd flags.
    Etcd { members: usize, proxied: bool },
    /// One PostgreSQL or MariaDB server with a database and user for the tests; with `proxied`
    /// clients reach it through the fault proxy. Extra arguments are server settings
    /// (`key=value`).
    Sql { engine: Engine, proxied: bool },
    /// memcached: this many independent servers, each with `memory_mb` MB (`-m`). Extra
    /// arguments are memcached flags.
    Memcached { servers: usize, memory_mb: u32 },
}

impl Kind {
    /// The kind's name in the launcher's JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Kind::Single => "single",
            Kind::Acl { .. } => "acl",
            Kind::Replica { .. } => "replica",
            Kind::Cluster => "cluster",
            Kind::Redlock { .. } => "redlock",
            Kind::Proxied => "proxied",
            Kind::ZooKeeper { .. } => "zookeeper",
            Kind::Etcd { .. } => "etcd",
            Kind::Sql { engine, .. } => engine.name(),
            Kind::Memcached { .. } => "memcached",
        }
    }
}

/// Running servers of one kind; dropping it stops every one of them by pid.
pub struct Deployment {
    pub kind: Kind,
    /// The servers: the one server; the primary then the replicas; the cluster masters in slot
    /// order; the Redlock masters.
    pub nodes: Vec<RedisServer>,
    /// Cluster bus ports, node for node (cluster only).
    pub bus_ports: Vec<u16>,
    /// The fault proxies: the one of `proxied`, or one per ZooKeeper member (`zookeeper
    /// --proxied`), member for member.
    pub proxies: Vec<Proxy>,
    /// The ZooKeeper server or ensemble (zookeeper only; `nodes` is then empty).
    pub zookeeper: Option<ZkEnsemble>,
    /// The etcd member or cluster (etcd only; `nodes` is then empty).
    pub etcd: Option<EtcdCluster>,
    /// The database server (postgres and mariadb only; `nodes` is then empty).
    pub sql: Option<SqlServer>,
    /// The memcached servers (memcached only; `nodes` is then empty).
    pub memcached: Vec<MemcachedServer>,
    /// `user:password` for connections of the fixture and the URL (acl only).
    userinfo: Option<String>,
    /// The directory holding the ACL file (acl only).
    acl_dir: Option<std::path::PathBuf>,
    /// The certificates of TLS-only servers (`--tls`).
    pub tls: Option<TlsFiles>,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        self.proxies.clear();
        self.nodes.clear();
        self.zookeeper = None;
        self.etcd = None;
        self.sql = None;
        self.memcached.clear();
        self.tls = None;
        if let Some(d) = &self.acl_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Extra redis-server arguments for every node.
fn with(base: &[&str], extra: &[String]) -> Vec<String> {
    base.iter().map(|s| s.to_string()).chain(extra.iter().cloned()).collect()
}

impl Deployment {
    /// Starts `kind`, each node with the `extra` redis-server arguments too.
    pub fn start(kind: Kind, extra: &[String]) -> Result<Deployment, String> {
        Self::start_with(kind, extra, false)
    }

    /// As [`Deployment::start`]; with `tls` every port is TLS-only, with a fresh CA
    /// ([`Deployment::tls`]). Only for kinds whose servers are independent (single, acl,
    /// redlock): a TLS replica or cluster bus would need more. ZooKeeper members (not proxied)
    /// serve TLS on a second port beside their plain one, with a client certificate to try; a
    /// PostgreSQL or MariaDB server serves TLS beside plaintext on its one port.
    pub fn start_with(kind: Kind, extra: &[String], tls: bool) -> Result<Deployment, String> {
        let mut d = Deployment { kind: kind.clone(), nodes: Vec::new(), bus_ports: Vec::new(), proxies: Vec::new(), zookeeper: None, etcd: None, sql: None, memcached: Vec::new(), userinfo: None, acl_dir: None, tls: None };
        let mut extra = extra.to_vec();
        if tls {
            if !matches!(kind, Kind::Single | Kind::Acl { .. } | Kind::Redlock { .. } | Kind::ZooKeeper { proxied: false, .. } | Kind::Etcd { proxied: false, .. } | Kind::Sql { proxied: false, .. }) {
                return Err(format!("--tls is for single, acl, redlock, zookeeper, etcd, postgres and mariadb (not proxied), not {}", kind.name()));
            }
            let files = TlsFiles::create()?;
            match kind {
                Kind::ZooKeeper { .. } => files.add_zookeeper_files()?,
                // etcd and the SQL servers take the files' paths themselves.
                Kind::Etcd { .. } | Kind::Sql { .. } => {}
                // The certificates first: arguments after `--` come later and so may name
                // other certificate files (a test bringing its own CA).
                _ => extra = files.server_args().into_iter().chain(extra).collect(),
            }
            d.tls = Some(files);
        }
        let extra = &extra[..];
        let start = |args: Vec<String>| RedisServer::start_as(args, tls);
        match kind {
            Kind::Single => d.nodes.push(start(extra.to_vec())?),
            Kind::Proxied => {
                d.nodes.push(RedisServer::start_with(extra.to_vec())?);
                d.proxies.push(Proxy::start(([127, 0, 0, 1], d.nodes[0].port).into())?);
            }
            Kind::ZooKeeper { members, proxied } => {
                let zk = ZkEnsemble::start_with_tls(members, extra, d.tls.as_ref().map(|t| t.dir.as_path()))?;
                if proxied {
                    for m in &zk.members {
                        d.proxies.push(Proxy::start(([127, 0, 0, 1], m.port).into())?);
                    }
                }
                d.zookeeper = Some(zk);
            }
            Kind::Etcd { members, proxied } => {
                let etcd = EtcdCluster::start_with_tls(members, extra, d.tls.as_ref().map(|t| t.dir.as_path()))?;
                if proxied {
                    for m in &etcd.members {
                        d.proxies.push(Proxy::start(([127, 0, 0, 1], m.port).into())?);
                    }
                }
                d.etcd = Some(etcd);
            }
            Kind::Sql { engine, proxied } => {
                let sql = SqlServer::start(engine, extra, d.tls.as_ref().map(|t| t.dir.as_path()))?;
                if proxied {
                    d.proxies.push(Proxy::start(([127, 0, 0, 1], sql.port).into())?);
                }
                d.sql = Some(sql);
            }
            Kind::Memcached { servers, memory_mb } => {
                for _ in 0..servers {
                    d.memcached.push(MemcachedServer::start(memory_mb, extra)?);
                }
            }
            Kind::Acl { lines, user, password } => {
                let dir = crate::spawn::fresh_dir("acl")?;
                let file = dir.join("users.acl");
                d.acl_dir = Some(dir);
                std::fs::write(&file, lines.join("\n") + "\n").map_err(|e| format!("{}: {e}", file.display()))?;
                let path = file.to_string_lossy().into_owned();
                let args = with(&["--aclfile", path.as_str()], extra);
                d.nodes.push(start(args)?);
                d.userinfo = Some(format!("{}:{}", enc(&user), enc(&password)));
            }
            Kind::Replica { replicas } => {
                // Diskless full sync without Redis's default 5 s wait for more replicas.
                d.nodes.push(RedisServer::start_with(with(&["--repl-diskless-sync-delay", "0"], extra))?);
                let primary = d.nodes[0].port.to_string();
                for _ in 0..replicas {
                    d.nodes.push(RedisServer::start_with(with(&["--replicaof", "127.0.0.1", primary.as_str()], extra))?);
                }
                d.await_replicas(replicas)?;
            }
            Kind::Cluster => {
                for _ in SLOT_RANGES {
                    let bus = crate::ports::free_port().map_err(|e| e.to_string())?;
                    let bus_s = bus.to_string();
                    let args = with(&["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-port", bus_s.as_str(), "--cluster-node-timeout", "2000"], extra);
                    d.nodes.push(RedisServer::start_with(args)?);
                    d.bus_ports.push(bus);
                }
                d.join_cluster()?;
            }
            Kind::Redlock { masters } => {
                for _ in 0..masters {
                    d.nodes.push(start(extra.to_vec())?);
                }
            }
        }
        Ok(d)
    }

    /// Waits until the primary reports `replicas` replicas online.
    fn await_replicas(&self, replicas: usize) -> Result<(), String> {
        let mut conn = self.nodes[0].connection()?;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let info: String = redis::cmd("INFO").arg("replication").query(&mut conn).map_err(|e| e.to_string())?;
            let online = info.lines().filter(|l| l.starts_with("slave") && l.contains("state=online")).count();
            if online >= replicas {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!("the replicas never came online: {info}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Assigns the slot ranges, joins the nodes with CLUSTER MEET and waits until every node
    /// reports `cluster_state:ok` and knows all three.
    fn join_cluster(&self) -> Result<(), String> {
        let q = |c: &mut redis::Connection, cmd: &mut redis::Cmd| cmd.query::<redis::Value>(c).map(|_| ()).map_err(|e| format!("cluster setup: {e}"));
        for (node, (lo, hi)) in self.nodes.iter().zip(SLOT_RANGES) {
            q(&mut node.connection()?, redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(lo).arg(hi))?;
        }
        let mut first = self.nodes[0].connection()?;
        for (other, bus) in self.nodes[1..].iter().zip(&self.bus_ports[1..]) {
            q(&mut first, redis::cmd("CLUSTER").arg("MEET").arg("127.0.0.1").arg(other.port).arg(*bus))?;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for node in &self.nodes {
            let mut c = node.connection()?;
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).map_err(|e| e.to_string())?;
                if info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!("the cluster never became ready: {info}"));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// The URL clients are given: `redis://` (single, replica: the primary, acl: with the user
    /// and password, proxied: the proxy), `redis+cluster://<seed>` (cluster), or
    /// `redlock://h1:p1,h2:p2,...` (Redlock).
    pub fn url(&self) -> String {
        match &self.kind {
            Kind::Cluster => format!("redis+cluster://127.0.0.1:{}", self.nodes[0].port),
            Kind::Redlock { .. } => redlock_url(&self.nodes.iter().collect::<Vec<_>>()).replacen("redlock://", self.scheme("redlock"), 1),
            Kind::Proxied => self.proxies.first().map(Proxy::url).unwrap_or_default(),
            Kind::ZooKeeper { proxied: true, .. } => crate::zookeeper::zookeeper_url(&self.proxies.iter().map(|p| p.addr().port()).collect::<Vec<_>>()),
            Kind::ZooKeeper { .. } => self.zookeeper.as_ref().map(ZkEnsemble::url).unwrap_or_default(),
            Kind::Etcd { proxied: true, .. } => crate::etcd::etcd_url(&self.proxies.iter().map(|p| p.addr().port()).collect::<Vec<_>>()),
            Kind::Etcd { .. } => self.etcd.as_ref().map(EtcdCluster::url).unwrap_or_default(),
            Kind::Sql { .. } => match (&self.sql, self.proxies.first()) {
                (Some(sql), Some(p)) => sql.url_on(p.addr().port()),
                (Some(sql), None) => sql.url(),
                (None, _) => String::new(),
            },
            Kind::Memcached { .. } => memcached_url(&self.memcached),
            _ => self.node_url(0),
        }
    }

    /// `redis://` (TLS: `rediss://`) URL of node `i`, with the ACL user's credentials where
    /// there are some.
    pub fn node_url(&self, i: usize) -> String {
        let port = self.nodes[i].port;
        let scheme = self.scheme("");
        match &self.userinfo {
            Some(u) => format!("{scheme}{u}@127.0.0.1:{port}"),
            None => format!("{scheme}127.0.0.1:{port}"),
        }
    }

    /// The URL scheme with `://`: `redis://` (`variant` "redlock": `redlock://`), and their TLS
    /// forms `rediss://` / `rediss+redlock://` when the servers speak TLS.
    fn scheme(&self, variant: &str) -> &'static str {
        match (self.tls.is_some(), variant) {
            (false, "redlock") => "redlock://",
            (true, "redlock") => "rediss+redlock://",
            (false, _) => "redis://",
            (true, _) => "rediss://",
        }
    }

    /// A synchronous connection to node `i` (as the ACL user where there is one).
    pub fn connection(&self, i: usize) -> Result<redis::Connection, String> {
        redis::Client::open(self.node_url(i)).and_then(|c| c.get_connection()).map_err(|e| format!("node {i}: {e}"))
    }

    /// The pids of every running server (the launcher stops exactly these).
    pub fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.nodes.iter().filter_map(RedisServer::pid).collect();
        if let Some(zk) = &self.zookeeper {
            pids.extend(zk.pids());
        }
        if let Some(etcd) = &self.etcd {
            pids.extend(etcd.pids());
        }
        pids.extend(self.sql.as_ref().and_then(SqlServer::pid));
        pids.extend(self.memcached.iter().filter_map(MemcachedServer::pid));
        pids
    }

    /// How many servers (Redis nodes, ZooKeeper or etcd members, the one SQL server) the
    /// launcher's `I` may name.
    pub fn node_count(&self) -> usize {
        match (&self.zookeeper, &self.etcd, &self.sql) {
            (Some(zk), _, _) => zk.members.len(),
            (_, Some(etcd), _) => etcd.members.len(),
            (_, _, Some(_)) => 1,
            _ if !self.memcached.is_empty() => self.memcached.len(),
            _ => self.nodes.len(),
        }
    }

    fn index(&self, i: usize) -> Result<usize, String> {
        if i < self.node_count() {
            Ok(i)
        } else {
            Err(format!("no node {i}"))
        }
    }

    /// Kills node `i` (SIGKILL, by pid).
    pub fn stop_node(&mut self, i: usize) -> Result<(), String> {
        let i = self.index(i)?;
        if let Some(etcd) = &mut self.etcd {
            etcd.stop_member(i);
            return Ok(());
        }
        if let Some(sql) = &mut self.sql {
            sql.stop();
            return Ok(());
        }
        if let Some(m) = self.memcached.get_mut(i) {
            m.stop();
            return Ok(());
        }
        match &mut self.zookeeper {
            Some(zk) => zk.stop_member(i),
            None => self.nodes[i].stop(),
        }
        Ok(())
    }

    /// Starts node `i` again on its port (killing it first if it runs): a redis-server comes
    /// back empty (a restart without persistence); a ZooKeeper member comes back with its data
    /// (it rejoins the ensemble from its log; a standalone server keeps its sessions); so does an
    /// etcd member (a single member keeps its keys and leases), and a SQL server (its rows and
    /// sequences: a crash recovery). Returns the new pid.
    pub fn start_node(&mut self, i: usize) -> Result<Option<u32>, String> {
        let i = self.index(i)?;
        if let Some(sql) = &mut self.sql {
            sql.restart()?;
            return Ok(sql.pid());
        }
        if let Some(m) = self.memcached.get_mut(i) {
            m.restart()?;
            return Ok(m.pid());
        }
        if let Some(etcd) = &mut self.etcd {
            etcd.start_member(i)?;
            return Ok(etcd.members[i].pid());
        }
        match &mut self.zookeeper {
            Some(zk) => {
                zk.start_member(i)?;
                Ok(zk.members[i].pid())
            }
            None => {
                self.nodes[i].restart()?;
                Ok(self.nodes[i].pid())
            }
        }
    }

    /// Sends `signal` (SIGSTOP / SIGCONT) to node `i`'s own pid (a PostgreSQL server's every
    /// process).
    pub fn signal_node(&self, i: usize, signal: i32) -> Result<(), String> {
        let i = self.index(i)?;
        if let Some(sql) = &self.sql {
            return sql.signal(signal);
        }
        if let Some(m) = self.memcached.get(i) {
            return m.signal(signal);
        }
        if let Some(etcd) = &self.etcd {
            return etcd.members[i].signal(signal);
        }
        match &self.zookeeper {
            Some(zk) => zk.members[i].signal(signal),
            None => self.nodes[i].signal(signal),
        }
    }

    /// The ZooKeeper description: the members with their ports, pids, dirs and `srvr` modes,
    /// the leader's index, the session limits.
    fn describe_zookeeper(&self, zk: &ZkEnsemble) -> Value {
        let modes = zk.modes();
        let nodes: Vec<Value> = zk
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut v = json!({"url": crate::zookeeper::zookeeper_url(&[m.port]), "port": m.port, "pid": m.pid(), "dir": m.dir(), "myid": m.id, "mode": modes[i]});
                if zk.members.len() > 1 {
                    v["quorum_port"] = json!(m.quorum_port);
                    v["election_port"] = json!(m.election_port);
                }
                if let Some(p) = self.proxies.get(i) {
                    v["proxy_port"] = json!(p.addr().port());
                }
                if let Some(p) = m.secure_port {
                    v["secure_port"] = json!(p);
                }
                v
            })
            .collect();
        let leader = modes.iter().position(|m| matches!(m.as_deref(), Some("leader" | "standalone")));
        let mut out = json!({
            "kind": self.kind.name(), "url": self.url(), "members": zk.members.len(), "nodes": nodes, "pids": self.pids(),
            "leader": leader, "tick_ms": zk.setting("tickTime", TICK_MS),
            "min_session_ms": zk.setting("minSessionTimeout", MIN_SESSION_MS), "max_session_ms": zk.setting("maxSessionTimeout", MAX_SESSION_MS),
        });
        if !self.proxies.is_empty() {
            out["server_url"] = json!(zk.url());
        }
        if let Some(t) = &self.tls {
            out["ca_file"] = json!(t.ca_file());
            out["client_cert_file"] = json!(t.file("client.crt"));
            out["client_key_file"] = json!(t.file("client.key"));
            out["plain_url"] = json!(zk.plain_url());
        }
        out
    }

    /// The etcd description: the members with their ports, pids, dirs, member ids and roles
    /// read now, the leader's index, the Raft timings and the shortest lease the members grant.
    fn describe_etcd(&self, etcd: &EtcdCluster) -> Value {
        let roles = etcd.roles();
        let nodes: Vec<Value> = etcd
            .members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut v = json!({"url": crate::etcd::etcd_url(&[m.port]), "port": m.port, "peer_port": m.peer_port, "pid": m.pid(), "dir": m.dir(),
                                   "name": m.name, "member_id": m.member_id, "role": roles[i]});
                if let Some(p) = self.proxies.get(i) {
                    v["proxy_port"] = json!(p.addr().port());
                }
                if let Some(p) = m.secure_port {
                    v["secure_port"] = json!(p);
                }
                v
            })
            .collect();
        let mut out = json!({
            "kind": self.kind.name(), "url": self.url(), "endpoints": etcd.endpoints(), "members": etcd.members.len(), "nodes": nodes,
            "pids": self.pids(), "leader": roles.iter().position(|r| *r == Some("leader")),
            "heartbeat_ms": etcd.setting("heartbeat-interval", HEARTBEAT_MS), "election_ms": etcd.setting("election-timeout", ELECTION_MS),
            "min_ttl_s": etcd.min_ttl_s(),
        });
        if !self.proxies.is_empty() {
            out["server_url"] = json!(etcd.url());
        }
        if let Some(t) = &self.tls {
            out["ca_file"] = json!(t.ca_file());
            out["plain_url"] = json!(etcd.plain_url());
        }
        out
    }

    /// The SQL server's description: the user's and the administrator's URLs, the login, the
    /// socket, and with TLS the CA and a URL that asks for verified TLS.
    fn describe_sql(&self, sql: &SqlServer) -> Value {
        let node = json!({"url": sql.url(), "port": sql.port, "pid": sql.pid(), "dir": sql.dir(), "socket": sql.socket()});
        let mut out = json!({
            "kind": self.kind.name(), "url": self.url(), "admin_url": sql.admin_url(), "url_without_credentials": sql.url_without_credentials(),
            "database": crate::sql::DATABASE, "user": crate::sql::USER, "password": crate::sql::PASSWORD,
            "admin_user": sql.engine.admin_user(), "admin_password": crate::sql::ADMIN_PASSWORD,
            "nodes": [node], "pids": self.pids(),
        });
        if let Some(p) = self.proxies.first() {
            out["server_url"] = json!(sql.url());
            out["nodes"][0]["proxy_port"] = json!(p.addr().port());
        }
        if let Some(t) = &self.tls {
            out["ca_file"] = json!(t.ca_file());
            if sql.engine == Engine::Postgres {
                out["tls_url"] = json!(format!("{}?sslmode=verify-full", sql.url()));
            }
        }
        out
    }

    /// The launcher's description: kind, `url`, every node's url/port/pid (and role), and the
    /// kind's extras (Redlock master URLs, the proxied server, the ACL user).
    pub fn describe(&self) -> Value {
        if let Some(sql) = &self.sql {
            return self.describe_sql(sql);
        }
        if let Some(zk) = &self.zookeeper {
            return self.describe_zookeeper(zk);
        }
        if let Some(etcd) = &self.etcd {
            return self.describe_etcd(etcd);
        }
        if !self.memcached.is_empty() {
            let nodes: Vec<Value> =
                self.memcached.iter().map(|m| json!({"url": m.url(), "port": m.port, "pid": m.pid(), "memory_mb": m.memory_mb})).collect();
            return json!({"kind": self.kind.name(), "url": self.url(), "nodes": nodes, "pids": self.pids()});
        }
        let nodes: Vec<Value> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let mut v = json!({"url": self.node_url(i), "port": n.port, "pid": n.pid(), "dir": n.dir()});
                match &self.kind {
                    Kind::Replica { .. } => v["role"] = json!(if i == 0 { "primary" } else { "replica" }),
                    Kind::Cluster => {
                        v["bus_port"] = json!(self.bus_ports[i]);
                        v["slots"] = json!([SLOT_RANGES[i].0, SLOT_RANGES[i].1]);
                    }
                    _ => {}
                }
                v
            })
            .collect();
        let mut out = json!({"kind": self.kind.name(), "url": self.url(), "nodes": nodes, "pids": self.pids()});
        if let Some(t) = &self.tls {
            out["ca_file"] = json!(t.ca_file());
        }
        match &self.kind {
            Kind::Redlock { .. } => out["urls"] = json!((0..self.nodes.len()).map(|i| self.node_url(i)).collect::<Vec<_>>()),
            Kind::Proxied => out["server_url"] = json!(self.node_url(0)),
            Kind::Acl { user, password, .. } => {
                out["user"] = json!(user);
                out["password"] = json!(password);
                out["url_without_credentials"] = json!(format!("{}127.0.0.1:{}", self.scheme(""), self.nodes[0].port));
            }
            _ => {}
        }
        out
    }
}

/// `redlock://h1:p1,h2:p2,...` over these servers.
pub fn redlock_url(nodes: &[&RedisServer]) -> String {
    let hosts: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
    format!("redlock://{}", hosts.join(","))
}

/// Percent-encodes what a URL's userinfo cannot carry as is.
fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}
