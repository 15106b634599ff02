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
//! results and resolves the futures. A loop that cannot watch a socket (Windows' proactor loop,
//! the default there; and every loop on Windows, where Rust's std has no socket pair) is poked
//! through `loop.call_soon_threadsafe` instead, which takes the GIL on the finishing thread. For [`SPIN`] after a call, a [`Spin`] callback keeps the
//! loop polling instead of sleeping. Cancelling the asyncio future aborts the task, which drops
//! the Rust future (and so cancels the operation in the core) — except for a call made with a
//! [`Cancel`] (an acquire): its cancel is told to the call, which ends through the core's
//! explicit cancel, and the awaiting coroutine raises its `CancelledError` only once that
//! ended, so nothing the wait left on the server outlives it (PROTOCOL.md §4).
//!
//! Python receives a [`Call`]: a coroutine (`send`, `throw`, `close`, `__await__`) over that
//! future, so `create_task`, `TaskGroup`, `wait_for` and `gather` take it like an `async def`'s.
//! It starts at the call (an `await`-less `lease.release()` still releases) or, made with
//! [`Call::deferred`], when first awaited; `close()` or `throw()` abandons it.

use std::future::Future;
#[cfg(unix)]
use std::io::{Read, Write};
#[cfg(unix)]
use std::os::fd::AsRawFd;
#[cfg(unix)]
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lockgate_core::Error;
use pyo3::exceptions::{PyBaseException, PyRuntimeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyWeakrefReference};
use pyo3::IntoPyObjectExt;
use tokio::sync::oneshot;

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
    abort: Option<Py<AbortOnCancel>>,
    convert: Convert,
}

/// The cancel of a call made with [`into_asyncio_cancellable`] or [`start_cancellable`]: it
/// resolves when the call's asyncio future is cancelled (or dropped unresolved); the call then
/// ends itself through the core's explicit cancel.
pub(crate) struct Cancel(oneshot::Receiver<()>);

impl Cancel {
    /// Resolves once the call is to end.
    pub(crate) async fn fired(self) {
        let _ = self.0.await;
    }
}

/// What a cancellable call's task, its future's done callback and its coroutine share.
pub(crate) struct Coop {
    /// Fires the call's [`Cancel`].
    cancel: Mutex<Option<oneshot::Sender<()>>>,
    ending: Mutex<Ending>,
}

/// Whether a cancellable call's task has ended, or a cancelled coroutine awaits that.
enum Ending {
    Running,
    Ended,
    /// The future a cancelled coroutine awaits, resolved (on its loop, by `waker`) when the task ends.
    Awaited(Py<PyAny>, Arc<Waker>),
}

impl Coop {
    fn fire(&self) {
        if let Some(tx) = lock_mutex(&self.cancel).take() {
            let _ = tx.send(());
        }
    }

    /// The task ended: resolves the future a cancelled coroutine awaits.
    fn ended(&self) {
        if let Ending::Awaited(future, waker) = std::mem::replace(&mut *lock_mutex(&self.ending), Ending::Ended) {
            waker.push(Finished { future, abort: None, convert: Box::new(|py| Ok(py.None().into_bound(py))) });
        }
    }
}

/// How a finished task pokes its loop's thread.
enum Poke {
    /// One byte on a socket pair whose read end the loop watches: no GIL on the finishing thread.
    #[cfg(unix)]
    Socket { tx: UnixStream, rx: UnixStream },
    /// `loop.call_soon_threadsafe(drain)`, for a loop that cannot watch a socket (weakly: a
    /// closed loop is not kept alive, and a poke of it is dropped).
    Threadsafe(Py<PyWeakrefReference>),
}

/// The per-loop end of the bridge.
struct Waker {
    queue: Mutex<Vec<Finished>>,
    poked: AtomicBool,
    poke: Poke,
    /// Whether a [`Spin`] callback is scheduled, and until when it keeps the loop polling.
    spinning: AtomicBool,
    spin_until: Mutex<Option<Instant>>,
}

