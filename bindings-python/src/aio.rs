//! The asyncio API: `lockgate.aio.Client`, `.Lock` (and its subclass `.Semaphore`),
//! `.ReadWriteLock`, `.Election`, `.Lease`, `.AcquireContext`.
//!
//! Every method converts its arguments and returns an asyncio future over the core's future
//! ([`into_asyncio`]); cancelling the asyncio task drops the core future, which cancels the wait
//! on the server. Errors go through `errors::to_py` when the future resolves.

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use lockgate_core::native::{
    Election as CoreElection, Lease as CoreLease, Lock as CoreLock, RedisUrl,
};
use lockgate_core::options::{validate_name, validate_primitive, LockOptions};
use lockgate_core::time::Duration;
use lockgate_core::{Error, Primitive};
use pyo3::prelude::*;
use pyo3::PyClassInitializer;

use crate::errors::{IntoPyResult, PyNone};
use crate::handle::ClientHandle;
use crate::lease::{
    acquire_within, exit_async, lock_mutex, Entered, HandleOf, Holds, LeaseCell, LeaseKind,
    LockKind,
};
use crate::loop_bridge::into_asyncio;
use crate::methods::{acquire_context_methods, aio_lock_methods, lease_methods};
use crate::shared::{self, parse_timeout, Count, LeaderInfo, Secs, Text};

/// The asyncio client: ``lockgate.aio.Client(url, *, key_prefix=None, tls_ca_file=None,
/// connect_timeout=None, response_timeout=None, cluster=False, replica_acks=None,
/// replica_ack_timeout=None)``, with the arguments of :class:`lockgate.Client` (Redis Cluster
/// and replica-acknowledged mode included). The constructor only validates; the connection is made by
/// ``async with`` / :meth:`connect`, or on first use. ``async with`` (or :meth:`close`)
/// releases every lease it still holds on exit.
#[pyclass(frozen, module = "lockgate.aio", name = "Client")]
pub struct AsyncClient {
    state: Arc<ClientHandle>,
    /// The URL with the password redacted.
    url: String,
}

