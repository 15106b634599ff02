//! The registry: every backend's [`Spec`], listed once in `backend/mod.rs`, and everything that
//! needs to find one — a scheme's backend, a URL's parse, a backend's name, capabilities and
//! rules, and how a client of it starts. Nothing here names a backend: a new one adds its spec
//! to the list and is found.

use std::fmt;

use super::backend::{Backend, Kind};
use super::options::{check_common, lock_options_for, ClientOptions};
use super::options::LeaseBound;
use super::spec::Spec;
use super::spelling::Spelling;
use super::target::Target;
use crate::backend::REGISTRY;
use crate::capabilities::Capabilities;
use crate::data::Connected;
use crate::error::{Error, Result};
use crate::options::LockOptions;
use crate::random::RandomSource;
use crate::time::Duration;

/// Every kind of service of every registered backend, with its spec, in the list's order.
fn kinds() -> impl Iterator<Item = (&'static Spec, &'static Kind)> {
    REGISTRY.iter().flat_map(|spec| spec.kinds.iter().map(move |kind| (*spec, kind)))
}

/// The spec and kind of `backend` (every variant has one: a variant exists only with its
/// backend's feature, and so does its spec).
pub(crate) fn spec_of(backend: Backend) -> (&'static Spec, &'static Kind) {
    kinds().find(|(_, k)| k.backend == backend).expect("every backend is registered")
}

/// The widest range any registered backend takes a session timeout in (the setter's check;
/// the backend's own range is its spec's `validate`); any duration when none has a session.
pub(crate) fn session_timeout_range() -> (Duration, Duration) {
    let ranges = REGISTRY.iter().filter_map(|spec| spec.session_timeout);
    let widest = ranges.reduce(|(lo, hi), (l, h)| (lo.min(l), hi.max(h)));
    widest.unwrap_or((Duration::ZERO, crate::options::MAX_DURATION))
}

impl Backend {
    /// Every backend this build has, in the registry's order.
    pub fn all() -> Vec<Backend> {
        kinds().map(|(_, k)| k.backend).collect()
    }

    /// The backend a URL scheme selects and whether it uses TLS (`None`: not a lockgate scheme).
    /// Schemes are matched ignoring ASCII case, like the URL standard.
    pub fn from_scheme(scheme: &str) -> Option<(Backend, bool)> {
        kinds()
            .flat_map(|(_, k)| k.schemes.iter().map(move |(s, tls)| (*s, k.backend, *tls)))
            .find(|(s, _, _)| s.eq_ignore_ascii_case(scheme))
            .map(|(_, b, tls)| (b, tls))
    }

    /// The scheme of this backend, plain or TLS (`rediss+redlock` for a TLS Redlock); a SQL
    /// backend has one scheme for both (`postgres`, `mysql`).
    pub fn scheme(self, tls: bool) -> &'static str {
        spec_of(self).1.scheme(tls)
    }

    /// Whether keys carry the client's `key_prefix` (the Redis family); the others name locks
    /// by path, key prefix or table and refuse the option, so clients do not show it.
    pub fn has_key_prefix(self) -> bool {
        spec_of(self).0.key_prefix
    }

    /// Every accepted scheme, for messages: `redis://, rediss://, ...`.
    pub fn all_schemes() -> String {
        let schemes = kinds().flat_map(|(_, k)| k.schemes.iter().map(|(s, _)| format!("{s}://")));
        schemes.collect::<Vec<_>>().join(", ")
    }

    /// The backend's name for messages.
    pub fn name(self) -> &'static str {
        spec_of(self).1.name
    }

    /// What a client of this backend can do; `replica_acks` says whether this client waits for
    /// replica acknowledgements (only a single Redis primary can).
    pub fn capabilities(self, tls: bool, replica_acks: bool) -> Capabilities {
        let (spec, kind) = spec_of(self);
        Capabilities { backend: kind.name, scheme: kind.scheme(tls), ..(spec.capabilities)(kind, replica_acks) }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Target {
    /// Parses and validates `url` by the grammar of the backend its scheme selects; errors
    /// never echo a password.
    pub fn parse(url: &str) -> Result<Target> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::invalid(format!(
                "malformed URL: it has no scheme; use one of {}",
                Backend::all_schemes()
            )));
        };
        let plausible = !scheme.is_empty()
            && scheme.len() <= 32
            && scheme.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
        let Some((backend, tls)) = Backend::from_scheme(scheme) else {
            return Err(Error::invalid(if plausible {
                format!("unsupported URL scheme {scheme:?}: use one of {}", Backend::all_schemes())
            } else {
                format!("malformed URL: it has no valid scheme; use one of {}", Backend::all_schemes())
            }));
        };
        let (spec, kind) = spec_of(backend);
        let scheme = kind.scheme(tls);
        let address = (spec.parse)(kind, scheme, tls, url, rest)?;
        Ok(Target::new(backend, scheme, tls, address))
    }
}

