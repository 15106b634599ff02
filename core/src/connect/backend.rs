//! Which backend a URL selects, by its scheme. Issues 15-17 add `zookeeper://`, `etcd://` and
//! `postgres://` here: a variant, its schemes and its capabilities; the bindings need nothing.

use std::fmt;

use crate::capabilities::Capabilities;

/// A kind of lock service a client talks to, chosen by the URL's scheme.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// One Redis server, or a primary with replicas (`redis://`, `rediss://`).
    Redis,
    /// A Redis Cluster reached through one seed node (`redis+cluster://`, `rediss+cluster://`).
    RedisCluster,
    /// Redlock over N independent Redis masters (`redlock://`, `rediss+redlock://`).
    Redlock,
    /// A ZooKeeper ensemble (`zookeeper://`, `zookeeper+tls://`): one session per client.
    ZooKeeper,
    /// An etcd cluster (`etcd://`, `etcds://`): one lease per client (the session).
    Etcd,
}

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 5] = [Backend::Redis, Backend::RedisCluster, Backend::Redlock, Backend::ZooKeeper, Backend::Etcd];

    /// Every accepted scheme with its backend and whether it uses TLS.
    const SCHEMES: [(&'static str, Backend, bool); 10] = [
        ("redis", Backend::Redis, false),
        ("rediss", Backend::Redis, true),
        ("redis+cluster", Backend::RedisCluster, false),
        ("rediss+cluster", Backend::RedisCluster, true),
        ("redlock", Backend::Redlock, false),
        ("rediss+redlock", Backend::Redlock, true),
        ("zookeeper", Backend::ZooKeeper, false),
        ("zookeeper+tls", Backend::ZooKeeper, true),
        ("etcd", Backend::Etcd, false),
        ("etcds", Backend::Etcd, true),
    ];

    /// The backend a URL scheme selects and whether it uses TLS (`None`: not a lockgate scheme).
    /// Schemes are matched ignoring ASCII case, like the URL standard.
    pub fn from_scheme(scheme: &str) -> Option<(Backend, bool)> {
        Self::SCHEMES
            .iter()
            .find(|(s, _, _)| s.eq_ignore_ascii_case(scheme))
            .map(|(_, b, tls)| (*b, *tls))
    }

    /// The scheme of this backend, plain or TLS (`rediss+redlock` for a TLS Redlock).
    pub fn scheme(self, tls: bool) -> &'static str {
        Self::SCHEMES
            .iter()
            .find(|(_, b, t)| *b == self && *t == tls)
            .map(|(s, _, _)| *s)
            .expect("every backend has a plain and a TLS scheme")
    }

    /// Every accepted scheme, for messages: `redis://, rediss://, ...`.
    pub fn all_schemes() -> String {
        Self::SCHEMES.iter().map(|(s, _, _)| format!("{s}://")).collect::<Vec<_>>().join(", ")
    }

    /// The backend's name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Redis => "Redis",
            Backend::RedisCluster => "Redis Cluster",
            Backend::Redlock => "Redlock",
            Backend::ZooKeeper => "ZooKeeper",
            Backend::Etcd => "etcd",
        }
    }

    /// What a client of this backend can do; `replica_acks` says whether this client waits for
    /// replica acknowledgements (only a single Redis primary can).
    pub fn capabilities(self, tls: bool, replica_acks: bool) -> Capabilities {
        // Redlock has no server-side queue or counter; every other backend has both.
        let queued = !matches!(self, Backend::Redlock);
        // The Redis scripts keep what the ZooKeeper and etcd recipes (Curator's, etcd's
        // concurrency package's) cannot: readers passing
        // queued writers, parameters agreed by the server, queue entries with their own lease.
        let scripted = matches!(self, Backend::Redis | Backend::RedisCluster);
        Capabilities {
            backend: self.name(),
            scheme: self.scheme(tls),
            fencing: queued,
            fifo: queued,
            semaphore: queued,
            read_write: queued,
            election: queued,
            observe: queued,
            // A reentrant hold is the engine's count of holds on a lease the backend already
            // granted: nothing on the wire changes, so every backend offers it (PROTOCOL.md §8
            // says why that is sound for a Redlock too).
            reentrant: true,
            replica_acks: replica_acks && self == Backend::Redis,
            readers_first: scripted,
            agreed_parameters: scripted,
            entry_ttl: scripted,
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_round_trip() {
        for b in Backend::ALL {
            for tls in [false, true] {
                assert_eq!(Backend::from_scheme(b.scheme(tls)), Some((b, tls)));
            }
        }
        assert_eq!(Backend::from_scheme("REDIS+Cluster"), Some((Backend::RedisCluster, false)));
        for other in ["http", "redis+sentinel", "unix", "", "zk"] {
            assert_eq!(Backend::from_scheme(other), None, "{other}");
        }
        assert_eq!(
            Backend::all_schemes(),
            "redis://, rediss://, redis+cluster://, rediss+cluster://, redlock://, rediss+redlock://, \
             zookeeper://, zookeeper+tls://, etcd://, etcds://"
        );
    }

    #[test]
    fn capabilities_per_backend() {
        let r = Backend::Redis.capabilities(false, true);
        assert!(r.fencing && r.semaphore && r.reentrant && r.replica_acks);
        assert_eq!((r.backend, r.scheme), ("Redis", "redis"));
        let c = Backend::RedisCluster.capabilities(true, true);
        assert!(c.fencing && c.election && !c.replica_acks);
        assert_eq!(c.scheme, "rediss+cluster");
        assert!(c.readers_first && c.agreed_parameters && c.entry_ttl);
        let l = Backend::Redlock.capabilities(false, false);
        let offered: Vec<_> = l.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
        assert_eq!(offered, ["reentrant"], "{l:?}");
        // Curator's recipes: every primitive, fenced and first-come-first-served; no
        // readers-first locks, no server-checked parameters, no waiter entry leases.
        let z = Backend::ZooKeeper.capabilities(true, false);
        let offered: Vec<_> = z.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
        assert_eq!(offered, ["fencing", "fifo", "semaphore", "read_write", "election", "observe", "reentrant"], "{z:?}");
        assert_eq!((z.backend, z.scheme), ("ZooKeeper", "zookeeper+tls"));
        // etcd: the same recipes' guarantees (FIFO by create revision, the create revision as
        // the fencing token), nothing the Redis scripts add.
        let e = Backend::Etcd.capabilities(true, false);
        let offered: Vec<_> = e.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
        assert_eq!(offered, ["fencing", "fifo", "semaphore", "read_write", "election", "observe", "reentrant"], "{e:?}");
        assert_eq!((e.backend, e.scheme), ("etcd", "etcds"));
        assert_eq!(Backend::from_scheme("ETCD"), Some((Backend::Etcd, false)));
    }
}
