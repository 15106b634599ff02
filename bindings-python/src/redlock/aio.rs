//! The asyncio Redlock API: `lockgate.aio.Redlock`, `.RedlockLock`, `.RedlockLease`,
//! `.RedlockAcquireContext`.
//!
//! Every method converts its arguments and returns an asyncio future over the core's future;
//! cancelling the asyncio task drops the core future, which cancels the attempt and undoes it on
//! the masters. Errors go through `errors::to_py` when the future resolves.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use lockgate_core::native::RedlockLock as CoreRedlockLock;
use lockgate_core::options::{validate_lease, validate_name, LockOptions};
use lockgate_core::time::Duration;
use lockgate_core::Error;
use pyo3::prelude::*;

use super::{Deployment, RedlockArgs, RedlockHold};
use crate::aio::{current_task_key, lock_mutex, parse_timeout};
use crate::errors::{self, ErrorValue, IntoPyResult, PyNone};
use crate::handle::RedlockHandle;
use crate::loop_bridge::{into_asyncio, ready, running_loop};
use crate::runtime::spawn;
use crate::shared;

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
        urls: Vec<String>,
        key_prefix: Option<String>,
        max_lease: Option<f64>,
        node_timeout: Option<f64>,
        retry_delay: Option<f64>,
        retry_jitter: Option<f64>,
        drift_factor: Option<f64>,
        drift_fixed: Option<f64>,
        tls_ca_file: Option<PathBuf>,
        connect_timeout: Option<f64>,
        response_timeout: Option<f64>,
    ) -> PyResult<Self> {
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
        name: &str,
        lease: Option<f64>,
        renew: Option<bool>,
        timeout: Option<f64>,
    ) -> PyResult<AsyncRedlockLock> {
        validate_name(name).py(py)?;
        let options =
            super::lock_options(lease, renew, timeout, self.deployment.max_lease).py(py)?;
        Ok(AsyncRedlockLock {
            spec: Arc::new(LockSpec {
                state: self.state.clone(),
                name: name.to_owned(),
                options,
                handle: tokio::sync::OnceCell::new(),
            }),
            entered: Arc::new(Mutex::new(HashMap::new())),
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
struct LockSpec {
    state: Arc<RedlockHandle>,
    name: String,
    options: LockOptions,
    handle: tokio::sync::OnceCell<CoreRedlockLock>,
}

impl LockSpec {
    /// The core handle (connecting the masters first if needed).
    async fn lock(&self) -> Result<CoreRedlockLock, Error> {
        let redlock = self.state.client().await?;
        self.handle
            .get_or_try_init(|| async { redlock.lock(&self.name, self.options.clone()) })
            .await
            .cloned()
    }

    /// `Some(t)`: try for up to `t`; `None`: the lock's default wait.
    async fn acquire(&self, timeout: Option<Duration>) -> Result<Arc<RedlockHold>, Error> {
        let lock = self.lock().await?;
        let lease = match timeout {
            Some(t) => lock.acquire(t).await?,
            None => lock.acquire_default().await?,
        };
        Ok(RedlockHold::new(lease, self.state.clone()))
    }

    async fn try_acquire(&self) -> Result<Option<Arc<RedlockHold>>, Error> {
        let lease = self.lock().await?.try_acquire().await?;
        Ok(lease.map(|l| RedlockHold::new(l, self.state.clone())))
    }
}

type Entered = Arc<Mutex<HashMap<usize, Vec<Arc<RedlockHold>>>>>;

/// A named Redlock for asyncio, made by :meth:`Redlock.lock`. Holding it is a
/// :class:`RedlockLease`, never a task: a lease may be released from any task.
///
/// ``async with lock as lease:`` acquires with the lock's default timeout and releases on exit.
#[pyclass(frozen, module = "lockgate.aio", name = "RedlockLock")]
pub struct AsyncRedlockLock {
    spec: Arc<LockSpec>,
    /// Leases taken by `async with lock:`, per asyncio task, for `__aexit__` to release.
    entered: Entered,
}

#[pymethods]
impl AsyncRedlockLock {
    /// ``await lock.acquire(timeout=None)`` tries until a majority grants the lock, for up to
    /// ``timeout`` seconds (default: the lock's ``timeout``; ``None`` tries until acquired), and
    /// returns the :class:`RedlockLease`; raises :class:`lockgate.LockTimeoutError` if no
    /// majority could be had. Cancelling the task abandons the wait and undoes the attempt in
    /// flight. ``async with lock.acquire(timeout=5) as lease:`` releases on exit.
    #[pyo3(signature = (timeout=None))]
    fn acquire(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<RedlockAcquireContext> {
        Ok(RedlockAcquireContext {
            spec: self.spec.clone(),
            timeout: parse_timeout(py, timeout)?,
            held: Arc::new(Mutex::new(None)),
        })
    }

    /// ``await lock.try_acquire()``: one attempt without waiting; a :class:`RedlockLease`, or
    /// ``None`` if a master answered that the lock is held. Raises
    /// :class:`lockgate.LockConnectionError` if too few masters could vote.
    fn try_acquire<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let spec = self.spec.clone();
        into_asyncio(py, async move {
            Ok(spec
                .try_acquire()
                .await?
                .map(|hold| AsyncRedlockLease { hold }))
        })
    }

    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        &self.spec.name
    }

    /// The lease length in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        shared::to_secs(self.spec.options.lease)
    }

    /// Whether a watchdog renews the lease until it is released.
    #[getter]
    fn renew(&self) -> bool {
        self.spec.options.auto_renew
    }

    /// The default wait of :meth:`acquire` and ``async with lock:``, in seconds (``None``:
    /// forever).
    #[getter]
    fn timeout(&self) -> Option<f64> {
        self.spec.options.wait_timeout.map(shared::to_secs)
    }

    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let key = current_task_key(py)?;
        let spec = self.spec.clone();
        let entered = self.entered.clone();
        into_asyncio(py, async move {
            let hold = spec.acquire(None).await?;
            lock_mutex(&entered)
                .entry(key)
                .or_default()
                .push(hold.clone());
            Ok(AsyncRedlockLease { hold })
        })
    }

    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        exc_type: Option<&Bound<'py, PyAny>>,
        _exc: Option<&Bound<'py, PyAny>>,
        _tb: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let key = current_task_key(py)?;
        let hold = {
            let mut entered = lock_mutex(&self.entered);
            let hold = entered.get_mut(&key).and_then(Vec::pop);
            if entered.get(&key).is_some_and(Vec::is_empty) {
                entered.remove(&key);
            }
            hold
        };
        exit(py, hold, exc_type)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        super::lock_repr(
            py,
            "lockgate.aio.RedlockLock",
            &self.spec.name,
            &self.spec.options,
        )
    }
}

