//! Lock handles: a mutex (`Client.lock`), a semaphore (a `Lock` taking one permit) and the
//! halves of a read-write lock, in both APIs, over one [`LockSpec`]. The asyncio `acquire`
//! returns an [`AcquireContext`]: awaitable, and an async context manager.

use std::sync::Arc;

use lockgate_core::time::Duration;
use lockgate_core::Primitive;
use pyo3::prelude::*;
use pyo3::PyClassInitializer;

use crate::acquire_context::{AcquireContext, Source};
use crate::api::task;
use crate::convert::{class_repr, lease_secs, py_bool, py_repr, secs_repr, timeout, Secs};
use crate::handle::LockSpec;
use crate::lease::{exit, exit_async, Entered, LeaseCell};
use crate::loop_bridge::into_asyncio_cancellable;
use crate::runtime::block_on;
use crate::snapshot::Inspected;
use lockgate_core::native::{CancelWaits, Owner};

/// What both APIs' lock handles show: the lock's settings and whether the handle holds it.
#[pyclass(frozen, subclass, module = "lockgate._lockgate", name = "_LockBase")]
pub struct LockBase {
    spec: Arc<LockSpec>,
}

#[pymethods]
impl LockBase {
    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        &self.spec.name
    }

    /// The lease length in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        self.spec.options.lease.as_secs_f64()
    }

    /// Whether a watchdog renews the lease until it is released.
    #[getter]
    fn renew(&self) -> bool {
        self.spec.options.auto_renew
    }

    /// The default wait of ``acquire`` and ``with lock:``, in seconds (``None``: until acquired).
    #[getter]
    fn wait(&self) -> Option<f64> {
        self.spec.options.wait_timeout.map(|d| d.as_secs_f64())
    }

    /// How long a waiter's queue entry survives without a heartbeat, in seconds.
    #[getter]
    fn entry_ttl(&self) -> f64 {
        self.spec.options.entry_ttl.as_secs_f64()
    }

    /// Whether acquiring again while this handle holds the lock adds a hold instead of waiting.
    #[getter]
    fn reentrant(&self) -> bool {
        self.spec.reentrant
    }

    /// Whether this handle holds the lock now: a lease acquired through it is not released and
    /// certainly still valid (redis-py's ``owned()``).
    fn owned(&self) -> bool {
        self.spec.holds.owned()
    }

    /// The same as :meth:`owned`. Unlike redis-py's ``locked()`` it does not ask the server
    /// about other clients' holds (use ``try_acquire`` for that).
    fn locked(&self) -> bool {
        self.spec.holds.owned()
    }

    /// Reads this lock on the server (awaitable in ``lockgate.aio``): a ``dict`` with ``kind``,
    /// ``locked``, ``holders`` (each ``label``, ``fencing_token``, ``held_for_ms``,
    /// ``remaining_ms``, ``mode``, ``value``, ``holds``: this client's reentrant holds, else
    /// ``None``), ``waiters`` in queue order (``label``, ``waiting_for_ms``, ``mode``),
    /// ``permits`` and ``remaining_ms``; unknown values are ``None``. A semaphore handle reads
    /// the semaphore, a read or write handle the whole read-write lock. For humans and
    /// dashboards; to decide whether to write, use the fencing token.
    fn inspect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (spec, owner) = (self.spec.clone(), self.spec.conn.api.caller(py)?);
        spec.conn.api.run(py, async move { Ok(Inspected(spec.core(owner).await?.inspect().await?)) })
    }

    /// Whether anyone holds this lock now, asking the server (Redisson's ``isLocked``; one
    /// :meth:`inspect`; awaitable in ``lockgate.aio``). For humans and dashboards; to decide
    /// whether to write, use the fencing token.
    fn is_locked<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (spec, owner) = (self.spec.clone(), self.spec.conn.api.caller(py)?);
        spec.conn.api.run(py, async move { spec.core(owner).await?.is_locked().await })
    }

    /// One attempt without waiting (awaitable in ``lockgate.aio``): a lease, or ``None`` if the
    /// lock is held (for a semaphore: every permit is taken) or others are queued for it.
    fn try_acquire<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (spec, owner) = (self.spec.clone(), self.spec.conn.api.caller(py)?);
        spec.conn.api.run(py, async move {
            let lease = spec.core(owner).await?.try_acquire().await?;
            Ok(lease.map(|l| spec.deliver(owner, LeaseCell::new(l, &spec.conn))))
        })
    }

    /// Releases the most recent lease the calling thread (asyncio task) acquired through this
    /// handle, else the handle's most recent one (redis-py's ``lock.release()``; awaitable in
    /// ``lockgate.aio``): ``True`` if it was still held, ``False`` if it had been lost.
    /// :class:`lockgate.NotHeldError` if this handle holds none.
    fn release<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (spec, owner) = (self.spec.clone(), self.spec.conn.api.caller(py)?);
        spec.conn.api.run(py, async move {
            let lease = spec.holds.take_top(owner)?;
            spec.conn.process.check()?;
            lease.release().await
        })
    }

    /// Sets the remaining time of the lease :meth:`release` would release (see
    /// ``Lease.extend``; awaitable in ``lockgate.aio``). :class:`lockgate.NotHeldError` if it
    /// holds none or that lease was lost.
    fn extend<'py>(&self, py: Python<'py>, seconds: Secs) -> PyResult<Bound<'py, PyAny>> {
        let (d, spec) = (lease_secs(py, "seconds", seconds)?, self.spec.clone());
        let owner = spec.conn.api.caller(py)?;
        spec.conn.api.run(py, async move {
            let lease = spec.holds.top_of(owner)?;
            spec.conn.process.check()?;
            lease.extend(d).await.map(|()| None::<()>)
        })
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let (py, spec) = (slf.py(), &slf.get().spec);
        let kind = match &spec.primitive {
            Primitive::Semaphore { permits } => format!(" permits={permits}"),
            Primitive::Read { writers_first } => format!(" mode='read' writers_first={}", py_bool(*writers_first)),
            Primitive::Write => " mode='write'".into(),
            _ => String::new(),
        };
        let wait = spec.options.wait_timeout.map_or(Ok("None".into()), |t| secs_repr(py, t))?;
        let (name, reentrant) = (py_repr(py, &spec.name)?, if spec.reentrant { " reentrant=True" } else { "" });
        let (lease, renew) = (secs_repr(py, spec.options.lease)?, py_bool(spec.options.auto_renew));
        class_repr(slf, &format!("name={name}{kind}{reentrant} lease={lease} renew={renew} wait={wait}"))
    }
}

