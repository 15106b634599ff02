//! What a binding in another language shows of the engine's outputs, as plain fields and
//! [`Data`] in that language's case (camelCase, milliseconds): an event's fields, which the
//! Node binding builds one object from in one call, a telemetry event as a compact row with its
//! metric updates and ended acquire, and a client's capabilities. The shapes are the core's, so no binding
//! restates them.

use crate::capabilities::Capabilities;
use super::value::Data;
use crate::engine::{Done, Event, LeaseId, Measure, OpId, Telemetry};
use crate::time::{Duration, Instant};
use crate::error::Error;

/// One event's fields; a `None` field is absent from the event.
#[derive(Debug, Default)]
pub struct EventFields<'a> {
    /// `acquired`, `notAcquired`, `released`, `extended`, `observed`, `inspected`, `broken`,
    /// `listed`, `failed` (these carry `op`), `renewed`, `atRisk` or `lost` (these carry `lease`).
    pub kind: &'static str,
    /// The operation that completed.
    pub op: Option<OpId>,
    /// The lease granted, renewed, at risk or lost.
    pub lease: Option<LeaseId>,
    /// The grant's fencing token (none where the backend issues none: Redlock); for
    /// `observed`, the leader's term.
    pub fencing_token: Option<u64>,
    /// Until when the lease is certainly valid.
    pub valid_until: Option<Instant>,
    /// Whether a released lease was still held.
    pub was_held: Option<bool>,
    /// Why an operation failed or a lease was lost.
    pub error: Option<&'a Error>,
    /// What a read found: `observed` `{ value, remainingMs }` (`Null`: nobody leads), the
    /// `inspected` snapshot, the `broken` holder `{ label, fencingToken }` (`Null`: nothing was
    /// broken), the `listed` page.
    pub data: Option<Data>,
}

