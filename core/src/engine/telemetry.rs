//! Telemetry: the one vocabulary of lock events (acquire started, granted, timed out, lost,
//! at risk, ...), raised by the engine as [`Event::Telemetry`](super::Event::Telemetry) data like
//! its other outputs, so every driver (the native client, the wasm engine of the Node binding,
//! the Python and JVM bindings) hands the same events to its ecosystem's logging and metrics
//! without code per backend.
//!
//! Off until a driver calls [`LockEngine::enable_telemetry`](super::LockEngine::enable_telemetry):
//! an engine without it raises none (and keeps no bookkeeping), so existing drivers see the
//! events they always saw.
//!
//! Attributes are low-cardinality on purpose: the backend, the primitive and, only when opted in
//! ([`TelemetryConfig::lock_names`]), the lock name. Never a token, a credential or an address.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use super::ids::{LeaseId, OpId};
use crate::primitive::Primitive;
use crate::error::{Error, ErrorKind};
use crate::time::{Duration, Instant};

/// What a driver turns telemetry on with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The backend's name as events carry it (`redis`, `redlock`, `zookeeper`, `etcd`,
    /// `postgres`, `mysql`, ...): the driver knows which backend it drives.
    pub backend: &'static str,
    /// Whether events carry the lock's name. Off by default: one series per lock name is
    /// unbounded cardinality for a metrics backend.
    pub lock_names: bool,
    /// A lease held this long raises [`Happened::HeldTooLong`], once (`None`: never).
    pub held_too_long: Option<Duration>,
}

/// One telemetry event with its attributes.
#[derive(Clone, Debug, PartialEq)]
pub struct Telemetry {
    /// What happened.
    pub what: Happened,
    /// The backend (see [`TelemetryConfig::backend`]).
    pub backend: &'static str,
    /// The primitive (`mutex`, `semaphore`, `read`, `write`, `leader`); `None` for events of
    /// the client's connection or session, which concern no one lock.
    pub primitive: Option<&'static str>,
    /// The lock's name, only if [`TelemetryConfig::lock_names`] is on.
    pub name: Option<Arc<str>>,
}

/// What happened, with its measurements. Durations are measured on the engine's `now` (the
/// driver's monotonic clock), from the call's start or the grant.
#[derive(Clone, Debug, PartialEq)]
pub enum Happened {
    /// An acquire was started.
    AcquireStarted {
        /// The acquire.
        op: OpId,
    },
    /// An acquire was granted.
    Granted {
        /// The acquire.
        op: OpId,
        /// The lease it holds (the same number as the acquire).
        lease: LeaseId,
        /// From the acquire's start to the grant.
        waited: Duration,
        /// Whether it had to wait behind a holder (queued or refused at least once).
        queued: bool,
    },
    /// A one-shot acquire found the lock held.
    NotAcquired {
        /// The acquire.
        op: OpId,
    },
    /// A wait ran out (`TIMEOUT`).
    TimedOut {
        /// The acquire.
        op: OpId,
        /// How long it waited.
        waited: Duration,
    },
    /// An acquire was cancelled (`CANCELLED`).
    Cancelled {
        /// The acquire.
        op: OpId,
        /// How long it waited.
        waited: Duration,
    },
    /// An acquire failed otherwise.
    AcquireFailed {
        /// The acquire.
        op: OpId,
        /// How long it waited.
        waited: Duration,
        /// The error's stable code (`CONNECTION`, `AUTHENTICATION`, ...).
        code: &'static str,
    },
    /// A lease another process exported was adopted: held by this client from now on (not
    /// an acquire: nothing was granted again, and no acquire event comes before it).
    Adopted {
        /// The lease.
        lease: LeaseId,
    },
    /// A held lease was released by its owner.
    Released {
        /// The lease.
        lease: LeaseId,
        /// From the grant to the release.
        held: Duration,
    },
    /// An extend was confirmed.
    Extended {
        /// The lease.
        lease: LeaseId,
    },
    /// A renewal (watchdog) did not go through; the lease is at risk or lost (told next).
    RenewalFailed {
        /// The lease.
        lease: LeaseId,
        /// The error's stable code.
        code: &'static str,
    },
    /// A lease can no longer be confirmed for now (once per spell).
    AtRisk {
        /// The lease.
        lease: LeaseId,
    },
    /// A lease at risk was confirmed again.
    Safe {
        /// The lease.
        lease: LeaseId,
    },
    /// A lease has been held longer than [`TelemetryConfig::held_too_long`] (told once per
    /// lease, while it is still held: the stuck job an operator looks for).
    HeldTooLong {
        /// The lease.
        lease: LeaseId,
        /// From the grant until now.
        held: Duration,
    },
    /// A lease was lost.
    Lost {
        /// The lease.
        lease: LeaseId,
        /// Why.
        reason: LossReason,
        /// From the grant to the loss.
        held: Duration,
    },
    /// The connection the client's session lives on was lost (the session lives on for now).
    ConnectionLost,
    /// That connection is back.
    ConnectionRestored,
    /// The client's session ended on the server (ZooKeeper, etcd): its leases are lost.
    SessionExpired,
    /// A Redlock round of votes across the masters was decided (an acquire attempt, a
    /// renewal, an extend or a release): how it ended and how the masters voted, so an
    /// operator can tell a lock held elsewhere from masters that are down or restarting.
    RedlockRound {
        /// The acquire whose attempt it was (`None` for a lease's renewal, extend or release).
        op: Option<OpId>,
        /// The votes.
        round: RoundVotes,
    },
}

