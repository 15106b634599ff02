//! Support code for the deterministic simulation tests (`tests/simulation.rs`): a simulated
//! Redis that runs lockgate's scripts, a lossy network, a virtual clock, and safety checks.
#![allow(dead_code)]

pub mod check;
pub mod harness;
pub mod net;
pub mod redis;
pub mod store;
pub mod workload;

pub use harness::{Isolation, Sim};
pub use net::NetConfig;
