//! Client and Redlock options as pure data, with their defaults and every rule that does not
//! need a connection: the same checks and messages in every binding (the Node binding runs
//! them as wasm). The native driver adds `connect()` to these types in `native/`.

use std::collections::HashSet;
use std::fmt;

use super::url::RedisUrl;
use crate::engine::{EngineConfig, ReplicaAcks};
use crate::error::{Error, Result};
use crate::options::{self, LockOptions, Unit};
use crate::redlock::RedlockConfig;
use crate::time::Duration;

/// Default connect and response timeouts (5 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long `WAIT` may block when a binding is given a replica count and no timeout (1 s,
/// Redisson's `syncSlavesTimeout`), below the default response timeout.
pub const DEFAULT_REPLICA_ACK_TIMEOUT: Duration = Duration::from_secs(1);

/// The shortest `WAIT` timeout: `WAIT` counts whole milliseconds.
pub const MIN_REPLICA_ACK_TIMEOUT: Duration = Duration::from_millis(1);

/// How a binding's users name the options and in which unit they give durations, so that the
/// core's messages speak their language (`commandTimeoutMs` in Node, `responseTimeout` in
/// Java, `response_timeout` in Python and Rust).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spelling {
    /// The unit durations are given and reported in.
    pub unit: Unit,
    /// The connect timeout.
    pub connect_timeout: &'static str,
    /// The response (command) timeout.
    pub response_timeout: &'static str,
    /// The replica-acknowledged mode as a whole.
    pub replica_acks: &'static str,
    /// The replica count of that mode.
    pub replica_count: &'static str,
    /// The `WAIT` timeout of that mode.
    pub replica_ack_timeout: &'static str,
    /// The Redis Cluster switch.
    pub cluster: &'static str,
    /// The TLS CA certificate.
    pub tls_ca: &'static str,
    /// A Redlock deployment's maximum lease.
    pub max_lease: &'static str,
}

impl Spelling {
    /// The Rust API (`ClientOptions` fields, seconds in messages).
    pub const RUST: Spelling = Spelling {
        unit: Unit::Seconds,
        connect_timeout: "connect_timeout",
        response_timeout: "response_timeout",
        replica_acks: "replica_acks",
        replica_count: "replica_acks.replicas",
        replica_ack_timeout: "replica_acks.timeout",
        cluster: "cluster",
        tls_ca: "tls_ca_pem",
        max_lease: "max_lease",
    };
    /// Python's keyword arguments (seconds).
    pub const PYTHON: Spelling = Spelling {
        replica_count: "replica_acks",
        replica_ack_timeout: "replica_ack_timeout",
        tls_ca: "tls_ca_file",
        ..Spelling::RUST
    };
    /// The Java builders (seconds).
    pub const JAVA: Spelling = Spelling {
        unit: Unit::Seconds,
        connect_timeout: "connectTimeout",
        response_timeout: "responseTimeout",
        replica_acks: "replicaAcks",
        replica_count: "replicaAcks replicas",
        replica_ack_timeout: "replicaAcks timeout",
        cluster: "cluster",
        tls_ca: "tlsCaPem",
        max_lease: "maxLease",
    };
    /// The Node options objects (milliseconds).
    pub const JS: Spelling = Spelling {
        unit: Unit::Millis,
        connect_timeout: "connectTimeoutMs",
        response_timeout: "commandTimeoutMs",
        replica_acks: "replicaAcks",
        replica_count: "replicaAcks.replicas",
        replica_ack_timeout: "replicaAcks.timeoutMs",
        cluster: "cluster",
        tls_ca: "tls",
        max_lease: "maxLeaseMs",
    };

    /// `d` in this spelling's unit, with its symbol (`1.5 s`, `1500 ms`).
    fn show(&self, d: Duration) -> String {
        format!("{} {}", self.unit.of(d), self.unit.symbol())
    }

    /// A connect or response timeout: positive and at most 30 days.
    fn check_timeout(&self, what: &str, d: Duration) -> Result<()> {
        if d.is_zero() {
            return Err(Error::invalid(format!("{what} must be positive, got {}", self.show(d))));
        }
        if d > options::MAX_DURATION {
            return Err(Error::invalid(format!(
                "{what} must be at most {}, got {}",
                self.show(options::MAX_DURATION),
                self.show(d)
            )));
        }
        Ok(())
    }
}

