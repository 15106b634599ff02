//! One throwaway redis-server: a free loopback port, data in its own temp dir, no persistence,
//! stopped by its own pid (never by name).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex, OnceLock};

use crate::ports::{await_listening, free_port};

/// Set by the launcher binary and the orchestrator: servers they start die with them even if
/// they are SIGKILLed (`PR_SET_PDEATHSIG`), so a run ended from outside (Ctrl-C, SIGPIPE through
/// `| head`, `kill -9`) leaves no server behind.
static DIE_WITH_PARENT: AtomicBool = AtomicBool::new(false);

/// Makes every server started afterwards (through [`spawn_server`]) die when this process ends,
/// however it ends.
pub fn die_with_parent() {
    DIE_WITH_PARENT.store(true, Ordering::SeqCst);
}

/// One request to the spawner thread: the command and where its child goes.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Starts a server process. After [`die_with_parent`] the process gets `PR_SET_PDEATHSIG`
/// (SIGKILL). Linux sends that signal when the *thread* that forked the child ends, not the
/// process, and the orchestrator starts servers from tokio's blocking threads, which end when
/// idle; so every such spawn happens on one thread that lives as long as the process.
pub fn spawn_server(mut cmd: Command) -> std::io::Result<Child> {
    if !DIE_WITH_PARENT.load(Ordering::SeqCst) {
        return cmd.spawn();
    }
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("server-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(spawn_dying_with_us(&mut cmd));
                }
            })
            .expect("a thread for starting servers");
        Mutex::new(tx)
    });
    let (reply, child) = mpsc::channel();
    let sent = spawner.lock().unwrap_or_else(|e| e.into_inner()).send((cmd, reply));
    if sent.is_err() {
        return Err(std::io::Error::other("the server-spawner thread is gone"));
    }
    child.recv().map_err(|_| std::io::Error::other("the server-spawner thread is gone"))?
}

/// Spawns `cmd` with `PR_SET_PDEATHSIG` (SIGKILL) on the calling thread. A parent that died
/// between fork and prctl would leave the child unwatched, so the child checks its parent.
fn spawn_dying_with_us(cmd: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // SAFETY: getpid is always safe.
    let parent = unsafe { libc::getpid() };
    // SAFETY: prctl and getppid are async-signal-safe and touch nothing of the parent's state.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the launcher died while starting the server"));
            }
            Ok(())
        });
    }
    cmd.spawn()
}

/// A running (or stopped, see [`RedisServer::stop`]) redis-server.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    extra: Vec<String>,
    /// The port speaks TLS only (`--port 0 --tls-port P`; `extra` carries the certificates).
    tls: bool,
}

/// A fresh directory under `$LOCKGATE_TMP` (or the system temp dir): a counter, not just the
/// port, names it, because a port can come back within one process and two live servers in one
/// dir collide (a cluster node refuses a `nodes.conf` another node holds).
pub fn fresh_dir(tag: &str) -> Result<PathBuf, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = std::env::var_os("LOCKGATE_TMP").map(PathBuf::from).unwrap_or_else(std::env::temp_dir);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = base.join(format!("lockgate-{tag}-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// The redis-server binary (`LOCKGATE_REDIS_SERVER` overrides it).
fn binary() -> String {
    std::env::var("LOCKGATE_REDIS_SERVER").unwrap_or_else(|_| "redis-server".into())
}

impl RedisServer {
    /// A plain server (`--save "" --appendonly no`).
    pub fn start() -> Result<Self, String> {
        Self::start_with(Vec::new())
    }

    /// A server with `extra` command-line arguments. One that exits at once (its port was taken
    /// between the probe and its bind) is started again on a new port.
    pub fn start_with(extra: Vec<String>) -> Result<Self, String> {
        Self::start_as(extra, false)
    }

    /// As [`RedisServer::start_with`]; with `tls` its port is TLS-only (`extra` must carry the
    /// certificate arguments, [`crate::tls::TlsFiles::server_args`]).
    pub fn start_as(extra: Vec<String>, tls: bool) -> Result<Self, String> {
        let mut s = RedisServer { port: 0, child: None, dir: fresh_dir("redis")?, extra, tls };
        let mut failures = Vec::new();
        for _ in 0..5 {
            s.port = free_port().map_err(|e| e.to_string())?;
            match s.spawn() {
                Ok(()) => return Ok(s),
                Err(e) => failures.push(e),
            }
        }
        let _ = std::fs::remove_dir_all(&s.dir);
        Err(format!("redis-server did not start: {}", failures.join("; ")))
    }

    /// One start on `self.port`: Ok once the port accepts connections, else why not (with the
    /// tail of the server's log).
    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.join("redis.log");
        let _ = std::fs::remove_file(&log);
        let mut cmd = Command::new(binary());
        let port = self.port.to_string();
        if self.tls {
            cmd.args(["--port", "0", "--tls-port", &port]);
        } else {
            cmd.args(["--port", &port]);
        }
        cmd.args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .args(&self.extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = spawn_server(cmd).map_err(|e| format!("cannot start {} (apt-get install redis-server): {e}", binary()))?;
        match await_listening(&mut child, self.port) {
            Ok(()) => {
                self.child = Some(child);
                Ok(())
            }
            Err(why) => {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(3).collect();
                Err(format!("{why}: {}", tail.join(" | ")))
            }
        }
    }

    /// `redis://127.0.0.1:<port>` (`rediss://` for a TLS port).
    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", if self.tls { "rediss" } else { "redis" }, self.port)
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's data directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A synchronous connection for fixture steps and checks.
    pub fn connection(&self) -> Result<redis::Connection, String> {
        redis::Client::open(self.url()).and_then(|c| c.get_connection()).map_err(|e| format!("port {}: {e}", self.port))
    }

    /// Kills the process (SIGKILL, by its pid) and reaps it; the directory stays for a restart.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts a stopped server again on the same port, with no data (nothing was persisted): a
    /// restart without persistence. Kills it first if it runs.
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let port = self.port;
        crate::process::start_again("redis-server", port, std::time::Duration::from_millis(200), || self.spawn())
    }

    /// Sends `signal` (e.g. `libc::SIGSTOP` to pause, `libc::SIGCONT` to resume) to this
    /// server's own pid.
    pub fn signal(&self, signal: i32) -> Result<(), String> {
        let pid = self.pid().ok_or("the server is stopped")?;
        // SAFETY: kill(2) on a pid this process started and has not reaped.
        if unsafe { libc::kill(pid as libc::pid_t, signal) } == 0 {
            Ok(())
        } else {
            Err(format!("kill({pid}, {signal}): {}", std::io::Error::last_os_error()))
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
