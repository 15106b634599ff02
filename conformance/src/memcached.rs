//! Throwaway memcached servers (Debian's `memcached`): a free loopback port each, no UDP, a
//! memory limit (`-m`, MB: small for the eviction tests), stopped by their own pid. A restart
//! brings a server back empty on its port, as memcached always comes back.

use std::process::{Child, Command, Stdio};

use crate::ports::{await_listening, free_port};
use crate::server::spawn_server;

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
    child: Option<Child>,
}

impl MemcachedServer {
    /// Starts a server with `memory_mb` MB and the `extra` arguments, on a free port (another
    /// one if its port was taken meanwhile).
    pub fn start(memory_mb: u32, extra: &[String]) -> Result<Self, String> {
        let mut s = MemcachedServer { port: 0, memory_mb, extra: extra.to_vec(), child: None };
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
        let mut child = spawn_server(cmd).map_err(|e| format!("cannot start {} (apt-get install memcached): {e}", binary()))?;
        await_listening(&mut child, self.port)?;
        self.child = Some(child);
        Ok(())
    }

    /// `memcached://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("memcached://127.0.0.1:{}", self.port)
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the process (SIGKILL, by its pid) and reaps it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port, empty (killing it first if it runs).
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        let mut failures = Vec::new();
        for _ in 0..5 {
            match self.spawn() {
                Ok(()) => return Ok(()),
                Err(e) => failures.push(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        Err(format!("memcached did not restart on port {}: {}", self.port, failures.join("; ")))
    }

    /// Sends `signal` (SIGSTOP / SIGCONT) to its own pid.
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

impl Drop for MemcachedServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `memcached://h1:p1,h2:p2,...` over these servers.
pub fn memcached_url(servers: &[MemcachedServer]) -> String {
    let hosts: Vec<String> = servers.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect();
    format!("memcached://{}", hosts.join(","))
}
