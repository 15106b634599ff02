//! The exit codes of `lockgate` (docs/CLI.md "Exit codes"): distinct for each way a run can end
//! without the command's own status, after sysexits.h where one fits.

use lockgate_core::{Error, ErrorKind};

/// Bad arguments or configuration (an unknown flag, a malformed duration or URL, an option the
/// backend does not support): nothing was started. `EX_USAGE`.
pub const USAGE: i32 = 64;
/// The lock service could not be reached. `EX_UNAVAILABLE`.
pub const CONNECT: i32 = 69;
/// Anything else that went wrong in lockgate itself (a protocol error). `EX_SOFTWARE`.
pub const INTERNAL: i32 = 70;
/// The lock is busy (`--no-wait`) or the wait timed out (`--wait`); `--busy-exit-code` changes
/// it (like `flock -E`). `EX_TEMPFAIL`.
pub const BUSY: i32 = 75;
/// The server refused the credentials. `EX_NOPERM`.
pub const AUTH: i32 = 77;
/// The lock was lost (or could no longer be confirmed) while the command ran: the command was
/// terminated (or had already exited) and its work may overlap another holder's.
pub const LOST: i32 = 79;
/// The command could not be executed (not executable), as env(1) and shells say.
pub const CANNOT_EXEC: i32 = 126;
/// The command was not found, as env(1) and shells say.
pub const NOT_FOUND: i32 = 127;

/// The exit code for a core error met before the command started (connecting, acquiring).
pub fn of(e: &Error, busy: i32) -> i32 {
    match e.kind() {
        ErrorKind::InvalidArgument | ErrorKind::Unsupported => USAGE,
        ErrorKind::Connection => CONNECT,
        ErrorKind::Authentication => AUTH,
        ErrorKind::Timeout => busy,
        _ => INTERNAL,
    }
}

/// A child's exit status as a shell reports it: its code, or 128+N when killed by signal N.
pub fn of_status(status: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    let signal = std::os::unix::process::ExitStatusExt::signal(&status);
    // Windows has no signals: a process always ends with a code (128+9 when lockgate ended its
    // job object, child/windows.rs).
    #[cfg(windows)]
    let signal: Option<i32> = None;
    match (status.code(), signal) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        (None, None) => INTERNAL,
    }
}
