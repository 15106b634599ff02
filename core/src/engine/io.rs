//! What crosses the engine boundary: identifiers, requests out, events out.

use crate::error::Error;
use crate::time::Instant;

/// Identifies one request the engine emitted; the driver hands the reply back with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// Identifies one operation the caller started (acquire, release, extend).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u64);

/// Identifies one held lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub u64);

/// One command: its arguments as bytes, starting with the command name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Command(pub Vec<Vec<u8>>);

impl Command {
    /// The command name, for logs and tests.
    pub fn name(&self) -> &str {
        self.0
            .first()
            .and_then(|n| std::str::from_utf8(n).ok())
            .unwrap_or("")
    }
}

/// Something the driver must do on the engine's behalf.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// Pass back to [`Engine::handle_reply`](super::Engine::handle_reply).
    pub id: RequestId,
    /// What to do.
    pub kind: RequestKind,
}

/// The work a [`Request`] asks for.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// Send the commands as one pipeline on the command connection and reply with one
    /// [`Reply`](crate::redis::reply::Reply) per command, in order (server errors stay in place
    /// as `Reply::Error`).
    Pipeline(Vec<Command>),
    /// Subscribe the notification connection to `channel`; reply with an empty vector once the
    /// server confirmed it. Messages then go to [`Engine::handle_notification`](super::Engine::handle_notification).
    Subscribe(String),
}

/// How an operation ended.
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

/// Something the caller must learn about. `O` is how an operation ends: [`Outcome`] for the
/// single-instance engine, [`RedlockOutcome`](crate::redlock::RedlockOutcome) for Redlock.
#[derive(Clone, Debug, PartialEq)]
pub enum Event<O = Outcome> {
    /// An operation finished.
    Completed {
        /// Which operation.
        op: OpId,
        /// Its result.
        outcome: O,
    },
    /// A watchdog renewal succeeded.
    Renewed {
        /// Which lease.
        lease: LeaseId,
        /// The new local validity.
        valid_until: Instant,
    },
    /// A lease is no longer held (renewal refused, expired locally, deleted behind its back).
    Lost {
        /// Which lease.
        lease: LeaseId,
        /// Why, as a `NOT_HELD` error.
        error: Error,
    },
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
