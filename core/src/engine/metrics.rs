//! The metrics every binding records, defined once: the instruments (name, kind, unit, meaning;
//! names after OpenTelemetry's naming guidance) and what each telemetry event adds to them
//! ([`Telemetry::metric_updates`]). Each binding hands the updates to its ecosystem's metrics
//! API by the instrument's kind — the `metrics` facade (Rust), OpenTelemetry (Python, Node),
//! Micrometer (JVM) — so the names, attributes and values are the same in every language.

use super::telemetry::{Happened, Telemetry};
use crate::time::Duration;

/// How an instrument aggregates what it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstrumentKind {
    /// A distribution of values (a duration per acquire or hold).
    Histogram,
    /// A monotonic count (given increments of 1).
    Counter,
    /// A count that goes up and down (given +1 and -1): what is held or waiting now.
    UpDownCounter,
}

impl InstrumentKind {
    /// Its stable name for bindings: `histogram`, `counter` or `up_down_counter`.
    pub fn name(self) -> &'static str {
        match self {
            InstrumentKind::Histogram => "histogram",
            InstrumentKind::Counter => "counter",
            InstrumentKind::UpDownCounter => "up_down_counter",
        }
    }
}

/// One metric every binding records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Instrument {
    /// Its name (`lockgate.lock.wait.duration`).
    pub name: &'static str,
    /// How it aggregates.
    pub kind: InstrumentKind,
    /// Its unit in UCUM (`s`; `1` for counts), as OpenTelemetry names units.
    pub unit: &'static str,
    /// What it measures, for the metrics backend's description.
    pub description: &'static str,
}

const fn instrument(name: &'static str, kind: InstrumentKind, unit: &'static str, description: &'static str) -> Instrument {
    Instrument { name, kind, unit, description }
}

use InstrumentKind::{Counter, Histogram, UpDownCounter};

/// Wait time of acquires that ended, by outcome (seconds).
pub const WAIT_DURATION: Instrument = instrument("lockgate.lock.wait.duration", Histogram, "s", "Time acquires waited, by outcome");
/// Hold time of leases that ended, released or lost (seconds).
pub const HOLD_DURATION: Instrument = instrument("lockgate.lock.hold.duration", Histogram, "s", "Time leases were held, until released or lost");
/// Acquires that ended, by outcome.
pub const ACQUISITIONS: Instrument = instrument("lockgate.lock.acquisitions", Counter, "1", "Acquires that ended, by outcome");
/// Leases lost, by reason.
pub const LOSSES: Instrument = instrument("lockgate.lock.losses", Counter, "1", "Leases lost, by reason");
/// Spells at risk begun.
pub const AT_RISK: Instrument = instrument("lockgate.lock.at_risk", Counter, "1", "Spells at risk: leases that could not be confirmed for a while");
/// Renewals that did not go through, by error code.
pub const RENEWAL_FAILURES: Instrument = instrument("lockgate.lock.renewal.failures", Counter, "1", "Lease renewals that did not go through, by error code");
/// Connections to the session's server back after a loss.
pub const RECONNECTS: Instrument = instrument("lockgate.client.reconnects", Counter, "1", "Connections to the session's server restored after a loss");
/// Leases held now.
pub const HELD: Instrument = instrument("lockgate.lock.held", UpDownCounter, "1", "Leases held now");
/// Acquires waiting now.
pub const WAITING: Instrument = instrument("lockgate.lock.waiting", UpDownCounter, "1", "Acquires waiting now");

/// Redlock rounds of votes decided, by call and outcome.
pub const REDLOCK_ROUNDS: Instrument =
    instrument("lockgate.redlock.rounds", Counter, "1", "Redlock rounds of votes across the masters, by call and outcome");

/// Every instrument, for a binding that creates them up front.
pub const INSTRUMENTS: &[Instrument] =
    &[WAIT_DURATION, HOLD_DURATION, ACQUISITIONS, LOSSES, AT_RISK, RENEWAL_FAILURES, RECONNECTS, HELD, WAITING, REDLOCK_ROUNDS];

