//! Who is calling: the core's [`Owner`] of an acquire — the thread for the blocking API, the
//! asyncio task for `lockgate.aio` — so that one `Lock` shared by threads or tasks lets each
//! wait its turn, while the same thread or task acquiring again fails at once (the rule is the
//! core's, `lockgate_core::native::Owner`; this only names the caller).

use std::sync::atomic::{AtomicU64, Ordering};

use lockgate_core::native::Owner;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyInt;

use crate::runtime::Api;

/// Ids handed to threads and tasks, never reused within the process (a thread's or task's
/// address may be, and a dead owner's live lease must not be mistaken for a new one's).
static NEXT: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
}

/// The calling thread.
pub(crate) fn thread() -> Owner {
    Owner::thread(THREAD.with(|id| *id))
}

/// The running asyncio task (its id kept, weakly, in a table), or the thread outside one.
pub(crate) fn task(py: Python<'_>) -> PyResult<Owner> {
    static CURRENT_TASK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static IDS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let current = CURRENT_TASK
        .get_or_try_init(py, || py.import("asyncio")?.getattr("current_task").map(Bound::unbind))?
        .bind(py)
        .call0()?;
    if current.is_none() {
        return Ok(thread());
    }
    let ids =
        IDS.get_or_try_init(py, || py.import("weakref")?.call_method0("WeakKeyDictionary").map(Bound::unbind))?.bind(py);
    let known = ids.call_method1("get", (&current,))?;
    let id = if known.is_none() {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        ids.set_item(&current, PyInt::new(py, id))?;
        id
    } else {
        known.extract()?
    };
    Ok(Owner::task(id))
}

/// The caller as `api` sees it: the thread (blocking) or the asyncio task.
pub(crate) fn of(py: Python<'_>, api: Api) -> PyResult<Owner> {
    match api {
        Api::Blocking => Ok(thread()),
        Api::Asyncio => task(py),
    }
}
