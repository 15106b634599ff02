//! The memcached backend as the registry knows it: `memcached://` (no TLS scheme: see
//! [`super::address`]), its servers' grammar, its capabilities (mutexes and the engine's
//! reentrant holds; no queue, no fencing token) and its one setting, the key prefix.

use super::{MemcachedAddress, MemcachedConfig};
use crate::capabilities::Capabilities;
use crate::connect::options::{no_redlock_settings, no_replica_acks, no_session_timeout};
use crate::connect::{Address, Backend, ClientOptions, Kind, Spec, Spelling, Target};
use crate::error::{Error, Result};

/// The memcached backend's entry in the registry.
pub const SPEC: Spec = Spec {
    kinds: &[Kind { backend: Backend::Memcached, name: "memcached", article: "a", schemes: &[("memcached", false)] }],
    parse,
    capabilities,
    key_prefix: true,
    clustered: None,
    lease_bound: None,
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
    Capabilities { reentrant: true, ..Capabilities::mutexes_only(kind.name, kind.scheme(false)) }
}

/// No replicas, no session, no Redlock settings; the key prefix is the common one's rules.
fn validate(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    no_replica_acks(o, kind, spelling)?;
    no_session_timeout(o, kind, spelling)?;
    no_redlock_settings(o, kind, spelling)
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
        let config = MemcachedConfig { key_prefix: self.key_prefix.clone(), servers: address.servers() };
        config.validate()?;
        Ok(config)
    }
}
