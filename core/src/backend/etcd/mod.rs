//! The etcd backend (PROTOCOL.md §10): each key attached to a lease of the client whose TTL is
//! its lock's lease (so a crashed holder's key goes within that lease), kept alive by keepalives; each waiter watches only the deletion of the key just before it (by create
//! revision); the holder key's create revision is the fencing token; and the key layouts of
//! etcd's own `concurrency.Mutex` and `concurrency.Election`, so `etcdctl lock` and `etcdctl
//! elect` interoperate.
//!
//! - [`layout`]: where a lock lives and how its keys are named (etcd's concurrency package's).
//! - [`recipe`]: who holds, and whom a waiter waits behind, given what etcd answered.
//! - [`config`]: a client's settings and how long an acknowledged keepalive counts.
//! - [`target`]: a lock's recipe and key prefixes.
//! - [`backend`]: the backend's state and the engine's calls handed to the modules below:
//!   `step` (the steps of a call, run as a chain of [`EtcdOp`]s by the engine's job runner),
//!   `lease` (the session's leases as kept), `session` (their keepalives, loss and close),
//!   `acquire`, `confirm` (renewals and extends), `release`,
//!   `observe`, and `failure` (what a failed request means).
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
mod lease;
mod inspect;
pub mod list;
mod observe;
pub mod recipe;
mod release;
pub mod spec;
pub mod request;
mod session;
mod step;
pub mod target;
#[cfg(feature = "tokio")]
pub(crate) mod transport;

pub use address::EtcdAddress;
pub use backend::{EtcdBackend, EtcdEngine};
pub use config::{safe_validity, EtcdConfig, DEFAULT_SESSION_TTL, MAX_SESSION_TTL, MIN_SESSION_TTL};
pub use request::{
    Compare, CompareOp, CompareTarget, EtcdFailure, EtcdNotice, EtcdOp, EtcdReply, EtcdRequest, EtcdResult, EventKind,
    KeyValue, LeaseId, Order, Range, Txn, TxnOp, TxnReply, WatchEvent, WatchId,
};
pub use target::{EtcdTarget, Recipe};
