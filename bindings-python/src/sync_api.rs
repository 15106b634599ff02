//! The blocking API: `lockgate.Client`, `lockgate.Lock` (and its subclass `lockgate.Semaphore`),
//! `lockgate.ReadWriteLock`, `lockgate.Election` and `lockgate.Lease`.
//!
//! Every method converts its arguments, runs the core's future with [`block_on`] (GIL released,
//! Ctrl-C honoured) and maps errors through `errors::to_py`.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::Poll;
use std::thread::ThreadId;

use lockgate_core::native::{
    Client as CoreClient, Election as CoreElection, Lease as CoreLease, Lock as CoreLock,
};
use lockgate_core::options::LockOptions;
use lockgate_core::{Error, ErrorKind, Primitive};
use pyo3::prelude::*;
use pyo3::PyClassInitializer;
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

use crate::errors::IntoPyResult;
use crate::handle::ClientHandle;
use crate::lease::{
    acquire_within, exception_in_flight, Entered, HandleOf, Holds, LeaseCell, LeaseKind, LockKind,
};
use crate::methods::{lease_methods, sync_lock_methods};
use crate::runtime::block_on;
use crate::shared::{self, Count, LeaderInfo, Secs, Text};

/// A connection to one Redis server (or one Redis Cluster), shared by every lock made from it.
///
/// ``Client(url, *, key_prefix=None, tls_ca_file=None, connect_timeout=None, response_timeout=None,
/// cluster=False, replica_acks=None, replica_ack_timeout=None)``
/// connects to ``redis://[user:password@]host[:port][/db]`` or ``rediss://...`` (TLS). Keys and
/// channels start with ``key_prefix`` (default ``"lockgate:"``); clients that share locks must
/// use the same prefix. ``tls_ca_file`` is a PEM file of CA certificates to trust instead of the
/// system roots. Timeouts are seconds (default 5).
///
/// ``cluster=True`` treats the URL as one seed node of a Redis Cluster: the client discovers the
/// other nodes and sends each lock's commands to the primary that owns its slot (every key of a
/// lock shares one hash tag). ``replica_acks=n`` is the replica-acknowledged mode for a primary
/// with replicas: a grant, extend or renewal counts only once ``WAIT`` confirms it reached ``n``
/// replicas within ``replica_ack_timeout`` seconds (default 1, below ``response_timeout``);
/// otherwise it is undone and raises :class:`LockConnectionError`. Not available with
/// ``cluster=True``.
///
/// Use it as a context manager, or call :meth:`close`, to release every lease it still holds.
/// Create one client per process.
#[pyclass(frozen, module = "lockgate")]
pub struct Client {
    inner: CoreClient,
    handle: Arc<ClientHandle>,
}

#[pymethods]
impl Client {
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
        let opts = shared::client_options(
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
        let inner = block_on(py, opts.clone().connect())?;
        Ok(Client {
            handle: ClientHandle::connected(opts, inner.clone()),
            inner,
        })
    }

