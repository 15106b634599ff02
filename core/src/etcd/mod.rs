//! The etcd backend (PROTOCOL.md "etcd"): keys attached to a lease per client (the session),
//! kept alive by keepalives; each waiter watches only the deletion of the key just before it
//! (by create revision); the holder key's create revision is the fencing token; and the key
//! layouts of etcd's own `concurrency.Mutex` and `concurrency.Election`, so `etcdctl lock` and
//! `etcdctl elect` interoperate.
//!
//! - [`request`]: the wire types every transport performs; [`address`]: the URL.
//! - [`config`]: a client's settings and how long an acknowledged keepalive counts.

pub mod address;
pub mod config;
pub mod request;

pub use address::EtcdAddress;
pub use config::{safe_validity, EtcdConfig, DEFAULT_SESSION_TTL, MAX_SESSION_TTL, MIN_SESSION_TTL};
pub use request::{
    Compare, CompareOp, CompareTarget, EtcdFailure, EtcdNotice, EtcdOp, EtcdReply, EtcdRequest, EtcdResult, EventKind,
    KeyValue, LeaseId, Order, Range, Txn, TxnOp, TxnReply, WatchEvent, WatchId,
};
