//! The core's telemetry events as records of Python's standard `logging`: logger `lockgate`,
//! the core's text and level (losses, spells at risk, expired sessions at WARNING, the rest at
//! DEBUG), the attributes as `extra` fields prefixed `lockgate_` (`lockgate_event`,
//! `lockgate_backend`, `lockgate_primitive`, `lockgate_lock` when lock names are on, and the
//! event's measurements: `lockgate_wait_s`, `lockgate_queued`, `lockgate_held_s`,
//! `lockgate_reason`, `lockgate_code`). Quiet with no configuration apart from WARNING records,
//! which Python's last-resort handler prints; one line turns the rest on
//! (`logging.getLogger("lockgate").setLevel(logging.DEBUG)` with a handler).
//!
//! Runs on the client's driver task, where taking the GIL can wait for a Python thread (up to
//! its switch interval): so a DEBUG record is only made if the logger was seen enabled for
//! DEBUG at the last check, made at most once per [`RECHECK`] (a level changed takes effect
//! within it, and each new client checks at once); WARNING records always are. It gives up quietly while the interpreter shuts
//! down, and a failing handler never breaks a lock: its error is dropped.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use lockgate_core::engine::{Measure, Telemetry};
use lockgate_core::native::telemetry::Listener;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

/// `logging.DEBUG` and `logging.WARNING` (fixed by the standard library).
const DEBUG: u8 = 10;
const WARNING: u8 = 30;

/// How long whether the logger wants DEBUG records is trusted without asking it again.
const RECHECK: Duration = Duration::from_secs(1);

/// Whether `lockgate` was enabled for DEBUG at the last check, and when that was (ms after
/// [`since`]; 0: never).
static DEBUG_ON: AtomicBool = AtomicBool::new(false);
static CHECKED_MS: AtomicU64 = AtomicU64::new(0);

fn since() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// The listener a connected client hands its telemetry to.
pub(crate) fn to_logging() -> Listener {
    Arc::new(|t: &Telemetry| {
        if !t.what.is_warning() && !debug_wanted() {
            return;
        }
        Python::try_attach(|py| {
            let _ = log(py, t);
        });
    })
}

/// Whether DEBUG records may be wanted: the last check's answer, or a new check once it is
/// older than [`RECHECK`].
fn debug_wanted() -> bool {
    let now = since().elapsed().as_millis() as u64 + 1;
    let checked = CHECKED_MS.load(Ordering::Relaxed);
    if checked != 0 && now - checked < RECHECK.as_millis() as u64 {
        return DEBUG_ON.load(Ordering::Relaxed);
    }
    Python::try_attach(check_level).unwrap_or(false)
}

/// Asks the logger whether it wants DEBUG records now, and notes the answer (a new client
/// does, so a level set before it is made holds from its first event).
pub(crate) fn check_level(py: Python<'_>) -> bool {
    let on = logger(py).and_then(|l| l.call_method1("isEnabledFor", (DEBUG,))?.is_truthy()).unwrap_or(false);
    DEBUG_ON.store(on, Ordering::Relaxed);
    CHECKED_MS.store(since().elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
    on
}

fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    Ok(LOGGER
        .get_or_try_init(py, || py.import("logging")?.call_method1("getLogger", ("lockgate",)).map(Bound::unbind))?
        .bind(py))
}

fn log(py: Python<'_>, t: &Telemetry) -> PyResult<()> {
    let level = if t.what.is_warning() { WARNING } else { DEBUG };
    let logger = logger(py)?;
    if !logger.call_method1("isEnabledFor", (level,))?.is_truthy()? {
        return Ok(());
    }
    let extra = PyDict::new(py);
    extra.set_item("lockgate_event", t.what.name())?;
    extra.set_item("lockgate_backend", t.backend)?;
    extra.set_item("lockgate_primitive", t.primitive)?;
    if let Some(name) = &t.name {
        extra.set_item("lockgate_lock", name.as_ref())?;
    }
    for (key, m) in t.what.measurements() {
        let key = format!("lockgate_{key}");
        match m {
            Measure::Seconds(d) => extra.set_item(key, d.as_secs_f64())?,
            Measure::Flag(b) => extra.set_item(key, b)?,
            Measure::Text(text) => extra.set_item(key, text)?,
        }
    }
    let kwargs = PyDict::new(py);
    kwargs.set_item("extra", extra)?;
    logger.call_method("log", (level, t.what.summary()), Some(&kwargs))?;
    Ok(())
}
