//! How each binding's users name the client options and in which unit they give durations: the
//! keys [`ClientOptions::set`](super::ClientOptions::set) accepts, and the names the core's
//! messages use, so every rule speaks the caller's language (`commandTimeoutMs` in Node,
//! `responseTimeout` in Java, `response_timeout` in Python and Rust).

use crate::options::Unit;
use crate::time::Duration;

/// One client option, whatever a binding calls it (see [`Spelling::key`]).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClientOption {
    /// Prepended to every key and channel (a string).
    KeyPrefix,
    /// PEM root certificate(s) to trust for TLS (bytes or a string).
    TlsCa,
    /// Limit on establishing the connection (a duration).
    ConnectTimeout,
    /// Limit on one server round trip (a duration).
    ResponseTimeout,
    /// Treat a `redis://` URL as a Redis Cluster seed node (a boolean; `redis+cluster://` says
    /// the same in the URL).
    Cluster,
    /// Replica-acknowledged mode: how many replicas `WAIT` must reach (an integer; Redis only).
    ReplicaAcks,
    /// How long that `WAIT` may block (a duration; default 1 s; Redis only).
    ReplicaAckTimeout,
    /// A Redlock deployment's longest lease (a duration; Redlock only).
    MaxLease,
    /// Redlock's clock-drift allowance as a fraction of the lease (a number; Redlock only).
    DriftFactor,
    /// The fixed part of Redlock's drift allowance (a duration; Redlock only).
    DriftFixed,
    /// How long one Redlock attempt waits for the masters (a duration; Redlock only).
    NodeTimeout,
    /// Pause before another Redlock attempt (a duration; Redlock only).
    RetryDelay,
    /// Random part added to that pause (a duration; Redlock only).
    RetryJitter,
    /// The session timeout asked of a ZooKeeper ensemble, or the TTL of an etcd client's session
    /// lease (a duration; default 60 s; ZooKeeper and etcd only).
    SessionTimeout,
    /// The holder label stored with every entry the client creates (a string; default
    /// `<hostname>:<pid>`; see [`crate::label`]).
    Label,
    /// Whether telemetry events carry each lock's name (a boolean; default false: one series
    /// per lock name is unbounded cardinality for a metrics backend).
    TelemetryLockNames,
    /// A lease held this long is told once as a `lease.held_too_long` telemetry event (a
    /// duration; default: never).
    HeldTooLong,
}

impl ClientOption {
    /// Every option, in the order messages list them.
    pub const ALL: [ClientOption; 17] = [
        ClientOption::KeyPrefix,
        ClientOption::TlsCa,
        ClientOption::ConnectTimeout,
        ClientOption::ResponseTimeout,
        ClientOption::Cluster,
        ClientOption::ReplicaAcks,
        ClientOption::ReplicaAckTimeout,
        ClientOption::MaxLease,
        ClientOption::DriftFactor,
        ClientOption::DriftFixed,
        ClientOption::NodeTimeout,
        ClientOption::RetryDelay,
        ClientOption::RetryJitter,
        ClientOption::SessionTimeout,
        ClientOption::Label,
        ClientOption::TelemetryLockNames,
        ClientOption::HeldTooLong,
    ];
}

/// A binding's names for the options and its unit for durations.
///
/// The named fields are the names the core's validation messages use (kept as they were when
/// the bindings set fields themselves; Java's `replicaAcks replicas` / `replicaAcks timeout`
/// name the two halves of its `replicaAcks(int, Duration)` builder call); [`keys`](Self::keys)
/// is the table of keys [`ClientOptions::set`](super::ClientOptions::set) accepts.
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
    /// A lock's lease (an argument of the lock call, not a client option).
    pub lease: &'static str,
    /// A lock's waiter-entry lease (an argument of the lock call).
    pub entry_ttl: &'static str,
    /// A lock's shortest hold (an argument of the lock call).
    pub min_hold: &'static str,
    /// A lock's longest hold (an argument of the lock call).
    pub max_hold: &'static str,
    /// Whether a watchdog renews a lock's lease (an argument of the lock call).
    pub auto_renew: &'static str,
    /// How long a lock's acquire waits by default (an argument of the lock call).
    pub wait_timeout: &'static str,
    /// How long one acquire waits (an argument of the acquire call).
    pub timeout: &'static str,
    /// Whether a handle re-enters its own lease (an argument of the lock call).
    pub reentrant: &'static str,
    /// Whether a queued writer blocks later readers (an argument of the read-write lock call).
    pub writers_first: &'static str,
    /// Every client option's key in this binding, one entry per [`ClientOption`].
    pub keys: &'static [(ClientOption, &'static str)],
}