#[pymethods]
impl AsyncClient {
    #[new]
    #[pyo3(signature = (url, *, key_prefix=None, tls_ca_file=None, connect_timeout=None, response_timeout=None, cluster=false, replica_acks=None, replica_ack_timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        url: Text,
        key_prefix: Option<Text>,
        tls_ca_file: Option<PathBuf>,
        connect_timeout: Option<Secs>,
        response_timeout: Option<Secs>,
        cluster: bool,
        replica_acks: Option<Count>,
        replica_ack_timeout: Option<Secs>,
    ) -> PyResult<Self> {
        let options = shared::client_options(
            py,
            &url,
            shared::ClientArgs {
                key_prefix,
                tls_ca_file,
                connect_timeout,
                response_timeout,
                cluster,
                replica_acks,
                replica_ack_timeout,
            },
        )?;
        let url = RedisUrl::parse(&url).py(py)?.to_string();
        Ok(AsyncClient {
            state: ClientHandle::lazy(options),
            url,
        })
    }

    /// A distributed mutex named ``name``; the arguments (``reentrant`` included) are those of
    /// :meth:`lockgate.Client.lock`. Validated here, before any network call.
    #[pyo3(signature = (name, lease=None, *, renew=None, timeout=None, entry_ttl=None, reentrant=false))]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        timeout: Option<Secs>,
        entry_ttl: Option<Secs>,
        reentrant: bool,
    ) -> PyResult<AsyncLock> {
        let options = shared::lock_options(lease, renew, timeout, entry_ttl).py(py)?;
        AsyncLock::new(&self.state, &name, Primitive::Mutex, reentrant, options).py(py)
    }

    /// A distributed counting semaphore named ``name`` with ``permits`` permits; the arguments
    /// are those of :meth:`lockgate.Client.semaphore`. Validated here, before any network call.
    #[pyo3(signature = (name, permits, lease=None, *, renew=None, timeout=None, entry_ttl=None))]
    #[allow(clippy::too_many_arguments)]
    fn semaphore(
        &self,
        py: Python<'_>,
        name: Text,
        permits: Count,
        lease: Option<Secs>,
        renew: Option<bool>,
        timeout: Option<Secs>,
        entry_ttl: Option<Secs>,
    ) -> PyResult<Py<AsyncSemaphore>> {
        let permits = shared::permits(permits).py(py)?;
        let options = shared::lock_options(lease, renew, timeout, entry_ttl).py(py)?;
        let primitive = Primitive::Semaphore { permits };
        let lock = AsyncLock::new(&self.state, &name, primitive, false, options).py(py)?;
        Py::new(
            py,
            PyClassInitializer::from(lock).add_subclass(AsyncSemaphore {}),
        )
    }

    /// A distributed read-write lock named ``name``; the arguments are those of
    /// :meth:`lockgate.Client.read_write_lock`. Validated here, before any network call.
    #[pyo3(signature = (name, lease=None, *, renew=None, timeout=None, entry_ttl=None, writers_first=true, reentrant=false))]
    #[allow(clippy::too_many_arguments)]
    fn read_write_lock(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        timeout: Option<Secs>,
        entry_ttl: Option<Secs>,
        writers_first: bool,
        reentrant: bool,
    ) -> PyResult<AsyncReadWriteLock> {
        let options = shared::lock_options(lease, renew, timeout, entry_ttl).py(py)?;
        let read = Primitive::Read { writers_first };
        let read = AsyncLock::new(&self.state, &name, read, reentrant, options.clone()).py(py)?;
        let write =
            AsyncLock::new(&self.state, &name, Primitive::Write, reentrant, options).py(py)?;
        Ok(AsyncReadWriteLock {
            read: Py::new(py, read)?,
            write: Py::new(py, write)?,
        })
    }

    /// A leader election named ``name``; the arguments are those of
    /// :meth:`lockgate.Client.election`. Validated here, before any network call.
    #[pyo3(signature = (name, lease=None, *, renew=None, entry_ttl=None))]
    fn election(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        entry_ttl: Option<Secs>,
    ) -> PyResult<AsyncElection> {
        validate_name(&name).py(py)?;
        let options = shared::lock_options(lease, renew, None, entry_ttl).py(py)?;
        Ok(AsyncElection {
            spec: Arc::new(ElectionSpec {
                state: self.state.clone(),
                name: name.to_owned(),
                options,
                election: tokio::sync::OnceCell::new(),
            }),
        })
    }

    /// Connects now (otherwise the first operation does); raises the connection's error.
    fn connect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.state.clone();
        into_asyncio(py, async move { state.client().await.map(|_| PyNone) })
    }

    /// Releases every lease and cancels every wait of this client; further calls on it raise
    /// :class:`lockgate.ClientClosedError`.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let state = self.state.clone();
        into_asyncio(py, async move {
            state.close().await;
            Ok(PyNone)
        })
    }

    /// The server URL with the password replaced by ``***``.
    #[getter]
    fn url(&self) -> &str {
        &self.url
    }

    /// The prefix of every key and channel this client uses.
    #[getter]
    fn key_prefix(&self) -> &str {
        self.state.key_prefix()
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
        let state = self.state.clone();
        into_asyncio(py, async move {
            state.close().await;
            Ok(PyNone)
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "<lockgate.aio.Client url={} key_prefix={}>",
            shared::py_repr(py, &self.url)?,
            shared::py_repr(py, self.state.key_prefix())?
        ))
    }
}

/// What an asyncio lock handle acquires through (a `Client`'s lock or a `Redlock`'s): its
/// name, options and connection, and the core handle, made on first use.
pub(crate) trait LockSpec: Send + Sync + 'static {
    type Lock: LockKind;
    fn name(&self) -> &str;
    fn options(&self) -> &LockOptions;
    fn client(&self) -> &HandleOf<<Self::Lock as LockKind>::Lease>;
    /// The core handle (connecting first if needed).
    fn lock(&self) -> impl Future<Output = Result<Self::Lock, Error>> + Send + '_;
}

/// A lease of `K`, as the asyncio classes hold it.
pub(crate) type CellOf<K> = Arc<LeaseCell<<K as LockKind>::Lease>>;

