//! The native driver: one client family for every backend, driven by tokio.
//!
//! [`Client::connect`] takes any URL `crate::connect` accepts (`redis://`, `rediss://`,
//! `redis+cluster://`, `redlock://`, ...) and returns the same [`Client`]; its [`Lock`],
//! [`ReadWriteLock`], [`Election`] and [`Lease`] are one set of types whatever the backend, and
//! what a backend cannot do is `UNSUPPORTED` when the handle is made (see
//! [`Client::capabilities`]). Behind a client runs one `driver` task, the same for every
//! backend: it runs the engine's driving contract and takes the handles' messages; only how
//! requests reach the servers is per backend (`transport`: a Redis server or Cluster, the
//! masters of a Redlock).

mod cancel;
mod client;
pub(crate) mod driver;
mod holder;
mod holds;
mod in_place;
mod lease;
mod lease_state;
mod lock;
mod open_clients;
pub(crate) mod message;
pub mod telemetry;
pub(crate) mod transport;

pub use cancel::{CancelWaits, Cancelled, WaitGuard};
pub use client::Client;
pub use crate::holding::Owner;
pub use holds::Holds;
pub use in_place::{foreign_runtime, InPlace};
pub use lease::Lease;
pub use lease_state::AtRiskSpells;
pub use lock::{Election, Lock, ReadWriteLock};
pub use open_clients::OpenClients;
// The options and the URL grammar live in `crate::connect` (wasm-safe, shared with the Node
// binding); the native driver adds `connect()` to them.
pub use crate::connect::ClientOptions;
#[cfg(feature = "redis")]
pub use crate::connect::RedisUrl;
