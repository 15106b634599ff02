//! The ZooKeeper backend (PROTOCOL.md "ZooKeeper"): ephemeral sequential znodes in one session
//! per client, each waiter watching only its predecessor, the holder node's `czxid` as the
//! fencing token, and the layouts of Apache Curator's recipes.
//!
//! - [`layout`]: where a lock lives and how its nodes are named and ordered (Curator's).
//! - [`recipe`]: who holds, given the children (Curator's predicates).
//! - [`config`]: a client's settings and how long a session confirmation counts.
//! - [`target`]: a lock's recipe and paths.
//! - [`backend`]: the backend's state and the engine's calls handed to the modules below:
//!   `step` (the steps of a call, run as a chain of [`ZkOp`]s by the engine's job runner),
//!   `acquire`, `confirm`
//!   (renewals and extends), `release`, `observe`, and `failure` (what a failed request means).
//! - [`request`]: the wire types every transport performs; [`address`]: the URL.

mod acquire;
pub mod address;
pub mod backend;
mod break_lock;
pub mod config;
pub mod data;
mod confirm;
mod failure;
pub mod layout;
mod inspect;
pub mod list;
mod list_ahead;
mod observe;
pub mod recipe;
mod release;
mod session_state;
mod sessions;
pub mod spec;
pub mod request;
mod step;
pub mod target;
#[cfg(feature = "tokio")]
pub(crate) mod transport;

pub use address::ZkAddress;
pub use backend::{ZooKeeperBackend, ZooKeeperEngine};
pub use config::{safe_validity, ZkConfig, DEFAULT_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT, MIN_SESSION_TIMEOUT};
pub use request::{CreateMode, SessionEvent, Stat, WatchEvent, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkRequest, ZkResult};
pub use target::{Recipe, ZkTarget};
