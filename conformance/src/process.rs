//! One server process of a test deployment with its own temp dir: started here, watched, paused
//! and resumed, and stopped by its own pid (never by name). The ZooKeeper and etcd members and
//! the SQL servers are each one of these plus their ports and settings; what differs between
//! them (the command line, when it is ready) stays in their own modules.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// A server process (running or stopped) and its directory, removed on drop.
pub struct ServerProcess {
    dir: PathBuf,
    child: Option<Child>,
}

impl ServerProcess {
    /// A stopped process with a fresh directory under `$LOCKGATE_TMP` named for `tag`.
    pub fn new(tag: &str) -> Result<ServerProcess, String> {
        Ok(ServerProcess { dir: crate::spawn::fresh_dir(tag)?, child: None })
    }

    /// The process id while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The directory (configuration, data, logs).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the process runs (started and not stopped; a paused one runs).
    pub fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts `cmd` (dying with the launcher if it asked, [`crate::spawn::die_with_parent`]);
    /// `install` says what provides the binary, for the error when it is missing.
    pub fn spawn(&mut self, cmd: Command, install: &str) -> Result<(), String> {
        let program = cmd.get_program().to_string_lossy().into_owned();
        let child = crate::spawn::spawn_server(cmd).map_err(|e| format!("cannot start {program} ({install}): {e}"))?;
        self.child = Some(child);
        Ok(())
    }

    /// The exit status if the process has exited (it is then reaped and counts as stopped).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok()??;
        self.child = None;
        Some(status)
    }

    /// Kills the process (SIGKILL, by its pid) and reaps it; the directory stays.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits up to `limit` for the process to exit by itself (after a shutdown signal), then
    /// kills it; reaped either way.
    pub fn stop_within(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.running() && self.exited().is_none() {
            if Instant::now() >= deadline {
                self.stop();
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `signal` (SIGSTOP to pause, SIGCONT to resume, ...) to this process's own pid.
    pub fn signal(&self, signal: i32) -> Result<(), String> {
        let pid = self.pid().ok_or("the server is stopped")?;
        send(pid, signal)
    }

    /// Waits until `port` on 127.0.0.1 accepts connections; an error (the process's exit status,
    /// or a closed port at `limit`) if not. The process is left as it is either way.
    pub fn await_listening(&mut self, port: u16, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(());
            }
            if let Some(status) = self.exited() {
                return Err(format!("exited with {status}"));
            }
            if Instant::now() >= deadline {
                return Err(format!("port {port} closed after {} s", limit.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Starts a stopped server again on its own `port` with `spawn`, up to five times `pause`
/// apart: the old socket (or shared memory) may linger a moment, and the port must stay the same.
/// `what` names the server in the error, which lists every attempt's failure.
pub fn start_again(what: &str, port: u16, pause: Duration, mut spawn: impl FnMut() -> Result<(), String>) -> Result<(), String> {
    let mut failures = Vec::new();
    for _ in 0..5 {
        match spawn() {
            Ok(()) => return Ok(()),
            Err(e) => failures.push(e),
        }
        std::thread::sleep(pause);
    }
    Err(format!("{what} did not restart on port {port}: {}", failures.join("; ")))
}

/// kill(2) of a pid this process started (or one its server forked).
pub fn send(pid: u32, signal: i32) -> Result<(), String> {
    // SAFETY: kill(2) on a pid of a process this launcher started and has not reaped.
    if unsafe { libc::kill(pid as libc::pid_t, signal) } != 0 {
        return Err(format!("kill({pid}, {signal}): {}", std::io::Error::last_os_error()));
    }
    if signal == libc::SIGSTOP {
        await_stopped(pid, Duration::from_secs(2));
    }
    Ok(())
}

/// Waits, `limit` at most, until every thread of `pid` is stopped. kill(SIGSTOP) only queues
/// the stop: a thread already running may serve one more request first, and a fault test that
/// pauses a server means "from now on nothing is answered".
fn await_stopped(pid: u32, limit: Duration) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline && !all_threads_stopped(pid) {
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether every thread of `pid` shows state `T` or `t` (stopped) in /proc, or is dead (`Z`, `X`); a process whose
/// threads cannot be read (gone, or no /proc) counts as stopped: there is nothing to wait for.
fn all_threads_stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return true };
    tasks.flatten().all(|task| {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else { return true };
        // The state follows the command name's closing parenthesis (which may itself hold spaces).
        stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()).is_none_or(|state| matches!(state, 'T' | 't' | 'Z' | 'X'))
    })
}

/// Free loopback ports, none handed out twice (a deployment's ports must differ even though
/// nothing listens on any of them yet).
#[derive(Default)]
pub struct Ports {
    taken: Vec<u16>,
}

impl Ports {
    /// A free port not handed out before by this picker.
    pub fn pick(&mut self) -> Result<u16, String> {
        loop {
            let p = free_port().map_err(|e| e.to_string())?;
            if !self.taken.contains(&p) {
                self.taken.push(p);
                return Ok(p);
            }
        }
    }
}
