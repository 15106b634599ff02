//! The core's telemetry events as records of Python's standard `logging`: logger `lockgate`,
//! the core's text and level (losses, spells at risk, expired sessions at WARNING, the rest at
//! DEBUG), the attributes as `extra` fields prefixed `lockgate_` (`lockgate_event`,
//! `lockgate_backend`, `lockgate_primitive`, `lockgate_lock` when lock names are on, and the
//! event's measurements: `lockgate_wait_s`, `lockgate_queued`, `lockgate_held_s`,
//! `lockgate_reason`, `lockgate_code`), made by the logger's `makeRecord` with no caller location
//! (see [`log`]). Quiet with no configuration apart from WARNING records,
//! which Python's last-resort handler prints; one line turns the rest on
//! (`logging.getLogger("lockgate").setLevel(logging.DEBUG)` with a handler).
//!
//! With a sink set ([`_set_telemetry_sink`], by `lockgate.otel.instrument()`), every event's
//! metric updates (the core's `Telemetry::metric_updates`: the same instruments, attributes and
//! values as every binding) reach OpenTelemetry: histogram samples and, for each acquire that
//! ended, its span (name, wall-clock start and end in ns, attributes, error code) are handed to
//! the sink as plain tuples, queued once the client's driver is idle ([`to_sink`]) and handed on
//! in one call per drain ([`Fed`]); counters and up-down counters are summed here ([`TOTALS`])
//! and read by the sink's observable instruments when the SDK collects ([`_metric_totals`]).
//! A record's or update's fixed strings and attribute maps are made once per event shape and
//! metric series (the core's numbering) and reused ([`Made`]).
//!
//! Events arrive on the client's driver task, which must not wait for the GIL: taking it there
//! made every call wait for the driver's logging, and the caller's thread for the driver
//! (Python with DEBUG records on ran at under half its speed). So the listeners only queue the
//! event ([`QUEUE`]); Python code runs when a thread that holds the GIL anyway drains the queue:
//! a sync call as it returns ([`flush`] from `runtime::block_on`), the event loop as it
//! resolves asyncio futures, and, for events raised while no sync call is in progress (a
//! renewal, a loss), the [`flusher`] thread after [`GRACE`]. One drainer at a time, so records keep their order.
//! A DEBUG event is only queued if the logger was seen enabled for DEBUG at the last check,
//! made at most once per [`RECHECK`] by a thread holding the GIL anyway, never the driver (a
//! level changed takes effect within about that, and each new client checks at once); WARNING
//! events always are. It gives up quietly while the
//! interpreter shuts down, and a failing handler never breaks a lock: its error is dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, OnceLock};
use std::time::{Duration, Instant};

use std::sync::RwLock;
use std::time::{SystemTime, UNIX_EPOCH};

use lockgate_core::engine::metrics::{InstrumentKind, Measured, INSTRUMENTS};
use lockgate_core::engine::numbering::{SeriesTable, Shape, Shapes};
use lockgate_core::engine::{Measure, Telemetry};
use lockgate_core::native::telemetry::Listener;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};

use crate::process::lock_mutex;

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

/// The listener a connected client hands its telemetry to as each event is raised: queues the
/// log records Python wants, so a sync call's records are made on its own thread, in order,
/// before it returns.
pub(crate) fn to_logging() -> Listener {
    Arc::new(|t: &Telemetry| {
        if t.what.is_warning() || debug_wanted() {
            queue(Pending { t: t.clone(), to: To::Log });
        }
    })
}

/// The listener a connected client hands its telemetry to once its driver is idle
/// (`Client::on_telemetry_when_idle`): with a sink set, works out the event's metric updates and
/// queues them with its span. Done on the driver as each event was raised, that made every call
/// wait for it (3 µs of an uncontended pair, measured); once idle, the driver does it while the
/// caller goes on. The samples and span reach the sink as a call returns or from the
/// [`flusher`], as a record does, and the counts are added to [`TOTALS`] then too, so a
/// collection sees an event's counts and samples both or neither.
pub(crate) fn to_sink() -> Listener {
    Arc::new(|t: &Telemetry| {
        if !SINK_ON.load(Ordering::Relaxed) {
            return;
        }
        // Every event the sink records has updates (an ended acquire counts its outcome).
        let measured = t.measured();
        if measured.is_empty() {
            return;
        }
        let sink = SINK_SET.load(Ordering::Acquire);
        queue(Pending { t: t.clone(), to: To::Sink { sink, at_ns: wall_ns(), measured } });
    })
}

