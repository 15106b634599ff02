//! The command on Unix: started in a process group of its own (so a signal reaches every
//! process it starts, the grandchildren behind `sh -c` too) and killed by the kernel if
//! `lockgate` dies first (Linux `PR_SET_PDEATHSIG`), so it cannot outlive the lease silently.

use std::io;

use tokio::process::Child;

use super::JobEnv;
use crate::exit_code;

/// A started command: its process and its process group (the same id).
pub struct Job {
    /// The command's process (the group leader).
    pub process: Child,
    pgid: i32,
}

impl Job {
    /// Starts `argv` in a new process group with the lock's environment; the exit code to
    /// leave with when it cannot be started (127 not found, 126 otherwise).
    pub fn start(argv: &[String], env: &JobEnv<'_>) -> Result<Job, (i32, String)> {
        let (mut cmd, program) = super::command(argv, env)?;
        cmd.process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs in the forked child before exec and calls only
        // async-signal-safe functions (prctl, getppid, _exit).
        unsafe {
            cmd.pre_exec(move || {
                // The kernel sends SIGKILL to the command when the thread that forked it ends:
                // lockgate runs on one thread (a current-thread runtime), so when lockgate
                // dies. A lockgate killed before this line leaves the command re-parented:
                // then it must not run at all.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::_exit(exit_code::LOST);
                }
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(process) => {
                let pgid = process.id().map(|p| p as i32).ok_or((exit_code::INTERNAL, "the command exited at once".to_string()))?;
                Ok(Job { process, pgid })
            }
            Err(e) => Err(super::not_started(program, e)),
        }
    }

    /// The command's process group id (its pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Sends `signal` to every process of the command's group (those still in it).
    pub fn signal_group(&self, signal: i32) {
        // SAFETY: kill(2) with a negative pid addresses our own child's process group; a group
        // that is gone already gives ESRCH, which is fine.
        unsafe {
            libc::kill(-self.pgid, signal);
        }
    }

    /// Whether any process of the command's group is still alive (not counting zombies
    /// waiting to be reaped... which `kill(-pgid, 0)` does count: callers reap first).
    pub fn group_alive(&self) -> bool {
        // SAFETY: signal 0 only checks that the group exists.
        unsafe { libc::kill(-self.pgid, 0) == 0 }
    }
}
