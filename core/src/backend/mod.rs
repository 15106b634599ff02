//! The backends, one folder each: a backend's folder owns everything from its URL to its wire
//! (target and layout, requests and replies, recipes, failures, its plain-data form for the
//! Node binding and its native transport).

pub mod etcd;
pub mod redis;
pub mod redlock;
pub mod sql;
pub mod zookeeper;
