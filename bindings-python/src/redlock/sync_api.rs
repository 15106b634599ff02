//! The blocking Redlock API: `lockgate.Redlock`, `lockgate.RedlockLock`, `lockgate.RedlockLease`.
//!
//! Every method converts its arguments, runs the core's future with [`block_on`] (GIL released,
//! Ctrl-C honoured) and maps errors through `errors::to_py`.

use std::path::PathBuf;
use std::sync::Arc;
use std::thread::ThreadId;

use lockgate_core::native::{
    Redlock as CoreRedlock, RedlockLease as CoreRedlockLease, RedlockLock as CoreRedlockLock,
};
use pyo3::prelude::*;
use tokio::sync::Notify;

use super::{Deployment, RedlockArgs};
use crate::errors::IntoPyResult;
use crate::handle::RedlockHandle;
use crate::lease::{Entered, Holds, LeaseCell};
use crate::methods::{lease_methods, sync_lock_methods};
use crate::runtime::block_on;
use crate::shared::{self, Secs, Text};

/// A lock held on a majority of N independent Redis masters (the Redlock algorithm,
/// PROTOCOL.md §8): it survives the loss of a minority of them.
///
/// ``Redlock(urls, *, key_prefix=None, max_lease=None, node_timeout=None, retry_delay=None,
/// retry_jitter=None, drift_factor=None, drift_fixed=None, tls_ca_file=None,
/// connect_timeout=None, response_timeout=None)`` connects at once to every master it can reach
/// (``urls``: a list of ``redis://`` / ``rediss://`` URLs of independent servers, no
/// replication between them; masters that are down are retried in the background). A lock is
/// granted when ``len(urls) // 2 + 1`` masters grant it within ``node_timeout`` (default 0.05 s)
/// with validity left: the lease minus the time the attempt took minus the drift allowance
/// (``lease * drift_factor + drift_fixed``, defaults 1 % and 0.002 s). Failed attempts are
/// undone on every master and retried after ``retry_delay`` plus up to ``retry_jitter``
/// seconds (defaults 0.2 + 0.2).
///
/// ``max_lease`` (default 30 s) must be the same for every client of the deployment: no lease
/// or extension may be longer, and a freshly (re)started master grants nothing for
/// ``max_lease`` + 1 s, so it cannot hand out a lock it forgot. Durations are seconds.
///
/// Grants carry **no fencing token**: a majority of independent masters is not a linearizable
/// counter, so a token read from them could go backwards (PROTOCOL.md §8). The lease's validity
/// is the only guarantee; where the protected resource needs tokens, use :class:`Client`.
///
/// Use it as a context manager, or call :meth:`close`, to release every lease it still holds.
#[pyclass(frozen, module = "lockgate")]
pub struct Redlock {
    inner: CoreRedlock,
    handle: Arc<RedlockHandle>,
    deployment: Deployment,
}

#[pymethods]
impl Redlock {
    #[new]
    #[pyo3(signature = (urls, *, key_prefix=None, max_lease=None, node_timeout=None, retry_delay=None, retry_jitter=None, drift_factor=None, drift_fixed=None, tls_ca_file=None, connect_timeout=None, response_timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        urls: Vec<Text>,
        key_prefix: Option<Text>,
        max_lease: Option<Secs>,
        node_timeout: Option<Secs>,
        retry_delay: Option<Secs>,
        retry_jitter: Option<Secs>,
        drift_factor: Option<Secs>,
        drift_fixed: Option<Secs>,
        tls_ca_file: Option<PathBuf>,
        connect_timeout: Option<Secs>,
        response_timeout: Option<Secs>,
    ) -> PyResult<Self> {
        let urls: Vec<String> = urls.into_iter().map(|u| u.0).collect();
        let opts = super::redlock_options(
            py,
            urls.clone(),
            RedlockArgs {
                key_prefix,
                max_lease,
                node_timeout,
                retry_delay,
                retry_jitter,
                drift_factor,
                drift_fixed,
                tls_ca_file,
                connect_timeout,
                response_timeout,
            },
        )?;
        let deployment = Deployment::of(py, &urls, &opts)?;
        let inner = block_on(py, opts.clone().connect())?;
        Ok(Redlock {
            handle: RedlockHandle::connected(opts, inner.clone()),
            inner,
            deployment,
        })
    }

    /// A Redlock named ``name`` (one key per master; independent of :meth:`Client.lock` locks
    /// of the same name).
    ///
    /// ``lease=None`` gives a lease renewed by a watchdog until released: 30 s, or
    /// :attr:`max_lease` if shorter. A number of seconds gives a fixed lease (at most
    /// :attr:`max_lease`, else :class:`InvalidArgumentError` when acquiring), renewed only with
    /// ``renew=True``. ``timeout`` is the default wait of :meth:`RedlockLock.acquire` and
    /// ``with lock:`` (``None``: until acquired).
    #[pyo3(signature = (name, lease=None, *, renew=None, timeout=None))]
    fn lock(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        timeout: Option<Secs>,
    ) -> PyResult<RedlockLock> {
        let options = super::lock_options(lease, renew, timeout, self.inner.max_lease()).py(py)?;
        Ok(RedlockLock {
            inner: self.inner.lock(&name, options).py(py)?,
            client: self.handle.clone(),
            entered: Entered::new(),
            holds: Holds::new(),
            cancel: Notify::new(),
        })
    }

    /// Releases every lease and cancels every wait of this Redlock; further calls on it (and on
    /// its locks and leases) raise :class:`ClientClosedError`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, async {
            self.handle.close().await;
            Ok(())
        })
    }

    /// The masters' URLs, passwords replaced by ``***``.
    #[getter]
    fn urls(&self) -> Vec<String> {
        self.deployment.urls.clone()
    }

    /// How many masters there are.
    #[getter]
    fn masters(&self) -> usize {
        self.inner.masters().0
    }

    /// How many masters must grant a lock: a majority.
    #[getter]
    fn quorum(&self) -> usize {
        self.inner.masters().1
    }

    /// The prefix of every key this Redlock uses.
    #[getter]
    fn key_prefix(&self) -> &str {
        self.handle.key_prefix()
    }

    /// The longest lease of the deployment, in seconds.
    #[getter]
    fn max_lease(&self) -> f64 {
        shared::to_secs(self.inner.max_lease())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.close(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.deployment
            .repr(py, "lockgate.Redlock", self.handle.key_prefix())
    }
}

