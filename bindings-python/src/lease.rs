//! Held leases: [`LeaseCell`] is one as both APIs keep it (leaving a `with` block, the loss and
//! at-risk signals), [`Entered`] the leases `with lock:` blocks took, and `Lease` /
//! `lockgate.aio.Lease` the Python classes over a cell (what they share is `_LeaseBase`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use lockgate_core::Error;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::PyClassInitializer;

use crate::api::Api;
use crate::connection::Connection;
use crate::convert::{class_repr, lease_secs, py_bool, py_repr, Secs};
use crate::errors::{to_exception, Reason};
use crate::loop_bridge::{into_asyncio, ready, running_loop};
use crate::runtime::{block_on, lock_mutex, runtime};
use lockgate_core::native::{self, Holds, Owner};

/// A held lease: the core's (shared with the lock handle that keeps it, if any) and the
/// connection it keeps registered for the exit hook. Dropping the last reference drops the
/// core lease, which the core then releases in the background.
pub(crate) struct LeaseCell {
    lease: Arc<native::Lease>,
    conn: Arc<Connection>,
}

impl LeaseCell {
    pub(crate) fn new(lease: native::Lease, conn: &Arc<Connection>) -> Arc<Self> {
        Arc::new(LeaseCell { lease: Arc::new(lease), conn: conn.clone() })
    }

    /// Leaving a `with` block: the core's rule ([`native::Lease::end_scope`]); in a forked child,
    /// the release's `CLOSED`, unless the lease was released already or an exception is leaving.
    async fn exit(&self, exception_in_flight: bool) -> Result<(), Error> {
        match self.conn.process.check() {
            Err(e) if !exception_in_flight && !self.lease.is_released() => Err(e),
            Err(_) => Ok(()),
            Ok(()) => self.lease.end_scope(exception_in_flight).await,
        }
    }

    /// Once the lease is lost (never after a normal end), runs `deliver` with the reason as a
    /// `LockError`, on a blocking-pool thread holding the GIL (never on a runtime worker).
    fn on_loss(&self, deliver: impl for<'py> FnOnce(Python<'py>, PyResult<Bound<'py, PyAny>>) + Send + 'static) {
        let signal = self.lease.lost_signal();
        runtime().spawn(async move {
            if let Some(reason) = signal.await {
                drop(tokio::task::spawn_blocking(move || {
                    Python::try_attach(|py| deliver(py, to_exception(py, &reason)));
                }));
            }
        });
    }

    /// At the start of every spell at risk until the lease ends (at once if one is under way),
    /// runs `deliver` on a blocking-pool thread holding the GIL, one spell after another.
    fn on_risk(&self, deliver: impl for<'py> Fn(Python<'py>) + Send + Sync + 'static) {
        let mut spells = self.lease.at_risk_spells();
        let deliver = Arc::new(deliver);
        runtime().spawn(async move {
            while spells.next().await {
                let deliver = deliver.clone();
                let _ = tokio::task::spawn_blocking(move || Python::try_attach(|py| deliver(py))).await;
            }
        });
    }
}

/// `callback` as a lease signal calls it with `args`, on a blocking-pool thread holding the GIL:
/// `lockgate.aio` schedules it on the loop running now (fails only if that loop was closed
/// meanwhile: nobody is left to tell), `lockgate` calls it there (what it raises is
/// unraisable). A callback that could never be called is rejected at once (`TypeError`),
/// rather than failing later on a background thread where nobody sees it.
type Args = PyResult<Vec<Py<PyAny>>>;

fn listener(py: Python<'_>, api: Api, callback: Bound<'_, PyAny>, needs: &str) -> PyResult<impl Fn(Python<'_>, Args)> {
    if !callback.is_callable() {
        return Err(PyTypeError::new_err(format!("{needs}, got {}", callback.get_type().name()?)));
    }
    let event_loop = if api == Api::Asyncio { Some(running_loop(py)?.unbind()) } else { None };
    let callback = callback.unbind();
    Ok(move |py: Python<'_>, args: Args| {
        // The records the core raised before this (the loss's or the spell's WARNING) are made
        // first, so a callback finds them logged (unless another thread is making records now).
        crate::telemetry::flush(py);
        match &event_loop {
            Some(l) => {
                let call =
                    |a: Vec<_>| PyTuple::new(py, std::iter::once(callback.clone_ref(py)).chain(a).collect::<Vec<_>>());
                let _ = args.and_then(|a| l.call_method1(py, "call_soon_threadsafe", call(a)?));
            }
            None => {
                if let Err(e) = args.and_then(|a| callback.call1(py, PyTuple::new(py, a)?)) {
                    e.write_unraisable(py, Some(callback.bind(py)));
                }
            }
        }
    })
}