/// How one Redlock round ended, and the masters' votes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundVotes {
    /// What the round was: `acquire`, `renew`, `extend` or `release`.
    pub call: &'static str,
    /// How it ended: `granted`, `too_late` (a majority granted after the validity ran out),
    /// `refused` (held by another owner on too many masters), `no_quorum` (too few masters
    /// answered or granted), `mismatch` (a holder counting other masters); for a renewal or
    /// extend `confirmed`, `refused` or `no_quorum`; for a release `confirmed` or `unconfirmed`.
    pub outcome: &'static str,
    /// The masters asked.
    pub masters: u32,
    /// Masters that granted (confirmed, released).
    pub yes: u32,
    /// Masters where another owner holds the lock (or our key was gone).
    pub no: u32,
    /// Masters up for less than the maximum lease, which grant nothing yet.
    pub restarting: u32,
    /// Masters that failed (an error, a connection down).
    pub failed: u32,
    /// Masters that had not answered when the round was decided (a majority can decide
    /// before the slowest master answers; at the node timeout, the silent ones).
    pub unanswered: u32,
    /// From sending the round to its decision.
    pub took: Duration,
}

/// Why a lease was lost: a small closed set, fit for a metric attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LossReason {
    /// Its validity ran out before a renewal could confirm it.
    Expired,
    /// The server refused a renewal or extend: the lease is no longer ours there.
    Refused,
    /// The server told us it was deleted or taken over behind our back.
    Revoked,
    /// The session it lived in ended.
    SessionEnded,
    /// A renewal failed for good (an error the engine cannot retry).
    Failed,
    /// It reached the longest hold asked for (`max_hold`): not renewed past it, and ended.
    MaxHold,
}

impl LossReason {
    /// The stable name (`expired`, `refused`, `revoked`, `session_ended`, `failed`,
    /// `max_hold`).
    pub fn as_str(self) -> &'static str {
        match self {
            LossReason::Expired => "expired",
            LossReason::Refused => "refused",
            LossReason::Revoked => "revoked",
            LossReason::SessionEnded => "session_ended",
            LossReason::Failed => "failed",
            LossReason::MaxHold => "max_hold",
        }
    }
}