impl<'a> EventFields<'a> {
    /// The fields of `ev`; `None` for telemetry, which travels apart ([`telemetry_row`]).
    pub fn of(ev: &'a Event<Done>) -> Option<EventFields<'a>> {
        let none = EventFields::default();
        Some(match ev {
            Event::Completed { op, outcome } => {
                let fields = match outcome {
                    Done::Acquired { lease, fencing_token, valid_until } => EventFields {
                        kind: "acquired",
                        lease: Some(*lease),
                        fencing_token: *fencing_token,
                        valid_until: Some(*valid_until),
                        ..none
                    },
                    Done::NotAcquired => EventFields { kind: "notAcquired", ..none },
                    Done::Released { was_held } => EventFields { kind: "released", was_held: Some(*was_held), ..none },
                    Done::Extended { valid_until } => EventFields { kind: "extended", valid_until: Some(*valid_until), ..none },
                    Done::Failed(e) => EventFields { kind: "failed", error: Some(e), ..none },
                    Done::Observed(leader) => EventFields {
                        kind: "observed",
                        fencing_token: leader.as_ref().map(|l| l.term),
                        data: Some(leader.as_ref().map_or(Data::Null, |l| {
                            Data::map([("value", l.value.as_str().into()), ("remainingMs", millis(l.remaining).into())])
                        })),
                        ..none
                    },
                    Done::Inspected(snapshot) => EventFields { kind: "inspected", data: Some(snapshot.to_data(true)), ..none },
                    Done::Broken(broken) => {
                        EventFields { kind: "broken", data: Some(broken.as_ref().map_or(Data::Null, |b| b.to_data(true))), ..none }
                    }
                    Done::Listed(page) => EventFields { kind: "listed", data: Some(page.to_data()), ..none },
                };
                EventFields { op: Some(*op), ..fields }
            }
            Event::Renewed { lease, valid_until } => {
                EventFields { kind: "renewed", lease: Some(*lease), valid_until: Some(*valid_until), ..none }
            }
            Event::AtRisk { lease, valid_until } => {
                EventFields { kind: "atRisk", lease: Some(*lease), valid_until: Some(*valid_until), ..none }
            }
            Event::Lost { lease, error } => EventFields { kind: "lost", lease: Some(*lease), error: Some(error), ..none },
            Event::Telemetry(_) => return None,
        })
    }
}

/// `d` in milliseconds (with its fraction).
pub fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Metric or span attributes as a map.
fn attributes(pairs: &[(&'static str, String)]) -> Data {
    Data::map(pairs.iter().map(|(k, v)| (*k, v.as_str().into())))
}

/// A measurement's key as a binding in another language shows it: durations in milliseconds
/// (`wait_s` -> `waitMs`, `took_s` -> `tookMs`), the others as they are.
pub fn measure_key(key: &str) -> String {
    match key.strip_suffix("_s") {
        Some(stem) => format!("{stem}Ms"),
        None => key.to_string(),
    }
}

/// A telemetry event as one compact row, its fields by place: `[kind, backend, primitive,
/// lock, [measurements]]`. `kind` is its place in [`EVENTS`](crate::engine::EVENTS), whose
/// name, summary, warning and measurement keys ([`measure_key`]) the binding reads once;
/// `primitive` and `lock` are `Null` where absent; the measurements come in their kind's order,
/// durations in milliseconds. With `metrics`, two more: the core's metric updates
/// `[[instrument, value, attributes]]`, and the acquire the event ended `{ outcome, waitMs,
/// error, attributes }` or `Null`.
pub fn telemetry_row(t: &Telemetry, metrics: bool) -> Data {
    let values = t.what.measurements().into_iter().map(|(_, m)| match m {
        Measure::Seconds(d) => millis(d).into(),
        Measure::Flag(b) => b.into(),
        Measure::Text(text) => text.into(),
        Measure::Count(n) => i64::from(n).into(),
    });
    let mut row = vec![
        Data::Int(t.what.kind() as i64),
        t.backend.into(),
        t.primitive.into(),
        t.name.as_deref().into(),
        Data::List(values.collect()),
    ];
    if metrics {
        let updates = t.metric_updates().into_iter();
        let updates = updates.map(|u| Data::List(vec![u.instrument.name.into(), u.value.into(), attributes(&u.attributes)]));
        row.push(Data::List(updates.collect()));
        row.push(t.ended_acquire().map_or(Data::Null, |ended| {
            let mut attrs = t.attributes();
            attrs.push(("lockgate.outcome", ended.outcome.to_string()));
            Data::map([
                ("outcome", ended.outcome.into()),
                ("waitMs", millis(ended.waited).into()),
                ("error", ended.error.into()),
                ("attributes", attributes(&attrs)),
            ])
        }));
    }
    Data::List(row)
}

/// `{ backend, scheme, ...every capability }`, the capabilities' names in camelCase (`readWrite`)
/// when `camel`.
pub fn capabilities_data(c: &Capabilities, camel: bool) -> Data {
    let mut out = vec![("backend".to_string(), c.backend.into()), ("scheme".to_string(), c.scheme.into())];
    for (name, on) in c.pairs() {
        let mut words = name.split('_');
        let first = words.next().unwrap_or_default().to_string();
        let key = if camel { words.fold(first, |camel, w| camel + &w[..1].to_uppercase() + &w[1..]) } else { name.to_string() };
        out.push((key, on.into()));
    }
    Data::Map(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Happened, EVENTS};

    #[test]
    fn a_telemetry_row_is_its_kinds_fields_by_place() {
        let what = Happened::Granted { op: OpId(1), lease: LeaseId(1), waited: Duration::from_millis(3), queued: true };
        let t = Telemetry { what, backend: "redis", primitive: Some("mutex"), name: None };
        let row = telemetry_row(&t, false);
        let expected = Data::List(vec![
            Data::Int(1),
            "redis".into(),
            "mutex".into(),
            Data::Null,
            Data::List(vec![Data::Float(3.0), Data::Bool(true)]),
        ]);
        assert_eq!(row, expected);
        let keys: Vec<String> = EVENTS[1].measures.iter().map(|k| measure_key(k)).collect();
        assert_eq!(keys, ["waitMs", "queued"]);
        assert_eq!(serde_json::to_string(&row).unwrap(), r#"[1,"redis","mutex",null,[3.0,true]]"#);
        let Data::List(with_metrics) = telemetry_row(&t, true) else { panic!("a row is a list") };
        assert_eq!(with_metrics.len(), 7, "metric updates and the ended acquire follow");
    }
}
