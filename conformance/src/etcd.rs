//! Throwaway etcd servers from Debian's `etcd-server` package (etcd 3.4): one member or a Raft
//! cluster of N members on free loopback ports (a client and a peer port each), data in temp
//! dirs, each member an `etcd` process started here and stopped by its own pid (never by name).
//!
//! Settings every member gets (conformance/README.md, "etcd kinds"): a 50 ms heartbeat and a
//! 500 ms election timeout. etcd grants no lease shorter than 1.5 election timeouts (rounded up
//! to whole seconds): with its defaults (100 ms / 1 s) that is 2 s, with these 1 s, so tests can
//! use 1 s sessions as on the ZooKeeper test servers. Readiness, roles and the leader are read
//! over the members' own HTTP endpoints (`/health`, the gRPC gateway's
//! `/v3/maintenance/status`), so no client library is needed here.
//!
//! With TLS (`test-servers etcd --tls`) every member also serves its clients over TLS on a
//! second port (`https://`, the CA's certificate for 127.0.0.1), beside the plain one the
//! launcher's own probes, the fixtures and `etcdctl` use.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::{Ports, ServerProcess};

/// The Raft heartbeat every member runs with (ms).
pub const HEARTBEAT_MS: u64 = 50;
/// The Raft election timeout every member runs with (ms): a lost leader is replaced within
/// about this long.
pub const ELECTION_MS: u64 = 500;
/// How long a member may take from its start to healthy (a loaded 2-core machine).
const READY_LIMIT: Duration = Duration::from_secs(60);
/// How long one HTTP probe of a member may take (a paused member never answers).
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// The etcd binary (`LOCKGATE_ETCD` overrides it).
fn etcd() -> String {
    std::env::var("LOCKGATE_ETCD").unwrap_or_else(|_| "etcd".into())
}

/// One HTTP/1.1 request to a member's client port; the JSON body of the answer.
fn http(port: u16, method: &str, path: &str, body: &str) -> std::io::Result<Value> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
    s.set_read_timeout(Some(PROBE_TIMEOUT))?;
    s.set_write_timeout(Some(PROBE_TIMEOUT))?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    // The body is one JSON object (chunk sizes, if the server chunked it, lie outside it).
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, format!("not a JSON answer: {out:?}"));
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b).ok_or_else(bad)?;
    let (start, end) = (body.find('{').ok_or_else(bad)?, body.rfind('}').ok_or_else(bad)?);
    serde_json::from_str(&body[start..=end]).map_err(|_| bad())
}

/// Whether the member on `port` says it is healthy (it has a leader and serves a quorum read).
pub fn healthy(port: u16) -> bool {
    http(port, "GET", "/health", "").is_ok_and(|v| v["health"] == "true")
}

/// The member's own id and the leader it knows (`None` while it knows none), as its
/// `Maintenance.Status` says; `None` if it does not answer (stopped, paused, starting).
pub fn status(port: u16) -> Option<(String, Option<String>)> {
    let v = http(port, "POST", "/v3/maintenance/status", "{}").ok()?;
    let id = v["header"]["member_id"].as_str()?.to_string();
    let leader = v["leader"].as_str().filter(|l| *l != "0").map(str::to_string);
    Some((id, leader))
}

/// One member: its name, ports, directory (`data/`, `etcd.log`) and process.
pub struct EtcdMember {
    /// `m1`, `m2`, ... (the name in `--initial-cluster`).
    pub name: String,
    /// The client port (gRPC and HTTP).
    pub port: u16,
    /// The Raft peer port.
    pub peer_port: u16,
    /// The TLS client port (with TLS only).
    pub secure_port: Option<u16>,
    /// The member id the cluster gave it (in decimal, as the gateway prints it), once known.
    pub member_id: Option<String>,
    process: ServerProcess,
}