/// One kind of event, as every binding names and logs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventKind {
    /// Its stable name (`acquire.granted`): a binding's channel, logger field or span event.
    pub name: &'static str,
    /// What a log line says, the same in every binding.
    pub summary: &'static str,
    /// Whether it is logged at WARNING (a loss, a spell at risk, an expired session, a lease
    /// held too long: they matter with nothing set up); everything else is DEBUG.
    pub warning: bool,
    /// The keys of its measurements, in [`Happened::measurements`]' order.
    pub measures: &'static [&'static str],
}

const fn kind(name: &'static str, summary: &'static str, warning: bool, measures: &'static [&'static str]) -> EventKind {
    EventKind { name, summary, warning, measures }
}

/// Every kind of event, in the order of [`Happened`]'s variants ([`Happened::kind`]): what a
/// binding that names a channel or logger per event (Node's `diagnostics_channel`) creates them
/// from, and what a compact event refers to by its place.
pub const EVENTS: [EventKind; 18] = [
    kind("acquire.started", "acquire started", false, &[]),
    kind("acquire.granted", "lock granted", false, &["wait_s", "queued"]),
    kind("acquire.not_acquired", "lock not acquired: held by another owner", false, &[]),
    kind("acquire.timed_out", "acquire timed out", false, &["wait_s"]),
    kind("acquire.cancelled", "acquire cancelled", false, &["wait_s"]),
    kind("acquire.failed", "acquire failed", false, &["wait_s", "code"]),
    kind("lease.adopted", "lease adopted from another process", false, &[]),
    kind("lease.released", "lock released", false, &["held_s"]),
    kind("lease.extended", "lease extended", false, &[]),
    kind("lease.renewal_failed", "lease renewal failed", false, &["code"]),
    kind("lease.at_risk", "lease at risk: it cannot be confirmed for now", true, &[]),
    kind("lease.safe", "lease confirmed again: no longer at risk", false, &[]),
    kind("lease.held_too_long", "lock held longer than held_too_long", true, &["held_s"]),
    kind("lease.lost", "lock lost", true, &["reason", "held_s"]),
    kind("connection.lost", "connection to the session's server lost", false, &[]),
    kind("connection.restored", "connection to the session's server restored", false, &[]),
    kind("session.expired", "session expired: its leases are lost", true, &[]),
    kind(
        "redlock.round",
        "Redlock round decided",
        false,
        &["call", "outcome", "took_s", "masters", "yes", "no", "restarting", "failed", "unanswered"],
    ),
];

impl Happened {
    /// Its kind's place in [`EVENTS`].
    pub fn kind(&self) -> usize {
        match self {
            Happened::AcquireStarted { .. } => 0,
            Happened::Granted { .. } => 1,
            Happened::NotAcquired { .. } => 2,
            Happened::TimedOut { .. } => 3,
            Happened::Cancelled { .. } => 4,
            Happened::AcquireFailed { .. } => 5,
            Happened::Adopted { .. } => 6,
            Happened::Released { .. } => 7,
            Happened::Extended { .. } => 8,
            Happened::RenewalFailed { .. } => 9,
            Happened::AtRisk { .. } => 10,
            Happened::Safe { .. } => 11,
            Happened::HeldTooLong { .. } => 12,
            Happened::Lost { .. } => 13,
            Happened::ConnectionLost => 14,
            Happened::ConnectionRestored => 15,
            Happened::SessionExpired => 16,
            Happened::RedlockRound { .. } => 17,
        }
    }

    /// The event's stable name (`acquire.started`, `acquire.granted`, `lease.lost`, ...), the
    /// same in every binding.
    pub fn name(&self) -> &'static str {
        EVENTS[self.kind()].name
    }
}

/// One measurement of an event, as [`Happened::measurements`] lists it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Measure {
    /// A duration, handed on in seconds.
    Seconds(Duration),
    /// A yes/no fact.
    Flag(bool),
    /// A stable code or reason.
    Text(&'static str),
    /// A count (masters that voted one way).
    Count(u32),
}

