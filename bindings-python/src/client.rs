//! `lockgate.Client` and `lockgate.aio.Client`: one client class per API for every backend
//! (the URL's scheme picks it), and what the two share, the factories of lock handles.

use std::sync::Arc;

use lockgate_core::Primitive;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::PyClassInitializer;

use crate::api::Api;
use crate::connection::Connection;
use crate::convert::{class_repr, client_options, lock_options, py_repr, refuse_timeout, Permits, Secs, Text};
use crate::election::{AsyncElection, Election};
use crate::errors::IntoPyResult;
use crate::handle::{ElectionSpec, LockSpec};
use crate::lock::{AsyncLock, AsyncSemaphore, Lock, Semaphore};
use crate::read_write_lock::{AsyncReadWriteLock, ReadWriteLock, ReadWriteLockBase};
use crate::runtime::block_on;

/// What both APIs' clients offer: lock handles of every kind, and closing.
#[pyclass(frozen, subclass, module = "lockgate._lockgate", name = "_ClientBase")]
pub struct ClientBase {
    conn: Arc<Connection>,
}

impl ClientBase {
    fn new(
        py: Python<'_>,
        url: Text,
        options: Option<&Bound<'_, PyDict>>,
        api: Api,
    ) -> PyResult<(PyClassInitializer<Self>, Arc<Connection>)> {
        let (options, shown) = client_options(py, &url.0, options)?;
        let conn = Connection::new(options, shown, api);
        // Whether its telemetry's DEBUG records are wanted, as the logger is configured now.
        crate::telemetry::check_level(py);
        Ok((PyClassInitializer::from(ClientBase { conn: conn.clone() }), conn))
    }

    /// A lock handle of this client's API over `spec`.
    fn handle(&self, py: Python<'_>, spec: Arc<LockSpec>) -> PyResult<Py<PyAny>> {
        self.conn.api.make(py, spec, Lock::init, AsyncLock::init)
    }
}

