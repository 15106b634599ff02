//! The parts of a server address every backend's URL grammar shares, and none owns: strict
//! percent-decoding of a login, `host[:port]` entries of a host list, and `host:port` shown
//! with brackets around an IPv6 address. Neutral ground: it imports no backend, so a backend's
//! folder never has to reach into another's for them (etcd and SQL both list hosts; ZooKeeper,
//! etcd and SQL all decode logins).

use crate::error::{Error, Result};

/// Percent-decodes `part` strictly (a malformed escape or non-UTF-8 result is an error, as the
/// ZooKeeper and etcd URL parsers want); `what` names it in errors, never its value: it may be
/// a password.
pub fn percent_decode(part: &str, what: &str) -> Result<String> {
    let bytes = part.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = part.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok());
            let Some(b) = hex else {
                return Err(Error::invalid(format!("the {what} has a malformed %-escape")));
            };
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Error::invalid(format!("the {what} is not UTF-8")))
}

/// `host:port`, with brackets around an IPv6 address.
pub fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// One `host[:port]` entry of a host list (IPv6 in brackets), `default_port` unless given:
/// shared by the URLs that list hosts (etcd's members, PostgreSQL's libpq host lists). The
/// error is the end of a sentence ("an invalid port in member ...").
pub fn parse_host_port(entry: &str, default_port: u16) -> std::result::Result<(String, u16), String> {
    if entry.is_empty() {
        return Err("an empty entry in its list of members".into());
    }
    let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
        let Some((h, after)) = rest.split_once(']') else {
            return Err(format!("an unclosed '[' in member {entry:?}"));
        };
        match after {
            "" => (h, None),
            p if p.starts_with(':') => (h, Some(&p[1..])),
            _ => return Err(format!("a malformed member {entry:?}")),
        }
    } else {
        match entry.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (entry, None),
        }
    };
    let bracketed = entry.starts_with('[');
    let valid = !host.is_empty()
        && host.len() <= 253
        && (bracketed || !host.contains(':'))
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b));
    if !valid {
        return Err(format!("an invalid host in member {entry:?}"));
    }
    let port = match port {
        None => default_port,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && !p.starts_with('+') => n,
            _ => return Err(format!("an invalid port in member {entry:?} (1 to 65535)")),
        },
    };
    Ok((host.to_ascii_lowercase(), port))
}
