//! Rust futures as asyncio futures, without taking the GIL on a tokio thread.
//!
//! Why not pyo3-async-runtimes: it resolves each future from a blocking-pool thread that must
//! take the GIL and then wake the loop (`call_soon_threadsafe`), one more thread hop per call.
//! Measured here, uncontended acquire+release under asyncio: ~5.9k pairs/s through it versus
//! ~10k through this bridge (redis.asyncio's Lock: ~6.5k), and worse under CPU contention.
//!
//! Each event loop gets one [`LoopWaker`]: a socket pair whose read end the loop watches
//! (`loop.add_reader`) and a queue of finished results. A finished task pushes its result and,
//! if the loop was not already poked, writes one byte; the loop thread then converts the
//! results to Python objects and resolves the futures. Cancelling the asyncio future aborts the
//! task, which drops the Rust future (and so cancels the operation in the core).
//!
//! For [`SPIN`] after a call, a [`Spin`] callback keeps the loop polling for the answer instead
//! of letting it sleep, and resolves the futures itself when the answer is there.
//!
//! What Python receives is a [`Call`]: a coroutine over that future (`send`, `throw`, `close`,
//! `__await__`), so `asyncio.create_task`, `TaskGroup.create_task`, `wait_for` and `gather`
//! accept it like the coroutine of an `async def`. The operation starts at the call, as before
//! (a `lease.release()` never awaited still releases); `close()` or a `throw()` abandons it.

use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lockgate_core::Error;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyWeakrefReference;
use pyo3::IntoPyObjectExt;

use crate::errors::Outcome;
use crate::runtime::runtime;

type Convert = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyAny>> + Send>;

struct Finished {
    future: Py<PyAny>,
    /// The future's done callback, removed before resolving: left in place, asyncio would
    /// schedule it as one more event-loop callback on every call.
    abort: Py<AbortOnCancel>,
    convert: Convert,
}

struct Shared {
    queue: Mutex<Vec<Finished>>,
    poked: AtomicBool,
    tx: UnixStream,
    rx: UnixStream,
    /// Whether a [`Spin`] callback is scheduled on the loop.
    spinning: AtomicBool,
    /// Until when it keeps the loop polling (loop thread only).
    spin_until: Mutex<Option<Instant>>,
}

impl Shared {
    fn push(&self, done: Finished) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(done);
        if !self.poked.swap(true, Ordering::AcqRel) {
            // A full socket buffer means the loop is already due to wake: nothing to add.
            let _ = (&self.tx).write(&[1]);
        }
    }

    fn has_finished(&self) -> bool {
        !self
            .queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// Resolves the futures of every finished task (on the loop thread).
    fn drain(&self, py: Python<'_>) {
        let mut buf = [0u8; 64];
        // A short read emptied the socket (one byte per poke): no second read to see EAGAIN.
        while matches!((&self.rx).read(&mut buf), Ok(n) if n == buf.len()) {}
        // Cleared before taking the queue: a push after this pokes again.
        self.poked.store(false, Ordering::Release);
        let finished = std::mem::take(&mut *self.queue.lock().unwrap_or_else(|e| e.into_inner()));
        for f in finished {
            let fut = f.future.bind(py);
            if let Err(e) = resolve(py, fut, &f.abort, f.convert) {
                e.write_unraisable(py, Some(fut));
            }
        }
    }
}

/// How long the loop keeps polling (rather than sleeping in its selector) after a call is
/// bridged, waiting for the answer. A sleeping loop thread must be woken by the socket pair;
/// on a busy machine that wake-up is slow, and the loop thread plus the runtime thread make one
/// more cold wake-up per call than a client that talks to Redis from the loop thread itself.
/// Each polling turn is one ordinary loop iteration (the loop's selector still runs, with a
/// zero timeout, and every other callback still runs) plus a `sched_yield` without the GIL:
/// the loop is never blocked. Measured (asyncio acquire+release pairs/s, 5 runs of 2000 pairs
/// on the 2 shared cores, median): ~5.4k-7.8k without, ~10.3k-10.7k with (redis.asyncio's
/// Lock: ~5.9k), the best runs within 5%; the cost is up to this much CPU per call.
const SPIN: Duration = Duration::from_micros(100);

/// A loop callback that keeps the event loop polling, instead of sleeping in its selector,
/// for a short while after a call was bridged; see [`SPIN`].
#[pyclass(frozen, module = "lockgate._lockgate")]
pub(crate) struct Spin {
    // No reference to the loop: a handle left in a discarded loop must not keep it alive.
    shared: Arc<Shared>,
}

