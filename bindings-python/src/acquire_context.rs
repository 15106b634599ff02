//! [`AcquireContext`]: what `lockgate.aio`'s `Lock.acquire` and `Election.campaign` return,
//! awaitable and an async context manager.

use std::sync::{Arc, Mutex};

use lockgate_core::time::Duration;
use lockgate_core::{Error, ErrorKind};
use pyo3::prelude::*;
use pyo3::PyClassInitializer;

use crate::api::task;
use crate::handle::{ElectionSpec, LockSpec};
use crate::lease::{exit_async, Deliver, LeaseCell};
use crate::loop_bridge::{into_asyncio_cancellable, start_cancellable, Call, Cancel};
use crate::runtime::lock_mutex;
use lockgate_core::native::Owner;

/// What an [`AcquireContext`] acquires: through a lock handle, or a candidacy.
#[derive(Clone)]
pub(crate) enum Source {
    Lock(Arc<LockSpec>),
    Campaign(Arc<ElectionSpec>, Arc<str>),
}

impl Source {
    /// Acquires for `owner` (the asyncio task that awaits it; a campaign's candidate is its
    /// election, whoever awaits).
    /// A lock's wait ends through the core's cancel when `cancel` fires (the awaiting task was
    /// cancelled); a campaign's is dropped.
    async fn acquire(self, owner: Owner, timeout: Option<Duration>, cancel: Cancel) -> Result<Deliver, Error> {
        match self {
            Source::Lock(spec) => Ok(spec.deliver(owner, spec.acquire(owner, timeout, cancel.fired()).await?)),
            // The core has no explicit cancel for a campaign: it is dropped (as before).
            Source::Campaign(spec, value) => tokio::select! {
                cell = spec.campaign(&value, timeout) => Ok(Deliver(cell?, None)),
                () = cancel.fired() => Err(Error::new(ErrorKind::Cancelled, "the campaign was cancelled")),
            },
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
            let owner = task(py)?;
            start_cancellable(move |cancel| deferred.acquire(owner, timeout, cancel))(py)
        }));
        let me = AcquireContext { source, timeout, held: Arc::default() };
        Py::new(py, PyClassInitializer::from(call).add_subclass(me))
    }
}

#[pymethods]
impl AcquireContext {
    fn __aenter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let (source, timeout, held) = (self.source.clone(), self.timeout, self.held.clone());
        let owner = task(py)?;
        into_asyncio_cancellable(py, move |cancel| async move {
            let deliver = source.acquire(owner, timeout, cancel).await?;
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
