//! Client options as pure data, with their defaults and every rule that does not
//! need a connection: the same checks and messages in every binding (the Node binding runs
//! them as wasm). The native driver adds `connect()` to these types in `native/`.

use super::backend::Kind;
use super::spelling::{ClientOption, Spelling};
use crate::backend::redis::{EngineConfig, ReplicaAcks};
use crate::capabilities::{Capabilities, Capability};
use crate::error::{Error, Result};
use crate::options::{self, LockOptions};
use crate::time::Duration;

/// Default connect and response timeouts (5 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long `WAIT` may block when a binding is given a replica count and no timeout (1 s,
/// Redisson's `syncSlavesTimeout`), below the default response timeout.
pub const DEFAULT_REPLICA_ACK_TIMEOUT: Duration = Duration::from_secs(1);

/// The shortest `WAIT` timeout: `WAIT` counts whole milliseconds.
pub const MIN_REPLICA_ACK_TIMEOUT: Duration = Duration::from_millis(1);

/// A connect or response timeout: positive and at most 30 days (messages in `spelling`).
pub(crate) fn check_timeout(spelling: &Spelling, what: &str, d: Duration) -> Result<()> {
    if d.is_zero() {
        return Err(Error::invalid(format!("{what} must be positive, got {}", spelling.show(d))));
    }
    if d > options::MAX_DURATION {
        return Err(Error::invalid(format!(
            "{what} must be at most {}, got {}",
            spelling.show(options::MAX_DURATION),
            spelling.show(d)
        )));
    }
    Ok(())
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

/// How to connect a client of any backend: the URL (its scheme selects the backend, see
/// [`Target`](super::Target)) and the settings, with their defaults and every rule that needs no connection.
/// `ClientOptions::new(url)` has the defaults; [`set`](Self::set) changes one option by a
/// binding's name for it; the native driver's `connect()` applies [`validate`](Self::validate)
/// first. Settings a backend does not have (Redlock's on a Redis URL, replica acks on a
/// Redlock or a Cluster) are `INVALID_ARGUMENT`, not silently ignored.
#[derive(Clone)]
pub struct ClientOptions {
    pub(crate) url: String,
    /// Prepended to every key and channel; clients that share locks must use the same prefix.
    pub key_prefix: String,
    /// PEM root certificate(s) to trust for TLS (`rediss://`, `rediss+cluster://`,
    /// `rediss+redlock://`) instead of the system store.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// Limit on establishing the connection: bounds the whole of connecting (every attempt,
    /// DNS, TLS, AUTH; a Redlock's masters connect side by side), and each later reconnect
    /// attempt (default 5 s).
    pub connect_timeout: Duration,
    /// Limit on one server round trip before it counts as a connection failure. A connection
    /// that stays silent this long is dropped and replaced by a new one (default 5 s). On a
    /// Redlock it is also how long a release, break or inspect waits for the masters' answers
    /// (attempts and extends wait `node_timeout`).
    pub response_timeout: Duration,
    /// Replica-acknowledged mode for a primary with replicas (`redis://` only): grants, extends
    /// and renewals count only once `WAIT` confirms them on this many replicas (PROTOCOL.md
    /// §4). Its timeout must be below `response_timeout`; see [`replica_acks`] for the
    /// bindings' default.
    pub replica_acks: Option<ReplicaAcks>,
    /// Treat a `redis://` URL as one seed node of a Redis Cluster (the same as writing
    /// `redis+cluster://`): the client discovers the others, routes every script to the node
    /// owning its lock's slot (all keys of one lock share a hash tag) and follows MOVED/ASK
    /// redirections.
    pub cluster: bool,
    /// Redlock and memcached only: the longest lease any client of the deployment takes
    /// (default 30 s; every client must agree): a server restarted less than this long ago
    /// takes part in no grant (PROTOCOL.md §8, §13). A lock without a lease gets this or 30 s,
    /// whichever is shorter.
    pub max_lease: Option<Duration>,
    /// Redlock only: clock-rate drift allowed, as a fraction of the lease (default 0.01).
    pub drift_factor: Option<f64>,
    /// Redlock only: the fixed part of the drift allowance (default 2 ms).
    pub drift_fixed: Option<Duration>,
    /// Redlock only: how long one attempt waits for the masters' answers (default 50 ms).
    pub node_timeout: Option<Duration>,
    /// Redlock only: pause before another attempt after a failed one (default 200 ms) ...
    pub retry_delay: Option<Duration>,
    /// ... plus a random part up to this (default 200 ms).
    pub retry_jitter: Option<Duration>,
    /// ZooKeeper and etcd only. ZooKeeper: the session timeout to ask the ensemble for (default
    /// 30 s, the default lease; a crashed client's nodes go when it expires).
    /// Every lease lives in the client's one session; the ensemble may grant less, and a lease
    /// is counted valid for half of what it granted after each confirmation (PROTOCOL.md
    /// "ZooKeeper").
    ///
    /// etcd: the TTL of the client's session lease (default 30 s, the default lease), asked in
    /// whole seconds (rounded up), and the longest TTL of the lease a lock's key is attached to
    /// (the lock's lease, in whole seconds); the cluster may grant more, and a lease is counted
    /// valid for two thirds of what it granted after each acknowledged keepalive (PROTOCOL.md
    /// "etcd"). One option for both: it is the same thing, how long the backend keeps a silent
    /// client's locks.
    pub session_timeout: Option<Duration>,
    /// Who this client is, stored with every entry it creates (holders and waiters of every
    /// primitive) for an operator to read: `None` is the default, `<hostname>:<pid>`
    /// ([`label`](Self::label)). At most 256 bytes of UTF-8, no control characters
    /// ([`crate::label::check_label`]); never put a credential in it.
    pub label: Option<String>,
    /// Whether telemetry events carry each lock's name (off by default: one series per lock
    /// name is unbounded cardinality for a metrics backend).
    pub telemetry_lock_names: bool,
    /// A lease held this long is told once as a `lease.held_too_long` telemetry event, logged
    /// at WARN (`None`, the default: never).
    pub held_too_long: Option<Duration>,
    /// A replica-ack timeout set (by [`set`](Self::set)) before or without a replica count:
    /// applied when the count comes, refused by `validate` if it never does.
    pub(crate) replica_ack_timeout_alone: Option<Duration>,
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
            max_lease: None,
            drift_factor: None,
            drift_fixed: None,
            node_timeout: None,
            retry_delay: None,
            retry_jitter: None,
            session_timeout: None,
            label: None,
            telemetry_lock_names: false,
            held_too_long: None,
            replica_ack_timeout_alone: None,
        }
    }
}

