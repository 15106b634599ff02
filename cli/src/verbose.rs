//! `--verbose`: the core's telemetry events (the one vocabulary every binding reports, README
//! "Telemetry") as lines for stderr (written by `stderr.rs`), one each, with their
//! measurements: what the library's users see in their logs, seen by the command's user.
//! `lockgate`'s own actions (signals to the command, renewals seen) are logged beside them by
//! `run.rs`.

use lockgate_core::engine::{Measure, Telemetry};

/// `[lease.lost] lock lost: reason=refused held=1.234s` (the lock's name is in the event: the
/// command's client turns lock names on, it holds one lock).
pub fn line(t: &Telemetry) -> String {
    let mut out = format!("[{}] {}", t.what.name(), t.what.summary());
    if let Some(name) = &t.name {
        out.push_str(&format!(" ({name:?})"));
    }
    let measured: Vec<String> = t
        .what
        .measurements()
        .into_iter()
        .map(|(key, m)| match m {
            Measure::Seconds(d) => format!("{}={:.3}s", key.trim_end_matches("_s"), d.as_secs_f64()),
            Measure::Flag(b) => format!("{key}={b}"),
            Measure::Text(text) => format!("{key}={text}"),
            Measure::Count(n) => format!("{key}={n}"),
        })
        .collect();
    if !measured.is_empty() {
        out.push_str(": ");
        out.push_str(&measured.join(" "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgate_core::engine::{Happened, LeaseId, LossReason};
    use lockgate_core::time::Duration;

    #[test]
    fn a_line_names_the_event_the_lock_and_its_measurements() {
        let t = Telemetry {
            what: Happened::Lost { lease: LeaseId(3), reason: LossReason::Refused, held: Duration::from_millis(1234) },
            backend: "redis",
            primitive: Some("mutex"),
            name: Some("jobs/nightly".into()),
        };
        assert_eq!(line(&t), "[lease.lost] lock lost (\"jobs/nightly\"): reason=refused held=1.234s");
    }
}
