//! The ZooKeeper backend as the registry knows it: `zookeeper://` / `zookeeper+tls://`, its
//! ensemble's grammar ([`ZkAddress`]), Curator's recipes' capabilities, and its one setting,
//! the session timeout.

use super::{ZkAddress, ZkConfig, DEFAULT_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT, MIN_SESSION_TIMEOUT};
use crate::capabilities::Capabilities;
use crate::connect::options::{custom_key_prefix, no_redlock_settings, no_replica_acks};
use crate::connect::{Address, Backend, ClientOption, ClientOptions, Kind, Spec, Spelling, Target};
use crate::error::{Error, Result};

// The names of the kinds this folder serves (constants named like the variants they were).
#[allow(non_upper_case_globals)]
impl Backend {
    /// A ZooKeeper ensemble (`zookeeper://`, `zookeeper+tls://`): one session per client.
    pub const ZooKeeper: Backend = Backend::named("ZooKeeper");
}


/// The ZooKeeper backend's entry in the registry.
pub const SPEC: Spec = Spec {
    kinds: &[Kind {
        backend: Backend::ZooKeeper,
        name: "ZooKeeper",
        article: "a",
        schemes: &[("zookeeper", false), ("zookeeper+tls", true)],
    }],
    parse,
    capabilities,
    key_prefix: false,
    clustered: None,
    lease_bound: None,
    session_timeout: Some((MIN_SESSION_TIMEOUT, MAX_SESSION_TIMEOUT)),
    validate,
    no_entry_ttl: Some(|spelling| {
        format!(
            "{} is not a ZooKeeper setting (a waiter's node lives as long as its session: a crashed \
             waiter is skipped once its session expires, see {})",
            spelling.entry_ttl,
            spelling.key(ClientOption::SessionTimeout)
        )
    }),
    connect_data: Some(super::data::connect),
    #[cfg(feature = "tokio")]
    connect_native: |options, target| Box::pin(super::transport::start(options, target)),
};

fn parse(_kind: &Kind, _scheme: &'static str, tls: bool, _url: &str, rest: &str) -> Result<Box<dyn Address>> {
    Ok(Box::new(ZkAddress::parse(rest, tls)?))
}

impl Address for ZkAddress {
    fn shown(&self) -> String {
        ZkAddress::shown(self)
    }

    fn scrub(&self, message: &str) -> String {
        match &self.digest {
            Some((_, password)) if !password.is_empty() => message.replace(password.as_str(), "***"),
            _ => message.to_string(),
        }
    }
}

/// Curator's recipes: every primitive, fenced and first-come-first-served; no readers-first
/// locks, no server-checked parameters, no waiter entry leases.
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

/// The session timeout in its range; locks named by path, not by key prefix; no replicas and
/// no Redlock settings.
fn validate(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    no_replica_acks(o, kind, spelling)?;
    if let Some(t) = o.session_timeout {
        if !(MIN_SESSION_TIMEOUT..=MAX_SESSION_TIMEOUT).contains(&t) {
            return Err(Error::invalid(format!(
                "{} must be between {} and {}, got {}",
                spelling.key(ClientOption::SessionTimeout),
                spelling.show(MIN_SESSION_TIMEOUT),
                spelling.show(MAX_SESSION_TIMEOUT),
                spelling.show(t)
            )));
        }
    }
    if custom_key_prefix(o) {
        return Err(Error::invalid(format!(
            "{} is a Redis setting; a ZooKeeper client names locks by path (a name starting with '/' \
             is used as given, any other lives under /lockgate/<kind>/; a chroot goes in the URL)",
            spelling.key(ClientOption::KeyPrefix)
        )));
    }
    no_redlock_settings(o, kind, spelling)
}

impl Target {
    /// A ZooKeeper URL's ensemble (`None` for other backends).
    pub fn zookeeper(&self) -> Option<&ZkAddress> {
        self.address()
    }
}

impl ClientOptions {
    /// The ZooKeeper engine's settings of a `zookeeper://` URL (the session timeout asked for,
    /// 30 s unless given); `INVALID_ARGUMENT` for any other backend.
    pub fn zookeeper_config(&self) -> Result<ZkConfig> {
        let target = self.target()?;
        if target.zookeeper().is_none() {
            return Err(Error::invalid(format!("a {}:// URL is not a ZooKeeper ensemble", target.scheme())));
        }
        let config = ZkConfig { session_timeout: self.session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT), label: self.label(), extra_sessions: true };
        config.validate()?;
        Ok(config)
    }
}