impl ClientOptions {
    /// Checks the URL, prefix, timeouts, TLS and backend settings without connecting (for
    /// bindings whose constructors cannot await); messages name the Rust fields.
    pub fn validate(&self) -> Result<()> {
        self.validate_as(&Spelling::RUST)
    }

    /// [`validate`](Self::validate) with messages in a binding's `spelling`.
    pub fn validate_as(&self, spelling: &Spelling) -> Result<()> {
        let target = Target::parse(&self.url)?;
        let backend = self.backend_of(&target, spelling)?;
        self.validate_for(backend, spelling)?;
        if self.tls_ca_pem.is_some() && !target.is_tls() {
            return Err(Error::invalid(format!(
                "a TLS CA certificate ({}) was given for a plaintext {}:// URL; use {}://",
                spelling.tls_ca,
                target.scheme(),
                backend.scheme(true)
            )));
        }
        Ok(())
    }

    /// Every rule except the URL's, for a client of `backend`: the ones every backend shares,
    /// then the backend's own.
    pub fn validate_for(&self, backend: Backend, spelling: &Spelling) -> Result<()> {
        check_common(self, spelling)?;
        let (spec, kind) = spec_of(backend);
        (spec.validate)(self, kind, spelling)
    }

    /// The URL, parsed (it may contain a password: show it with `Display`, which redacts).
    pub fn target(&self) -> Result<Target> {
        Target::parse(&self.url)
    }

    /// The backend these options connect to: the URL's scheme, or a Redis Cluster for a
    /// `redis://` URL with `cluster` set.
    pub fn backend(&self) -> Result<Backend> {
        self.backend_of(&self.target()?, &Spelling::RUST)
    }

    /// The telemetry these options ask for: events named for the backend's plain URL scheme
    /// (never the URL), with lock names and a held-too-long threshold as set.
    pub fn telemetry_config(&self) -> Result<crate::engine::TelemetryConfig> {
        let backend = self.backend()?.scheme(false);
        Ok(crate::engine::TelemetryConfig { backend, lock_names: self.telemetry_lock_names, held_too_long: self.held_too_long })
    }

    pub(crate) fn backend_of(&self, target: &Target, spelling: &Spelling) -> Result<Backend> {
        let (spec, _) = spec_of(target.backend());
        match (spec.clustered, self.cluster) {
            (_, false) => Ok(target.backend()),
            (Some(cluster), true) => Ok(cluster),
            (None, true) => Err(Error::invalid(format!(
                "{} applies to redis:// URLs (or write redis+cluster://); a {}:// URL is a {}",
                spelling.cluster,
                target.scheme(),
                target.backend()
            ))),
        }
    }

    /// What a client made from these options can do (checks the URL, not the other settings).
    pub fn capabilities(&self) -> Result<Capabilities> {
        let target = self.target()?;
        let backend = self.backend_of(&target, &Spelling::RUST)?;
        Ok(backend.capabilities(target.is_tls(), self.replica_acks.is_some()))
    }