/// Leaves a `with` block that held `hold`: releases it, and reports a loss. Resolves to `None`.
fn exit<'py>(
    py: Python<'py>,
    hold: Option<Arc<RedlockHold>>,
    exc_type: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let in_flight = exc_type.is_some_and(|t| !t.is_none());
    match hold {
        Some(hold) => into_asyncio(
            py,
            async move { hold.exit(in_flight).await.map(|()| PyNone) },
        ),
        None => ready(py, py.None()),
    }
}

/// What :meth:`RedlockLock.acquire` returns: await it for a :class:`RedlockLease`, or use it
/// with ``async with`` to release the lease on exit.
#[pyclass(frozen, module = "lockgate.aio", name = "RedlockAcquireContext")]
pub struct RedlockAcquireContext {
    spec: Arc<LockSpec>,
    timeout: Option<Duration>,
    /// The lease taken by `__aenter__`, for `__aexit__`.
    held: Arc<Mutex<Option<Arc<RedlockHold>>>>,
}

impl RedlockAcquireContext {
    fn start<'py>(&self, py: Python<'py>, keep: bool) -> PyResult<Bound<'py, PyAny>> {
        let spec = self.spec.clone();
        let timeout = self.timeout;
        let held = self.held.clone();
        into_asyncio(py, async move {
            let hold = spec.acquire(timeout).await?;
            if keep {
                *lock_mutex(&held) = Some(hold.clone());
            }
            Ok(AsyncRedlockLease { hold })
        })
    }
}

