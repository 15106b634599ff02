//! What both lock kinds share in both APIs: a `Client`'s locks and leases (fencing tokens) and a
//! `Redlock`'s (none). [`LockKind`] and [`LeaseKind`] name the core calls the binding makes on
//! either kind; [`LeaseCell`] is a held lease as every Python lease class keeps it (release,
//! extend, leaving `with`, the loss signal handed to Python); [`Entered`] is the bookkeeping of
//! `with lock:`. The Python classes get their shared methods from the macros in
//! [`crate::methods`], which call into this module.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use lockgate_core::native::{
    Client as CoreClient, Lease, Lock, Redlock, RedlockLease, RedlockLock,
};
use lockgate_core::options::LockOptions;
use lockgate_core::time::Duration;
use lockgate_core::{Error, ErrorKind};
use pyo3::prelude::*;

use crate::errors::{self, ErrorValue, PyNone};
use crate::handle::{Backend, Handle};
use crate::loop_bridge::{into_asyncio, ready, running_loop};
use crate::runtime::spawn;
use crate::shared::py_repr;

/// A core lease as the binding uses it: `native::Lease` or `native::RedlockLease`.
pub(crate) trait LeaseKind: Send + Sync + 'static {
    /// The core handle whose leases these are (for the exit-hook registration and fork check).
    type Backend: Backend;
    fn name(&self) -> &str;
    fn is_held(&self) -> bool;
    fn remaining(&self) -> Option<Duration>;
    fn lost_reason(&self) -> Option<Error>;
    /// `Some(reason)` on loss, `None` once the lease ends otherwise; does not keep it alive.
    fn lost_signal(&self) -> impl Future<Output = Option<Error>> + Send + 'static;
    fn extend(&self, duration: Duration) -> impl Future<Output = Result<(), Error>> + Send + '_;
    fn release(&self) -> impl Future<Output = Result<bool, Error>> + Send + '_;
    /// The fencing token, for the kinds that have one (a Redlock lease has none).
    fn fencing_token(&self) -> Option<u64>;
}

/// A core lock handle as the binding uses it: `native::Lock` or `native::RedlockLock`.
pub(crate) trait LockKind: Clone + Send + Sync + 'static {
    type Lease: LeaseKind;
    fn name(&self) -> &str;
    fn options(&self) -> &LockOptions;
    fn acquire(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<Self::Lease, Error>> + Send + '_;
    fn acquire_default(&self) -> impl Future<Output = Result<Self::Lease, Error>> + Send + '_;
    fn try_acquire(&self) -> impl Future<Output = Result<Option<Self::Lease>, Error>> + Send + '_;
}

/// Forwards the trait methods to the core type's own methods of the same names.
macro_rules! core_kind {
    (lease $lease:ty, $backend:ty, $token:expr) => {
        impl LeaseKind for $lease {
            type Backend = $backend;
            fn name(&self) -> &str {
                <$lease>::name(self)
            }
            fn is_held(&self) -> bool {
                <$lease>::is_held(self)
            }
            fn remaining(&self) -> Option<Duration> {
                <$lease>::remaining(self)
            }
            fn lost_reason(&self) -> Option<Error> {
                <$lease>::lost_reason(self)
            }
            fn lost_signal(&self) -> impl Future<Output = Option<Error>> + Send + 'static {
                <$lease>::lost_signal(self)
            }
            fn extend(
                &self,
                duration: Duration,
            ) -> impl Future<Output = Result<(), Error>> + Send + '_ {
                <$lease>::extend(self, duration)
            }
            fn release(&self) -> impl Future<Output = Result<bool, Error>> + Send + '_ {
                <$lease>::release(self)
            }
            fn fencing_token(&self) -> Option<u64> {
                let token: fn(&$lease) -> Option<u64> = $token;
                token(self)
            }
        }
    };
    (lock $lock:ty, $lease:ty) => {
        impl LockKind for $lock {
            type Lease = $lease;
            fn name(&self) -> &str {
                <$lock>::name(self)
            }
            fn options(&self) -> &LockOptions {
                <$lock>::options(self)
            }
            fn acquire(
                &self,
                timeout: Duration,
            ) -> impl Future<Output = Result<$lease, Error>> + Send + '_ {
                <$lock>::acquire(self, timeout)
            }
            fn acquire_default(&self) -> impl Future<Output = Result<$lease, Error>> + Send + '_ {
                <$lock>::acquire_default(self)
            }
            fn try_acquire(
                &self,
            ) -> impl Future<Output = Result<Option<$lease>, Error>> + Send + '_ {
                <$lock>::try_acquire(self)
            }
        }
    };
}

core_kind!(lease Lease, CoreClient, |l| Some(l.fencing_token()));
core_kind!(lease RedlockLease, Redlock, |_| None);
core_kind!(lock Lock, Lease);
core_kind!(lock RedlockLock, RedlockLease);

/// The handle a lease of kind `L` keeps registered (a `Client`'s or a `Redlock`'s).
pub(crate) type HandleOf<L> = Arc<Handle<<L as LeaseKind>::Backend>>;