#[pymethods]
impl Spin {
    fn __call__(slf: Bound<'_, Self>) -> PyResult<()> {
        let py = slf.py();
        let me = slf.get();
        if me.shared.has_finished() {
            me.shared.spinning.store(false, Ordering::Relaxed);
            me.shared.drain(py);
            return Ok(());
        }
        let until = *me
            .shared
            .spin_until
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if until.is_some_and(|t| Instant::now() < t) {
            // Without the GIL: other Python threads, the runtime thread and redis-server may
            // take this core meanwhile.
            py.detach(std::thread::yield_now);
            let again =
                running_loop(py).and_then(|l| l.call_method1(intern!(py, "call_soon"), (&slf,)));
            if again.is_err() {
                me.shared.spinning.store(false, Ordering::Relaxed);
            }
            again?;
        } else {
            me.shared.spinning.store(false, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The per-loop end of the bridge (its `_drain` is the loop's reader callback).
#[pyclass(frozen, module = "lockgate._lockgate")]
pub(crate) struct LoopWaker {
    shared: Arc<Shared>,
}

#[pymethods]
impl LoopWaker {
    /// Resolves the futures of every finished task (called by the event loop).
    fn _drain(&self, py: Python<'_>) {
        self.shared.drain(py);
    }
}

fn resolve(
    py: Python<'_>,
    fut: &Bound<'_, PyAny>,
    abort: &Py<AbortOnCancel>,
    convert: Convert,
) -> PyResult<()> {
    if fut.call_method0(intern!(py, "done"))?.is_truthy()? {
        return Ok(()); // cancelled meanwhile
    }
    fut.call_method1(intern!(py, "remove_done_callback"), (abort,))?;
    match convert(py) {
        Ok(v) => fut.call_method1(intern!(py, "set_result"), (v,))?,
        Err(e) => fut.call_method1(intern!(py, "set_exception"), (e.into_value(py),))?,
    };
    Ok(())
}

/// Aborts the task when its asyncio future is cancelled (a done callback).
#[pyclass(frozen, module = "lockgate._lockgate")]
pub(crate) struct AbortOnCancel {
    /// Set right after the task is spawned, before the callback is registered.
    task: OnceLock<tokio::task::AbortHandle>,
}

#[pymethods]
impl AbortOnCancel {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut
            .call_method0(intern!(fut.py(), "cancelled"))?
            .is_truthy()?
        {
            if let Some(task) = self.task.get() {
                task.abort();
            }
        }
        Ok(())
    }
}

/// `asyncio.get_running_loop`, looked up once.
static GET_RUNNING_LOOP: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
/// Loop → its waker, without keeping closed loops alive.
static WAKERS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
/// Loop → its waker, for loop types that cannot be weakly referenced.
static STRONG_WAKERS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// The running event loop (`RuntimeError` outside one, as in asyncio).
pub(crate) fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    GET_RUNNING_LOOP
        .get_or_try_init(py, || {
            py.import("asyncio")?
                .getattr("get_running_loop")
                .map(Bound::unbind)
        })?
        .bind(py)
        .call0()
}

/// An already-resolved asyncio future of the running loop (for awaitables with nothing to wait
/// for, such as `async with lease:`).
pub(crate) fn ready<'py, T>(py: Python<'py>, value: T) -> PyResult<Bound<'py, PyAny>>
where
    T: IntoPyObject<'py>,
{
    let fut = running_loop(py)?.call_method0(intern!(py, "create_future"))?;
    fut.call_method1(intern!(py, "set_result"), (value,))?;
    Ok(fut)
}

/// The last loop [`waker_for`] served (weakly) and its waker: a program normally runs one loop,
/// and this spares a `WeakKeyDictionary` lookup (Python code) per call.
static LAST_WAKER: Mutex<Option<(Py<PyWeakrefReference>, Arc<Shared>)>> = Mutex::new(None);

fn waker_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Shared>> {
    if let Some((weak, shared)) = &*LAST_WAKER.lock().unwrap_or_else(|e| e.into_inner()) {
        if weak.bind(py).upgrade().is_some_and(|l| l.is(event_loop)) {
            return Ok(shared.clone());
        }
    }
    let shared = waker_lookup(py, event_loop)?;
    if let Ok(weak) = PyWeakrefReference::new(event_loop) {
        *LAST_WAKER.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((weak.unbind(), shared.clone()));
    }
    Ok(shared)
}

fn waker_lookup(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Shared>> {
    let weak = WAKERS
        .get_or_try_init(py, || {
            py.import("weakref")?
                .call_method0("WeakKeyDictionary")
                .map(Bound::unbind)
        })?
        .bind(py);
    let strong = STRONG_WAKERS
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(pyo3::types::PyDict::new(py).into_any().unbind())
        })?
        .bind(py);
    for wakers in [weak, strong] {
        if let Ok(found) = wakers.call_method1("get", (event_loop,)) {
            if let Ok(w) = found.cast::<LoopWaker>() {
                return Ok(w.get().shared.clone());
            }
        }
    }
    let (tx, rx) = UnixStream::pair()?;
    tx.set_nonblocking(true)?;
    rx.set_nonblocking(true)?;
    let fd = rx.as_raw_fd();
    let shared = Arc::new(Shared {
        queue: Mutex::new(Vec::new()),
        poked: AtomicBool::new(false),
        tx,
        rx,
        spinning: AtomicBool::new(false),
        spin_until: Mutex::new(None),
    });
    let waker = Bound::new(
        py,
        LoopWaker {
            shared: shared.clone(),
        },
    )?;
    event_loop.call_method1("add_reader", (fd, waker.getattr("_drain")?))?;
    if weak.set_item(event_loop, &waker).is_err() {
        strong.set_item(event_loop, &waker)?;
    }
    Ok(shared)
}

/// A coroutine over an asyncio future (see the module docs): what every asyncio method of the
/// binding returns. It follows the coroutine protocol by delegating to the future's own
/// `__await__` iterator, so awaiting it behaves exactly like awaiting the future.
#[pyclass(frozen, module = "lockgate._lockgate", name = "Call")]
pub(crate) struct Call {
    future: Py<PyAny>,
    /// The future's `__await__` iterator, made by the first `send`.
    iter: Mutex<Option<Py<PyAny>>>,
}

impl Call {
    pub(crate) fn new<'py>(future: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let py = future.py();
        Ok(Bound::new(
            py,
            Call {
                future: future.unbind(),
                iter: Mutex::new(None),
            },
        )?
        .into_any())
    }