/// `Some(t)`: wait up to `t`; `None`: the lock's default wait.
pub(crate) async fn acquire<S: LockSpec>(
    spec: &S,
    timeout: Option<Duration>,
) -> Result<CellOf<S::Lock>, Error> {
    let lease = acquire_within(&spec.lock().await?, timeout).await?;
    Ok(LeaseCell::new(lease, spec.client().clone()))
}

/// One attempt without waiting.
pub(crate) async fn try_acquire<S: LockSpec>(spec: &S) -> Result<Option<CellOf<S::Lock>>, Error> {
    let lease = spec.lock().await?.try_acquire().await?;
    Ok(lease.map(|l| LeaseCell::new(l, spec.client().clone())))
}

/// A `Client`'s lock: its primitive and reentrancy besides the name and options.
struct ClientLockSpec {
    state: Arc<ClientHandle>,
    name: String,
    primitive: Primitive,
    reentrant: bool,
    options: LockOptions,
    /// Made once the client is connected; kept, so a reentrant handle's holds are counted across
    /// acquisitions (clones of one core handle share them).
    handle: tokio::sync::OnceCell<CoreLock>,
}

impl LockSpec for ClientLockSpec {
    type Lock = CoreLock;

    fn name(&self) -> &str {
        &self.name
    }

    fn options(&self) -> &LockOptions {
        &self.options
    }

    fn client(&self) -> &Arc<ClientHandle> {
        &self.state
    }

    async fn lock(&self) -> Result<CoreLock, Error> {
        let client = self.state.client().await?;
        self.handle
            .get_or_try_init(|| async {
                client.primitive(
                    &self.name,
                    self.primitive.clone(),
                    self.options.clone(),
                    self.reentrant,
                )
            })
            .await
            .cloned()
    }
}

/// What an election needs: the client, its name and options, and the core handle.
struct ElectionSpec {
    state: Arc<ClientHandle>,
    name: String,
    options: LockOptions,
    election: tokio::sync::OnceCell<CoreElection>,
}

impl ElectionSpec {
    async fn election(&self) -> Result<CoreElection, Error> {
        let client = self.state.client().await?;
        self.election
            .get_or_try_init(|| async { client.election(&self.name, self.options.clone()) })
            .await
            .cloned()
    }

    /// `None`: wait until elected.
    async fn campaign(
        &self,
        value: &str,
        timeout: Option<Duration>,
    ) -> Result<Arc<LeaseCell<CoreLease>>, Error> {
        let lease = self.election().await?.campaign(value, timeout).await?;
        Ok(LeaseCell::new(lease, self.state.clone()))
    }

    async fn try_campaign(
        &self,
        value: String,
    ) -> Result<Option<Arc<LeaseCell<CoreLease>>>, Error> {
        let client = self.state.client().await?;
        let lock = client.primitive(
            &self.name,
            Primitive::Leader { value },
            self.options.clone(),
            false,
        )?;
        let lease = lock.try_acquire().await?;
        Ok(lease.map(|l| LeaseCell::new(l, self.state.clone())))
    }
}

/// What an [`AcquireContext`] acquires.
#[derive(Clone)]
enum Source {
    Lock(Arc<ClientLockSpec>),
    Campaign(Arc<ElectionSpec>, Arc<str>),
}

/// What an acquisition context acquires: a lock (either kind) or a candidacy.
pub(crate) trait Acquire: Clone + Send + Sync + 'static {
    type Lease: LeaseKind;
    fn acquire(
        &self,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<Arc<LeaseCell<Self::Lease>>, Error>> + Send + '_;
}

impl Acquire for Source {
    type Lease = CoreLease;
    async fn acquire(&self, timeout: Option<Duration>) -> Result<Arc<LeaseCell<CoreLease>>, Error> {
        match self {
            Source::Lock(spec) => acquire(&**spec, timeout).await,
            Source::Campaign(spec, value) => spec.campaign(value, timeout).await,
        }
    }
}

impl<S: LockSpec> Acquire for Arc<S> {
    type Lease = <S::Lock as LockKind>::Lease;
    fn acquire(
        &self,
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<Arc<LeaseCell<Self::Lease>>, Error>> + Send + '_ {
        acquire(&**self, timeout)
    }
}

