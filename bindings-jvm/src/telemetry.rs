//! The core's telemetry events handed to the JVM, which logs them through SLF4J (logger
//! `lockgate`, `Slf4jTelemetry.java`): the core's text and level (losses, spells at risk,
//! expired sessions at WARN, the rest at DEBUG) and the attributes as key-value pairs.
//!
//! With metrics wanted ([`set_metrics_wanted`], by `LockgateMetrics.bindTo`, Micrometer), every
//! event crosses with its metric updates (the core's `Telemetry::metric_updates`: the same
//! instruments, attributes and values as every binding), which `LockgateMetrics` records.
//!
//! What is fixed crosses once: an event crosses as its shape's number (its kind, backend and
//! primitive) with its values, an update as its series' number (its instrument and attributes)
//! with its value; the JVM asks what a number means the first time it sees it
//! ([`telemetry_shape`], [`metric_series`]).
//!
//! The client's driver never crosses into the JVM itself: a crossing waits for whatever the JVM
//! is doing (a GC pause, an appender that blocks on a full disk or a slow socket), and a driver
//! that waits renews no lease. It queues the core's events that the logger (or the metrics)
//! wants for one relay thread per process ([`relay`]), which converts them and makes the
//! crossings in order, a batch at a time ([`relay_loop`]): WARN events always, DEBUG ones only
//! if the logger was seen enabled for DEBUG at the last check, made by the relay at most once
//! per [`RECHECK`] (a level changed takes effect within about that, and each new client asks at
//! once, on the thread that connects it). A client's `shutdown` waits,
//! [`CLOSE_WAIT`] at most, until what it queued has been handed to the JVM.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use lockgate_core::engine::numbering::{Series, SeriesTable, Shapes};
use lockgate_core::engine::{Measure, Telemetry};

use crate::{NativeClient, NativeOptionValue, NativeResult};

/// How long whether the logger wants DEBUG records is trusted without asking it again.
const RECHECK: Duration = Duration::from_secs(1);

/// One telemetry event as the JVM logs it (README "Telemetry"): its shape by number (what
/// happened, on which backend and primitive: [`telemetry_shape`] describes it), and what varies.
/// The JVM asks what a number means once, so an event crosses without its fixed strings.
#[derive(Clone, Debug, uniffi::Record)]
pub struct TelemetryEvent {
    /// Its shape's number (see [`telemetry_shape`]).
    pub shape: i32,
    /// The lock's name, only with the client option `telemetryLockNames`.
    pub lock: Option<String>,
    /// The core's measurements, in the order of the shape's keys (`wait_s`, `held_s` in seconds
    /// as `Real`, `queued` as `Flag`, `reason`, `code` as `Text`).
    pub values: Vec<NativeOptionValue>,
    /// What the event adds to the metrics (empty unless metrics are wanted).
    pub metrics: Vec<MetricUpdate>,
}

/// What every event of one shape has in common.
#[derive(Clone, Debug, uniffi::Record)]
pub struct TelemetryShape {
    /// The stable name (`acquire.granted`, `lease.lost`, ...).
    pub event: String,
    /// The core's one-line text.
    pub message: String,
    /// Whether it is logged at WARN.
    pub warning: bool,
    /// The backend's URL scheme.
    pub backend: String,
    /// The primitive (`mutex`, ...), if the event concerns a lock.
    pub primitive: Option<String>,
    /// The keys of its measurements, in the order of [`TelemetryEvent::values`].
    pub keys: Vec<String>,
}

fn shapes() -> &'static Mutex<Shapes> {
    static TABLE: OnceLock<Mutex<Shapes>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(Shapes::new()))
}

/// A number as the JVM holds it: -1 names nothing (the JVM then skips it).
fn jvm_number(id: Option<u32>) -> i32 {
    id.and_then(|id| i32::try_from(id).ok()).unwrap_or(-1)
}

/// What events of shape `id` have in common (`None`: no shape has that number). The JVM asks
/// once per shape.
#[uniffi::export]
pub fn telemetry_shape(id: i32) -> Option<TelemetryShape> {
    let table = shapes().lock().unwrap_or_else(|e| e.into_inner());
    let shape = table.get(u32::try_from(id).ok()?)?;
    let kind = shape.kind();
    Some(TelemetryShape {
        event: kind.name.to_string(),
        message: kind.summary.to_string(),
        warning: kind.warning,
        backend: shape.backend.to_string(),
        primitive: shape.primitive.map(str::to_string),
        keys: kind.measures.iter().map(|k| k.to_string()).collect(),
    })
}