/// Whether `__exit__` / `__aexit__` was called with an exception leaving the block.
fn in_flight(exc_type: Option<&Bound<'_, PyAny>>) -> bool {
    exc_type.is_some_and(|t| !t.is_none())
}

/// Leaves a `with` block that held `cell` (see [`LeaseCell::exit`]).
pub(crate) fn exit(py: Python<'_>, cell: &LeaseCell, exc_type: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    block_on(py, cell.exit(in_flight(exc_type)))
}

/// Leaves an `async with` block that held `cell`, if any; resolves to `None`.
pub(crate) fn exit_async<'py>(
    py: Python<'py>,
    cell: Option<Arc<LeaseCell>>,
    exc_type: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let in_flight = in_flight(exc_type);
    match cell {
        Some(cell) => into_asyncio(py, async move { cell.exit(in_flight).await.map(|()| None::<()>) }),
        None => ready(py, py.None()),
    }
}

/// Leases taken by `with lock:` (per thread) or `async with lock:` (per asyncio task), for the
/// matching exit to release, innermost first.
#[derive(Default)]
pub(crate) struct Entered(Mutex<HashMap<Owner, Vec<Arc<LeaseCell>>>>);

impl Entered {
    pub(crate) fn push(&self, key: Owner, cell: Arc<LeaseCell>) {
        lock_mutex(&self.0).entry(key).or_default().push(cell);
    }

    pub(crate) fn pop(&self, key: &Owner) -> Option<Arc<LeaseCell>> {
        let mut entered = lock_mutex(&self.0);
        let cell = entered.get_mut(key).and_then(Vec::pop);
        if entered.get(key).is_some_and(Vec::is_empty) {
            entered.remove(key);
        }
        cell
    }
}

/// A lease on its way to Python, as its client's API's class. The lock handle it was acquired
/// through keeps it (its [`Holds`]) only once it is handed over (on the loop thread, in
/// asyncio): a result whose awaiter gave up meanwhile is never converted, so it is dropped and
/// released instead of being kept by a handle nobody told of it.
pub(crate) struct Deliver(pub Arc<LeaseCell>, pub Option<(Owner, Arc<Holds>)>);

impl<'py> IntoPyObject<'py> for Deliver {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Deliver(cell, holds) = self;
        if let Some((owner, holds)) = holds {
            holds.push(owner, cell.lease.clone());
        }
        let (base, api, other) =
            (PyClassInitializer::from(LeaseBase { cell: cell.clone() }), cell.conn.api, cell.clone());
        let made =
            api.make(py, base, |b| b.add_subclass(Lease { cell }), |b| b.add_subclass(AsyncLease { cell: other }))?;
        Ok(made.into_bound(py))
    }
}

/// What both APIs' leases offer.
#[pyclass(frozen, subclass, module = "lockgate._lockgate", name = "_LeaseBase")]
pub struct LeaseBase {
    cell: Arc<LeaseCell>,
}

