//! The URL of any backend: which backend its scheme selects and the servers it names, checked
//! before any connection and never shown with a password.
//!
//! - `redis://` / `rediss://`: one server, or a primary with replicas (the [`RedisUrl`] grammar).
//! - `redis+cluster://` / `rediss+cluster://`: one seed node of a Redis Cluster, same grammar.
//! - `redlock://[user:password@]host1[:port],host2[:port],...[/db][?protocol=...]` and
//!   `rediss+redlock://...` (TLS): the independent masters of a Redlock, one login and database
//!   for all of them; a master listed twice is refused (see [`Masters`]).
//! - `zookeeper://[user:password@]host1[:port],...[/chroot]` and `zookeeper+tls://...`: the
//!   members of a ZooKeeper ensemble ([`ZkAddress`]).
//! - `etcd://[user:password@]host1[:port],...` and `etcds://...`: the members of an etcd
//!   cluster ([`EtcdAddress`]).
//! - `postgres://`, `postgresql://`, `mysql://`, `mariadb://`: a SQL database ([`SqlAddress`]).

use std::fmt;

use super::backend::Backend;
use super::options::Masters;
use super::url::RedisUrl;
use crate::error::{Error, Result};
use crate::redlock::MAX_MASTERS;
use crate::etcd::EtcdAddress;
use crate::sql::SqlAddress;
use crate::zookeeper::ZkAddress;

/// A validated URL of any scheme; its `Display` and `Debug` redact the password.
#[derive(Clone)]
pub struct Target {
    backend: Backend,
    tls: bool,
    /// The one server (Redis), the seed node (Redis Cluster) or every master (Redlock), each as
    /// a plain `redis://` / `rediss://` URL; empty for other backends.
    servers: Vec<RedisUrl>,
    /// A ZooKeeper ensemble's members, chroot and login.
    zookeeper: Option<ZkAddress>,
    /// An etcd cluster's members and login.
    etcd: Option<EtcdAddress>,
    /// A SQL database's hosts, login, TLS mode and table.
    sql: Option<SqlAddress>,
    /// The URL as given with the password replaced by `***`.
    shown: String,
}

