//! Server replies as plain data, and the parsing of each script's reply shape.
//! Anything unexpected becomes a [`ErrorKind::Protocol`](crate::ErrorKind) error, never a panic;
//! a transient server state (BUSY, LOADING, ...) is a retryable `CONNECTION` error instead.

use crate::error::{Error, ErrorKind, Result};

/// One RESP reply, independent of any client library.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// Null bulk / null array / RESP3 null.
    Nil,
    /// An integer.
    Int(i64),
    /// A bulk or verbatim string.
    Data(Vec<u8>),
    /// A simple status string such as `OK`.
    Status(String),
    /// An array (or RESP3 set).
    Array(Vec<Reply>),
    /// An error reply (`-ERR ...`, `-NOSCRIPT ...`, `-WRONGTYPE ...`).
    Error(String),
    /// A reply type the protocol never produces (map, double, ...), named for the error message.
    Other(String),
}

impl Reply {
    /// Whether this is the `NOSCRIPT` error that asks for a full EVAL.
    pub fn is_noscript(&self) -> bool {
        matches!(self, Reply::Error(e) if e.starts_with("NOSCRIPT"))
    }

    fn describe(&self) -> String {
        match self {
            Reply::Nil => "nil".into(),
            Reply::Int(i) => format!("integer {i}"),
            Reply::Data(d) => format!("a {}-byte string", d.len()),
            Reply::Status(s) => format!("status {:?}", truncate(s)),
            Reply::Array(a) => format!("an array of {}", a.len()),
            Reply::Error(e) => format!("error {:?}", truncate(e)),
            Reply::Other(o) => format!("unsupported reply type {o}"),
        }
    }
}

fn truncate(s: &str) -> &str {
    let mut end = s.len().min(120);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Error codes a server answers while it is briefly unable to serve, not because the request
/// is wrong: a long script running (`BUSY`), a dataset loading (`LOADING`), a slot in migration
/// (`TRYAGAIN`), a replica cut off from its primary or a cluster without a quorum
/// (`MASTERDOWN`, `CLUSTERDOWN`), too few replicas for a write (`NOREPLICAS`). PROTOCOL.md §4:
/// they are retryable `CONNECTION` errors, handled as a lost connection is.
pub const TRANSIENT_ERROR_CODES: [&str; 6] =
    ["BUSY", "LOADING", "TRYAGAIN", "MASTERDOWN", "CLUSTERDOWN", "NOREPLICAS"];

/// Whether a server error reply (`"BUSY Redis is busy ..."`) is one of the
/// [transient ones](TRANSIENT_ERROR_CODES).
pub fn is_transient_error(text: &str) -> bool {
    let code = text.split(' ').next().unwrap_or("");
    TRANSIENT_ERROR_CODES.contains(&code)
}

/// Server error codes that mean the credentials were refused: a request answered with one fails
/// as `AUTHENTICATION` and is never retried (PROTOCOL.md §4). The one list every transport reads.
pub const AUTH_REFUSED_CODES: [&str; 3] = ["NOAUTH", "WRONGPASS", "NOPERM"];

/// Whether a server error reply's code (its first word) says the credentials were refused.
pub fn is_auth_refused(text: &str) -> bool {
    AUTH_REFUSED_CODES.contains(&text.split(' ').next().unwrap_or(""))
}

/// Whether a client library's error message names a refused credential anywhere (clients wrap
/// the server's reply in words of their own).
pub fn mentions_auth_refused(text: &str) -> bool {
    AUTH_REFUSED_CODES.iter().any(|c| text.contains(c))
}

pub(crate) fn unexpected(script: &str, r: &Reply) -> Error {
    match r {
        Reply::Error(e) if is_transient_error(e) => Error::new(
            ErrorKind::Connection,
            format!("{script} script not run, the server is briefly unavailable: {}", truncate(e)),
        ),
        // What a server older than Redis 7.0 answers the mutex scripts' `SET … NX GET` and
        // `PEXPIRE … GT` (PROTOCOL.md §2, version 19): said, so nobody hunts for a bug.
        Reply::Error(e) if e.contains("syntax error") || e.contains("wrong number of arguments") => Error::protocol(format!(
            "{script} script failed on the server: {}; lockgate's Redis scripts need Redis 7.0 or later, \
             so a server older than that answers this",
            truncate(e)
        )),
        Reply::Error(e) => Error::protocol(format!(
            "{script} script failed on the server: {}",
            truncate(e)
        )),
        _ => Error::protocol(format!("{script} script returned {}", r.describe())),
    }
}

/// The reply of the ACQUIRE script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AcquireReply {
    /// The caller's token holds the lock.
    Held {
        /// Fencing token of this grant.
        fence: u64,
        /// Remaining lease on the server, in ms, when the script ran.
        pttl_ms: u64,
    },
    /// The primitive is in use with another value of a setting every participant must agree
    /// on (PROTOCOL.md §7); the script changed nothing.
    Mismatch {
        /// The setting, as the script names it (`permits`, `writers_first`).
        setting: String,
        /// The value recorded on the server.
        recorded: String,
    },
    /// Someone else holds it; their remaining lease (None if the key has no expiry).
    Busy {
        /// Holder's remaining lease in ms, if any.
        holder_pttl_ms: Option<u64>,
        /// The fence of the latest grant when the script ran (0 if none is recorded): any grant
        /// made later carries a larger one.
        fence: u64,
    },
}

