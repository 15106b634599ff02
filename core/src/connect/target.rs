//! The URL of any backend, checked before any connection and never shown with a password: which
//! backend its scheme selects, and the servers it names as that backend parsed them (an
//! [`Address`]). The grammar of each scheme is its backend's (`backend/<name>/spec.rs`);
//! [`Target::parse`] (in `connect::registry`) finds it by the scheme.
//!
//! - `redis://` / `rediss://`: one server, or a primary with replicas (the `RedisUrl` grammar).
//! - `redis+cluster://` / `rediss+cluster://`: one seed node of a Redis Cluster, same grammar.
//! - `redlock://[user:password@]host1[:port],host2[:port],...[/db][?protocol=...]` and
//!   `rediss+redlock://...` (TLS): the independent masters of a Redlock, one login and database
//!   for all of them; a master listed twice is refused.
//! - `zookeeper://[user:password@]host1[:port],...[/chroot]` and `zookeeper+tls://...`: the
//!   members of a ZooKeeper ensemble.
//! - `etcd://[user:password@]host1[:port],...` and `etcds://...`: the members of an etcd
//!   cluster.
//! - `postgres://`, `postgresql://`, `mysql://`, `mariadb://`: a SQL database.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use super::backend::Backend;

/// The servers a URL names, parsed by its backend: what the neutral
/// [`Target`] keeps of it. A backend reads its own type back with
/// [`Target::address`].
pub trait Address: Any + Send + Sync {
    /// The URL as given with every password replaced by `***`.
    fn shown(&self) -> String;
    /// `message` with every password of the URL replaced (server and I/O errors may echo input).
    fn scrub(&self, message: &str) -> String;
    /// Each server's own URL, passwords redacted, where the backend has one per server (Redis,
    /// Redlock); empty otherwise.
    fn server_urls(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A validated URL of any scheme; its `Display` and `Debug` redact the password.
#[derive(Clone)]
pub struct Target {
    backend: Backend,
    tls: bool,
    scheme: &'static str,
    /// The servers, as the backend parsed them.
    address: Arc<dyn Address>,
    /// The URL as given with the password replaced by `***`.
    shown: String,
}

impl Target {
    /// A target of `backend` at `address` (the registry's part, after the backend parsed it).
    pub(crate) fn new(backend: Backend, scheme: &'static str, tls: bool, address: Box<dyn Address>) -> Target {
        let shown = address.shown();
        Target { backend, tls, scheme, address: Arc::from(address), shown }
    }

    /// The backend the scheme selects.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Whether the connections use TLS.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The scheme, normalised to lower case (`rediss+redlock`).
    pub fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// The address as the backend's own type `A` (`None` if the URL is another backend's).
    pub fn address<A: Address>(&self) -> Option<&A> {
        let any: &dyn Any = self.address.as_ref();
        any.downcast_ref()
    }

    /// Each server's URL with passwords redacted (the one server, the cluster's seed node, or
    /// every Redlock master); empty for backends without one URL per server.
    pub fn server_urls(&self) -> Vec<String> {
        self.address.server_urls()
    }

    /// Replaces every password of the URL in `message` (server and I/O errors may echo input).
    pub fn scrub(&self, message: &str) -> String {
        self.address.scrub(message)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Target({})", self.shown)
    }
}
