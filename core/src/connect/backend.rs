//! Which kind of lock service a client talks to. Only the names live here: each backend's
//! schemes, name, capabilities and rules are its spec's (`backend/<name>/spec.rs`), found
//! through the registry (`connect::registry`), so a variant says nothing a spec does not. A
//! [`Kind`] is what a spec says of each variant it serves: its name and schemes.

use std::fmt;

/// A kind of lock service a client talks to, chosen by the URL's scheme. Each backend folder
/// names its own kinds (`Backend::Etcd` is a constant in `backend/etcd/spec.rs`), so adding a
/// backend edits nothing here; a backend whose cargo feature is off has no name in that build,
/// and its schemes are not lockgate schemes there.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backend(&'static str);

impl Backend {
    /// The name a backend folder gives one of its kinds (unique across backends: the registry's
    /// tests check it).
    pub const fn named(name: &'static str) -> Backend {
        Backend(name)
    }
}

impl fmt::Debug for Backend {
    /// The constant's name (`Etcd`, `RedisCluster`), as a unit variant would print.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
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