/// Parses `{1, fence, pttl}` / `{0, "", pttl}`.
pub fn parse_acquire(r: &Reply) -> Result<AcquireReply> {
    let items = match r {
        Reply::Array(items) if items.len() == 3 => items,
        _ => return Err(unexpected("acquire", r)),
    };
    match (&items[0], &items[2]) {
        (Reply::Int(1), Reply::Int(pttl)) => {
            let fence = parse_u64(&items[1]).ok_or_else(|| unexpected("acquire", r))?;
            // PTTL is 0 while the key lives through its last millisecond.
            if fence == 0 || *pttl < 0 {
                return Err(unexpected("acquire", r));
            }
            Ok(AcquireReply::Held {
                fence,
                pttl_ms: *pttl as u64,
            })
        }
        (Reply::Int(-1), Reply::Data(recorded)) => {
            let text = |d: &Reply| match d {
                Reply::Data(b) => String::from_utf8(b.clone()).ok(),
                _ => None,
            };
            match (text(&items[1]), String::from_utf8(recorded.clone()).ok()) {
                (Some(setting), Some(recorded)) => Ok(AcquireReply::Mismatch { setting, recorded }),
                _ => Err(unexpected("acquire", r)),
            }
        }
        (Reply::Int(0), Reply::Int(pttl)) => Ok(AcquireReply::Busy {
            holder_pttl_ms: if *pttl >= 0 { Some(*pttl as u64) } else { None },
            fence: parse_fence_or_zero(&items[1]).ok_or_else(|| unexpected("acquire", r))?,
        }),
        _ => Err(unexpected("acquire", r)),
    }
}

/// Parses the 0/1 integer of RELEASE and EXTEND.
pub fn parse_flag(script: &str, r: &Reply) -> Result<bool> {
    match r {
        Reply::Int(1) => Ok(true),
        Reply::Int(0) => Ok(false),
        _ => Err(unexpected(script, r)),
    }
}

fn parse_fence_or_zero(r: &Reply) -> Option<u64> {
    match r {
        Reply::Data(d) if d == b"0" => Some(0),
        other => parse_u64(other),
    }
}

fn parse_u64(r: &Reply) -> Option<u64> {
    match r {
        Reply::Data(d) => std::str::from_utf8(d).ok()?.parse().ok(),
        Reply::Status(s) => s.parse().ok(),
        Reply::Int(i) if *i > 0 => Some(*i as u64),
        _ => None,
    }
}

/// Parses SHARED_OBSERVE: `{value, fence, pttl_ms}` for the first holder, `{}` for none.
pub fn parse_observe(r: &Reply) -> Result<Option<(String, u64, u64)>> {
    let items = match r {
        Reply::Array(items) if items.is_empty() => return Ok(None),
        Reply::Array(items) if items.len() == 3 => items,
        _ => return Err(unexpected("observe", r)),
    };
    let value = match &items[0] {
        Reply::Data(d) => String::from_utf8(d.clone()).map_err(|_| unexpected("observe", r))?,
        _ => return Err(unexpected("observe", r)),
    };
    let fence = parse_u64(&items[1]).filter(|f| *f > 0).ok_or_else(|| unexpected("observe", r))?;
    match items[2] {
        Reply::Int(p) if p >= 0 => Ok(Some((value, fence, p as u64))),
        _ => Err(unexpected("observe", r)),
    }
}

/// A grant pushed on a client channel: `granted <token> <fence>`.
pub fn parse_grant(payload: &[u8]) -> Option<(&str, u64)> {
    let s = std::str::from_utf8(payload).ok()?;
    let mut parts = s.split(' ');
    if parts.next()? != "granted" {
        return None;
    }
    let token = parts.next()?;
    let fence = parts.next()?.parse().ok()?;
    if parts.next().is_some() || fence == 0 {
        return None;
    }
    Some((token, fence))
}

