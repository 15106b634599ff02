//! The memcached backend as the registry knows it: `memcached://` (no TLS scheme: see
//! [`super::address`]), its servers' grammar, its capabilities (mutexes and the engine's
//! reentrant holds; no queue, no fencing token) and its settings: the key prefix and
//! `max_lease`, the deployment's longest lease (Redlock's option, for the same delayed-restart
//! rule).

use super::{MemcachedAddress, MemcachedConfig};
use crate::capabilities::Capabilities;
use crate::connect::options::{no_replica_acks, no_session_timeout, redlock_settings_but};
use crate::connect::{Address, Backend, ClientOption, ClientOptions, Kind, LeaseBound, Spec, Spelling, Target};
use crate::options::DEFAULT_LEASE;
use crate::time::Duration;
use crate::error::{Error, Result};

// The names of the kinds this folder serves (constants named like the variants they were).
#[allow(non_upper_case_globals)]
impl Backend {
    /// memcached servers (`memcached://`): one item per lock, waiters poll.
    pub const Memcached: Backend = Backend::named("Memcached");
}


/// The memcached backend's entry in the registry.
pub const SPEC: Spec = Spec {
    kinds: &[Kind { backend: Backend::Memcached, name: "memcached", article: "a", schemes: &[("memcached", false)] }],
    parse,
    capabilities,
    key_prefix: true,
    clustered: None,
    lease_bound: Some(|options, _target| Box::new(MaxLease(max_lease(options)))),
    session_timeout: None,
    validate,
    no_entry_ttl: Some(|spelling| {
        format!("{} is not a memcached setting (memcached has no wait queue: waiters poll)", spelling.entry_ttl)
    }),
    connect_data: Some(super::data::connect),
    #[cfg(feature = "tokio")]
    connect_native: |options, target| Box::pin(super::transport::start(options, target)),
};

fn parse(_kind: &Kind, _scheme: &'static str, _tls: bool, _url: &str, rest: &str) -> Result<Box<dyn Address>> {
    Ok(Box::new(MemcachedAddress::parse(rest)?))
}

impl Address for MemcachedAddress {
    fn shown(&self) -> String {
        MemcachedAddress::shown(self)
    }

    /// A memcached URL holds no password.
    fn scrub(&self, message: &str) -> String {
        message.to_string()
    }
}

/// Mutexes, and reentrant holds counted by the engine on a lease already granted. No FIFO
/// (waiters poll), no fencing (memcached evicts and restarts empty: nothing it stores is
/// monotonic), nothing made of several items (PROTOCOL.md §13).
fn capabilities(kind: &Kind, _replica_acks: bool) -> Capabilities {
    Capabilities { reentrant: true, adopt: true, min_hold: true, ..Capabilities::mutexes_only(kind.name, kind.scheme(false)) }
}

/// No replicas, no session, no Redlock settings but `max_lease`; the key prefix is the common
/// one's rules.
fn validate(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    no_replica_acks(o, kind, spelling)?;
    no_session_timeout(o, kind, spelling)?;
    // Redlock's max_lease is memcached's too: its delayed-restart rule (PROTOCOL.md §13).
    redlock_settings_but(o, kind, spelling, &[ClientOption::MaxLease])?;
    MaxLease(max_lease(o)).validate()
}

/// The deployment's longest lease: the option, else the default lease (as on a Redlock).
fn max_lease(o: &ClientOptions) -> Duration {
    o.max_lease.unwrap_or(DEFAULT_LEASE)
}

/// A memcached deployment's bound on every lease: see [`MemcachedConfig::max_lease`].
#[derive(Debug)]
struct MaxLease(Duration);

impl LeaseBound for MaxLease {
    fn max_lease(&self) -> Duration {
        self.0
    }

    fn check_lease(&self, lease: Duration) -> Result<()> {
        super::backend::check_lease(lease, self.0)
    }

    fn validate(&self) -> Result<()> {
        super::backend::check_max_lease(self.0)
    }
}

impl Target {
    /// A memcached URL's servers (`None` for other backends).
    pub fn memcached(&self) -> Option<&MemcachedAddress> {
        self.address()
    }
}

impl ClientOptions {
    /// The memcached engine's settings of a `memcached://` URL; `INVALID_ARGUMENT` for any
    /// other backend.
    pub fn memcached_config(&self) -> Result<MemcachedConfig> {
        let target = self.target()?;
        let Some(address) = target.memcached() else {
            return Err(Error::invalid(format!("a {}:// URL is not memcached", target.scheme())));
        };
        let config = MemcachedConfig { key_prefix: self.key_prefix.clone(), servers: address.servers(), max_lease: max_lease(self) };
        config.validate()?;
        Ok(config)
    }
}