#[pymethods]
impl ClientBase {
    /// A distributed mutex named ``name``. ``lease=None``: the backend's renewed lease (30 s,
    /// renewed by a watchdog until released); a number of seconds: a fixed lease that frees the
    /// lock by itself, renewed only with ``renew=True``. ``wait`` is the default wait of
    /// ``acquire`` and ``with lock:`` (``None``: until acquired); ``entry_ttl`` bounds how long
    /// a crashed waiter's queue entry delays others. ``reentrant=True``: acquiring again through
    /// this handle while it holds the lock adds a hold (same fencing token) instead of waiting.
    /// ``timeout=`` is refused (``TypeError``): redis-py's ``timeout`` is the lease (``lease=``).
    /// ``min_hold``: a release sooner than this after the grant leaves the lock held on the
    /// server until then, even once this process is gone (``UnsupportedError`` where the backend
    /// cannot: ZooKeeper, etcd); ``max_hold``: the lease is not renewed past this long after the
    /// grant and is lost then (seconds, like ``lease``).
    #[pyo3(signature = (name, lease=None, *, renew=None, wait=None, entry_ttl=None, min_hold=None, max_hold=None, reentrant=false, timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn lock(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        wait: Option<Secs>,
        entry_ttl: Option<Secs>,
        min_hold: Option<Secs>,
        max_hold: Option<Secs>,
        reentrant: bool,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        refuse_timeout("lock", timeout)?;
        let options = lock_options(py, &self.conn, lease, renew, wait, entry_ttl, (min_hold, max_hold))?;
        self.handle(py, LockSpec::new(py, &self.conn, &name.0, Primitive::Mutex, reentrant, options)?)
    }

    /// A counting semaphore named ``name``: at most ``permits`` (1 to 1,000,000; the same for
    /// every client of the name) leases at once. Each ``acquire`` takes one permit as a lease;
    /// a crashed holder's permit returns within one lease. Other arguments as for :meth:`lock`.
    #[pyo3(signature = (name, permits, lease=None, *, renew=None, wait=None, entry_ttl=None, min_hold=None, max_hold=None, timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn semaphore(
        &self,
        py: Python<'_>,
        name: Text,
        permits: Permits,
        lease: Option<Secs>,
        renew: Option<bool>,
        wait: Option<Secs>,
        entry_ttl: Option<Secs>,
        min_hold: Option<Secs>,
        max_hold: Option<Secs>,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        refuse_timeout("semaphore", timeout)?;
        let options = lock_options(py, &self.conn, lease, renew, wait, entry_ttl, (min_hold, max_hold))?;
        let spec = LockSpec::new(py, &self.conn, &name.0, Primitive::Semaphore { permits: permits.0 }, false, options)?;
        let (blocking, asyncio) = (Semaphore { permits: permits.0 }, AsyncSemaphore { permits: permits.0 });
        self.conn.api.make(
            py,
            spec,
            |s| Lock::init(s).add_subclass(blocking),
            |s| AsyncLock::init(s).add_subclass(asyncio),
        )
    }

    /// A read-write lock named ``name``: many readers (``.read_lock``) or one writer
    /// (``.write_lock``). ``writers_first=True``: a queued writer blocks readers arriving after
    /// it (writers never starve); ``False`` lets readers pass queued writers. ``reentrant``
    /// applies to both halves; other arguments as for :meth:`lock`.
    #[pyo3(signature = (name, lease=None, *, renew=None, wait=None, entry_ttl=None, min_hold=None, max_hold=None, writers_first=true, reentrant=false, timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn read_write_lock(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        wait: Option<Secs>,
        entry_ttl: Option<Secs>,
        min_hold: Option<Secs>,
        max_hold: Option<Secs>,
        writers_first: bool,
        reentrant: bool,
        timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        refuse_timeout("read_write_lock", timeout)?;
        let options = lock_options(py, &self.conn, lease, renew, wait, entry_ttl, (min_hold, max_hold))?;
        let read =
            LockSpec::new(py, &self.conn, &name.0, Primitive::Read { writers_first }, reentrant, options.clone())?;
        let write = LockSpec::new(py, &self.conn, &name.0, Primitive::Write, reentrant, options)?;
        let (read, write, name) = (self.handle(py, read)?, self.handle(py, write)?, name.0);
        let base = PyClassInitializer::from(ReadWriteLockBase { read, write, name, writers_first, reentrant });
        self.conn.api.make(py, base, |b| b.add_subclass(ReadWriteLock {}), |b| b.add_subclass(AsyncReadWriteLock {}))
    }

    /// A leader election named ``name``: ``campaign(value)`` waits to lead and returns the
    /// leadership lease (its fencing token is the term); ``observe()`` shows the leader.
    /// ``lease`` bounds how long a crashed leader keeps leading; other arguments as for
    /// :meth:`lock`.
    #[pyo3(signature = (name, lease=None, *, renew=None, entry_ttl=None, min_hold=None, max_hold=None))]
    #[allow(clippy::too_many_arguments)] // the Python signature's keywords, as `lock` has them
    fn election(
        &self,
        py: Python<'_>,
        name: Text,
        lease: Option<Secs>,
        renew: Option<bool>,
        entry_ttl: Option<Secs>,
        min_hold: Option<Secs>,
        max_hold: Option<Secs>,
    ) -> PyResult<Py<PyAny>> {
        let options = lock_options(py, &self.conn, lease, renew, None, entry_ttl, (min_hold, max_hold))?;
        let spec = ElectionSpec::new(py, &self.conn, &name.0, options)?;
        self.conn.api.make(py, spec, Election::init, AsyncElection::init)
    }

    /// Releases every lease and cancels every wait of this client (awaitable in
    /// ``lockgate.aio``); further calls on it, its locks and leases raise
    /// :class:`lockgate.ClientClosedError`.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let conn = self.conn.clone();
        conn.api.run(py, async move { conn.close().await.map(|()| None::<()>) })
    }

    /// The URL with passwords replaced by ``***``.
    #[getter]
    fn url(&self) -> &str {
        &self.conn.url
    }

    /// The prefix of every key and channel this client uses; ``None`` for a backend that has
    /// no keys to prefix (ZooKeeper, etcd and SQL name locks by path, key prefix or table).
    #[getter]
    fn key_prefix(&self) -> Option<&str> {
        self.conn.has_key_prefix().then_some(self.conn.options.key_prefix.as_str())
    }

    /// What this client's backend can do, by name (``fencing``, ``fifo``, ``semaphore``,
    /// ``read_write``, ``election``, ``observe``, ``reentrant``, ``replica_acks``): a handle
    /// needing something it lacks raises :class:`lockgate.UnsupportedError`.
    #[getter]
    fn capabilities<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let caps = self.conn.options.capabilities().py(py)?;
        let dict = PyDict::new(py);
        for (name, offered) in caps.pairs() {
            dict.set_item(name, offered)?;
        }
        Ok(dict)
    }

    /// Reads lock ``name`` as ``kind`` (``"mutex"``, ``"rw"``, ``"semaphore"``,
    /// ``"election"``) on the server, changing nothing (awaitable in ``lockgate.aio``): the
    /// ``dict`` of :meth:`Lock.inspect`. An unknown name reads as empty; the name is checked as
    /// for :meth:`lock`. For humans and dashboards; to decide whether to write, use the fencing
    /// token.
    #[pyo3(signature = (name, kind="mutex"))]
    fn inspect<'py>(&self, py: Python<'py>, name: Text, kind: &str) -> PyResult<Bound<'py, PyAny>> {
        let kind = lockgate_core::inspect::Kind::parse(kind).py(py)?;
        let (conn, name) = (self.conn.clone(), name.0);
        self.conn.api.run(py, async move { Ok(crate::snapshot::Inspected(conn.client().await?.inspect(&name, kind).await?)) })
    }

    /// Breaks lock ``name`` read as ``kind`` (awaitable in ``lockgate.aio``): removes its
    /// current holder's entry — only the one whose fencing token is ``token`` when given, so a
    /// stale break cannot hit the next holder — and wakes the next waiter as a release would.
    /// Returns what it removed, ``{"label": ..., "fencing_token": ...}``, or ``None`` when
    /// nothing was (free, or no holder with that token). For a holder known to be dead: the
    /// broken holder learns of its loss at its next renewal, and only fenced storage stops its
    /// late writes (PROTOCOL.md §15). A ``token`` on Redlock or memcached (no fencing tokens)
    /// raises :class:`lockgate.UnsupportedError`.
    #[pyo3(signature = (name, token=None, *, kind="mutex"))]
    fn break_lock<'py>(&self, py: Python<'py>, name: Text, token: Option<Bound<'py, PyAny>>, kind: &str) -> PyResult<Bound<'py, PyAny>> {
        let kind = lockgate_core::inspect::Kind::parse(kind).py(py)?;
        let token = match token {
            None => None,
            Some(t) => Some(crate::snapshot::fencing_token(&t).py(py)?),
        };
        let (conn, name) = (self.conn.clone(), name.0);
        self.conn.api.run(py, async move { Ok(crate::snapshot::BrokenOut(conn.client().await?.break_lock(&name, kind, token).await?)) })
    }

    /// Adopts the lease ``identity`` names (:meth:`Lease.identity` of another process; awaitable
    /// in ``lockgate.aio``): returns a lease of this client on the same hold, with the same
    /// fencing token — no second grant — that renews (``lease``/``renew`` as for :meth:`lock`),
    /// extends, releases and reports its loss. :class:`lockgate.NotHeldError` if that lease is
    /// no longer current; :class:`lockgate.InvalidArgumentError` for a malformed identity
    /// (nothing is sent); :class:`lockgate.UnsupportedError` on ZooKeeper and etcd. redis-py's
    /// ``Lock(token=...)``, python-redis-lock's ``Lock(id=...)``.
    #[pyo3(signature = (identity, lease=None, *, renew=None))]
    fn adopt<'py>(&self, py: Python<'py>, identity: Text, lease: Option<Secs>, renew: Option<bool>) -> PyResult<Bound<'py, PyAny>> {
        let options = lock_options(py, &self.conn, lease, renew, None, None, (None, None))?;
        let (conn, identity) = (self.conn.clone(), identity.0);
        self.conn.api.run(py, async move {
            conn.process.check()?;
            let lease = conn.client().await?.adopt(&identity, options).await?;
            Ok(crate::lease::Deliver(crate::lease::LeaseCell::new(lease, &conn), None))
        })
    }

    /// One page of the locks whose names start with ``prefix`` (awaitable in
    /// ``lockgate.aio``): a ``dict`` with ``entries`` — each a ``dict`` with ``name``,
    /// ``kind`` (``"mutex"``, ``"rw"``, ``"semaphore"``, ``"election"``), ``holders``,
    /// ``waiters`` and the first holder's ``label`` (or ``None``) — and ``cursor``, to pass
    /// back for the next page (``None``: this was the last; a page may be short, even empty,
    /// before it). ``limit`` defaults to 100 and is capped to 1,000. Never blocks the server;
    /// racy, like :meth:`inspect`. :class:`UnsupportedError` where the backend cannot list.
    #[pyo3(signature = (prefix=Text(String::new()), limit=None, cursor=None), text_signature = "($self, prefix=\"\", limit=None, cursor=None)")]
    fn list_locks<'py>(&self, py: Python<'py>, prefix: Text, limit: Option<Bound<'py, PyAny>>, cursor: Option<Text>) -> PyResult<Bound<'py, PyAny>> {
        let limit = match limit {
            None => None,
            Some(n) => match n.extract::<i64>() {
                // A negative limit is refused by the core as any limit below 1.
                Ok(n) => Some(u64::try_from(n).unwrap_or(0)),
                // Beyond an i64: capped by the core like any large limit (refused if negative).
                Err(_) if n.is_instance_of::<pyo3::types::PyInt>() => Some(if n.lt(0)? { 0 } else { u64::MAX }),
                Err(e) => return Err(e),
            },
        };
        let (conn, prefix, cursor) = (self.conn.clone(), prefix.0, cursor.map(|c| c.0));
        self.conn.api.run(py, async move {
            Ok(crate::snapshot::Listed(conn.client().await?.list(&prefix, limit, cursor.as_deref()).await?))
        })
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let (py, conn) = (slf.py(), &slf.get().conn);
        let url = py_repr(py, &conn.url)?;
        // Only the options this backend has (a ZooKeeper URL refuses `key_prefix`).
        let prefix = match conn.has_key_prefix() {
            true => format!(" key_prefix={}", py_repr(py, &conn.options.key_prefix)?),
            false => String::new(),
        };
        class_repr(slf, &format!("url={url}{prefix}"))
    }
}

