//! The ZooKeeper backend (PROTOCOL.md "ZooKeeper"): ephemeral sequential znodes in one session
//! per client, each waiter watching only its predecessor, the holder node's `czxid` as the
//! fencing token, and the layouts of Apache Curator's recipes.
//!
//! - [`layout`]: where a lock lives and how its nodes are named and ordered (Curator's).
//! - [`recipe`]: who holds, given the children (Curator's predicates).
//! - [`backend`]: the engine's calls as chains of [`ZkOp`]s, and what each reply means.
//! - [`request`]: the wire types every transport performs; [`address`]: the URL.

pub mod address;
pub mod backend;
pub mod layout;
pub mod recipe;
pub mod request;

pub use address::ZkAddress;
pub use backend::{
    safe_validity, Recipe, ZkConfig, ZkTarget, ZooKeeperBackend, ZooKeeperEngine, DEFAULT_SESSION_TIMEOUT,
    MAX_SESSION_TIMEOUT, MIN_SESSION_TIMEOUT,
};
pub use request::{CreateMode, SessionEvent, Stat, WatchEvent, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkRequest, ZkResult};
