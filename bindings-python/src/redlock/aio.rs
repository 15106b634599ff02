//! The asyncio Redlock API: `lockgate.aio.Redlock`, `.RedlockLock`, `.RedlockLease`,
//! `.RedlockAcquireContext`.
//!
//! Every method converts its arguments and returns an asyncio future over the core's future;
//! cancelling the asyncio task drops the core future, which cancels the attempt and undoes it on
//! the masters. Errors go through `errors::to_py` when the future resolves.

use std::path::PathBuf;
use std::sync::Arc;

use lockgate_core::native::{RedlockLease as CoreRedlockLease, RedlockLock as CoreRedlockLock};
use lockgate_core::options::{validate_name, LockOptions};
use lockgate_core::Error;
use pyo3::prelude::*;

use super::{Deployment, RedlockArgs};
use crate::aio::{AcquireState, LockSpec};
use crate::errors::{IntoPyResult, PyNone};
use crate::handle::RedlockHandle;
use crate::lease::{Entered, Holds, LeaseCell};
use crate::loop_bridge::into_asyncio;
use crate::methods::{acquire_context_methods, aio_lock_methods, lease_methods};
use crate::shared::{self, Secs, Text};

/// Redlock for asyncio: ``lockgate.aio.Redlock(urls, *, key_prefix=None, max_lease=None,
/// node_timeout=None, retry_delay=None, retry_jitter=None, drift_factor=None, drift_fixed=None,
/// tls_ca_file=None, connect_timeout=None, response_timeout=None)``, with the arguments of
/// :class:`lockgate.Redlock`. The constructor only validates; the masters are connected by
/// ``async with`` / :meth:`connect`, or on first use. ``async with`` (or :meth:`close`)
/// releases every lease it still holds on exit.
///
/// Grants carry **no fencing token** (PROTOCOL.md §8): use :class:`lockgate.aio.Client` where
/// the protected resource needs one.
#[pyclass(frozen, module = "lockgate.aio", name = "Redlock")]
pub struct AsyncRedlock {
    state: Arc<RedlockHandle>,
    deployment: Deployment,
}

#[pymethods]
impl AsyncRedlock {
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
        Ok(AsyncRedlock {
            state: RedlockHandle::lazy(opts),
            deployment,
        })
    }

    /// A Redlock named ``name``; the arguments are those of :meth:`lockgate.Redlock.lock`.
    /// Validated here, before any network call.
    #[pyo3(signature = (name, lease=None, *, renew=None, timeout=None))]
    fn lock(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        timeout: Option<Secs>,
    ) -> PyResult<AsyncRedlockLock> {
        validate_name(&name).py(py)?;
        let options =
            super::lock_options(lease, renew, timeout, self.deployment.max_lease).py(py)?;
        Ok(AsyncRedlockLock {
            spec: Arc::new(RedlockSpec {
                state: self.state.clone(),
                name: name.to_owned(),
                options,
                handle: tokio::sync::OnceCell::new(),
            }),
            entered: Arc::new(Entered::new()),
            holds: Arc::new(Holds::new()),
        })
    }

    /// Connects now (otherwise the first operation does); raises the connection's error.
    fn connect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.state.clone();
        into_asyncio(py, async move { state.client().await.map(|_| PyNone) })
    }

    /// Releases every lease and cancels every wait of this Redlock; further calls on it raise
    /// :class:`lockgate.ClientClosedError`.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.state.clone();
        into_asyncio(py, async move {
            state.close().await;
            Ok(PyNone)
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
        self.deployment.urls.len()
    }

    /// How many masters must grant a lock: a majority.
    #[getter]
    fn quorum(&self) -> usize {
        self.deployment.quorum
    }

    /// The prefix of every key this Redlock uses.
    #[getter]
    fn key_prefix(&self) -> &str {
        self.state.key_prefix()
    }

    /// The longest lease of the deployment, in seconds.
    #[getter]
    fn max_lease(&self) -> f64 {
        shared::to_secs(self.deployment.max_lease)
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let state = slf.get().state.clone();
        let me = slf.clone().unbind();
        into_asyncio(slf.py(), async move { state.client().await.map(|_| me) })
    }

    #[pyo3(signature = (_exc_type, _exc=None, _tb=None))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        _exc_type: Option<&Bound<'py, PyAny>>,
        _exc: Option<&Bound<'py, PyAny>>,
        _tb: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.close(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.deployment
            .repr(py, "lockgate.aio.Redlock", self.state.key_prefix())
    }
}

/// What an acquisition needs: the Redlock, the lock's name and options, and the core handle
/// made from them on first use.
struct RedlockSpec {
    state: Arc<RedlockHandle>,
    name: String,
    options: LockOptions,
    handle: tokio::sync::OnceCell<CoreRedlockLock>,
}

impl LockSpec for RedlockSpec {
    type Lock = CoreRedlockLock;