/// One value for one metric series (README "Telemetry"): the series by its number
/// ([`metric_series`] describes it), so an update crosses into the JVM as two numbers instead of
/// its instrument's four strings and its attributes' map.
#[derive(Clone, Debug, uniffi::Record)]
pub struct MetricUpdate {
    /// The series' number (see [`metric_series`]).
    pub series: i32,
    /// A histogram's sample, a counter's increment, an up-down counter's change.
    pub value: f64,
}

/// One metric series: one of the core's instruments with one set of attributes.
#[derive(Clone, Debug, uniffi::Record)]
pub struct MetricSeries {
    /// The instrument's name (`lockgate.lock.wait.duration`).
    pub instrument: String,
    /// `histogram`, `counter` or `up_down_counter`.
    pub kind: String,
    /// Its unit (`s`, `1`).
    pub unit: String,
    /// What it measures.
    pub description: String,
    /// Its attributes (`lockgate.backend`, `lockgate.outcome`, ...).
    pub attributes: HashMap<String, String>,
}

fn series_table() -> &'static Mutex<SeriesTable> {
    static TABLE: OnceLock<Mutex<SeriesTable>> = OnceLock::new();
    TABLE.get_or_init(|| Mutex::new(SeriesTable::new()))
}

/// What series `id` is (`None`: no series has that number). The JVM asks once per series.
#[uniffi::export]
pub fn metric_series(id: i32) -> Option<MetricSeries> {
    let table = series_table().lock().unwrap_or_else(|e| e.into_inner());
    let Series { instrument, attributes } = table.get(u32::try_from(id).ok()?)?;
    Some(MetricSeries {
        instrument: instrument.name.to_string(),
        kind: instrument.kind.name().to_string(),
        unit: instrument.unit.to_string(),
        description: instrument.description.to_string(),
        attributes: attributes.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
    })
}

/// Whether events cross with their metric updates (any client's; set once metrics are bound).
static METRICS_WANTED: AtomicBool = AtomicBool::new(false);

/// Makes every client's events cross into the JVM with their metric updates (`true`), or only
/// those the logger wants without them (`false`).
#[uniffi::export]
pub fn set_metrics_wanted(on: bool) {
    METRICS_WANTED.store(on, Ordering::Relaxed);
}

fn metric_updates(t: &Telemetry) -> Vec<MetricUpdate> {
    let measured = t.measured();
    if measured.is_empty() {
        return Vec::new();
    }
    let mut table = series_table().lock().unwrap_or_else(|e| e.into_inner());
    measured.iter().map(|m| MetricUpdate { series: jvm_number(table.number(t, m)), value: m.value }).collect()
}

/// What takes a client's events on the JVM (implemented there).
#[uniffi::export(with_foreign)]
pub trait TelemetrySink: Send + Sync {
    /// Whether DEBUG events are wanted now.
    fn debug_enabled(&self) -> bool;
    /// Logs these events, in order; must return quickly and never throw. `dropped`: how many
    /// events were dropped since the last batch because the relay's queue was full (the JVM took
    /// none for a while), which the JVM tells at WARN before this batch's events.
    fn record_batch(&self, events: Vec<TelemetryEvent>, dropped: i64);
}

/// Whether DEBUG was wanted at the last check, and when that was (ms after [`since`]; 0: never).
struct DebugCheck {
    on: AtomicBool,
    checked_ms: AtomicU64,
    /// A check is queued for the relay.
    asked: AtomicBool,
}

fn since() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl DebugCheck {
    /// The last check's answer; a stale one asks the relay to check again (once at a time).
    fn wanted(self: &Arc<Self>, sink: &Arc<dyn TelemetrySink>) -> bool {
        let now = since().elapsed().as_millis() as u64 + 1;
        let checked = self.checked_ms.load(Ordering::Relaxed);
        if now.saturating_sub(checked) >= RECHECK.as_millis() as u64 && !self.asked.swap(true, Ordering::AcqRel) {
            relay_send(Relayed::Check(Arc::clone(sink), Arc::clone(self)));
        }
        self.on.load(Ordering::Relaxed)
    }

    /// Asks the logger (a crossing into the JVM: never on the driver).
    fn check(&self, sink: &dyn TelemetrySink) {
        self.on.store(sink.debug_enabled(), Ordering::Relaxed);
        self.checked_ms.store(since().elapsed().as_millis() as u64 + 1, Ordering::Relaxed);
        self.asked.store(false, Ordering::Release);
    }
}

