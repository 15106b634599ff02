//! A Redlock URL: `redlock://[user:password@]host1[:port],host2[:port],...[/db][?protocol=...]`
//! and `rediss+redlock://...` (TLS), the independent masters of one Redlock with one login and
//! database for all of them. A master listed twice is refused ([`Masters`]), since Redlock's
//! safety needs independent masters.

use std::collections::HashSet;

use super::MAX_MASTERS;
use crate::backend::redis::address::Servers;
use crate::backend::redis::url::RedisUrl;
use crate::error::{Error, Result};

/// The masters of `scheme://[userinfo@]h1,h2,...[tail]` (`rest`: what follows `scheme://`),
/// each parsed as a `redis://` (or, with `tls`, `rediss://`) URL.
pub(crate) fn parse(scheme: &str, tls: bool, rest: &str) -> Result<Servers> {
    let base = if tls { "rediss" } else { "redis" };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
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
    Ok(Servers { servers, shown })
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
    let scheme = if first.tls { "rediss+redlock" } else { "redlock" };
    Ok(format!("{scheme}://{login}{}{db}", hosts.join(",")))
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