/// One value for one instrument, with its attributes: `lockgate.backend`, `lockgate.primitive`
/// (events of one lock), `lockgate.lock.name` (opted in), and the instrument's own
/// (`lockgate.outcome`, `lockgate.loss.reason`, `error.type`).
#[derive(Clone, Debug, PartialEq)]
pub struct MetricUpdate {
    /// The instrument.
    pub instrument: &'static Instrument,
    /// A histogram's sample, a counter's increment, an up-down counter's change.
    pub value: f64,
    /// The attributes, keys first.
    pub attributes: Vec<(&'static str, String)>,
}

/// An acquire that ended, as a span of its wait (`lockgate.acquire`): how it ended, how long it
/// waited (the span ends at the event, so it started this long before), and the error code
/// that marks it failed (a timeout or a failure; a refused try and a cancel are not errors).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EndedAcquire {
    /// `granted`, `not_acquired`, `timed_out`, `cancelled` or `failed`.
    pub outcome: &'static str,
    /// From the acquire's start to its end.
    pub waited: Duration,
    /// The error code of a span that failed.
    pub error: Option<&'static str>,
}

impl Telemetry {
    /// The acquire this event ends, for the bindings that make a span of it.
    pub fn ended_acquire(&self) -> Option<EndedAcquire> {
        let ended = |outcome, waited, error| Some(EndedAcquire { outcome, waited, error });
        match &self.what {
            Happened::Granted { waited, .. } => ended("granted", *waited, None),
            Happened::NotAcquired { .. } => ended("not_acquired", Duration::ZERO, None),
            Happened::TimedOut { waited, .. } => ended("timed_out", *waited, Some("TIMEOUT")),
            Happened::Cancelled { waited, .. } => ended("cancelled", *waited, None),
            Happened::AcquireFailed { waited, code, .. } => ended("failed", *waited, Some(*code)),
            _ => None,
        }
    }

    /// The attributes every metric update and span of this event carries: `lockgate.backend`,
    /// `lockgate.primitive` (events of one lock), `lockgate.lock.name` (opted in).
    pub fn attributes(&self) -> Vec<(&'static str, String)> {
        self.attributes_with(&[]).map(|a| (a.key(), a.value().to_string())).collect()
    }

    /// This event's attributes ([`Telemetry::attributes`]) and then `extra` (an update's own,
    /// [`Measured::extra`]), in that order, without copying a value: what a binding that
    /// records many updates builds its labels from.
    pub fn attributes_with<'a>(&'a self, extra: &'a [Option<(&'static str, &'static str)>]) -> impl Iterator<Item = Attribute<'a>> {
        let fixed = [Some(("lockgate.backend", self.backend)), self.primitive.map(|p| ("lockgate.primitive", p))];
        let name = self.name.as_deref().map(|n| Attribute::Name("lockgate.lock.name", n));
        let statics = |pairs: &'a [Option<(&'static str, &'static str)>]| pairs.iter().flatten().map(|&(k, v)| Attribute::Static(k, v));
        fixed.into_iter().flatten().map(|(k, v)| Attribute::Static(k, v)).chain(name).chain(statics(extra))
    }

    /// What this event adds to the metrics, the same in every binding.
    pub fn metric_updates(&self) -> Vec<MetricUpdate> {
        self.measured()
            .into_iter()
            .map(|m| MetricUpdate {
                instrument: m.instrument,
                value: m.value,
                attributes: self.attributes_with(&m.extra).map(|a| (a.key(), a.value().to_string())).collect(),
            })
            .collect()
    }

