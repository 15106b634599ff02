//! The members and login of an `etcd://` URL, checked before any connection and never shown
//! with a password: `etcd://[user:password@]host1[:port],host2[:port],...` and `etcds://...`
//! (TLS, verified). The login is etcd's user/password authentication; the port defaults to
//! 2379 (etcd's client port). etcd has no chroot: a path, query or fragment is refused.

use std::fmt;

use crate::address::{host_port, parse_host_port, percent_decode};
use crate::error::{Error, Result};

/// etcd's client port unless the URL says otherwise.
pub const DEFAULT_PORT: u16 = 2379;

/// Most members a URL may list.
pub const MAX_HOSTS: usize = 64;

/// Where an etcd client connects. Its `Debug` hides the password.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdAddress {
    /// Every member given, in URL order (host names lower-cased, IPv6 without brackets).
    pub hosts: Vec<(String, u16)>,
    /// The login, if any: user and password.
    pub login: Option<(String, String)>,
    /// Whether the connections use TLS (`etcds://`).
    pub tls: bool,
}

impl EtcdAddress {
    /// Parses what follows `scheme://` of an etcd URL.
    pub fn parse(rest: &str, tls: bool) -> Result<EtcdAddress> {
        let scheme = if tls { "etcds" } else { "etcd" };
        let (authority, tail) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if !tail.is_empty() && tail != "/" {
            return Err(Error::invalid(format!(
                "a {scheme}:// URL takes no path, query or fragment (etcd has no chroot; lock names \
                 are keys, and options are given as options)"
            )));
        }
        let (login, hosts) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let login = match login {
            None => None,
            Some(l) => match l.split_once(':') {
                Some((user, password)) if !user.is_empty() && !password.is_empty() => {
                    Some((decode(user, "user", scheme)?, decode(password, "password", scheme)?))
                }
                _ => {
                    return Err(Error::invalid(format!(
                        "a {scheme}:// login is user:password, both given (etcd's user authentication)"
                    )))
                }
            },
        };
        if hosts.is_empty() {
            return Err(Error::invalid(format!("a {scheme}:// URL lists its members: {scheme}://host1:2379,host2:2379")));
        }
        let mut parsed = Vec::new();
        for host in hosts.split(',') {
            let entry = parse_host(host).map_err(|why| Error::invalid(format!("a {scheme}:// URL has {why}")))?;
            if parsed.contains(&entry) {
                return Err(Error::invalid(format!("a {scheme}:// URL lists {} twice", host_port(&entry.0, entry.1))));
            }
            parsed.push(entry);
        }
        if parsed.len() > MAX_HOSTS {
            return Err(Error::invalid(format!("a {scheme}:// URL lists more than {MAX_HOSTS} members")));
        }
        Ok(EtcdAddress { hosts: parsed, login, tls })
    }

    /// The members as clients take them: `http://h1:2379` or `https://h1:2379` each.
    pub fn endpoints(&self) -> Vec<String> {
        let scheme = if self.tls { "https" } else { "http" };
        self.hosts.iter().map(|(h, p)| format!("{scheme}://{}", host_port(h, *p))).collect()
    }

    /// The URL with the password replaced by `***`.
    pub fn shown(&self) -> String {
        let scheme = if self.tls { "etcds" } else { "etcd" };
        let login = self.login.as_ref().map(|(u, _)| format!("{u}:***@")).unwrap_or_default();
        let hosts: Vec<String> = self.hosts.iter().map(|(h, p)| host_port(h, *p)).collect();
        format!("{scheme}://{login}{}", hosts.join(","))
    }

    /// Replaces the password in `message` (server and I/O errors may echo input).
    pub fn scrub(&self, message: &str) -> String {
        match &self.login {
            Some((_, password)) if !password.is_empty() => message.replace(password.as_str(), "***"),
            _ => message.to_string(),
        }
    }
}

impl fmt::Debug for EtcdAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

/// One `host[:port]` entry (IPv6 in brackets), etcd's port unless given.
fn parse_host(entry: &str) -> std::result::Result<(String, u16), String> {
    parse_host_port(entry, DEFAULT_PORT)
}

/// Percent-decodes one part of the login; errors never show it.
fn decode(part: &str, what: &str, scheme: &str) -> Result<String> {
    percent_decode(part, &format!("{what} of a {scheme}:// login"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_members_and_login() {
        let a = EtcdAddress::parse("app:s%40cret@h1:2389,H2,[::1]:2390", false).unwrap();
        assert_eq!(a.hosts, [("h1".into(), 2389), ("h2".into(), 2379), ("::1".into(), 2390)]);
        assert_eq!(a.login, Some(("app".into(), "s@cret".into())));
        assert_eq!(a.endpoints(), ["http://h1:2389", "http://h2:2379", "http://[::1]:2390"]);
        assert_eq!(format!("{a:?}"), "etcd://app:***@h1:2389,h2:2379,[::1]:2390");
        assert_eq!(a.scrub("bad s@cret"), "bad ***");
        let t = EtcdAddress::parse("h/", true).unwrap();
        assert_eq!((t.endpoints(), t.shown()), (vec!["https://h:2379".to_string()], "etcds://h:2379".to_string()));
    }

    #[test]
    fn refuses_bad_urls_without_echoing_passwords() {
        for bad in ["", "@h", "user@h", ":pw@h", "u:@h", "h,,i", "h:0", "h:99999", "h:x", "h,h:2379", "h/a", "h?x=1", "h#f", "[::1", "h h", "::1"] {
            let e = EtcdAddress::parse(bad, false).expect_err(bad);
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{bad}");
        }
        for bad in ["u:topsecret@h:x", "u:topsecret@", "u:top%zzsecret@h", "u:topsecret@h/x"] {
            let e = EtcdAddress::parse(bad, true).unwrap_err();
            assert!(!e.message().contains("topsecret") && !e.message().contains("secret"), "{e}");
        }
    }
}
