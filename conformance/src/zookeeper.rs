//! Throwaway ZooKeeper servers from Debian's `zookeeper` package: one standalone server or an
//! ensemble of N members on free loopback ports, data in temp dirs, each member a `java`
//! process started here and stopped by its own pid (never by name).
//!
//! Settings every member gets (conformance/README.md, "ZooKeeper kinds"): a short `tickTime`
//! (200 ms) so sessions can be short, `minSessionTimeout` 800 ms (four ticks: PROTOCOL.md §9's
//! assumption) and `maxSessionTimeout` 60 s
//! (else ZooKeeper caps sessions at 20 ticks: 4 s), no admin server (it would take port 8080),
//! every four-letter word allowed (readiness and the leader are read with `srvr`), no fsync (a
//! killed process loses nothing the kernel already has; only a machine crash would), and empty
//! container nodes swept every 500 ms (`znode.container.checkIntervalMs`; the default is 60 s).
//!
//! With TLS (`test-servers zookeeper --tls`) every member also serves a TLS-only
//! `secureClientPort` (Netty, a PEM key store of the launcher's throwaway CA), asking clients
//! for a certificate but not requiring one (`ssl.clientAuth=want`: one presented must be
//! signed by that CA); the plain client port stays for `srvr` and the fixtures.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::process::{Ports, ServerProcess};

/// The tick every member runs with.
pub const TICK_MS: u64 = 200;
/// The shortest session the servers grant: four ticks (a shorter ask gets this). The core counts
/// a confirmation valid for half the session, which is safe while the tick is at most a quarter
/// of it (PROTOCOL.md §9).
pub const MIN_SESSION_MS: u64 = 800;
/// The longest session a client may ask for (Curator's default session timeout is 60 s).
pub const MAX_SESSION_MS: u64 = 60_000;
/// How long a member may take from `java` to serving (a JVM on a loaded 2-core machine).
const READY_LIMIT: Duration = Duration::from_secs(60);

/// The Netty jars a TLS member adds to the class path (Debian's `libnetty-java`): the codec
/// and resolver the server's Netty factory needs beside those zookeeper.jar's manifest names.
const NETTY_JARS: [&str; 3] = ["netty-codec.jar", "netty-resolver.jar", "netty-transport-native-unix-common.jar"];

/// The java binary (`LOCKGATE_JAVA` overrides it).
fn java() -> String {
    std::env::var("LOCKGATE_JAVA").unwrap_or_else(|_| "java".into())
}

/// The class path of Debian's ZooKeeper server (`LOCKGATE_ZOOKEEPER_CLASSPATH` overrides it):
/// `zookeeper.jar` names its other jars in its manifest; the log4j binding is added here.
fn classpath() -> String {
    std::env::var("LOCKGATE_ZOOKEEPER_CLASSPATH").unwrap_or_else(|_| {
        ["zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar"].iter().map(|j| format!("/usr/share/java/{j}")).collect::<Vec<_>>().join(":")
    })
}

/// Sends a four-letter word (`srvr`, `ruok`, `mntr`, ...) to a ZooKeeper port and returns the
/// answer (the server closes the connection after it).
pub fn four_letter(port: u16, word: &str, timeout: Duration) -> std::io::Result<String> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(word.as_bytes())?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// The `Mode:` a member's `srvr` reports (`standalone`, `leader`, `follower`, `observer`), or
/// `None` while it does not serve (starting, no quorum, stopped, paused: `timeout` bounds the
/// wait for a paused one).
pub fn mode(port: u16, timeout: Duration) -> Option<String> {
    let text = four_letter(port, "srvr", timeout).ok()?;
    text.lines().find_map(|l| l.strip_prefix("Mode:")).map(|m| m.trim().to_string())
}

/// One member: its ports, its directory (config, `data/` with `myid`, log) and its process.
pub struct ZkMember {
    /// `myid`, from 1.
    pub id: usize,
    /// The client port.
    pub port: u16,
    /// The port followers reach the leader on (ensembles only).
    pub quorum_port: u16,
    /// The leader-election port (ensembles only).
    pub election_port: u16,
    /// The TLS client port (`secureClientPort`; TLS ensembles only).
    pub secure_port: Option<u16>,
    process: ServerProcess,
}