    /// What this event adds to the metrics, each update with only its instrument's own
    /// attributes ([`Measured::extra`]): with [`Telemetry::attributes`], the same as
    /// [`Telemetry::metric_updates`], for a binding that keys its series without copying them.
    pub fn measured(&self) -> Vec<Measured> {
        let update = |instrument: &'static Instrument, value: f64, extra: Option<(&'static str, &'static str)>| Measured {
            instrument,
            value,
            extra: [extra, None],
        };
        let acquire_ended = |outcome: &'static str, waited: Option<Duration>| {
            let mut ups = vec![update(&WAITING, -1.0, None), update(&ACQUISITIONS, 1.0, Some(("lockgate.outcome", outcome)))];
            ups.extend(waited.map(|w| update(&WAIT_DURATION, w.as_secs_f64(), Some(("lockgate.outcome", outcome)))));
            ups
        };
        match &self.what {
            Happened::AcquireStarted { .. } => vec![update(&WAITING, 1.0, None)],
            Happened::Granted { waited, .. } => {
                let mut ups = acquire_ended("granted", Some(*waited));
                ups.push(update(&HELD, 1.0, None));
                ups
            }
            Happened::NotAcquired { .. } => acquire_ended("not_acquired", None),
            // Held here from now on; no acquire ended (none started).
            Happened::Adopted { .. } => vec![update(&HELD, 1.0, None)],
            Happened::TimedOut { waited, .. } => acquire_ended("timed_out", Some(*waited)),
            Happened::Cancelled { waited, .. } => acquire_ended("cancelled", Some(*waited)),
            Happened::AcquireFailed { waited, .. } => acquire_ended("failed", Some(*waited)),
            Happened::Released { held, .. } => {
                vec![update(&HELD, -1.0, None), update(&HOLD_DURATION, held.as_secs_f64(), Some(("lockgate.outcome", "released")))]
            }
            Happened::Lost { reason, held, .. } => vec![
                update(&HELD, -1.0, None),
                update(&HOLD_DURATION, held.as_secs_f64(), Some(("lockgate.outcome", "lost"))),
                update(&LOSSES, 1.0, Some(("lockgate.loss.reason", reason.as_str()))),
            ],
            Happened::RenewalFailed { code, .. } => vec![update(&RENEWAL_FAILURES, 1.0, Some(("error.type", code)))],
            Happened::AtRisk { .. } => vec![update(&AT_RISK, 1.0, None)],
            Happened::ConnectionRestored => vec![update(&RECONNECTS, 1.0, None)],
            Happened::RedlockRound { round, .. } => vec![Measured {
                instrument: &REDLOCK_ROUNDS,
                value: 1.0,
                extra: [Some(("lockgate.redlock.call", round.call)), Some(("lockgate.outcome", round.outcome))],
            }],
            Happened::HeldTooLong { .. } | Happened::Extended { .. } | Happened::Safe { .. } => Vec::new(),
            Happened::ConnectionLost | Happened::SessionExpired => Vec::new(),
        }
    }
}

/// One attribute of a metric update: a static key with a static value (the backend, the
/// primitive, an outcome, a reason, an error code) or with the lock's name (opted in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attribute<'a> {
    /// A key with a value the core names.
    Static(&'static str, &'static str),
    /// A key with the lock's name.
    Name(&'static str, &'a str),
}

impl<'a> Attribute<'a> {
    /// Its key (`lockgate.backend`, `lockgate.outcome`, ...).
    pub fn key(self) -> &'static str {
        match self {
            Attribute::Static(k, _) | Attribute::Name(k, _) => k,
        }
    }

    /// Its value.
    pub fn value(self) -> &'a str {
        match self {
            Attribute::Static(_, v) | Attribute::Name(_, v) => v,
        }
    }
}