    /// A lock's options from the values a caller gave (`None`: not given), with this client's
    /// defaults and rules, the same in every binding:
    /// - `lease`: default 30 s; on a Redlock or memcached, 30 s or `max_lease` if shorter, and a lease that
    ///   does not fit `max_lease` (and its drift allowance) is refused here, when the handle is
    ///   made, not at its first acquire;
    /// - `auto_renew`: default on (a watchdog renews every third of the lease);
    /// - `wait_timeout`: default none (`acquire_default` waits until acquired);
    /// - `entry_ttl`: default 10 s; a Redlock has no wait queue, so giving it there is refused;
    ///   a ZooKeeper waiter's node lives as long as its session, and an etcd waiter's key as long
    ///   as its lease, so it is refused there too.
    ///
    /// Values are checked against the limits of [`LockOptions::validate`]; messages name the
    /// lease and entry TTL as `spelling` does.
    pub fn lock_options(
        &self,
        lease: Option<Duration>,
        auto_renew: Option<bool>,
        wait_timeout: Option<Duration>,
        entry_ttl: Option<Duration>,
        spelling: &Spelling,
    ) -> Result<LockOptions> {
        let target = self.target()?;
        let backend = self.backend_of(&target, spelling)?;
        let bound = spec_of(backend).0.lease_bound.map(|bound| bound(self, &target));
        lock_options_for_backend(backend, bound.as_deref(), lease, auto_renew, wait_timeout, entry_ttl, spelling)
    }
}

impl ClientOptions {
    /// `lock` (from [`lock_options`](Self::lock_options)) with a shortest and longest hold
    /// (`None`: not given), by this client's backend's rules ([`holds_for`](super::holds_for)).
    pub fn lock_holds(&self, lock: LockOptions, min_hold: Option<Duration>, max_hold: Option<Duration>, spelling: &Spelling) -> Result<LockOptions> {
        let target = self.target()?;
        let backend = self.backend_of(&target, spelling)?;
        let bound = spec_of(backend).0.lease_bound.map(|bound| bound(self, &target));
        let capabilities = self.capabilities()?;
        super::options::holds_for(&capabilities, bound.as_deref(), lock, min_hold, max_hold, spelling)
    }
}

/// [`ClientOptions::lock_options`] for a client of `backend` whose deployment bounds every
/// lease with `bound` (a Redlock's settings; `None` for every other backend): the one place of
/// the rule.
pub fn lock_options_for_backend(
    backend: Backend,
    bound: Option<&dyn LeaseBound>,
    lease: Option<Duration>,
    auto_renew: Option<bool>,
    wait_timeout: Option<Duration>,
    entry_ttl: Option<Duration>,
    spelling: &Spelling,
) -> Result<LockOptions> {
    if let (Some(why), Some(_)) = (spec_of(backend).0.no_entry_ttl, entry_ttl) {
        return Err(Error::invalid(why(spelling)));
    }
    lock_options_for(bound, lease, auto_renew, wait_timeout, entry_ttl, spelling)
}

/// The data engine of the backend `options`' URL selects, with its transport plan (`options`
/// already validated for that backend); `None` for the backends bindings drive through their
/// typed engines (Redis, Redis Cluster).
pub fn connect_data(options: &ClientOptions, rng: Box<dyn RandomSource>) -> Result<Option<Connected>> {
    match spec_of(options.backend()?).0.connect_data {
        Some(connect) => connect(options, rng).map(Some),
        None => Ok(None),
    }
}

