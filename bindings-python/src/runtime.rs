//! The process's one tokio runtime, and how a sync call (the `lockgate` classes) runs on it:
//! [`block_on`] (an asyncio call runs through `loop_bridge`).
//!
//! The runtime is per *process*: a child made by `fork()` inherits the parent's memory but not
//! its threads, so it gets a fresh runtime on first use, and handles created before the fork
//! refuse to work there (`CLOSED`) instead of hanging.

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lockgate_core::native::{foreign_runtime, InPlace};
use lockgate_core::{Error, ErrorKind};
use pyo3::prelude::*;
use tokio::runtime::Runtime;

use crate::errors::to_py;

/// How often a blocked sync call wakes up to let Python run signal handlers (Ctrl-C).
const SIGNAL_SLICE: Duration = Duration::from_millis(50);

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
            // would wait for workers that do not exist here).
            let rt = foreign_runtime("lockgate-runtime").expect("lockgate could not start its tokio runtime (out of threads?)");
            let rt: &'static Runtime = Box::leak(Box::new(rt));
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

/// Runs `fut` to completion for a sync call, without the GIL, waking every [`SIGNAL_SLICE`] to
/// run Python's signal handlers; if one raises (Ctrl-C), `fut` is dropped, which cancels the
/// operation in the core (a wait is removed from the server). The future is polled on the
/// calling thread (the core's [`InPlace`]: it yields for a moment, then parks in slices).
pub(crate) fn block_on<F, T>(py: Python<'_>, fut: F) -> PyResult<T>
where
    F: Future<Output = Result<T, Error>> + Send,
    T: Send,
{
    let rt = runtime();
    let mut fut = std::pin::pin!(fut);
    let mut in_place = InPlace::new();
    // This thread drains the telemetry queue while the call lasts (the flusher leaves it).
    let _in_call = crate::telemetry::InCall::start();
    loop {
        let slice = py.detach(|| in_place.wait(rt.handle(), fut.as_mut(), Some(Instant::now() + SIGNAL_SLICE)));
        // Holding the GIL again: hand on the telemetry the call raised (see `telemetry`).
        crate::telemetry::flush(py);
        match slice {
            Some(result) => return result.map_err(|e| to_py(py, e)),
            None => py.check_signals()?,
        }
    }
}