/// The lease an acquisition context's `__aenter__` took, for its `__aexit__`.
type Held<L> = Arc<Mutex<Option<Arc<LeaseCell<L>>>>>;

/// What an acquisition context keeps: what to acquire, how long to wait, and the lease taken
/// by `__aenter__`, for `__aexit__`.
pub(crate) struct AcquireState<S: Acquire> {
    source: S,
    timeout: Option<Duration>,
    held: Held<S::Lease>,
    /// The leases of the lock handle acquired through (none for a candidacy).
    holds: Option<Arc<Holds<S::Lease>>>,
    /// The acquisition started by awaiting the context as a coroutine (`send`), if it was.
    awaited: Mutex<Awaited>,
}

/// Where a context used as a coroutine stands.
pub(crate) enum Awaited {
    NotStarted,
    Started(Py<PyAny>),
    /// Closed or thrown into before it started: it never will.
    Closed,
}

impl<S: Acquire> AcquireState<S> {
    pub(crate) fn new(
        source: S,
        timeout: Option<Duration>,
        holds: Option<Arc<Holds<S::Lease>>>,
    ) -> Self {
        AcquireState {
            source,
            timeout,
            held: Arc::new(Mutex::new(None)),
            holds,
            awaited: Mutex::new(Awaited::NotStarted),
        }
    }

    /// The [`Call`](crate::loop_bridge::Call) this context runs as a coroutine, started by the
    /// first `send`. A context is awaited once, like a coroutine.
    pub(crate) fn awaited<'py, P>(
        &self,
        py: Python<'py>,
        wrap: fn(Arc<LeaseCell<S::Lease>>) -> P,
    ) -> PyResult<Bound<'py, PyAny>>
    where
        P: for<'a> IntoPyObject<'a> + Send + 'static,
    {
        let mut awaited = lock_mutex(&self.awaited);
        match &*awaited {
            Awaited::Started(call) => Ok(call.bind(py).clone()),
            Awaited::Closed => Err(pyo3::exceptions::PyRuntimeError::new_err(
                "cannot reuse already awaited coroutine",
            )),
            Awaited::NotStarted => {
                let call = self.start(py, false, wrap)?;
                *awaited = Awaited::Started(call.clone().unbind());
                Ok(call)
            }
        }
    }

    /// `throw()` / `close()` before the first `send`: the acquisition never starts.
    /// Returns the started call otherwise.
    pub(crate) fn stop_or_started(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        let mut awaited = lock_mutex(&self.awaited);
        match &*awaited {
            Awaited::Started(call) => Some(call.clone_ref(py)),
            _ => {
                *awaited = Awaited::Closed;
                None
            }
        }
    }

    /// Acquires, resolving to the lease object `wrap` makes; `keep`: for `__aexit__` too.
    pub(crate) fn start<'py, P>(
        &self,
        py: Python<'py>,
        keep: bool,
        wrap: fn(Arc<LeaseCell<S::Lease>>) -> P,
    ) -> PyResult<Bound<'py, PyAny>>
    where
        P: for<'a> IntoPyObject<'a> + Send + 'static,
    {
        let source = self.source.clone();
        let timeout = self.timeout;
        let held = self.held.clone();
        let holds = self.holds.clone();
        into_asyncio(py, async move {
            let cell = source.acquire(timeout).await?;
            if keep {
                *lock_mutex(&held) = Some(cell.clone());
            }
            Ok(Deliver::new(cell, holds, wrap))
        })
    }

    /// `__aexit__`: releases the lease `__aenter__` took.
    pub(crate) fn exit<'py>(
        &self,
        py: Python<'py>,
        exc_type: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let cell = lock_mutex(&self.held).take();
        exit_async(py, cell, exc_type)
    }
}

/// A lease on its way to Python: the lock handle keeps it (its [`Holds`]) only once it is
/// handed over on the loop thread. A result whose awaiter gave up meanwhile is never converted,
/// so it is dropped and released instead of being kept by a handle nobody told of it.
pub(crate) struct Deliver<L: LeaseKind, P> {
    cell: Arc<LeaseCell<L>>,
    holds: Option<Arc<Holds<L>>>,
    wrap: fn(Arc<LeaseCell<L>>) -> P,
}

