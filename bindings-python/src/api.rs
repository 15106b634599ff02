//! Which Python API a call comes from, how a call runs there (blocking, or as a coroutine), and
//! who is calling: the core's [`Owner`] of an acquire — the thread for the blocking API, the
//! asyncio task for `lockgate.aio` — so that one `Lock` shared by threads or tasks lets each
//! wait its turn, while the same thread or task acquiring again fails at once (the rule is the
//! core's, `lockgate_core::native::Owner`; this only names the caller).

use std::future::Future;

use lockgate_core::native::Owner;
use lockgate_core::Error;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::{IntoPyObjectExt, PyClass, PyClassInitializer};

use crate::loop_bridge::into_asyncio;
use crate::runtime::block_on;

/// Which Python API a client (and everything made from it) belongs to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `lockgate`: calls block (GIL released) until done.
    Blocking,
    /// `lockgate.aio`: calls return coroutines.
    Asyncio,
}

impl Api {
    /// Runs `fut` the way this API runs a call: its result, or a coroutine resolving to it.
    pub(crate) fn run<'py, F, T>(self, py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
    where
        F: Future<Output = Result<T, Error>> + Send + 'static,
        T: for<'a> IntoPyObject<'a> + Send + 'static,
    {
        match self {
            Api::Blocking => block_on(py, fut)?.into_bound_py_any(py),
            Api::Asyncio => into_asyncio(py, fut),
        }
    }

    /// A new object of this API's class: made by `blocking` or by `asyncio` from `value`.
    pub(crate) fn make<V, B: PyClass, A: PyClass>(
        self,
        py: Python<'_>,
        value: V,
        blocking: impl FnOnce(V) -> PyClassInitializer<B>,
        asyncio: impl FnOnce(V) -> PyClassInitializer<A>,
    ) -> PyResult<Py<PyAny>> {
        Ok(match self {
            Api::Blocking => Py::new(py, blocking(value))?.into_any(),
            Api::Asyncio => Py::new(py, asyncio(value))?.into_any(),
        })
    }

    /// The caller as this API sees it: the thread (blocking) or the asyncio task.
    pub(crate) fn caller(self, py: Python<'_>) -> PyResult<Owner> {
        match self {
            Api::Blocking => Ok(Owner::current_thread()),
            Api::Asyncio => task(py),
        }
    }
}

/// The running asyncio task (its owner's id kept, weakly, in a table), or the thread outside one.
pub(crate) fn task(py: Python<'_>) -> PyResult<Owner> {
    static CURRENT_TASK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static IDS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let current = CURRENT_TASK
        .get_or_try_init(py, || py.import("asyncio")?.getattr("current_task").map(Bound::unbind))?
        .bind(py)
        .call0()?;
    if current.is_none() {
        return Ok(Owner::current_thread());
    }
    let ids = IDS
        .get_or_try_init(py, || py.import("weakref")?.call_method0("WeakKeyDictionary").map(Bound::unbind))?
        .bind(py);
    let known = ids.call_method1("get", (&current,))?;
    if !known.is_none() {
        return Ok(Owner::task(known.extract()?));
    }
    let owner = Owner::new_task();
    ids.set_item(&current, owner.id())?;
    Ok(owner)
}