impl ZkMember {
    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// The member's directory (`zoo.cfg`, `data/`, `zookeeper.log`).
    pub fn dir(&self) -> &Path {
        self.process.dir()
    }

    /// `127.0.0.1:<client port>`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Whether the process has exited (it is then reaped).
    fn exited(&mut self) -> Option<String> {
        let status = self.process.exited()?;
        Some(format!("member {} exited with {status}: {}", self.id, self.log_tail()))
    }

    /// The last lines of the member's log, for errors.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir().join("zookeeper.log")).unwrap_or_default();
        let mut tail: Vec<&str> = text.lines().filter(|l| l.contains("ERROR") || l.contains("WARN") || l.contains("Exception")).rev().take(3).collect();
        tail.reverse();
        tail.join(" | ")
    }

    /// Starts the java process on the member's config (already written); `tls`: the Netty
    /// factory's jars too (Debian's zookeeper.jar manifest lists only some of Netty's).
    fn spawn(&mut self, tls: bool) -> Result<(), String> {
        let mut classpath = classpath();
        if tls {
            for jar in NETTY_JARS {
                classpath.push_str(&format!(":/usr/share/java/{jar}"));
            }
        }
        let dir = self.dir().to_path_buf();
        let log_config = dir.join("log4j.properties");
        let mut cmd = Command::new(java());
        cmd.args(["-Xmx192m", "-Xms32m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"])
            // A dead member's election port refuses at once on loopback; a paused one would
            // hold the others' election connects for the default 5 s.
            .arg("-Dzookeeper.cnxTimeout=1000")
            // Empty container nodes (lock parents) are swept every 500 ms instead of every
            // minute, so "nothing is left" can be checked: a parent made persistent would stay.
            .arg("-Dznode.container.checkIntervalMs=500")
            .arg(format!("-Dzookeeper.log.dir={}", dir.display()))
            .arg(format!("-Dlog4j.configuration=file:{}", log_config.display()))
            .arg("-cp")
            .arg(classpath)
            .arg("org.apache.zookeeper.server.quorum.QuorumPeerMain")
            .arg(dir.join("zoo.cfg"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log")).map(Stdio::from).unwrap_or_else(|_| Stdio::null()));
        self.process.spawn(cmd, "apt-get install zookeeper")
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

/// A standalone server (one member) or an ensemble; dropping it stops every member by pid.
pub struct ZkEnsemble {
    /// The members, `myid` 1..=N in order.
    pub members: Vec<ZkMember>,
    /// Extra `key=value` lines for every member's `zoo.cfg` (they override the defaults).
    settings: Vec<String>,
    /// The directory of the TLS files (`server.pem`, `ca.crt`; [`crate::tls::TlsFiles`]) when
    /// the members serve TLS too.
    tls: Option<PathBuf>,
}

impl ZkEnsemble {
    /// Starts `members` members (1: a standalone server) with these extra `zoo.cfg` lines and
    /// waits until every one serves (`srvr` reports a `Mode:`). Ports are picked now; if a
    /// member cannot take its port (taken meanwhile) the whole start is retried on new ports.
    pub fn start(members: usize, settings: &[String]) -> Result<ZkEnsemble, String> {
        Self::start_with_tls(members, settings, None)
    }

    /// As [`start`](Self::start); with `tls` (a directory holding `server.pem` and `ca.crt`)
    /// every member serves TLS on a `secureClientPort` too.
    pub fn start_with_tls(members: usize, settings: &[String], tls: Option<&Path>) -> Result<ZkEnsemble, String> {
        if members == 0 {
            return Err("a ZooKeeper ensemble needs at least one member".into());
        }
        if let Some(bad) = settings.iter().find(|s| !s.contains('=')) {
            return Err(format!("zoo.cfg settings are key=value, got {bad:?}"));
        }
        let mut failures = Vec::new();
        for _ in 0..3 {
            let mut e = ZkEnsemble { members: Vec::new(), settings: settings.to_vec(), tls: tls.map(Path::to_path_buf) };
            match e.launch(members) {
                Ok(()) => return Ok(e),
                Err(why) => failures.push(why),
            }
        }
        Err(format!("ZooKeeper did not start: {}", failures.join("; ")))
    }

    fn launch(&mut self, n: usize) -> Result<(), String> {
        let mut ports = Ports::default();
        for id in 1..=n {
            let secure_port = if self.tls.is_some() { Some(ports.pick()?) } else { None };
            let (port, quorum_port, election_port) = (ports.pick()?, if n > 1 { ports.pick()? } else { 0 }, if n > 1 { ports.pick()? } else { 0 });
            let process = ServerProcess::new("zookeeper")?;
            self.members.push(ZkMember { id, port, quorum_port, election_port, secure_port, process });
        }
        for i in 0..n {
            self.write_config(i)?;
        }
        let tls = self.tls.is_some();
        for m in &mut self.members {
            m.spawn(tls)?;
        }
        let all: Vec<usize> = (0..n).collect();
        self.await_serving(&all, READY_LIMIT)
    }

    /// Writes member `i`'s `zoo.cfg`, `data/myid` and `log4j.properties`.
    fn write_config(&self, i: usize) -> Result<(), String> {
        let m = &self.members[i];
        let data = m.dir().join("data");
        std::fs::create_dir_all(&data).map_err(|e| format!("{}: {e}", data.display()))?;
        let mut cfg = vec![
            format!("tickTime={TICK_MS}"),
            // Ticks a follower may take to connect and sync (10 s), and may lag (3 s).
            "initLimit=50".into(),
            "syncLimit=15".into(),
            format!("minSessionTimeout={MIN_SESSION_MS}"),
            format!("maxSessionTimeout={MAX_SESSION_MS}"),
            format!("dataDir={}", data.display()),
            format!("clientPort={}", m.port),
            "clientPortAddress=127.0.0.1".into(),
            "admin.enableServer=false".into(),
            "4lw.commands.whitelist=*".into(),
            "forceSync=no".into(),
            // Transaction logs of 1 MiB, not 64 MiB, preallocated per member.
            "preAllocSize=1024".into(),
            "maxClientCnxns=0".into(),
        ];
        if let (Some(tls), Some(secure_port)) = (&self.tls, m.secure_port) {
            // zoo.cfg keys ZooKeeper does not know become `zookeeper.<key>` system properties,
            // which is where the Netty factory and the TLS settings are read from.
            let file = |f: &str| tls.join(f).display().to_string();
            cfg.extend([
                format!("secureClientPort={secure_port}"),
                "secureClientPortAddress=127.0.0.1".into(),
                "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory".into(),
                format!("ssl.keyStore.location={}", file("server.pem")),
                "ssl.keyStore.type=PEM".into(),
                format!("ssl.trustStore.location={}", file("ca.crt")),
                "ssl.trustStore.type=PEM".into(),
                "ssl.clientAuth=want".into(),
            ]);
        }
        if self.members.len() > 1 {
            for o in &self.members {
                cfg.push(format!("server.{}=127.0.0.1:{}:{}", o.id, o.quorum_port, o.election_port));
            }
            std::fs::write(data.join("myid"), format!("{}\n", m.id)).map_err(|e| e.to_string())?;
        }
        // Extra settings replace a default of the same key.
        for s in &self.settings {
            let key = s.split('=').next().unwrap_or_default().trim();
            cfg.retain(|l| l.split('=').next() != Some(key));
            cfg.push(s.clone());
        }
        std::fs::write(m.dir().join("zoo.cfg"), cfg.join("\n") + "\n").map_err(|e| e.to_string())?;
        let log = m.dir().join("zookeeper.log");
        let log4j = format!(
            "log4j.rootLogger=INFO, FILE\nlog4j.appender.FILE=org.apache.log4j.FileAppender\nlog4j.appender.FILE.File={}\n\
             log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\nlog4j.appender.FILE.layout.ConversionPattern=%d{{ISO8601}} %-5p [%t] %c{{1}} - %m%n\n",
            log.display()
        );
        std::fs::write(m.dir().join("log4j.properties"), log4j).map_err(|e| e.to_string())
    }

    /// Waits until each of `which` reports a `Mode:`; a member that exits or is still not
    /// serving at `limit` fails the wait (the ones that run are left running).
    fn await_serving(&mut self, which: &[usize], limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let mut waiting: Vec<usize> = which.to_vec();
        while !waiting.is_empty() {
            let mut still = Vec::new();
            for &i in &waiting {
                if let Some(why) = self.members[i].exited() {
                    return Err(why);
                }
                if mode(self.members[i].port, Duration::from_millis(500)).is_none() {
                    still.push(i);
                }
            }
            waiting = still;
            if waiting.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let ids: Vec<String> = waiting.iter().map(|i| format!("{} ({})", self.members[*i].id, self.members[*i].log_tail())).collect();
                return Err(format!("members not serving after {} s: {}", limit.as_secs(), ids.join(", ")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// `zookeeper://127.0.0.1:P1,127.0.0.1:P2,...` (every member, in order); with TLS
    /// `zookeeper+tls://` over the secure ports.
    pub fn url(&self) -> String {
        match self.tls {
            None => self.plain_url(),
            Some(_) => zookeeper_url(&self.members.iter().filter_map(|m| m.secure_port).collect::<Vec<_>>()).replacen("zookeeper://", "zookeeper+tls://", 1),
        }
    }

    /// `zookeeper://` over the plain client ports (TLS or not).
    pub fn plain_url(&self) -> String {
        zookeeper_url(&self.members.iter().map(|m| m.port).collect::<Vec<_>>())
    }

    /// Whether member `i` exists.
    pub fn check(&self, i: usize) -> Result<usize, String> {
        if i < self.members.len() {
            Ok(i)
        } else {
            Err(format!("no member {i}"))
        }
    }

    /// Kills member `i` (SIGKILL); its data stays for [`ZkEnsemble::start_member`].
    pub fn stop_member(&mut self, i: usize) {
        self.members[i].stop();
    }

    /// Starts member `i` again on its ports with its data (a member rejoining with its log; a
    /// standalone server keeps its sessions and nodes if it is back within their timeout).
    /// Kills it first if it runs. Waits until it serves when a majority of the ensemble runs
    /// (else it cannot: only until its client port listens).
    pub fn start_member(&mut self, i: usize) -> Result<(), String> {
        self.members[i].stop();
        let mut failures = Vec::new();
        for _ in 0..5 {
            self.members[i].spawn(self.tls.is_some())?;
            let running = self.members.iter().filter(|m| m.process.running()).count();
            let r = if running * 2 > self.members.len() { self.await_serving(&[i], READY_LIMIT) } else { self.await_listening(i) };
            match r {
                Ok(()) => return Ok(()),
                // The old sockets may linger a moment; the ports must stay the same.
                Err(e) => failures.push(e),
            }
            self.members[i].stop();
            std::thread::sleep(Duration::from_millis(300));
        }
        Err(format!("member {} did not restart: {}", self.members[i].id, failures.join("; ")))
    }

    fn await_listening(&mut self, i: usize) -> Result<(), String> {
        let m = &mut self.members[i];
        m.process.await_listening(m.port, READY_LIMIT).map_err(|why| format!("member {}: {why}: {}", m.id, m.log_tail()))
    }

    /// Every member's mode now (`None`: not serving, stopped or paused).
    pub fn modes(&self) -> Vec<Option<String>> {
        self.members.iter().map(|m| if m.process.running() { mode(m.port, Duration::from_millis(500)) } else { None }).collect()
    }

    /// The member serving as leader now (a standalone server is its own leader), if any.
    pub fn leader_now(&self) -> Option<usize> {
        self.modes().iter().position(|m| matches!(m.as_deref(), Some("leader" | "standalone")))
    }

    /// Waits up to `limit` for a leader (after the old one was stopped, the others elect one
    /// within a few ticks) and returns its index.
    pub fn await_leader(&self, limit: Duration) -> Result<usize, String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(i) = self.leader_now() {
                return Ok(i);
            }
            if Instant::now() >= deadline {
                return Err(format!("no leader after {} s (modes {:?})", limit.as_secs(), self.modes()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A numeric `zoo.cfg` setting as the members run with it: the extra line for `key` if one
    /// was given, else `default`.
    pub fn setting(&self, key: &str, default: u64) -> u64 {
        self.settings.iter().rev().find_map(|l| l.split_once('=').filter(|(k, _)| k.trim() == key).and_then(|(_, v)| v.trim().parse().ok())).unwrap_or(default)
    }

    /// The pids of the running members.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(ZkMember::pid).collect()
    }
}

/// `zookeeper://127.0.0.1:P1,127.0.0.1:P2,...` over these client ports.
pub fn zookeeper_url(ports: &[u16]) -> String {
    let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    format!("zookeeper://{}", hosts.join(","))
}
