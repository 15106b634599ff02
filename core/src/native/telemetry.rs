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

use crate::engine::{Happened, OpId, Telemetry};
use crate::time::Duration;

/// Wait time of acquires that ended, by outcome (seconds).
pub const WAIT_DURATION: &str = "lockgate.lock.wait.duration";
/// Hold time of leases that ended, released or lost (seconds).
pub const HOLD_DURATION: &str = "lockgate.lock.hold.duration";
/// Acquires that ended, by outcome.
pub const ACQUISITIONS: &str = "lockgate.lock.acquisitions";
/// Leases lost, by reason.
pub const LOSSES: &str = "lockgate.lock.losses";
/// Spells at risk begun.
pub const AT_RISK: &str = "lockgate.lock.at_risk";
/// Renewals that did not go through, by error code.
pub const RENEWAL_FAILURES: &str = "lockgate.lock.renewal.failures";
/// Connections to the session's server back after a loss.
pub const RECONNECTS: &str = "lockgate.client.reconnects";
/// Leases held now.
pub const HELD: &str = "lockgate.lock.held";
/// Acquires waiting now.
pub const WAITING: &str = "lockgate.lock.waiting";

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
    listeners: Vec<Listener>,
}

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
        describe_histogram!(WAIT_DURATION, Unit::Seconds, "Time acquires waited, by outcome");
        describe_histogram!(HOLD_DURATION, Unit::Seconds, "Time leases were held, until released or lost");
        describe_counter!(ACQUISITIONS, "Acquires that ended, by outcome");
        describe_counter!(LOSSES, "Leases lost, by reason");
        describe_counter!(AT_RISK, "Spells at risk: leases that could not be confirmed for a while");
        describe_counter!(RENEWAL_FAILURES, "Lease renewals that did not go through, by error code");
        describe_counter!(RECONNECTS, "Connections to the session's server restored after a loss");
        describe_gauge!(HELD, "Leases held now");
        describe_gauge!(WAITING, "Acquires waiting now");
        Sink::default()
    }

    /// The caller's span, current when acquire `op` was asked for: its span's parent.
    pub fn started_under(&mut self, op: OpId, parent: Span) {
        self.parents.insert(op, parent);
    }

    /// Adds a listener (see [`Listener`]).
    pub fn listen(&mut self, listener: Listener) {
        self.listeners.push(listener);
    }

    /// Hands one event to `tracing`, the metrics and the listeners.
    pub fn record(&mut self, t: &Telemetry) {
        for listener in &self.listeners {
            listener(t);
        }
        let mut labels = vec![Label::new("lockgate.backend", t.backend)];
        if let Some(p) = t.primitive {
            labels.push(Label::new("lockgate.primitive", p));
        }
        if let Some(name) = &t.name {
            labels.push(Label::new("lockgate.lock.name", name.to_string()));
        }
        let with = |k: &'static str, v: &'static str| {
            let mut l = labels.clone();
            l.push(Label::new(k, v));
            l
        };
        let acquire_ended = |sink: &mut Sink, op: OpId, outcome: &'static str, waited: Option<Duration>| {
            metrics::gauge!(WAITING, labels.clone()).decrement(1.0);
            metrics::counter!(ACQUISITIONS, with("lockgate.outcome", outcome)).increment(1);
            if let Some(w) = waited {
                metrics::histogram!(WAIT_DURATION, with("lockgate.outcome", outcome)).record(w.as_secs_f64());
            }
            sink.spans.remove(&op).unwrap_or_else(Span::none)
        };
        match &t.what {
            Happened::AcquireStarted { op } => {
                let parent = self.parents.remove(op).unwrap_or_else(Span::current);
                let span = tracing::debug_span!(
                    target: "lockgate",
                    parent: &parent,
                    "lockgate.acquire",
                    backend = t.backend,
                    primitive = t.primitive,
                    lock = t.name.as_deref(),
                );
                emit!(debug, span.id(), t);
                self.spans.insert(*op, span);
                metrics::gauge!(WAITING, labels.clone()).increment(1.0);
            }
            Happened::Granted { op, waited, queued, .. } => {
                let span = acquire_ended(self, *op, "granted", Some(*waited));
                metrics::gauge!(HELD, labels.clone()).increment(1.0);
                emit!(debug, span.id(), t, wait_s = waited.as_secs_f64(), queued = *queued);
            }
            Happened::NotAcquired { op } => {
                let span = acquire_ended(self, *op, "not_acquired", None);
                emit!(debug, span.id(), t);
            }
            Happened::TimedOut { op, waited } => {
                let span = acquire_ended(self, *op, "timed_out", Some(*waited));
                emit!(debug, span.id(), t, wait_s = waited.as_secs_f64());
            }
            Happened::Cancelled { op, waited } => {
                let span = acquire_ended(self, *op, "cancelled", Some(*waited));
                emit!(debug, span.id(), t, wait_s = waited.as_secs_f64());
            }
            Happened::AcquireFailed { op, waited, code } => {
                let span = acquire_ended(self, *op, "failed", Some(*waited));
                emit!(debug, span.id(), t, wait_s = waited.as_secs_f64(), code = *code);
            }
            Happened::Released { held, .. } => {
                metrics::gauge!(HELD, labels.clone()).decrement(1.0);
                metrics::histogram!(HOLD_DURATION, with("lockgate.outcome", "released")).record(held.as_secs_f64());
                emit!(debug, None, t, held_s = held.as_secs_f64());
            }
            Happened::Lost { reason, held, .. } => {
                metrics::gauge!(HELD, labels.clone()).decrement(1.0);
                metrics::histogram!(HOLD_DURATION, with("lockgate.outcome", "lost")).record(held.as_secs_f64());
                metrics::counter!(LOSSES, with("lockgate.loss.reason", reason.as_str())).increment(1);
                emit!(warn, None, t, reason = reason.as_str(), held_s = held.as_secs_f64());
            }
            Happened::HeldTooLong { held, .. } => emit!(warn, None, t, held_s = held.as_secs_f64()),
            Happened::Extended { .. } => emit!(debug, None, t),
            Happened::RenewalFailed { code, .. } => {
                metrics::counter!(RENEWAL_FAILURES, with("error.type", code)).increment(1);
                emit!(debug, None, t, code = *code);
            }
            Happened::AtRisk { .. } => {
                metrics::counter!(AT_RISK, labels.clone()).increment(1);
                emit!(warn, None, t);
            }
            Happened::Safe { .. } => emit!(debug, None, t),
            Happened::ConnectionLost => emit!(debug, None, t),
            Happened::ConnectionRestored => {
                metrics::counter!(RECONNECTS, labels.clone()).increment(1);
                emit!(debug, None, t);
            }
            Happened::SessionExpired => emit!(warn, None, t),
        }
    }
}
