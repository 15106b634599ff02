//! The native client's telemetry: the engine's [`Telemetry`] events handed to `tracing` (logs
//! and spans) and to the `metrics` facade. Nothing to configure and nothing printed until the
//! application installs a `tracing` subscriber or a `metrics` recorder.
//!
//! Why the `metrics` facade rather than the OpenTelemetry API: a library should emit through
//! the facade its users' applications already install, as it logs through `tracing` rather
//! than a logger of its own. In Rust that is `metrics` (the `log` of metrics): one small crate
//! with a stable API, and the application picks the exporter (Prometheus, StatsD, or
//! OpenTelemetry through `metrics-exporter-opentelemetry`). The OpenTelemetry Rust API still
//! breaks between minor releases and wants its SDK version in lockstep with the
//! application's, which a library dependency would impose on every user. Spans go through
//! `tracing`, which `tracing-opentelemetry` exports as OpenTelemetry spans.
//!
//! Logs: losses, spells at risk and session expiries at WARN (they matter with nothing set
//! up), everything else at DEBUG; target `lockgate`. An acquire is a span (`lockgate.acquire`,
//! a child of the caller's current span); its end (granted, timed out, ...) an event in it.
//! Metric names are in README "Telemetry".

use std::collections::HashMap;
use std::sync::Arc;

use metrics::Label;
use tracing::Span;

use crate::engine::metrics::{Attribute, InstrumentKind, INSTRUMENTS};
use crate::engine::{Happened, OpId, Telemetry};

// The instruments are defined once in the engine for every binding (`engine::metrics`, names in
// README "Telemetry"); their names stay here, where Rust users have found them.
use crate::engine::metrics as m;
/// Wait time of acquires that ended, by outcome (seconds).
pub const WAIT_DURATION: &str = m::WAIT_DURATION.name;
/// Hold time of leases that ended, released or lost (seconds).
pub const HOLD_DURATION: &str = m::HOLD_DURATION.name;
/// Acquires that ended, by outcome.
pub const ACQUISITIONS: &str = m::ACQUISITIONS.name;
/// Leases lost, by reason.
pub const LOSSES: &str = m::LOSSES.name;
/// Spells at risk begun.
pub const AT_RISK: &str = m::AT_RISK.name;
/// Renewals that did not go through, by error code.
pub const RENEWAL_FAILURES: &str = m::RENEWAL_FAILURES.name;
/// Connections to the session's server back after a loss.
pub const RECONNECTS: &str = m::RECONNECTS.name;
/// Leases held now.
pub const HELD: &str = m::HELD.name;
/// Acquires waiting now.
pub const WAITING: &str = m::WAITING.name;
/// Redlock rounds of votes decided, by call and outcome.
pub const REDLOCK_ROUNDS: &str = m::REDLOCK_ROUNDS.name;

/// Something else that takes every telemetry event of a client, after `tracing` and the
/// metrics (a binding's bridge to its ecosystem's logging: Python's `logging`). Called on the
/// client's driver task: it must return quickly and never block on the client.
pub type Listener = Arc<dyn Fn(&Telemetry) + Send + Sync>;

/// What the driver keeps for telemetry: the span of each acquire in progress, the caller's
/// span each was started under, and the listeners.
#[derive(Default)]
pub(crate) struct Sink {
    parents: HashMap<OpId, Span>,
    spans: HashMap<OpId, Span>,
    /// Called as each event is raised (`Client::on_telemetry`).
    listeners: Vec<Listener>,
    /// Called with `tracing` and the metrics, once the driver is idle
    /// (`Client::on_telemetry_when_idle`).
    idle_listeners: Vec<Listener>,
    /// Events not yet handed on: recorded once the driver has nothing else ready (see
    /// [`Sink::defer`]).
    deferred: Vec<Telemetry>,
}

/// Deferred events past which the driver records at once rather than wait to be idle: a
/// client kept busy for long still logs, with bounded memory.
const DEFER_AT_MOST: usize = 1024;

/// One `tracing` event at `$level` with the attributes every event carries.
macro_rules! emit {
    ($level:ident, $parent:expr, $t:expr $(, $k:ident = $v:expr)*) => {
        tracing::$level!(
            target: "lockgate",
            parent: $parent,
            event = $t.what.name(),
            backend = $t.backend,
            primitive = $t.primitive,
            lock = $t.name.as_deref(),
            $($k = $v,)*
            "{}",
            $t.what.summary()
        )
    };
}

impl Sink {
    /// Describes the metrics to the recorder (units and meaning), once per client.
    pub fn new() -> Self {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        for i in INSTRUMENTS {
            match i.kind {
                InstrumentKind::Histogram => describe_histogram!(i.name, Unit::Seconds, i.description),
                InstrumentKind::Counter => describe_counter!(i.name, i.description),
                InstrumentKind::UpDownCounter => describe_gauge!(i.name, i.description),
            }
        }
        Sink::default()
    }

    /// The caller's span, current when acquire `op` was asked for: its span's parent.
    pub fn started_under(&mut self, op: OpId, parent: Span) {
        self.parents.insert(op, parent);
    }

