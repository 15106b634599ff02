//! The ZooKeeper backend (PROTOCOL.md "ZooKeeper"): ephemeral sequential znodes in one session
//! per client, each waiter watching only its predecessor, the holder node's `czxid` as the
//! fencing token, and the layouts of Apache Curator's recipes.

pub mod address;
pub mod request;

pub use address::ZkAddress;
pub use request::{CreateMode, SessionEvent, Stat, WatchEvent, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkRequest, ZkResult};
