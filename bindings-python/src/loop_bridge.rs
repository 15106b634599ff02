//! Rust futures as asyncio awaitables, without taking the GIL on a tokio thread.
//!
//! Why not pyo3-async-runtimes: it resolves each future from a blocking-pool thread that must
//! take the GIL and then wake the loop (`call_soon_threadsafe`), one more thread hop per call.
//! Measured here, uncontended acquire+release under asyncio: ~5.9k pairs/s through it versus
//! ~10k through this bridge (redis.asyncio's Lock: ~6.5k), and worse under CPU contention.
//!
//! Each event loop gets one waker: a socket pair whose read end the loop watches
//! (`loop.add_reader`) and a queue of finished results. A finished task pushes its result and,
//! if the loop was not already poked, writes one byte; the loop thread then converts the
//! results and resolves the futures. For [`SPIN`] after a call, a [`Spin`] callback keeps the
//! loop polling instead of sleeping. Cancelling the asyncio future aborts the task, which drops
//! the Rust future (and so cancels the operation in the core).
//!
//! Python receives a [`Call`]: a coroutine (`send`, `throw`, `close`, `__await__`) over that
//! future, so `create_task`, `TaskGroup`, `wait_for` and `gather` take it like an `async def`'s.
//! It starts at the call (an `await`-less `lease.release()` still releases) or, made with
//! [`Call::deferred`], when first awaited; `close()` or `throw()` abandons it.

use std::future::Future;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lockgate_core::Error;
use pyo3::exceptions::{PyBaseException, PyRuntimeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyWeakrefReference};
use pyo3::IntoPyObjectExt;

use crate::errors::Outcome;
use crate::runtime::{lock_mutex, runtime};

/// How long the loop keeps polling (rather than sleeping in its selector) after a call is
/// bridged. A sleeping loop thread must be woken by the socket pair, which is slow on a busy
/// machine. Each polling turn is one ordinary loop iteration (other callbacks still run) plus a
/// `sched_yield` without the GIL. Measured (asyncio acquire+release pairs/s on the 2 shared
/// cores, median): ~5.4k-7.8k without, ~10.3k-10.7k with; the cost is up to this much CPU.
const SPIN: Duration = Duration::from_micros(100);

/// Makes a Python value on the loop thread: a finished task's result, or a deferred call's future.
pub(crate) type Convert = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<Bound<'py, PyAny>> + Send>;

struct Finished {
    future: Py<PyAny>,
    /// The future's done callback, removed before resolving (else asyncio would schedule it).
    abort: Py<AbortOnCancel>,
    convert: Convert,
}

/// The per-loop end of the bridge.
struct Waker {
    queue: Mutex<Vec<Finished>>,
    poked: AtomicBool,
    tx: UnixStream,
    rx: UnixStream,
    /// Whether a [`Spin`] callback is scheduled, and until when it keeps the loop polling.
    spinning: AtomicBool,
    spin_until: Mutex<Option<Instant>>,
}

impl Waker {
    fn push(&self, done: Finished) {
        lock_mutex(&self.queue).push(done);
        if !self.poked.swap(true, Ordering::AcqRel) {
            // A full socket buffer means the loop is already due to wake.
            let _ = (&self.tx).write(&[1]);
        }
    }

    /// Resolves the futures of every finished task (on the loop thread).
    fn drain(&self, py: Python<'_>) {
        let mut buf = [0u8; 64];
        // A short read emptied the socket (one byte per poke).
        while matches!((&self.rx).read(&mut buf), Ok(n) if n == buf.len()) {}
        self.poked.store(false, Ordering::Release); // before taking the queue: a later push pokes
        for f in std::mem::take(&mut *lock_mutex(&self.queue)) {
            let fut = f.future.bind(py);
            let resolve = || -> PyResult<()> {
                if fut.call_method0(intern!(py, "done"))?.is_truthy()? {
                    return Ok(()); // cancelled meanwhile
                }
                fut.call_method1(intern!(py, "remove_done_callback"), (&f.abort,))?;
                match (f.convert)(py) {
                    Ok(v) => fut.call_method1(intern!(py, "set_result"), (v,))?,
                    Err(e) => fut.call_method1(intern!(py, "set_exception"), (e.into_value(py),))?,
                };
                Ok(())
            };
            if let Err(e) = resolve() {
                e.write_unraisable(py, Some(fut));
            }
        }
    }
}

/// A loop callback that keeps the event loop polling for a short while; see [`SPIN`].
#[pyclass(frozen, module = "lockgate._lockgate")]
struct Spin(Arc<Waker>);

