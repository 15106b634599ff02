//! Which kind of lock service a client talks to. Only the names live here: each backend's
//! schemes, name, capabilities and rules are its spec's (`backend/<name>/spec.rs`), found
//! through the registry (`connect::registry`), so a variant says nothing a spec does not. A
//! [`Kind`] is what a spec says of each variant it serves: its name and schemes.

/// A kind of lock service a client talks to, chosen by the URL's scheme. A backend whose cargo
/// feature is off has no variant: its schemes are not lockgate schemes in that build.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// One Redis server, or a primary with replicas (`redis://`, `rediss://`).
    #[cfg(feature = "redis")]
    Redis,
    /// A Redis Cluster reached through one seed node (`redis+cluster://`, `rediss+cluster://`).
    #[cfg(feature = "redis")]
    RedisCluster,
    /// Redlock over N independent Redis masters (`redlock://`, `rediss+redlock://`).
    #[cfg(feature = "redlock")]
    Redlock,
    /// A ZooKeeper ensemble (`zookeeper://`, `zookeeper+tls://`): one session per client.
    #[cfg(feature = "zookeeper")]
    ZooKeeper,
    /// An etcd cluster (`etcd://`, `etcds://`): one lease per client (the session).
    #[cfg(feature = "etcd")]
    Etcd,
    /// A PostgreSQL database (`postgres://`, `postgresql://`; TLS by the URL's `sslmode`): one
    /// row per holder or waiter, notifications as wake-ups.
    #[cfg(feature = "sql")]
    Postgres,
    /// A MySQL or MariaDB database (`mysql://`, `mariadb://`; TLS by the URL's `ssl-mode`): one
    /// row per holder or waiter, named locks as doorbells.
    #[cfg(feature = "sql")]
    MySql,
    /// memcached servers (`memcached://`): one item per lock, waiters poll.
    #[cfg(feature = "memcached")]
    Memcached,
}

/// One kind of service a backend folder serves (the Redis folder serves two: one server and a
/// Cluster; the SQL folder two: PostgreSQL and MySQL).
pub struct Kind {
    /// Its [`Backend`] name.
    pub backend: Backend,
    /// Its name for messages (`"Redis Cluster"`).
    pub name: &'static str,
    /// The indefinite article messages put before the name (`"a"`, `"an"` for etcd).
    pub article: &'static str,
    /// Its URL schemes, each with whether it means TLS; the first plain one is its scheme in
    /// messages (a SQL URL's TLS is its `sslmode` / `ssl-mode` parameter, not its scheme).
    pub schemes: &'static [(&'static str, bool)],
}

impl Kind {
    /// The name with its indefinite article, for messages: "a Redis", "an etcd".
    pub fn a(&self) -> String {
        format!("{} {}", self.article, self.name)
    }

    /// The scheme for messages, plain or TLS (the plain one when there is no TLS scheme).
    pub fn scheme(&self, tls: bool) -> &'static str {
        let find = |tls: bool| self.schemes.iter().find(|(_, t)| *t == tls).map(|(s, _)| *s);
        find(tls).or_else(|| find(false)).expect("every kind has a plain scheme")
    }
}
