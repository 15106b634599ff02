//! The servers, chroot and login of a `zookeeper://` URL, checked before any connection and
//! never shown with a password:
//! `zookeeper://[user:password@]host1[:port],host2[:port],...[/chroot]` (and `zookeeper+tls://`).
//! The login is ZooKeeper's `digest` scheme; the port defaults to 2181.
//!
//! A `zookeeper+tls://` URL may name PEM files in its query: `?ca=<path>` (the CA that signed
//! the servers' certificates; else the client's TLS CA option, else the system's roots) and
//! `?cert=<path>&key=<path>` (a client certificate for servers that ask for one, ZooKeeper's
//! `ssl.clientAuth`). Only the paths are parsed here (this runs in the wasm build too); the
//! native transport reads the files.

use std::fmt;

use crate::address::{host_port, percent_decode};
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
    /// The PEM files a `zookeeper+tls://` URL's query names (all `None` without TLS).
    pub tls_files: ZkTlsFiles,
}

/// The PEM files of a `zookeeper+tls://` URL's query (paths, percent-decoded; never read here).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZkTlsFiles {
    /// `ca=`: the CA certificate(s) to trust instead of the system's roots.
    pub ca: Option<String>,
    /// `cert=` and `key=`: the client's certificate chain and its private key (both or neither).
    pub identity: Option<(String, String)>,
}

impl ZkAddress {
    /// Parses what follows `scheme://` of a ZooKeeper URL.
    pub fn parse(rest: &str, tls: bool) -> Result<ZkAddress> {
        let scheme = if tls { "zookeeper+tls" } else { "zookeeper" };
        if rest.contains('#') {
            return Err(Error::invalid(format!("a {scheme}:// URL takes no fragment ('#')")));
        }
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let tls_files = match query {
            None => ZkTlsFiles::default(),
            Some(_) if !tls => {
                return Err(Error::invalid(
                    "a zookeeper:// URL takes no query: give options as options (ca=, cert= and key= are for zookeeper+tls://)",
                ))
            }
            Some(q) => parse_tls_query(q)?,
        };
        let (authority, chroot) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
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
        Ok(ZkAddress { hosts: parsed, chroot, digest, tls, tls_files })
    }

    /// The connect string ZooKeeper clients take: `host1:port,host2:port[/chroot]`.
    pub fn connect_string(&self) -> String {
        let hosts: Vec<String> = self.hosts.iter().map(|(h, p)| host_port(h, *p)).collect();
        format!("{}{}", hosts.join(","), self.chroot.as_deref().unwrap_or(""))
    }

    /// The URL with the password replaced by `***` (file paths are shown: they are not secret;
    /// what the files hold never is).
    pub fn shown(&self) -> String {
        let scheme = if self.tls { "zookeeper+tls" } else { "zookeeper" };
        let login = self.digest.as_ref().map(|(u, _)| format!("{u}:***@")).unwrap_or_default();
        let mut query = Vec::new();
        if let Some(ca) = &self.tls_files.ca {
            query.push(format!("ca={ca}"));
        }
        if let Some((cert, key)) = &self.tls_files.identity {
            query.push(format!("cert={cert}"));
            query.push(format!("key={key}"));
        }
        let query = if query.is_empty() { String::new() } else { format!("?{}", query.join("&")) };
        format!("{scheme}://{login}{}{query}", self.connect_string())
    }
}

impl fmt::Debug for ZkAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown())
    }
}

/// The query of a `zookeeper+tls://` URL: `ca`, `cert` and `key`, each at most once, each a
/// non-empty path; `cert` and `key` together or not at all.
fn parse_tls_query(query: &str) -> Result<ZkTlsFiles> {
    let (mut ca, mut cert, mut key) = (None, None, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let slot = match name {
            "ca" => &mut ca,
            "cert" => &mut cert,
            "key" => &mut key,
            other => {
                return Err(Error::invalid(format!(
                    "a zookeeper+tls:// URL takes the query parameters ca, cert and key (PEM file paths), not {other:?}"
                )))
            }
        };
        if slot.is_some() {
            return Err(Error::invalid(format!("a zookeeper+tls:// URL gives {name}= twice")));
        }
        let value = percent_decode(value, &format!("{name}= path of a zookeeper+tls:// URL"))?;
        if value.is_empty() {
            return Err(Error::invalid(format!("the {name}= of a zookeeper+tls:// URL is empty: give a PEM file's path")));
        }
        *slot = Some(value);
    }
    let identity = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        (Some(_), None) => return Err(Error::invalid("a zookeeper+tls:// URL gives cert= without key= (the client certificate's private key)")),
        (None, Some(_)) => return Err(Error::invalid("a zookeeper+tls:// URL gives key= without cert= (the client certificate)")),
    };
    Ok(ZkTlsFiles { ca, identity })
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
    percent_decode(part, &format!("{what} of a zookeeper:// login"))
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

    #[test]
    fn tls_query_names_the_pem_files() {
        let a = ZkAddress::parse("h:2281/app?ca=/etc/zk/ca.pem&cert=/c%20d/client.pem&key=k.pem", true).unwrap();
        assert_eq!(a.chroot.as_deref(), Some("/app"));
        assert_eq!(a.tls_files.ca.as_deref(), Some("/etc/zk/ca.pem"));
        assert_eq!(a.tls_files.identity, Some(("/c d/client.pem".into(), "k.pem".into())));
        assert_eq!(a.connect_string(), "h:2281/app");
        assert_eq!(a.shown(), "zookeeper+tls://h:2281/app?ca=/etc/zk/ca.pem&cert=/c d/client.pem&key=k.pem");
        let b = ZkAddress::parse("h?ca=/x", true).unwrap();
        assert_eq!((b.chroot, b.tls_files.ca.as_deref(), b.tls_files.identity), (None, Some("/x"), None));
        assert_eq!(ZkAddress::parse("h", true).unwrap().tls_files, ZkTlsFiles::default());
    }

    #[test]
    fn refuses_bad_tls_queries() {
        let cases = [
            ("h?ca=/x", false, "are for zookeeper+tls://"),
            ("h?x=1", true, "not \"x\""),
            ("h?ca=/a&ca=/b", true, "ca= twice"),
            ("h?cert=/c", true, "cert= without key="),
            ("h?key=/k", true, "key= without cert="),
            ("h?ca=", true, "ca= of a zookeeper+tls:// URL is empty"),
            ("h?ca=%zz", true, "malformed %-escape"),
            ("h?ca=/x#f", true, "no fragment"),
        ];
        for (url, tls, says) in cases {
            let e = ZkAddress::parse(url, tls).expect_err(url);
            assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument, "{url}");
            assert!(e.message().contains(says), "{url}: {e}");
        }
    }
}