    /// A distributed mutex named ``name``.
    ///
    /// ``lease=None`` gives a 30 s lease renewed by a watchdog until released (Redisson's
    /// default); a number of seconds gives a fixed lease that frees the lock by itself, renewed
    /// only with ``renew=True``. ``timeout`` is the default wait of :meth:`Lock.acquire` and
    /// ``with lock:`` (``None``: until acquired). ``entry_ttl`` bounds how long a crashed
    /// waiter's queue entry can delay others (default 10 s). ``reentrant=True`` makes the
    /// returned handle reentrant: acquiring it again while it holds the lock returns at once with
    /// the same fencing token and adds a hold; only releasing the last hold frees the lock. The
    /// hold belongs to the handle, not to a thread.
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
    ) -> PyResult<Lock> {
        let options = shared::lock_options(lease, renew, timeout, entry_ttl).py(py)?;
        let inner = if reentrant {
            self.inner.reentrant_lock(&name, options)
        } else {
            self.inner.lock(&name, options)
        }
        .py(py)?;
        Ok(Lock::new(inner, &self.handle))
    }

    /// A distributed counting semaphore named ``name`` with ``permits`` permits: at most
    /// ``permits`` leases are held at once. Every client of one name must use the same count.
    ///
    /// Each :meth:`Semaphore.acquire` takes one permit as a :class:`Lease` (its own fencing
    /// token, watchdog and loss signal); releasing the lease returns the permit, and a crashed
    /// holder's permit returns by itself within one lease. The other arguments are those of
    /// :meth:`lock`. ``permits`` outside 1..1000000 raises :class:`InvalidArgumentError`.
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
    ) -> PyResult<Py<Semaphore>> {
        let permits = shared::permits(permits).py(py)?;
        let options = shared::lock_options(lease, renew, timeout, entry_ttl).py(py)?;
        let inner = self.inner.semaphore(&name, permits, options).py(py)?;
        Py::new(
            py,
            PyClassInitializer::from(Lock::new(inner, &self.handle)).add_subclass(Semaphore {}),
        )
    }

    /// A distributed read-write lock named ``name``: many readers, or one writer.
    ///
    /// :attr:`ReadWriteLock.read_lock` and :attr:`ReadWriteLock.write_lock` are :class:`Lock`
    /// handles with the usual ``acquire`` / ``try_acquire`` / ``with`` surface. With
    /// ``writers_first=True`` (the default) a queued writer blocks readers that arrive after it,
    /// so writers never starve; ``False`` lets readers join current readers past queued writers.
    /// ``reentrant=True`` makes both halves reentrant (see :meth:`lock`). The other arguments
    /// are those of :meth:`lock` and apply to both halves.
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
    ) -> PyResult<ReadWriteLock> {
        let options = shared::lock_options(lease, renew, timeout, entry_ttl).py(py)?;
        let mut rw = self
            .inner
            .read_write_lock(&name, options)
            .py(py)?
            .with_writers_first(writers_first);
        if reentrant {
            rw = rw.reentrant();
        }
        Ok(ReadWriteLock {
            read: Py::new(py, Lock::new(rw.read().clone(), &self.handle))?,
            write: Py::new(py, Lock::new(rw.write().clone(), &self.handle))?,
        })
    }

    /// A leader election named ``name``: :meth:`Election.campaign` waits to become leader and
    /// returns the leadership as a :class:`Lease` (its fencing token is the term);
    /// :meth:`Election.observe` shows the current leader.
    ///
    /// ``lease`` bounds how long a crashed leader keeps leadership (default 30 s, renewed by a
    /// watchdog while the leader lives; a number is a fixed lease unless ``renew=True``).
    /// ``entry_ttl`` is as for :meth:`lock`.
    #[pyo3(signature = (name, lease=None, *, renew=None, entry_ttl=None))]
    fn election(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        entry_ttl: Option<Secs>,
    ) -> PyResult<Election> {
        let options = shared::lock_options(lease, renew, None, entry_ttl).py(py)?;
        let inner = self.inner.election(&name, options.clone()).py(py)?;
        Ok(Election {
            inner,
            core_client: self.inner.clone(),
            options,
            client: self.handle.clone(),
        })
    }

    /// Releases every lease and cancels every wait of this client; further calls on it (and on
    /// its locks and leases) raise :class:`ClientClosedError`.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        block_on(py, async {
            self.handle.close().await;
            Ok(())
        })
    }

    /// The server URL with the password replaced by ``***``.
    #[getter]
    fn url(&self) -> String {
        self.inner.url()
    }

    /// The prefix of every key and channel this client uses.
    #[getter]
    fn key_prefix(&self) -> &str {
        self.handle.key_prefix()
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
        Ok(format!(
            "<lockgate.Client url={} key_prefix={}>",
            shared::py_repr(py, &self.inner.url())?,
            shared::py_repr(py, self.handle.key_prefix())?
        ))
    }
}