/// The replica-acknowledged mode from a binding's two settings: no count is the plain mode (a
/// timeout alone is refused), a count without a timeout waits [`DEFAULT_REPLICA_ACK_TIMEOUT`].
/// `timeout` is in `spelling.unit`; the count must be at least 1 and fit a `u32`.
pub fn replica_acks(replicas: Option<i64>, timeout: Option<f64>, spelling: &Spelling) -> Result<Option<ReplicaAcks>> {
    let Some(replicas) = replicas else {
        return match timeout {
            None => Ok(None),
            Some(_) => Err(Error::invalid(format!(
                "{} needs {} (the number of replicas WAIT must reach)",
                spelling.replica_ack_timeout, spelling.replica_count
            ))),
        };
    };
    let replicas = u32::try_from(replicas)
        .ok()
        .filter(|r| *r >= 1)
        .ok_or_else(|| Error::invalid(format!("{} must be at least 1, got {replicas}", spelling.replica_count)))?;
    let timeout = match timeout {
        None => DEFAULT_REPLICA_ACK_TIMEOUT,
        Some(t) => options::duration_in_range(
            spelling.replica_ack_timeout,
            t,
            spelling.unit,
            MIN_REPLICA_ACK_TIMEOUT,
            options::MAX_DURATION,
        )?,
    };
    Ok(Some(ReplicaAcks { replicas, timeout }))
}

/// How to connect a client: one Redis server (or one seed node of a Redis Cluster) by URL, and
/// the settings every binding shares. `ClientOptions::new(url)` has the defaults; the native
/// driver's `connect()` applies [`validate`](Self::validate) first.
#[derive(Clone)]
pub struct ClientOptions {
    pub(crate) url: String,
    /// Prepended to every key and channel; clients that share locks must use the same prefix.
    pub key_prefix: String,
    /// PEM root certificate(s) to trust for `rediss://` instead of the system store.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Limit on establishing the connection: bounds the whole of connecting (every attempt,
    /// DNS, TLS, AUTH), and each later reconnect attempt (default 5 s).
    pub connect_timeout: Duration,
    /// Limit on one server round trip before it counts as a connection failure. A connection
    /// that stays silent this long is dropped and replaced by a new one (default 5 s).
    pub response_timeout: Duration,
    /// Replica-acknowledged mode for a primary with replicas: grants, extends and renewals
    /// count only once `WAIT` confirms them on this many replicas (PROTOCOL.md §4). Its timeout
    /// must be below `response_timeout`; see [`replica_acks`] for the bindings' default.
    pub replica_acks: Option<ReplicaAcks>,
    /// Treat the URL as one seed node of a Redis Cluster: the client discovers the others,
    /// routes every script to the node owning its lock's slot (all keys of one lock share a
    /// hash tag) and follows MOVED/ASK redirections.
    pub cluster: bool,
}

impl ClientOptions {
    /// Options for `url` with the defaults (prefix `lockgate:`, 5 s timeouts, system roots).
    pub fn new(url: impl Into<String>) -> Self {
        ClientOptions {
            url: url.into(),
            key_prefix: EngineConfig::default().key_prefix,
            tls_ca_pem: None,
            connect_timeout: DEFAULT_TIMEOUT,
            response_timeout: DEFAULT_TIMEOUT,
            replica_acks: None,
            cluster: false,
        }
    }

    /// Checks the URL, prefix, timeouts and TLS settings without connecting (for bindings whose
    /// constructors cannot await); messages name the Rust fields.
    pub fn validate(&self) -> Result<()> {
        self.validate_as(&Spelling::RUST)
    }

    /// [`validate`](Self::validate) with messages in a binding's `spelling`.
    pub fn validate_as(&self, spelling: &Spelling) -> Result<()> {
        let url = RedisUrl::parse(&self.url)?;
        self.validate_settings(spelling)?;
        if self.tls_ca_pem.is_some() && !url.is_tls() {
            return Err(Error::invalid(format!(
                "a TLS CA certificate ({}) was given for a plaintext redis:// URL; use rediss://",
                spelling.tls_ca
            )));
        }
        Ok(())
    }

