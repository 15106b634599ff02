//! The backends, one folder each: a backend's folder owns everything from its URL to its wire
//! (its spec for the registry: schemes, URL grammar, capabilities and settings; target and
//! layout, requests and replies, recipes, failures, its plain-data form for the Node binding
//! and its native transport).
//!
//! [`REGISTRY`] is the one list of them: a backend joins with one line (and its
//! [`Backend`](crate::connect::Backend) name); nothing else in the crate names it.

#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(feature = "memcached")]
pub mod memcached;
pub mod redis;
#[cfg(feature = "redlock")]
pub mod redlock;
#[cfg(feature = "sql")]
pub mod sql;
#[cfg(feature = "zookeeper")]
pub mod zookeeper;

use crate::connect::Spec;

/// Every backend of this build, in the order messages list their schemes.
pub const REGISTRY: &[&Spec] = &[
    #[cfg(feature = "redis")]
    &redis::spec::SPEC,
    #[cfg(feature = "redlock")]
    &redlock::spec::SPEC,
    #[cfg(feature = "zookeeper")]
    &zookeeper::spec::SPEC,
    #[cfg(feature = "etcd")]
    &etcd::spec::SPEC,
    #[cfg(feature = "sql")]
    &sql::spec::SPEC,
    #[cfg(feature = "memcached")]
    &memcached::spec::SPEC,
];
