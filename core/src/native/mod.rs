//! The native driver: performs the engine's requests over the `redis` crate under tokio.
//!
//! One client owns one RESP3 multiplexed connection (with automatic reconnection) that carries
//! both commands and the grant notifications, however many locks and waiters the process has.

mod client;
mod convert;
mod driver;
mod holder;
mod link;
mod redlock;
mod url;

pub use client::{Client, ClientOptions, Election, Lease, Lock, ReadWriteLock};
pub use redlock::{Redlock, RedlockLease, RedlockLock, RedlockOptions};
pub use url::RedisUrl;
