//! This process: its id, kept right across `fork()` (the runtime and the telemetry thread are
//! per process), and mutexes that outlive a panic of another holder.

#[cfg(unix)]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU32, Ordering};
#[cfg(unix)]
use std::sync::Once;
use std::sync::{Mutex, MutexGuard};

/// This process's id, cached (0: not known yet); reset in a forked child by a `pthread_atfork`
/// handler (glibc does not cache `getpid()`, and every call checks it).
static PID: AtomicU32 = AtomicU32::new(0);

#[cfg(unix)]
extern "C" {
    fn pthread_atfork(
        prepare: Option<unsafe extern "C" fn()>,
        parent: Option<unsafe extern "C" fn()>,
        child: Option<unsafe extern "C" fn()>,
    ) -> std::ffi::c_int;
}

#[cfg(unix)]
unsafe extern "C" fn forget_pid() {
    PID.store(0, Ordering::Relaxed);
}

/// This process's id (a forked child's own, not its parent's).
pub(crate) fn pid() -> u32 {
    let known = PID.load(Ordering::Relaxed);
    if known != 0 {
        return known;
    }
    let pid = std::process::id();
    if forks_watched() {
        PID.store(pid, Ordering::Relaxed);
    }
    pid
}

/// Whether a forked child forgets the cached id (the `pthread_atfork` handler is in place).
#[cfg(unix)]
fn forks_watched() -> bool {
    static AT_FORK: Once = Once::new();
    static AT_FORK_SET: AtomicBool = AtomicBool::new(false);
    // SAFETY: `forget_pid` only stores to an atomic (async-signal-safe, as a forked child needs).
    AT_FORK.call_once(|| {
        AT_FORK_SET.store(unsafe { pthread_atfork(None, None, Some(forget_pid)) } == 0, Ordering::Relaxed)
    });
    AT_FORK_SET.load(Ordering::Relaxed)
}

/// Without `fork()` (Windows) a process's id never changes under it: always kept.
#[cfg(not(unix))]
fn forks_watched() -> bool {
    true
}

/// A mutex that survives a panic of another holder.
pub(crate) fn lock_mutex<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

