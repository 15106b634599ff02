//! What a connected backend can do, as plain data: every binding exposes it field by field
//! through [`Capabilities::pairs`] (no per-field code), and every handle that needs a capability
//! asks [`Capabilities::require`] first, so a backend that lacks it fails the same way in every
//! language: `UNSUPPORTED`, before any network call, naming the backend and its URL scheme.
//!
//! Pure data, no I/O, wasm-safe. `connect::ClientOptions::capabilities` fills it in for a URL.

use std::fmt;

use crate::error::{Error, Result};

/// One thing a backend may or may not offer (the fields of [`Capabilities`], by name).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Grants carry fencing tokens, strictly increasing per lock name.
    Fencing,
    /// Waiters queue and are served in arrival order, woken by the release (no polling).
    Fifo,
    /// Counting semaphores.
    Semaphore,
    /// Read-write locks.
    ReadWrite,
    /// Leader elections (campaign, resign).
    Election,
    /// Observing an election's current leader and term.
    Observe,
    /// Reentrant handles (a holder acquiring again adds a hold).
    Reentrant,
    /// This client confirms grants and renewals on replicas before trusting them.
    ReplicaAcks,
    /// Read-write locks whose readers may pass queued writers (`writers_first: false`).
    ReadersFirst,
    /// The server checks parameters every client of one lock must agree on (a semaphore's
    /// permits, a read-write lock's `writers_first`) and refuses a mismatch.
    AgreedParameters,
    /// Waiters' queue entries have a lease of their own (`entry_ttl`): a crashed waiter is
    /// skipped after it, not after a session timeout.
    EntryTtl,
    /// Listing the locks under a name prefix (PROTOCOL.md §16); memcached cannot enumerate its
    /// keys, so it never will.
    ListLocks,
    /// Handing a lease to another client (PROTOCOL.md §17): its identity exported, adopted
    /// there. Not where a holder's entry lives in its own session (ZooKeeper, etcd).
    Adopt,
    /// A minimum hold (`min_hold`) kept on the server after an early release, even once the
    /// holder's process is gone: the backend's entries can outlive their process with an expiry
    /// of their own. Not ZooKeeper (ephemeral nodes die with the session) nor etcd (keys live on
    /// leases the client keeps alive while it runs).
    MinHold,
}

impl Capability {
    /// Every capability, in the order of [`Capabilities::pairs`].
    pub const ALL: [Capability; 14] = [
        Capability::Fencing,
        Capability::Fifo,
        Capability::Semaphore,
        Capability::ReadWrite,
        Capability::Election,
        Capability::Observe,
        Capability::Reentrant,
        Capability::ReplicaAcks,
        Capability::ReadersFirst,
        Capability::AgreedParameters,
        Capability::EntryTtl,
        Capability::ListLocks,
        Capability::Adopt,
        Capability::MinHold,
    ];

