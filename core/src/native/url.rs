//! Redis URLs: validated before any connection, and never shown with their password.

use crate::error::{Error, Result};
use std::fmt;

/// A validated `redis://` or `rediss://` URL. Its `Debug` and `Display` redact credentials.
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
        let path = parsed.path().trim_start_matches('/');
        if !path.is_empty() && path.parse::<u32>().is_err() {
            return Err(Error::invalid(
                "the path of a Redis URL must be a database number",
            ));
        }
        for (k, _) in parsed.query_pairs() {
            if k != "protocol" {
                return Err(Error::invalid(format!(
                    "unsupported Redis URL parameter {k:?}"
                )));
            }
        }
        Ok(RedisUrl { parsed })
    }

    /// Whether the connection uses TLS (`rediss://`).
    pub fn is_tls(&self) -> bool {
        self.parsed.scheme() == "rediss"
    }

    /// The password, if any (for scrubbing messages).
    pub(crate) fn password(&self) -> Option<String> {
        self.parsed.password().map(|p| {
            ::url::form_urlencoded::parse(format!("p={p}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        })
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
}
