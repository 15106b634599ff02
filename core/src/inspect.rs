//! Inspecting one lock: who holds it, since when, for how much longer, and who waits behind it
//! (issue 25). A [`Snapshot`] is what a backend read in one request, in the same shape for
//! every backend and primitive; PROTOCOL.md says per backend what it reads.
//!
//! A snapshot is racy by nature: the lock may change the moment after it was read. It is for
//! humans and dashboards; to decide whether to write, use the fencing token.

use crate::data::Data;
use crate::error::{Error, Result};
use crate::primitive::Primitive;
use crate::time::Duration;

/// Which primitive a name is inspected as: each kind keeps its own entries, so a mutex and a
/// semaphore of the same name are unrelated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The exclusive mutex.
    Mutex,
    /// A read-write lock (its readers and writer together).
    ReadWrite,
    /// A counting semaphore.
    Semaphore,
    /// A leader election (the leader and the candidates).
    Election,
}

impl Kind {
    /// The kind's name as every binding spells it: `mutex`, `rw`, `semaphore`, `election`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::ReadWrite => "rw",
            Kind::Semaphore => "semaphore",
            Kind::Election => "election",
        }
    }

    /// The kind named `s` ([`as_str`](Self::as_str)); `INVALID_ARGUMENT` otherwise.
    pub fn parse(s: &str) -> Result<Kind> {
        match s {
            "mutex" => Ok(Kind::Mutex),
            "rw" => Ok(Kind::ReadWrite),
            "semaphore" => Ok(Kind::Semaphore),
            "election" => Ok(Kind::Election),
            _ => Err(Error::invalid("kind must be one of mutex, rw, semaphore, election")),
        }
    }

    /// The kind a handle of `primitive` inspects.
    pub fn of(primitive: &Primitive) -> Kind {
        match primitive {
            Primitive::Mutex => Kind::Mutex,
            Primitive::Semaphore { .. } => Kind::Semaphore,
            Primitive::Read { .. } | Primitive::Write => Kind::ReadWrite,
            Primitive::Leader { .. } => Kind::Election,
        }
    }

    /// A primitive of this kind, to resolve a backend's target: every primitive of one kind
    /// addresses the same entries (a semaphore's count and a reader's policy are settings of
    /// an acquire, not of the entries' names).
    pub fn primitive(self) -> Primitive {
        match self {
            Kind::Mutex => Primitive::Mutex,
            Kind::ReadWrite => Primitive::Write,
            Kind::Semaphore => Primitive::Semaphore { permits: 1 },
            Kind::Election => Primitive::Leader { value: String::new() },
        }
    }
}

/// How an entry holds or waits: alone (a mutex, a writer, a leader) or beside others (a
/// reader, a semaphore permit).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Alone: a mutex holder, a writer, an election leader or candidate.
    Exclusive,
    /// Beside others of its mode: a reader, a semaphore permit.
    Shared,
}

/// One holder as the server has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The label its client stored (PROTOCOL.md §12), or `None` (a peer's or an older
    /// client's entry, or a backend that stores none).
    pub label: Option<String>,
    /// Its grant's fencing token, where the backend issues them.
    pub fencing_token: Option<u64>,
    /// How long it has held, by the server's clock, where the server records when.
    pub held_for: Option<Duration>,
    /// Its remaining lease as the server would enforce it; on ZooKeeper and etcd (session
    /// bound entries) the longest it can outlive its session's last keepalive.
    pub remaining: Option<Duration>,
    /// Alone or shared (a reader, a permit).
    pub mode: Mode,
    /// The value an election leader published, else `None`.
    pub value: Option<String>,
    /// The reentrant holds this client has on it, where the holder is this client; `None`
    /// for another client's holder.
    pub holds: Option<u32>,
    /// The owner token, to match this client's own leases; never leaves the core (the engine
    /// clears it before a snapshot is handed out).
    pub(crate) token: Option<String>,
    /// The entry's own name on the server where a break removes it by name rather than by
    /// owner token (an etcd key, a ZooKeeper node path: a peer's entry has no lockgate token);
    /// never leaves the core either.
    pub(crate) entry: Option<String>,
}

impl Holder {
    /// A holder with its label and fencing token; the rest unknown.
    pub(crate) fn new(token: Option<String>, label: Option<String>, fencing_token: Option<u64>, mode: Mode) -> Holder {
        Holder { label, fencing_token, held_for: None, remaining: None, mode, value: None, holds: None, token, entry: None }
    }
}

/// One waiter, in queue order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Waiter {
    /// The label its client stored, or `None`.
    pub label: Option<String>,
    /// How long it has waited, by the server's clock, where the server records when.
    pub waiting_for: Option<Duration>,
    /// What it waits for: alone (a mutex, a writer, a candidate) or shared (a reader, a
    /// permit).
    pub mode: Mode,
}

/// One lock as read from its server in one request: holders and waiters, in the same shape for
/// every backend. Unknown names read as empty, not as an error. For humans and dashboards; to
/// decide whether to write, use the fencing token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The kind inspected.
    pub kind: Kind,
    /// The holders: a mutex's or writer's one, a semaphore's permits taken, the readers, an
    /// election's leader. Oldest grant first where the backend orders grants.
    pub holders: Vec<Holder>,
    /// The waiters in queue order (an election's other candidates). Empty where the backend
    /// has no queue (memcached: waiters poll and leave no entry).
    pub waiters: Vec<Waiter>,
    /// A semaphore's permit count as its holders agreed on it, where the server records it
    /// (`None` when idle, for other kinds, or where the backend keeps no count).
    pub permits: Option<u32>,
}