/// Queues `p` for a thread holding the GIL, waking the [`flusher`] if the queue was empty.
fn queue(p: Pending) {
    let was_empty = {
        let mut queue = lock_mutex(&QUEUE);
        queue.push_back(p);
        queue.len() == 1
    };
    QUEUED.store(true, Ordering::SeqCst);
    if was_empty {
        poke_flusher();
    }
}

/// Events waiting for a thread holding the GIL, oldest first; [`QUEUED`] says it may hold one
/// (read without a lock by every sync call as it returns).
static QUEUE: Mutex<VecDeque<Pending>> = Mutex::new(VecDeque::new());

/// One queued event and what it is queued for.
struct Pending {
    t: Telemetry,
    to: To,
}

/// A log record, or the sink's share of an event: the sink it was raised for ([`SINK_SET`]),
/// when it was queued (wall clock, ns: an ended acquire's span end) and its metric updates (all
/// static: the strings are the [`Made`] ones).
enum To {
    Log,
    Sink { sink: u64, at_ns: u64, measured: Vec<Measured> },
}
static QUEUED: AtomicBool = AtomicBool::new(false);
/// Held by the one thread handing queued events to Python.
static DRAINING: Mutex<()> = Mutex::new(());

/// How long an event may wait for a call to return before the [`flusher`] takes the GIL to
/// hand it on: long enough that a call in progress usually returns first, short enough that
/// a loss's WARNING record is prompt.
const GRACE: Duration = Duration::from_millis(20);

/// Sync calls in progress (`runtime::block_on`): each drains the queue itself.
static CALLS: AtomicUsize = AtomicUsize::new(0);

/// Counts a sync call in progress while it lives (see [`Flusher::run`]).
pub(crate) struct InCall(());

impl InCall {
    /// A sync call starts.
    pub(crate) fn start() -> InCall {
        CALLS.fetch_add(1, Ordering::AcqRel);
        InCall(())
    }
}

