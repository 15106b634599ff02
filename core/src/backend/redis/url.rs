//! Redis URLs: validated before any connection, and never shown with their password.
//!
//! Pure Rust (the `url` crate, no I/O), so the native driver, Python, the JVM and the Node
//! binding (as wasm) all accept and refuse exactly the same URLs with the same messages.

use crate::error::{Error, Result};
use std::fmt;

/// A validated `redis://` or `rediss://` URL. Its `Debug` and `Display` redact credentials.
///
/// Accepted: `redis[s]://[[user]:password@]host[:port][/db][?protocol=resp2|resp3]`, where `db`
/// is a database number in plain decimal digits. Everything else is `INVALID_ARGUMENT` before
/// any connection, with a message that never contains the password: a path that is not such
/// a number (`/abc`, `/%20`, `/-1`, `/1.5`), any other query parameter (`?foo=bar`), a
/// fragment, and a user name without a password (`redis://user@host`). The last one would
/// otherwise connect without AUTH, that is as the server's `default` user: a silent change of
/// identity. An empty password (`redis://user:@host`) is refused the same way, since the URL
/// syntax cannot tell it from a missing one.
#[derive(Clone)]
pub struct RedisUrl {
    parsed: ::url::Url,
}

impl RedisUrl {
    /// Parses and validates `url`; errors never echo the URL's password.
    pub fn parse(url: &str) -> Result<Self> {
        let parsed = ::url::Url::parse(url)
            .map_err(|e| Error::invalid(format!("malformed Redis URL: {e}")))?;
        match parsed.scheme() {
            "redis" | "rediss" => {}
            other => {
                return Err(Error::invalid(format!(
                    "unsupported URL scheme {other:?}: use redis:// or rediss:// (TLS)"
                )))
            }
        }
        if parsed.host_str().is_none_or(str::is_empty) {
            return Err(Error::invalid("Redis URL has no host"));
        }
        if !parsed.username().is_empty() && parsed.password().is_none_or(str::is_empty) {
            return Err(Error::invalid(format!(
                "the Redis URL names user {:?} but gives no password; write redis://{0}:PASSWORD@host \
                 (lockgate never connects as another user than the one named, and a user without \
                 a password cannot be told apart from a forgotten one)",
                decode(parsed.username())
            )));
        }
        let path = parsed.path().strip_prefix('/').unwrap_or(parsed.path());
        if !path.is_empty() && (!path.bytes().all(|b| b.is_ascii_digit()) || path.parse::<u32>().is_err()) {
            return Err(Error::invalid(format!(
                "the path of a Redis URL must be a database number (decimal digits, like /0 or /2), got /{}",
                decode(path)
            )));
        }
        for (k, v) in parsed.query_pairs() {
            match (&*k, &*v) {
                ("protocol", "resp2" | "resp3") => {}
                ("protocol", other) => {
                    return Err(Error::invalid(format!(
                        "unsupported Redis URL protocol {other:?}: use resp2 or resp3 (lockgate speaks RESP3 either way)"
                    )))
                }
                _ => {
                    return Err(Error::invalid(format!(
                        "unsupported Redis URL parameter {k:?} (the only one accepted is protocol)"
                    )))
                }
            }
        }
        if parsed.fragment().is_some() {
            return Err(Error::invalid("a Redis URL takes no #fragment"));
        }
        Ok(RedisUrl { parsed })
    }

    /// Whether the connection uses TLS (`rediss://`).
    pub fn is_tls(&self) -> bool {
        self.parsed.scheme() == "rediss"
    }

    /// The password, if any (for scrubbing messages).
    pub(crate) fn password(&self) -> Option<String> {
        self.parsed.password().map(decode)
    }

    /// Where the URL points and how to log in, decoded: for drivers that open the connection
    /// themselves (the Node binding's sockets) instead of handing the URL to a client library.
    pub fn endpoint(&self) -> Endpoint {
        let host = self.parsed.host_str().unwrap_or_default();
        let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        let path = self.parsed.path().strip_prefix('/').unwrap_or_default();
        Endpoint {
            host: host.to_string(),
            port: self.parsed.port().unwrap_or(DEFAULT_PORT),
            username: Some(decode(self.parsed.username())).filter(|u| !u.is_empty()),
            password: self.password().filter(|p| !p.is_empty()),
            // `parse` accepted only plain decimal digits that fit a u32.
            db: path.parse().unwrap_or(0),
            tls: self.is_tls(),
        }
    }

