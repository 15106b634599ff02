//! The Redis backend as the registry knows it: `redis://` / `rediss://` (one server, or a
//! primary with replicas) and `redis+cluster://` / `rediss+cluster://` (a Cluster's seed node),
//! their grammar, capabilities and the settings a Redis client takes.

use super::address::Servers;
use super::url::RedisUrl;
use crate::capabilities::Capabilities;
use crate::connect::options::{no_redlock_settings, no_session_timeout};
use crate::connect::{Address, Backend, ClientOptions, Kind, Spec, Spelling};
use crate::error::{Error, Result};

// The names of the kinds this folder serves (constants named like the variants they were).
#[allow(non_upper_case_globals)]
impl Backend {
    /// One Redis server, or a primary with replicas (`redis://`, `rediss://`).
    pub const Redis: Backend = Backend::named("Redis");
    /// A Redis Cluster reached through one seed node (`redis+cluster://`, `rediss+cluster://`).
    pub const RedisCluster: Backend = Backend::named("RedisCluster");
}


/// The Redis backend's entry in the registry.
pub const SPEC: Spec = Spec {
    kinds: &[
        Kind { backend: Backend::Redis, name: "Redis", article: "a", schemes: &[("redis", false), ("rediss", true)] },
        Kind {
            backend: Backend::RedisCluster,
            name: "Redis Cluster",
            article: "a",
            schemes: &[("redis+cluster", false), ("rediss+cluster", true)],
        },
    ],
    parse,
    capabilities,
    key_prefix: true,
    clustered: Some(Backend::RedisCluster),
    lease_bound: None,
    session_timeout: None,
    validate,
    no_entry_ttl: None,
    // The bindings drive Redis through its typed engine (the Node binding's lean RESP socket
    // hands the core bytes, not values).
    connect_data: Some(super::data::connect),
    #[cfg(feature = "tokio")]
    connect_native: |options, target| Box::pin(super::transport::start(options, target)),
};

/// One server (or seed node) as a plain `redis://` / `rediss://` URL.
fn parse(kind: &Kind, scheme: &'static str, tls: bool, _url: &str, rest: &str) -> Result<Box<dyn Address>> {
    if kind.backend == Backend::RedisCluster && authority(rest).contains(',') {
        return Err(Error::invalid(format!(
            "a {scheme}:// URL names one seed node (the client discovers the others), not a list"
        )));
    }
    let base = if tls { "rediss" } else { "redis" };
    let server = RedisUrl::parse(&format!("{base}://{rest}"))?;
    let shown = server.to_string();
    let shown = format!("{scheme}{}", &shown[base.len()..]);
    Ok(Box::new(Servers { servers: vec![server], shown }))
}

/// The authority of `rest` (what follows `scheme://`, up to its path, query or fragment).
pub(crate) fn authority(rest: &str) -> &str {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    &rest[..end]
}

/// The Redis scripts keep what the ZooKeeper and etcd recipes (Curator's, etcd's concurrency
/// package's) cannot: readers passing queued writers, parameters agreed by the server, queue
/// entries with their own lease. Only a single primary can wait for its replicas.
fn capabilities(kind: &Kind, replica_acks: bool) -> Capabilities {
    Capabilities {
        backend: kind.name,
        scheme: kind.scheme(false),
        fencing: true,
        fifo: true,
        semaphore: true,
        read_write: true,
        election: true,
        observe: true,
        reentrant: true,
        replica_acks: replica_acks && kind.backend == Backend::Redis,
        readers_first: true,
        agreed_parameters: true,
        entry_ttl: true,
        list_locks: true,
        adopt: true,
        min_hold: true,
    }
}

/// Replica acks only on one primary (a Cluster's `WAIT` would reach another node); no session;
/// no Redlock settings.
fn validate(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    if o.replica_acks.is_some() && kind.backend == Backend::RedisCluster {
        return Err(Error::invalid(format!(
            "{} is not supported on a Redis Cluster (WAIT must reach the lock's primary)",
            spelling.replica_acks
        )));
    }
    no_session_timeout(o, kind, spelling)?;
    no_redlock_settings(o, kind, spelling)
}

impl ClientOptions {
    /// Every rule except the URL's, for a Redis client (a Cluster if `cluster` is set): for a
    /// binding handed an already-made connection instead of a URL (the Node binding's ioredis
    /// clients), whose URL field is then unused.
    pub fn validate_settings(&self, spelling: &Spelling) -> Result<()> {
        let backend = if self.cluster { Backend::RedisCluster } else { Backend::Redis };
        self.validate_for(backend, spelling)
    }
}
