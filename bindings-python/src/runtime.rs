//! The process's one tokio runtime, and how a sync call (the `lockgate` classes) runs on it:
//! [`block_on`] (an asyncio call runs through `loop_bridge`).
//!
//! The runtime is per *process*: a child made by `fork()` inherits the parent's memory but not
//! its threads, so it gets a fresh runtime on first use, and handles created before the fork
//! refuse to work there (`CLOSED`) instead of hanging.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use lockgate_core::{Error, ErrorKind};
use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors::to_py;

/// How often a blocked sync call wakes up to let Python run signal handlers (Ctrl-C).
const SIGNAL_SLICE: Duration = Duration::from_millis(50);

/// Period of a timer that keeps the runtime's next wake-up at most this far away: with only
/// the watchdog's far timers pending, every request's nearer timer made tokio wake its thread
/// through the eventfd (1.5 extra system calls per call, seen with `perf`). Measured: ~2-3%
/// more asyncio pairs/s and 14% fewer system calls per call, for one wake-up per second.
const TIMER_ANCHOR: Duration = Duration::from_secs(1);

/// How long a sync call yields its core (`sched_yield`) before it parks when the answer is not
/// there at once: a loopback round trip usually ends within it, and a runnable thread resumes
/// sooner than one woken from a futex on a busy machine. Measured on the 2 shared cores
/// (acquire+release pairs/s, median of 5): parking at once ~6.5k, yielding 100 us ~10.8k.
const YIELD_BEFORE_PARK: Duration = Duration::from_micros(100);

static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

pub(crate) use crate::process::{lock_mutex, pid};

/// This process's runtime, created on first use (and again in a forked child).
pub(crate) fn runtime() -> &'static Runtime {
    let pid = pid();
    let mut slot = lock_mutex(&RUNTIME);
    match *slot {
        Some((owner, rt)) if owner == pid => rt,
        _ => {
            // A runtime inherited through fork() has no threads: leaked, never dropped (dropping
            // would wait for workers that do not exist here). One worker: a client's driver and
            // its connection then share a thread, which saves a cross-thread wake per round
            // trip (measured ~1.4x the sync rate of two workers on 2 cores).
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("lockgate-runtime")
                .enable_all()
                .build()
                .expect("lockgate could not start its tokio runtime (out of threads?)");
            let rt: &'static Runtime = Box::leak(Box::new(rt));
            rt.spawn(async {
                loop {
                    tokio::time::sleep(TIMER_ANCHOR).await;
                }
            });
            *slot = Some((pid, rt));
            rt
        }
    }
}

/// The process a handle was created in; checked before every use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Process(u32);

impl Process {
    pub(crate) fn current() -> Self {
        Process(pid())
    }

    pub(crate) fn check(self) -> Result<(), Error> {
        if self.0 == pid() {
            return Ok(());
        }
        let msg =
            "this client was created in another process (before a fork); create a new lockgate.Client in each process";
        Err(Error::new(ErrorKind::Closed, msg))
    }
}

/// Wakes the Python thread waiting in [`block_on`].
struct ThreadWaker {
    thread: std::thread::Thread,
    woken: AtomicBool,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Runs `fut` to completion for a sync call, without the GIL, waking every [`SIGNAL_SLICE`] to
/// run Python's signal handlers; if one raises (Ctrl-C), `fut` is dropped, which cancels the
/// operation in the core (a wait is removed from the server). The future is polled on the
/// calling thread (inside the runtime's context, so timers and I/O work), with no timer armed
/// per call: the thread yields for up to [`YIELD_BEFORE_PARK`], then parks in slices.
pub(crate) fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send,
    T: Send,
{
    let rt = runtime();
    let mut fut = std::pin::pin!(fut);
    let thread_waker = Arc::new(ThreadWaker { thread: std::thread::current(), woken: AtomicBool::new(false) });
    let waker = Waker::from(thread_waker.clone());
    let mut yielded = false;
    // This thread drains the telemetry queue while the call lasts (the flusher leaves it).
    let _in_call = crate::telemetry::InCall::start();
    loop {
        let slice = py.detach(|| {
            let _context = rt.enter();
            let mut cx = Context::from_waker(&waker);
            let mut slice_end: Option<Instant> = None;
            loop {
                thread_waker.woken.store(false, Ordering::Relaxed);
                if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                    return Some(out);
                }
                let mut now = Instant::now();
                if !yielded {
                    yielded = true;
                    let stop = now + YIELD_BEFORE_PARK;
                    while !thread_waker.woken.load(Ordering::Acquire) && now < stop {
                        std::thread::yield_now();
                        now = Instant::now();
                    }
                    if thread_waker.woken.load(Ordering::Acquire) {
                        continue;
                    }
                }
                let end = *slice_end.get_or_insert(now + SIGNAL_SLICE);
                if now >= end {
                    return None;
                }
                // Wakes on the waker, at the slice's end, or spuriously: poll again either way.
                std::thread::park_timeout(end - now);
            }
        });
        // Holding the GIL again: hand on the telemetry the call raised (see `telemetry`).
        crate::telemetry::flush(py);
        match slice {
            Some(result) => return result.map_err(|e| to_py(py, e)),
            None => py.check_signals()?,
        }
    }
}
