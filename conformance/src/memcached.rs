//! Throwaway memcached servers (Debian's `memcached`): a free loopback port each, no UDP, a
//! memory limit (`-m`, MB: small for the eviction tests), stopped by their own pid. A restart
//! brings a server back empty on its port, as memcached always comes back.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::ports::free_port;
use crate::process::ServerProcess;

/// The memory limit unless asked otherwise (MB): plenty for lock items.
pub const DEFAULT_MEMORY_MB: u32 = 64;

/// The memcached binary (`LOCKGATE_MEMCACHED` overrides it).
fn binary() -> String {
    std::env::var("LOCKGATE_MEMCACHED").unwrap_or_else(|_| "memcached".into())
}

/// One running (or stopped) memcached.
pub struct MemcachedServer {
    pub port: u16,
    pub memory_mb: u32,
    extra: Vec<String>,
    process: ServerProcess,
}

impl MemcachedServer {
    /// Starts a server with `memory_mb` MB and the `extra` arguments, on a free port (another
    /// one if its port was taken meanwhile).
    pub fn start(memory_mb: u32, extra: &[String]) -> Result<Self, String> {
        let mut s = MemcachedServer { port: 0, memory_mb, extra: extra.to_vec(), process: ServerProcess::new("memcached")? };
        let mut failures = Vec::new();
        for _ in 0..5 {
            s.port = free_port().map_err(|e| e.to_string())?;
            match s.spawn() {
                Ok(()) => return Ok(s),
                Err(e) => failures.push(e),
            }
        }
        Err(format!("memcached did not start: {}", failures.join("; ")))
    }

    fn spawn(&mut self) -> Result<(), String> {
        let mut cmd = Command::new(binary());
        cmd.args(["-l", "127.0.0.1", "-p", &self.port.to_string(), "-U", "0", "-m", &self.memory_mb.to_string(), "-t", "2", "-c", "4096"]);
        // memcached refuses to run as root unless told which user to be.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.args(["-u", "root"]);
        }
        cmd.args(&self.extra).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        self.process.spawn(cmd, "apt-get install memcached")?;
        if let Err(e) = self.process.await_listening(self.port, Duration::from_secs(10)) {
            self.process.stop();
            return Err(e);
        }
        Ok(())
    }

    /// `memcached://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("memcached://127.0.0.1:{}", self.port)
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.process.pid()
    }

    /// Kills the process (SIGKILL, by its pid) and reaps it.
    pub fn stop(&mut self) {
        self.process.stop();
    }

    /// Starts it again on the same port, empty (killing it first if it runs).
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let port = self.port;
        crate::process::start_again("memcached", port, Duration::from_millis(200), || self.spawn())
    }

    /// Sends `signal` (SIGSTOP / SIGCONT) to its own pid.
    pub fn signal(&self, signal: i32) -> Result<(), String> {
        self.process.signal(signal)
    }
}

/// `memcached://h1:p1,h2:p2,...` over these servers.
pub fn memcached_url(servers: &[MemcachedServer]) -> String {
    let hosts: Vec<String> = servers.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
    format!("memcached://{}", hosts.join(","))
}
