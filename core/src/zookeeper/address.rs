//! The servers, chroot and login of a `zookeeper://` URL, checked before any connection and
//! never shown with a password:
//! `zookeeper://[user:password@]host1[:port],host2[:port],...[/chroot]` (and `zookeeper+tls://`).
//! The login is ZooKeeper's `digest` scheme; the port defaults to 2181.

use std::fmt;

use crate::error::{Error, Result};

/// ZooKeeper's client port unless the URL says otherwise.
pub const DEFAULT_PORT: u16 = 2181;

/// Most members a URL may list.
pub const MAX_HOSTS: usize = 64;

/// Where a ZooKeeper client connects.
#[derive(Clone, PartialEq, Eq)]
pub struct ZkAddress {
    /// Every member given, in URL order.
    pub hosts: Vec<(String, u16)>,
    /// The chroot every path lives under (`None`: the root).
    pub chroot: Option<String>,
    /// The `digest` login, if any: user and password.
    pub digest: Option<(String, String)>,
    /// Whether the connections use TLS.
    pub tls: bool,
}

impl ZkAddress {
    /// Parses what follows `scheme://` of a ZooKeeper URL.
    pub fn parse(rest: &str, tls: bool) -> Result<ZkAddress> {
        let scheme = if tls { "zookeeper+tls" } else { "zookeeper" };
        let (authority, chroot) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if chroot.contains(['?', '#']) {
            return Err(Error::invalid(format!("a {scheme}:// URL takes no query or fragment: give options as options")));
        }
        let (login, hosts) = match authority.rfind('@') {
            Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
            None => (None, authority),
        };
        let digest = match login {
            None => None,
            Some(l) => match l.split_once(':') {
                Some((user, password)) if !user.is_empty() => Some((decode(user, "user")?, decode(password, "password")?)),
                _ => {
                    return Err(Error::invalid(format!(
                        "a {scheme}:// login is user:password (ZooKeeper's digest scheme)"
                    )))
                }
            },
        };
        if hosts.is_empty() {
            return Err(Error::invalid(format!("a {scheme}:// URL lists its servers: {scheme}://host1:2181,host2:2181")));
        }
        let mut parsed = Vec::new();
        for host in hosts.split(',') {
            let entry = parse_host(host).map_err(|why| Error::invalid(format!("a {scheme}:// URL has {why}")))?;
            if parsed.contains(&entry) {
                return Err(Error::invalid(format!("a {scheme}:// URL lists {}:{} twice", entry.0, entry.1)));
            }
            parsed.push(entry);
        }
        if parsed.len() > MAX_HOSTS {
            return Err(Error::invalid(format!("a {scheme}:// URL lists more than {MAX_HOSTS} servers")));
        }
        let chroot = match chroot {
            "" | "/" => None,
            path => {
                check_path(path).map_err(|why| Error::invalid(format!("the chroot of a {scheme}:// URL {why}")))?;
                Some(path.to_string())
            }
        };
        Ok(ZkAddress { hosts: parsed, chroot, digest, tls })
    }

    /// The connect string ZooKeeper clients take: `host1:port,host2:port[/chroot]`.
    pub fn connect_string(&self) -> String {
        let hosts: Vec<String> = self.hosts.iter().map(|(h, p)| host_port(h, *p)).collect();
        format!("{}{}", hosts.join(","), self.chroot.as_deref().unwrap_or(""))
    }

    /// The URL with the password replaced by `***`.
    pub fn shown(&self) -> String {
        let scheme = if self.tls { "zookeeper+tls" } else { "zookeeper" };
        let login = self.digest.as_ref().map(|(u, _)| format!("{u}:***@")).unwrap_or_default();
        format!("{scheme}://{login}{}", self.connect_string())
    }
}

impl fmt::Debug for ZkAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

/// `host:port`, with brackets around an IPv6 address.
fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// One `host[:port]` entry (IPv6 in brackets).
fn parse_host(entry: &str) -> std::result::Result<(String, u16), String> {
    if entry.is_empty() {
        return Err("an empty entry in its list of servers".into());
    }
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let Some((h, after)) = rest.split_once(']') else {
            return Err(format!("an unclosed '[' in server {entry:?}"));
        };
        match after {
            "" => (h, None),
            p if p.starts_with(':') => (h, Some(&p[1..])),
            _ => return Err(format!("a malformed server {entry:?}")),
        }
    } else {
        match entry.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (entry, None),
        }
    };
    let valid = !host.is_empty()
        && host.len() <= 253
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
    if !valid {
        return Err(format!("an invalid host in server {entry:?}"));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && !p.starts_with('+') => n,
            _ => return Err(format!("an invalid port in server {entry:?} (1 to 65535)")),
        },
    };
    Ok((host.to_ascii_lowercase(), port))
}

/// Checks an absolute ZooKeeper path: `/a/b`, no empty, `.` or `..` segment, no trailing `/`,
/// no control characters. The error says what is wrong, as the end of a sentence.
pub fn check_path(path: &str) -> std::result::Result<(), String> {
    if !path.starts_with('/') {
        return Err("must start with '/'".into());
    }
    if path.len() > 1 && path.ends_with('/') {
        return Err("must not end with '/'".into());
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return Err("has an empty segment ('//')".into()),
            "." | ".." => return Err("has a '.' or '..' segment".into()),
            s if s.chars().any(|c| c.is_control() || ('\u{fff0}'..='\u{ffff}').contains(&c)) => {
                return Err("has a control character".into())
            }
            _ => {}
        }
    }
    Ok(())
}

/// Percent-decodes one part of the login.
fn decode(part: &str, what: &str) -> Result<String> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = part.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return Err(Error::invalid(format!("the {what} of a zookeeper:// login has a malformed %-escape")));
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Error::invalid(format!("the {what} of a zookeeper:// login is not UTF-8")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_hosts_chroot_and_login() {
        let a = ZkAddress::parse("app:s%40cret@h1:2182,H2,[::1]:2183/locks/app", false).unwrap();
        assert_eq!(a.hosts, [("h1".into(), 2182), ("h2".into(), 2181), ("::1".into(), 2183)]);
        assert_eq!(a.chroot.as_deref(), Some("/locks/app"));
        assert_eq!(a.digest, Some(("app".into(), "s@cret".into())));
        assert_eq!(a.connect_string(), "h1:2182,h2:2181,[::1]:2183/locks/app");
        assert_eq!(format!("{a:?}"), "zookeeper://app:***@h1:2182,h2:2181,[::1]:2183/locks/app");
        assert_eq!(ZkAddress::parse("h:1/", true).unwrap().chroot, None);
    }

    #[test]
    fn refuses_bad_urls_without_echoing_passwords() {
        for bad in ["", "@h", "user@h", ":pw@h", "h,,i", "h:0", "h:99999", "h:x", "h,h:2181", "h/a/", "h/a//b", "h/./a", "h?x=1", "h#f", "[::1", "h h"] {
            let e = ZkAddress::parse(bad, false).expect_err(bad);
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{bad}");
        }
        let e = ZkAddress::parse("u:topsecret@h:x", false).unwrap_err();
        assert!(!e.message().contains("topsecret"), "{e}");
    }
}
