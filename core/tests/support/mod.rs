//! Real `redis-server` processes for integration tests: free loopback port, data in a temp
//! dir, stopped by pid on drop. No mocks.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running redis-server owned by the test.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    extra: Vec<String>,
    tls: bool,
    acl_dir: Option<PathBuf>,
    /// `user:password` for `raw` connections to a server whose default user is off.
    admin: Option<String>,
}

pub mod proxy;

#[path = "../../../conformance/src/ports.rs"]
mod ports;

fn free_port() -> u16 {
    ports::free_port().expect("a free loopback port")
}

fn temp_dir(tag: &str) -> PathBuf {
    let base = std::env::var_os("LOCKGATE_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    // A counter, not just a probed port: a port can come back within one process, and two
    // live servers in one dir collide (a cluster node refuses a nodes.conf another node locks).
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = base.join(format!(
        "lockgate-{tag}-{}-{n}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl RedisServer {
    /// A plain server with `--save "" --appendonly no`.
    pub fn start() -> Self {
        Self::start_with(Vec::new(), false)
    }

    /// A server with extra arguments; `tls` makes its port a TLS port (certs from `tls_files`).
    pub fn start_with(extra: Vec<String>, tls: bool) -> Self {
        let mut s = RedisServer {
            port: free_port(),
            child: None,
            dir: temp_dir("redis"),
            extra,
            tls,
            acl_dir: None,
            admin: None,
        };
        s.spawn(false);
        s
    }

    /// Starts redis-server on `self.port`. A server that exits at once (its port was taken
    /// between the probe and its bind) is started again on a new port; on `restart` the port
    /// must stay, so it is tried again as it is.
    fn spawn(&mut self, keep_port: bool) {
        let mut failures = Vec::new();
        for attempt in 0..5 {
            if attempt > 0 {
                if keep_port {
                    std::thread::sleep(Duration::from_millis(200));
                } else {
                    self.port = free_port();
                }
            }
            match self.try_spawn() {
                Ok(()) => return,
                Err(e) => failures.push(e),
            }
        }
        panic!("redis-server did not start: {}", failures.join("; "));
    }

    /// One start: Ok once the port accepts connections, Err (with the server's log) if the
    /// process exits first or the port stays closed for 10 s.
    fn try_spawn(&mut self) -> Result<(), String> {
        let log = self.dir.join("redis.log");
        let _ = std::fs::remove_file(&log);
        let mut cmd = Command::new(redis_server_bin());
        cmd.arg("--bind")
            .arg("127.0.0.1")
            .arg("--save")
            .arg("")
            .arg("--appendonly")
            .arg("no");
        cmd.arg("--dir").arg(&self.dir).arg("--daemonize").arg("no");
        cmd.arg("--logfile").arg(&log);
        if self.tls {
            cmd.arg("--port")
                .arg("0")
                .arg("--tls-port")
                .arg(self.port.to_string());
        } else {
            cmd.arg("--port").arg(self.port.to_string());
        }
        cmd.args(&self.extra);
        cmd.stdout(Stdio::null()).stderr(Stdio::null());
        let mut child = cmd
            .spawn()
            .expect("redis-server must be installed (./run test installs it)");
        match ports::await_listening(&mut child, self.port) {
            Ok(()) => {
                self.child = Some(child);
                Ok(())
            }
            Err(why) => {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(3).collect();
                Err(format!("{why}: {}", tail.join(" | ")))
            }
        }
    }

    /// A server whose users come from an ACL file with `lines` (e.g. `user app on >pw ~* &* +@all`).
    pub fn start_with_acl(lines: &[&str]) -> Self {
        Self::start_with_acl_and(lines, Vec::new(), None)
    }

    /// As `start_with_acl`, with `extra` arguments, and `admin` (`user:password`) for `raw`.
    fn start_with_acl_and(lines: &[&str], mut extra: Vec<String>, admin: Option<&str>) -> Self {
        let dir = temp_dir("acl");
        let file = dir.join("users.acl");
        std::fs::write(&file, lines.join("\n") + "\n").unwrap();
        extra.extend(["--aclfile".into(), file.to_string_lossy().into_owned()]);
        let mut s = Self::start_with(extra, false);
        s.acl_dir = Some(dir);
        s.admin = admin.map(String::from);
        s
    }

    /// The server's process id (to pause it with SIGSTOP in tests).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the process (SIGKILL by pid) and starts it again on the same port, empty.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn(true);
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// A synchronous connection for test assertions (raw commands).
    pub fn raw(&self) -> redis::Connection {
        let url = match &self.admin {
            Some(userinfo) => format!("redis://{userinfo}@127.0.0.1:{}", self.port),
            None => self.url(),
        };
        redis::Client::open(url)
            .unwrap()
            .get_connection()
            .unwrap()
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(d) = &self.acl_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn redis_server_bin() -> String {
    std::env::var("LOCKGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

/// A throwaway CA plus a server certificate for 127.0.0.1, made with the openssl CLI.
pub struct TlsFiles {
    pub dir: PathBuf,
    pub ca_pem: Vec<u8>,
}

impl TlsFiles {
    pub fn create() -> Self {
        let dir = temp_dir("tls");
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("openssl must be installed");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=lockgate test CA",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
        ]);
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .unwrap();
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ]);
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.crt",
        ]);
        let ca_pem = std::fs::read(dir.join("ca.crt")).unwrap();
        TlsFiles { dir, ca_pem }
    }

    pub fn server_args(&self) -> Vec<String> {
        let p = |f: &str| self.dir.join(f).to_string_lossy().into_owned();
        vec![
            "--tls-cert-file".into(),
            p("server.crt"),
            "--tls-key-file".into(),
            p("server.key"),
            "--tls-ca-cert-file".into(),
            p("ca.crt"),
            "--tls-auth-clients".into(),
            "no".into(),
        ]
    }
}

impl Drop for TlsFiles {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A local Redis Cluster of three masters (no replicas), slots split evenly, on loopback ports
/// with their data in temp dirs; stopped by pid on drop.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

/// The slot ranges `RedisCluster::start` assigns to nodes 0, 1 and 2.
const SLOT_RANGES: [(i64, i64); 3] = [(0, 5460), (5461, 10922), (10923, 16383)];

impl RedisCluster {
    pub fn start() -> Self {
        Self::start_nodes(|args| RedisServer::start_with(args, false))
    }

    /// A cluster whose nodes all take their users from an ACL file with `lines`; `admin`
    /// (`user:password`, a user of `lines` allowed every command) sets the cluster up.
    pub fn start_with_acl(lines: &[&str], admin: &str) -> Self {
        Self::start_nodes(|args| RedisServer::start_with_acl_and(lines, args, Some(admin)))
    }

    /// Starts three nodes with `start(cluster arguments)`, assigns the slots and joins them.
    fn start_nodes(start: impl Fn(Vec<String>) -> RedisServer) -> Self {
        let bus_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let nodes: Vec<RedisServer> = bus_ports
            .iter()
            .map(|bus| {
                start(vec![
                    "--cluster-enabled".into(),
                    "yes".into(),
                    "--cluster-config-file".into(),
                    "nodes.conf".into(),
                    "--cluster-port".into(),
                    bus.to_string(),
                ])
            })
            .collect();
        for (node, (lo, hi)) in nodes.iter().zip(SLOT_RANGES) {
            let mut c = node.raw();
            let _: () = redis::cmd("CLUSTER").arg("ADDSLOTSRANGE").arg(lo).arg(hi).query(&mut c).unwrap();
        }
        let mut first = nodes[0].raw();
        for (other, bus) in nodes[1..].iter().zip(&bus_ports[1..]) {
            let _: () = redis::cmd("CLUSTER")
                .arg("MEET")
                .arg("127.0.0.1")
                .arg(other.port)
                .arg(*bus)
                .query(&mut first)
                .unwrap();
        }
        let cluster = RedisCluster { nodes };
        cluster.wait_ready();
        cluster
    }

    /// Waits until every node reports `cluster_state:ok` and knows all three masters.
    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        for node in &self.nodes {
            let mut c = node.raw();
            loop {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut c).unwrap();
                if info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3") {
                    break;
                }
                assert!(Instant::now() < deadline, "cluster never became ready: {info}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// A seed URL (any node).
    pub fn url(&self) -> String {
        self.nodes[0].url()
    }

    /// The slot of `key`, as the server computes it (`CLUSTER KEYSLOT`).
    pub fn slot(&self, key: &str) -> i64 {
        let mut c = self.nodes[0].raw();
        redis::cmd("CLUSTER").arg("KEYSLOT").arg(key).query(&mut c).unwrap()
    }

    /// The index in `nodes` of the master that owns `key`'s slot.
    pub fn owner(&self, key: &str) -> usize {
        let slot = self.slot(key);
        SLOT_RANGES
            .iter()
            .position(|(lo, hi)| (*lo..=*hi).contains(&slot))
            .expect("every slot is assigned")
    }

    /// Kills the master owning `key`'s slot and starts it again on the same port, empty but with
    /// its cluster config (same node id and slots). Like `RedisServer::restart`, it does not
    /// wait for more than the port: until the node rejoins, clients see it as down.
    pub fn restart_owner(&mut self, key: &str) {
        let i = self.owner(key);
        self.nodes[i].restart();
    }

    /// Puts a [`proxy::SilentProxy`] in front of every node (index for index) and makes each
    /// node announce its proxy's port (`cluster-announce-port`; the cluster bus stays direct),
    /// so cluster clients, which connect to the addresses the nodes announce, reach every node
    /// through its proxy. Returns once every node's view of the cluster shows the proxy ports.
    /// The proxies run on the caller's tokio runtime.
    pub async fn behind_proxies(&self) -> Vec<proxy::SilentProxy> {
        let mut proxies = Vec::new();
        for node in &self.nodes {
            let p = proxy::SilentProxy::start(node.port).await;
            let mut c = node.raw();
            for (name, value) in [("cluster-announce-ip", "127.0.0.1".to_string()), ("cluster-announce-port", p.port.to_string())] {
                let _: () = redis::cmd("CONFIG").arg("SET").arg(name).arg(value).query(&mut c).unwrap();
            }
            proxies.push(p);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for node in &self.nodes {
            let mut c = node.raw();
            loop {
                let view: String = redis::cmd("CLUSTER").arg("NODES").query(&mut c).unwrap();
                if proxies.iter().all(|p| view.contains(&format!("127.0.0.1:{}@", p.port))) {
                    break;
                }
                assert!(Instant::now() < deadline, "the nodes never announced their proxies: {view}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        proxies
    }
}

/// Where a suite runs: one redis-server, or a three-master Redis Cluster. Test bodies take a
/// `Backend` and reach the server(s) only through it, so the same body runs on both (see
/// `on_both!`). Raw inspection goes to the node owning the key's slot (on a single server,
/// the server), and key listings scan every master.
pub enum Backend {
    Single(RedisServer),
    Cluster(RedisCluster),
}

impl Backend {
    pub fn single() -> Self {
        Backend::Single(RedisServer::start())
    }

    pub fn cluster() -> Self {
        Backend::Cluster(RedisCluster::start())
    }

    /// A cluster whose every node has users from an ACL file with `lines` (`admin`,
    /// `user:password` of a user allowed every command, sets the cluster up).
    pub fn cluster_with_acl(lines: &[&str], admin: &str) -> Self {
        Backend::Cluster(RedisCluster::start_with_acl(lines, admin))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Backend::Cluster(_))
    }

    /// The port of the server clients are given (on a cluster, the seed node).
    pub fn port(&self) -> u16 {
        match self {
            Backend::Single(s) => s.port,
            Backend::Cluster(c) => c.nodes[0].port,
        }
    }

    /// The URL clients are given (on a cluster, a seed node).
    pub fn url(&self) -> String {
        match self {
            Backend::Single(s) => s.url(),
            Backend::Cluster(c) => c.url(),
        }
    }

    /// Client options for this backend (`cluster = true` on a cluster).
    pub fn options(&self) -> lockgate_core::native::ClientOptions {
        self.options_for(&self.url())
    }

    /// Client options for another URL, in this backend's mode.
    pub fn options_for(&self, url: &str) -> lockgate_core::native::ClientOptions {
        let mut o = lockgate_core::native::ClientOptions::new(url);
        o.cluster = self.is_cluster();
        o
    }

    pub async fn connect(&self) -> lockgate_core::native::Client {
        self.options().connect().await.unwrap()
    }

    /// The server that stores `key`.
    pub fn server_for(&self, key: &str) -> &RedisServer {
        match self {
            Backend::Single(s) => s,
            Backend::Cluster(c) => &c.nodes[c.owner(key)],
        }
    }

    /// The URL of the server that stores `key` (for plain clients of test data).
    pub fn url_for(&self, key: &str) -> String {
        self.server_for(key).url()
    }

    /// A raw synchronous connection to the server that stores `key`.
    pub fn raw(&self, key: &str) -> redis::Connection {
        self.server_for(key).raw()
    }

    /// `KEYS pattern` over every master.
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        let servers: Vec<&RedisServer> = match self {
            Backend::Single(s) => vec![s],
            Backend::Cluster(c) => c.nodes.iter().collect(),
        };
        let mut found = Vec::new();
        for s in servers {
            let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut s.raw()).unwrap();
            found.extend(keys);
        }
        found
    }

    /// Kills the server that stores `key` (on a cluster, the master owning its slot) and starts
    /// it again on the same port, empty.
    pub fn restart_owner_of(&mut self, key: &str) {
        match self {
            Backend::Single(s) => s.restart(),
            Backend::Cluster(c) => c.restart_owner(key),
        }
    }
}

/// Instantiates a test body taking a [`Backend`] twice, as `<name>::single` (one redis-server)
/// and `<name>::cluster` (a three-master Redis Cluster), each starting its own servers. The
/// attributes given are the test attributes of both (`#[tokio::test(..)]` for an `async fn`,
/// `#[test]` for a `fn` that builds its own runtimes).
#[allow(unused_macros)]
macro_rules! on_both {
    ($(#[$attr:meta])* async fn $name:ident) => {
        mod $name {
            $(#[$attr])*
            async fn single() {
                super::$name(super::Backend::single()).await
            }
            $(#[$attr])*
            async fn cluster() {
                super::$name(super::Backend::cluster()).await
            }
        }
    };
    ($(#[$attr:meta])* fn $name:ident) => {
        mod $name {
            $(#[$attr])*
            fn single() {
                super::$name(super::Backend::single())
            }
            $(#[$attr])*
            fn cluster() {
                super::$name(super::Backend::cluster())
            }
        }
    };
}