#[pymethods]
impl Spin {
    fn __call__(slf: Bound<'_, Self>) -> PyResult<()> {
        let (py, waker) = (slf.py(), &slf.get().0);
        if !lock_mutex(&waker.queue).is_empty() {
            waker.spinning.store(false, Ordering::Relaxed);
            waker.drain(py);
        } else if lock_mutex(&waker.spin_until).is_some_and(|t| Instant::now() < t) {
            py.detach(std::thread::yield_now); // others may take this core meanwhile
            let again = running_loop(py).and_then(|l| l.call_method1(intern!(py, "call_soon"), (&slf,)));
            if again.is_err() {
                waker.spinning.store(false, Ordering::Relaxed);
            }
            again?;
        } else {
            waker.spinning.store(false, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The loop's reader callback.
#[pyclass(frozen, module = "lockgate._lockgate")]
struct Drain(Arc<Waker>);

#[pymethods]
impl Drain {
    fn __call__(&self, py: Python<'_>) {
        self.0.drain(py);
    }
}

/// Aborts the task when its asyncio future is cancelled (a done callback).
#[pyclass(frozen, module = "lockgate._lockgate")]
struct AbortOnCancel(OnceLock<tokio::task::AbortHandle>);

#[pymethods]
impl AbortOnCancel {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut.call_method0(intern!(fut.py(), "cancelled"))?.is_truthy()? {
            if let Some(task) = self.0.get() {
                task.abort();
            }
        }
        Ok(())
    }
}

/// The running event loop (`RuntimeError` outside one, as in asyncio).
pub(crate) fn running_loop(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    static GET: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    GET.get_or_try_init(py, || py.import("asyncio")?.getattr("get_running_loop").map(Bound::unbind))?.bind(py).call0()
}

/// An already-resolved asyncio future of the running loop.
pub(crate) fn ready<'py>(py: Python<'py>, value: impl IntoPyObject<'py>) -> PyResult<Bound<'py, PyAny>> {
    let fut = running_loop(py)?.call_method0(intern!(py, "create_future"))?;
    fut.call_method1(intern!(py, "set_result"), (value,))?;
    Ok(fut)
}

/// The waker of `event_loop`, made on its first call. The last loop served is remembered
/// (weakly): a program normally runs one loop, and this spares a dictionary lookup per call.
fn waker_for(py: Python<'_>, event_loop: &Bound<'_, PyAny>) -> PyResult<Arc<Waker>> {
    static LAST: Mutex<Option<(Py<PyWeakrefReference>, Arc<Waker>)>> = Mutex::new(None);
    // Loop → its `Drain`: weakly (closed loops are not kept alive), or strongly for loop types
    // that cannot be weakly referenced.
    static WEAK: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    static STRONG: PyOnceLock<Py<PyDict>> = PyOnceLock::new();
    if let Some((weak, waker)) = &*lock_mutex(&LAST) {
        if weak.bind(py).upgrade().is_some_and(|l| l.is(event_loop)) {
            return Ok(waker.clone());
        }
    }
    let weak = WEAK
        .get_or_try_init(py, || py.import("weakref")?.call_method0("WeakKeyDictionary").map(Bound::unbind))?
        .bind(py);
    let strong = STRONG.get_or_init(py, || PyDict::new(py).unbind()).bind(py).as_any();
    let found =
        [weak, strong].into_iter().find_map(|d| d.call_method1("get", (event_loop,)).ok()?.cast_into::<Drain>().ok());
    let waker = match found {
        Some(drain) => drain.get().0.clone(),
        None => {
            let (tx, rx) = UnixStream::pair()?;
            tx.set_nonblocking(true)?;
            rx.set_nonblocking(true)?;
            let fd = rx.as_raw_fd();
            let waker = Arc::new(Waker {
                queue: Mutex::new(Vec::new()),
                poked: AtomicBool::new(false),
                tx,
                rx,
                spinning: AtomicBool::new(false),
                spin_until: Mutex::new(None),
            });
            let drain = Bound::new(py, Drain(waker.clone()))?;
            event_loop.call_method1("add_reader", (fd, &drain))?;
            if weak.set_item(event_loop, &drain).is_err() {
                strong.set_item(event_loop, &drain)?;
            }
            waker
        }
    };
    if let Ok(weak) = PyWeakrefReference::new(event_loop) {
        *lock_mutex(&LAST) = Some((weak.unbind(), waker.clone()));
    }
    Ok(waker)
}

/// Runs `fut` on the runtime as an asyncio future of the running loop.
fn into_future<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let event_loop = running_loop(py)?;
    let waker = waker_for(py, &event_loop)?;
    let py_fut = event_loop.call_method0(intern!(py, "create_future"))?;
    let abort = Bound::new(py, AbortOnCancel(OnceLock::new()))?;
    let (future, abort_ref, done) = (py_fut.clone().unbind(), abort.clone().unbind(), waker.clone());
    let task = runtime().spawn(async move {
        let out = fut.await;
        let convert: Convert = Box::new(move |py| Outcome(out).into_bound_py_any(py));
        done.push(Finished { future, abort: abort_ref, convert });
    });
    let _ = abort.get().0.set(task.abort_handle());
    py_fut.call_method1(intern!(py, "add_done_callback"), (abort,))?;
    *lock_mutex(&waker.spin_until) = Some(Instant::now() + SPIN);
    if !waker.spinning.swap(true, Ordering::Relaxed) {
        event_loop.call_method1(intern!(py, "call_soon"), (Spin(waker),))?;
    }
    Ok(py_fut)
}

/// Starts `fut` now and returns the coroutine that awaits it (see the module docs).
pub(crate) fn into_asyncio<'py, F, T>(py: Python<'py>, fut: F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let future = into_future(py, fut)?.unbind();
    Ok(Bound::new(py, Call::started(future))?.into_any())
}

/// Starts `fut` when called (for [`Call::deferred`]).
pub(crate) fn start<F, T>(fut: F) -> Convert
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    Box::new(move |py| into_future(py, fut))
}