/// A client of one lock service, shared by every lock made from it: ``Client(url,
/// **options)`` connects at once. The URL's scheme picks the backend: ``redis://`` /
/// ``rediss://`` (one server; ``cluster=True`` or ``redis+cluster://``: a Redis Cluster seed
/// node), ``redlock://host1:port,host2:port,...`` (a majority of independent masters),
/// ``zookeeper://`` / ``zookeeper+tls://`` (an ensemble), ``etcd://`` / ``etcds://``,
/// ``postgres://`` (PostgreSQL) and ``mysql://`` / ``mariadb://``. The options are the backend's, by keyword, checked by lockgate's core (:class:`InvalidArgumentError`
/// before connecting). Use it as a context manager, or :meth:`close` it, to release every
/// lease it still holds. One client per process is enough.
#[pyclass(frozen, extends = ClientBase, module = "lockgate")]
pub struct Client {}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (url, **options))]
    fn new(py: Python<'_>, url: Text, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyClassInitializer<Self>> {
        let (base, conn) = ClientBase::new(py, url, options, Api::Blocking)?;
        block_on(py, async move { conn.client().await.map(drop) })?;
        Ok(base.add_subclass(Client {}))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (_exc_type, _exc=None, _tb=None))]
    fn __exit__(
        slf: &Bound<'_, Self>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        slf.call_method0("close").map(drop)
    }
}