impl Happened {
    /// The event's measurements by their stable keys — `wait_s` (start to grant or give-up),
    /// `queued`, `held_s` (grant to release or loss), `reason` (a loss's), `code` (an error's),
    /// and a Redlock round's `call`, `outcome`, `took_s` and vote counts (`masters`, `yes`,
    /// `no`, `restarting`, `failed`, `unanswered`) — the same in every binding, so each hands them on in its own form by one loop.
    pub fn measurements(&self) -> Vec<(&'static str, Measure)> {
        use Measure::*;
        match self {
            Happened::Granted { waited, queued, .. } => vec![("wait_s", Seconds(*waited)), ("queued", Flag(*queued))],
            Happened::TimedOut { waited, .. } | Happened::Cancelled { waited, .. } => vec![("wait_s", Seconds(*waited))],
            Happened::AcquireFailed { waited, code, .. } => vec![("wait_s", Seconds(*waited)), ("code", Text(code))],
            Happened::Released { held, .. } | Happened::HeldTooLong { held, .. } => vec![("held_s", Seconds(*held))],
            Happened::Lost { reason, held, .. } => vec![("reason", Text(reason.as_str())), ("held_s", Seconds(*held))],
            Happened::RenewalFailed { code, .. } => vec![("code", Text(code))],
            Happened::RedlockRound { round: r, .. } => vec![
                ("call", Text(r.call)),
                ("outcome", Text(r.outcome)),
                ("took_s", Seconds(r.took)),
                ("masters", Count(r.masters)),
                ("yes", Count(r.yes)),
                ("no", Count(r.no)),
                ("restarting", Count(r.restarting)),
                ("failed", Count(r.failed)),
                ("unanswered", Count(r.unanswered)),
            ],
            _ => Vec::new(),
        }
    }
}

impl Happened {
    /// What a log line says, the same in every binding.
    pub fn summary(&self) -> &'static str {
        EVENTS[self.kind()].summary
    }

    /// Whether it is logged at WARNING (a loss, a spell at risk, an expired session: they
    /// matter with nothing set up); everything else is DEBUG.
    pub fn is_warning(&self) -> bool {
        EVENTS[self.kind()].warning
    }
}

/// The stable name of a primitive, as events carry it.
pub fn primitive_name(p: &Primitive) -> &'static str {
    match p {
        Primitive::Mutex => "mutex",
        Primitive::Semaphore { .. } => "semaphore",
        Primitive::Read { .. } => "read",
        Primitive::Write => "write",
        Primitive::Leader { .. } => "leader",
    }
}

/// What the engine remembers of one acquire, then of its lease (same number), for telemetry.
struct Tracked {
    primitive: &'static str,
    name: Option<Arc<str>>,
    started: Instant,
    queued: bool,
    granted: Option<Instant>,
}

/// The engine's telemetry state: off (nothing kept) or on with what each acquire and lease
/// needs for its measurements.
#[derive(Default)]
pub(crate) struct Recorder {
    config: Option<TelemetryConfig>,
    /// The instant of the input being handled: events raised while handling it are measured
    /// at it (the engine never reads a clock).
    now: Option<Instant>,
    tracked: HashMap<u64, Tracked>,
    /// When each held lease is held too long (its grant + `held_too_long`), soonest first;
    /// removed when told or when the lease ends.
    too_long: BTreeSet<(Instant, u64)>,
}

impl Recorder {
    pub fn enable(&mut self, config: TelemetryConfig) {
        self.config = Some(config);
    }

    /// Notes the instant of the input being handled.
    pub fn at(&mut self, now: Instant) {
        if self.config.is_some() {
            self.now = Some(now);
        }
    }

    fn event(&self, what: Happened, of: Option<&Tracked>) -> Option<Telemetry> {
        let config = self.config.as_ref()?;
        Some(Telemetry {
            what,
            backend: config.backend,
            primitive: of.map(|t| t.primitive),
            name: of.and_then(|t| t.name.clone()),
        })
    }

    fn since(&self, start: Instant) -> Duration {
        self.now.map_or(Duration::ZERO, |now| now.saturating_duration_since(start))
    }

