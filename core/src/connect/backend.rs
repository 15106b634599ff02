//! Which backend a URL selects, by its scheme. Issues 15-17 add `zookeeper://`, `etcd://` and
//! `postgres://` / `mysql://` here: a variant, its schemes and its capabilities; the bindings need nothing.

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
    /// A PostgreSQL database (`postgres://`, `postgresql://`; TLS by the URL's `sslmode`): one
    /// row per holder or waiter, notifications as wake-ups.
    Postgres,
    /// A MySQL or MariaDB database (`mysql://`, `mariadb://`; TLS by the URL's `ssl-mode`): one
    /// row per holder or waiter, named locks as doorbells.
    MySql,
}

impl Backend {
    /// Every backend.
    pub const ALL: [Backend; 7] = [
        Backend::Redis,
        Backend::RedisCluster,
        Backend::Redlock,
        Backend::ZooKeeper,
        Backend::Etcd,
        Backend::Postgres,
        Backend::MySql,
    ];

    /// Every accepted scheme with its backend and whether it uses TLS (a SQL URL's TLS is its
    /// `sslmode` / `ssl-mode` parameter, not its scheme).
    const SCHEMES: [(&'static str, Backend, bool); 14] = [
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
        ("postgres", Backend::Postgres, false),
        ("postgresql", Backend::Postgres, false),
        ("mysql", Backend::MySql, false),
        ("mariadb", Backend::MySql, false),
    ];

    /// The backend a URL scheme selects and whether it uses TLS (`None`: not a lockgate scheme).
    /// Schemes are matched ignoring ASCII case, like the URL standard.
    pub fn from_scheme(scheme: &str) -> Option<(Backend, bool)> {
        Self::SCHEMES
            .iter()
            .find(|(s, _, _)| s.eq_ignore_ascii_case(scheme))
            .map(|(_, b, tls)| (*b, *tls))
    }

    /// The scheme of this backend, plain or TLS (`rediss+redlock` for a TLS Redlock); a SQL
    /// backend has one scheme for both (`postgres`, `mysql`).
    pub fn scheme(self, tls: bool) -> &'static str {
        let find = |tls: bool| Self::SCHEMES.iter().find(|(_, b, t)| *b == self && *t == tls).map(|(s, _, _)| *s);
        find(tls).or_else(|| find(false)).expect("every backend has a plain scheme")
    }

    /// Whether this backend is a SQL database.
    pub fn is_sql(self) -> bool {
        matches!(self, Backend::Postgres | Backend::MySql)
    }

    /// Whether keys carry the client's `key_prefix` (the Redis family); the others name locks
    /// by path, key prefix or table and refuse the option, so clients do not show it.
    pub fn has_key_prefix(self) -> bool {
        matches!(self, Backend::Redis | Backend::RedisCluster | Backend::Redlock)
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
            Backend::Postgres => "PostgreSQL",
            Backend::MySql => "MySQL",
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
        // A SQL waiter's row has a lease of its own (`entry_ttl`), refreshed by its re-checks.
        let entry_ttl = scripted || self.is_sql();
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
            entry_ttl,
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
                let tls = tls && !b.is_sql();
                assert_eq!(Backend::from_scheme(b.scheme(tls)), Some((b, tls)));
            }
        }
        assert_eq!(Backend::from_scheme("PostgreSQL"), Some((Backend::Postgres, false)));
        assert_eq!(Backend::from_scheme("mariadb"), Some((Backend::MySql, false)));
        assert_eq!(Backend::Postgres.scheme(true), "postgres");
        assert_eq!(Backend::from_scheme("REDIS+Cluster"), Some((Backend::RedisCluster, false)));
        for other in ["http", "redis+sentinel", "unix", "", "zk"] {
            assert_eq!(Backend::from_scheme(other), None, "{other}");
        }
        assert_eq!(
            Backend::all_schemes(),
            "redis://, rediss://, redis+cluster://, rediss+cluster://, redlock://, rediss+redlock://, \
             zookeeper://, zookeeper+tls://, etcd://, etcds://, postgres://, postgresql://, mysql://, mariadb://"
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
        // SQL: the same recipes over rows, and waiter rows with a lease of their own.
        for b in [Backend::Postgres, Backend::MySql] {
            let c = b.capabilities(false, true);
            let offered: Vec<_> = c.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
            assert_eq!(offered, ["fencing", "fifo", "semaphore", "read_write", "election", "observe", "reentrant", "entry_ttl"], "{c:?}");
        }
    }
}