/// A named distributed mutex, made by :meth:`Client.lock` (also one half of a
/// :class:`ReadWriteLock`, and the base of :class:`Semaphore`). Holding it is a :class:`Lease`,
/// never a thread: a lease may be released from any thread.
///
/// ``with lock as lease:`` acquires with the lock's default timeout and releases on exit.
#[pyclass(frozen, subclass, module = "lockgate")]
pub struct Lock {
    inner: CoreLock,
    client: Arc<ClientHandle>,
    /// Leases taken by `with lock:`, per thread, for `__exit__` to release.
    entered: Entered<ThreadId, Arc<LeaseCell<CoreLease>>>,
    /// Every lease acquired through this handle and not released yet (see [`Holds`]).
    holds: Holds<CoreLease>,
    /// Notified by `cancel()`: ends the waits blocked on this handle.
    cancel: Notify,
}

impl Lock {
    fn new(inner: CoreLock, client: &Arc<ClientHandle>) -> Self {
        Lock {
            inner,
            client: client.clone(),
            entered: Entered::new(),
            holds: Holds::new(),
            cancel: Notify::new(),
        }
    }
}

sync_lock_methods! {
    Lock -> Lease;
    /// Waits up to ``timeout`` seconds (default: the lock's ``timeout``; ``None`` waits until
    /// acquired) and returns the :class:`Lease`. Raises :class:`LockTimeoutError` if the lock
    /// stays held. Waiters are served in arrival order and woken by the release itself.
    /// Ctrl-C abandons the wait and removes it from the server. Use the lease as a context
    /// manager: ``with lock.acquire(timeout=5) as lease:``.
    acquire;
    /// One attempt without waiting: a :class:`Lease`, or ``None`` if the lock is held (for a
    /// semaphore: every permit is taken) or others are queued for it.
    try_acquire;

    /// How long a waiter's queue entry survives without a heartbeat, in seconds.
    #[getter]
    fn entry_ttl(&self) -> f64 {
        shared::to_secs(self.inner.options().entry_ttl)
    }

    /// Whether acquiring again while this handle holds the lock adds a hold instead of waiting.
    #[getter]
    fn reentrant(&self) -> bool {
        self.inner.is_reentrant()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        shared::lock_repr(
            py,
            "lockgate",
            self.inner.name(),
            self.inner.primitive(),
            self.inner.is_reentrant(),
            self.inner.options(),
        )
    }
}

/// Blocks (GIL released) until `lock` is acquired: `timeout` seconds, or the lock's default.
/// `lock.cancel()` from another thread ends the wait with `CANCELLED`.
pub(crate) fn acquire<K: LockKind>(
    py: Python<'_>,
    lock: &K,
    client: &HandleOf<K::Lease>,
    timeout: Option<Secs>,
    cancel: &Notify,
) -> PyResult<Arc<LeaseCell<K::Lease>>> {
    let timeout = shared::parse_timeout(py, timeout)?;
    // Registered now, before the GIL is released: a `cancel()` from here on reaches this wait.
    let cancelled = cancel.notified();
    let lease = block_on(py, async {
        client.owner.check()?;
        unless_cancelled(cancelled, acquire_within(lock, timeout)).await
    })?;
    Ok(LeaseCell::new(lease, client.clone()))
}

/// Runs `fut` unless `cancelled` fires first: then `CANCELLED`, and `fut` is dropped, which
/// withdraws a wait from the server (the core's cancel-on-drop) and releases a grant that
/// arrived too late to be handed out. A result already there wins over a cancellation.
async fn unless_cancelled<T>(
    cancelled: Notified<'_>,
    fut: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let mut cancelled = std::pin::pin!(cancelled);
    let mut fut = std::pin::pin!(fut);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(out);
        }
        match cancelled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Error::new(
                ErrorKind::Cancelled,
                "the wait was cancelled by lock.cancel()",
            ))),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// One attempt at `lock` without waiting.