    /// The stable snake_case name (a binding re-cases it: `readWrite` in Java and JS).
    pub fn name(self) -> &'static str {
        match self {
            Capability::Fencing => "fencing",
            Capability::Fifo => "fifo",
            Capability::Semaphore => "semaphore",
            Capability::ReadWrite => "read_write",
            Capability::Election => "election",
            Capability::Observe => "observe",
            Capability::Reentrant => "reentrant",
            Capability::ReplicaAcks => "replica_acks",
            Capability::ReadersFirst => "readers_first",
            Capability::AgreedParameters => "agreed_parameters",
            Capability::EntryTtl => "entry_ttl",
            Capability::ListLocks => "list_locks",
            Capability::Adopt => "adopt",
            Capability::MinHold => "min_hold",
        }
    }

    /// The capability named `name` (snake_case, as [`name`](Self::name) gives it).
    pub fn from_name(name: &str) -> Option<Capability> {
        Capability::ALL.into_iter().find(|c| c.name() == name)
    }

    /// What the capability offers, as the subject of an error message.
    fn noun(self) -> &'static str {
        match self {
            Capability::Fencing => "fencing tokens",
            Capability::Fifo => "first-in-first-out waiting",
            Capability::Semaphore => "semaphores",
            Capability::ReadWrite => "read-write locks",
            Capability::Election => "leader elections",
            Capability::Observe => "observing a leader",
            Capability::Reentrant => "reentrant locks",
            Capability::ReplicaAcks => "replica acknowledgements",
            Capability::ReadersFirst => "readers-first read-write locks",
            Capability::AgreedParameters => "server-checked lock parameters",
            Capability::EntryTtl => "waiter entry leases",
            Capability::ListLocks => "lock listings",
            Capability::Adopt => "adopting another client's lease",
            Capability::MinHold => "minimum holds kept after the holder exits",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What one connected client's backend can do. Every mutex backend offers acquire, try-acquire,
/// extend, release, automatic renewal and loss signals; the fields say what comes on top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The backend's name for messages (`"Redis"`, `"Redis Cluster"`, `"Redlock"`).
    pub backend: &'static str,
    /// The URL scheme the client was made with (`"redis"`, `"rediss+redlock"`, ...).
    pub scheme: &'static str,
    /// See [`Capability::Fencing`]. Without it `Lease::fencing_token` is absent.
    pub fencing: bool,
    /// See [`Capability::Fifo`].
    pub fifo: bool,
    /// See [`Capability::Semaphore`].
    pub semaphore: bool,
    /// See [`Capability::ReadWrite`].
    pub read_write: bool,
    /// See [`Capability::Election`].
    pub election: bool,
    /// See [`Capability::Observe`].
    pub observe: bool,
    /// See [`Capability::Reentrant`].
    pub reentrant: bool,
    /// See [`Capability::ReplicaAcks`]: on for this client, not merely possible.
    pub replica_acks: bool,
    /// See [`Capability::ReadersFirst`].
    pub readers_first: bool,
    /// See [`Capability::AgreedParameters`].
    pub agreed_parameters: bool,
    /// See [`Capability::EntryTtl`].
    pub entry_ttl: bool,
    /// See [`Capability::ListLocks`].
    pub list_locks: bool,
    /// See [`Capability::Adopt`].
    pub adopt: bool,
    /// See [`Capability::MinHold`].
    pub min_hold: bool,
}

impl Capabilities {
    /// Whether `what` is offered.
    pub fn has(&self, what: Capability) -> bool {
        match what {
            Capability::Fencing => self.fencing,
            Capability::Fifo => self.fifo,
            Capability::Semaphore => self.semaphore,
            Capability::ReadWrite => self.read_write,
            Capability::Election => self.election,
            Capability::Observe => self.observe,
            Capability::Reentrant => self.reentrant,
            Capability::ReplicaAcks => self.replica_acks,
            Capability::ReadersFirst => self.readers_first,
            Capability::AgreedParameters => self.agreed_parameters,
            Capability::EntryTtl => self.entry_ttl,
            Capability::ListLocks => self.list_locks,
            Capability::Adopt => self.adopt,
            Capability::MinHold => self.min_hold,
        }
    }

    /// Mutexes only, no capability beyond them, for `backend` (its `scheme`): the base a
    /// backend that offers little names its few extras on (`Capabilities { reentrant: true,
    /// ..Capabilities::mutexes_only(..) }`).
    pub fn mutexes_only(backend: &'static str, scheme: &'static str) -> Capabilities {
        Capabilities {
            backend,
            scheme,
            fencing: false,
            fifo: false,
            semaphore: false,
            read_write: false,
            election: false,
            observe: false,
            reentrant: false,
            replica_acks: false,
            readers_first: false,
            agreed_parameters: false,
            entry_ttl: false,
            list_locks: false,
            adopt: false,
            min_hold: false,
        }
    }

    /// Every capability as `(name, offered)`, in [`Capability::ALL`] order: what a binding
    /// turns into its record, dict or object without naming any field.
    pub fn pairs(&self) -> Vec<(&'static str, bool)> {
        Capability::ALL.into_iter().map(|c| (c.name(), self.has(c))).collect()
    }