impl fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let url = Target::parse(&self.url).map(|u| u.to_string()).unwrap_or_else(|_| "<invalid URL>".into());
        f.debug_struct("ClientOptions")
            .field("url", &url)
            .field("key_prefix", &self.key_prefix)
            .field("cluster", &self.cluster)
            .field("replica_acks", &self.replica_acks)
            .field("max_lease", &self.max_lease)
            .field("session_timeout", &self.session_timeout)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::redlock_url;
    use crate::backend::redis::url::RedisUrl;
    use crate::backend::redlock::MAX_MASTERS;

    #[test]
    fn every_kind_has_its_own_name() {
        let all = Backend::all();
        let names: std::collections::HashSet<_> = all.iter().map(|b| format!("{b:?}")).collect();
        assert_eq!(names.len(), all.len(), "two kinds share a name: {all:?}");
        assert!(all.contains(&Backend::Etcd) && all.contains(&Backend::RedisCluster));
        assert_ne!(Backend::Redis, Backend::RedisCluster);
    }

    #[test]
    fn schemes_round_trip() {
        for b in Backend::all() {
            for tls in [false, true] {
                // A SQL URL's TLS is its sslmode parameter: no TLS scheme.
                let tls = tls && b.scheme(true) != b.scheme(false);
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
             zookeeper://, zookeeper+tls://, etcd://, etcds://, postgres://, postgresql://, mysql://, mariadb://, memcached://"
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
        // Listing: SCAN on one primary, or on each master of a Cluster.
        assert!(r.list_locks && c.list_locks);
        // Adopting: an owner token's hold renews from any client (not so in a session: ZooKeeper, etcd).
        assert!(r.adopt && c.adopt);
        let l = Backend::Redlock.capabilities(false, false);
        let offered: Vec<_> = l.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
        assert_eq!(offered, ["reentrant", "list_locks", "adopt", "min_hold"], "{l:?}");
        // Curator's recipes: every primitive, fenced and first-come-first-served; no
        // readers-first locks, no server-checked parameters, no waiter entry leases.
        let z = Backend::ZooKeeper.capabilities(true, false);
        let offered: Vec<_> = z.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
        assert_eq!(offered, ["fencing", "fifo", "semaphore", "read_write", "election", "observe", "reentrant", "list_locks"], "{z:?}");
        assert_eq!((z.backend, z.scheme), ("ZooKeeper", "zookeeper+tls"));
        // etcd: the same recipes' guarantees (FIFO by create revision, the create revision as
        // the fencing token), nothing the Redis scripts add.
        let e = Backend::Etcd.capabilities(true, false);
        let offered: Vec<_> = e.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
        assert_eq!(offered, ["fencing", "fifo", "semaphore", "read_write", "election", "observe", "reentrant", "list_locks"], "{e:?}");
        assert_eq!((e.backend, e.scheme), ("etcd", "etcds"));
        assert_eq!(Backend::from_scheme("ETCD"), Some((Backend::Etcd, false)));
        // SQL: the same recipes over rows, and waiter rows with a lease of their own.
        for b in [Backend::Postgres, Backend::MySql] {
            let c = b.capabilities(false, true);
            let offered: Vec<_> = c.pairs().into_iter().filter(|(_, on)| *on).map(|(n, _)| n).collect();
            assert_eq!(offered, ["fencing", "fifo", "semaphore", "read_write", "election", "observe", "reentrant", "entry_ttl", "list_locks", "adopt", "min_hold"], "{c:?}");
        }
    }

    fn refused(url: &str) -> String {
        let e = Target::parse(url).expect_err(url);
        assert_eq!(e.code(), "INVALID_ARGUMENT", "{url}");
        let m = e.message().to_string();
        for secret in ["hunter2", "p%40ss", "p@ss"] {
            assert!(!m.contains(secret), "{url}: {m}");
        }
        m
    }

    #[test]
    fn every_scheme_selects_its_backend() {
        for (url, backend, tls, servers, shown) in [
            ("redis://h", Backend::Redis, false, 1, "redis://h"),
            ("rediss://u:hunter2@h:6380/2", Backend::Redis, true, 1, "rediss://u:***@h:6380/2"),
            ("REDIS://h", Backend::Redis, false, 1, "redis://h"),
            ("redis+cluster://:hunter2@h:7000", Backend::RedisCluster, false, 1, "redis+cluster://:***@h:7000"),
            ("rediss+cluster://h", Backend::RedisCluster, true, 1, "rediss+cluster://h"),
            ("redlock://a:1,b:2,c:3", Backend::Redlock, false, 3, "redlock://a:1,b:2,c:3"),
            ("redlock://u:hunter2@a,b:6380,[::1]:7000/3", Backend::Redlock, false, 3, "redlock://u:***@a,b:6380,[::1]:7000/3"),
            ("rediss+redlock://:p%40ss@a,b,c?protocol=resp3", Backend::Redlock, true, 3, "rediss+redlock://:***@a,b,c?protocol=resp3"),
            ("redlock://a", Backend::Redlock, false, 1, "redlock://a"),
            ("zookeeper://u:hunter2@a,b:2182/app", Backend::ZooKeeper, false, 0, "zookeeper://u:***@a:2181,b:2182/app"),
            ("zookeeper+tls://a", Backend::ZooKeeper, true, 0, "zookeeper+tls://a:2181"),
            ("etcd://u:hunter2@a,b:2380", Backend::Etcd, false, 0, "etcd://u:***@a:2379,b:2380"),
            ("ETCDS://a", Backend::Etcd, true, 0, "etcds://a:2379"),
        ] {
            let t = Target::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_eq!((t.backend(), t.is_tls(), t.servers().len()), (backend, tls, servers), "{url}");
            assert_eq!(t.to_string(), shown, "{url}");
            assert!(!format!("{t:?}").contains("hunter2") && !format!("{t:?}").contains("p%40ss"), "{t:?}");
            assert_eq!(t.scheme(), backend.scheme(tls));
            for s in t.servers() {
                assert_eq!(s.is_tls(), tls);
            }
        }
        // One login and database for every master, in the order given.
        let t = Target::parse("redlock://u:hunter2@a,b:6380,[::1]:7000/3").unwrap();
        let e: Vec<_> = t.servers().iter().map(RedisUrl::endpoint).collect();
        assert_eq!(
            e.iter().map(|e| (e.host.as_str(), e.port, e.db, e.password.as_deref())).collect::<Vec<_>>(),
            [("a", 6379, 3, Some("hunter2")), ("b", 6380, 3, Some("hunter2")), ("::1", 7000, 3, Some("hunter2"))]
        );
        assert_eq!(t.scrub("no hunter2 here"), "no *** here");
        let t = Target::parse("etcds://u:hunter2@a").unwrap();
        assert_eq!(t.etcd().map(|e| e.endpoints()), Some(vec!["https://a:2379".to_string()]));
        assert_eq!(t.scrub("no hunter2 here"), "no *** here");
    }

    #[test]
    fn bad_urls_are_refused_clearly() {
        for (url, says) in [
            ("", "has no scheme"),
            ("h:6379", "has no scheme"),
            ("u:hunter2@h", "has no scheme"),
            ("http://h", "unsupported URL scheme \"http\": use one of redis://, rediss://, redis+cluster://"),
            ("zk://h", "unsupported URL scheme \"zk\""),
            ("zookeeper://u:hunter2@", "lists its servers"),
            ("etcd://u:hunter2@", "lists its members"),
            ("etcd://u:hunter2@h/app", "takes no path"),
            ("u:hunter2@h://x", "no valid scheme"),
            ("redis://h/abc", "database number"),
            ("redis://app@h", "gives no password"),
            ("redis+cluster://a,b", "names one seed node"),
            ("redis+cluster://:hunter2@h/x", "database number"),
            ("redlock://", "lists its masters"),
            ("redlock://u:hunter2@", "lists its masters"),
            ("redlock://a,,b", "empty entry"),
            ("redlock://a,", "empty entry"),
            ("redlock://a,b,A:6379", "master a:6379 is listed twice"),
            ("redlock://u:hunter2@a,a", "master a:6379 is listed twice"),
            ("redlock://a,b:x", "malformed Redis URL"),
            ("redlock://u@a,b", "gives no password"),
            ("redlock://a,b/x", "database number"),
            ("redlock://a,b?foo=1", "parameter \"foo\""),
            ("rediss+redlock://:p%40ss@a,b#f", "no #fragment"),
        ] {
            let m = refused(url);
            assert!(m.contains(says), "{url}: {m}");
        }
        let many: Vec<String> = (0..=MAX_MASTERS).map(|i| format!("h{i}")).collect();
        assert!(refused(&format!("redlock://{}", many.join(","))).contains("between 1 and 31 masters"));
    }

    #[test]
    fn lists_of_urls_become_redlock_urls() {
        let u = redlock_url(&["redis://:p%40ss@h1:7001/2", "redis://:p%40ss@h2:7002/2", "redis://:p%40ss@[::1]/2"]).unwrap();
        assert_eq!(u, "redlock://:p%40ss@h1:7001,h2:7002,[::1]:6379/2");
        let t = Target::parse(&u).unwrap();
        assert_eq!(t.servers()[0].endpoint().password.as_deref(), Some("p@ss"));
        assert_eq!(redlock_url(&["rediss://a", "rediss://b"]).unwrap(), "rediss+redlock://a:6379,b:6379");
        assert_eq!(redlock_url(&["redis://us%20r:a%20b@a"]).unwrap(), "redlock://us%20r:a%20b@a:6379");
        assert_eq!(Target::parse("redlock://us%20r:a%20b@a:6379").unwrap().servers()[0].endpoint().password.as_deref(), Some("a b"));
        for bad in [vec!["redis://a", "rediss://b"], vec!["redis://:x@a", "redis://b"], vec!["redis://a/1", "redis://b/2"]] {
            let e = redlock_url(&bad).unwrap_err();
            assert!(e.message().contains("share their scheme"), "{bad:?}: {e}");
        }
        assert!(redlock_url::<&str>(&[]).is_err());
    }
}