    /// `host:port/db`, the server and database the URL names: two URLs with the same identity
    /// reach the same data whatever their credentials (Redlock refuses such a pair of masters).
    pub fn identity(&self) -> String {
        let e = self.endpoint();
        format!("{}:{}/{}", e.host.to_ascii_lowercase(), e.port, e.db)
    }

    /// The URL handed to the `redis` crate: RESP3, so pushes share the command connection.
    #[cfg(feature = "tokio")]
    pub(crate) fn for_connection(&self) -> String {
        let mut u = self.parsed.clone();
        u.query_pairs_mut().clear().append_pair("protocol", "resp3");
        u.to_string()
    }

    /// Replaces every occurrence of the password in `message` (server and I/O errors may echo input).
    pub fn scrub(&self, message: &str) -> String {
        match self.password() {
            Some(p) if !p.is_empty() => message.replace(&p, "***"),
            _ => message.to_string(),
        }
    }
}

/// The port a URL without one names.
pub const DEFAULT_PORT: u16 = 6379;

/// A parsed URL's server and login, decoded (see [`RedisUrl::endpoint`]). Its `Debug` hides
/// the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP address (an IPv6 address without its brackets).
    pub host: String,
    /// TCP port (6379 when the URL gives none).
    pub port: u16,
    /// The ACL user, if the URL names one (it then has a password too).
    pub username: Option<String>,
    /// The password, if any; never shown by `Debug`.
    pub password: Option<String>,
    /// The database number (0 when the URL gives none).
    pub db: u32,
    /// Whether the connection uses TLS (`rediss://`).
    pub tls: bool,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .field("tls", &self.tls)
            .finish()
    }
}