/// Where a [`Call`] stands.
pub(crate) enum State {
    NotStarted(Convert),
    /// The asyncio future, and its `__await__` iterator once awaited.
    Started(Py<PyAny>, Option<Py<PyAny>>),
    /// Closed or thrown into before it started: it never will.
    Closed,
}

/// A coroutine over an asyncio future: awaiting it is awaiting the future.
#[pyclass(frozen, subclass, module = "lockgate._lockgate")]
pub struct Call(Mutex<State>);

impl Call {
    fn started(future: Py<PyAny>) -> Self {
        Call(Mutex::new(State::Started(future, None)))
    }

    /// A call that starts when first awaited (`send`).
    pub(crate) fn deferred(start: Convert) -> Self {
        Call(Mutex::new(State::NotStarted(start)))
    }

    /// The future's `__await__` iterator, starting the call first if needed.
    fn iter<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut state = lock_mutex(&self.0);
        if let State::NotStarted(_) = &*state {
            let State::NotStarted(start) = std::mem::replace(&mut *state, State::Closed) else { unreachable!() };
            *state = State::Started(start(py)?.unbind(), None);
        }
        match &mut *state {
            State::Started(_, Some(it)) => Ok(it.bind(py).clone()),
            State::Started(fut, slot) => {
                let it = fut.bind(py).call_method0(intern!(py, "__await__"))?;
                *slot = Some(it.clone().unbind());
                Ok(it)
            }
            _ => Err(PyRuntimeError::new_err("cannot reuse already awaited coroutine")),
        }
    }

    /// Abandons the call (its task is aborted; a result already there is dropped). `false` if
    /// it had not started: then it never will.
    fn abandon(&self, py: Python<'_>) -> PyResult<bool> {
        let mut state = lock_mutex(&self.0);
        match &*state {
            State::Started(fut, _) => fut.bind(py).call_method0(intern!(py, "cancel")).map(|_| true),
            _ => {
                *state = State::Closed;
                Ok(false)
            }
        }
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

    /// Resumes the awaiting (``coroutine.send``), starting the call first if needed.
    #[pyo3(signature = (value, /))]
    fn send<'py>(&self, py: Python<'py>, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        self.iter(py)?.call_method1(intern!(py, "send"), (value,))
    }

    /// ``coroutine.throw``: abandons the call and raises the exception where it waited.
    #[pyo3(signature = (typ, val=None, tb=None, /))]
    fn throw<'py>(
        &self,
        py: Python<'py>,
        typ: Bound<'py, PyAny>,
        val: Option<Bound<'py, PyAny>>,
        tb: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if self.abandon(py)? {
            let it = self.iter(py)?;
            return match (val, tb) {
                (None, None) => it.call_method1(intern!(py, "throw"), (typ,)),
                (val, None) => it.call_method1(intern!(py, "throw"), (typ, val)),
                (val, tb) => it.call_method1(intern!(py, "throw"), (typ, val, tb)),
            };
        }
        // Never started: raise `val` (an exception), `typ` (an instance) or `typ(val)`.
        let exc = match val {
            Some(v) if v.is_instance_of::<PyBaseException>() => v,
            _ if typ.is_instance_of::<PyBaseException>() => typ,
            Some(v) if !v.is_none() => typ.call1((v,))?,
            _ => typ.call0()?,
        };
        Err(PyErr::from_value(exc))
    }

    /// ``coroutine.close``: abandons the call, or makes sure it never starts.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.abandon(py).map(|_| ())
    }
}
