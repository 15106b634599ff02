//! What crosses the engine boundary whatever the backend: identifiers, outcomes, events, waits.
//! (Requests and replies are each backend's own types.)

use crate::error::Error;
use crate::time::Instant;

use super::ids::{LeaseId, OpId};

/// How an operation ended, for a backend whose grants carry fencing tokens (the Redis
/// backends; Redlock has its own outcome type, without fencing tokens).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The lock is held through `lease`.
    Acquired {
        /// Handle for extend/release/status.
        lease: LeaseId,
        /// Strictly greater than every token issued before for this lock name.
        fencing_token: u64,
        /// Local monotonic instant before which the lease is certainly still valid.
        valid_until: Instant,
    },
    /// `try_acquire` found the lock held.
    NotAcquired,
    /// Released; `was_held` tells whether the lease was still held at that moment.
    Released {
        /// False if the lease had already expired or been taken over.
        was_held: bool,
    },
    /// Extended; the new local validity.
    Extended {
        /// Local instant before which the lease is certainly valid.
        valid_until: Instant,
    },
    /// An election was observed: its current leader, if any.
    Observed(Option<LeaderInfo>),
    /// A lock was inspected.
    Inspected(crate::inspect::Snapshot),
    /// A lock was broken: what was removed, or `None` when nothing was (free, or no holder
    /// with the fencing token given).
    Broken(Option<crate::break_lock::Broken>),
    /// A page of locks was listed.
    Listed(crate::listing::Page),
    /// The operation failed; nothing it started is left on the server.
    Failed(Error),
}

/// The current leader of an election, as observed on the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderInfo {
    /// The value the leader published when it campaigned (e.g. its address).
    pub value: String,
    /// The leader's term: the fencing token of its grant, larger for every later leader.
    pub term: u64,
    /// The leader's remaining lease on the server when observed.
    pub remaining: crate::time::Duration,
}

pub use crate::primitive::Primitive;

/// How an operation ended, as the backend-agnostic engine records it; each backend turns it
/// into its callers' outcome type ([`Backend::Outcome`](super::Backend::Outcome)).
#[derive(Clone, Debug, PartialEq)]
pub enum Done {
    /// The lock is held through `lease`.
    Acquired {
        /// Handle for extend/release/status.
        lease: LeaseId,
        /// The grant's fencing token; `None` where the backend issues none.
        fencing_token: Option<u64>,
        /// Local monotonic instant before which the lease is certainly still valid.
        valid_until: Instant,
    },
    /// A one-shot attempt found the lock held.
    NotAcquired,
    /// Released; whether the lease was still held at that moment.
    Released {
        /// False if the lease had already expired or been taken over.
        was_held: bool,
    },
    /// Extended; the new local validity.
    Extended {
        /// Local instant before which the lease is certainly valid.
        valid_until: Instant,
    },
    /// An election was observed: its current leader, if any.
    Observed(Option<LeaderInfo>),
    /// A lock was inspected.
    Inspected(crate::inspect::Snapshot),
    /// A lock was broken: what was removed, or `None` when nothing was (free, or no holder
    /// with the fencing token given).
    Broken(Option<crate::break_lock::Broken>),
    /// A page of locks was listed.
    Listed(crate::listing::Page),
    /// The operation failed.
    Failed(Error),
}

/// Something the caller must learn about. `O` is how an operation ends: the backend's
/// [`Backend::Outcome`](super::Backend::Outcome) ([`Outcome`] for the Redis engine).
#[derive(Clone, Debug, PartialEq)]
pub enum Event<O = Outcome> {
    /// An operation finished.
    Completed {
        /// Which operation.
        op: OpId,
        /// Its result.
        outcome: O,
    },
    /// A watchdog renewal succeeded (or an extend confirmed a lease at risk): the lease is
    /// confirmed until `valid_until` and no longer at risk.
    Renewed {
        /// Which lease.
        lease: LeaseId,
        /// The new local validity.
        valid_until: Instant,
    },
    /// A lease is at risk: the engine cannot confirm it right now (its server is unreachable, its
    /// session disconnected, its renewals fail), so it stays valid only until `valid_until`
    /// unless contact returns first. A later `Renewed` means it is safe again; `Lost` that it
    /// ended. Emitted once per spell, not per failed attempt.
    AtRisk {
        /// Which lease.
        lease: LeaseId,
        /// Until when it is certainly still valid, however the spell ends.
        valid_until: Instant,
    },
    /// A lease is no longer held (renewal refused, expired locally, deleted behind its back).
    Lost {
        /// Which lease.
        lease: LeaseId,
        /// Why, as a `NOT_HELD` error.
        error: Error,
    },
    /// A telemetry event (acquire started, granted, timed out, lease lost, ...): raised only
    /// by an engine whose driver turned telemetry on
    /// ([`enable_telemetry`](super::LockEngine::enable_telemetry)); for logs and metrics, never
    /// needed to drive a call.
    Telemetry(super::telemetry::Telemetry),
}

/// How long an acquire may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// One attempt; never queue.
    Try,
    /// Queue and wait up to this long.
    For(crate::time::Duration),
    /// Queue and wait until acquired or cancelled.
    Forever,
}