/// What the relay thread does, in the order it was asked.
enum Relayed {
    /// Hand an event to the JVM (converted on the relay's thread: no work of the driver's).
    Record(Arc<dyn TelemetrySink>, Telemetry),
    /// Ask the logger whether it wants DEBUG events now.
    Check(Arc<dyn TelemetrySink>, Arc<DebugCheck>),
    /// Say that everything queued before has been handed on.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

/// Events queued for the JVM past which new ones are dropped: memory stays bounded while the
/// JVM takes none (an appender blocked for good), and the driver never waits. How many were
/// dropped is counted ([`DROPPED`]) and told with the next batch.
const RELAY_AT_MOST: usize = 65_536;

/// Events dropped (the relay's queue full) since a batch last told how many.
static DROPPED: AtomicU64 = AtomicU64::new(0);

/// How long a client's `shutdown` waits for its events to be handed to the JVM.
pub(crate) const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// How long the relay, woken by a job, sleeps before taking what is queued: events queued
/// meanwhile wake no thread and cross together (one wake-up and one crossing per batch instead
/// of per event), and a record reaches the JVM at most this much later.
const LINGER: Duration = Duration::from_millis(5);

/// Jobs the relay takes per wake-up at most (a batch crosses as one list).
const BATCH_AT_MOST: usize = 1024;

/// Consecutive events of one sink, crossing into the JVM as one list.
#[derive(Default)]
struct Batch {
    sink: Option<Arc<dyn TelemetrySink>>,
    events: Vec<TelemetryEvent>,
}

impl Batch {
    /// Adds `event` for `sink`; another sink's batch is handed on first (order is kept).
    fn push(&mut self, sink: Arc<dyn TelemetrySink>, event: TelemetryEvent) {
        if self.sink.as_ref().is_some_and(|s| !Arc::ptr_eq(s, &sink)) {
            self.hand_on();
        }
        self.sink.get_or_insert(sink);
        self.events.push(event);
    }

    /// Hands what is batched to its sink (a crossing into the JVM), with how many events were
    /// dropped before it.
    fn hand_on(&mut self) {
        if let Some(sink) = self.sink.take() {
            let dropped = DROPPED.swap(0, Ordering::AcqRel);
            sink.record_batch(std::mem::take(&mut self.events), i64::try_from(dropped).unwrap_or(i64::MAX));
        }
    }
}

/// The relay thread: each wake-up takes what is queued, in order, after [`LINGER`].
fn relay_loop(rx: Receiver<Relayed>) {
    while let Ok(first) = rx.recv() {
        std::thread::sleep(LINGER);
        let mut batch = Batch::default();
        let mut next = Some(first);
        let mut taken = 0;
        while let Some(job) = next.take() {
            match job {
                Relayed::Record(sink, t) => batch.push(sink, event_of(&t)),
                Relayed::Check(sink, check) => {
                    batch.hand_on();
                    check.check(sink.as_ref());
                }
                Relayed::Barrier(done) => {
                    batch.hand_on();
                    let _ = done.send(());
                }
            }
            taken += 1;
            if taken < BATCH_AT_MOST {
                next = rx.try_recv().ok();
            }
        }
        batch.hand_on();
    }
}

/// The relay thread's queue, started with the first client that has telemetry; `None` if no
/// thread could be started (then events are dropped: nothing may block the driver).
fn relay() -> Option<&'static SyncSender<Relayed>> {
    static RELAY: OnceLock<Option<SyncSender<Relayed>>> = OnceLock::new();
    RELAY
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Relayed>(RELAY_AT_MOST);
            let started = std::thread::Builder::new().name("lockgate-telemetry".into()).spawn(move || relay_loop(rx));
            started.ok().map(|_| tx)
        })
        .as_ref()
}

/// Queues `job` for the relay without waiting: a full queue drops it (an event is counted).
fn relay_send(job: Relayed) {
    if let Some(tx) = relay() {
        match tx.try_send(job) {
            Err(TrySendError::Full(Relayed::Check(_, check))) => {
                // Not asked after all: the next event asks again.
                check.asked.store(false, Ordering::Release);
            }
            Err(TrySendError::Full(Relayed::Record(..))) => {
                DROPPED.fetch_add(1, Ordering::AcqRel);
            }
            _ => {}
        }
    }
}