impl EtcdMember {
    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// The member's directory (`data/`, `etcd.log`, `stderr.log`).
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// Whether the process runs (started and not stopped; a paused one runs).
    pub fn running(&self) -> bool {
        self.process.running()
    }

    /// Whether the process has exited (it is then reaped), and why, from its log.
    fn exited(&mut self) -> Option<String> {
        let status = self.process.exited()?;
        Some(format!("member {} exited with {status}: {}", self.name, self.log_tail()))
    }

    /// The last error lines of the member's logs, for errors.
    pub fn log_tail(&self) -> String {
        let mut text = std::fs::read_to_string(self.dir().join("etcd.log")).unwrap_or_default();
        text.push_str(&std::fs::read_to_string(self.dir().join("stderr.log")).unwrap_or_default());
        let mut tail: Vec<String> = text
            .lines()
            .filter(|l| l.contains("\"level\":\"error\"") || l.contains("\"level\":\"fatal\"") || l.contains("panic") || !l.starts_with('{'))
            .rev()
            .take(3)
            .map(|l| l.chars().take(300).collect())
            .collect();
        tail.reverse();
        tail.join(" | ")
    }

    /// Starts the process with `cluster`'s `--initial-cluster` and `token` (every member of one
    /// cluster has the same; etcd ignores both once the data dir holds a log: a restarted member
    /// rejoins from it) and the extra flags.
    fn spawn(&mut self, cluster: &str, token: &str, tls: Option<&Path>, extra: &[String]) -> Result<(), String> {
        let mut client = format!("http://127.0.0.1:{}", self.port);
        if let Some(s) = self.secure_port {
            client.push_str(&format!(",https://127.0.0.1:{s}"));
        }
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let dir = self.dir().to_path_buf();
        let mut cmd = Command::new(etcd());
        cmd.arg("--name")
            .arg(&self.name)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", cluster, "--initial-cluster-state", "new", "--initial-cluster-token", token])
            .args(tls.map(|d| {
                let f = |name: &str| d.join(name).to_string_lossy().into_owned();
                vec!["--cert-file".to_string(), f("server.crt"), "--key-file".to_string(), f("server.key")]
            }).unwrap_or_default())
            .arg(format!("--heartbeat-interval={HEARTBEAT_MS}"))
            .arg(format!("--election-timeout={ELECTION_MS}"))
            .args(["--logger", "zap", "--log-level", "warn"])
            .arg(format!("--log-outputs={}", dir.join("etcd.log").display()))
            // Extra flags come last: Go's flag package keeps the last value of a repeated flag.
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log")).map(Stdio::from).unwrap_or_else(|_| Stdio::null()));
        self.process.spawn(cmd, "apt-get install etcd-server")
    }

    /// Kills the process (SIGKILL, by its pid) and reaps it; the data stays.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Sends `signal` (SIGSTOP to pause, SIGCONT to resume) to this member's own pid.
    pub fn signal(&self, signal: i32) -> Result<(), String> {
        self.process.signal(signal)
    }
}

/// One member or a Raft cluster; dropping it stops every member by pid.
pub struct EtcdCluster {
    /// The members, in `--initial-cluster` order.
    pub members: Vec<EtcdMember>,
    /// Extra etcd flags for every member (they override the defaults).
    extra: Vec<String>,
    /// The directory of the TLS files (`server.crt`, `server.key`, `ca.crt`), with TLS.
    tls: Option<PathBuf>,
}

impl EtcdCluster {
    /// Starts `members` members with these extra etcd flags and waits until every one is
    /// healthy. Ports are picked now; if a member cannot take its ports (taken meanwhile) the
    /// whole start is retried on new ones.
    pub fn start(members: usize, extra: &[String]) -> Result<EtcdCluster, String> {
        Self::start_with_tls(members, extra, None)
    }