pub(crate) fn try_acquire<K: LockKind>(
    py: Python<'_>,
    lock: &K,
    client: &HandleOf<K::Lease>,
) -> PyResult<Option<Arc<LeaseCell<K::Lease>>>> {
    let lease = block_on(py, async {
        client.owner.check()?;
        lock.try_acquire().await
    })?;
    Ok(lease.map(|l| LeaseCell::new(l, client.clone())))
}

/// Leaves a `with` block that held `cell`: releases it, and reports a loss (see
/// `LeaseCell::exit`).
pub(crate) fn exit<L: LeaseKind>(
    py: Python<'_>,
    cell: &LeaseCell<L>,
    exc_type: Option<&Bound<'_, PyAny>>,
) -> PyResult<()> {
    block_on(py, cell.exit(exception_in_flight(exc_type)))
}

/// A distributed counting semaphore, made by :meth:`Client.semaphore`: a :class:`Lock` whose
/// :meth:`~Lock.acquire` takes one of :attr:`permits` permits as a :class:`Lease`.
///
/// ``with sem.acquire(timeout=5) as permit:`` holds one permit for the block. Waiters are served
/// in arrival order, and each returned permit wakes exactly the next waiter.
#[pyclass(frozen, extends = Lock, module = "lockgate")]
pub struct Semaphore {}

#[pymethods]
impl Semaphore {
    /// How many leases may be held at once.
    #[getter]
    fn permits(slf: PyRef<'_, Self>) -> u32 {
        match slf.as_super().inner.primitive() {
            Primitive::Semaphore { permits } => *permits,
            _ => unreachable!("a Semaphore wraps a semaphore handle"),
        }
    }
}

/// A distributed read-write lock, made by :meth:`Client.read_write_lock`: many readers hold
/// :attr:`read_lock` at once, never beside a holder of :attr:`write_lock`, which is exclusive.
///
/// ``with rw.read_lock:`` / ``with rw.write_lock.acquire(timeout=5) as lease:``.
#[pyclass(frozen, module = "lockgate")]
pub struct ReadWriteLock {
    read: Py<Lock>,
    write: Py<Lock>,
}

#[pymethods]
impl ReadWriteLock {
    /// The shared half: a :class:`Lock` that many readers hold at once.
    #[getter]
    fn read_lock(&self, py: Python<'_>) -> Py<Lock> {
        self.read.clone_ref(py)
    }