    fn iter<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut slot = self.iter.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(it) = &*slot {
            return Ok(it.bind(py).clone());
        }
        let it = self
            .future
            .bind(py)
            .call_method0(intern!(py, "__await__"))?;
        *slot = Some(it.clone().unbind());
        Ok(it)
    }

    /// Gives up on the operation (its Rust task is aborted; a result already there is dropped).
    fn abandon(&self, py: Python<'_>) -> PyResult<()> {
        self.future.bind(py).call_method0(intern!(py, "cancel"))?;
        Ok(())
    }
}

#[pymethods]
impl Call {
    fn __await__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.iter(py)?.call_method1(intern!(py, "send"), (py.None(),))
    }

    /// Resumes the awaiting (`coroutine.send`): yields the future until it is done, then
    /// raises `StopIteration` with its result.
    #[pyo3(signature = (value, /))]
    fn send<'py>(&self, py: Python<'py>, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.iter(py)?.call_method1(intern!(py, "send"), (value,))
    }

    /// `coroutine.throw`: abandons the operation and raises the exception where it waited.
    #[pyo3(signature = (typ, val=None, tb=None, /))]
    fn throw<'py>(
        &self,
        py: Python<'py>,
        typ: Bound<'py, PyAny>,
        val: Option<Bound<'py, PyAny>>,
        tb: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.abandon(py)?;
        let it = self.iter(py)?;
        match (val, tb) {
            (None, None) => it.call_method1(intern!(py, "throw"), (typ,)),
            (val, None) => it.call_method1(intern!(py, "throw"), (typ, val)),
            (val, tb) => it.call_method1(intern!(py, "throw"), (typ, val, tb)),
        }
    }

    /// `coroutine.close`: abandons the operation.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.abandon(py)
    }
}

/// The exception `coroutine.throw(typ, val)` raises: `val` if it is an exception instance,
/// else `typ` itself (an instance) or `typ(val)` / `typ()` (a class).
pub(crate) fn exception_of(
    typ: Bound<'_, PyAny>,
    val: Option<Bound<'_, PyAny>>,
) -> PyErr {
    use pyo3::exceptions::PyBaseException;
    let make = || -> PyResult<Bound<'_, PyAny>> {
        if let Some(v) = &val {
            if v.is_instance_of::<PyBaseException>() {
                return Ok(v.clone());
            }
        }
        if typ.is_instance_of::<PyBaseException>() {
            return Ok(typ.clone());
        }
        match val.filter(|v| !v.is_none()) {
            Some(v) => typ.call1((v,)),
            None => typ.call0(),
        }
    };
    match make() {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

/// Wraps `fut` in a coroutine ([`Call`]) over an asyncio future of the running loop; see the
/// module docs.
pub(crate) fn into_asyncio<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    Call::new(into_future(py, fut)?)
}

/// Wraps `fut` in an asyncio future of the running loop; see the module docs.
fn into_future<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let event_loop = running_loop(py)?;
    let shared = waker_for(py, &event_loop)?;
    let spin_state = shared.clone();
    let py_fut = event_loop.call_method0(intern!(py, "create_future"))?;
    let future = py_fut.clone().unbind();
    let abort = Bound::new(
        py,
        AbortOnCancel {
            task: OnceLock::new(),
        },
    )?;
    let abort_ref = abort.clone().unbind();
    let task = runtime().spawn(async move {
        let out = fut.await;
        shared.push(Finished {
            future,
            abort: abort_ref,
            convert: Box::new(move |py| Outcome(out).into_bound_py_any(py)),
        });
    });
    let _ = abort.get().task.set(task.abort_handle());
    py_fut.call_method1(intern!(py, "add_done_callback"), (abort,))?;
    *spin_state
        .spin_until
        .lock()
        .unwrap_or_else(|e| e.into_inner()) = Some(Instant::now() + SPIN);
    if !spin_state.spinning.swap(true, Ordering::Relaxed) {
        let cb = Spin { shared: spin_state };
        event_loop.call_method1(intern!(py, "call_soon"), (cb,))?;
    }
    Ok(py_fut)
}