    /// As [`EtcdCluster::start`]; with `tls` (the directory of a CA's `server.crt` and
    /// `server.key` for 127.0.0.1) every member also serves its clients over TLS on a port of
    /// its own.
    pub fn start_with_tls(members: usize, extra: &[String], tls: Option<&Path>) -> Result<EtcdCluster, String> {
        if members == 0 {
            return Err("an etcd cluster needs at least one member".into());
        }
        let mut failures = Vec::new();
        for _ in 0..3 {
            let mut c = EtcdCluster { members: Vec::new(), extra: extra.to_vec(), tls: tls.map(Path::to_path_buf) };
            match c.launch(members) {
                Ok(()) => return Ok(c),
                Err(why) => failures.push(why),
            }
        }
        Err(format!("etcd did not start: {}", failures.join("; ")))
    }

    fn launch(&mut self, n: usize) -> Result<(), String> {
        let mut ports = Ports::default();
        for i in 1..=n {
            let secure_port = if self.tls.is_some() { Some(ports.pick()?) } else { None };
            let (port, peer_port) = (ports.pick()?, ports.pick()?);
            let process = ServerProcess::new("etcd")?;
            self.members.push(EtcdMember { name: format!("m{i}"), port, peer_port, secure_port, member_id: None, process });
        }
        let (cluster, token) = (self.initial_cluster(), self.token());
        for m in &mut self.members {
            m.spawn(&cluster, &token, self.tls.as_deref(), &self.extra)?;
        }
        let all: Vec<usize> = (0..n).collect();
        self.await_healthy(&all, READY_LIMIT)?;
        for m in &mut self.members {
            m.member_id = status(m.port).map(|(id, _)| id);
        }
        Ok(())
    }

    /// `m1=http://127.0.0.1:Q1,m2=...`: every member's peer URL.
    fn initial_cluster(&self) -> String {
        self.members.iter().map(|m| format!("{}=http://127.0.0.1:{}", m.name, m.peer_port)).collect::<Vec<_>>().join(",")
    }

    /// The cluster's `--initial-cluster-token` (from its first peer port: unique among the
    /// clusters running on this machine, so two never merge).
    fn token(&self) -> String {
        format!("lockgate-{}", self.members.first().map_or(0, |m| m.peer_port))
    }

