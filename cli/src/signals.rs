//! The signals `lockgate` forwards to its command (and that cancel a wait for the lock), and the
//! numbers it reports them by: an exit code of 128+N, as shells report a command killed by
//! signal N. On Windows, Ctrl-C, Ctrl-Break and closing the console stand in for SIGINT, SIGTERM
//! and SIGHUP, under the same numbers, so scripts read the same exit codes everywhere.

use std::io;

/// An interrupt (Ctrl-C).
#[cfg(unix)]
pub const INT: i32 = libc::SIGINT;
/// A request to terminate (SIGTERM; on Windows, Ctrl-Break).
#[cfg(unix)]
pub const TERM: i32 = libc::SIGTERM;
/// The terminal went away (SIGHUP; on Windows, the console was closed).
#[cfg(unix)]
pub const HUP: i32 = libc::SIGHUP;
/// The end that cannot be refused (SIGKILL; on Windows, terminating the command's job object).
#[cfg(unix)]
pub const KILL: i32 = libc::SIGKILL;

/// An interrupt (Ctrl-C).
#[cfg(windows)]
pub const INT: i32 = 2;
/// A request to terminate (SIGTERM; on Windows, Ctrl-Break).
#[cfg(windows)]
pub const TERM: i32 = 15;
/// The terminal went away (SIGHUP; on Windows, the console was closed).
#[cfg(windows)]
pub const HUP: i32 = 1;
/// The end that cannot be refused (SIGKILL; on Windows, terminating the command's job object).
#[cfg(windows)]
pub const KILL: i32 = 9;

/// How `TERM` sent to the command is called in messages.
#[cfg(unix)]
pub const TERM_NAME: &str = "SIGTERM";
/// How `KILL` sent to the command is called in messages.
#[cfg(unix)]
pub const KILL_NAME: &str = "SIGKILL";
/// How `TERM` sent to the command is called in messages.
#[cfg(windows)]
pub const TERM_NAME: &str = "Ctrl-Break";
/// How `KILL` sent to the command is called in messages.
#[cfg(windows)]
pub const KILL_NAME: &str = "the end of its job";

/// The three signals, listened to from `install` on.
pub struct Signals {
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    hup: tokio::signal::unix::Signal,
    #[cfg(windows)]
    int: tokio::signal::windows::CtrlC,
    #[cfg(windows)]
    term: tokio::signal::windows::CtrlBreak,
    #[cfg(windows)]
    hup: tokio::signal::windows::CtrlClose,
}

impl Signals {
    /// Starts listening (from then on, the signals no longer end `lockgate` by themselves).
    pub fn install() -> io::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                int: signal(SignalKind::interrupt())?,
                term: signal(SignalKind::terminate())?,
                hup: signal(SignalKind::hangup())?,
            })
        }
        #[cfg(windows)]
        {
            use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
            Ok(Signals { int: ctrl_c()?, term: ctrl_break()?, hup: ctrl_close()? })
        }
    }

    /// The next of them to arrive, by its number.
    pub async fn next(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => INT,
            _ = self.term.recv() => TERM,
            _ = self.hup.recv() => HUP,
        }
    }
}