impl<L: LeaseKind, P> Deliver<L, P> {
    pub(crate) fn new(
        cell: Arc<LeaseCell<L>>,
        holds: Option<Arc<Holds<L>>>,
        wrap: fn(Arc<LeaseCell<L>>) -> P,
    ) -> Self {
        Deliver { cell, holds, wrap }
    }
}

impl<'py, L: LeaseKind, P: IntoPyObject<'py>> IntoPyObject<'py> for Deliver<L, P> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        use pyo3::IntoPyObjectExt;
        if let Some(holds) = self.holds {
            holds.push(self.cell.clone());
        }
        (self.wrap)(self.cell).into_bound_py_any(py)
    }
}

/// A named distributed mutex for asyncio, made by :meth:`Client.lock` (also one half of a
/// :class:`ReadWriteLock`, and the base of :class:`Semaphore`). Holding it is a :class:`Lease`,
/// never a task: a lease may be released from any task.
///
/// ``async with lock as lease:`` acquires with the lock's default timeout and releases on exit.
#[pyclass(frozen, subclass, module = "lockgate.aio", name = "Lock")]
pub struct AsyncLock {
    spec: Arc<ClientLockSpec>,
    /// Leases taken by `async with lock:`, per asyncio task, for `__aexit__` to release.
    entered: Arc<Entered<usize, Arc<LeaseCell<CoreLease>>>>,
    /// Every lease acquired through this handle and not released yet (see [`Holds`]).
    holds: Arc<Holds<CoreLease>>,
}

impl AsyncLock {
    /// Validates everything the core would (name, primitive, reentrancy) before any network
    /// call, so bad input raises at the call rather than at the first await.
    fn new(
        state: &Arc<ClientHandle>,
        name: &str,
        primitive: Primitive,
        reentrant: bool,
        options: LockOptions,
    ) -> Result<Self, Error> {
        validate_name(name)?;
        validate_primitive(&primitive)?;
        Ok(AsyncLock {
            spec: Arc::new(ClientLockSpec {
                state: state.clone(),
                name: name.to_owned(),
                primitive,
                reentrant,
                options,
                handle: tokio::sync::OnceCell::new(),
            }),
            entered: Arc::new(Entered::new()),
            holds: Arc::new(Holds::new()),
        })
    }
}

/// Identifies the running asyncio task (0 outside one), for `async with lock:`.
pub(crate) fn current_task_key(py: Python<'_>) -> PyResult<usize> {
    let task = py.import("asyncio")?.call_method0("current_task")?;
    Ok(if task.is_none() {
        0
    } else {
        task.as_ptr() as usize
    })
}

aio_lock_methods! {
    AsyncLock -> AcquireContext(Source::Lock), AsyncLease;
    /// ``await lock.acquire(timeout=None)`` waits up to ``timeout`` seconds (default: the lock's
    /// ``timeout``; ``None`` waits until acquired) and returns the :class:`Lease`; raises
    /// :class:`lockgate.LockTimeoutError` if the lock stays held. Cancelling the task abandons
    /// the wait and removes it from the server. ``async with lock.acquire(timeout=5) as
    /// lease:`` releases on exit.
    acquire;
    /// ``await lock.try_acquire()``: one attempt without waiting; a :class:`Lease`, or ``None``
    /// if the lock is held (for a semaphore: every permit is taken) or others are queued for it.
    try_acquire;

    /// How long a waiter's queue entry survives without a heartbeat, in seconds.
    #[getter]
    fn entry_ttl(&self) -> f64 {
        shared::to_secs(self.spec.options.entry_ttl)
    }

    /// Whether acquiring again while this handle holds the lock adds a hold instead of waiting.
    #[getter]
    fn reentrant(&self) -> bool {
        self.spec.reentrant
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        shared::lock_repr(
            py,
            "lockgate.aio",
            &self.spec.name,
            &self.spec.primitive,
            self.spec.reentrant,
            &self.spec.options,
        )
    }
}

