//! One throwaway redis-server: a free loopback port, data in its own temp dir, no persistence,
//! stopped by its own pid (never by name).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::ports::{await_listening, free_port};
use crate::spawn::{fresh_dir, spawn_server};

/// A running (or stopped, see [`RedisServer::stop`]) redis-server.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: PathBuf,
    extra: Vec<String>,
    /// The port speaks TLS only (`--port 0 --tls-port P`; `extra` carries the certificates).
    tls: bool,
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
