//! Leader elections in both APIs over one [`ElectionSpec`], and [`LeaderInfo`], what
//! `observe()` returns.

use std::sync::Arc;

use lockgate_core::options::validate_primitive;
use lockgate_core::time::Duration;
use lockgate_core::{LeaderInfo as CoreLeaderInfo, Primitive};
use pyo3::prelude::*;
use pyo3::PyClassInitializer;

use crate::acquire_context::{AcquireContext, Source};
use crate::convert::{class_repr, py_bool, py_repr, secs_repr, timeout, Secs, Text};
use crate::errors::IntoPyResult;
use crate::handle::ElectionSpec;
use crate::lease::Deliver;
use crate::runtime::block_on;

/// A candidate's `value`, checked at the call (at most 4096 bytes).
fn candidate(py: Python<'_>, value: Text) -> PyResult<String> {
    validate_primitive(&Primitive::Leader { value: value.0.clone() }).py(py)?;
    Ok(value.0)
}

/// What both APIs' elections show: the settings of the leaders' leases.
#[pyclass(frozen, subclass, module = "lockgate._lockgate", name = "_ElectionBase")]
pub struct ElectionBase {
    spec: Arc<ElectionSpec>,
}

#[pymethods]
impl ElectionBase {
    /// The election's name.
    #[getter]
    fn name(&self) -> &str {
        &self.spec.name
    }

    /// The leader's lease length in seconds.
    #[getter]
    fn lease(&self) -> f64 {
        self.spec.options.lease.as_secs_f64()
    }

    /// Whether a watchdog renews the leader's lease until it resigns.
    #[getter]
    fn renew(&self) -> bool {
        self.spec.options.auto_renew
    }

    /// How long a candidate's queue entry survives without a heartbeat, in seconds.
    #[getter]
    fn entry_ttl(&self) -> f64 {
        self.spec.options.entry_ttl.as_secs_f64()
    }

    /// One attempt without waiting (awaitable in ``lockgate.aio``): the leadership lease
    /// publishing ``value``, or ``None`` if someone leads or other candidates are queued.
    fn try_campaign<'py>(&self, py: Python<'py>, value: Text) -> PyResult<Bound<'py, PyAny>> {
        let (value, spec) = (candidate(py, value)?, self.spec.clone());
        spec.conn.api.run(py, async move { Ok(spec.try_campaign(&value).await?.map(|cell| Deliver(cell, None))) })
    }

    /// The current leader as a :class:`lockgate.LeaderInfo`, or ``None`` if nobody leads
    /// (awaitable in ``lockgate.aio``). One round trip; it takes no part in the election.
    fn observe<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let spec = self.spec.clone();
        spec.conn.api.run(py, async move { Ok(spec.observe().await?.map(LeaderInfo::from)) })
    }

    /// Reads the election (awaitable in ``lockgate.aio``): the ``dict`` of
    /// :meth:`Lock.inspect`, the leader a holder with its published ``value``, the other
    /// candidates the waiters.
    fn inspect<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let spec = self.spec.clone();
        spec.conn.api.run(py, async move { Ok(crate::snapshot::Inspected(spec.inspect().await?)) })
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let (py, o) = (slf.py(), &slf.get().spec.options);
        let (name, lease) = (py_repr(py, &slf.get().spec.name)?, secs_repr(py, o.lease)?);
        class_repr(slf, &format!("name={name} lease={lease} renew={}", py_bool(o.auto_renew)))
    }
}

/// A leader election, made by :meth:`Client.election`. Candidates :meth:`campaign`; the leader
/// holds a :class:`Lease` whose :attr:`~Lease.fencing_token` is its term (larger for every
/// later leader), whose loss signal fires if leadership is lost, and whose
/// :meth:`~Lease.release` resigns. Anyone can :meth:`observe` the current leader.
#[pyclass(frozen, extends = ElectionBase, module = "lockgate")]
pub struct Election {
    spec: Arc<ElectionSpec>,
}

impl Election {
    pub(crate) fn init(spec: Arc<ElectionSpec>) -> PyClassInitializer<Self> {
        PyClassInitializer::from(ElectionBase { spec: spec.clone() }).add_subclass(Election { spec })
    }
}

#[pymethods]
impl Election {
    /// Waits up to ``timeout`` seconds (``None``: until elected) to become leader, publishing
    /// ``value`` (at most 4096 bytes, e.g. this node's address), and returns the leadership
    /// :class:`Lease`; :class:`LockTimeoutError` if another candidate still leads. Candidates
    /// are elected in arrival order. ``with election.campaign("node-a") as leadership:``.
    #[pyo3(signature = (value, timeout=None))]
    fn campaign<'py>(&self, py: Python<'py>, value: Text, timeout: Option<Secs>) -> PyResult<Bound<'py, PyAny>> {
        let (value, timeout) = (candidate(py, value)?, self::timeout(py, timeout)?);
        Deliver(block_on(py, self.spec.campaign(&value, timeout))?, None).into_pyobject(py)
    }
}

/// A leader election for asyncio, made by :meth:`Client.election`: ``await
/// election.campaign(value)`` waits to lead and returns the leadership :class:`Lease`; ``await
/// election.observe()`` shows the current leader.
#[pyclass(frozen, extends = ElectionBase, module = "lockgate.aio", name = "Election")]
pub struct AsyncElection {
    spec: Arc<ElectionSpec>,
}

impl AsyncElection {
    pub(crate) fn init(spec: Arc<ElectionSpec>) -> PyClassInitializer<Self> {
        PyClassInitializer::from(ElectionBase { spec: spec.clone() }).add_subclass(AsyncElection { spec })
    }
}

#[pymethods]
impl AsyncElection {
    /// ``await election.campaign(value, timeout=None)``: as :meth:`lockgate.Election.campaign`;
    /// ``async with election.campaign(value) as leadership:`` resigns on exit. Cancelling the
    /// task withdraws the candidacy.
    #[pyo3(signature = (value, timeout=None))]
    fn campaign(&self, py: Python<'_>, value: Text, timeout: Option<Secs>) -> PyResult<Py<AcquireContext>> {
        let source = Source::Campaign(self.spec.clone(), candidate(py, value)?.into());
        AcquireContext::new(py, source, self::timeout(py, timeout)?)
    }
}

/// The current leader of an election, as ``observe()`` sees it. Immutable; compares by value.
#[pyclass(frozen, eq, module = "lockgate")]
#[derive(PartialEq)]
pub struct LeaderInfo {
    /// The value the leader published when it campaigned (e.g. its address).
    #[pyo3(get)]
    value: String,
    /// The leader's term: its lease's fencing token, larger for every later leader.
    #[pyo3(get)]
    term: u64,
    /// Seconds left on the leader's lease on the server when observed.
    #[pyo3(get)]
    remaining: f64,
}

impl From<CoreLeaderInfo> for LeaderInfo {
    fn from(info: CoreLeaderInfo) -> Self {
        LeaderInfo { value: info.value, term: info.term, remaining: info.remaining.as_secs_f64() }
    }
}

#[pymethods]
impl LeaderInfo {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let remaining = secs_repr(py, Duration::from_secs_f64(self.remaining))?;
        Ok(format!("LeaderInfo(value={}, term={}, remaining={remaining})", py_repr(py, &self.value)?, self.term))
    }
}
