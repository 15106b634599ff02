//! What the etcd backend asks a driver to do, what the driver hands back, and what the cluster
//! pushes: plain data, so a native transport (the `etcd-client` crate) and a JavaScript one
//! (`etcd3`) perform the same requests. Recipe logic (which key to write, whom to watch, what a
//! reply means, when to keep a lease alive) is the backend's, never a transport's.
//!
//! Keys and values are bytes, as etcd has them: a key read back (a predecessor's, a leader's)
//! is compared and deleted exactly as the server spelled it.
//!
//! Rules every transport follows:
//! - Every request gets exactly one reply: its result, or a failure. A transport never retries
//!   a request on its own (the backend decides what a retry may do twice).
//! - [`EtcdOp::LeaseKeepAlive`] is one keepalive: the transport may send it on a long-lived
//!   `LeaseKeepAlive` stream, but the request's reply is the one answer to *that* keepalive
//!   (validity is counted from the request's send time); a stream that breaks fails the
//!   keepalives on it with [`EtcdFailure::ConnectionLost`]. The transport sends no keepalive of
//!   its own: the backend schedules them.
//! - Reads and transactions are linearizable (never `serializable`): a reply reflects every
//!   write committed before the request was sent.
//! - A watch is named by the backend's [`WatchId`]. Its events and its end are pushed as
//!   [`EtcdNotice`]s; a watch stream that breaks ends every watch on it
//!   ([`EtcdNotice::WatchEnded`]) — the transport does not re-create watches itself.

use std::fmt;

use crate::engine::RequestId;
use crate::error::Error;

/// One request for the driver.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdRequest {
    /// Pass back with the reply.
    pub id: RequestId,
    /// What to do.
    pub op: EtcdOp,
}

/// An etcd lease id (etcd's `int64`; `etcdctl` and `concurrency.Mutex` print it in lower-case
/// hex without leading zeros).
pub type LeaseId = i64;

/// The backend's name for one watch (unique for the backend's life).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WatchId(pub u64);

/// One etcd operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EtcdOp {
    /// `LeaseGrant` with a TTL of `ttl_secs` seconds (the server may grant more, never less).
    /// Reply [`EtcdReply::LeaseGranted`].
    LeaseGrant {
        /// The TTL asked for, in whole seconds (etcd's unit).
        ttl_secs: i64,
    },
    /// One `LeaseKeepAlive` of `lease`. Reply [`EtcdReply::KeptAlive`] with the TTL the leader
    /// set, or [`EtcdFailure::LeaseNotFound`] (etcd answers a keepalive of an expired or revoked
    /// lease with TTL 0: the transport reports that as `LeaseNotFound`).
    LeaseKeepAlive {
        /// The lease.
        lease: LeaseId,
    },
    /// `LeaseRevoke`: the lease ends and every key attached to it is deleted. Reply
    /// [`EtcdReply::LeaseRevoked`] or [`EtcdFailure::LeaseNotFound`].
    LeaseRevoke {
        /// The lease.
        lease: LeaseId,
    },
    /// A linearizable `Range`. Reply [`EtcdReply::Range`].
    Range(Range),
    /// A `Txn`: if every compare holds, the `success` ops run, else the `failure` ops; one
    /// revision for all of it. Reply [`EtcdReply::Txn`] (or [`EtcdFailure::LeaseNotFound`] if
    /// a put names a lease that is gone: the whole transaction is then refused).
    Txn(Txn),
    /// Creates a watch of `key` (or every key with the prefix `key`, if `prefix`) from
    /// `start_revision` on (events of that revision and later, so one that happened between a
    /// read and the watch is not missed). Reply [`EtcdReply::Watching`] once the server has
    /// created it; events follow as [`EtcdNotice::Watch`]. A start revision already compacted
    /// ends the watch at once ([`EtcdNotice::WatchEnded`]).
    Watch {
        /// The backend's name for it.
        watch: WatchId,
        /// The key, or the prefix.
        key: Vec<u8>,
        /// Whether `key` is a prefix.
        prefix: bool,
        /// The first revision to report.
        start_revision: i64,
    },
    /// Cancels a watch (no more notices for it; an unknown or ended watch is no error). Reply
    /// [`EtcdReply::WatchCanceled`].
    CancelWatch {
        /// The watch.
        watch: WatchId,
    },
}

