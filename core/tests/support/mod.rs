//! Real `redis-server` processes for integration tests, started and stopped by the project's one
//! test-server launcher (`target/release/test-servers`, through [`test_servers::TestServers`]):
//! free loopback ports, data in temp dirs, stopped by pid when the last handle on a launcher
//! drops. No mocks, and no redis-server started here.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod proxy;
// Some test files (zookeeper_tls.rs) also include it by path for their own launcher runs.
#[allow(clippy::duplicate_mod)]
pub mod test_servers;

use test_servers::TestServers;

/// One redis-server of a launcher run: the only one of `single`/`acl`, or a node of `cluster`.
pub struct RedisServer {
    pub port: u16,
    /// The node's index in the launcher's `nodes` (what its commands name).
    index: usize,
    /// The launcher run, shared by a cluster's nodes; it stops its servers when the last
    /// handle drops.
    servers: Arc<Mutex<TestServers>>,
    tls: bool,
    /// `user:password` for `raw` connections to a server whose default user is off.
    admin: Option<String>,
}

impl RedisServer {
    /// A plain server (the launcher's: `--save "" --appendonly no`).
    pub fn start() -> Self {
        Self::start_with(Vec::new(), false)
    }

    /// A server with extra redis-server arguments; `tls` makes its port TLS-only, serving the
    /// certificates `extra` names (e.g. [`TlsFiles::server_args`]; they come after the
    /// launcher's own and so replace them).
    pub fn start_with(extra: Vec<String>, tls: bool) -> Self {
        let mut args = vec!["single".to_string()];
        if tls {
            args.push("--tls".into());
        }
        Self::launch(args, extra, tls)
    }

    /// A server whose users come from an ACL file with `lines` (e.g. `user app on >pw ~* &* +@all`).
    pub fn start_with_acl(lines: &[&str]) -> Self {
        let mut args = vec!["acl".to_string()];
        for line in lines {
            args.extend(["--acl".into(), line.to_string()]);
        }
        Self::launch(args, Vec::new(), false)
    }

    /// `test-servers <args> -- <extra>`, one server.
    fn launch(mut args: Vec<String>, extra: Vec<String>, tls: bool) -> Self {
        if !extra.is_empty() {
            args.push("--".into());
            args.extend(extra);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let servers = TestServers::start(&args);
        RedisServer { port: servers.port(0), index: 0, servers: Arc::new(Mutex::new(servers)), tls, admin: None }
    }

    /// Sends the launcher a command about this node (`stop`, `restart`, `pause`, `resume`).
    fn command(&self, verb: &str) {
        self.servers.lock().unwrap().command(&format!("{verb} {}", self.index));
    }

    /// `redis://127.0.0.1:<port>` (`rediss://` for a TLS port).
    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", if self.tls { "rediss" } else { "redis" }, self.port)
    }

    /// Kills the process (SIGKILL by pid) and starts it again on the same port, empty (a
    /// cluster node keeps its `nodes.conf`: same node id and slots).
    pub fn restart(&mut self) {
        self.command("restart");
    }

    /// Kills the process (SIGKILL by pid); `restart` brings it back.
    pub fn stop(&mut self) {
        self.command("stop");
    }

    /// Freezes the process (SIGSTOP): its port accepts connections, nothing answers.
    pub fn pause(&self) {
        self.command("pause");
    }

    /// Thaws a paused process (SIGCONT).
    pub fn resume(&self) {
        self.command("resume");
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
}

/// A fresh directory for [`TlsFiles`] under `$LOCKGATE_TMP` (or the system temp dir), named
/// by a counter so two in one process never share one.
fn temp_dir(tag: &str) -> PathBuf {
    let base = std::env::var_os("LOCKGATE_TMP")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = base.join(format!("lockgate-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
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

/// A local Redis Cluster of three masters (no replicas), slots split evenly: the launcher's
/// `cluster` kind.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
    /// Each node's slot range (`lo`, `hi`), node for node, as the launcher assigned them.
    slots: Vec<(i64, i64)>,
}

impl RedisCluster {
    pub fn start() -> Self {
        let servers = TestServers::start(&["cluster"]);
        let slots = (0..servers.node_count())
            .map(|i| {
                let r = &servers.info["nodes"][i]["slots"];
                (r[0].as_i64().expect("a slot range"), r[1].as_i64().expect("a slot range"))
            })
            .collect();
        let ports: Vec<u16> = (0..servers.node_count()).map(|i| servers.port(i)).collect();
        let servers = Arc::new(Mutex::new(servers));
        let nodes = ports
            .into_iter()
            .enumerate()
            .map(|(index, port)| RedisServer { port, index, servers: Arc::clone(&servers), tls: false, admin: None })
            .collect();
        RedisCluster { nodes, slots }
    }

    /// A cluster whose nodes all have the users of `lines` (ACL file syntax, `user <name>
    /// <rules>`), set on every node once the cluster is up (the launcher sets clusters up as
    /// the default user); `admin` (`user:password`, a user of `lines` allowed every command)
    /// is what `raw` connections then log in as.
    pub fn start_with_acl(lines: &[&str], admin: &str) -> Self {
        let mut cluster = Self::start();
        for node in &mut cluster.nodes {
            let mut c = node.raw();
            for line in lines {
                let mut words = line.split_whitespace();
                assert_eq!(words.next(), Some("user"), "an ACL file line: {line}");
                let _: () = redis::cmd("ACL").arg("SETUSER").arg(words.collect::<Vec<_>>()).query(&mut c).unwrap();
            }
            node.admin = Some(admin.to_string());
        }
        cluster
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
        self.slots
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
