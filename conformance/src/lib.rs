//! The conformance crate's shared parts: real test servers (one launcher for every language's
//! tests, `src/bin/servers.rs`, and the orchestrator's server variants), the fault proxy, and
//! the backend fixtures scenarios act through.

pub mod busy;
pub mod deploy;
pub mod etcd;
pub mod fixture;
pub mod memcached;
pub mod ports;
pub mod process;
pub mod proxy;
pub mod server;
pub mod spawn;
pub mod sql;
pub mod tls;
pub mod zookeeper;