/// The asyncio client: ``lockgate.aio.Client(url, **options)`` takes the arguments of
/// :class:`lockgate.Client`; the constructor only validates, and the connection is made by
/// ``async with``, :meth:`connect`, or on first use. ``async with`` (or :meth:`close`)
/// releases every lease it still holds on exit.
#[pyclass(frozen, extends = ClientBase, module = "lockgate.aio", name = "Client")]
pub struct AsyncClient {}

#[pymethods]
impl AsyncClient {
    #[new]
    #[pyo3(signature = (url, **options))]
    fn new(py: Python<'_>, url: Text, options: Option<&Bound<'_, PyDict>>) -> PyResult<PyClassInitializer<Self>> {
        Ok(ClientBase::new(py, url, options, Api::Asyncio)?.0.add_subclass(AsyncClient {}))
    }

    /// Connects now (otherwise the first operation does); raises the connection's error.
    fn connect<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let conn = slf.as_super().get().conn.clone();
        Api::Asyncio.run(slf.py(), async move { conn.client().await.map(|_| None::<()>) })
    }

    fn __aenter__<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let (conn, me) = (slf.as_super().get().conn.clone(), slf.clone().unbind());
        Api::Asyncio.run(slf.py(), async move { conn.client().await.map(|_| me) })
    }

    #[pyo3(signature = (_exc_type, _exc=None, _tb=None))]
    fn __aexit__<'py>(
        slf: &Bound<'py, Self>,
        _exc_type: Option<&Bound<'py, PyAny>>,
        _exc: Option<&Bound<'py, PyAny>>,
        _tb: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        slf.call_method0("close")
    }
}