/// A named distributed mutex, made by :meth:`Client.lock` (also one half of a
/// :class:`ReadWriteLock`, and the base of :class:`Semaphore`). Holding it is a :class:`Lease`,
/// never a thread: a lease may be released from any thread. ``with lock as lease:`` acquires
/// with the lock's default timeout and releases on exit.
#[pyclass(frozen, subclass, extends = LockBase, module = "lockgate")]
pub struct Lock {
    spec: Arc<LockSpec>,
    /// Leases taken by `with lock:`, per thread, for `__exit__` to release.
    entered: Entered,
    /// The waits blocked on this handle, for `cancel()` to end.
    waits: CancelWaits,
}

impl Lock {
    pub(crate) fn init(spec: Arc<LockSpec>) -> PyClassInitializer<Self> {
        let (entered, waits) = Default::default();
        PyClassInitializer::from(LockBase { spec: spec.clone() }).add_subclass(Lock { spec, entered, waits })
    }

    fn wait<'py>(&self, py: Python<'py>, timeout: Option<Duration>) -> PyResult<(Bound<'py, PyAny>, Arc<LeaseCell>)> {
        // Registered before the GIL is released: a `cancel()` from here on reaches this wait,
        // and returns once it is over.
        let (cancelled, running) = self.waits.enter();
        let owner = Owner::current_thread();
        let cell = block_on(py, self.spec.acquire(owner, timeout, cancelled));
        drop(running);
        let cell = cell?;
        Ok((self.spec.deliver(owner, cell.clone()).into_pyobject(py)?, cell))
    }
}

