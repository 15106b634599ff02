//! Lock handles: a mutex (`Client.lock`), a semaphore (a `Lock` taking one permit) and the
//! halves of a read-write lock, in both APIs, over one [`LockSpec`]. The asyncio `acquire`
//! returns an [`AcquireContext`]: awaitable, and an async context manager.

use std::future::Future;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;

use lockgate_core::options::{validate_name, validate_primitive, LockOptions};
use lockgate_core::time::Duration;
use lockgate_core::{Error, ErrorKind, Primitive};
use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::PyClassInitializer;
use tokio::sync::{Notify, OnceCell};

use crate::caller;
use crate::connection::Connection;
use crate::convert::{lease_secs, py_bool, py_repr, secs_repr, timeout, Secs};
use crate::election::ElectionSpec;
use crate::errors::IntoPyResult;
use crate::lease::{exit, exit_async, lock_mutex, Deliver, Entered, Holds, LeaseCell};
use crate::loop_bridge::{into_asyncio, start, Call};
use crate::runtime::block_on;
use lockgate_core::native;
use lockgate_core::native::Owner;

/// A lock handle of either API: what it acquires, the core's handle (made once connected and
/// kept, so a reentrant handle's holds are counted across acquisitions) and the leases it holds.
pub(crate) struct LockSpec {
    conn: Arc<Connection>,
    name: String,
    primitive: Primitive,
    reentrant: bool,
    options: LockOptions,
    core: OnceCell<native::Lock>,
    holds: Arc<Holds>,
}

impl LockSpec {
    /// Validated now, before any network call (also for a client not connected yet).
    pub(crate) fn new(
        py: Python<'_>,
        conn: &Arc<Connection>,
        name: &str,
        primitive: Primitive,
        reentrant: bool,
        options: LockOptions,
    ) -> PyResult<Arc<Self>> {
        validate_name(name).and_then(|()| validate_primitive(&primitive)).py(py)?;
        // A connected client makes the core's handle now, so what its backend cannot do
        // (`UNSUPPORTED`) raises at this call.
        let core = match conn.connected() {
            Some(c) => {
                OnceCell::new_with(Some(c.primitive(name, primitive.clone(), options.clone(), reentrant).py(py)?))
            }
            None => OnceCell::new(),
        };
        Ok(Arc::new(LockSpec {
            conn: conn.clone(),
            name: name.into(),
            primitive,
            reentrant,
            options,
            core,
            holds: Arc::default(),
        }))
    }

    /// The core's handle (connecting first on a client's first use).
    async fn core(&self) -> Result<&native::Lock, Error> {
        self.conn.check()?;
        if let Some(lock) = self.core.get() {
            return Ok(lock); // the common case: no clone, no await
        }
        let client = self.conn.client().await?;
        let make =
            || async { client.primitive(&self.name, self.primitive.clone(), self.options.clone(), self.reentrant) };
        self.core.get_or_try_init(make).await
    }

    /// `owner`'s acquire (`None`: the lock's default wait).
    async fn acquire(&self, owner: Owner, timeout: Option<Duration>) -> Result<Arc<LeaseCell>, Error> {
        let core = self.core().await?.as_owner(owner);
        let lease = match timeout {
            Some(t) => core.acquire(t).await?,
            None => core.acquire_default().await?,
        };
        Ok(LeaseCell::new(lease, &self.conn))
    }

    /// As [`acquire`](Self::acquire), ended by `cancel` through the core's explicit cancel:
    /// `CANCELLED` once what the wait left on the server is removed.
    async fn acquire_unless(
        &self,
        owner: Owner,
        timeout: Option<Duration>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Arc<LeaseCell>, Error> {
        let mut cancel = std::pin::pin!(cancel);
        // Connecting is not a wait on the server: a cancel then ends it at once.
        let core = tokio::select! {
            biased;
            core = self.core() => core?,
            () = &mut cancel => return Err(Error::new(ErrorKind::Cancelled, "the wait was cancelled by lock.cancel()")),
        };
        let lease = core.as_owner(owner).acquire_unless(timeout, cancel).await?;
        Ok(LeaseCell::new(lease, &self.conn))
    }

    fn deliver(&self, owner: Owner, cell: Arc<LeaseCell>) -> Deliver {
        Deliver(cell, Some((owner, self.holds.clone())))
    }
}

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

