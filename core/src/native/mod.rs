//! The native driver: one client family for every backend, driven by tokio.
//!
//! [`Client::connect`] takes any URL `crate::connect` accepts (`redis://`, `rediss://`,
//! `redis+cluster://`, `redlock://`, ...) and returns the same [`Client`]; its [`Lock`],
//! [`ReadWriteLock`], [`Election`] and [`Lease`] are one set of types whatever the backend, and
//! what a backend cannot do is `UNSUPPORTED` when the handle is made (see
//! [`Client::capabilities`]). Behind a client runs one driver task per backend kind, taking the
//! same messages from the handles: `driver` (one Redis server over one RESP3 connection that
//! carries commands and grant notifications, or a Redis Cluster) and `redlock_driver` (one
//! connection per master).

mod client;
mod cluster_link;
mod convert;
mod driver;
mod holder;
mod lease;
mod lease_state;
mod link;
mod lock;
mod message;
mod redlock_driver;

pub use client::Client;
pub use lease::Lease;
pub use lock::{Election, Lock, ReadWriteLock};
// The options and the URL grammar live in `crate::connect` (wasm-safe, shared with the Node
// binding); the native driver adds `connect()` to them.
pub use crate::connect::{ClientOptions, RedisUrl};
// The driver's modules name the URL type by its old path.
use crate::connect as url;
