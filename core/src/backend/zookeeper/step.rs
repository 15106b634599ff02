//! The steps of the ZooKeeper backend's calls: each engine call runs as a [`Job`] (the engine's
//! [`JobRunner`](crate::engine::job::JobRunner)) sending one [`ZkOp`] at a time, each tagged
//! with the [`Step`] its reply answers. Also what the backend knows of each token's nodes
//! ([`Owned`], [`Slot`]), which every step reads and updates.

use super::request::{ZkOp, ZkResult};
use crate::engine::RequestId;
use super::target::ZkTarget;
use crate::inspect::Mode;

/// One ZooKeeper call in progress (or a background step with no purpose).
pub(super) type Job = crate::engine::job::Job<ZkTarget, Step>;

/// What the backend knows of one node of a token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) enum Slot {
    /// None exists in this session (none created, or it was deleted).
    #[default]
    None,
    /// A create was sent whose reply was not seen: the node may exist (found by its prefix).
    Uncertain,
    /// It exists at `path`, created in transaction `czxid`.
    Known { path: String, czxid: i64 },
}

impl Slot {
    /// The node's path, if known.
    pub(super) fn path(&self) -> Option<&str> {
        match self {
            Slot::Known { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// The nodes of one owner token in the current session.
#[derive(Clone, Debug, Default)]
pub(super) struct Owned {
    /// The queue node (mutex, reader, writer, latch, or a semaphore's internal-mutex node).
    pub(super) node: Slot,
    /// A semaphore's lease node.
    pub(super) lease: Slot,
}

impl Owned {
    /// The lease slot if `lease`, else the queue node's.
    pub(super) fn slot_mut(&mut self, lease: bool) -> &mut Slot {
        if lease {
            &mut self.lease
        } else {
            &mut self.node
        }
    }
}

/// What became of a queue listing sent right behind a create (`list_ahead.rs`).
#[derive(Debug)]
pub(super) enum Ahead {
    /// On the wire; the create's reply has not decided yet.
    Pending,
    /// Answered before the create was.
    Answered(ZkResult),
    /// Its create failed (or its session ended): its reply is of no use when it comes.
    Unwanted,
}

/// The step a call's request is on.
#[derive(Clone, Debug)]
pub(crate) enum Step {
    /// A `Check` through the leader before `op`: its reply comes only once the server this
    /// client reads from has applied everything the leader ordered before it, so a listing
    /// that follows sees a create whose reply was lost (a follower's own view may lag).
    Sync { next: Box<Step>, op: ZkOp },
    /// Opening the extra session the token's nodes live in (its lease is shorter than the
    /// client's own session, `sessions.rs`).
    Open,
    /// Listing the queue directory for a node a lost create may have made.
    FindNode,
    /// Listing a semaphore's leases for a lease a lost create may have made.
    FindLease,
    /// Reading the stat of a node found by prefix: ours only if it belongs to this session.
    Adopt { lease: bool, path: String },
    /// Creating the queue node, with the queue's listing (request `listed`) sent right behind
    /// it (`list_ahead.rs`).
    CreateNode { listed: RequestId },
    /// Creating a semaphore's lease node.
    CreateLease,
    /// Listing the queue to learn our place.
    List,
    /// The same, by the listing sent right behind the create: one that does not show our node
    /// lists again rather than taking the node for gone.
    ListedAhead,
    /// Reading the node to wait behind, setting a watch on it.
    Watch { watch: String },
    /// Counting a semaphore's leases (with a child watch while waiting).
    Count,
    /// Checking the holder node through the leader before a grant (the session's last
    /// confirmation is too old to count a lease from).
    Confirm,
    /// Deleting a semaphore's internal-mutex node once its lease holds (no answer).
    Unlock,
    /// A renewal or extend: checking the holder node through the leader.
    Check,
    /// A release: listing directories where a lost create may have left a node.
    Sweep { dirs: Vec<String>, deletes: Vec<(String, bool)> },
    /// A release: deleting each node (and whether it is the holder node).
    Delete { rest: Vec<(String, bool)>, was_held: bool },
    /// An observe: listing the candidates.
    ObserveList,
    /// An observe: reading the leader's node.
    ObserveData,
    /// An inspect: listing the lock's children (`waiters`: a semaphore's internal mutex),
    /// with the nodes listed so far and the snapshot being filled.
    InspectList { waiters: bool, read: Vec<Entry>, snapshot: Box<crate::inspect::Snapshot> },
    /// An inspect: reading one listed node, the rest to read after it.
    InspectData { entry: Entry, rest: Vec<Entry>, snapshot: Box<crate::inspect::Snapshot> },
    /// A break: deleting the holder's node by its path.
    Break,
}

/// One listed node an inspect reads (its steps carry them): its path, whether it holds, how.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub(crate) path: String,
    pub(crate) holds: bool,
    pub(crate) mode: Mode,
}