    /// An acquire started.
    pub fn started(&mut self, now: Instant, op: OpId, primitive: &Primitive, name: &str) -> Option<Telemetry> {
        let t = self.track(now, primitive, name)?;
        let ev = self.event(Happened::AcquireStarted { op }, Some(&t));
        self.tracked.insert(op.0, t);
        ev
    }

    /// An acquire had to wait behind a holder.
    pub fn queued(&mut self, op: OpId) {
        if let Some(t) = self.tracked.get_mut(&op.0) {
            t.queued = true;
        }
    }

    /// An operation completed; an event if it was an acquire (granted, not acquired or ended).
    pub fn completed(&mut self, op: OpId, granted: bool, error: Option<&Error>) -> Option<Telemetry> {
        let t = self.tracked.get(&op.0).filter(|t| t.granted.is_none())?;
        let waited = self.since(t.started);
        let what = match (granted, error) {
            (true, _) => Happened::Granted { op, lease: LeaseId(op.0), waited, queued: t.queued },
            (false, None) => Happened::NotAcquired { op },
            (false, Some(e)) => match e.kind() {
                ErrorKind::Timeout => Happened::TimedOut { op, waited },
                ErrorKind::Cancelled => Happened::Cancelled { op, waited },
                _ => Happened::AcquireFailed { op, waited, code: e.code() },
            },
        };
        let ev = self.event(what, Some(t));
        if granted {
            let now = self.now;
            if let Some(t) = self.tracked.get_mut(&op.0) {
                let at = now.unwrap_or(t.started);
                t.granted = Some(at);
                self.watch_hold(at, op.0);
            }
        } else {
            self.tracked.remove(&op.0);
        }
        ev
    }

    /// Lease `lease` (of `primitive` on `name`) was adopted at `now`: tracked from then on as
    /// if granted then, so its renewals, risk, loss and release are told like any lease's.
    pub fn adopted(&mut self, now: Instant, lease: LeaseId, primitive: &Primitive, name: &str) -> Option<Telemetry> {
        let t = Tracked { granted: Some(now), ..self.track(now, primitive, name)? };
        let ev = self.event(Happened::Adopted { lease }, Some(&t));
        self.tracked.insert(lease.0, t);
        self.watch_hold(now, lease.0);
        ev
    }

    /// What is kept of an acquire or lease of `primitive` on `name` from `now` (the name only
    /// with `lock_names`); `None` with telemetry off.
    fn track(&self, now: Instant, primitive: &Primitive, name: &str) -> Option<Tracked> {
        let config = self.config.as_ref()?;
        let name = config.lock_names.then(|| Arc::from(name));
        Some(Tracked { primitive: primitive_name(primitive), name, started: now, queued: false, granted: None })
    }

    /// Lease `id`, held from `at`, is told once held `held_too_long` (if that is set).
    fn watch_hold(&mut self, at: Instant, id: u64) {
        if let Some(limit) = self.config.as_ref().and_then(|c| c.held_too_long) {
            self.too_long.insert((at + limit, id));
        }
    }

    /// Something happened to held lease `lease` that does not end it.
    pub fn lease(&self, what: Happened, lease: LeaseId) -> Option<Telemetry> {
        let t = self.tracked.get(&lease.0)?;
        self.event(what, Some(t))
    }

    /// Lease `lease` ended: released (`None`) or lost.
    pub fn ended(&mut self, lease: LeaseId, lost: Option<LossReason>) -> Option<Telemetry> {
        let t = self.tracked.remove(&lease.0)?;
        if let (Some(granted), Some(limit)) = (t.granted, self.config.as_ref().and_then(|c| c.held_too_long)) {
            self.too_long.remove(&(granted + limit, lease.0));
        }
        let held = self.since(t.granted.unwrap_or(t.started));
        let what = match lost {
            None => Happened::Released { lease, held },
            Some(reason) => Happened::Lost { lease, reason, held },
        };
        self.event(what, Some(&t))
    }

    /// When the next held lease is held too long (for the engine's `poll_timeout`).
    pub fn next_due(&self) -> Option<Instant> {
        self.too_long.first().map(|(at, _)| *at)
    }