/// The rules every backend shares, before its own (`Spec::validate`): the key prefix, the
/// timeouts, and the replica-acknowledged mode's own consistency (whether the backend has it is
/// the backend's rule).
pub(crate) fn check_common(o: &ClientOptions, spelling: &Spelling) -> Result<()> {
    options::validate_prefix(&o.key_prefix)?;
    if let Some(label) = &o.label {
        crate::label::check_label(label, spelling.key(ClientOption::Label))?;
    }
    check_timeout(spelling, spelling.connect_timeout, o.connect_timeout)?;
    check_timeout(spelling, spelling.response_timeout, o.response_timeout)?;
    if o.replica_ack_timeout_alone.is_some() && o.replica_acks.is_none() {
        return Err(Error::invalid(format!(
            "{} needs {} (the number of replicas WAIT must reach)",
            spelling.key(ClientOption::ReplicaAckTimeout),
            spelling.key(ClientOption::ReplicaAcks)
        )));
    }
    if let Some(r) = o.replica_acks {
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
        if r.timeout >= o.response_timeout {
            return Err(Error::invalid(format!(
                "{} ({}) must be below {} ({})",
                spelling.replica_ack_timeout,
                spelling.show(r.timeout),
                spelling.response_timeout,
                spelling.show(o.response_timeout)
            )));
        }
    }
    Ok(())
}

