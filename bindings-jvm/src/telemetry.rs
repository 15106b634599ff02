//! The core's telemetry events handed to the JVM, which logs them through SLF4J (logger
//! `lockgate`, `Slf4jTelemetry.java`): the core's text and level (losses, spells at risk,
//! expired sessions at WARN, the rest at DEBUG) and the attributes as key-value pairs.
//!
//! With metrics wanted ([`set_metrics_wanted`], by `LockgateMetrics.bindTo`, Micrometer), every
//! event crosses with its metric updates (the core's `Telemetry::metric_updates`: the same
//! instruments, attributes and values as every binding), which `LockgateMetrics` records.
//!
//! Called on the client's driver task, so a crossing into the JVM is made only for what the
//! logger (or the metrics) wants: WARN events always, DEBUG ones only if the logger was seen enabled for DEBUG
//! at the last check, made at most once per [`RECHECK`] (a level changed takes effect within
//! it, and each new client asks at once).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use lockgate_core::engine::metrics::InstrumentKind;
use lockgate_core::engine::{Measure, Telemetry};

use crate::{NativeClient, NativeOptionValue, NativeResult};

/// How long whether the logger wants DEBUG records is trusted without asking it again.
const RECHECK: Duration = Duration::from_secs(1);

/// One telemetry event as the JVM logs it (README "Telemetry").
#[derive(Clone, Debug, uniffi::Record)]
pub struct TelemetryEvent {
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
    /// The lock's name, only with the client option `telemetryLockNames`.
    pub lock: Option<String>,
    /// The core's measurements by key (`wait_s`, `held_s` in seconds as `Real`, `queued` as
    /// `Flag`, `reason`, `code` as `Text`).
    pub measurements: HashMap<String, NativeOptionValue>,
    /// What the event adds to the metrics (empty unless metrics are wanted).
    pub metrics: Vec<MetricUpdate>,
}

/// One value for one of the core's metric instruments (README "Telemetry").
#[derive(Clone, Debug, uniffi::Record)]
pub struct MetricUpdate {
    /// The instrument's name (`lockgate.lock.wait.duration`).
    pub instrument: String,
    /// `histogram`, `counter` or `up_down_counter`.
    pub kind: String,
    /// Its unit (`s`, `1`).
    pub unit: String,
    /// What it measures.
    pub description: String,
    /// A histogram's sample, a counter's increment, an up-down counter's change.
    pub value: f64,
    /// Its attributes (`lockgate.backend`, `lockgate.outcome`, ...).
    pub attributes: HashMap<String, String>,
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
    let kind = |k| match k {
        InstrumentKind::Histogram => "histogram",
        InstrumentKind::Counter => "counter",
        InstrumentKind::UpDownCounter => "up_down_counter",
    };
    t.metric_updates()
        .into_iter()
        .map(|u| MetricUpdate {
            instrument: u.instrument.name.to_string(),
            kind: kind(u.instrument.kind).to_string(),
            unit: u.instrument.unit.to_string(),
            description: u.instrument.description.to_string(),
            value: u.value,
            attributes: u.attributes.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        })
        .collect()
}

/// What takes a client's events on the JVM (implemented there).
#[uniffi::export(with_foreign)]
pub trait TelemetrySink: Send + Sync {
    /// Whether DEBUG events are wanted now.
    fn debug_enabled(&self) -> bool;
    /// Logs one event; must return quickly and never throw.
    fn record(&self, event: TelemetryEvent);
}

/// Whether DEBUG was wanted at the last check, and when that was (ms after [`since`]; 0: never).
struct DebugCheck {
    on: AtomicBool,
    checked_ms: AtomicU64,
}

fn since() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

impl DebugCheck {
    fn wanted(&self, sink: &dyn TelemetrySink) -> bool {
        let now = since().elapsed().as_millis() as u64 + 1;
        let checked = self.checked_ms.load(Ordering::Relaxed);
        if checked != 0 && now - checked < RECHECK.as_millis() as u64 {
            return self.on.load(Ordering::Relaxed);
        }
        let on = sink.debug_enabled();
        self.on.store(on, Ordering::Relaxed);
        self.checked_ms.store(now, Ordering::Relaxed);
        on
    }
}

fn event_of(t: &Telemetry) -> TelemetryEvent {
    let measurements = t
        .what
        .measurements()
        .into_iter()
        .map(|(key, m)| {
            let value = match m {
                Measure::Seconds(d) => NativeOptionValue::Real { v: d.as_secs_f64() },
                Measure::Flag(b) => NativeOptionValue::Flag { v: b },
                Measure::Text(text) => NativeOptionValue::Text { v: text.to_string() },
                Measure::Count(n) => NativeOptionValue::Whole { v: i64::from(n) },
            };
            (key.to_string(), value)
        })
        .collect();
    TelemetryEvent {
        event: t.what.name().to_string(),
        message: t.what.summary().to_string(),
        warning: t.what.is_warning(),
        backend: t.backend.to_string(),
        primitive: t.primitive.map(str::to_string),
        lock: t.name.as_deref().map(str::to_string),
        measurements,
        metrics: if METRICS_WANTED.load(Ordering::Relaxed) { metric_updates(t) } else { Vec::new() },
    }
}

#[uniffi::export]
impl NativeClient {
    /// Hands every telemetry event of this client that `sink` wants to it.
    pub fn on_telemetry(&self, sink: Arc<dyn TelemetrySink>) -> NativeResult<()> {
        let check = DebugCheck { on: AtomicBool::new(false), checked_ms: AtomicU64::new(0) };
        check.wanted(sink.as_ref());
        // Once the driver is idle: each event crosses into Java, which no caller should wait for.
        Ok(self.inner.on_telemetry_when_idle(Arc::new(move |t: &Telemetry| {
            if t.what.is_warning() || METRICS_WANTED.load(Ordering::Relaxed) || check.wanted(sink.as_ref()) {
                sink.record(event_of(t));
            }
        }))?)
    }
}