const SNAKE_KEYS: [(ClientOption, &str); 17] = [
    (ClientOption::KeyPrefix, "key_prefix"),
    (ClientOption::TlsCa, "tls_ca_pem"),
    (ClientOption::ConnectTimeout, "connect_timeout"),
    (ClientOption::ResponseTimeout, "response_timeout"),
    (ClientOption::Cluster, "cluster"),
    (ClientOption::ReplicaAcks, "replica_acks"),
    (ClientOption::ReplicaAckTimeout, "replica_ack_timeout"),
    (ClientOption::MaxLease, "max_lease"),
    (ClientOption::DriftFactor, "drift_factor"),
    (ClientOption::DriftFixed, "drift_fixed"),
    (ClientOption::NodeTimeout, "node_timeout"),
    (ClientOption::RetryDelay, "retry_delay"),
    (ClientOption::RetryJitter, "retry_jitter"),
    (ClientOption::SessionTimeout, "session_timeout"),
    (ClientOption::Label, "label"),
    (ClientOption::TelemetryLockNames, "telemetry_lock_names"),
    (ClientOption::HeldTooLong, "held_too_long"),
];

const PYTHON_KEYS: [(ClientOption, &str); 17] = {
    let mut k = SNAKE_KEYS;
    // Python takes a path and hands the file's bytes to the core under its own name.
    k[1] = (ClientOption::TlsCa, "tls_ca_file");
    k
};

const JAVA_KEYS: [(ClientOption, &str); 17] = [
    (ClientOption::KeyPrefix, "keyPrefix"),
    (ClientOption::TlsCa, "tlsCaPem"),
    (ClientOption::ConnectTimeout, "connectTimeout"),
    (ClientOption::ResponseTimeout, "responseTimeout"),
    (ClientOption::Cluster, "cluster"),
    (ClientOption::ReplicaAcks, "replicaAcks"),
    (ClientOption::ReplicaAckTimeout, "replicaAckTimeout"),
    (ClientOption::MaxLease, "maxLease"),
    (ClientOption::DriftFactor, "driftFactor"),
    (ClientOption::DriftFixed, "driftFixed"),
    (ClientOption::NodeTimeout, "nodeTimeout"),
    (ClientOption::RetryDelay, "retryDelay"),
    (ClientOption::RetryJitter, "retryJitter"),
    (ClientOption::SessionTimeout, "sessionTimeout"),
    (ClientOption::Label, "label"),
    (ClientOption::TelemetryLockNames, "telemetryLockNames"),
    (ClientOption::HeldTooLong, "heldTooLong"),
];