/// `Some(t)`: wait (or retry) up to `t`; `None`: the lock's default wait.
pub(crate) async fn acquire_within<K: LockKind>(
    lock: &K,
    timeout: Option<Duration>,
) -> Result<K::Lease, Error> {
    match timeout {
        Some(t) => lock.acquire(t).await,
        None => lock.acquire_default().await,
    }
}

/// A held lease as both APIs keep it: the core lease plus whether the user released it
/// explicitly (so leaving a `with` block after `release()` does not report a loss). Dropping the
/// last reference drops the core lease, which the core then releases in the background.
pub(crate) struct LeaseCell<L: LeaseKind> {
    lease: L,
    /// Keeps the client registered for the exit hook while the lease lives.
    client: HandleOf<L>,
    released_by_user: AtomicBool,
}

impl<L: LeaseKind> LeaseCell<L> {
    pub(crate) fn new(lease: L, client: HandleOf<L>) -> Arc<Self> {
        Arc::new(LeaseCell {
            lease,
            client,
            released_by_user: AtomicBool::new(false),
        })
    }

    pub(crate) fn lease(&self) -> &L {
        &self.lease
    }

    /// Whether the user released it (`release()`, or leaving its `with` block).
    pub(crate) fn released_by_user(&self) -> bool {
        self.released_by_user.load(Ordering::Acquire)
    }

    /// `lease.release()`: `True` if it was still held.
    pub(crate) async fn release(&self) -> Result<bool, Error> {
        self.client.owner.check()?;
        self.released_by_user.store(true, Ordering::Release);
        self.lease.release().await
    }

    pub(crate) async fn extend(&self, duration: Duration) -> Result<(), Error> {
        self.client.owner.check()?;
        self.lease.extend(duration).await
    }

    /// Leaving a `with` block. With no exception in flight, a lease that was no longer held
    /// (lost, expired, taken over) raises `NotHeldError`: the protected work may have overlapped
    /// another holder, and the caller must hear it. With an exception in flight nothing is
    /// raised on top of it (the lock is still released, or freed by its lease).
    pub(crate) async fn exit(&self, exception_in_flight: bool) -> Result<(), Error> {
        if self.released_by_user.load(Ordering::Acquire) {
            return Ok(());
        }
        let released = self.release().await;
        if exception_in_flight || released? {
            return Ok(());
        }
        Err(self.lease.lost_reason().unwrap_or_else(|| {
            Error::new(
                ErrorKind::NotHeld,
                "the lease had expired or been taken over before the block ended",
            )
        }))
    }

    /// `lease.lost_reason`: the reason as a `LockError`, or `None`.
    pub(crate) fn lost_reason<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.lease
            .lost_reason()
            .map(|e| errors::to_exception(py, &e))
            .transpose()
    }

    /// `lease.on_lost(callback)` of the blocking API: `callback(reason)` once, on a background
    /// thread, if the lease is lost; never after a normal end.
    pub(crate) fn on_lost_in_thread(&self, callback: Py<PyAny>) {
        self.on_loss(move |py, reason| {
            if let Err(e) = reason.and_then(|a| callback.call1(py, (a,))) {
                e.write_unraisable(py, Some(callback.bind(py)));
            }
        });
    }

    /// `lease.on_lost(callback)` of the asyncio API: `callback(reason)` scheduled once on the
    /// running event loop if the lease is lost. Raises outside a running loop.
    pub(crate) fn on_lost_in_loop(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        let event_loop = running_loop(py)?.unbind();
        self.on_loss(move |py, reason| {
            let r = reason.and_then(|arg| {
                event_loop
                    .bind(py)
                    .call_method1("call_soon_threadsafe", (callback.bind(py), arg))
            });
            // Fails only if the loop was closed meanwhile: nobody is left to tell.
            drop(r);
        });
        Ok(())
    }

    /// Once the lease is lost (never after a normal end), runs `deliver` with the reason as a
    /// `LockError` on a blocking-pool thread holding the GIL.
    fn on_loss<F>(&self, deliver: F)
    where
        F: for<'py> FnOnce(Python<'py>, PyResult<Bound<'py, PyAny>>) + Send + 'static,
    {
        let signal = self.lease.lost_signal();
        spawn(async move {
            let Some(reason) = signal.await else {
                return;
            };
            // Python code must not run on (or block) a runtime worker.
            // Detached: nobody awaits the callback.
            drop(tokio::task::spawn_blocking(move || {
                Python::try_attach(|py| deliver(py, errors::to_exception(py, &reason)));
            }));
        });
    }

    /// `await lease.lost()`: the reason (returned, not raised), or `None` after a normal end.
    pub(crate) fn lost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let signal = self.lease.lost_signal();
        into_asyncio(py, async move { Ok(signal.await.map(ErrorValue)) })
    }

    pub(crate) fn repr(&self, py: Python<'_>, class: &str) -> PyResult<String> {
        let token = match self.lease.fencing_token() {
            Some(t) => format!(" fencing_token={t}"),
            None => String::new(),
        };
        Ok(format!(
            "<{class} name={}{token} held={}>",
            py_repr(py, self.lease.name())?,
            if self.lease.is_held() {
                "True"
            } else {
                "False"
            }
        ))
    }
}