/// A distributed counting semaphore for asyncio, made by :meth:`Client.semaphore`: a
/// :class:`Lock` whose :meth:`~Lock.acquire` takes one of :attr:`permits` permits as a
/// :class:`Lease`. ``async with sem.acquire(timeout=5) as permit:`` holds one for the block.
#[pyclass(frozen, extends = AsyncLock, module = "lockgate.aio", name = "Semaphore")]
pub struct AsyncSemaphore {}

#[pymethods]
impl AsyncSemaphore {
    /// How many leases may be held at once.
    #[getter]
    fn permits(slf: PyRef<'_, Self>) -> u32 {
        match slf.as_super().spec.primitive {
            Primitive::Semaphore { permits } => permits,
            _ => unreachable!("a Semaphore wraps a semaphore handle"),
        }
    }
}

/// A distributed read-write lock for asyncio, made by :meth:`Client.read_write_lock`: many
/// readers hold :attr:`read_lock` at once, never beside a holder of :attr:`write_lock`.
///
/// ``async with rw.read_lock:`` / ``async with rw.write_lock.acquire(timeout=5) as lease:``.
#[pyclass(frozen, module = "lockgate.aio", name = "ReadWriteLock")]
pub struct AsyncReadWriteLock {
    read: Py<AsyncLock>,
    write: Py<AsyncLock>,
}

#[pymethods]
impl AsyncReadWriteLock {
    /// The shared half: a :class:`Lock` that many readers hold at once.
    #[getter]
    fn read_lock(&self, py: Python<'_>) -> Py<AsyncLock> {
        self.read.clone_ref(py)
    }

    /// The exclusive half: a :class:`Lock` held by one writer, beside no reader.
    #[getter]
    fn write_lock(&self, py: Python<'_>) -> Py<AsyncLock> {
        self.write.clone_ref(py)
    }

    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        &self.write.get().spec.name
    }

    /// Whether a queued writer blocks readers that arrive after it.
    #[getter]
    fn writers_first(&self) -> bool {
        matches!(
            self.read.get().spec.primitive,
            Primitive::Read {
                writers_first: true
            }
        )
    }

    /// Whether both halves are reentrant.
    #[getter]
    fn reentrant(&self) -> bool {
        self.write.get().spec.reentrant
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "<lockgate.aio.ReadWriteLock name={} writers_first={} reentrant={}>",
            shared::py_repr(py, self.name())?,
            if self.writers_first() {
                "True"
            } else {
                "False"
            },
            if self.reentrant() { "True" } else { "False" },
        ))
    }
}

/// A leader election for asyncio, made by :meth:`Client.election`. ``await
/// election.campaign(value)`` waits to lead and returns the leadership :class:`Lease` (its
/// fencing token is the term; ``await lease.lost()`` tells of lost leadership; releasing it
/// resigns); ``await election.observe()`` shows the current leader.
#[pyclass(frozen, module = "lockgate.aio", name = "Election")]
pub struct AsyncElection {
    spec: Arc<ElectionSpec>,
}

#[pymethods]
impl AsyncElection {
    /// ``await election.campaign(value, timeout=None)`` waits up to ``timeout`` seconds
    /// (``None``: until elected) to become leader, publishing ``value`` (at most 4096 bytes) to
    /// observers, and returns the leadership :class:`Lease`; raises
    /// :class:`lockgate.LockTimeoutError` if another candidate still leads. ``async with
    /// election.campaign(value) as leadership:`` resigns on exit. Cancelling the task withdraws
    /// the candidacy.
    #[pyo3(signature = (value, timeout=None))]
    fn campaign(
        &self,
        py: Python<'_>,
        value: Text,
        timeout: Option<Secs>,
    ) -> PyResult<AcquireContext> {
        validate_primitive(&Primitive::Leader {
            value: value.to_owned(),
        })
        .py(py)?;
        let source = Source::Campaign(self.spec.clone(), (&*value).into());
        Ok(AcquireContext {
            state: AcquireState::new(source, parse_timeout(py, timeout)?, None),
        })
    }

