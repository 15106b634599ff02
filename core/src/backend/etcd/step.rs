//! The steps of the etcd backend's calls: each engine call runs as a [`Job`] (the engine's
//! [`JobRunner`](crate::engine::job::JobRunner)) sending one [`EtcdOp`](super::request::EtcdOp)
//! at a time, each tagged with the [`Step`] its reply answers. Also what the backend knows of
//! each token's key ([`Slot`]), which every step reads and updates.

use super::request::{LeaseId, WatchId};
use super::target::EtcdTarget;
use crate::time::Instant;

/// One etcd call in progress.
pub(super) type Job = crate::engine::job::Job<EtcdTarget, Step>;

/// What the backend knows of a token's key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) enum Slot {
    /// None exists (none written, or it was deleted).
    #[default]
    None,
    /// A create was sent whose reply was not seen: the key may exist (its name is known).
    Uncertain { key: String, lease: LeaseId },
    /// It exists, created at revision `rev` on `lease`.
    Known { key: String, lease: LeaseId, rev: i64 },
}

impl Slot {
    /// The key's name, if one was written or may have been.
    pub(super) fn key(&self) -> Option<&str> {
        match self {
            Slot::None => None,
            Slot::Uncertain { key, .. } | Slot::Known { key, .. } => Some(key),
        }
    }

    /// The lease the key is (or would be) attached to.
    pub(super) fn lease(&self) -> Option<LeaseId> {
        match self {
            Slot::None => None,
            Slot::Uncertain { lease, .. } | Slot::Known { lease, .. } => Some(*lease),
        }
    }
}

/// The step a call's request is on.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// Not started.
    Start,
    /// Granting a lease of its own for the token's key (every session lease has a key in
    /// this family already).
    Grant,
    /// The create transaction: put the key if absent (else read it), and read the holder(s).
    Create,
    /// The check transaction: the key still has its create revision, and the holder(s).
    Check,
    /// Reading the key to wait behind.
    Predecessor,
    /// Creating the watch on it.
    Watch { watch: WatchId },
    /// A keepalive before a grant (the lease's last confirmation is too old to count from).
    Confirm,
    /// A renewal or extend: the keepalive.
    KeepAlive,
    /// A renewal or extend: reading the key (still ours, on our lease), after the keepalive
    /// sent at `confirmed` was acknowledged (what the renewal is counted from).
    CheckKey { confirmed: Instant },
    /// A release: reading a key whose create reply was lost.
    Find,
    /// A release: deleting the key if it still has its create revision.
    Delete,
    /// An observe: reading the first key.
    Observe,
    /// An inspect: reading every key under the lock's prefix.
    Inspect,
    /// A break: deleting the holder's key if it still has the create revision read.
    Break,
}