/// A named Redlock, made by :meth:`Redlock.lock`. Holding it is a :class:`RedlockLease`, never a
/// thread: a lease may be released from any thread.
///
/// ``with lock as lease:`` acquires with the lock's default timeout and releases on exit.
/// Waiting retries whole attempts (there is no queue: contenders are not served in order).
#[pyclass(frozen, module = "lockgate")]
pub struct RedlockLock {
    inner: CoreRedlockLock,
    client: Arc<RedlockHandle>,
    /// Leases taken by `with lock:`, per thread, for `__exit__` to release.
    entered: Entered<ThreadId, Arc<LeaseCell<CoreRedlockLease>>>,
    /// Every lease acquired through this handle and not released yet (see [`Holds`]).
    holds: Holds<CoreRedlockLease>,
    /// Notified by `cancel()`: ends the waits blocked on this handle.
    cancel: Notify,
}

sync_lock_methods! {
    RedlockLock -> RedlockLease;
    /// Tries until a majority grants the lock, for up to ``timeout`` seconds (default: the
    /// lock's ``timeout``; ``None`` tries until acquired), and returns the
    /// :class:`RedlockLease`. Raises :class:`LockTimeoutError` (saying why the last attempt
    /// failed) if no majority could be had; :class:`InvalidArgumentError` if the lease exceeds
    /// the deployment's ``max_lease``. Ctrl-C abandons the wait and undoes the attempt in flight.
    acquire;
    /// One attempt without waiting: a :class:`RedlockLease`, or ``None`` if a master answered
    /// that the lock is held. Raises :class:`LockConnectionError` (retryable) if too few masters
    /// could vote (down, unreachable, or too recently restarted).
    try_acquire;

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        super::lock_repr(
            py,
            "lockgate.RedlockLock",
            self.inner.name(),
            self.inner.options(),
        )
    }
}

/// Proof that a majority of the masters holds the lock for you, until :attr:`remaining` runs
/// out (renewed by the watchdog if the lock's lease is). Use it as a context manager (``with
/// lock.acquire() as lease:``) to release on exit; leaving the block raises
/// :class:`NotHeldError` if the lease had been lost meanwhile. Garbage-collecting an unreleased
/// lease releases it in the background.
///
/// Unlike :class:`Lease` it has **no** ``fencing_token``: a majority of independent masters is
/// not a linearizable counter, so any token read from them could go backwards (the masters that
/// saw the previous grant may be exactly the minority this grant did not reach, or may have
/// restarted; see PROTOCOL.md §8). Finish the protected work within :attr:`remaining`, or use
/// :class:`Client` (single-instance mutex with fencing tokens) where the resource needs them.
#[pyclass(frozen, module = "lockgate")]
pub struct RedlockLease {
    cell: Arc<LeaseCell<CoreRedlockLease>>,
}

lease_methods! {
    sync RedlockLease, "lockgate.RedlockLease";
    /// Whether the lease is certainly still valid now (drift deducted, renewed, not lost).
    is_held;
    /// Seconds the lease is certainly still valid (drift deducted), or ``None`` if it is not
    /// held. Finish the protected work within it.
    remaining;
    /// Sets the remaining lease to ``seconds`` (at most ``max_lease``) on every master still
    /// holding it; needs a majority. Raises :class:`NotHeldError` if a majority lost it (the
    /// lease is then lost; it never re-acquires), :class:`LockConnectionError` if too few
    /// masters answered.
    extend;
    /// Releases the lock on every master. ``True`` if a majority still held it, ``False`` if not
    /// (or if already released). Raises :class:`LockConnectionError` (retryable) if too few
    /// masters confirmed: the others keep the key until its lease ends.
    release;
    /// Calls ``callback(reason)`` once, with a :class:`LockError`, if the lease is lost (a
    /// majority refused a renewal, or its validity ran out first). It runs on a lockgate
    /// background thread: keep it short and thread-safe. Never called after a normal release.
    on_lost;
}
