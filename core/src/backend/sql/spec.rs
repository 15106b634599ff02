//! The SQL backend as the registry knows it: PostgreSQL (`postgres://`, `postgresql://`) and
//! MySQL / MariaDB (`mysql://`, `mariadb://`), their URLs' grammar ([`SqlAddress`]; TLS is the
//! URL's `sslmode` / `ssl-mode`, not its scheme), and their capabilities: the queued recipes over
//! rows, with waiter rows that have a lease of their own.

use super::{SqlAddress, SqlConfig};
use crate::capabilities::Capabilities;
use crate::connect::options::{custom_key_prefix, no_redlock_settings, no_replica_acks, no_session_timeout};
use crate::connect::{Address, Backend, ClientOption, ClientOptions, Kind, Spec, Spelling, Target};
use crate::error::{Error, Result};

// The names of the kinds this folder serves (constants named like the variants they were).
#[allow(non_upper_case_globals)]
impl Backend {
    /// A PostgreSQL database (`postgres://`, `postgresql://`; TLS by the URL's `sslmode`): one
    /// row per holder or waiter, notifications as wake-ups.
    pub const Postgres: Backend = Backend::named("Postgres");
    /// A MySQL or MariaDB database (`mysql://`, `mariadb://`; TLS by the URL's `ssl-mode`): one
    /// row per holder or waiter, named locks as doorbells.
    pub const MySql: Backend = Backend::named("MySql");
}


/// The SQL backend's entry in the registry.
pub const SPEC: Spec = Spec {
    kinds: &[
        Kind {
            backend: Backend::Postgres,
            name: "PostgreSQL",
            article: "a",
            schemes: &[("postgres", false), ("postgresql", false)],
        },
        Kind { backend: Backend::MySql, name: "MySQL", article: "a", schemes: &[("mysql", false), ("mariadb", false)] },
    ],
    parse,
    capabilities,
    key_prefix: false,
    clustered: None,
    lease_bound: None,
    session_timeout: None,
    validate,
    no_entry_ttl: None,
    connect_data: Some(super::data::connect),
    #[cfg(feature = "tokio")]
    connect_native: |options, target| Box::pin(super::transport::start(options, target)),
};

fn parse(_kind: &Kind, _scheme: &'static str, _tls: bool, url: &str, _rest: &str) -> Result<Box<dyn Address>> {
    Ok(Box::new(SqlAddress::parse(url)?))
}

impl Address for SqlAddress {
    fn shown(&self) -> String {
        SqlAddress::shown(self)
    }

    fn scrub(&self, message: &str) -> String {
        SqlAddress::scrub(self, message)
    }
}

/// Every primitive, fenced and first-come-first-served, and a waiter's row has a lease of its
/// own (`entry_ttl`), refreshed by its re-checks.
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
        entry_ttl: true,
        list_locks: true,
        adopt: true,
        min_hold: true,
    }
}

/// Locks live in a table the URL names, not under a key prefix; no replicas, no session, no
/// Redlock settings.
fn validate(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    no_replica_acks(o, kind, spelling)?;
    no_session_timeout(o, kind, spelling)?;
    if custom_key_prefix(o) {
        return Err(Error::invalid(format!(
            "{} is a Redis setting; a SQL client keeps its locks in a table, named by the URL's \
             table_prefix parameter (and schema=, on PostgreSQL)",
            spelling.key(ClientOption::KeyPrefix)
        )));
    }
    no_redlock_settings(o, kind, spelling)
}

impl Target {
    /// A SQL URL's database (`None` for other backends).
    pub fn sql(&self) -> Option<&SqlAddress> {
        self.address()
    }
}

impl ClientOptions {
    /// The SQL engine's settings of a `postgres://` or `mysql://` URL (its dialect, table
    /// prefix and schema); `INVALID_ARGUMENT` for any other backend.
    pub fn sql_config(&self) -> Result<SqlConfig> {
        let target = self.target()?;
        match target.sql() {
            Some(address) => Ok(SqlConfig { label: self.label(), ..SqlConfig::new(address.schema.clone()) }),
            None => Err(Error::invalid(format!("a {}:// URL is not a SQL database", target.scheme()))),
        }
    }
}
