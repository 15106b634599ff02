//! What the ZooKeeper backend asks a driver to do, what the driver hands back, and what the
//! ensemble pushes: plain data, so a native transport (the `zookeeper-client` crate) and a
//! JavaScript one (`node-zookeeper-client`) perform the same requests. Recipe logic (which node
//! to create, whom to watch, what a reply means) is the backend's, never a transport's.

use std::fmt;

use crate::engine::RequestId;
use crate::error::Error;
use crate::time::Duration;

/// One request for the driver.
#[must_use]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZkRequest {
    /// Pass back with the reply.
    pub id: RequestId,
    /// What to do.
    pub op: ZkOp,
    /// The session it runs in: `None`, the client's own session (asked for `session_timeout`);
    /// `Some(t)`, the client's extra session asked for a timeout of `t`, where the nodes of
    /// locks whose lease is shorter than the client's session live, so that a crashed holder's
    /// nodes go within its lease (PROTOCOL.md §9, "Sessions sized from the lock").
    pub session: Option<Duration>,
}

impl ZkRequest {
    /// A request in the client's own session.
    pub fn own(id: RequestId, op: ZkOp) -> Self {
        ZkRequest { id, op, session: None }
    }
}

/// How a node is created (ZooKeeper's `CreateMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CreateMode {
    /// Lives until deleted.
    Persistent,
    /// Lives until deleted or the creating session ends.
    Ephemeral,
    /// Ephemeral, with a 10-digit sequence number appended to the name by the server.
    EphemeralSequential,
    /// Deleted by the server some time after its last child goes (ZooKeeper ≥ 3.5); what
    /// lockgate creates for a lock's parent nodes, so nothing is left after a clean shutdown.
    Container,
}

/// One ZooKeeper operation. Paths are absolute within the URL's chroot (the transport adds
/// the chroot; replies never include it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkOp {
    /// Open the request's session (connect to some member of the ensemble and handshake),
    /// replacing a session that expired; a session that lives is answered as it is. Reply
    /// [`ZkReply::Session`].
    OpenSession,
    /// Close the request's extra session (the backend sends it once no node of the client
    /// lives there any more); a later `OpenSession` of it opens a new one. Reply
    /// [`ZkReply::Closed`].
    CloseSession,
    /// Create `path` with `data` in `mode`; missing parents are created first as
    /// [containers](CreateMode::Container). Reply [`ZkReply::Created`] (the sequential name
    /// the server chose) or [`ZkFailure::NodeExists`] / [`ZkFailure::NoNode`].
    Create {
        /// The node's path (for a sequential mode, the prefix the number is appended to).
        path: String,
        /// The node's data.
        data: Vec<u8>,
        /// How the node lives.
        mode: CreateMode,
    },
    /// Delete `path` if its version is `version` (`None`: any version). Reply
    /// [`ZkReply::Deleted`], or [`ZkFailure::NoNode`] / [`ZkFailure::BadVersion`] /
    /// [`ZkFailure::NotEmpty`].
    Delete {
        /// The node.
        path: String,
        /// The version the node must have.
        version: Option<i32>,
    },
    /// The children of `path` (names only, unsorted). With `watch`, one child watch is set:
    /// [`ZkNotice::Watch`] with [`WatchEvent::ChildrenChanged`] (or `Deleted`) fires once.
    /// Reply [`ZkReply::Children`] or [`ZkFailure::NoNode`].
    Children {
        /// The parent.
        path: String,
        /// Whether to set a child watch.
        watch: bool,
    },
    /// Whether `path` exists, with its stat. With `watch`, one watch is set that fires when
    /// the node is created, deleted or changed. Reply [`ZkReply::Exists`].
    Exists {
        /// The node.
        path: String,
        /// Whether to set a watch.
        watch: bool,
    },
    /// Checks, through the ensemble's leader, that `path` exists (with `version` if given):
    /// ZooKeeper's `multi` holding one `check` op. Being a write, it is refused with
    /// [`ZkFailure::SessionExpired`] once the leader has expired the session, which a read
    /// served by a follower may not be; it changes nothing and fires no watch. Reply
    /// [`ZkReply::Checked`], or [`ZkFailure::NoNode`] / [`ZkFailure::BadVersion`].
    Check {
        /// The node.
        path: String,
        /// The version the node must have (`None`: any).
        version: Option<i32>,
    },
    /// The data and stat of `path`. With `watch`, one data watch is set (fires on change or
    /// deletion). Reply [`ZkReply::Data`] or [`ZkFailure::NoNode`].
    GetData {
        /// The node.
        path: String,
        /// Whether to set a watch.
        watch: bool,
    },
}