/// `lease.on_lost(callback)` rejects a callback it could never call at once (`TypeError`), rather
/// than failing later on a background thread where nobody sees it.
pub(crate) fn check_callable(py: Python<'_>, callback: &Py<PyAny>) -> PyResult<()> {
    let callback = callback.bind(py);
    if callback.is_callable() {
        return Ok(());
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "on_lost needs a callable taking the reason, got {}",
        callback.get_type().name()?
    )))
}

/// Leaves an `async with` block that held `cell` (if any): releases it, and reports a loss (see
/// [`LeaseCell::exit`]). Resolves to `None`: the block's own exception always propagates.
pub(crate) fn exit_async<'py, L: LeaseKind>(
    py: Python<'py>,
    cell: Option<Arc<LeaseCell<L>>>,
    exc_type: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let in_flight = exception_in_flight(exc_type);
    match cell {
        Some(cell) => into_asyncio(
            py,
            async move { cell.exit(in_flight).await.map(|()| PyNone) },
        ),
        None => ready(py, py.None()),
    }
}

/// Whether `__exit__` / `__aexit__` was called with an exception leaving the block.
pub(crate) fn exception_in_flight(exc_type: Option<&Bound<'_, PyAny>>) -> bool {
    exc_type.is_some_and(|t| !t.is_none())
}

/// The leases a lock handle holds: every lease acquired through it that the user has not
/// released yet, most recent last.
///
/// This is what keeps the redis-py habit safe: `lock.acquire(timeout=5)` with its result
/// ignored must leave the lock held (the critical section that follows relies on it), and
/// `lock.release()` / `lock.extend()` / `lock.owned()` then act on the lease the handle took.
/// Without this reference, the ignored lease would be garbage collected at once and the core
/// would release it in the background. A lease leaves the list when the user releases it; the
/// lock is freed otherwise only when the handle itself is collected (or its client closed).
pub(crate) struct Holds<L: LeaseKind>(Mutex<Vec<Arc<LeaseCell<L>>>>);

impl<L: LeaseKind> Holds<L> {
    pub(crate) fn new() -> Self {
        Holds(Mutex::new(Vec::new()))
    }

    /// Keeps `cell` (dropping the leases the user released meanwhile).
    pub(crate) fn push(&self, cell: Arc<LeaseCell<L>>) {
        let mut holds = lock_mutex(&self.0);
        holds.retain(|c| !c.released_by_user());
        holds.push(cell);
    }

    /// The most recent lease not released by the user (held, or lost meanwhile).
    pub(crate) fn top(&self) -> Option<Arc<LeaseCell<L>>> {
        let mut holds = lock_mutex(&self.0);
        holds.retain(|c| !c.released_by_user());
        holds.last().cloned()
    }

    /// Takes the most recent lease not released by the user, for `lock.release()`.
    pub(crate) fn pop(&self) -> Option<Arc<LeaseCell<L>>> {
        let mut holds = lock_mutex(&self.0);
        holds.retain(|c| !c.released_by_user());
        holds.pop()
    }

    /// Whether one of these leases is certainly still held now.
    pub(crate) fn owned(&self) -> bool {
        lock_mutex(&self.0)
            .iter()
            .any(|c| !c.released_by_user() && c.lease().is_held())
    }
}

/// `lock.release()`: releases the most recent lease the handle holds (`True` if it was still
/// held, `False` if it had been lost); `NOT_HELD` if the handle holds none, as redis-py raises
/// for an unlocked lock.
pub(crate) async fn release_top<L: LeaseKind>(holds: &Holds<L>) -> Result<bool, Error> {
    match holds.pop() {
        Some(cell) => cell.release().await,
        None => Err(not_holding()),
    }
}

/// `lock.extend(seconds)`: extends the most recent lease the handle holds.
pub(crate) async fn extend_top<L: LeaseKind>(
    holds: &Holds<L>,
    duration: Duration,
) -> Result<(), Error> {
    match holds.top() {
        Some(cell) => cell.extend(duration).await,
        None => Err(not_holding()),
    }
}

fn not_holding() -> Error {
    Error::new(
        ErrorKind::NotHeld,
        "this lock handle holds no lease (never acquired, or already released)",
    )
}

/// A mutex that survives a panic of another holder.
pub(crate) fn lock_mutex<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Leases taken by `with lock:` (per thread) or `async with lock:` (per asyncio task), for the
/// matching exit to release, innermost first.
pub(crate) struct Entered<K, T>(Mutex<HashMap<K, Vec<T>>>);

impl<K: Eq + Hash, T> Entered<K, T> {
    pub(crate) fn new() -> Self {
        Entered(Mutex::new(HashMap::new()))
    }

    pub(crate) fn push(&self, key: K, item: T) {
        lock_mutex(&self.0).entry(key).or_default().push(item);
    }

    pub(crate) fn pop(&self, key: &K) -> Option<T> {
        let mut entered = lock_mutex(&self.0);
        let item = entered.get_mut(key).and_then(Vec::pop);
        if entered.get(key).is_some_and(Vec::is_empty) {
            entered.remove(key);
        }
        item
    }
}
