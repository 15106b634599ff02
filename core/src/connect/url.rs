//! Redis URLs: validated before any connection, and never shown with their password.

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

    /// The URL handed to the `redis` crate: RESP3, so pushes share the command connection.
    pub(crate) fn for_connection(&self) -> String {
        let mut u = self.parsed.clone();
        u.query_pairs_mut().clear().append_pair("protocol", "resp3");
        u.to_string()
    }

    /// Replaces every occurrence of the password in `message` (server and I/O errors may echo input).
    pub(crate) fn scrub(&self, message: &str) -> String {
        match self.password() {
            Some(p) if !p.is_empty() => message.replace(&p, "***"),
            _ => message.to_string(),
        }
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
            assert!(u.for_connection().contains("protocol=resp3"), "{ok}");
        }
        assert_eq!(RedisUrl::parse("rediss://app:p%40ss@h").unwrap().password().as_deref(), Some("p@ss"));
    }
}