    /// `Ok` if `what` is offered, else `UNSUPPORTED` naming the backend and its scheme.
    pub fn require(&self, what: Capability) -> Result<()> {
        if self.has(what) {
            return Ok(());
        }
        Err(Error::unsupported(format!(
            "{} not supported by a {} client ({}://): it offers {}",
            match what {
                Capability::Observe | Capability::Adopt => format!("{} is", what.noun()),
                other => format!("{} are", other.noun()),
            },
            self.backend,
            self.scheme,
            self.offered()
        )))
    }

    /// The offered capabilities for messages: `mutexes, fencing tokens, ...`.
    fn offered(&self) -> String {
        let mut parts = vec!["mutexes"];
        parts.extend(Capability::ALL.into_iter().filter(|c| self.has(*c)).map(Capability::noun));
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// A backend that offers mutexes and nothing more.
    fn bare() -> Capabilities {
        Capabilities::mutexes_only("Redlock", "redlock")
    }

    /// What a Redlock offers (`connect::Backend::capabilities` is the source; checked there).
    fn redlock() -> Capabilities {
        Capabilities { reentrant: true, list_locks: true, adopt: true, min_hold: true, ..bare() }
    }

    #[test]
    fn pairs_name_every_field_once() {
        let all = Capabilities {
            fencing: true,
            fifo: true,
            semaphore: true,
            read_write: true,
            election: true,
            observe: true,
            reentrant: true,
            replica_acks: true,
            readers_first: true,
            agreed_parameters: true,
            entry_ttl: true,
            list_locks: true,
            adopt: true,
            min_hold: true,
            ..bare()
        };
        let pairs = all.pairs();
        assert_eq!(pairs.len(), Capability::ALL.len());
        assert!(pairs.iter().all(|(_, on)| *on));
        assert!(bare().pairs().iter().all(|(_, on)| !*on));
        let names: std::collections::HashSet<_> = pairs.iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), pairs.len());
        for c in Capability::ALL {
            assert_eq!(Capability::from_name(c.name()), Some(c));
            // One field on, the rest off: `has` and `pairs` read the same field.
            let mut one = bare();
            match c {
                Capability::Fencing => one.fencing = true,
                Capability::Fifo => one.fifo = true,
                Capability::Semaphore => one.semaphore = true,
                Capability::ReadWrite => one.read_write = true,
                Capability::Election => one.election = true,
                Capability::Observe => one.observe = true,
                Capability::Reentrant => one.reentrant = true,
                Capability::ReplicaAcks => one.replica_acks = true,
                Capability::ReadersFirst => one.readers_first = true,
                Capability::AgreedParameters => one.agreed_parameters = true,
                Capability::EntryTtl => one.entry_ttl = true,
                Capability::ListLocks => one.list_locks = true,
                Capability::Adopt => one.adopt = true,
                Capability::MinHold => one.min_hold = true,
            }
            assert_eq!(one.pairs().iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect::<Vec<_>>(), [c.name()]);
        }
        assert_eq!(Capability::from_name("mutex"), None);
    }

    #[test]
    fn require_names_the_backend_and_scheme() {
        assert_eq!(redlock(), crate::connect::Backend::Redlock.capabilities(false, false));
        let e = redlock().require(Capability::Semaphore).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(!e.retryable());
        assert_eq!(
            e.message(),
            "semaphores are not supported by a Redlock client (redlock://): it offers mutexes, reentrant locks, \
             lock listings, adopting another client's lease, minimum holds kept after the holder exits"
        );
        let e = redlock().require(Capability::Observe).unwrap_err();
        assert!(e.message().starts_with("observing a leader is not supported by a Redlock client"), "{e}");
        let single = Capabilities { backend: "Redis Cluster", scheme: "redis+cluster", fencing: true, ..bare() };
        single.require(Capability::Fencing).unwrap();
        assert_eq!(
            single.require(Capability::ReplicaAcks).unwrap_err().message(),
            "replica acknowledgements are not supported by a Redis Cluster client (redis+cluster://): it offers \
             mutexes, fencing tokens"
        );
    }
}
