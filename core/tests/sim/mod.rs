//! Support code for the deterministic simulation tests: one harness (`harness.rs`: virtual
//! clock, lossy network, clients driving `LockEngine<B>`, crashes, server restarts and pauses,
//! the beliefs each client held), one workload (`workload.rs`) and one set of checks
//! (`check.rs`) for every backend, and one server model per backend implementing [`Model`]
//! (`model.rs`): `redis.rs` (+ its server-side checks in `redis_check.rs`; tests in
//! `tests/simulation.rs`), `redlock.rs` (`tests/simulation_redlock.rs`), `zk.rs`, a
//! ZooKeeper ensemble serving the real ZooKeeper backend's wire types (`tests/simulation_zk.rs`),
//! and `etcd.rs`, an etcd cluster serving the real etcd backend's (`tests/simulation_etcd.rs`), and
//! `sql.rs`, a database serving the SQL backend's operations (`tests/simulation_sql.rs`).
//!
//! Adding a backend to the simulator: one file here with its server model (`impl Model`: which
//! connection each request takes, what the server does with it and pushes, restart and
//! crash semantics, what a grant was, what must not be left behind) and one
//! `tests/simulation_<backend>.rs` that runs the workload and the checks over it.
#![allow(dead_code)]

pub mod check;
pub mod etcd;
pub mod harness;
pub mod model;
pub mod net;
pub mod redis;
pub mod redis_check;
pub mod redlock;
pub mod seq_backend;
pub mod sql;
pub mod store;
pub mod workload;
pub mod zk;

#[allow(unused_imports)]
pub use harness::Isolation;
#[allow(unused_imports)]
pub use model::Model;
pub use net::NetConfig;