    /// The leases held too long by `now`, each told once.
    pub fn held_too_long(&mut self, now: Instant) -> Vec<Telemetry> {
        let mut told = Vec::new();
        while let Some(&(at, id)) = self.too_long.first() {
            if at > now {
                break;
            }
            self.too_long.pop_first();
            if let Some(t) = self.tracked.get(&id) {
                let held = now.saturating_duration_since(t.granted.unwrap_or(t.started));
                told.extend(self.event(Happened::HeldTooLong { lease: LeaseId(id), held }, Some(t)));
            }
        }
        told
    }

    /// A Redlock round of the acquire or lease `of` was decided (nothing for an acquire or
    /// lease it does not track: telemetry off, or a round of an undo).
    pub fn round(&self, of: u64, acquire: bool, round: RoundVotes) -> Option<Telemetry> {
        let t = self.tracked.get(&of)?;
        self.event(Happened::RedlockRound { op: acquire.then_some(OpId(of)), round }, Some(t))
    }

    /// An event of the client's connection or session.
    pub fn client(&self, what: Happened) -> Option<Telemetry> {
        self.event(what, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of each variant: a new variant fails to compile here until it is listed, and its
    /// kind must then be in `EVENTS`.
    fn one_of_each() -> Vec<Happened> {
        let (op, lease, d) = (OpId(1), LeaseId(1), Duration::ZERO);
        let all = vec![
            Happened::AcquireStarted { op },
            Happened::Granted { op, lease, waited: d, queued: false },
            Happened::NotAcquired { op },
            Happened::TimedOut { op, waited: d },
            Happened::Cancelled { op, waited: d },
            Happened::AcquireFailed { op, waited: d, code: "CONNECTION" },
            Happened::Adopted { lease },
            Happened::Released { lease, held: d },
            Happened::Extended { lease },
            Happened::RenewalFailed { lease, code: "CONNECTION" },
            Happened::AtRisk { lease },
            Happened::Safe { lease },
            Happened::HeldTooLong { lease, held: d },
            Happened::Lost { lease, reason: LossReason::Expired, held: d },
            Happened::ConnectionLost,
            Happened::ConnectionRestored,
            Happened::SessionExpired,
            Happened::RedlockRound {
                op: None,
                round: RoundVotes { call: "renew", outcome: "confirmed", masters: 3, yes: 3, no: 0, restarting: 0, failed: 0, unanswered: 0, took: d },
            },
        ];
        for h in &all {
            // Exhaustive on purpose: a variant missing above does not compile.
            match h {
                Happened::AcquireStarted { .. }
                | Happened::Granted { .. }
                | Happened::NotAcquired { .. }
                | Happened::TimedOut { .. }
                | Happened::Cancelled { .. }
                | Happened::AcquireFailed { .. }
                | Happened::Adopted { .. }
                | Happened::Released { .. }
                | Happened::Extended { .. }
                | Happened::RenewalFailed { .. }
                | Happened::AtRisk { .. }
                | Happened::Safe { .. }
                | Happened::HeldTooLong { .. }
                | Happened::Lost { .. }
                | Happened::ConnectionLost
                | Happened::ConnectionRestored
                | Happened::SessionExpired
                | Happened::RedlockRound { .. } => {}
            }
        }
        all
    }

    #[test]
    fn every_kind_is_listed_once_with_its_measurements_keys() {
        let all = one_of_each();
        let kinds: Vec<usize> = all.iter().map(Happened::kind).collect();
        assert_eq!(kinds, (0..EVENTS.len()).collect::<Vec<_>>());
        for h in &all {
            let keys: Vec<&str> = h.measurements().iter().map(|(k, _)| *k).collect();
            assert_eq!(keys, EVENTS[h.kind()].measures, "{}", h.name());
        }
        assert_eq!((EVENTS[13].name, EVENTS[13].warning), ("lease.lost", true));
        assert_eq!(all[1].summary(), "lock granted");
    }
}