#[pymethods]
impl RedlockAcquireContext {
    fn __await__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.start(py, false)?
            .call_method0(pyo3::intern!(py, "__await__"))
    }

    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.start(py, true)
    }

    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        exc_type: Option<&Bound<'py, PyAny>>,
        _exc: Option<&Bound<'py, PyAny>>,
        _tb: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let hold = lock_mutex(&self.held).take();
        exit(py, hold, exc_type)
    }
}

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
    hold: Arc<RedlockHold>,
}

#[pymethods]
impl AsyncRedlockLease {
    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        self.hold.lease.name()
    }

    /// Whether the lease is certainly still valid now (drift deducted, renewed, not lost).
    #[getter]
    fn is_held(&self) -> bool {
        self.hold.lease.is_held()
    }

    /// Seconds the lease is certainly still valid (drift deducted), or ``None`` if it is not
    /// held.
    #[getter]
    fn remaining(&self) -> Option<f64> {
        self.hold.lease.remaining().map(shared::to_secs)
    }

    /// Why the lease was lost (a :class:`lockgate.LockError`), or ``None`` if it was not.
    #[getter]
    fn lost_reason<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.hold
            .lost_reason()
            .map(|e| errors::to_exception(py, &e))
            .transpose()
    }

    /// ``await lease.extend(seconds)`` sets the remaining lease to ``seconds`` (at most
    /// ``max_lease``) on every master still holding it; needs a majority. Raises
    /// :class:`lockgate.NotHeldError` if a majority lost it (never re-acquires).
    fn extend<'py>(&self, py: Python<'py>, seconds: f64) -> PyResult<Bound<'py, PyAny>> {
        // Validated now, so a bad value raises at the call rather than at the await.
        let d = shared::secs("seconds", seconds)
            .and_then(|d| validate_lease(d).map(|()| d))
            .py(py)?;
        let hold = self.hold.clone();
        into_asyncio(py, async move { hold.extend(d).await.map(|()| PyNone) })
    }

    /// ``await lease.release()`` releases the lock on every master: ``True`` if a majority still
    /// held it, ``False`` if not (or if already released). Raises
    /// :class:`lockgate.LockConnectionError` if too few masters confirmed.
    fn release<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let hold = self.hold.clone();
        into_asyncio(py, async move { hold.release().await })
    }

    /// ``await lease.lost()`` resolves with the reason (a :class:`lockgate.LockError`, returned,
    /// not raised) when the lease is lost (a majority refused a renewal, or its validity ran
    /// out), or with ``None`` once it is released normally. Awaiting it does not keep the lease
    /// alive.
    fn lost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let signal = self.hold.lost_signal();
        into_asyncio(py, async move { Ok(signal.await.map(ErrorValue)) })
    }

    /// Schedules ``callback(reason)`` on the running event loop, once, if the lease is lost.
    /// Never called after a normal release. Must be called with a running loop.
    fn on_lost(&self, py: Python<'_>, callback: Py<PyAny>) -> PyResult<()> {
        let event_loop = running_loop(py)?.unbind();
        let signal = self.hold.lost_signal();
        spawn(async move {
            let Some(reason) = signal.await else {
                return;
            };
            drop(tokio::task::spawn_blocking(move || {
                Python::try_attach(|py| {
                    let r = errors::to_exception(py, &reason).and_then(|arg| {
                        event_loop
                            .bind(py)
                            .call_method1("call_soon_threadsafe", (callback.bind(py), arg))
                    });
                    // Fails only if the loop was closed meanwhile: nobody is left to tell.
                    drop(r);
                });
            }));
        });
        Ok(())
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        ready(slf.py(), slf.clone())
    }

    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __aexit__<'py>(
        &self,
        py: Python<'py>,
        exc_type: Option<&Bound<'py, PyAny>>,
        _exc: Option<&Bound<'py, PyAny>>,
        _tb: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        exit(py, Some(self.hold.clone()), exc_type)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.hold.repr(py, "lockgate.aio.RedlockLease")
    }
}
