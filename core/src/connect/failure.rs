//! How a failed connect is said, once for every transport: which server (its address, the
//! password redacted), what it answered, and whether trying again can help. A message like
//! "Connection refused (os error 111)" names neither the server nor what was wrong with it; a
//! retry loop on a database that does not exist spins for ever. Pure (no I/O): the transports
//! hand in what they saw.

use std::fmt::Display;

use crate::error::{Error, ErrorKind};

/// The one message of a failed connect: `could not connect to <target>: <answered>`. `target`
/// must already be redacted (a URL's `Display` with `***` for the password, `host:port`);
/// `answered` says what the server did (refused, closed, answered like HTTP, refused the
/// login). Only `CONNECTION` stays retryable: a refused login (`AUTHENTICATION`), a setting the
/// server refuses (`INVALID_ARGUMENT`: a database that does not exist, a missing password) or a
/// server of another kind (`PROTOCOL`) fails the same way on every try.
pub fn connect_failed(kind: ErrorKind, target: &dyn Display, answered: &str) -> Error {
    let prefix = format!("could not connect to {target}");
    // A transport's own message may already start with the same words: say them once.
    let answered = answered.strip_prefix(&prefix).map(|r| r.trim_start_matches([':', ' ', ';'])).unwrap_or(answered);
    Error::new(kind, format!("{prefix}: {answered}"))
}

/// What an I/O error while connecting says about the server, in words a person acts on.
pub fn io_answer(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => "connection refused (nothing listens on that port, or the server is down)".into(),
        K::ConnectionReset | K::ConnectionAborted => "the server reset the connection".into(),
        K::BrokenPipe | K::UnexpectedEof => "the server closed the connection without answering (is it the right kind of server?)".into(),
        K::TimedOut => "no answer (connect timed out)".into(),
        K::AddrNotAvailable | K::NotFound => format!("the address cannot be reached or resolved ({e})"),
        _ => e.to_string(),
    }
}

/// What the first bytes a server sent say, for a client that expected `protocol` ("Redis"):
/// `None` if they look like that protocol, else a description (an HTTP status line, or the
/// printable start of the bytes). An empty reply means the server closed without answering.
pub fn foreign_reply(protocol: &str, first: &[u8]) -> Option<String> {
    let resp = matches!(first.first(), Some(b'+' | b'-' | b':' | b'$' | b'*' | b'%' | b'_' | b'>' | b'|' | b'#' | b',' | b'(' | b'=' | b'~' | b'!'));
    if protocol == "Redis" && resp {
        return None;
    }
    if first.is_empty() {
        return Some(format!("the server closed the connection without a {protocol} reply (not a {protocol} server?)"));
    }
    let line: String = first
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default()
        .iter()
        .take(60)
        .map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' })
        .collect();
    Some(format!("unexpected handshake reply {line:?} (not a {protocol} server?)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_target_once() {
        let e = connect_failed(ErrorKind::Connection, &"redis://127.0.0.1:1", "could not connect to redis://127.0.0.1:1: refused");
        assert_eq!(e.message(), "could not connect to redis://127.0.0.1:1: refused");
        assert!(e.retryable());
        assert!(!connect_failed(ErrorKind::InvalidArgument, &"x", "no database").retryable());
    }

    #[test]
    fn describes_foreign_servers() {
        assert_eq!(foreign_reply("Redis", b"+PONG\r\n"), None);
        let http = foreign_reply("Redis", b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n").unwrap();
        assert!(http.contains("\"HTTP/1.1 400 Bad Request\""), "{http}");
        assert!(foreign_reply("Redis", b"").unwrap().contains("closed the connection"));
    }
}