/// Waits, [`CLOSE_WAIT`] at most, until every event queued so far has been handed to the JVM.
pub(crate) async fn relayed() {
    let Some(tx) = relay() else { return };
    let (done, handed) = tokio::sync::oneshot::channel();
    if tx.try_send(Relayed::Barrier(done)).is_ok() {
        let _ = tokio::time::timeout(CLOSE_WAIT, handed).await;
    }
}

fn event_of(t: &Telemetry) -> TelemetryEvent {
    let values = t
        .what
        .measurements()
        .into_iter()
        .map(|(_, m)| match m {
            Measure::Seconds(d) => NativeOptionValue::Real { v: d.as_secs_f64() },
            Measure::Flag(b) => NativeOptionValue::Flag { v: b },
            Measure::Text(text) => NativeOptionValue::Text { v: text.to_string() },
            Measure::Count(n) => NativeOptionValue::Whole { v: i64::from(n) },
        })
        .collect();
    let shape = t.shape();
    TelemetryEvent {
        shape: jvm_number(shapes().lock().unwrap_or_else(|e| e.into_inner()).number(shape, || shape)),
        lock: t.name.as_deref().map(str::to_string),
        values,
        metrics: if METRICS_WANTED.load(Ordering::Relaxed) { metric_updates(t) } else { Vec::new() },
    }
}

#[uniffi::export]
impl NativeClient {
    /// Hands every telemetry event of this client that `sink` wants to it.
    pub fn on_telemetry(&self, sink: Arc<dyn TelemetrySink>) -> NativeResult<()> {
        let check = Arc::new(DebugCheck { on: AtomicBool::new(false), checked_ms: AtomicU64::new(0), asked: AtomicBool::new(false) });
        // On the JVM's thread that connects: a level set before the client holds from its first event.
        check.check(sink.as_ref());
        // Once the driver is idle (no caller's wait), queued as it is for the relay, which converts it.
        Ok(self.inner.on_telemetry_when_idle(Arc::new(move |t: &Telemetry| {
            if t.what.is_warning() || METRICS_WANTED.load(Ordering::Relaxed) || check.wanted(&sink) {
                relay_send(Relayed::Record(Arc::clone(&sink), t.clone()));
            }
        }))?)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Condvar;

    use lockgate_core::engine::Happened;

    use super::*;

    /// A sink whose first batch waits until it is let go: a JVM taking nothing for a while.
    #[derive(Default)]
    struct Stalled {
        /// (a batch is waiting, let go, events taken, dropped told)
        state: Mutex<(bool, bool, usize, i64)>,
        changed: Condvar,
    }

    impl TelemetrySink for Stalled {
        fn debug_enabled(&self) -> bool {
            true
        }

        fn record_batch(&self, events: Vec<TelemetryEvent>, dropped: i64) {
            let mut s = self.state.lock().unwrap();
            s.0 = true;
            s.2 += events.len();
            s.3 += dropped;
            self.changed.notify_all();
            while !s.1 {
                s = self.changed.wait(s).unwrap();
            }
        }
    }

    #[test]
    fn events_past_a_full_queue_are_dropped_counted_and_told_with_the_next_batch() {
        let stalled = Arc::new(Stalled::default());
        let sink: Arc<dyn TelemetrySink> = stalled.clone();
        let event = Telemetry { what: Happened::ConnectionLost, backend: "redis", primitive: None, name: None };
        let send = || relay_send(Relayed::Record(Arc::clone(&sink), event.clone()));
        send();
        let wait_for = |done: &dyn Fn(&(bool, bool, usize, i64)) -> bool| {
            let deadline = Instant::now() + Duration::from_secs(30);
            let mut s = stalled.state.lock().unwrap();
            while !done(&s) {
                assert!(Instant::now() < deadline, "the relay never got there: {:?}", *s);
                s = stalled.changed.wait_timeout(s, Duration::from_millis(50)).unwrap().0;
            }
        };
        // The relay holds the first batch in the JVM, and its queue is empty.
        wait_for(&|s| s.0);
        for _ in 0..RELAY_AT_MOST + 7 {
            send();
        }
        stalled.state.lock().unwrap().1 = true;
        stalled.changed.notify_all();
        // Everything queued reaches the sink, and the 7 events past the queue are told as dropped.
        wait_for(&|s| s.2 == 1 + RELAY_AT_MOST);
        wait_for(&|s| s.3 == 7);
        std::thread::sleep(LINGER * 4);
        assert_eq!(*stalled.state.lock().unwrap(), (true, true, 1 + RELAY_AT_MOST, 7));
        assert_eq!(DROPPED.load(Ordering::Acquire), 0);
    }
}