const JS_KEYS: [(ClientOption, &str); 17] = [
    (ClientOption::KeyPrefix, "keyPrefix"),
    (ClientOption::TlsCa, "tlsCaPem"),
    (ClientOption::ConnectTimeout, "connectTimeoutMs"),
    (ClientOption::ResponseTimeout, "commandTimeoutMs"),
    (ClientOption::Cluster, "cluster"),
    // Node nests these as `replicaAcks: { replicas, timeoutMs }`; the binding flattens them.
    (ClientOption::ReplicaAcks, "replicaAcks.replicas"),
    (ClientOption::ReplicaAckTimeout, "replicaAcks.timeoutMs"),
    (ClientOption::MaxLease, "maxLeaseMs"),
    (ClientOption::DriftFactor, "driftFactor"),
    (ClientOption::DriftFixed, "driftFixedMs"),
    (ClientOption::NodeTimeout, "nodeTimeoutMs"),
    (ClientOption::RetryDelay, "retryDelayMs"),
    (ClientOption::RetryJitter, "retryJitterMs"),
    (ClientOption::SessionTimeout, "sessionTimeoutMs"),
    (ClientOption::Label, "label"),
    (ClientOption::TelemetryLockNames, "telemetryLockNames"),
    (ClientOption::HeldTooLong, "heldTooLongMs"),
];

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
        lease: "lease",
        entry_ttl: "entry_ttl",
        min_hold: "min_hold",
        max_hold: "max_hold",
        auto_renew: "auto_renew",
        wait_timeout: "wait_timeout",
        timeout: "timeout",
        reentrant: "reentrant",
        writers_first: "writers_first",
        keys: &SNAKE_KEYS,
    };
    /// Python's keyword arguments (seconds).
    pub const PYTHON: Spelling = Spelling {
        replica_count: "replica_acks",
        replica_ack_timeout: "replica_ack_timeout",
        tls_ca: "tls_ca_file",
        keys: &PYTHON_KEYS,
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
        lease: "lease",
        entry_ttl: "entryTtl",
        min_hold: "minHold",
        max_hold: "maxHold",
        auto_renew: "autoRenew",
        wait_timeout: "waitTimeout",
        timeout: "timeout",
        reentrant: "reentrant",
        writers_first: "writersFirst",
        keys: &JAVA_KEYS,
    };
    /// The `lockgate` command's options (seconds), as its messages name them.
    pub const CLI: Spelling = Spelling { lease: "--lease", min_hold: "--min-hold", max_hold: "--max-hold", ..Spelling::RUST };
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
        lease: "leaseMs",
        entry_ttl: "entryTtlMs",
        min_hold: "minHoldMs",
        max_hold: "maxHoldMs",
        auto_renew: "autoRenew",
        wait_timeout: "waitTimeoutMs",
        timeout: "timeoutMs",
        reentrant: "reentrant",
        writers_first: "writersFirst",
        keys: &JS_KEYS,
    };

    /// This binding's key for `option`.
    pub fn key(&self, option: ClientOption) -> &'static str {
        self.keys.iter().find(|(o, _)| *o == option).map(|(_, k)| *k).unwrap_or("?")
    }

    /// The option this binding calls `key` (exact match), if any.
    pub fn option(&self, key: &str) -> Option<ClientOption> {
        self.keys.iter().find(|(_, k)| *k == key).map(|(o, _)| *o)
    }

    /// Every key, comma-separated, for messages.
    pub fn all_keys(&self) -> String {
        self.keys.iter().map(|(_, k)| *k).collect::<Vec<_>>().join(", ")
    }

    /// `d` in this spelling's unit, with its symbol (`1.5 s`, `1500 ms`).
    pub(crate) fn show(&self, d: Duration) -> String {
        format!("{} {}", self.unit.of(d), self.unit.symbol())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_names_every_option_once() {
        for s in [Spelling::RUST, Spelling::PYTHON, Spelling::JAVA, Spelling::JS] {
            assert_eq!(s.keys.len(), ClientOption::ALL.len());
            for o in ClientOption::ALL {
                assert_eq!(s.option(s.key(o)), Some(o), "{s:?} {o:?}");
            }
        }
        assert_eq!(Spelling::PYTHON.key(ClientOption::TlsCa), "tls_ca_file");
        assert_eq!(Spelling::JS.key(ClientOption::ResponseTimeout), "commandTimeoutMs");
        assert_eq!(Spelling::JAVA.option("maxLease"), Some(ClientOption::MaxLease));
        assert_eq!(Spelling::JAVA.option("max_lease"), None);
    }
}