    fn name(&self) -> &str {
        &self.name
    }

    fn options(&self) -> &LockOptions {
        &self.options
    }

    fn client(&self) -> &Arc<RedlockHandle> {
        &self.state
    }

    /// The core handle (connecting the masters first if needed).
    async fn lock(&self) -> Result<CoreRedlockLock, Error> {
        let redlock = self.state.client().await?;
        self.handle
            .get_or_try_init(|| async { redlock.lock(&self.name, self.options.clone()) })
            .await
            .cloned()
    }
}

/// A named Redlock for asyncio, made by :meth:`Redlock.lock`. Holding it is a
/// :class:`RedlockLease`, never a task: a lease may be released from any task.
///
/// ``async with lock as lease:`` acquires with the lock's default timeout and releases on exit.
#[pyclass(frozen, module = "lockgate.aio", name = "RedlockLock")]
pub struct AsyncRedlockLock {
    spec: Arc<RedlockSpec>,
    /// Leases taken by `async with lock:`, per asyncio task, for `__aexit__` to release.
    entered: Arc<Entered<usize, Arc<LeaseCell<CoreRedlockLease>>>>,
    /// Every lease acquired through this handle and not released yet (see [`Holds`]).
    holds: Arc<Holds<CoreRedlockLease>>,
}

aio_lock_methods! {
    AsyncRedlockLock -> RedlockAcquireContext(std::convert::identity), AsyncRedlockLease;
    /// ``await lock.acquire(timeout=None)`` tries until a majority grants the lock, for up to
    /// ``timeout`` seconds (default: the lock's ``timeout``; ``None`` tries until acquired), and
    /// returns the :class:`RedlockLease`; raises :class:`lockgate.LockTimeoutError` if no
    /// majority could be had. Cancelling the task abandons the wait and undoes the attempt in
    /// flight. ``async with lock.acquire(timeout=5) as lease:`` releases on exit.
    acquire;
    /// ``await lock.try_acquire()``: one attempt without waiting; a :class:`RedlockLease`, or
    /// ``None`` if a master answered that the lock is held. Raises
    /// :class:`lockgate.LockConnectionError` if too few masters could vote.
    try_acquire;

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        super::lock_repr(
            py,
            "lockgate.aio.RedlockLock",
            &self.spec.name,
            &self.spec.options,
        )
    }
}

/// What :meth:`RedlockLock.acquire` returns: await it for a :class:`RedlockLease`, or use it
/// with ``async with`` to release the lease on exit.
#[pyclass(frozen, module = "lockgate.aio", name = "RedlockAcquireContext")]
pub struct RedlockAcquireContext {
    state: AcquireState<Arc<RedlockSpec>>,
}

acquire_context_methods!(RedlockAcquireContext -> AsyncRedlockLease);

/// Proof that a majority of the masters holds the lock for you (asyncio), until
/// :attr:`remaining` runs out (renewed by the watchdog if the lock's lease is).
/// ``await lease.lost()`` or :meth:`on_lost` tell you if the lease is lost. Leaving ``async
/// with`` releases it and raises :class:`lockgate.NotHeldError` if it had been lost meanwhile.
/// Garbage-collecting an unreleased lease releases it in the background.
///
/// Unlike :class:`Lease` it has **no** ``fencing_token``: a majority of independent masters is
/// not a linearizable counter, so any token read from them could go backwards (PROTOCOL.md §8).
/// Finish the protected work within :attr:`remaining`, or use :class:`Client` where the
/// resource needs fencing tokens.
#[pyclass(frozen, module = "lockgate.aio", name = "RedlockLease")]
pub struct AsyncRedlockLease {
    cell: Arc<LeaseCell<CoreRedlockLease>>,
}

lease_methods! {
    aio AsyncRedlockLease, "lockgate.aio.RedlockLease";
    /// Whether the lease is certainly still valid now (drift deducted, renewed, not lost).
    is_held;
    /// Seconds the lease is certainly still valid (drift deducted), or ``None`` if it is not
    /// held.
    remaining;
    /// ``await lease.extend(seconds)`` sets the remaining lease to ``seconds`` (at most
    /// ``max_lease``) on every master still holding it; needs a majority. Raises
    /// :class:`lockgate.NotHeldError` if a majority lost it (never re-acquires).
    extend;
    /// ``await lease.release()`` releases the lock on every master: ``True`` if a majority still
    /// held it, ``False`` if not (or if already released). Raises
    /// :class:`lockgate.LockConnectionError` if too few masters confirmed.
    release;
    /// ``await lease.lost()`` resolves with the reason (a :class:`lockgate.LockError`, returned,
    /// not raised) when the lease is lost (a majority refused a renewal, or its validity ran
    /// out), or with ``None`` once it is released normally. Awaiting it does not keep the lease
    /// alive.
    lost;
}