impl Waker {
    fn push(self: &Arc<Self>, done: Finished) {
        lock_mutex(&self.queue).push(done);
        if !self.poked.swap(true, Ordering::AcqRel) {
            match &self.poke {
                // A full socket buffer means the loop is already due to wake.
                #[cfg(unix)]
                Poke::Socket { tx, .. } => {
                    let _ = (&*tx).write(&[1]);
                }
                Poke::Threadsafe(event_loop) => Python::attach(|py| {
                    let Some(event_loop) = event_loop.bind(py).upgrade() else { return };
                    // A closed loop refuses (RuntimeError): nothing is left to resolve there.
                    let _ = Bound::new(py, Drain(self.clone()))
                        .and_then(|drain| event_loop.call_method1(intern!(py, "call_soon_threadsafe"), (drain,)));
                }),
            }
        }
    }

    /// Resolves the futures of every finished task (on the loop thread).
    fn drain(&self, py: Python<'_>) {
        #[cfg(unix)]
        if let Poke::Socket { rx, .. } = &self.poke {
            let mut buf = [0u8; 64];
            // A short read emptied the socket (one byte per poke).
            while matches!((&*rx).read(&mut buf), Ok(n) if n == buf.len()) {}
        }
        self.poked.store(false, Ordering::Release); // before taking the queue: a later push pokes
        // The telemetry the finished calls raised, before their results (see `telemetry`).
        crate::telemetry::flush(py);
        for f in std::mem::take(&mut *lock_mutex(&self.queue)) {
            let fut = f.future.bind(py);
            let resolve = || -> PyResult<()> {
                if fut.call_method0(intern!(py, "done"))?.is_truthy()? {
                    return Ok(()); // cancelled meanwhile
                }
                if let Some(abort) = &f.abort {
                    fut.call_method1(intern!(py, "remove_done_callback"), (abort,))?;
                }
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

/// Ends the task when its asyncio future is cancelled (a done callback): aborts it, or fires a
/// cancellable call's [`Cancel`].
#[pyclass(frozen, module = "lockgate._lockgate")]
struct AbortOnCancel(OnceLock<tokio::task::AbortHandle>, Option<Arc<Coop>>);

#[pymethods]
impl AbortOnCancel {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut.call_method0(intern!(fut.py(), "cancelled"))?.is_truthy()? {
            match (&self.1, self.0.get()) {
                (Some(coop), _) => coop.fire(),
                (None, Some(task)) => task.abort(),
                (None, None) => {}
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
            let (waker, drain) = new_waker(py, event_loop)?;
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

/// A new waker for `event_loop`, and its `Drain`: a watched socket pair where the loop can
/// watch one, else `call_soon_threadsafe` (see the module docs).
fn new_waker<'py>(py: Python<'py>, event_loop: &Bound<'py, PyAny>) -> PyResult<(Arc<Waker>, Bound<'py, Drain>)> {
    let waker = |poke| {
        Arc::new(Waker {
            queue: Mutex::new(Vec::new()),
            poked: AtomicBool::new(false),
            poke,
            spinning: AtomicBool::new(false),
            spin_until: Mutex::new(None),
        })
    };
    #[cfg(unix)]
    {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        let fd = rx.as_raw_fd();
        let socket = waker(Poke::Socket { tx, rx });
        let drain = Bound::new(py, Drain(socket.clone()))?;
        match event_loop.call_method1("add_reader", (fd, &drain)) {
            Ok(_) => return Ok((socket, drain)),
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyNotImplementedError>(py) => {}
            Err(e) => return Err(e),
        }
    }
    let threadsafe = waker(Poke::Threadsafe(PyWeakrefReference::new(event_loop)?.unbind()));
    let drain = Bound::new(py, Drain(threadsafe.clone()))?;
    Ok((threadsafe, drain))
}

/// Runs `fut` on the runtime as an asyncio future of the running loop (with `coop`, a
/// cancellable call's: see [`Coop`]).
fn into_future<'py, F, T>(py: Python<'py>, fut: F, coop: Option<Arc<Coop>>) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let event_loop = running_loop(py)?;
    let waker = waker_for(py, &event_loop)?;
    let py_fut = event_loop.call_method0(intern!(py, "create_future"))?;
    let abort = Bound::new(py, AbortOnCancel(OnceLock::new(), coop.clone()))?;
    let (future, abort_ref, done) = (py_fut.clone().unbind(), abort.clone().unbind(), waker.clone());
    let task = runtime().spawn(async move {
        let out = fut.await;
        let convert: Convert = Box::new(move |py| Outcome(out).into_bound_py_any(py));
        done.push(Finished { future, abort: Some(abort_ref), convert });
        if let Some(coop) = coop {
            coop.ended();
        }
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
    let future = into_future(py, fut, None)?.unbind();
    Ok(Bound::new(py, Call::started(future, None))?.into_any())
}

/// As [`into_asyncio`], for a call that ends itself when given its [`Cancel`]: cancelling the
/// awaiting task fires it, and the task's `CancelledError` is raised once the call ended.
pub(crate) fn into_asyncio_cancellable<'py, F, T>(py: Python<'py>, make: impl FnOnce(Cancel) -> F) -> PyResult<Bound<'py, PyAny>>
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    let (coop, cancel) = cooperation();
    let future = into_future(py, make(cancel), Some(coop.clone()))?.unbind();
    Ok(Bound::new(py, Call::started(future, Some(coop)))?.into_any())
}

fn cooperation() -> (Arc<Coop>, Cancel) {
    let (tx, rx) = oneshot::channel();
    (Arc::new(Coop { cancel: Mutex::new(Some(tx)), ending: Mutex::new(Ending::Running) }), Cancel(rx))
}

/// Starts, when called (for [`Call::deferred`]), a call that ends itself when given its
/// [`Cancel`] (see [`into_asyncio_cancellable`]).
pub(crate) fn start_cancellable<F, T>(make: impl FnOnce(Cancel) -> F + Send + 'static) -> Start
where
    F: Future<Output = Result<T, Error>> + Send + 'static,
    T: for<'a> IntoPyObject<'a> + Send + 'static,
{
    Box::new(move |py| {
        let (coop, cancel) = cooperation();
        Ok((into_future(py, make(cancel), Some(coop.clone()))?, Some(coop)))
    })
}

/// Starts a deferred call on the loop thread: its asyncio future (and, if cancellable, what
/// its coroutine shares with it).
pub(crate) type Start = Box<dyn for<'py> FnOnce(Python<'py>) -> PyResult<(Bound<'py, PyAny>, Option<Arc<Coop>>)> + Send>;

/// Where a [`Call`] stands.
pub(crate) enum State {
    NotStarted(Start),
    /// The asyncio future, its `__await__` iterator once awaited, and a cancellable call's
    /// [`Coop`].
    Started(Py<PyAny>, Option<Py<PyAny>>, Option<Arc<Coop>>),
    /// A cancellable call thrown into (cancelled): awaiting its end (the iterator of the future
    /// [`Coop::ended`] resolves) before raising what was thrown where it waited.
    Ending { wait: Py<PyAny>, thrown: Thrown },
    /// Closed or thrown into before it started: it never will.
    Closed,
}

/// What `throw` was given, and the call's future's iterator to raise it from.
pub(crate) struct Thrown {
    it: Py<PyAny>,
    args: Py<PyAny>,
}

/// A coroutine over an asyncio future: awaiting it is awaiting the future.
#[pyclass(frozen, subclass, module = "lockgate._lockgate")]
pub struct Call(Mutex<State>);

impl Call {
    fn started(future: Py<PyAny>, coop: Option<Arc<Coop>>) -> Self {
        Call(Mutex::new(State::Started(future, None, coop)))
    }

    /// A call that starts when first awaited (`send`).
    pub(crate) fn deferred(start: Start) -> Self {
        Call(Mutex::new(State::NotStarted(start)))
    }

    /// The future's `__await__` iterator, starting the call first if needed.
    fn iter<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let mut state = lock_mutex(&self.0);
        if let State::NotStarted(_) = &*state {
            let State::NotStarted(start) = std::mem::replace(&mut *state, State::Closed) else { unreachable!() };
            let (future, coop) = start(py)?;
            *state = State::Started(future.unbind(), None, coop);
        }
        match &mut *state {
            State::Started(_, Some(it), _) => Ok(it.bind(py).clone()),
            State::Started(fut, slot, _) => {
                let it = fut.bind(py).call_method0(intern!(py, "__await__"))?;
                *slot = Some(it.clone().unbind());
                Ok(it)
            }
            _ => Err(PyRuntimeError::new_err("cannot reuse already awaited coroutine")),
        }
    }

    /// A cancellable call thrown into while its task runs: cancels it and awaits its end (the
    /// first value of the awaited future's iterator), moving to [`State::Ending`]. `None` for
    /// any other call, or one whose task already ended.
    fn await_end<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Option<PyResult<Bound<'py, PyAny>>>> {
        let (fut, coop) = match &*lock_mutex(&self.0) {
            State::Started(fut, _, Some(coop)) => (fut.clone_ref(py), coop.clone()),
            _ => return Ok(None),
        };
        let event_loop = running_loop(py)?;
        let wait = event_loop.call_method0(intern!(py, "create_future"))?;
        {
            let mut ending = lock_mutex(&coop.ending);
            if !matches!(*ending, Ending::Running) {
                return Ok(None);
            }
            *ending = Ending::Awaited(wait.clone().unbind(), waker_for(py, &event_loop)?);
        }
        coop.fire();
        let it = self.iter(py)?;
        fut.bind(py).call_method0(intern!(py, "cancel"))?;
        let wait_it = wait.call_method0(intern!(py, "__await__"))?;
        *lock_mutex(&self.0) = State::Ending { wait: wait_it.clone().unbind(), thrown: Thrown { it: it.unbind(), args: args.clone().into_any().unbind() } };
        Ok(Some(wait_it.call_method1(intern!(py, "send"), (py.None(),))))
    }

    /// In [`State::Ending`]: the end's future again while it is pending, else what was thrown,
    /// raised where the call waited. `None` in any other state.
    fn resume_ending<'py>(&self, py: Python<'py>) -> Option<PyResult<Bound<'py, PyAny>>> {
        let (wait, it, args) = match &*lock_mutex(&self.0) {
            State::Ending { wait, thrown } => (wait.clone_ref(py), thrown.it.clone_ref(py), thrown.args.clone_ref(py)),
            _ => return None,
        };
        // A pending future yields itself again; a resolved (or cancelled: a second cancel
        // stops the waiting) one ends the iterator.
        if let Ok(pending) = wait.bind(py).call_method1(intern!(py, "send"), (py.None(),)) {
            return Some(Ok(pending));
        }
        Some(it.bind(py).call_method1(intern!(py, "throw"), args.bind(py).cast::<PyTuple>().ok()?.clone()))
    }

    /// Abandons the call (its task is aborted; a result already there is dropped). `false` if
    /// it had not started: then it never will.
    fn abandon(&self, py: Python<'_>) -> PyResult<bool> {
        let mut state = lock_mutex(&self.0);
        match &*state {
            State::Started(fut, _, _) => fut.bind(py).call_method0(intern!(py, "cancel")).map(|_| true),
            State::Ending { .. } => Ok(true),
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
        self.send(py, py.None().into_bound(py))
    }

    /// Resumes the awaiting (``coroutine.send``), starting the call first if needed.
    #[pyo3(signature = (value, /))]
    fn send<'py>(&self, py: Python<'py>, value: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        if let Some(r) = self.resume_ending(py) {
            return r;
        }
        self.iter(py)?.call_method1(intern!(py, "send"), (value,))
    }

    /// ``coroutine.throw``: abandons the call and raises the exception where it waited (a
    /// cancellable call once it ended).
    #[pyo3(signature = (typ, val=None, tb=None, /))]
    fn throw<'py>(
        &self,
        py: Python<'py>,
        typ: Bound<'py, PyAny>,
        val: Option<Bound<'py, PyAny>>,
        tb: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let args = match (val, tb) {
            (None, None) => PyTuple::new(py, [typ.clone()])?,
            (val, None) => PyTuple::new(py, [typ.clone(), val.into_bound_py_any(py)?])?,
            (val, tb) => PyTuple::new(py, [typ.clone(), val.into_bound_py_any(py)?, tb.into_bound_py_any(py)?])?,
        };
        if let Some(r) = self.resume_ending(py) {
            return r; // thrown into again while ending: the first exception is raised
        }
        if let Some(wait) = self.await_end(py, &args)? {
            return wait;
        }
        if self.abandon(py)? {
            return self.iter(py)?.call_method1(intern!(py, "throw"), args);
        }
        let (typ, val) = (args.get_item(0)?, args.get_item(1).ok());
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
