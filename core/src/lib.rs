//! lockgate-core: distributed-lock protocols as an I/O-agnostic engine, plus a native tokio
//! driver for Redis (feature `tokio`, on by default).
//!
//! The [`engine::Engine`] decides; drivers move bytes and keep time. The same engine runs
//! natively under tokio ([`native`]) and as WebAssembly in Node with JavaScript doing the I/O.
#![warn(missing_docs)]

pub mod capabilities;
pub mod connect;
pub mod engine;
pub mod error;
pub mod options;
pub mod primitive;
pub mod random;
pub mod redis;
pub mod redlock;
pub mod time;

#[cfg(feature = "tokio")]
pub mod native;

pub use engine::{
    Engine, EngineConfig, Event, ReplicaAcks, LeaderInfo, LeaseId, OpId, Outcome, Primitive, Request,
    RequestId, RequestKind, Wait,
};
pub use capabilities::{Capabilities, Capability};
pub use connect::Backend;
pub use error::{Error, ErrorKind, Result};
pub use options::LockOptions;
