//! lockgate-core: distributed-lock protocols as an I/O-agnostic engine, plus a native tokio
//! driver (feature `tokio`, on by default).
//!
//! The [`engine::LockEngine`] decides; drivers move bytes and keep time. The same engine runs
//! natively under tokio (`native`) and as WebAssembly in Node with JavaScript doing the I/O.
//!
//! One client for every backend: a URL's scheme picks it (`redis://`, `redis+cluster://`,
//! `redlock://h1,h2,h3`, see [`connect::Target`]); [`connect::ClientOptions`] holds every
//! setting with its defaults and rules, set by a binding's own option names through
//! [`connect::ClientOptions::set`]; [`Capabilities`] says what the backend can do, and a handle
//! needing more is [`ErrorKind::Unsupported`]. The native `Client` / `Lock` / `Lease` are one
//! family for all of them (`Lease::fencing_token` is `None` where the backend has no fencing).
//! The repository README's "For binding authors" section lists the keys per binding.
#![warn(missing_docs)]

pub mod address;
pub mod adopt;
pub mod break_lock;
pub mod backend;
pub mod capabilities;
pub mod connect;
pub mod data;
pub mod driving;
pub mod engine;
pub mod error;
pub mod exit;
pub mod handle;
pub mod holding;
pub mod inspect;
pub mod label;
pub mod listing;
pub mod options;
pub mod primitive;
pub mod random;
pub mod scope;
pub mod time;

#[cfg(feature = "tokio")]
pub mod native;

pub use engine::{Event, LeaderInfo, LeaseId, OpId, Outcome, Primitive, RequestId, Wait};
pub use backend::redis::{Engine, EngineConfig, ReplicaAcks, Request, RequestKind};
pub use capabilities::{Capabilities, Capability};
pub use connect::Backend;
pub use error::{Error, ErrorKind, Result};
pub use options::LockOptions;
