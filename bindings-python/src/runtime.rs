//! The process's one tokio runtime, and the blocking bridge to it (the sync API); the asyncio
//! bridge is `loop_bridge`.
//!
//! The runtime is per *process*: a child made by `fork()` (multiprocessing's default on Linux)
//! inherits the parent's memory but not its threads, so it gets a fresh runtime on first use,
//! and handles created before the fork refuse to work there (`CLOSED`) instead of hanging.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use lockgate_core::{Error, ErrorKind};
use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors;

/// How often a blocked sync call wakes up to let Python run signal handlers (Ctrl-C).
const SIGNAL_SLICE: Duration = Duration::from_millis(50);

static RUNTIME: Mutex<Option<(u32, &'static Runtime)>> = Mutex::new(None);

/// This process's runtime, created on first use (and again in a forked child).
pub(crate) fn runtime() -> &'static Runtime {
    let pid = std::process::id();
    let mut slot = RUNTIME.lock().unwrap_or_else(|e| e.into_inner());
    match *slot {
        Some((owner, rt)) if owner == pid => rt,
        _ => {
            // A runtime inherited through fork() has no threads: leak it rather than drop it
            // (dropping would wait for workers that do not exist in this process).
            // One worker: a client's driver task and its connection's task then share a thread,
            // which saves a cross-thread wake per round trip (measured: ~1.4x the sync
            // acquire+release rate of two workers on 2 cores). Python code never runs there.
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("lockgate-runtime")
                .enable_all()
                .build()
                .expect("lockgate could not start its tokio runtime (out of threads?)");
            let rt: &'static Runtime = Box::leak(Box::new(rt));
            *slot = Some((pid, rt));
            rt
        }
    }
}

/// The process a handle was created in; checked before every use.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Owner(u32);

impl Owner {
    pub(crate) fn current() -> Self {
        Owner(std::process::id())
    }

    pub(crate) fn same(self, other: Owner) -> bool {
        self.0 == other.0
    }

    pub(crate) fn check(self) -> Result<(), Error> {
        if self.0 == std::process::id() {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::Closed,
                "this client was created in another process (before a fork); \
                 create a new lockgate.Client in each process",
            ))
        }
    }
}

/// Runs `fut` to completion for a sync call: without the GIL, waking every
/// [`SIGNAL_SLICE`] to run Python's signal handlers. If one raises (Ctrl-C), `fut` is dropped,
/// which cancels the operation in the core (a wait is removed from the server).
pub(crate) fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send,
    T: Send,
{
    let rt = runtime();
    let mut fut = std::pin::pin!(fut);
    loop {
        // The timer must be created inside the runtime, hence the async block.
        let slice = py.detach(|| {
            rt.block_on(async { tokio::time::timeout(SIGNAL_SLICE, fut.as_mut()).await })
        });
        match slice {
            Ok(result) => return result.map_err(|e| errors::to_py(py, e)),
            Err(_elapsed) => py.check_signals()?,
        }
    }
}

/// Spawns a task on the runtime (for background work such as loss callbacks).
pub(crate) fn spawn<F>(fut: F)
where
    F: Future<Output = ()> + Send + 'static,
{
    runtime().spawn(fut);
}
