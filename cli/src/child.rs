//! The command `lockgate` runs, with the lock's environment, in a group of its own that
//! `lockgate` can signal and end as a whole (the grandchildren behind `sh -c` or `cmd /c` too),
//! and that cannot outlive `lockgate` silently: on Unix a process group with
//! `PR_SET_PDEATHSIG` (Linux) and the watchdog process (watchdog.rs); on Windows a job object
//! the kernel ends when `lockgate`'s last handle to it closes, however `lockgate` ends.

use std::io;

use tokio::process::Command;

use crate::exit_code;

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::Job;
#[cfg(unix)]
pub use crate::watchdog::Watchdog;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::{Job, Watchdog};

/// What the command sees in its environment (docs/CLI.md "Environment").
pub struct JobEnv<'a> {
    /// `LOCKGATE_NAME`: the lock's name.
    pub name: &'a str,
    /// `LOCKGATE_FENCING_TOKEN`: the grant's token, empty where the backend has none (Redlock).
    pub fencing_token: Option<u64>,
    /// `LOCKGATE_LABEL`: the label stored with the lock's entry (so the command can log it).
    pub label: &'a str,
}

/// The command `argv` with the lock's environment, before the platform's own settings; its
/// program's name. No command is a usage error.
fn command<'a>(argv: &'a [String], env: &JobEnv<'_>) -> Result<(Command, &'a str), (i32, String)> {
    let (program, args) = argv.split_first().ok_or((exit_code::USAGE, "no command given after --".to_string()))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("LOCKGATE_NAME", env.name)
        .env("LOCKGATE_FENCING_TOKEN", env.fencing_token.map(|t| t.to_string()).unwrap_or_default())
        .env("LOCKGATE_LABEL", env.label)
        .kill_on_drop(false);
    Ok((cmd, program))
}

/// The exit code and message for a command that could not be started: 127 not found, 126
/// otherwise, as shells say.
fn not_started(program: &str, e: io::Error) -> (i32, String) {
    let code = if e.kind() == io::ErrorKind::NotFound { exit_code::NOT_FOUND } else { exit_code::CANNOT_EXEC };
    (code, format!("cannot run {program}: {e}"))
}
