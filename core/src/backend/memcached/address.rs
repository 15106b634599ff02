//! The servers of a `memcached://` URL, checked before any connection:
//! `memcached://host1[:port],host2[:port],...` (port 11211 unless given). Each lock lives on one
//! of them ([`super::key::server_for`]). memcached's SASL login is a binary-protocol feature
//! and lockgate speaks the text protocol (so does the Node transport's client), and neither
//! client speaks TLS: a login in the URL is `UNSUPPORTED`, and there is no TLS scheme. A path,
//! query or fragment is refused.

use std::fmt;

use crate::address::{host_port, parse_host_port};
use crate::error::{Error, Result};

/// memcached's port unless the URL says otherwise.
pub const DEFAULT_PORT: u16 = 11211;

/// Most servers a URL may list.
pub const MAX_HOSTS: usize = 64;

/// Where a memcached client connects.
#[derive(Clone, PartialEq, Eq)]
pub struct MemcachedAddress {
    /// Every server given, in URL order (host names lower-cased, IPv6 without brackets).
    pub hosts: Vec<(String, u16)>,
}

impl MemcachedAddress {
    /// Parses what follows `memcached://`.
    pub fn parse(rest: &str) -> Result<MemcachedAddress> {
        let (authority, tail) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if !tail.is_empty() && tail != "/" {
            return Err(Error::invalid(
                "a memcached:// URL takes no path, query or fragment (lock names are keys, and options are given as options)",
            ));
        }
        if authority.contains('@') {
            // Never echo what was before the '@': it may be a password.
            return Err(Error::unsupported(
                "a memcached:// URL with a login is not supported: SASL is a binary-protocol feature of memcached, \
                 and lockgate's memcached clients speak the text protocol",
            ));
        }
        if authority.is_empty() {
            return Err(Error::invalid("a memcached:// URL lists its servers: memcached://host1:11211,host2:11211"));
        }
        let mut hosts = Vec::new();
        for entry in authority.split(',') {
            let hp = parse_host_port(entry, DEFAULT_PORT).map_err(|why| Error::invalid(format!("a memcached:// URL has {why}")))?;
            if hosts.contains(&hp) {
                return Err(Error::invalid(format!("a memcached:// URL lists {} twice", host_port(&hp.0, hp.1))));
            }
            hosts.push(hp);
        }
        if hosts.len() > MAX_HOSTS {
            return Err(Error::invalid(format!("a memcached:// URL lists more than {MAX_HOSTS} servers")));
        }
        Ok(MemcachedAddress { hosts })
    }

    /// Each server as `host:port` (IPv6 in brackets): what keys are spread by.
    pub fn servers(&self) -> Vec<String> {
        self.hosts.iter().map(|(h, p)| host_port(h, *p)).collect()
    }

    /// The URL, normalised (it holds no password).
    pub fn shown(&self) -> String {
        format!("memcached://{}", self.servers().join(","))
    }
}

impl fmt::Debug for MemcachedAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn parses_servers() {
        let a = MemcachedAddress::parse("H1:11212,h2,[::1]:5/").unwrap();
        assert_eq!(a.hosts, [("h1".into(), 11212), ("h2".into(), 11211), ("::1".into(), 5)]);
        assert_eq!(a.shown(), "memcached://h1:11212,h2:11211,[::1]:5");
    }

    #[test]
    fn refuses_bad_urls_and_logins_without_echoing_them() {
        for bad in ["", "h,,i", "h:0", "h:99999", "h:x", "h,h:11211", "h/a", "h?x=1", "h#f", "[::1", "h h"] {
            assert_eq!(MemcachedAddress::parse(bad).expect_err(bad).kind(), ErrorKind::InvalidArgument, "{bad}");
        }
        let e = MemcachedAddress::parse("u:topsecret@h").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(!e.message().contains("topsecret"), "{e}");
    }
}