    /// Every rule except the URL's: for a binding handed an already-made connection instead of
    /// a URL (the Node binding's ioredis clients), whose URL field is then unused.
    pub fn validate_settings(&self, spelling: &Spelling) -> Result<()> {
        options::validate_prefix(&self.key_prefix)?;
        spelling.check_timeout(spelling.connect_timeout, self.connect_timeout)?;
        spelling.check_timeout(spelling.response_timeout, self.response_timeout)?;
        if let Some(r) = self.replica_acks {
            if r.replicas == 0 {
                return Err(Error::invalid(format!("{} must be at least 1, got 0", spelling.replica_count)));
            }
            if r.timeout < MIN_REPLICA_ACK_TIMEOUT {
                return Err(Error::invalid(format!(
                    "{} must be at least {}, got {}",
                    spelling.replica_ack_timeout,
                    spelling.show(MIN_REPLICA_ACK_TIMEOUT),
                    spelling.show(r.timeout)
                )));
            }
            // WAIT holds the connection for up to its timeout: a response timeout no longer
            // than that would turn every unconfirmed grant into a broken connection.
            if r.timeout >= self.response_timeout {
                return Err(Error::invalid(format!(
                    "{} ({}) must be below {} ({})",
                    spelling.replica_ack_timeout,
                    spelling.show(r.timeout),
                    spelling.response_timeout,
                    spelling.show(self.response_timeout)
                )));
            }
            if self.cluster {
                return Err(Error::invalid(format!(
                    "{} is not supported on a Redis Cluster (WAIT must reach the lock's primary)",
                    spelling.replica_acks
                )));
            }
        }
        Ok(())
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = RedisUrl::parse(&self.url)
            .map(|u| u.to_string())
            .unwrap_or_else(|_| "<invalid URL>".into());
        f.debug_struct("ClientOptions")
            .field("url", &url)
            .field("key_prefix", &self.key_prefix)
            .finish_non_exhaustive()
    }
}

/// How to reach the masters of a Redlock deployment and its settings.
#[derive(Clone)]
pub struct RedlockOptions {
    pub(crate) urls: Vec<String>,
    /// The protocol settings (prefix, drift, `max_lease`, node timeout, retry delay); its
    /// `masters` is set from the URLs.
    pub config: RedlockConfig,
    /// PEM root certificate(s) to trust for `rediss://` masters instead of the system store.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Limit on establishing the connections: bounds the whole of connecting (the masters
    /// connect side by side, each with every attempt, DNS, TLS and AUTH inside it), and each
    /// later reconnect attempt to one master (default 5 s).
    pub connect_timeout: Duration,
    /// Limit on one round trip to one master before it counts as a connection failure (the
    /// engine's `node_timeout` decides an attempt much sooner). A master connection that stays
    /// silent this long is dropped and replaced (default 5 s).
    pub response_timeout: Duration,
}

impl RedlockOptions {
    /// Options for the masters at `urls` (each `redis://` or `rediss://`, independent servers)
    /// with the defaults of [`RedlockConfig`].
    pub fn new<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Self {
        let urls: Vec<String> = urls.into_iter().map(Into::into).collect();
        RedlockOptions {
            config: RedlockConfig { masters: urls.len(), ..RedlockConfig::default() },
            urls,
            tls_ca_pem: None,
            connect_timeout: DEFAULT_TIMEOUT,
            response_timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Checks URLs and settings without connecting; messages name the Rust fields.
    pub fn validate(&self) -> Result<()> {
        self.validate_as(&Spelling::RUST)
    }

    /// [`validate`](Self::validate) with messages in a binding's `spelling`.
    pub fn validate_as(&self, spelling: &Spelling) -> Result<()> {
        let mut masters = Masters::default();
        for u in &self.urls {
            let url = RedisUrl::parse(u)?;
            if self.tls_ca_pem.is_some() && !url.is_tls() {
                return Err(Error::invalid(format!(
                    "a TLS CA certificate ({}) was given for a plaintext redis:// URL; use rediss://",
                    spelling.tls_ca
                )));
            }
            masters.add(&url.identity())?;
        }
        spelling.check_timeout(spelling.connect_timeout, self.connect_timeout)?;
        spelling.check_timeout(spelling.response_timeout, self.response_timeout)?;
        self.config().validate()
    }

    /// The settings with `masters` set from the URLs.
    pub fn config(&self) -> RedlockConfig {
        RedlockConfig { masters: self.urls.len(), ..self.config.clone() }
    }
}

impl fmt::Debug for RedlockOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let urls: Vec<String> = self
            .urls
            .iter()
            .map(|u| RedisUrl::parse(u).map(|u| u.to_string()).unwrap_or_else(|_| "<invalid URL>".into()))
            .collect();
        f.debug_struct("RedlockOptions").field("urls", &urls).field("config", &self.config).finish_non_exhaustive()
    }
}

