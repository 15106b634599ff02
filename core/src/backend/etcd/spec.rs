//! The etcd backend as the registry knows it: `etcd://` / `etcds://`, its members' grammar
//! ([`EtcdAddress`]), the capabilities of etcd's concurrency recipes, and its one setting, the
//! session lease's TTL.

use super::{EtcdAddress, EtcdConfig, DEFAULT_SESSION_TTL, MAX_SESSION_TTL, MIN_SESSION_TTL};
use crate::capabilities::Capabilities;
use crate::connect::options::{custom_key_prefix, no_redlock_settings, no_replica_acks};
use crate::connect::{Address, Backend, ClientOption, ClientOptions, Kind, Spec, Spelling, Target};
use crate::error::{Error, Result};

// The names of the kinds this folder serves (constants named like the variants they were).
#[allow(non_upper_case_globals)]
impl Backend {
    /// An etcd cluster (`etcd://`, `etcds://`): one lease per client (the session).
    pub const Etcd: Backend = Backend::named("Etcd");
}


/// The etcd backend's entry in the registry.
pub const SPEC: Spec = Spec {
    kinds: &[Kind { backend: Backend::Etcd, name: "etcd", article: "an", schemes: &[("etcd", false), ("etcds", true)] }],
    parse,
    capabilities,
    key_prefix: false,
    clustered: None,
    lease_bound: None,
    session_timeout: Some((MIN_SESSION_TTL, MAX_SESSION_TTL)),
    validate,
    no_entry_ttl: Some(|spelling| {
        format!(
            "{} is not an etcd setting (a waiter's key lives as long as its session lease: a crashed \
             waiter is skipped once the lease expires, see {})",
            spelling.entry_ttl,
            spelling.key(ClientOption::SessionTimeout)
        )
    }),
    connect_data: Some(super::data::connect),
    #[cfg(feature = "tokio")]
    connect_native: |options, target| Box::pin(super::transport::start(options, target)),
};

fn parse(_kind: &Kind, _scheme: &'static str, tls: bool, _url: &str, rest: &str) -> Result<Box<dyn Address>> {
    Ok(Box::new(EtcdAddress::parse(rest, tls)?))
}

impl Address for EtcdAddress {
    fn shown(&self) -> String {
        EtcdAddress::shown(self)
    }

    fn scrub(&self, message: &str) -> String {
        EtcdAddress::scrub(self, message)
    }
}

/// The same recipes' guarantees as ZooKeeper's (FIFO by create revision, the create revision as
/// the fencing token), nothing the Redis scripts add.
fn capabilities(kind: &Kind, _replica_acks: bool) -> Capabilities {
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
        replica_acks: false,
        readers_first: false,
        agreed_parameters: false,
        entry_ttl: false,
        list_locks: true,
        adopt: false,
        min_hold: false,
    }
}

/// The session lease's TTL in its range; locks named by key prefix, not by the Redis one; no
/// replicas and no Redlock settings.
fn validate(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    no_replica_acks(o, kind, spelling)?;
    if let Some(t) = o.session_timeout {
        if !(MIN_SESSION_TTL..=MAX_SESSION_TTL).contains(&t) {
            return Err(Error::invalid(format!(
                "{} (the etcd session lease's TTL) must be between {} and {}, got {}",
                spelling.key(ClientOption::SessionTimeout),
                spelling.show(MIN_SESSION_TTL),
                spelling.show(MAX_SESSION_TTL),
                spelling.show(t)
            )));
        }
    }
    if custom_key_prefix(o) {
        return Err(Error::invalid(format!(
            "{} is a Redis setting; an etcd client names locks by key prefix (a name starting with '/' \
             is used as given, as `etcdctl lock` uses it; any other lives under lockgate/<kind>/)",
            spelling.key(ClientOption::KeyPrefix)
        )));
    }
    no_redlock_settings(o, kind, spelling)
}

impl Target {
    /// An etcd URL's cluster (`None` for other backends).
    pub fn etcd(&self) -> Option<&EtcdAddress> {
        self.address()
    }
}

impl ClientOptions {
    /// The etcd engine's settings of an `etcd://` URL (the session lease's TTL, 30 s unless
    /// given); `INVALID_ARGUMENT` for any other backend.
    pub fn etcd_config(&self) -> Result<EtcdConfig> {
        let target = self.target()?;
        if target.etcd().is_none() {
            return Err(Error::invalid(format!("a {}:// URL is not an etcd cluster", target.scheme())));
        }
        let config = EtcdConfig { session_ttl: self.session_timeout.unwrap_or(DEFAULT_SESSION_TTL), label: self.label() };
        config.validate()?;
        Ok(config)
    }
}