impl Drop for InCall {
    fn drop(&mut self) {
        CALLS.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Hands every queued event to `logging` and the sink, on this thread (which holds the GIL).
/// Returns at once if another thread is doing it: it empties the queue, in order.
pub(crate) fn flush(py: Python<'_>) {
    check_level_if_due(py);
    if !QUEUED.load(Ordering::Acquire) {
        return;
    }
    let Ok(_draining) = DRAINING.try_lock() else {
        return;
    };
    loop {
        let batch = {
            let mut queue = lock_mutex(&QUEUE);
            QUEUED.store(false, Ordering::Release);
            std::mem::take(&mut *queue)
        };
        if batch.is_empty() {
            return;
        }
        let mut fed = Fed::default();
        let mut levels = Levels::default();
        for pending in batch {
            hand_on(py, pending, &mut fed, &mut levels);
        }
        let _ = fed.hand_to_sink(py);
    }
}

/// One queued event to the logger (if it is wanted at its level) or, gathered in `fed`, the
/// sink (if one is set).
fn hand_on(py: Python<'_>, p: Pending, fed: &mut Fed, levels: &mut Levels) {
    match p.to {
        To::Log if p.t.what.is_warning() || DEBUG_ON.load(Ordering::Relaxed) => {
            let _ = log(py, &p.t, levels);
        }
        // An event raised for an earlier sink is not this one's (its counts start at zero).
        To::Sink { sink, at_ns, measured } if SINK_ON.load(Ordering::Relaxed) && sink == SINK_SET.load(Ordering::Acquire) => {
            let _ = fed.gather(py, &p.t, at_ns, &measured);
        }
        _ => {}
    }
}

/// Now, in ns since the Unix epoch (OpenTelemetry's span times).
fn wall_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// Each counter's and up-down counter's total since the sink was set, by series number (`None`:
/// not updated since), with its instrument's name and attributes: summed as the events are
/// handed on, read by the sink's observable instruments when its SDK collects (one Python call
/// per collection instead of one per change). Held only briefly, never while Python code runs.
type Total = (&'static str, f64, Py<PyDict>);
static TOTALS: Mutex<Vec<Option<Total>>> = Mutex::new(Vec::new());

/// Every counter's and up-down counter's total since the sink was set, as `(instrument, total,
/// attributes)`: what the sink's observable instruments report.
#[pyfunction]
pub(crate) fn _metric_totals(py: Python<'_>) -> Vec<(&'static str, f64, Bound<'_, PyDict>)> {
    let totals: Vec<Total> = lock_mutex(&TOTALS).iter().flatten().map(|(name, total, d)| (*name, *total, d.clone_ref(py))).collect();
    totals.into_iter().map(|(name, total, d)| (name, total, d.into_bound(py))).collect()
}

/// The process whose [`flusher`] is awake (in its grace sleeps, where it sees anything queued
/// meanwhile by itself), or 0 while it waits to be poked. A poke costs a lock and a wake-up: on
/// every event a pair raises they were a measurable share of the pair, so only a flusher that
/// waits is poked (another process's, i.e. a forked child's, is never its own).
static FLUSHER_AWAKE: AtomicU32 = AtomicU32::new(0);

/// Tells the flusher something may be due (an event queued, a level check asked for) unless it
/// is awake and will see it. Pairs with the flusher's check before it waits: the caller set
/// [`QUEUED`] or [`RECHECK_DUE`] first, and the flusher marks itself waiting before it reads
/// them, so one of the two sees the other (all `SeqCst`).
fn poke_flusher() {
    if FLUSHER_AWAKE.load(Ordering::SeqCst) != crate::process::pid() {
        flusher().poke();
    }
}

/// The thread that hands on events no call's return drained within [`GRACE`]; one per
/// process (a child made by `fork()` starts its own).
struct Flusher {
    poked: Mutex<bool>,
    wake: Condvar,
}

impl Flusher {
    fn poke(&self) {
        *lock_mutex(&self.poked) = true;
        self.wake.notify_one();
    }

    fn run(&self) {
        loop {
            {
                let mut poked = lock_mutex(&self.poked);
                FLUSHER_AWAKE.store(0, Ordering::SeqCst);
                while !*poked && !QUEUED.load(Ordering::SeqCst) && !RECHECK_DUE.load(Ordering::SeqCst) {
                    poked = self.wake.wait(poked).unwrap_or_else(|e| e.into_inner());
                }
                *poked = false;
                FLUSHER_AWAKE.store(crate::process::pid(), Ordering::SeqCst);
            }
            // While a sync call is in progress its thread drains the queue (as it returns, and
            // at every signal slice of a long wait), so the records of a call slower than the
            // grace are still made on the caller's thread, in order; the flusher takes the
            // events raised when no call is.
            // The same goes for a level check the driver asked for (`debug_wanted`).
            loop {
                std::thread::sleep(GRACE);
                if !QUEUED.load(Ordering::Acquire) && !RECHECK_DUE.load(Ordering::Acquire) {
                    break;
                }
                if CALLS.load(Ordering::Acquire) == 0 {
                    Python::try_attach(flush);
                    break;
                }
            }
        }
    }
}

fn flusher() -> &'static Flusher {
    static FLUSHER: Mutex<Option<(u32, &'static Flusher)>> = Mutex::new(None);
    let pid = crate::process::pid();
    let mut slot = lock_mutex(&FLUSHER);
    match *slot {
        Some((of, f)) if of == pid => f,
        _ => {
            // Leaked on purpose: it lives as long as the process (a forked child's copy of a
            // parent's is never used again).
            let f: &'static Flusher = Box::leak(Box::new(Flusher { poked: Mutex::new(false), wake: Condvar::new() }));
            let started = std::thread::Builder::new().name("lockgate-telemetry".into()).spawn(move || f.run());
            if started.is_err() {
                // No thread: the queue is still drained as calls return.
                return f;
            }
            *slot = Some((pid, f));
            f
        }
    }
}

/// Hands on every event queued so far (`atexit`, tests): what a process ending at once would
/// otherwise not log.
#[pyfunction]
pub(crate) fn _flush_telemetry(py: Python<'_>) {
    flush(py);
}

/// The telemetry sink (`lockgate.otel`'s recorder), and whether one is set (read without a lock
/// on every event).
static SINK: RwLock<Option<Py<PyAny>>> = RwLock::new(None);
static SINK_ON: AtomicBool = AtomicBool::new(false);
/// How many times a sink was set or removed: what an event queued for the sink was raised under.
static SINK_SET: AtomicU64 = AtomicU64::new(0);

/// Sets (or, with `None`, removes) the callable every client's telemetry events are handed to
/// as `sink(samples, spans)`: `samples` a list of histogram samples `(instrument, value,
/// attributes)`, `spans` a list of `(name, start_ns, end_ns, attributes, error_code)`, one per
/// acquire that ended. The attribute dicts are shared from call to call: read, never change them.
#[pyfunction]
#[pyo3(signature = (sink, /))]
pub(crate) fn _set_telemetry_sink(sink: Option<Py<PyAny>>) {
    let on = sink.is_some();
    *SINK.write().unwrap_or_else(|e| e.into_inner()) = sink;
    SINK_SET.fetch_add(1, Ordering::AcqRel);
    // A new sink counts from now; a removed one's totals stay as they were (as a synchronous
    // counter's would, given nothing more).
    if on {
        lock_mutex(&TOTALS).clear();
    }
    SINK_ON.store(on, Ordering::Relaxed);
}

/// Every metric instrument, as `(name, kind, unit, description)` with kind `histogram`,
/// `counter` or `up_down_counter`: the core's list, for the sink to create them.
#[pyfunction]
pub(crate) fn _metric_instruments() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    INSTRUMENTS.iter().map(|i| (i.name, i.kind.name(), i.unit, i.description)).collect()
}

/// What one drain hands the sink, in one call: histogram samples as `(instrument, value,
/// attributes)`, ended acquires' spans as `(name, start_ns, end_ns, attributes, error_code)`.
#[derive(Default)]
struct Fed {
    samples: Vec<(Py<PyString>, f64, Py<PyDict>)>,
    spans: Vec<Span>,
}

/// An ended acquire's span: name, start and end (ns since the epoch), attributes, error code.
type Span = (Py<PyString>, u64, u64, Py<PyDict>, Option<&'static str>);

impl Fed {
    /// Adds `t`'s counts to [`TOTALS`], and its samples and span (if it ended an acquire) to
    /// what the sink gets.
    fn gather(&mut self, py: Python<'_>, t: &Telemetry, end: u64, measured: &[Measured]) -> PyResult<()> {
        let mut made = lock_mutex(&MADE);
        for m in measured {
            let Some(id) = made.series_table.number(t, m) else { continue };
            let Some((name, attributes)) = made.series(py, id)? else { continue };
            let attributes = attributes.clone_ref(py);
            if m.instrument.kind == InstrumentKind::Histogram {
                self.samples.push((name.clone_ref(py), m.value, attributes));
            } else {
                let mut totals = lock_mutex(&TOTALS);
                let at = id as usize;
                if totals.len() <= at {
                    totals.resize_with(at + 1, || None);
                }
                match &mut totals[at] {
                    Some((_, total, _)) => *total += m.value,
                    unset => *unset = Some((m.instrument.name, m.value, attributes)),
                }
            }
        }
        if let Some(ended) = t.ended_acquire() {
            let start = end.saturating_sub(ended.waited.as_nanos() as u64);
            let attributes = made.span_attributes(py, t, ended.outcome)?;
            self.spans.push((intern!(py, "lockgate.acquire").clone().unbind(), start, end, attributes, ended.error));
        }
        Ok(())
    }

    /// Calls the sink once with everything gathered (nothing: no call).
    fn hand_to_sink(self, py: Python<'_>) -> PyResult<()> {
        if self.samples.is_empty() && self.spans.is_empty() {
            return Ok(());
        }
        let Some(sink) = SINK.read().unwrap_or_else(|e| e.into_inner()).as_ref().map(|s| s.clone_ref(py)) else {
            return Ok(());
        };
        sink.bind(py).call1((self.samples, self.spans))?;
        Ok(())
    }
}

/// The Python objects made for telemetry's fixed parts, kept so that handing an event on makes
/// no string or map it made before: each event shape's record parts and each metric series'
/// instrument name and attributes (numbered by the core), each span's attributes. Only used while
/// the GIL is held, by the one thread handing events on ([`DRAINING`]), and never while Python
/// code runs (a sink or handler may call lockgate).
struct Made {
    shapes: Shapes,
    shape_parts: Vec<Option<ShapeParts>>,
    series_table: SeriesTable,
    series_objects: Vec<Option<(Py<PyString>, Py<PyDict>)>>,
    span_attributes: HashMap<SpanKey, Py<PyDict>>,
}

/// What a span's attributes depend on: the event's shape, lock name (opted in) and outcome.
type SpanKey = (Shape, Option<Arc<str>>, &'static str);

/// What every record of one event shape shares: its message, the `extra` fields the shape
/// fixes, and the `extra` keys of its measurements (`lockgate_wait_s`, ...).
struct ShapeParts {
    message: Py<PyString>,
    extra: Py<PyDict>,
    keys: Vec<Py<PyString>>,
}

static MADE: LazyLock<Mutex<Made>> = LazyLock::new(|| {
    Mutex::new(Made {
        shapes: Shapes::new(),
        shape_parts: Vec::new(),
        series_table: SeriesTable::new(),
        series_objects: Vec::new(),
        span_attributes: HashMap::new(),
    })
});

impl Made {
    /// Series `id`'s instrument name and attributes (made the first time).
    fn series(&mut self, py: Python<'_>, id: u32) -> PyResult<Option<&(Py<PyString>, Py<PyDict>)>> {
        let Some(series) = self.series_table.get(id) else { return Ok(None) };
        let at = id as usize;
        if self.series_objects.len() <= at {
            self.series_objects.resize_with(at + 1, || None);
        }
        if self.series_objects[at].is_none() {
            let name = PyString::new(py, series.instrument.name).unbind();
            self.series_objects[at] = Some((name, attributes(py, &series.attributes)?.unbind()));
        }
        Ok(self.series_objects[at].as_ref())
    }

    /// An ended acquire's span attributes: the event's and its outcome (made the first time).
    fn span_attributes(&mut self, py: Python<'_>, t: &Telemetry, outcome: &'static str) -> PyResult<Py<PyDict>> {
        let key = (t.shape(), t.name.clone(), outcome);
        if let Some(d) = self.span_attributes.get(&key) {
            return Ok(d.clone_ref(py));
        }
        let mut attrs = t.attributes();
        attrs.push(("lockgate.outcome", outcome.to_string()));
        let d = attributes(py, &attrs)?.unbind();
        self.span_attributes.insert(key, d.clone_ref(py));
        Ok(d)
    }

    /// The record parts of `t`'s shape (made the first time).
    fn shape_parts(&mut self, py: Python<'_>, t: &Telemetry) -> PyResult<Option<&ShapeParts>> {
        let shape = t.shape();
        let Some(id) = self.shapes.number(shape, || shape) else { return Ok(None) };
        let at = id as usize;
        if self.shape_parts.len() <= at {
            self.shape_parts.resize_with(at + 1, || None);
        }
        if self.shape_parts[at].is_none() {
            let kind = shape.kind();
            let extra = PyDict::new(py);
            extra.set_item("lockgate_event", kind.name)?;
            extra.set_item("lockgate_backend", shape.backend)?;
            extra.set_item("lockgate_primitive", shape.primitive)?;
            let keys = kind.measures.iter().map(|k| PyString::new(py, &format!("lockgate_{k}")).unbind()).collect();
            self.shape_parts[at] = Some(ShapeParts { message: PyString::new(py, kind.summary).unbind(), extra: extra.unbind(), keys });
        }
        Ok(self.shape_parts[at].as_ref())
    }
}

fn attributes<'py>(py: Python<'py>, pairs: &[(&'static str, String)]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in pairs {
        d.set_item(*k, v)?;
    }
    Ok(d)
}

/// Set once the last check is older than [`RECHECK`]: the next thread that holds the GIL anyway
/// (a sync call returning, the event loop, the [`flusher`]) asks the logger again.
static RECHECK_DUE: AtomicBool = AtomicBool::new(false);

/// Whether DEBUG records may be wanted: the last check's answer. Called on the driver, which
/// never takes the GIL: a thread holding it (a C extension, a long computation in one) would
/// stall the driver and its leases' renewals. A stale answer asks for a new check on a thread
/// that holds the GIL anyway, and is used until then.
fn debug_wanted() -> bool {
    let now = since().elapsed().as_millis() as u64 + 1;
    let checked = CHECKED_MS.load(Ordering::Relaxed);
    if (checked == 0 || now - checked >= RECHECK.as_millis() as u64) && !RECHECK_DUE.swap(true, Ordering::SeqCst) {
        poke_flusher();
    }
    DEBUG_ON.load(Ordering::Relaxed)
}

/// Asks the logger whether it wants DEBUG records now, and notes the answer (a new client
/// does, so a level set before it is made holds from its first event).
pub(crate) fn check_level(py: Python<'_>) -> bool {
    let on = logger(py).and_then(|l| l.call_method1("isEnabledFor", (DEBUG,))?.is_truthy()).unwrap_or(false);
    DEBUG_ON.store(on, Ordering::Relaxed);
    CHECKED_MS.store(since().elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
    RECHECK_DUE.store(false, Ordering::Release);
    on
}

/// The check [`debug_wanted`] asked for, if it is still due; on a thread holding the GIL.
fn check_level_if_due(py: Python<'_>) {
    if RECHECK_DUE.load(Ordering::Acquire) {
        check_level(py);
    }
}

fn logger(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static LOGGER: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    Ok(LOGGER
        .get_or_try_init(py, || py.import("logging")?.call_method1("getLogger", ("lockgate",)).map(Bound::unbind))?
        .bind(py))
}

/// Whether the logger is enabled for DEBUG and for WARNING, each asked at most once per drain
/// (one moment, as far as the application can tell) and only when a record at that level is due.
#[derive(Default)]
struct Levels {
    debug: Option<bool>,
    warning: Option<bool>,
}

impl Levels {
    fn enabled(&mut self, py: Python<'_>, logger: &Bound<'_, PyAny>, level: u8) -> PyResult<bool> {
        let known = if level == DEBUG { &mut self.debug } else { &mut self.warning };
        if let Some(on) = *known {
            return Ok(on);
        }
        let on = logger.call_method1(intern!(py, "isEnabledFor"), (level,))?.is_truthy()?;
        if level == DEBUG {
            // Fresher than the last check: the driver stops queueing DEBUG events at once.
            DEBUG_ON.store(on, Ordering::Relaxed);
        }
        *known = Some(on);
        Ok(on)
    }
}

/// Logs `t` as the logger's own `log` would, less the search for the calling frame: the record
/// is made by the logger's `makeRecord` (a custom logger class or record factory still applies)
/// and passed to its `handle` (`disabled`, filters, handlers, propagation). `findCaller`'s
/// walk up the Python stack was a quarter of each record's cost, and its answer meant little:
/// the events come from the core, and one may be handed on during a later call than the one
/// that raised it, or by the flusher thread with no Python frame at all. So every record has
/// the location Python gives when there is no caller: `(unknown file)`, line 0,
/// `(unknown function)`.
fn log(py: Python<'_>, t: &Telemetry, levels: &mut Levels) -> PyResult<()> {
    let level = if t.what.is_warning() { WARNING } else { DEBUG };
    let logger = logger(py)?;
    // The record is built only if DEBUG was on at the last check (or it is a WARNING), which is
    // the rule rather than the exception; the level is asked again here, once per drain.
    if !levels.enabled(py, logger, level)? {
        return Ok(());
    }
    let (message, extra, keys) = {
        let mut made = lock_mutex(&MADE);
        let Some(parts) = made.shape_parts(py, t)? else { return Ok(()) };
        let keys: Vec<_> = parts.keys.iter().map(|k| k.clone_ref(py)).collect();
        (parts.message.clone_ref(py), parts.extra.bind(py).copy()?, keys)
    };
    if let Some(name) = &t.name {
        extra.set_item(intern!(py, "lockgate_lock"), name.as_ref())?;
    }
    for (key, (_, m)) in keys.iter().zip(t.what.measurements()) {
        match m {
            Measure::Seconds(d) => extra.set_item(key, d.as_secs_f64())?,
            Measure::Flag(b) => extra.set_item(key, b)?,
            Measure::Text(text) => extra.set_item(key, text)?,
            Measure::Count(n) => extra.set_item(key, n)?,
        }
    }
    let record = logger.call_method1(
        intern!(py, "makeRecord"),
        (
            intern!(py, "lockgate"),
            level,
            intern!(py, "(unknown file)"),
            0,
            message,
            PyTuple::empty(py),
            py.None(),
            intern!(py, "(unknown function)"),
            extra,
        ),
    )?;
    logger.call_method1(intern!(py, "handle"), (record,))?;
    Ok(())
}