/// The parts of a node's stat the recipes read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// The zxid of the transaction that created the node: unique and increasing across the
    /// ensemble's history (the fencing token).
    pub czxid: i64,
    /// The zxid of the node's last change.
    pub mzxid: i64,
    /// The data version.
    pub version: i32,
    /// The child version (changes of the child list).
    pub cversion: i32,
    /// The session that owns the node if it is ephemeral, else 0.
    pub ephemeral_owner: i64,
    /// How many children it has.
    pub num_children: i32,
}

/// A request's successful reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkReply {
    /// The session is open.
    Session {
        /// The session's id (the `ephemeral_owner` of its nodes).
        id: i64,
        /// The timeout the ensemble granted (it may differ from the one asked for).
        timeout: Duration,
    },
    /// The node was created.
    Created {
        /// Its path, with the sequence number for a sequential mode.
        path: String,
        /// Its stat.
        stat: Stat,
    },
    /// The node was deleted.
    Deleted,
    /// The session was closed.
    Closed,
    /// The check held.
    Checked,
    /// The child names.
    Children(Vec<String>),
    /// Whether the node exists.
    Exists(Option<Stat>),
    /// The node's data and stat.
    Data(Vec<u8>, Stat),
}

/// Why a request failed, in the terms a recipe decides on.
#[derive(Clone, Debug, PartialEq)]
pub enum ZkFailure {
    /// The node (or a parent, for a create) does not exist.
    NoNode,
    /// The node exists already.
    NodeExists,
    /// The node's version is not the one given.
    BadVersion,
    /// The node has children.
    NotEmpty,
    /// The connection dropped with the request on the wire (it may or may not have been
    /// applied) or no member could be reached: retryable within the session.
    ConnectionLoss(String),
    /// The session expired on the ensemble: every ephemeral node of it is gone.
    SessionExpired,
    /// Anything else (authentication, ACLs, a reply that makes no sense), as lockgate's error.
    Other(Error),
}

impl fmt::Display for ZkFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZkFailure::NoNode => f.write_str("no such node"),
            ZkFailure::NodeExists => f.write_str("the node exists"),
            ZkFailure::BadVersion => f.write_str("the node's version changed"),
            ZkFailure::NotEmpty => f.write_str("the node has children"),
            ZkFailure::ConnectionLoss(why) => write!(f, "connection lost: {why}"),
            ZkFailure::SessionExpired => f.write_str("the session expired"),
            ZkFailure::Other(e) => write!(f, "{e}"),
        }
    }
}

/// What the driver hands back for a [`ZkRequest`].
pub type ZkResult = std::result::Result<ZkReply, ZkFailure>;

/// What happened to a watched node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// It was created (an `Exists` watch on a missing node).
    Created,
    /// It was deleted.
    Deleted,
    /// Its data changed.
    DataChanged,
    /// Its child list changed.
    ChildrenChanged,
}

/// Where the client's session is, as the transport sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionEvent {
    /// The connection to the ensemble dropped; the session may still live (the transport
    /// reconnects to any member within the session timeout).
    Disconnected,
    /// Connected again, within the same session: ephemeral nodes and watches are kept.
    Reconnected,
    /// The ensemble expired the session (or the transport gave it up): its nodes are gone.
    Expired,
}

/// Something the ensemble pushed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ZkNotice {
    /// A watch set by a request fired (paths as in requests, without the chroot).
    Watch {
        /// The watched path.
        path: String,
        /// What happened.
        event: WatchEvent,
    },
    /// The client's own session's state changed.
    Session(SessionEvent),
    /// The state of the client's extra session asked for a timeout of `timeout` changed (see
    /// [`ZkRequest::session`]).
    Extra {
        /// The timeout the session was asked for: which extra session.
        timeout: Duration,
        /// What happened.
        event: SessionEvent,
    },
}