    /// Adds a listener (see [`Listener`]), called as events are raised or, `when_idle`, once
    /// the driver has nothing else ready.
    pub fn listen(&mut self, listener: Listener, when_idle: bool) {
        if when_idle {
            self.idle_listeners.push(listener);
        } else {
            self.listeners.push(listener);
        }
    }

    /// Keeps `t` to record when the driver has nothing else ready: a subscriber formatting
    /// every event (or the JVM's listener, a crossing into Java per event) then costs no
    /// caller a wait, since the completions and requests the same input caused go out first.
    /// Order is kept. Listeners that only queue (`Client::on_telemetry`) are called at once,
    /// so the call's caller is answered after them; an acquire's span opens at once too, so
    /// it covers the whole wait its grant reports, and ends when its outcome is recorded.
    pub fn defer(&mut self, t: Telemetry) {
        for listener in &self.listeners {
            listener(&t);
        }
        if let Happened::AcquireStarted { op } = &t.what {
            self.open_span(*op, &t);
        }
        self.deferred.push(t);
        if self.deferred.len() >= DEFER_AT_MOST {
            self.flush();
        }
    }

    /// Whether deferred events wait to be recorded.
    pub fn has_deferred(&self) -> bool {
        !self.deferred.is_empty()
    }

    /// Records every deferred event, in order.
    pub fn flush(&mut self) {
        for t in std::mem::take(&mut self.deferred) {
            self.record(&t);
        }
    }

    /// Opens acquire `op`'s span, under the caller's span.
    fn open_span(&mut self, op: OpId, t: &Telemetry) {
        let parent = self.parents.remove(&op).unwrap_or_else(Span::current);
        let span = tracing::debug_span!(
            target: "lockgate",
            parent: &parent,
            "lockgate.acquire",
            backend = t.backend,
            primitive = t.primitive,
            lock = t.name.as_deref(),
        );
        self.spans.insert(op, span);
    }

    /// Hands one event to `tracing`, the metrics and the idle listeners.
    fn record(&mut self, t: &Telemetry) {
        for listener in &self.idle_listeners {
            listener(t);
        }
        // Labels from static strings where the core names the value: no copy per update (every
        // client records them, with or without a recorder installed).
        for u in t.measured() {
            let labels: Vec<Label> = t
                .attributes_with(&u.extra)
                .map(|a| match a {
                    Attribute::Static(k, v) => Label::from_static_parts(k, v),
                    Attribute::Name(k, v) => Label::new(k, v.to_string()),
                })
                .collect();
            match u.instrument.kind {
                InstrumentKind::Histogram => metrics::histogram!(u.instrument.name, labels).record(u.value),
                InstrumentKind::Counter => metrics::counter!(u.instrument.name, labels).increment(u.value as u64),
                InstrumentKind::UpDownCounter => metrics::gauge!(u.instrument.name, labels).increment(u.value),
            }
        }
        let mut acquire_ended = |op: &OpId| self.spans.remove(op).unwrap_or_else(Span::none);
        match &t.what {
            // Its span was opened as the event was raised (`defer`).
            Happened::AcquireStarted { op } => emit!(debug, self.spans.get(op).and_then(Span::id), t),
            Happened::Granted { op, waited, queued, .. } => {
                let span = acquire_ended(op);
                emit!(debug, span.id(), t, wait_s = waited.as_secs_f64(), queued = *queued);
            }
            Happened::NotAcquired { op } => {
                let span = acquire_ended(op);
                emit!(debug, span.id(), t);
            }
            Happened::TimedOut { op, waited } | Happened::Cancelled { op, waited } => {
                let span = acquire_ended(op);
                emit!(debug, span.id(), t, wait_s = waited.as_secs_f64());
            }
            Happened::AcquireFailed { op, waited, code } => {
                let span = acquire_ended(op);
                emit!(debug, span.id(), t, wait_s = waited.as_secs_f64(), code = *code);
            }
            Happened::Released { held, .. } => emit!(debug, None, t, held_s = held.as_secs_f64()),
            Happened::Lost { reason, held, .. } => emit!(warn, None, t, reason = reason.as_str(), held_s = held.as_secs_f64()),
            Happened::HeldTooLong { held, .. } => emit!(warn, None, t, held_s = held.as_secs_f64()),
            Happened::RenewalFailed { code, .. } => emit!(debug, None, t, code = *code),
            Happened::AtRisk { .. } | Happened::SessionExpired => emit!(warn, None, t),
            Happened::Extended { .. } | Happened::Safe { .. } | Happened::Adopted { .. } => emit!(debug, None, t),
            Happened::ConnectionLost | Happened::ConnectionRestored => emit!(debug, None, t),
            Happened::RedlockRound { op, round } => {
                // An acquire's round belongs to its span; a lease's rounds stand alone.
                let span = op.and_then(|op| self.spans.get(&op).and_then(Span::id));
                emit!(
                    debug,
                    span,
                    t,
                    call = round.call,
                    outcome = round.outcome,
                    took_s = round.took.as_secs_f64(),
                    masters = round.masters,
                    yes = round.yes,
                    no = round.no,
                    restarting = round.restarting,
                    failed = round.failed,
                    unanswered = round.unanswered
                );
            }
        }
    }
}
