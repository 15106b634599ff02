//! Support code for the deterministic simulation tests (`tests/simulation.rs`,
//! `tests/simulation_redlock.rs`): one harness (virtual clock, lossy network, clients,
//! crashes, restarts, beliefs) and one set of checks over any backend's engine, and one
//! server model per backend (`Model`): Redis, Redlock.
#![allow(dead_code)]

pub mod check;
pub mod harness;
pub mod model;
pub mod net;
pub mod redis;
pub mod redis_check;
pub mod redlock;
pub mod store;
pub mod workload;
pub mod zk;

#[allow(unused_imports)]
pub use harness::Isolation;
pub use net::NetConfig;