/// Which of a range's keys come first (etcd's `SortTarget::CREATE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Etcd's default: by key, ascending.
    Key,
    /// Lowest create revision first (clientv3's `WithFirstCreate`).
    CreateAscending,
    /// Highest create revision first (clientv3's `WithLastCreate`).
    CreateDescending,
}

/// A `Range` request: one key, or every key with a prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    /// The key, or the prefix.
    pub key: Vec<u8>,
    /// Whether `key` is a prefix (etcd's range end `prefix + 1`).
    pub prefix: bool,
    /// The order of the keys returned.
    pub order: Order,
    /// At most this many keys (0: all). The reply's `count` still counts every match.
    pub limit: i64,
    /// Only keys created at or before this revision (0: no bound; clientv3's
    /// `WithMaxCreateRev`).
    pub max_create_revision: i64,
    /// Only the count, no keys (clientv3's `WithCountOnly`).
    pub count_only: bool,
    /// With `prefix`: start at this key (inclusive) instead of at `key`, the range still ending
    /// where `key`'s prefix does (a page of a listing, PROTOCOL.md §16).
    pub from: Option<Vec<u8>>,
}

impl Range {
    /// One key.
    pub fn key(key: impl Into<Vec<u8>>) -> Range {
        Range { key: key.into(), prefix: false, order: Order::Key, limit: 0, max_create_revision: 0, count_only: false, from: None }
    }

    /// Every key with `prefix`, in `order`, at most `limit` (0: all).
    pub fn prefix(prefix: impl Into<Vec<u8>>, order: Order, limit: i64) -> Range {
        Range { key: prefix.into(), prefix: true, order, limit, max_create_revision: 0, count_only: false, from: None }
    }
}

/// What a compare looks at, with the value it is compared to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompareTarget {
    /// The key's create revision (0 if the key does not exist).
    CreateRevision(i64),
    /// The key's last modification's revision (0 if the key does not exist).
    ModRevision(i64),
    /// The key's version: how many times it was written since created (0 if it does not exist).
    Version(i64),
    /// The key's value.
    Value(Vec<u8>),
    /// The lease the key is attached to (0: none, or the key does not exist).
    Lease(LeaseId),
}

/// How a compare compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompareOp {
    /// The key's field equals the target.
    Equal,
    /// It differs.
    NotEqual,
    /// It is less.
    Less,
    /// It is greater.
    Greater,
}

/// One compare of a transaction, on one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Compare {
    /// The key.
    pub key: Vec<u8>,
    /// How it compares.
    pub op: CompareOp,
    /// What it compares, and to what.
    pub target: CompareTarget,
}

impl Compare {
    /// `key`'s create revision equals `revision` (0: the key does not exist).
    pub fn created_at(key: impl Into<Vec<u8>>, revision: i64) -> Compare {
        Compare { key: key.into(), op: CompareOp::Equal, target: CompareTarget::CreateRevision(revision) }
    }
}

/// One operation of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOp {
    /// Writes `value` at `key`, attached to `lease` (0: none).
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// The lease (0: none).
        lease: LeaseId,
    },
    /// Deletes `key` (or every key with the prefix `key`, if `prefix`).
    Delete {
        /// The key, or the prefix.
        key: Vec<u8>,
        /// Whether `key` is a prefix.
        prefix: bool,
    },
    /// Reads, as [`EtcdOp::Range`] does.
    Range(Range),
}

/// A transaction (etcd's `TxnRequest`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Txn {
    /// What must hold for `success` to run.
    pub compares: Vec<Compare>,
    /// Run if every compare holds.
    pub success: Vec<TxnOp>,
    /// Run otherwise.
    pub failure: Vec<TxnOp>,
}

/// A key as the server has it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value (empty when deleted, in a delete event).
    pub value: Vec<u8>,
    /// The revision that created it: unique and increasing across the cluster's history (the
    /// fencing token of a lock key).
    pub create_revision: i64,
    /// The revision of its last change (of its deletion, in a delete event).
    pub mod_revision: i64,
    /// How many times it was written since created.
    pub version: i64,
    /// The lease it is attached to (0: none).
    pub lease: LeaseId,
}