/// A percent-encoded URL component as text (invalid UTF-8 replaced).
fn decode(component: &str) -> String {
    ::url::form_urlencoded::parse(format!("p={}", component.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut u = self.parsed.clone();
        if u.password().is_some() {
            let _ = u.set_password(Some("***"));
        }
        write!(f, "{u}")
    }
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RedisUrl({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_and_validates() {
        let u = RedisUrl::parse("redis://app:s3cr%40t@127.0.0.1:6380/2").unwrap();
        assert_eq!(u.to_string(), "redis://app:***@127.0.0.1:6380/2");
        assert!(!format!("{u:?}").contains("s3cr"));
        assert_eq!(u.scrub("bad s3cr@t here"), "bad *** here");
        for bad in [
            "",
            "http://x",
            "redis://",
            "redis://h/db",
            "not a url",
            "redis://h/?foo=1",
        ] {
            let e = RedisUrl::parse(bad).unwrap_err();
            assert_eq!(e.code(), "INVALID_ARGUMENT", "{bad}");
        }
        let e = RedisUrl::parse("redis://u:hunter2@h:99999").unwrap_err();
        assert!(!e.to_string().contains("hunter2"));
    }

    /// Issue 13, items 9 and 10: every one of these is refused before connecting, with a
    /// message that says what is wrong and never contains the password.
    #[test]
    fn refuses_what_it_cannot_honour() {
        for (bad, says) in [
            ("redis://app@h", "names user \"app\" but gives no password"),
            ("redis://app:@h", "names user \"app\" but gives no password"),
            ("rediss://us%40er@h:6380/1", "names user \"us@er\" but gives no password"),
            ("redis://:hunter2@h/abc", "database number (decimal digits, like /0 or /2), got /abc"),
            ("redis://:hunter2@h/%20", "got / "),
            ("redis://:hunter2@h/-1", "got /-1"),
            ("redis://:hunter2@h/1.5", "got /1.5"),
            ("redis://:hunter2@h/+1", "got /+1"),
            ("redis://:hunter2@h/1/2", "got /1/2"),
            ("redis://:hunter2@h/99999999999", "got /99999999999"),
            ("redis://:hunter2@h?foo=bar", "unsupported Redis URL parameter \"foo\""),
            ("redis://:hunter2@h/0?protocol=resp3&db=2", "unsupported Redis URL parameter \"db\""),
            ("redis://:hunter2@h?protocol=resp9", "unsupported Redis URL protocol \"resp9\""),
            ("redis://:hunter2@h#x", "no #fragment"),
            ("redis://app:hunter2@", "host"),
        ] {
            let e = RedisUrl::parse(bad).expect_err(bad);
            assert_eq!(e.code(), "INVALID_ARGUMENT", "{bad}");
            assert!(e.message().contains(says), "{bad}: {}", e.message());
            assert!(!e.message().contains("hunter2"), "{bad}: {}", e.message());
        }
        // What stays accepted.
        for ok in [
            "redis://h",
            "redis://h/",
            "redis://h:6380/0",
            "redis://h/15",
            "redis://:pw@h",
            "redis://app:pw@h/2",
            "rediss://app:p%40ss@h?protocol=resp3",
            "redis://h?protocol=resp2",
            "redis://[::1]:6379",
        ] {
            let u = RedisUrl::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
            // What the native driver hands the `redis` crate (built with the tokio feature).
            #[cfg(feature = "tokio")]
            assert!(u.for_connection().contains("protocol=resp3"), "{ok}");
            #[cfg(not(feature = "tokio"))]
            let _ = u;
        }
        assert_eq!(RedisUrl::parse("rediss://app:p%40ss@h").unwrap().password().as_deref(), Some("p@ss"));
    }

    /// What a driver that opens its own sockets reads from a URL: decoded credentials, IPv6
    /// hosts without brackets, the defaults for port and database, and a `Debug` without the
    /// password.
    #[test]
    fn endpoints_are_decoded() {
        let e = RedisUrl::parse("rediss://us%40er:p%40ss%3Aw%2Frd@Example.COM:6380/7").unwrap().endpoint();
        assert_eq!(
            (e.host.as_str(), e.port, e.username.as_deref(), e.password.as_deref(), e.db, e.tls),
            ("Example.COM", 6380, Some("us@er"), Some("p@ss:w/rd"), 7, true)
        );
        assert!(!format!("{e:?}").contains("p@ss"), "{e:?}");
        let e = RedisUrl::parse("redis://[::1]").unwrap().endpoint();
        assert_eq!((e.host.as_str(), e.port, e.username, e.password, e.db, e.tls), ("::1", 6379, None, None, 0, false));
        let e = RedisUrl::parse("redis://:only%20pw@h/").unwrap().endpoint();
        assert_eq!((e.username, e.password.as_deref(), e.db), (None, Some("only pw"), 0));
        // Credentials do not change which server and database a URL names.
        assert_eq!(
            RedisUrl::parse("redis://a:b@H:6379/0").unwrap().identity(),
            RedisUrl::parse("redis://h").unwrap().identity()
        );
        assert_eq!(RedisUrl::parse("redis://[::1]:7000/3").unwrap().identity(), "::1:7000/3");
        assert_ne!(
            RedisUrl::parse("redis://h/1").unwrap().identity(),
            RedisUrl::parse("redis://h/2").unwrap().identity()
        );
    }

    /// Schemes, hosts and ports: only redis:// and rediss:// with a host, and no message ever
    /// carries a percent-encoded password, decoded or not.
    #[test]
    fn schemes_hosts_and_secrets() {
        for (bad, says) in [
            ("http://h", "unsupported URL scheme \"http\""),
            ("redis+sentinel://h", "unsupported URL scheme"),
            ("unix:///tmp/redis.sock", "unsupported URL scheme \"unix\""),
            ("rediss://", "has no host"),
            ("redis://[::1", "malformed Redis URL"),
            ("redis://h:port", "malformed Redis URL"),
            ("redis://h:65536", "malformed Redis URL"),
            ("redis://app:p%40ss%3Aword@h/x", "got /x"),
            ("redis://app:p%40ss%3Aword@h?x=1", "parameter \"x\""),
            ("redis://app:p%40ss%3Aword@h#f", "no #fragment"),
        ] {
            let e = RedisUrl::parse(bad).expect_err(bad);
            assert_eq!(e.code(), "INVALID_ARGUMENT", "{bad}");
            assert!(e.message().contains(says), "{bad}: {}", e.message());
            for secret in ["p%40ss", "p@ss", "word"] {
                assert!(!e.message().contains(secret), "{bad}: {}", e.message());
            }
        }
        let u = RedisUrl::parse("redis://app:p%40ss%3Aword@h").unwrap();
        for shown in [u.to_string(), format!("{u:?}")] {
            assert!(!shown.contains("p%40ss") && !shown.contains("p@ss"), "{shown}");
        }
    }
}