/// The refusal of the replica-acknowledged mode on `kind`, which has no replicas to wait for.
// A build with one backend may have no caller (each is for the backends that lack the setting).
#[allow(dead_code)]
pub(crate) fn no_replica_acks(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    if o.replica_acks.is_none() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{} is not supported on {} (it has no replicas to wait for; only a redis:// primary does)",
        spelling.replica_acks,
        kind.a()
    )))
}

/// The refusal of a session timeout on `kind`, which has no session.
// A build with one backend may have no caller (each is for the backends that lack the setting).
#[allow(dead_code)]
pub(crate) fn no_session_timeout(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    if o.session_timeout.is_none() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{} is a ZooKeeper and etcd setting (zookeeper:// and etcd:// URLs); {} client has no such setting",
        spelling.key(ClientOption::SessionTimeout),
        kind.a()
    )))
}

/// The refusal of any Redlock setting given on `kind`, which is no Redlock.
// A build with one backend may have no caller (each is for the backends that lack the setting).
#[allow(dead_code)]
pub(crate) fn no_redlock_settings(o: &ClientOptions, kind: &Kind, spelling: &Spelling) -> Result<()> {
    redlock_settings_but(o, kind, spelling, &[])
}

/// The refusal of any Redlock setting given on `kind` but those `allowed` (memcached shares
/// Redlock's `max_lease`, PROTOCOL.md §13).
// A build with one backend may have no caller.
#[allow(dead_code)]
pub(crate) fn redlock_settings_but(o: &ClientOptions, kind: &Kind, spelling: &Spelling, allowed: &[ClientOption]) -> Result<()> {
    match o.redlock_settings_given().into_iter().find(|given| !allowed.contains(given)).as_ref() {
        None => Ok(()),
        Some(given) => Err(Error::invalid(format!(
            "{} is a Redlock setting (redlock:// URLs); {} client has no such setting",
            spelling.key(*given),
            kind.a()
        ))),
    }
}

/// Whether the key prefix was changed from its default (the backends without key prefixes
/// refuse it, each saying how it names locks instead).
// A build with one backend may have no caller (each is for the backends that lack the setting).
#[allow(dead_code)]
pub(crate) fn custom_key_prefix(o: &ClientOptions) -> bool {
    o.key_prefix != EngineConfig::default().key_prefix
}

impl ClientOptions {
    /// The label this client stores with its entries: the one given, else this process's
    /// `<hostname>:<pid>` ([`crate::label::default_label`]).
    pub fn label(&self) -> String {
        self.label.clone().unwrap_or_else(crate::label::default_label)
    }

    /// The Redlock settings that were given (not left to their defaults).
    fn redlock_settings_given(&self) -> Vec<ClientOption> {
        [
            (ClientOption::MaxLease, self.max_lease.is_some()),
            (ClientOption::DriftFactor, self.drift_factor.is_some()),
            (ClientOption::DriftFixed, self.drift_fixed.is_some()),
            (ClientOption::NodeTimeout, self.node_timeout.is_some()),
            (ClientOption::RetryDelay, self.retry_delay.is_some()),
            (ClientOption::RetryJitter, self.retry_jitter.is_some()),
        ]
        .into_iter()
        .filter_map(|(o, given)| given.then_some(o))
        .collect()
    }
}

/// [`ClientOptions::lock_options`] once the backend's refusals are said: `bound` is the
/// deployment's lease bound (`None` for every backend but a Redlock).
pub(crate) fn lock_options_for(
    bound: Option<&dyn LeaseBound>,
    lease: Option<Duration>,
    auto_renew: Option<bool>,
    wait_timeout: Option<Duration>,
    entry_ttl: Option<Duration>,
    spelling: &Spelling,
) -> Result<LockOptions> {
    let mut lock = LockOptions::default();
    if let Some(d) = lease {
        in_range(spelling, spelling.lease, d, options::MIN_LEASE)?;
        lock.lease = d;
    } else if let Some(bound) = bound {
        lock.lease = options::DEFAULT_LEASE.min(bound.max_lease());
    }
    if let Some(r) = auto_renew {
        lock.auto_renew = r;
    }
    lock.wait_timeout = wait_timeout;
    if let Some(t) = entry_ttl {
        in_range(spelling, spelling.entry_ttl, t, options::MIN_ENTRY_TTL)?;
        lock.entry_ttl = t;
    }
    lock.validate()?;
    if let Some(bound) = bound {
        bound.check_lease(lock.lease)?;
    }
    Ok(lock)
}

