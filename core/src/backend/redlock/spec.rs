//! The Redlock backend as the registry knows it: `redlock://` / `rediss+redlock://`, its
//! masters' grammar, its capabilities (mutexes and reentrant holds only: no server-side queue
//! or counter), and its protocol settings with their defaults.

use super::address;
use super::RedlockConfig;
use crate::capabilities::Capabilities;
use crate::connect::options::{no_replica_acks, no_session_timeout};
use crate::connect::LeaseBound;
use crate::connect::{Address, Backend, ClientOptions, Kind, Spec, Spelling, Target};
use crate::time::Duration;
use crate::error::{Error, Result};

// The names of the kinds this folder serves (constants named like the variants they were).
#[allow(non_upper_case_globals)]
impl Backend {
    /// Redlock over N independent Redis masters (`redlock://`, `rediss+redlock://`).
    pub const Redlock: Backend = Backend::named("Redlock");
}


/// The Redlock backend's entry in the registry.
pub const SPEC: Spec = Spec {
    kinds: &[Kind {
        backend: Backend::Redlock,
        name: "Redlock",
        article: "a",
        schemes: &[("redlock", false), ("rediss+redlock", true)],
    }],
    parse,
    capabilities,
    key_prefix: true,
    clustered: None,
    lease_bound: Some(|options, target| Box::new(settings(options, target.servers().len()))),
    session_timeout: None,
    validate,
    no_entry_ttl: Some(|spelling| {
        format!("{} is not a Redlock setting (a Redlock has no wait queue: waiters retry)", spelling.entry_ttl)
    }),
    connect_data: Some(super::data::connect),
    #[cfg(feature = "tokio")]
    connect_native: |options, target| Box::pin(super::transport::start(options, target)),
};

fn parse(_kind: &Kind, scheme: &'static str, tls: bool, _url: &str, rest: &str) -> Result<Box<dyn Address>> {
    Ok(Box::new(address::parse(scheme, tls, rest)?))
}

/// No queue, no counter: a grant is a majority of independent votes, nothing more. A reentrant
/// hold is the engine's count on a lease already granted (PROTOCOL.md §8 says why that is sound
/// for a Redlock). Listing SCANs the masters (PROTOCOL.md §16).
fn capabilities(kind: &Kind, _replica_acks: bool) -> Capabilities {
    Capabilities { reentrant: true, list_locks: true, adopt: true, min_hold: true, ..Capabilities::mutexes_only(kind.name, kind.scheme(false)) }
}

/// No replicas, no session; the Redlock settings in their ranges (the URL's grammar already
/// counted the masters, 1 to `MAX_MASTERS`).
fn validate(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    no_replica_acks(o, kind, spelling)?;
    no_session_timeout(o, kind, spelling)?;
    settings(o, 1).validate()
}

/// The Redlock protocol settings with `masters` masters, defaults where none was given.
fn settings(o: &ClientOptions, masters: usize) -> RedlockConfig {
    let d = RedlockConfig::default();
    RedlockConfig {
        key_prefix: o.key_prefix.clone(),
        masters,
        drift_factor: o.drift_factor.unwrap_or(d.drift_factor),
        drift_fixed: o.drift_fixed.unwrap_or(d.drift_fixed),
        max_lease: o.max_lease.unwrap_or(d.max_lease),
        node_timeout: o.node_timeout.unwrap_or(d.node_timeout),
        response_timeout: o.response_timeout,
        retry_delay: o.retry_delay.unwrap_or(d.retry_delay),
        retry_jitter: o.retry_jitter.unwrap_or(d.retry_jitter),
        label: o.label(),
    }
}

impl ClientOptions {
    /// The Redlock protocol settings of a `redlock://` URL (masters counted from the URL);
    /// `INVALID_ARGUMENT` for any other backend.
    pub fn redlock_config(&self) -> Result<RedlockConfig> {
        let target: Target = self.target()?;
        if target.backend() != Backend::Redlock {
            return Err(Error::invalid(format!("a {}:// URL is not a Redlock", target.scheme())));
        }
        let config = settings(self, target.servers().len());
        config.validate()?;
        Ok(config)
    }
}

impl LeaseBound for RedlockConfig {
    fn max_lease(&self) -> Duration {
        self.max_lease
    }

    fn check_lease(&self, lease: Duration) -> Result<()> {
        RedlockConfig::check_lease(self, lease)
    }

    fn validate(&self) -> Result<()> {
        RedlockConfig::validate(self)
    }
}

#[cfg(feature = "tokio")]
impl crate::native::Client {
    /// A Redlock's protocol settings (`None` for other backends).
    pub fn redlock_config(&self) -> Option<&RedlockConfig> {
        let bound: &dyn std::any::Any = self.lease_bound()?;
        bound.downcast_ref()
    }
}
