//! How a foreign caller (a Python or JVM thread making a blocking call) runs the core: one
//! runtime per process with one worker ([`foreign_runtime`]), and the caller's own thread
//! polling the call's future in place ([`InPlace`]) instead of handing it to the runtime and
//! sleeping until a worker wakes it.
//!
//! Both choices save thread hops, which on a small machine cost more than the loopback round
//! trip itself (context switches: most of the runtime threads' CPU in a `perf` profile). Measured
//! on 2 shared cores with Python's sync calls: one worker ~1.4x the acquire+release pairs/s of
//! two; a caller that yields before it parks ~10.8k pairs/s against ~6.5k parking at once.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tokio::runtime::{Handle, Runtime};

/// How long a caller yields its core (`sched_yield`) before it parks, the first time its
/// answer is not there at once: a loopback round trip usually ends within it, and a runnable
/// thread resumes sooner than one woken from a futex on a busy machine.
const YIELD_BEFORE_PARK: Duration = Duration::from_micros(100);

/// Period of a timer that keeps the runtime's next wake-up at most this far away: with only
/// the watchdog's far timers pending, every request's nearer timer made tokio wake its thread
/// through the eventfd (1.5 extra system calls per call, seen with `perf`). Measured: ~2-3%
/// more asyncio pairs/s and 14% fewer system calls per call, for one wake-up per second.
const TIMER_ANCHOR: Duration = Duration::from_secs(1);

/// The runtime a binding drives its clients on: one worker named `thread_name` (a client's
/// driver and its connection then share a thread, which saves a cross-thread wake per round
/// trip), I/O and timers on, and the timer anchor running.
pub fn foreign_runtime(thread_name: &str) -> std::io::Result<Runtime> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).thread_name(thread_name).enable_all().build()?;
    rt.spawn(async {
        loop {
            tokio::time::sleep(TIMER_ANCHOR).await;
        }
    });
    Ok(rt)
}

/// Wakes the thread waiting in [`InPlace::wait`].
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

/// One blocking call's wait on the calling thread, possibly in several slices (a binding that
/// must look up between them: Python's signal handlers). Only the first slice yields before it
/// parks: a call still pending after that waits on something slower than a round trip.
pub struct InPlace {
    woken: Arc<ThreadWaker>,
    waker: Waker,
    yielded: bool,
}

impl Default for InPlace {
    fn default() -> Self {
        let woken = Arc::new(ThreadWaker { thread: std::thread::current(), woken: AtomicBool::new(false) });
        InPlace { waker: Waker::from(Arc::clone(&woken)), woken, yielded: false }
    }
}

impl InPlace {
    /// A wait for the calling thread (which must be the one that calls [`Self::wait`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Polls `fut` on this thread inside `rt`'s context (so its timers and I/O work) until it is
    /// ready, or until `until` passes (`None`). No timer is armed for `until`: the thread parks
    /// with a timeout, and wakes on the future's waker, at `until`, or spuriously.
    pub fn wait<F: Future + ?Sized>(&mut self, rt: &Handle, mut fut: Pin<&mut F>, until: Option<Instant>) -> Option<F::Output> {
        let _context = rt.enter();
        let mut cx = Context::from_waker(&self.waker);
        loop {
            self.woken.woken.store(false, Ordering::Relaxed);
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return Some(out);
            }
            let mut now = Instant::now();
            if !self.yielded {
                self.yielded = true;
                let stop = now + YIELD_BEFORE_PARK;
                while !self.woken.woken.load(Ordering::Acquire) && now < stop {
                    std::thread::yield_now();
                    now = Instant::now();
                }
                if self.woken.woken.load(Ordering::Acquire) {
                    continue;
                }
            }
            match until {
                Some(end) if now >= end => return None,
                Some(end) => std::thread::park_timeout(end - now),
                None => std::thread::park(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_is_polled_in_place_until_ready_or_until_its_slice_ends() {
        let rt = foreign_runtime("in-place-test").unwrap();
        let mut ready = InPlace::new();
        let quick = std::pin::pin!(async { tokio::time::sleep(Duration::from_millis(5)).await; 7 });
        assert_eq!(ready.wait(rt.handle(), quick, None), Some(7));

        let mut slices = InPlace::new();
        let mut slow = std::pin::pin!(async { tokio::time::sleep(Duration::from_millis(300)).await });
        let started = Instant::now();
        assert_eq!(slices.wait(rt.handle(), slow.as_mut(), Some(started + Duration::from_millis(20))), None);
        assert!(started.elapsed() >= Duration::from_millis(20));
        assert_eq!(slices.wait(rt.handle(), slow.as_mut(), None), Some(()));
        assert!(started.elapsed() >= Duration::from_millis(300));
    }
}