/// `lock` with the shortest and longest hold a caller gave (`None`: not given), by the rules
/// every binding shares (named as `spelling` names them):
/// - each at least the shortest lease (10 ms) and at most 30 days (`INVALID_ARGUMENT`);
/// - `min_hold` not longer than `max_hold` (`INVALID_ARGUMENT` naming both);
/// - `min_hold` only where the backend keeps an entry after its process exits
///   ([`Capability::MinHold`](crate::capabilities::Capability::MinHold)): `UNSUPPORTED` on
///   ZooKeeper and etcd, never a weaker hold; within a deployment's lease bound (a Redlock's or
///   memcached's `max_lease`), since the entry is kept that long by an expiry change.
pub fn holds_for(
    capabilities: &Capabilities,
    bound: Option<&dyn LeaseBound>,
    mut lock: LockOptions,
    min_hold: Option<Duration>,
    max_hold: Option<Duration>,
    spelling: &Spelling,
) -> Result<LockOptions> {
    if let Some(d) = min_hold {
        in_range(spelling, spelling.min_hold, d, options::MIN_LEASE)?;
    }
    if let Some(d) = max_hold {
        in_range(spelling, spelling.max_hold, d, options::MIN_LEASE)?;
    }
    if let (Some(lo), Some(hi)) = (min_hold, max_hold) {
        if lo > hi {
            return Err(Error::invalid(format!(
                "{} ({}) must not be longer than {} ({})",
                spelling.min_hold,
                spelling.show(lo),
                spelling.max_hold,
                spelling.show(hi)
            )));
        }
    }
    if let Some(d) = min_hold {
        capabilities
            .require(Capability::MinHold)
            .map_err(|e| Error::unsupported(format!("{}: {}", spelling.min_hold, e.message())))?;
        if let Some(bound) = bound {
            bound.check_lease(d).map_err(|e| Error::invalid(format!("{}: {}", spelling.min_hold, e.message())))?;
        }
    }
    lock.min_hold = min_hold;
    lock.max_hold = max_hold;
    lock.validate()?;
    Ok(lock)
}

/// `d` between `min` and 30 days, else `INVALID_ARGUMENT` naming it `what` in `spelling`'s unit.
fn in_range(spelling: &Spelling, what: &str, d: Duration, min: Duration) -> Result<()> {
    if d < min {
        return Err(Error::invalid(format!("{what} must be at least {}, got {}", spelling.show(min), spelling.show(d))));
    }
    if d > options::MAX_DURATION {
        return Err(Error::invalid(format!(
            "{what} must be at most {}, got {}",
            spelling.show(options::MAX_DURATION),
            spelling.show(d)
        )));
    }
    Ok(())
}