/// A server error reply that fails the whole request rather than staying in place: refused
/// credentials (`AUTHENTICATION`) and an unavailable server (`CONNECTION`: the core's list,
/// PROTOCOL.md §4: BUSY, LOADING, TRYAGAIN, MASTERDOWN, CLUSTERDOWN, ...).
pub fn request_level(message: &str) -> Option<ErrorKind> {
    if is_auth_refused(message) {
        Some(ErrorKind::Authentication)
    } else if is_transient_error(message) {
        Some(ErrorKind::Connection)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_replies() {
        let ok = Reply::Array(vec![
            Reply::Int(1),
            Reply::Data(b"17".to_vec()),
            Reply::Int(500),
        ]);
        assert_eq!(
            parse_acquire(&ok).unwrap(),
            AcquireReply::Held {
                fence: 17,
                pttl_ms: 500
            }
        );
        let busy = Reply::Array(vec![Reply::Int(0), Reply::Data(b"0".to_vec()), Reply::Int(-1)]);
        assert_eq!(
            parse_acquire(&busy).unwrap(),
            AcquireReply::Busy { holder_pttl_ms: None, fence: 0 }
        );
        let mismatch = Reply::Array(vec![Reply::Int(-1), Reply::Data(b"permits".to_vec()), Reply::Data(b"1".to_vec())]);
        assert_eq!(
            parse_acquire(&mismatch).unwrap(),
            AcquireReply::Mismatch { setting: "permits".into(), recorded: "1".into() }
        );
        let busy = Reply::Array(vec![Reply::Int(0), Reply::Data(b"42".to_vec()), Reply::Int(7)]);
        assert_eq!(
            parse_acquire(&busy).unwrap(),
            AcquireReply::Busy { holder_pttl_ms: Some(7), fence: 42 }
        );
        for bad in [
            Reply::Nil,
            Reply::Int(1),
            Reply::Error("WRONGTYPE Operation against a key".into()),
            Reply::Array(vec![
                Reply::Int(1),
                Reply::Data(b"x".to_vec()),
                Reply::Int(5),
            ]),
            Reply::Array(vec![
                Reply::Int(1),
                Reply::Data(b"99999999999999999999999".to_vec()),
                Reply::Int(5),
            ]),
            Reply::Array(vec![Reply::Int(7), Reply::Nil, Reply::Int(5)]),
            Reply::Array(vec![Reply::Int(-1), Reply::Int(5), Reply::Data(b"1".to_vec())]),
            Reply::Array(vec![Reply::Int(-1), Reply::Data(b"permits".to_vec()), Reply::Int(1)]),
            Reply::Array(vec![Reply::Int(0), Reply::Data(b"x".to_vec()), Reply::Int(5)]),
        ] {
            assert_eq!(
                parse_acquire(&bad).unwrap_err().code(),
                "PROTOCOL",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn an_older_servers_refusal_of_a_script_command_names_the_redis_version_needed() {
        let old = Reply::Error("ERR Error running script (call to f_1): @user_script:12: ERR syntax error".into());
        let e = unexpected("ACQUIRE", &old);
        assert_eq!(e.code(), "PROTOCOL");
        assert!(e.message().contains("need Redis 7.0 or later") && e.message().contains("syntax error"), "{e}");
        let other = unexpected("ACQUIRE", &Reply::Error("WRONGTYPE Operation against a key".into()));
        assert!(!other.message().contains("Redis 7.0"), "{other}");
    }

    #[test]
    fn transient_server_errors_are_retryable_connection_errors() {
        for text in [
            "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.",
            "LOADING Redis is loading the dataset in memory",
            "TRYAGAIN Multiple keys request during rehashing of slot",
            "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            "CLUSTERDOWN The cluster is down",
            "NOREPLICAS Not enough good replicas to write. script: 0123, on @user_script:1.",
        ] {
            let r = Reply::Error(text.into());
            for e in [
                parse_acquire(&r).unwrap_err(),
                parse_flag("release", &r).unwrap_err(),
                parse_observe(&r).unwrap_err(),
            ] {
                assert_eq!(e.kind(), ErrorKind::Connection, "{text}");
                assert!(e.retryable(), "{text}");
            }
        }
        // Lookalikes and real protocol violations stay PROTOCOL.
        for text in ["BUSYKEY Target key name already exists.", "ERR busy", "WRONGTYPE Operation"] {
            let e = parse_flag("release", &Reply::Error(text.into())).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Protocol, "{text}");
        }
    }

    #[test]
    fn observe_replies() {
        assert_eq!(parse_observe(&Reply::Array(vec![])).unwrap(), None);
        let ok = Reply::Array(vec![
            Reply::Data(b"node-1".to_vec()),
            Reply::Data(b"9".to_vec()),
            Reply::Int(250),
        ]);
        assert_eq!(parse_observe(&ok).unwrap(), Some(("node-1".into(), 9, 250)));
        for bad in [
            Reply::Nil,
            Reply::Array(vec![Reply::Int(1)]),
            Reply::Array(vec![Reply::Data(b"x".to_vec()), Reply::Data(b"0".to_vec()), Reply::Int(5)]),
            Reply::Array(vec![Reply::Data(b"x".to_vec()), Reply::Data(b"3".to_vec()), Reply::Int(-1)]),
        ] {
            assert_eq!(parse_observe(&bad).unwrap_err().code(), "PROTOCOL", "{bad:?}");
        }
    }

    #[test]
    fn grants() {
        assert_eq!(parse_grant(b"granted abc 12"), Some(("abc", 12)));
        assert_eq!(parse_grant(b"granted abc"), None);
        assert_eq!(parse_grant(b"granted abc 0"), None);
        assert_eq!(parse_grant(&[0xff, 0xfe]), None);
    }
}