#[pymethods]
impl LeaseBase {
    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        self.cell.lease.name()
    }

    /// Strictly greater than every fencing token issued before for this name (an election's
    /// term); re-entered holds share one. ``None`` where the backend cannot give one (Redlock:
    /// a majority of independent masters is no linearizable counter, PROTOCOL.md §8).
    #[getter]
    fn fencing_token(&self) -> Option<u64> {
        self.cell.lease.fencing_token()
    }

    /// Whether the lease is certainly still held now (renewed, not expired, not lost).
    #[getter]
    fn is_held(&self) -> bool {
        self.cell.lease.is_held()
    }

    /// Seconds the lease is certainly still valid, or ``None`` if it is not held.
    #[getter]
    fn remaining(&self) -> Option<f64> {
        self.cell.lease.remaining().map(|d| d.as_secs_f64())
    }

    /// Whether the lease is held but cannot be confirmed now (its server unreachable, its
    /// session disconnected, its renewals failing): it stays valid only for :attr:`remaining`
    /// unless contact returns first. Finish or pause the protected work.
    #[getter]
    fn at_risk(&self) -> bool {
        self.cell.lease.is_at_risk()
    }

    /// Why the lease was lost (a :class:`lockgate.LockError`), or ``None``.
    #[getter]
    fn lost_reason<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.cell.lease.lost_reason().map(|e| to_exception(py, &e)).transpose()
    }

    /// Sets the remaining lease to ``seconds`` if still held (awaitable in ``lockgate.aio``);
    /// :class:`lockgate.NotHeldError` if it was lost. Never re-acquires a lost lock.
    fn extend<'py>(&self, py: Python<'py>, seconds: Secs) -> PyResult<Bound<'py, PyAny>> {
        let (d, cell) = (lease_secs(py, "seconds", seconds)?, self.cell.clone());
        cell.conn.api.run(py, async move {
            cell.conn.process.check()?;
            cell.lease.extend(d).await.map(|()| None::<()>)
        })
    }

    /// This lease's identity as one opaque ``str`` (awaitable in ``lockgate.aio``), for another
    /// process to :meth:`Client.adopt`: it then renews, extends and releases the same hold —
    /// redis-py's ``Lock(token=...)``. Whoever has it can release the lock: never log it.
    /// :class:`lockgate.NotHeldError` if the lease is no longer held;
    /// :class:`lockgate.UnsupportedError` for leadership and on ZooKeeper and etcd.
    fn identity<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cell = self.cell.clone();
        cell.conn.api.run(py, async move {
            cell.conn.process.check()?;
            cell.lease.identity().await
        })
    }

    /// Releases this hold (a permit is returned, a leadership resigned; awaitable in
    /// ``lockgate.aio``): ``True`` if it was still held, ``False`` if it had expired, been
    /// taken over or released already.
    fn release<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let cell = self.cell.clone();
        cell.conn.api.run(py, async move {
            cell.conn.process.check()?;
            cell.lease.release().await
        })
    }

    /// Calls ``callback(reason)`` once, with a :class:`lockgate.LockError`, if the lease is
    /// lost (after the loss's WARNING record is made); never after a release. ``lockgate``: on a
    /// background thread (keep it short and thread-safe); ``lockgate.aio``: scheduled on the
    /// running event loop.
    fn on_lost(&self, py: Python<'_>, callback: Bound<'_, PyAny>) -> PyResult<()> {
        let call = listener(py, self.cell.conn.api, callback, "on_lost needs a callable taking the reason")?;
        self.cell.on_loss(move |py, reason| call(py, reason.map(|r| vec![r.unbind()])));
        Ok(())
    }

    /// Calls ``callback()`` once per spell at risk (at once if the lease is at risk now) until
    /// the lease ends; a loss is still told by :meth:`on_lost`. ``lockgate``: on a background
    /// thread (keep it short and thread-safe); ``lockgate.aio``: scheduled on the running loop.
    fn on_at_risk(&self, py: Python<'_>, callback: Bound<'_, PyAny>) -> PyResult<()> {
        let call = listener(py, self.cell.conn.api, callback, "on_at_risk needs a callable taking no arguments")?;
        self.cell.on_risk(move |py| call(py, Ok(Vec::new())));
        Ok(())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let (py, lease) = (slf.py(), &slf.get().cell.lease);
        let token = lease.fencing_token().map_or(String::new(), |t| format!(" fencing_token={t}"));
        let name = py_repr(py, lease.name())?;
        class_repr(slf, &format!("name={name}{token} held={}", py_bool(lease.is_held())))
    }
}

/// Proof of holding a lock, one semaphore permit or an election's leadership. Pass
/// :attr:`fencing_token` to the resource you protect. ``with lock.acquire() as lease:`` releases
/// on exit and raises :class:`NotHeldError` if the lease had been lost meanwhile.
/// Garbage-collecting an unreleased lease no handle keeps releases it in the background.
#[pyclass(frozen, extends = LeaseBase, module = "lockgate")]
pub struct Lease {
    cell: Arc<LeaseCell>,
}

#[pymethods]
impl Lease {
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        exit(py, &self.cell, exc_type)
    }
}

/// Proof of holding a lock, one semaphore permit or an election's leadership (asyncio): the
/// :class:`lockgate.Lease` surface with awaitable ``extend`` and ``release``, and ``await
/// lease.lost()``. Leaving ``async with`` releases it and raises
/// :class:`lockgate.NotHeldError` if it had been lost meanwhile.
#[pyclass(frozen, extends = LeaseBase, module = "lockgate.aio", name = "Lease")]
pub struct AsyncLease {
    cell: Arc<LeaseCell>,
}

#[pymethods]
impl AsyncLease {
    /// ``await lease.lost()`` resolves with the reason (a :class:`lockgate.LockError`, returned,
    /// not raised) once the lease is lost, or ``None`` once it ends normally. It does not keep
    /// the lease alive.
    fn lost<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let signal = self.cell.lease.lost_signal();
        into_asyncio(py, async move { Ok(Reason(signal.await)) })
    }

    fn __aenter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, PyAny>> {
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
        exit_async(py, Some(self.cell.clone()), exc_type)
    }
}