/// A deployment's bound on every lease (a Redlock's `max_lease` and drift allowance), as the
/// lock-options rule and the native client check it.
pub trait LeaseBound: std::any::Any + Send + Sync + std::fmt::Debug {
    /// The longest lease; a lock without a lease gets this or the default, whichever is shorter.
    fn max_lease(&self) -> Duration;
    /// Checks a lease or extension against the bound; `INVALID_ARGUMENT` says why not.
    fn check_lease(&self, lease: Duration) -> Result<()>;
    /// Checks the bound's own settings against their documented ranges.
    fn validate(&self) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::Backend;
    use std::fmt;

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
        // The label: this process's `<hostname>:<pid>` unless given; checked by validate too.
        assert_eq!(o.label(), crate::label::default_label());
        assert!(o.label().ends_with(&format!(":{}", std::process::id())));
        o.validate().unwrap();
        let mut bad = o.clone();
        bad.label = Some("tab\there".into());
        assert_eq!(message(bad.validate_as(&Spelling::JAVA)), "label must not contain control characters (one at character 3)");
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
        let r = ClientOptions::new("redlock://a,b,c");
        assert_eq!(r.redlock_config().unwrap().masters, 3);
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
        for (url, says) in [
            ("redlock://u:pw@h,H:6379", "master h:6379 is listed twice"),
            ("redlock://:pw@h,h:6379/2", "master h:6379/2 is listed twice"),
            ("redlock://[::1]:7000,[::1]:7000/0", "master ::1:7000 is listed twice"),
            ("http://h,h2", "unsupported URL scheme"),
            ("redlock://", "lists its masters"),
        ] {
            let m = message(ClientOptions::new(url).validate());
            assert!(m.contains(says), "{url}: {m}");
            assert!(!m.contains("pw"), "{m}");
        }
        ClientOptions::new("redlock://h,h:6380,h:6381/2").validate().unwrap();
        let mut r = ClientOptions::new("redlock://h");
        r.response_timeout = Duration::ZERO;
        assert_eq!(message(r.validate_as(&Spelling::JS)), "commandTimeoutMs must be positive, got 0 ms");
    }

    /// The one lock-options rule: the same defaults and refusals for every binding, by backend.
    #[test]
    fn lock_options_take_the_backends_defaults() {
        let s = &Spelling::RUST;
        let redis = ClientOptions::new("redis://h");
        assert_eq!(redis.lock_options(None, None, None, None, s).unwrap(), LockOptions::default());
        let o = redis
            .lock_options(Some(Duration::from_secs(5)), Some(false), Some(Duration::ZERO), Some(Duration::from_secs(1)), s)
            .unwrap();
        assert_eq!(
            (o.lease, o.auto_renew, o.wait_timeout, o.entry_ttl),
            (Duration::from_secs(5), false, Some(Duration::ZERO), Duration::from_secs(1))
        );
        assert_eq!(
            message(redis.lock_options(Some(Duration::from_millis(5)), None, None, None, &Spelling::JS)),
            "leaseMs must be at least 10 ms, got 5 ms"
        );
        assert!(message(redis.lock_options(None, None, None, Some(Duration::from_millis(5)), &Spelling::JAVA))
            .starts_with("entryTtl must be at least 0.1 s, got 0.005 s"));
        // A Redlock: the lease defaults to max_lease when that is shorter, and must fit it.
        let mut redlock = ClientOptions::new("redlock://a,b,c");
        redlock.max_lease = Some(Duration::from_secs(10));
        assert_eq!(redlock.lock_options(None, None, None, None, s).unwrap().lease, Duration::from_secs(10));
        assert!(message(redlock.lock_options(Some(Duration::from_secs(11)), None, None, None, s)).contains("max_lease"));
        assert_eq!(
            message(redlock.lock_options(None, None, None, Some(Duration::from_secs(1)), &Spelling::PYTHON)),
            "entry_ttl is not a Redlock setting (a Redlock has no wait queue: waiters retry)"
        );
        redlock.max_lease = None;
        assert_eq!(redlock.lock_options(None, None, None, None, s).unwrap().lease, options::DEFAULT_LEASE);
        // The URL is checked too (no lock options for a URL that cannot connect).
        assert!(message(ClientOptions::new("http://h").lock_options(None, None, None, None, s)).contains("scheme"));
    }

    /// The shortest and longest hold: ranges and order in the caller's words, `min_hold` refused
    /// (`UNSUPPORTED`) where a backend cannot keep an entry after its process exits, and within
    /// a Redlock's `max_lease`.
    #[test]
    fn holds_follow_one_rule() {
        let ms = Duration::from_millis;
        let redis = ClientOptions::new("redis://h");
        let base = LockOptions::default();
        let held = redis.lock_holds(base.clone(), Some(ms(300)), Some(ms(900)), &Spelling::RUST).unwrap();
        assert_eq!((held.min_hold, held.max_hold), (Some(ms(300)), Some(ms(900))));
        assert_eq!(redis.lock_holds(base.clone(), None, None, &Spelling::RUST).unwrap(), base);
        assert_eq!(message(redis.lock_holds(base.clone(), Some(ms(5)), None, &Spelling::JS)), "minHoldMs must be at least 10 ms, got 5 ms");
        assert_eq!(message(redis.lock_holds(base.clone(), None, Some(ms(5)), &Spelling::JAVA)), "maxHold must be at least 0.01 s, got 0.005 s");
        assert_eq!(
            message(redis.lock_holds(base.clone(), Some(ms(900)), Some(ms(300)), &Spelling::PYTHON)),
            "min_hold (0.9 s) must not be longer than max_hold (0.3 s)"
        );
        assert!(message(redis.lock_holds(base.clone(), None, Some(Duration::from_secs(31 * 24 * 3600)), &Spelling::RUST)).contains("max_hold must be at most"));
        for url in ["zookeeper://h", "etcd://h"] {
            let o = ClientOptions::new(url);
            let e = o.lock_holds(base.clone(), Some(ms(300)), None, &Spelling::JS).unwrap_err();
            assert_eq!(e.code(), "UNSUPPORTED", "{url}");
            assert!(e.message().starts_with("minHoldMs: minimum holds kept after the holder exits are not supported"), "{e}");
            // The longest hold is the client's own (it stops renewing): everywhere.
            assert_eq!(o.lock_holds(base.clone(), None, Some(ms(300)), &Spelling::JS).unwrap().max_hold, Some(ms(300)));
        }
        let mut redlock = ClientOptions::new("redlock://a,b,c");
        redlock.max_lease = Some(Duration::from_secs(10));
        assert!(message(redlock.lock_holds(base.clone(), Some(Duration::from_secs(11)), None, &Spelling::RUST)).starts_with("min_hold: "));
        assert!(redlock.lock_holds(base, Some(Duration::from_secs(9)), None, &Spelling::RUST).is_ok());
    }

    /// ZooKeeper: the session timeout is its setting (30 s, the default lease, unless given), and what a
    /// ZooKeeper client does not have is refused, in the caller's words.
    #[test]
    fn zookeeper_settings_and_refusals() {
        use super::super::setter::OptionValue::{Number, Str};
        let zk = ClientOptions::new("zookeeper://u:secret@h1:2181,h2/app");
        zk.validate().unwrap();
        assert_eq!(zk.zookeeper_config().unwrap().session_timeout, Duration::from_secs(30));
        assert_eq!(zk.zookeeper_config().unwrap().label, crate::label::default_label());
        let caps = zk.capabilities().unwrap();
        assert!(caps.fencing && caps.fifo && caps.semaphore && caps.read_write && caps.election && caps.observe);
        assert!(!caps.readers_first && !caps.agreed_parameters && !caps.entry_ttl && !caps.replica_acks);
        for (s, key, value, secs) in [
            (Spelling::PYTHON, "session_timeout", Number(10.0), 10.0),
            (Spelling::JAVA, "sessionTimeout", Number(4.5), 4.5),
            (Spelling::JS, "sessionTimeoutMs", Number(15_000.0), 15.0),
        ] {
            let mut o = zk.clone();
            o.set(key, value, &s).unwrap();
            o.validate_as(&s).unwrap();
            assert_eq!(o.zookeeper_config().unwrap().session_timeout, Duration::from_secs_f64(secs));
            assert_eq!(
                message(o.set(key, Number(0.0), &s).map(|_| ())),
                format!("{key} must be at least {} {}, got 0 {}", if s.unit == options::Unit::Millis { "100" } else { "0.1" }, s.unit.symbol(), s.unit.symbol())
            );
            // A Redis URL has no session timeout.
            o.url = "redis://h".into();
            assert_eq!(
                message(o.validate_as(&s)),
                format!(
                    "{key} is a ZooKeeper and etcd setting (zookeeper:// and etcd:// URLs); a Redis client has no \
                     such setting"
                )
            );
        }
        assert!(message(ClientOptions::new("redis://h").zookeeper_config()).contains("not a ZooKeeper ensemble"));
        // Redis and Redlock settings on a ZooKeeper URL.
        let mut o = zk.clone();
        o.set("keyPrefix", Str("app:".into()), &Spelling::JS).unwrap();
        assert!(message(o.validate_as(&Spelling::JS)).starts_with("keyPrefix is a Redis setting; a ZooKeeper client names locks by path"));
        let mut o = zk.clone();
        o.set("replica_acks", super::super::setter::OptionValue::Int(1), &Spelling::PYTHON).unwrap();
        assert!(message(o.validate_as(&Spelling::PYTHON)).starts_with("replica_acks is not supported on a ZooKeeper"));
        let mut o = zk.clone();
        o.set("maxLease", Number(10.0), &Spelling::JAVA).unwrap();
        assert_eq!(
            message(o.validate_as(&Spelling::JAVA)),
            "maxLease is a Redlock setting (redlock:// URLs); a ZooKeeper client has no such setting"
        );
        let mut o = zk.clone();
        o.cluster = true;
        assert!(message(o.validate()).starts_with("cluster applies to redis:// URLs"));
        // Lock options: the lease and its defaults as everywhere; no waiter entry lease.
        assert_eq!(zk.lock_options(None, None, None, None, &Spelling::RUST).unwrap(), LockOptions::default());
        assert_eq!(
            message(zk.lock_options(None, None, None, Some(Duration::from_secs(1)), &Spelling::JS)),
            "entryTtlMs is not a ZooKeeper setting (a waiter's node lives as long as its session: a crashed waiter \
             is skipped once its session expires, see sessionTimeoutMs)"
        );
        // The password never shows.
        assert!(!format!("{zk:?}").contains("secret"));
    }

    /// etcd: `session_timeout` is the session lease's TTL (30 s, the default lease,
    /// unless given; at least 1 s), and what an etcd client does not have is refused.
    #[test]
    fn etcd_settings_and_refusals() {
        use super::super::setter::OptionValue::{Number, Str};
        let etcd = ClientOptions::new("etcd://u:secret@h1:2379,h2");
        etcd.validate().unwrap();
        assert_eq!(etcd.etcd_config().unwrap().session_ttl, Duration::from_secs(30));
        let mut named = etcd.clone();
        named.set("label", Str("api-3".into()), &Spelling::PYTHON).unwrap();
        assert_eq!(named.etcd_config().unwrap().label, "api-3");
        let caps = etcd.capabilities().unwrap();
        assert!(caps.fencing && caps.fifo && caps.semaphore && caps.read_write && caps.election && caps.observe);
        assert!(!caps.readers_first && !caps.agreed_parameters && !caps.entry_ttl && !caps.replica_acks);
        let mut o = etcd.clone();
        o.set("sessionTimeoutMs", Number(5_000.0), &Spelling::JS).unwrap();
        o.validate_as(&Spelling::JS).unwrap();
        assert_eq!(o.etcd_config().unwrap().session_ttl, Duration::from_secs(5));
        o.set("sessionTimeoutMs", Number(500.0), &Spelling::JS).unwrap();
        assert_eq!(
            message(o.validate_as(&Spelling::JS)),
            "sessionTimeoutMs (the etcd session lease's TTL) must be between 1000 ms and 2147483647 ms, got 500 ms"
        );
        assert!(message(ClientOptions::new("redis://h").etcd_config()).contains("not an etcd cluster"));
        assert!(message(ClientOptions::new("zookeeper://h").etcd_config()).contains("not an etcd cluster"));
        let mut o = etcd.clone();
        o.set("key_prefix", Str("app:".into()), &Spelling::PYTHON).unwrap();
        assert!(message(o.validate_as(&Spelling::PYTHON)).starts_with("key_prefix is a Redis setting; an etcd client names locks by key prefix"));
        let mut o = etcd.clone();
        o.set("maxLease", Number(10.0), &Spelling::JAVA).unwrap();
        assert_eq!(message(o.validate_as(&Spelling::JAVA)), "maxLease is a Redlock setting (redlock:// URLs); an etcd client has no such setting");
        assert_eq!(etcd.lock_options(None, None, None, None, &Spelling::RUST).unwrap(), LockOptions::default());
        assert!(message(etcd.lock_options(None, None, None, Some(Duration::from_secs(1)), &Spelling::PYTHON))
            .starts_with("entry_ttl is not an etcd setting"));
        assert!(!format!("{etcd:?}").contains("secret"));
    }

    /// SQL: the table (prefix, PostgreSQL schema) comes from the URL; waiter entries have a
    /// lease of their own (`entry_ttl` accepted); what a SQL client does not have is refused.
    #[test]
    fn sql_settings_and_refusals() {
        use super::super::setter::OptionValue::{Number, Str};
        let pg = ClientOptions::new("postgresql://app:secret@db1,db2:5433/orders?schema=locks&table_prefix=app_");
        pg.validate().unwrap();
        assert_eq!(pg.backend().unwrap(), Backend::Postgres);
        let config = pg.sql_config().unwrap();
        assert_eq!(config.schema.table(), "\"locks\".\"app_entry\"");
        assert_eq!(config.label, crate::label::default_label());
        let caps = pg.capabilities().unwrap();
        assert!(caps.fencing && caps.fifo && caps.semaphore && caps.read_write && caps.election && caps.observe && caps.entry_ttl);
        assert!(!caps.readers_first && !caps.agreed_parameters && !caps.replica_acks);
        assert_eq!((caps.backend, caps.scheme), ("PostgreSQL", "postgres"));
        let my = ClientOptions::new("mariadb://root@h/app");
        assert_eq!(my.backend().unwrap(), Backend::MySql);
        assert_eq!(my.sql_config().unwrap().schema.table(), "`lockgate_entry`");
        assert!(message(ClientOptions::new("etcd://h").sql_config()).contains("not a SQL database"));
        let mut o = pg.clone();
        o.set("sessionTimeoutMs", Number(5_000.0), &Spelling::JS).unwrap();
        assert_eq!(
            message(o.validate_as(&Spelling::JS)),
            "sessionTimeoutMs is a ZooKeeper and etcd setting (zookeeper:// and etcd:// URLs); a PostgreSQL client has no such setting"
        );
        let mut o = my.clone();
        o.set("key_prefix", Str("app:".into()), &Spelling::PYTHON).unwrap();
        assert!(message(o.validate_as(&Spelling::PYTHON)).starts_with("key_prefix is a Redis setting; a SQL client keeps its locks in a table"));
        let mut o = my.clone();
        o.set("maxLease", Number(10.0), &Spelling::JAVA).unwrap();
        assert_eq!(message(o.validate_as(&Spelling::JAVA)), "maxLease is a Redlock setting (redlock:// URLs); a MySQL client has no such setting");
        let opts = pg.lock_options(None, None, None, Some(Duration::from_secs(3)), &Spelling::RUST).unwrap();
        assert_eq!(opts.entry_ttl, Duration::from_secs(3));
        assert!(message(ClientOptions::new("postgres://u:secret@h?table_prefix=X").validate()).starts_with("table_prefix must be"));
        assert!(!format!("{pg:?}").contains("secret"));
        assert!(!message(ClientOptions::new("postgres://u:secret@h?sslmode=on").validate()).contains("secret"));
    }

    /// A deployment with a 10 s `max_lease`: a lock without a lease gets 10 s, one asking for
    /// more is refused when the handle is made — in every binding (issue 14).
    #[test]
    fn redlock_leases_fit_max_lease() {
        let s = &Spelling::RUST;
        let mut config = ClientOptions::new("redlock://a,b,c");
        config.max_lease = Some(Duration::from_secs(10));
        assert_eq!(config.lock_options(None, None, None, None, s).unwrap().lease, Duration::from_secs(10));
        let default = ClientOptions::new("redlock://a,b,c");
        assert_eq!(default.lock_options(None, None, None, None, s).unwrap().lease, options::DEFAULT_LEASE);
        let asked = config.lock_options(Some(Duration::from_secs(30)), None, None, None, s);
        assert!(message(asked).contains("max_lease of 10000 ms"));
        let fits = config.lock_options(Some(Duration::from_secs(10)), None, None, None, s).unwrap();
        assert_eq!(fits.lease, Duration::from_secs(10));
        // A lease the caller gave is checked as given, even when it equals the default.
        assert!(config.lock_options(Some(options::DEFAULT_LEASE), None, None, None, s).is_err());
    }
}