    /// ``await election.try_campaign(value)``: one attempt without waiting; the leadership
    /// :class:`Lease`, or ``None`` if someone leads or other candidates are queued.
    fn try_campaign<'py>(&self, py: Python<'py>, value: Text) -> PyResult<Bound<'py, PyAny>> {
        let value = value.0;
        validate_primitive(&Primitive::Leader {
            value: value.clone(),
        })
        .py(py)?;
        let spec = self.spec.clone();
        into_asyncio(py, async move {
            Ok(spec
                .try_campaign(value)
                .await?
                .map(|cell| AsyncLease { cell }))
        })
    }

    /// ``await election.observe()``: the current leader as a :class:`lockgate.LeaderInfo`
    /// (``value``, ``term``, ``remaining``), or ``None`` if nobody leads.
    fn observe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let spec = self.spec.clone();
        into_asyncio(py, async move {
            let info = spec.election().await?.observe().await?;
            Ok(info.map(LeaderInfo::from))
        })
    }

    /// The election's name.
    #[getter]
    fn name(&self) -> &str {
        &self.spec.name
    }

    /// The leader's lease length in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        shared::to_secs(self.spec.options.lease)
    }

    /// Whether a watchdog renews the leader's lease until it resigns.
    #[getter]
    fn renew(&self) -> bool {
        self.spec.options.auto_renew
    }

    /// How long a candidate's queue entry survives without a heartbeat, in seconds.
    #[getter]
    fn entry_ttl(&self) -> f64 {
        shared::to_secs(self.spec.options.entry_ttl)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "<lockgate.aio.Election name={} lease={} renew={}>",
            shared::py_repr(py, &self.spec.name)?,
            pyo3::types::PyFloat::new(py, self.lease()).repr()?,
            if self.spec.options.auto_renew {
                "True"
            } else {
                "False"
            },
        ))
    }
}

/// What :meth:`Lock.acquire` and :meth:`Election.campaign` return: await it for a
/// :class:`Lease`, or use it with ``async with`` to release the lease on exit.
#[pyclass(frozen, module = "lockgate.aio", name = "AcquireContext")]
pub struct AcquireContext {
    state: AcquireState<Source>,
}

acquire_context_methods!(AcquireContext -> AsyncLease);

/// Proof of holding a lock, one semaphore permit or an election's leadership (asyncio). Pass :attr:`fencing_token` to the resource you protect;
/// ``await lease.lost()`` or :meth:`on_lost` tell you if the lease is lost. Leaving
/// ``async with`` releases it and raises :class:`lockgate.NotHeldError` if it had been lost
/// meanwhile. Garbage-collecting an unreleased lease releases it in the background.
#[pyclass(frozen, module = "lockgate.aio", name = "Lease")]
pub struct AsyncLease {
    cell: Arc<LeaseCell<CoreLease>>,
}

lease_methods! {
    aio AsyncLease, "lockgate.aio.Lease";
    /// Whether the lease is certainly still held now (renewed, not expired, not lost).
    is_held;
    /// Seconds the lease is certainly still valid, or ``None`` if it is not held.
    remaining;
    /// ``await lease.extend(seconds)`` sets the remaining lease to ``seconds`` if still held.
    /// Raises :class:`lockgate.NotHeldError` if it expired or was taken over; never
    /// re-acquires a lost lock.
    extend;
    /// ``await lease.release()`` releases the lock (only this lease's own hold; for a permit,
    /// returns it; for leadership, resigns): ``True`` if it was still held, ``False`` if it had
    /// already expired, been taken over or released. A re-entered hold of a reentrant lock
    /// gives back only that hold.
    release;
    /// ``await lease.lost()`` resolves with the reason (a :class:`lockgate.LockError`, returned,
    /// not raised) when the lease is lost (renewal refused, key deleted, expired), or with
    /// ``None`` once it is released normally. Awaiting it does not keep the lease alive.
    lost;

    /// Strictly greater than every fencing token issued before for this lock name (for a
    /// leadership lease: the term). Re-entered holds of a reentrant lock share one token.
    #[getter]
    fn fencing_token(&self) -> u64 {
        self.cell.lease().fencing_token()
    }
}