impl Target {
    /// Parses and validates `url`; errors never echo a password.
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
        let base = if tls { "rediss" } else { "redis" };
        let target = match backend {
            Backend::Redis | Backend::RedisCluster => {
                if backend == Backend::RedisCluster && authority(rest).0.contains(',') {
                    return Err(Error::invalid(format!(
                        "a {}:// URL names one seed node (the client discovers the others), not a list",
                        backend.scheme(tls)
                    )));
                }
                let server = RedisUrl::parse(&format!("{base}://{rest}"))?;
                let shown = server.to_string();
                let shown = format!("{}{}", backend.scheme(tls), &shown[base.len()..]);
                Target { backend, tls, servers: vec![server], zookeeper: None, etcd: None, sql: None, shown }
            }
            Backend::Redlock => Self::parse_redlock(backend.scheme(tls), base, rest)?,
            Backend::ZooKeeper => {
                let address = ZkAddress::parse(rest, tls)?;
                Target { backend, tls, servers: Vec::new(), shown: address.shown(), zookeeper: Some(address), etcd: None, sql: None }
            }
            Backend::Postgres | Backend::MySql => {
                let address = SqlAddress::parse(url)?;
                let shown = address.shown();
                Target { backend, tls, servers: Vec::new(), zookeeper: None, etcd: None, sql: Some(address), shown }
            }
            Backend::Etcd => {
                let address = EtcdAddress::parse(rest, tls)?;
                Target { backend, tls, servers: Vec::new(), shown: address.shown(), zookeeper: None, etcd: Some(address), sql: None }
            }
        };
        Ok(Target { backend, tls, ..target })
    }

    /// The masters of `scheme://[userinfo@]h1,h2,...[tail]`, each parsed as `base://...`.
    fn parse_redlock(scheme: &str, base: &str, rest: &str) -> Result<Target> {
        let (authority, tail) = authority(rest);
        let (userinfo, hosts) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        if hosts.is_empty() {
            return Err(Error::invalid(format!(
                "a {scheme}:// URL lists its masters: {scheme}://host1:port,host2:port,host3:port"
            )));
        }
        let login = userinfo.map(|u| format!("{u}@")).unwrap_or_default();
        let mut masters = Masters::default();
        let mut servers = Vec::new();
        for host in hosts.split(',') {
            if host.is_empty() {
                return Err(Error::invalid(format!("a {scheme}:// URL has an empty entry in its list of masters")));
            }
            let server = RedisUrl::parse(&format!("{base}://{login}{host}{tail}"))?;
            masters.add(&server.identity())?;
            servers.push(server);
        }
        if servers.len() > MAX_MASTERS {
            return Err(Error::invalid(format!(
                "a Redlock needs between 1 and {MAX_MASTERS} masters, got {}",
                servers.len()
            )));
        }
        let shown_login = match userinfo {
            None => String::new(),
            Some(u) => match u.split_once(':') {
                Some((user, _)) => format!("{user}:***@"),
                None => format!("{u}@"),
            },
        };
        let shown = format!("{scheme}://{shown_login}{hosts}{tail}");
        Ok(Target { backend: Backend::Redlock, tls: base == "rediss", servers, zookeeper: None, etcd: None, sql: None, shown })
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
        self.backend.scheme(self.tls)
    }

    /// Every server as a `redis://` / `rediss://` URL: the one server, the cluster's seed node,
    /// or the Redlock masters in the order given.
    pub fn servers(&self) -> &[RedisUrl] {
        &self.servers
    }

    /// A ZooKeeper URL's ensemble (`None` for other backends).
    pub fn zookeeper(&self) -> Option<&ZkAddress> {
        self.zookeeper.as_ref()
    }

    /// An etcd URL's cluster (`None` for other backends).
    pub fn etcd(&self) -> Option<&EtcdAddress> {
        self.etcd.as_ref()
    }

    /// A SQL URL's database (`None` for other backends).
    pub fn sql(&self) -> Option<&SqlAddress> {
        self.sql.as_ref()
    }

    /// Replaces every password of the URL in `message` (server and I/O errors may echo input).
    pub fn scrub(&self, message: &str) -> String {
        let scrubbed = self.servers.iter().fold(message.to_string(), |m, s| s.scrub(&m));
        let scrubbed = match &self.sql {
            Some(a) => a.scrub(&scrubbed),
            None => scrubbed,
        };
        let scrubbed = match &self.etcd {
            Some(e) => e.scrub(&scrubbed),
            None => scrubbed,
        };
        match self.zookeeper.as_ref().and_then(|z| z.digest.as_ref()) {
            Some((_, password)) if !password.is_empty() => scrubbed.replace(password.as_str(), "***"),
            _ => scrubbed,
        }
    }
}

/// `rest` (what follows `scheme://`) split into its authority and the path/query/fragment tail.
fn authority(rest: &str) -> (&str, &str) {
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    rest.split_at(end)
}

/// A Redlock URL for masters given one URL each (`redis://` or `rediss://`): the form the
/// older list-of-URLs APIs are turned into. Every master must share the scheme, login and
/// database, since a `redlock://` URL carries one of each; else `INVALID_ARGUMENT`.
pub fn redlock_url<S: AsRef<str>>(masters: &[S]) -> Result<String> {
    let first = masters
        .first()
        .ok_or_else(|| Error::invalid(format!("a Redlock needs between 1 and {MAX_MASTERS} masters")))?;
    let first = RedisUrl::parse(first.as_ref())?.endpoint();
    let mut hosts = Vec::new();
    for m in masters {
        let e = RedisUrl::parse(m.as_ref())?.endpoint();
        if (e.tls, &e.username, &e.password, e.db) != (first.tls, &first.username, &first.password, first.db) {
            return Err(Error::invalid(
                "the masters of one Redlock URL share their scheme, user, password and database",
            ));
        }
        hosts.push(if e.host.contains(':') { format!("[{}]:{}", e.host, e.port) } else { format!("{}:{}", e.host, e.port) });
    }
    let enc = |s: &str| ::url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>().replace('+', "%20");
    let login = match (&first.username, &first.password) {
        (_, None) => String::new(),
        (u, Some(p)) => format!("{}:{}@", enc(u.as_deref().unwrap_or("")), enc(p)),
    };
    let db = if first.db == 0 { String::new() } else { format!("/{}", first.db) };
    let scheme = Backend::Redlock.scheme(first.tls);
    Ok(format!("{scheme}://{login}{}{db}", hosts.join(",")))
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

#[cfg(test)]
mod tests {
    use super::*;

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