/// One value for one instrument with the instrument's own attributes only (see
/// [`Telemetry::measured`]); all of it static, so it can key a series as it is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// The instrument.
    pub instrument: &'static Instrument,
    /// A histogram's sample, a counter's increment, an up-down counter's change.
    pub value: f64,
    /// The instrument's own attributes, in order (`lockgate.outcome`, `lockgate.loss.reason`,
    /// `error.type`; a Redlock round's call and outcome), after the event's.
    pub extra: [Option<(&'static str, &'static str)>; 2],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{LeaseId, OpId};
    use crate::engine::telemetry::LossReason;

    fn event(what: Happened, name: Option<&str>) -> Telemetry {
        Telemetry { what, backend: "redis", primitive: Some("mutex"), name: name.map(Into::into) }
    }

    #[test]
    fn a_grant_ends_a_wait_and_starts_a_hold() {
        let ups = event(Happened::Granted { op: OpId(1), lease: LeaseId(2), waited: Duration::from_millis(1500), queued: true }, Some("orders:42")).metric_updates();
        let got: Vec<_> = ups.iter().map(|u| (u.instrument.name, u.value)).collect();
        assert_eq!(got, [("lockgate.lock.waiting", -1.0), ("lockgate.lock.acquisitions", 1.0), ("lockgate.lock.wait.duration", 1.5), ("lockgate.lock.held", 1.0)]);
        assert_eq!(
            ups[1].attributes,
            [("lockgate.backend", "redis".into()), ("lockgate.primitive", "mutex".into()), ("lockgate.lock.name", "orders:42".into()), ("lockgate.outcome", "granted".into())]
        );
    }

    #[test]
    fn an_update_s_attributes_are_borrowed_only_for_the_lock_name() {
        let t = event(Happened::Released { lease: LeaseId(2), held: Duration::from_secs(1) }, Some("orders:42"));
        let hold = t.measured().into_iter().find(|m| m.instrument.name == HOLD_DURATION.name).unwrap();
        let got: Vec<_> = t.attributes_with(&hold.extra).collect();
        assert_eq!(
            got,
            [
                Attribute::Static("lockgate.backend", "redis"),
                Attribute::Static("lockgate.primitive", "mutex"),
                Attribute::Name("lockgate.lock.name", "orders:42"),
                Attribute::Static("lockgate.outcome", "released"),
            ]
        );
        // The same attributes, in the same order, as every binding's updates carry them.
        let update = t.metric_updates().into_iter().find(|u| u.instrument.name == HOLD_DURATION.name).unwrap();
        assert_eq!(update.attributes, got.iter().map(|a| (a.key(), a.value().to_string())).collect::<Vec<_>>());
    }

    #[test]
    fn a_loss_counts_its_reason_and_ends_the_hold() {
        let ups = event(Happened::Lost { lease: LeaseId(2), reason: LossReason::Expired, held: Duration::from_secs(3) }, None).metric_updates();
        let got: Vec<_> = ups.iter().map(|u| (u.instrument.name, u.value, u.attributes.last().cloned())).collect();
        assert_eq!(got[0].0, "lockgate.lock.held");
        assert_eq!(got[1], ("lockgate.lock.hold.duration", 3.0, Some(("lockgate.outcome", "lost".into()))));
        assert_eq!(got[2], ("lockgate.lock.losses", 1.0, Some(("lockgate.loss.reason", "expired".into()))));
        assert!(ups.iter().all(|u| !u.attributes.iter().any(|(k, _)| *k == "lockgate.lock.name")), "names only when opted in");
    }

    #[test]
    fn a_redlock_round_counts_its_call_and_outcome() {
        let round = crate::engine::RoundVotes {
            call: "acquire",
            outcome: "no_quorum",
            masters: 5,
            yes: 2,
            no: 0,
            restarting: 1,
            failed: 2,
            unanswered: 0,
            took: Duration::from_millis(12),
        };
        let t = Telemetry { what: Happened::RedlockRound { op: Some(OpId(3)), round }, backend: "redlock", primitive: Some("mutex"), name: None };
        let ups = t.metric_updates();
        assert_eq!(ups.len(), 1);
        assert_eq!(ups[0].instrument.name, "lockgate.redlock.rounds");
        assert_eq!(
            ups[0].attributes,
            [
                ("lockgate.backend", "redlock".into()),
                ("lockgate.primitive", "mutex".into()),
                ("lockgate.redlock.call", "acquire".into()),
                ("lockgate.outcome", "no_quorum".into())
            ]
        );
        let m = t.what.measurements();
        assert!(m.contains(&("yes", crate::engine::Measure::Count(2))) && m.contains(&("failed", crate::engine::Measure::Count(2))));
    }

    #[test]
    fn every_update_names_a_listed_instrument() {
        let restored = Telemetry { what: Happened::ConnectionRestored, backend: "zookeeper", primitive: None, name: None };
        for u in restored.metric_updates() {
            assert!(INSTRUMENTS.contains(u.instrument));
            assert_eq!(u.attributes, [("lockgate.backend", "zookeeper".to_string())]);
        }
    }
}
