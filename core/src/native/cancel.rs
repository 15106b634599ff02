//! [`CancelWaits`]: ending, from any thread, the waits in progress on one lock object, for
//! bindings whose lock objects have a `cancel()` (Python's `Lock.cancel()`). Each wait passes
//! its signal to [`Lock::acquire_unless`](super::Lock::acquire_unless), so it ends `CANCELLED`
//! once what it left on the server is removed; `cancel()` returns once those waits are over.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::thread::ThreadId;

use tokio::sync::Notify;

/// The waits in progress on one lock object, and the signal that ends them.
#[derive(Default)]
pub struct CancelWaits {
    cancel: Notify,
    /// The waits in progress (id -> the thread waiting) and the last id handed out.
    waits: Mutex<(u64, HashMap<u64, ThreadId>)>,
    ended: Condvar,
}

impl CancelWaits {
    fn waits(&self) -> MutexGuard<'_, (u64, HashMap<u64, ThreadId>)> {
        self.waits.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a wait of the calling thread: the future resolves at the next
    /// [`cancel`](Self::cancel), and the wait counts as in progress until the guard is dropped.
    pub fn enter(&self) -> (impl Future<Output = ()> + Send + '_, WaitGuard<'_>) {
        // Under the lock `cancel` takes: a wait is either told and waited for, or neither.
        let mut waits = self.waits();
        let cancelled = self.cancel.notified();
        waits.0 += 1;
        let id = waits.0;
        waits.1.insert(id, std::thread::current().id());
        (cancelled, WaitGuard(self, id))
    }

    /// Ends every wait in progress now but the calling thread's own (one that a signal handler
    /// calling this interrupted: it cannot end while its own thread waits for it). Block on
    /// [`Cancelled::wait`] (without holding what those waits need) until they are over.
    pub fn cancel(&self) -> Cancelled<'_> {
        let me = std::thread::current().id();
        let waits = self.waits();
        let ended = waits.1.iter().filter(|(_, t)| **t != me).map(|(id, _)| *id).collect();
        self.cancel.notify_waiters();
        Cancelled(self, ended)
    }
}

/// Marks its wait over when dropped, however the wait ended.
pub struct WaitGuard<'a>(&'a CancelWaits, u64);

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        self.0.waits().1.remove(&self.1);
        self.0.ended.notify_all();
    }
}

/// The waits one [`CancelWaits::cancel`] ended.
pub struct Cancelled<'a>(&'a CancelWaits, HashSet<u64>);

impl Cancelled<'_> {
    /// Blocks until none of these waits is in progress.
    pub fn wait(self) {
        let mut waits = self.0.waits();
        while waits.1.keys().any(|id| self.1.contains(id)) {
            waits = self.0.ended.wait(waits).unwrap_or_else(|e| e.into_inner());
        }
    }
}