    /// Waits until each of `which` is healthy; a member that exits or is still not healthy at
    /// `limit` fails the wait (the ones that run are left running).
    fn await_healthy(&mut self, which: &[usize], limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let mut waiting: Vec<usize> = which.to_vec();
        while !waiting.is_empty() {
            let mut still = Vec::new();
            for &i in &waiting {
                if let Some(why) = self.members[i].exited() {
                    return Err(why);
                }
                if !healthy(self.members[i].port) {
                    still.push(i);
                }
            }
            waiting = still;
            if waiting.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let names: Vec<String> = waiting.iter().map(|i| format!("{} ({})", self.members[*i].name, self.members[*i].log_tail())).collect();
                return Err(format!("members not healthy after {} s: {}", limit.as_secs(), names.join(", ")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// `etcd://127.0.0.1:P1,127.0.0.1:P2,...` (every member, in order); with TLS
    /// `etcds://` over the TLS ports.
    pub fn url(&self) -> String {
        match self.members.iter().map(|m| m.secure_port).collect::<Option<Vec<u16>>>() {
            Some(secure) if self.tls.is_some() => etcd_url(&secure).replacen("etcd://", "etcds://", 1),
            _ => self.plain_url(),
        }
    }

    /// `etcd://` over the plain client ports (with or without TLS).
    pub fn plain_url(&self) -> String {
        etcd_url(&self.members.iter().map(|m| m.port).collect::<Vec<_>>())
    }

    /// `http://127.0.0.1:P1,http://...`: the endpoints for `etcdctl --endpoints`.
    pub fn endpoints(&self) -> String {
        self.members.iter().map(|m| format!("http://127.0.0.1:{}", m.port)).collect::<Vec<_>>().join(",")
    }

    /// Kills member `i` (SIGKILL); its data stays for [`EtcdCluster::start_member`].
    pub fn stop_member(&mut self, i: usize) {
        self.members[i].stop();
    }

    /// Starts member `i` again on its ports with its data (it rejoins from its log; a single
    /// member keeps its keys and leases, whose TTLs etcd renews on a restart). Kills it first
    /// if it runs. Waits until it is healthy when a majority runs (else it cannot be: only
    /// until its client port listens).
    pub fn start_member(&mut self, i: usize) -> Result<(), String> {
        self.members[i].stop();
        let (cluster, token) = (self.initial_cluster(), self.token());
        let mut failures = Vec::new();
        for _ in 0..5 {
            self.members[i].spawn(&cluster, &token, self.tls.as_deref(), &self.extra)?;
            let running = self.members.iter().filter(|m| m.running()).count();
            let r = if running * 2 > self.members.len() { self.await_healthy(&[i], READY_LIMIT) } else { self.await_listening(i) };
            match r {
                Ok(()) => return Ok(()),
                // The old sockets may linger a moment; the ports must stay the same.
                Err(e) => failures.push(e),
            }
            self.members[i].stop();
            std::thread::sleep(Duration::from_millis(300));
        }
        Err(format!("member {} did not restart: {}", self.members[i].name, failures.join("; ")))
    }

    fn await_listening(&mut self, i: usize) -> Result<(), String> {
        let m = &mut self.members[i];
        m.process.await_listening(m.port, READY_LIMIT).map_err(|why| format!("member {}: {why}: {}", m.name, m.log_tail()))
    }

    /// Every member's role now: `leader` (it names itself leader), `follower` (it names
    /// another), or `None` (stopped, paused, starting, or without a leader).
    pub fn roles(&self) -> Vec<Option<&'static str>> {
        self.members
            .iter()
            .map(|m| {
                if !m.running() {
                    return None;
                }
                let (id, leader) = status(m.port)?;
                Some(if leader? == id { "leader" } else { "follower" })
            })
            .collect()
    }

    /// The member that answers as leader now, if any.
    pub fn leader_now(&self) -> Option<usize> {
        self.roles().iter().position(|r| *r == Some("leader"))
    }

    /// Waits up to `limit` for a leader (after the old one was stopped or paused, the others
    /// elect one within an election timeout or two) and returns its index.
    pub fn await_leader(&self, limit: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(i) = self.leader_now() {
                return Ok(i);
            }
            if Instant::now() >= deadline {
                return Err(format!("no leader after {} s (roles {:?})", limit.as_secs(), self.roles()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A numeric etcd flag as the members run with it: the last extra `--key=N` / `--key N`
    /// if one was given, else `default`.
    pub fn setting(&self, key: &str, default: u64) -> u64 {
        let flag = format!("--{key}");
        let mut value = None;
        for (i, a) in self.extra.iter().enumerate() {
            if let Some(v) = a.strip_prefix(&flag).and_then(|r| r.strip_prefix('=')) {
                value = v.parse().ok();
            } else if *a == flag {
                value = self.extra.get(i + 1).and_then(|v| v.parse().ok());
            }
        }
        value.unwrap_or(default)
    }

    /// The shortest lease TTL the members grant (s): 1.5 election timeouts, rounded up (a
    /// shorter ask is granted this).
    pub fn min_ttl_s(&self) -> u64 {
        let heartbeat = self.setting("heartbeat-interval", HEARTBEAT_MS).max(1);
        let ticks = self.setting("election-timeout", ELECTION_MS) / heartbeat;
        ((3 * ticks) / 2 * heartbeat).div_ceil(1000)
    }

    /// The pids of the running members.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(EtcdMember::pid).collect()
    }
}

/// `etcd://127.0.0.1:P1,127.0.0.1:P2,...` over these client ports.
pub fn etcd_url(ports: &[u16]) -> String {
    let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    format!("etcd://{}", hosts.join(","))
}