impl Snapshot {
    /// An empty snapshot of `kind`: nobody holds or waits.
    pub fn empty(kind: Kind) -> Snapshot {
        Snapshot { kind, holders: Vec::new(), waiters: Vec::new(), permits: None }
    }

    /// Whether anyone holds it (racy: for humans and dashboards).
    pub fn is_locked(&self) -> bool {
        !self.holders.is_empty()
    }

    /// The longest remaining lease among the holders, where known (Redisson's
    /// `remainTimeToLive`; racy: for humans and dashboards).
    pub fn remaining(&self) -> Option<Duration> {
        self.holders.iter().filter_map(|h| h.remaining).max()
    }

    /// The exclusive holder (a mutex's, a writer, an election leader), if any.
    pub fn writer(&self) -> Option<&Holder> {
        self.holders.iter().find(|h| h.mode == Mode::Exclusive)
    }

    /// The shared holders (readers, semaphore permits).
    pub fn readers(&self) -> impl Iterator<Item = &Holder> {
        self.holders.iter().filter(|h| h.mode == Mode::Shared)
    }

    /// The snapshot as plain [`Data`], for a binding to convert generically: a map with `kind`,
    /// `locked`, `holders` (each `label`, `fencing_token`, `held_for_ms`, `remaining_ms`,
    /// `mode` = `exclusive`/`shared`, `value`, `holds`), `waiters` (each `label`,
    /// `waiting_for_ms`, `mode`), `permits` and `remaining_ms` (the longest holder's); absent
    /// values are `Null`. `camel` spells the keys in camelCase (`fencingToken`, `heldForMs`).
    pub fn to_data(&self, camel: bool) -> Data {
        let key = |snake: &'static str, camel_case: &'static str| if camel { camel_case } else { snake };
        let ms = |d: Option<Duration>| d.map_or(Data::Null, |d| Data::Int(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)));
        let text = |s: &Option<String>| s.clone().map_or(Data::Null, Data::Str);
        let mode = |m: Mode| Data::Str(match m {
            Mode::Exclusive => "exclusive".into(),
            Mode::Shared => "shared".into(),
        });
        let holders = self.holders.iter().map(|h| {
            Data::map([
                ("label", text(&h.label)),
                (key("fencing_token", "fencingToken"), h.fencing_token.map_or(Data::Null, |t| Data::Int(i64::try_from(t).unwrap_or(i64::MAX)))),
                (key("held_for_ms", "heldForMs"), ms(h.held_for)),
                (key("remaining_ms", "remainingMs"), ms(h.remaining)),
                ("mode", mode(h.mode)),
                ("value", text(&h.value)),
                ("holds", h.holds.map_or(Data::Null, |n| Data::Int(n.into()))),
            ])
        });
        let waiters = self.waiters.iter().map(|w| {
            Data::map([("label", text(&w.label)), (key("waiting_for_ms", "waitingForMs"), ms(w.waiting_for)), ("mode", mode(w.mode))])
        });
        Data::map([
            ("kind", Data::Str(self.kind.as_str().into())),
            ("locked", Data::Bool(self.is_locked())),
            ("holders", Data::List(holders.collect())),
            ("waiters", Data::List(waiters.collect())),
            ("permits", self.permits.map_or(Data::Null, |p| Data::Int(p.into()))),
            (key("remaining_ms", "remainingMs"), ms(self.remaining())),
        ])
    }

    /// Fills in what only this client knows and takes out what must not leave the core: each
    /// holder whose owner token is one of `own` (token, reentrant holds) gets its holds; every
    /// owner token is cleared.
    pub(crate) fn settle<'a>(&mut self, own: impl Fn(&str) -> Option<u32> + 'a) {
        for h in &mut self.holders {
            h.entry = None;
            if let Some(t) = h.token.take() {
                h.holds = own(&t);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_and_refuse_unknown_names() {
        for k in [Kind::Mutex, Kind::ReadWrite, Kind::Semaphore, Kind::Election] {
            assert_eq!(Kind::parse(k.as_str()).unwrap(), k);
            assert_eq!(Kind::of(&k.primitive()), k);
        }
        assert_eq!(Kind::parse("lock").unwrap_err().code(), "INVALID_ARGUMENT");
    }

    #[test]
    fn settle_marks_own_holders_and_drops_tokens() {
        let mut s = Snapshot::empty(Kind::ReadWrite);
        s.holders.push(Holder::new(Some("a".into()), Some("me".into()), Some(3), Mode::Shared));
        s.holders.push(Holder::new(Some("b".into()), None, Some(4), Mode::Shared));
        s.settle(|t| (t == "a").then_some(2));
        assert_eq!(s.holders[0].holds, Some(2));
        assert_eq!(s.holders[1].holds, None);
        assert!(s.holders.iter().all(|h| h.token.is_none()));
        assert!(s.is_locked() && s.writer().is_none() && s.readers().count() == 2);
        let d = s.to_data(true);
        assert_eq!(d.get("kind").and_then(Data::as_str), Some("rw"));
        let first = &d.get("holders").and_then(Data::as_list).unwrap()[0];
        assert_eq!(first.get("fencingToken").and_then(Data::as_int), Some(3));
        assert_eq!(first.get("holds").and_then(Data::as_int), Some(2));
        assert!(first.get("token").is_none() && first.get("remainingMs").is_none());
        assert!(s.to_data(false).get("holders").and_then(Data::as_list).unwrap()[1].get("fencing_token").is_some());
    }
}