    /// One attempt without waiting (awaitable in ``lockgate.aio``): a lease, or ``None`` if the
    /// lock is held (for a semaphore: every permit is taken) or others are queued for it.
    fn try_acquire<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (spec, owner) = (self.spec.clone(), caller::of(py, self.spec.conn.api)?);
        spec.conn.api.run(py, async move {
            let lease = spec.core().await?.as_owner(owner).try_acquire().await?;
            Ok(lease.map(|l| spec.deliver(owner, LeaseCell::new(l, &spec.conn))))
        })
    }

    /// Releases the most recent lease the calling thread (asyncio task) acquired through this
    /// handle, else the handle's most recent one (redis-py's ``lock.release()``; awaitable in
    /// ``lockgate.aio``): ``True`` if it was still held, ``False`` if it had been lost.
    /// :class:`lockgate.NotHeldError` if this handle holds none.
    fn release<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (spec, owner) = (self.spec.clone(), caller::of(py, self.spec.conn.api)?);
        spec.conn.api.run(py, async move { spec.holds.release_top(owner).await })
    }

    /// Sets the remaining time of the lease :meth:`release` would release (see
    /// ``Lease.extend``; awaitable in ``lockgate.aio``). :class:`lockgate.NotHeldError` if it
    /// holds none or that lease was lost.
    fn extend<'py>(&self, py: Python<'py>, seconds: Secs) -> PyResult<Bound<'py, PyAny>> {
        let (d, spec) = (lease_secs(py, "seconds", seconds)?, self.spec.clone());
        let owner = caller::of(py, spec.conn.api)?;
        spec.conn.api.run(py, async move { spec.holds.extend_top(owner, d).await.map(|()| None::<()>) })
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
        let cls: Bound<'_, PyType> = slf.get_type();
        Ok(format!(
            "<{}.{} name={}{kind}{} lease={} renew={} wait={wait}>",
            cls.module()?,
            cls.qualname()?,
            py_repr(py, &spec.name)?,
            if spec.reentrant { " reentrant=True" } else { "" },
            secs_repr(py, spec.options.lease)?,
            py_bool(spec.options.auto_renew),
        ))
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
    entered: Entered<ThreadId>,
    /// Notified by `cancel()`: ends the waits blocked on this handle.
    cancel: Notify,
    /// The waits in progress, for `cancel()` to return once those it ended are over.
    waits: Waits,
}

/// A handle's waits in progress (id -> the thread waiting; and the next id), and a signal
/// when one ends.
#[derive(Default)]
struct Waits {
    ids: Mutex<(u64, HashMap<u64, ThreadId>)>,
    ended: Condvar,
}

impl Waits {
    fn enter(&self) -> WaitGuard<'_> {
        let mut ids = lock_mutex(&self.ids);
        ids.0 += 1;
        let id = ids.0;
        ids.1.insert(id, std::thread::current().id());
        WaitGuard(self, id)
    }

    /// The waits in progress but the calling thread's (one a signal handler interrupted: it
    /// cannot end while its own thread waits for it).
    fn others(&self) -> HashSet<u64> {
        let me = std::thread::current().id();
        lock_mutex(&self.ids).1.iter().filter(|(_, t)| **t != me).map(|(id, _)| *id).collect()
    }

    /// Blocks until none of `ids` is in progress.
    fn await_end(&self, ids: &HashSet<u64>) {
        let mut now = lock_mutex(&self.ids);
        while now.1.keys().any(|id| ids.contains(id)) {
            now = self.ended.wait(now).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Removes its wait from [`Waits`] when the wait is over, however it ended.
struct WaitGuard<'a>(&'a Waits, u64);

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        lock_mutex(&self.0.ids).1.remove(&self.1);
        self.0.ended.notify_all();
    }
}

impl Lock {
    pub(crate) fn init(spec: Arc<LockSpec>) -> PyClassInitializer<Self> {
        PyClassInitializer::from(LockBase { spec: spec.clone() }).add_subclass(Lock {
            spec,
            entered: Entered::new(),
            cancel: Notify::new(),
            waits: Waits::default(),
        })
    }

    fn wait<'py>(&self, py: Python<'py>, timeout: Option<Duration>) -> PyResult<(Bound<'py, PyAny>, Arc<LeaseCell>)> {
        // Registered before the GIL is released: a `cancel()` from here on reaches this wait,
        // and returns once it is over.
        let cancelled = self.cancel.notified();
        let running = self.waits.enter();
        let owner = caller::thread();
        let cell = block_on(py, self.spec.acquire_unless(owner, timeout, cancelled));
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
        // Taken with the GIL held, as every wait registers: exactly the waits notified now.
        let ended = self.waits.others();
        self.cancel.notify_waiters();
        py.detach(|| self.waits.await_end(&ended));
    }

    fn __enter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (lease, cell) = self.wait(py, None)?;
        self.entered.push(std::thread::current().id(), cell);
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
        match self.entered.pop(&std::thread::current().id()) {
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
    permits: u32,
}

impl Semaphore {
    pub(crate) fn init(spec: Arc<LockSpec>, permits: u32) -> PyClassInitializer<Self> {
        Lock::init(spec).add_subclass(Semaphore { permits })
    }
}