/// The answer to one op of a transaction, in the order of the ops run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnReply {
    /// A put was done.
    Put,
    /// A delete removed this many keys.
    Delete {
        /// How many keys went.
        deleted: i64,
    },
    /// A range's keys.
    Range {
        /// The keys (at most the range's limit).
        kvs: Vec<KeyValue>,
        /// How many keys matched, ignoring the limit.
        count: i64,
    },
}

/// A request's successful reply. `revision` is the store's revision when the request was
/// served (the response header's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EtcdReply {
    /// A lease was granted.
    LeaseGranted {
        /// Its id.
        lease: LeaseId,
        /// The TTL the server granted, in seconds.
        ttl_secs: i64,
    },
    /// A keepalive was acknowledged: the lease lives `ttl_secs` from when the leader took it.
    KeptAlive {
        /// The lease.
        lease: LeaseId,
        /// The TTL set again, in seconds (positive).
        ttl_secs: i64,
    },
    /// The lease was revoked with its keys.
    LeaseRevoked,
    /// A range's keys.
    Range {
        /// The store's revision.
        revision: i64,
        /// The keys (at most the range's limit).
        kvs: Vec<KeyValue>,
        /// How many keys matched, ignoring the limit.
        count: i64,
    },
    /// A transaction ran.
    Txn {
        /// The store's revision after it.
        revision: i64,
        /// Whether the compares held (the success ops ran).
        succeeded: bool,
        /// The answers of the ops that ran.
        replies: Vec<TxnReply>,
    },
    /// The watch is created on the server.
    Watching,
    /// The watch is canceled.
    WatchCanceled,
}

/// Why a request failed, in the terms the recipes decide on.
#[derive(Clone, Debug, PartialEq)]
pub enum EtcdFailure {
    /// The connection dropped with the request on the wire (it may or may not have been
    /// applied), or no member could be reached: retryable.
    ConnectionLost(String),
    /// The cluster could not serve it now and did not apply it (no leader, too many requests,
    /// a request timed out inside the server): retryable. A transport that cannot tell
    /// whether a write was applied reports [`ConnectionLost`](Self::ConnectionLost).
    Unavailable(String),
    /// The lease is gone (expired or revoked): every key attached to it is deleted.
    LeaseNotFound,
    /// A watch's start revision was compacted away (the reads must be done again).
    Compacted {
        /// The oldest revision still kept.
        compact_revision: i64,
    },
    /// Anything else (authentication, permissions, a reply that makes no sense), as lockgate's
    /// error.
    Other(Error),
}

impl fmt::Display for EtcdFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtcdFailure::ConnectionLost(why) => write!(f, "connection lost: {why}"),
            EtcdFailure::Unavailable(why) => write!(f, "etcd unavailable: {why}"),
            EtcdFailure::LeaseNotFound => f.write_str("the etcd lease is gone"),
            EtcdFailure::Compacted { compact_revision } => {
                write!(f, "the revision was compacted (oldest kept: {compact_revision})")
            }
            EtcdFailure::Other(e) => write!(f, "{e}"),
        }
    }
}

/// What the driver hands back for an [`EtcdRequest`].
pub type EtcdResult = std::result::Result<EtcdReply, EtcdFailure>;

/// What happened to a watched key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// It was written (created or changed).
    Put,
    /// It was deleted (by a delete or its lease's end).
    Delete,
}

/// One event of a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WatchEvent {
    /// What happened.
    pub kind: EventKind,
    /// The key after the event (for a delete: the key, with `mod_revision` the deletion's).
    pub kv: KeyValue,
}

/// Something the cluster (or the transport) pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EtcdNotice {
    /// Events of a watch, in revision order.
    Watch {
        /// The watch.
        watch: WatchId,
        /// What happened.
        events: Vec<WatchEvent>,
    },
    /// A watch ended without being canceled by the backend: the server canceled it (its start
    /// revision was compacted, a permission changed) or its stream broke. Events may have been
    /// missed: the backend reads again.
    WatchEnded {
        /// The watch.
        watch: WatchId,
        /// Why, for messages.
        why: String,
    },
}