#[pymethods]
impl Lock {
    /// Waits up to ``timeout`` seconds (default: the lock's ``wait``; ``None`` waits until
    /// acquired) and returns the :class:`Lease`; :class:`LockTimeoutError` if the lock stays
    /// held. Waiters are served in arrival order (where the backend queues them) and woken by
    /// the release itself. Ctrl-C abandons the wait and removes it from the server.
    #[pyo3(signature = (timeout=None))]
    fn acquire<'py>(&self, py: Python<'py>, timeout: Option<Secs>) -> PyResult<Bound<'py, PyAny>> {
        let timeout = self::timeout(py, timeout)?;
        Ok(self.wait(py, timeout)?.0)
    }

    /// Cancels every :meth:`acquire` (and ``with lock:``) waiting on this handle now, from any
    /// thread: each raises :class:`LockCancelledError`, and this returns once their queue entries
    /// are removed from the server (1 s at most if it does not answer). Later acquisitions are
    /// not affected.
    fn cancel(&self, py: Python<'_>) {
        let ended = self.waits.cancel();
        py.detach(|| ended.wait());
    }

    fn __enter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (lease, cell) = self.wait(py, None)?;
        self.entered.push(Owner::current_thread(), cell);
        Ok(lease)
    }

    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        match self.entered.pop(&Owner::current_thread()) {
            Some(cell) => exit(py, &cell, exc_type),
            None => Ok(()),
        }
    }
}

/// A distributed counting semaphore, made by :meth:`Client.semaphore`: a :class:`Lock` whose
/// :meth:`~Lock.acquire` takes one of :attr:`permits` permits as a :class:`Lease`.
#[pyclass(frozen, extends = Lock, module = "lockgate")]
pub struct Semaphore {
    /// How many leases may be held at once.
    #[pyo3(get)]
    pub(crate) permits: u32,
}

/// A named distributed mutex for asyncio, made by :meth:`Client.lock` (also one half of a
/// :class:`ReadWriteLock`, and the base of :class:`Semaphore`). Holding it is a :class:`Lease`,
/// never a task. ``async with lock as lease:`` acquires with the lock's default timeout and
/// releases on exit.
#[pyclass(frozen, subclass, extends = LockBase, module = "lockgate.aio", name = "Lock")]
pub struct AsyncLock {
    spec: Arc<LockSpec>,
    /// Leases taken by `async with lock:`, per asyncio task, for `__aexit__` to release.
    entered: Arc<Entered>,
}

impl AsyncLock {
    pub(crate) fn init(spec: Arc<LockSpec>) -> PyClassInitializer<Self> {
        PyClassInitializer::from(LockBase { spec: spec.clone() })
            .add_subclass(AsyncLock { spec, entered: Arc::default() })
    }
}

#[pymethods]
impl AsyncLock {
    /// ``await lock.acquire(timeout=None)``: as :meth:`lockgate.Lock.acquire`; cancelling the
    /// task abandons the wait and raises once it is removed from the server. ``async with
    /// lock.acquire(timeout=5) as lease:`` releases on exit.
    #[pyo3(signature = (timeout=None))]
    fn acquire(&self, py: Python<'_>, timeout: Option<Secs>) -> PyResult<Py<AcquireContext>> {
        AcquireContext::new(py, Source::Lock(self.spec.clone()), self::timeout(py, timeout)?)
    }

    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (owner, spec, entered) = (task(py)?, self.spec.clone(), self.entered.clone());
        into_asyncio_cancellable(py, move |cancel| async move {
            let cell = spec.acquire(owner, None, cancel.fired()).await?;
            entered.push(owner, cell.clone());
            Ok(spec.deliver(owner, cell))
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
        exit_async(py, self.entered.pop(&task(py)?), exc_type)
    }
}

/// A distributed counting semaphore for asyncio, made by :meth:`Client.semaphore`: a
/// :class:`Lock` whose ``acquire`` takes one of :attr:`permits` permits as a :class:`Lease`.
#[pyclass(frozen, extends = AsyncLock, module = "lockgate.aio", name = "Semaphore")]
pub struct AsyncSemaphore {
    /// How many leases may be held at once.
    #[pyo3(get)]
    pub(crate) permits: u32,
}