/// A named distributed mutex for asyncio, made by :meth:`Client.lock` (also one half of a
/// :class:`ReadWriteLock`, and the base of :class:`Semaphore`). Holding it is a :class:`Lease`,
/// never a task. ``async with lock as lease:`` acquires with the lock's default timeout and
/// releases on exit.
#[pyclass(frozen, subclass, extends = LockBase, module = "lockgate.aio", name = "Lock")]
pub struct AsyncLock {
    spec: Arc<LockSpec>,
    /// Leases taken by `async with lock:`, per asyncio task, for `__aexit__` to release.
    entered: Arc<Entered<usize>>,
}

impl AsyncLock {
    pub(crate) fn init(spec: Arc<LockSpec>) -> PyClassInitializer<Self> {
        PyClassInitializer::from(LockBase { spec: spec.clone() })
            .add_subclass(AsyncLock { spec, entered: Arc::new(Entered::new()) })
    }
}

/// The running asyncio task (0 outside one), for `async with lock:`.
fn current_task(py: Python<'_>) -> PyResult<usize> {
    let task = py.import("asyncio")?.call_method0("current_task")?;
    Ok(if task.is_none() { 0 } else { task.as_ptr() as usize })
}

#[pymethods]
impl AsyncLock {
    /// ``await lock.acquire(timeout=None)``: as :meth:`lockgate.Lock.acquire`; cancelling the
    /// task abandons the wait and removes it from the server. ``async with
    /// lock.acquire(timeout=5) as lease:`` releases on exit.
    #[pyo3(signature = (timeout=None))]
    fn acquire(&self, py: Python<'_>, timeout: Option<Secs>) -> PyResult<Py<AcquireContext>> {
        AcquireContext::new(py, Source::Lock(self.spec.clone()), self::timeout(py, timeout)?)
    }

    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (key, spec, entered) = (current_task(py)?, self.spec.clone(), self.entered.clone());
        let owner = caller::task(py)?;
        into_asyncio(py, async move {
            let cell = spec.acquire(owner, None).await?;
            entered.push(key, cell.clone());
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
        exit_async(py, self.entered.pop(&current_task(py)?), exc_type)
    }
}

/// A distributed counting semaphore for asyncio, made by :meth:`Client.semaphore`: a
/// :class:`Lock` whose ``acquire`` takes one of :attr:`permits` permits as a :class:`Lease`.
#[pyclass(frozen, extends = AsyncLock, module = "lockgate.aio", name = "Semaphore")]
pub struct AsyncSemaphore {
    /// How many leases may be held at once.
    #[pyo3(get)]
    permits: u32,
}

impl AsyncSemaphore {
    pub(crate) fn init(spec: Arc<LockSpec>, permits: u32) -> PyClassInitializer<Self> {
        AsyncLock::init(spec).add_subclass(AsyncSemaphore { permits })
    }
}

/// What an [`AcquireContext`] acquires: through a lock handle, or a candidacy.
#[derive(Clone)]
pub(crate) enum Source {
    Lock(Arc<LockSpec>),
    Campaign(Arc<ElectionSpec>, Arc<str>),
}

impl Source {
    /// Acquires for `owner` (the asyncio task that awaits it; a campaign's candidate is its
    /// election, whoever awaits).
    async fn acquire(self, owner: Owner, timeout: Option<Duration>) -> Result<Deliver, Error> {
        match self {
            Source::Lock(spec) => Ok(spec.deliver(owner, spec.acquire(owner, timeout).await?)),
            Source::Campaign(spec, value) => Ok(Deliver(spec.campaign(&value, timeout).await?, None)),
        }
    }
}

/// What :meth:`Lock.acquire` and :meth:`Election.campaign` return: await it for a
/// :class:`Lease` (a coroutine: it starts when first awaited), or use it with ``async with``
/// to release the lease on exit.
#[pyclass(frozen, extends = Call, module = "lockgate.aio")]
pub struct AcquireContext {
    source: Source,
    timeout: Option<Duration>,
    /// The lease `__aenter__` took, for `__aexit__`.
    held: Arc<Mutex<Option<Arc<LeaseCell>>>>,
}

impl AcquireContext {
    pub(crate) fn new(py: Python<'_>, source: Source, timeout: Option<Duration>) -> PyResult<Py<Self>> {
        // The owner is the task that first awaits it (`gather` wraps each in a task of its own).
        let deferred = source.clone();
        let call = Call::deferred(Box::new(move |py| {
            let owner = caller::task(py)?;
            start(deferred.acquire(owner, timeout))(py)
        }));
        let me = AcquireContext { source, timeout, held: Arc::default() };
        Py::new(py, PyClassInitializer::from(call).add_subclass(me))
    }
}

#[pymethods]
impl AcquireContext {
    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (source, timeout, held) = (self.source.clone(), self.timeout, self.held.clone());
        let owner = caller::task(py)?;
        into_asyncio(py, async move {
            let deliver = source.acquire(owner, timeout).await?;
            *lock_mutex(&held) = Some(deliver.0.clone());
            Ok(deliver)
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
        let cell = lock_mutex(&self.held).take();
        exit_async(py, cell, exc_type)
    }
}