/// The masters of one Redlock seen so far, by identity (`host:port/db`, see
/// [`RedisUrl::identity`]): Redlock's safety needs independent masters, so one listed twice
/// (whatever its credentials) is refused.
#[derive(Debug, Default)]
pub struct Masters {
    seen: HashSet<String>,
}

impl Masters {
    /// Adds the master named `identity`; a second one with the same identity is
    /// `INVALID_ARGUMENT`, named `host:port` (with `/db` unless 0).
    pub fn add(&mut self, identity: &str) -> Result<()> {
        if self.seen.insert(identity.to_string()) {
            return Ok(());
        }
        let label = identity.strip_suffix("/0").unwrap_or(identity);
        Err(Error::invalid(format!("master {label} is listed twice; Redlock needs independent masters")))
    }
}

/// A Redlock lock's options, the one rule of every binding, applied when the lock handle is
/// made: a lease the caller did not give (`lease_given` false) is [`options::DEFAULT_LEASE`],
/// or the deployment's `max_lease` if that is shorter; a lease the caller gave must fit
/// `max_lease` (and its drift allowance), else `INVALID_ARGUMENT` at once.
pub fn redlock_lock_options(config: &RedlockConfig, mut lock: LockOptions, lease_given: bool) -> Result<LockOptions> {
    if !lease_given {
        lock.lease = options::DEFAULT_LEASE.min(config.max_lease);
    }
    lock.validate()?;
    config.check_lease(lock.lease)?;
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<impl fmt::Debug>) -> String {
        let e = r.expect_err("must be refused");
        assert_eq!(e.code(), "INVALID_ARGUMENT");
        e.message().to_string()
    }

    #[test]
    fn defaults() {
        let o = ClientOptions::new("redis://h");
        assert_eq!((o.connect_timeout, o.response_timeout, o.cluster), (DEFAULT_TIMEOUT, DEFAULT_TIMEOUT, false));
        assert_eq!((o.key_prefix.as_str(), o.replica_acks, o.tls_ca_pem.is_none()), ("lockgate:", None, true));
        o.validate().unwrap();
        // A count alone: the same 1 s WAIT in every binding.
        for s in [Spelling::RUST, Spelling::PYTHON, Spelling::JAVA, Spelling::JS] {
            assert_eq!(
                replica_acks(Some(2), None, &s).unwrap(),
                Some(ReplicaAcks { replicas: 2, timeout: DEFAULT_REPLICA_ACK_TIMEOUT })
            );
            assert_eq!(replica_acks(None, None, &s).unwrap(), None);
        }
        assert_eq!(
            replica_acks(Some(1), Some(250.0), &Spelling::JS).unwrap(),
            Some(ReplicaAcks { replicas: 1, timeout: Duration::from_millis(250) })
        );
        let r = RedlockOptions::new(["redis://a", "redis://b", "redis://c"]);
        assert_eq!(r.config().masters, 3);
        r.validate().unwrap();
    }

    /// The messages of each binding, in its names and unit.
    #[test]
    fn messages_speak_the_callers_language() {
        let js = &Spelling::JS;
        assert_eq!(message(replica_acks(Some(0), Some(100.0), js)), "replicaAcks.replicas must be at least 1, got 0");
        assert_eq!(message(replica_acks(Some(1), Some(0.0), js)), "replicaAcks.timeoutMs must be at least 1 ms, got 0 ms");
        assert_eq!(message(replica_acks(None, Some(5.0), js)), "replicaAcks.timeoutMs needs replicaAcks.replicas (the number of replicas WAIT must reach)");
        assert_eq!(message(replica_acks(Some(-1), None, &Spelling::JAVA)), "replicaAcks replicas must be at least 1, got -1");
        assert_eq!(message(replica_acks(Some(1 << 40), None, &Spelling::PYTHON)), "replica_acks must be at least 1, got 1099511627776");
        assert_eq!(
            message(replica_acks(Some(1), Some(0.0005), &Spelling::JAVA)),
            "replicaAcks timeout must be at least 0.001 s, got 0.0005 s"
        );
        let mut o = ClientOptions::new("redis://h");
        o.replica_acks = replica_acks(Some(1), None, js).unwrap();
        o.response_timeout = Duration::from_secs(1);
        assert_eq!(message(o.validate_as(js)), "replicaAcks.timeoutMs (1000 ms) must be below commandTimeoutMs (1000 ms)");
        o.response_timeout = Duration::from_secs(2);
        o.validate_as(js).unwrap();
        o.replica_acks = Some(ReplicaAcks { replicas: 1, timeout: Duration::from_secs(2) });
        o.response_timeout = Duration::from_secs(1);
        assert_eq!(message(o.validate_as(&Spelling::JAVA)), "replicaAcks timeout (2 s) must be below responseTimeout (1 s)");
        assert_eq!(message(o.validate_as(&Spelling::PYTHON)), "replica_ack_timeout (2 s) must be below response_timeout (1 s)");
        o.response_timeout = Duration::from_secs(5);
        o.cluster = true;
        assert_eq!(
            message(o.validate_as(js)),
            "replicaAcks is not supported on a Redis Cluster (WAIT must reach the lock's primary)"
        );
        let mut o = ClientOptions::new("redis://h");
        o.connect_timeout = Duration::ZERO;
        assert_eq!(message(o.validate_as(js)), "connectTimeoutMs must be positive, got 0 ms");
        o.connect_timeout = Duration::from_secs(31 * 24 * 3600);
        assert_eq!(message(o.validate_as(&Spelling::JAVA)), "connectTimeout must be at most 2592000 s, got 2678400 s");
        let mut o = ClientOptions::new("redis://h");
        o.tls_ca_pem = Some(b"pem".to_vec());
        assert_eq!(
            message(o.validate_as(&Spelling::PYTHON)),
            "a TLS CA certificate (tls_ca_file) was given for a plaintext redis:// URL; use rediss://"
        );
        o.url = "rediss://h".into();
        o.validate().unwrap();
        o.url = "redis://h/abc".into();
        assert!(message(o.validate()).contains("database number"));
        // No URL rule in validate_settings (a binding's own connection has no URL).
        let mut o = ClientOptions::new("");
        o.validate_settings(js).unwrap();
        o.key_prefix = "a{".into();
        assert!(message(o.validate_settings(js)).contains("key prefix"));
    }

    #[test]
    fn redlock_masters_are_independent() {
        for (urls, says) in [
            (vec!["redis://h", "redis://u:pw@H:6379/0"], "master h:6379 is listed twice"),
            (vec!["redis://h/2", "redis://h:6379/2"], "master h:6379/2 is listed twice"),
            (vec!["redis://[::1]:7000", "redis://[::1]:7000/0"], "master ::1:7000 is listed twice"),
            (vec!["redis://h", "http://h2"], "unsupported URL scheme"),
            (vec![], "between 1 and"),
        ] {
            let m = message(RedlockOptions::new(urls.clone()).validate());
            assert!(m.contains(says), "{urls:?}: {m}");
            assert!(!m.contains("pw"), "{m}");
        }
        RedlockOptions::new(["redis://h/1", "redis://h/2", "redis://h:6380"]).validate().unwrap();
        let mut r = RedlockOptions::new(["redis://h"]);
        r.response_timeout = Duration::ZERO;
        assert_eq!(message(r.validate_as(&Spelling::JS)), "commandTimeoutMs must be positive, got 0 ms");
    }

    /// A deployment with a 10 s `max_lease`: a lock without a lease gets 10 s, one asking for
    /// more is refused when the handle is made — in every binding (issue 14).
    #[test]
    fn redlock_leases_fit_max_lease() {
        let config = RedlockConfig { max_lease: Duration::from_secs(10), ..RedlockConfig::default() };
        let o = redlock_lock_options(&config, LockOptions::default(), false).unwrap();
        assert_eq!(o.lease, Duration::from_secs(10));
        let o = redlock_lock_options(&RedlockConfig::default(), LockOptions::default(), false).unwrap();
        assert_eq!(o.lease, options::DEFAULT_LEASE);
        let asked = LockOptions::fixed_lease(Duration::from_secs(30));
        assert!(message(redlock_lock_options(&config, asked, true)).contains("max_lease of 10000 ms"));
        let fits = LockOptions::fixed_lease(Duration::from_secs(10));
        assert_eq!(redlock_lock_options(&config, fits, true).unwrap().lease, Duration::from_secs(10));
        // A lease the caller gave is checked as given, even when it equals the default.
        assert!(redlock_lock_options(&config, LockOptions::default(), true).is_err());
    }
}
