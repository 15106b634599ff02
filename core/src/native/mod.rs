//! The native driver: performs the engine's requests over the `redis` crate under tokio.
//!
//! One client owns one RESP3 multiplexed connection (with automatic reconnection) that carries
//! both commands and the grant notifications, however many locks and waiters the process has.

mod client;
mod cluster_link;
mod convert;
mod driver;
mod holder;
mod link;
mod redlock;

pub use client::{Client, Election, Lease, Lock, ReadWriteLock};
pub use redlock::{Redlock, RedlockLease, RedlockLock};
// The options and the URL grammar live in `crate::connect` (wasm-safe, shared with the Node
// binding); the native driver adds `connect()` to them.
pub use crate::connect::{ClientOptions, RedisUrl, RedlockOptions};
// The driver's modules name the URL type by its old path.
use crate::connect as url;