    /// The exclusive half: a :class:`Lock` held by one writer, beside no reader.
    #[getter]
    fn write_lock(&self, py: Python<'_>) -> Py<Lock> {
        self.write.clone_ref(py)
    }

    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        self.write.get().inner.name()
    }

    /// Whether a queued writer blocks readers that arrive after it.
    #[getter]
    fn writers_first(&self) -> bool {
        matches!(
            self.read.get().inner.primitive(),
            Primitive::Read {
                writers_first: true
            }
        )
    }

    /// Whether both halves are reentrant.
    #[getter]
    fn reentrant(&self) -> bool {
        self.write.get().inner.is_reentrant()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "<lockgate.ReadWriteLock name={} writers_first={} reentrant={}>",
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

/// A leader election, made by :meth:`Client.election`. Candidates :meth:`campaign` (wait to
/// lead); the leader holds a :class:`Lease` whose :attr:`~Lease.fencing_token` is its term
/// (larger for every later leader), whose loss signal fires if leadership is lost, and whose
/// :meth:`~Lease.release` resigns. Anyone can :meth:`observe` the current leader.
#[pyclass(frozen, module = "lockgate")]
pub struct Election {
    inner: CoreElection,
    core_client: CoreClient,
    options: LockOptions,
    client: Arc<ClientHandle>,
}

#[pymethods]
impl Election {
    /// Waits up to ``timeout`` seconds (``None``: until elected) to become leader, publishing
    /// ``value`` (a string of at most 4096 bytes, e.g. this node's address) to observers, and
    /// returns the leadership :class:`Lease`. Raises :class:`LockTimeoutError` if another
    /// candidate still leads. Candidates are elected in arrival order. Use the lease as a context
    /// manager to resign on exit: ``with election.campaign("node-a") as leadership:``.
    #[pyo3(signature = (value, timeout=None))]
    fn campaign(&self, py: Python<'_>, value: Text, timeout: Option<Secs>) -> PyResult<Lease> {
        let timeout = shared::parse_timeout(py, timeout)?;
        let lease = block_on(py, async {
            self.client.owner.check()?;
            self.inner.campaign(&value, timeout).await
        })?;
        Ok(Lease {
            cell: LeaseCell::new(lease, self.client.clone()),
        })
    }

    /// One attempt without waiting: the leadership :class:`Lease` publishing ``value``, or
    /// ``None`` if someone leads or other candidates are queued.
    fn try_campaign(&self, py: Python<'_>, value: Text) -> PyResult<Option<Lease>> {
        let lock = self
            .core_client
            .primitive(
                self.inner.name(),
                Primitive::Leader { value: value.0 },
                self.options.clone(),
                false,
            )
            .py(py)?;
        let cell = try_acquire(py, &lock, &self.client)?;
        Ok(cell.map(|cell| Lease { cell }))
    }

    /// The current leader as a :class:`LeaderInfo` (``value``, ``term``, ``remaining``), or
    /// ``None`` if nobody leads. One round trip; it does not take part in the election.
    fn observe(&self, py: Python<'_>) -> PyResult<Option<LeaderInfo>> {
        let info = block_on(py, async {
            self.client.owner.check()?;
            self.inner.observe().await
        })?;
        Ok(info.map(LeaderInfo::from))
    }

    /// The election's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The leader's lease length in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        shared::to_secs(self.options.lease)
    }

    /// Whether a watchdog renews the leader's lease until it resigns.
    #[getter]
    fn renew(&self) -> bool {
        self.options.auto_renew
    }

    /// How long a candidate's queue entry survives without a heartbeat, in seconds.
    #[getter]
    fn entry_ttl(&self) -> f64 {
        shared::to_secs(self.options.entry_ttl)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "<lockgate.Election name={} lease={} renew={}>",
            shared::py_repr(py, self.inner.name())?,
            pyo3::types::PyFloat::new(py, self.lease()).repr()?,
            if self.options.auto_renew {
                "True"
            } else {
                "False"
            },
        ))
    }
}

/// Proof of holding a lock, one semaphore permit or an election's leadership. Pass
/// :attr:`fencing_token` to the resource you protect. Use it as a context manager (``with lock.acquire() as lease:``) to release on exit; leaving the block
/// raises :class:`NotHeldError` if the lease had been lost meanwhile. Garbage-collecting an
/// unreleased lease releases it in the background.
#[pyclass(frozen, module = "lockgate")]
pub struct Lease {
    cell: Arc<LeaseCell<CoreLease>>,
}

lease_methods! {
    sync Lease, "lockgate.Lease";
    /// Whether the lease is certainly still held now (renewed, not expired, not lost).
    is_held;
    /// Seconds the lease is certainly still valid, or ``None`` if it is not held.
    remaining;
    /// Sets the remaining lease to ``seconds`` if still held. Raises :class:`NotHeldError` if
    /// it expired or was taken over; never re-acquires a lost lock.
    extend;
    /// Releases the lock (only this lease's own hold; for a permit, returns it; for leadership,
    /// resigns). ``True`` if it was still held, ``False`` if it had already expired, been taken
    /// over or released. A re-entered hold of a reentrant lock gives back only that hold.
    release;
    /// Calls ``callback(reason)`` once, with a :class:`LockError`, if the lease is lost
    /// (renewal refused, key deleted, expired). It runs on a lockgate background thread: keep it
    /// short and thread-safe. Never called after a normal release.
    on_lost;

    /// Strictly greater than every fencing token issued before for this lock name (for a
    /// leadership lease: the term). Re-entered holds of a reentrant lock share one token.
    #[getter]
    fn fencing_token(&self) -> u64 {
        self.cell.lease().fencing_token()
    }
}
