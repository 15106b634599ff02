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
    // A transport's own message may already start with the same words, or with the
    // "connecting to <target>" of a crate error's context: say them once.
    let context = format!("connecting to {target}");
    let answered = [&prefix, &context]
        .into_iter()
        .find_map(|p| answered.strip_prefix(p.as_str()))
        .map(|r| r.trim_start_matches([':', ' ', ';']))
        .unwrap_or(answered);
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

/// What the first bytes a server sent say, for a client that expected `protocol` ("Redis",
/// "ZooKeeper", "etcd"): `None` if they look like that protocol, else a description (a TLS
/// server's answer, an HTTP status line, or the printable start of the bytes). An empty reply
/// means the server closed without answering.
pub fn foreign_reply(protocol: &str, first: &[u8]) -> Option<String> {
    if speaks(protocol, first) {
        return None;
    }
    let a = if protocol.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
    if first.is_empty() {
        return Some(format!("the server closed the connection without a {protocol} reply (not {a} {protocol} server?)"));
    }
    // A TLS record (an alert to a plain hello), or Go's answer to plain HTTP on a TLS port.
    let tls_record = first.len() >= 2 && matches!(first[0], 0x15 | 0x16) && first[1] == 0x03;
    if tls_record || first.windows(12).any(|w| w == b"HTTPS server") {
        return Some("the server answered with TLS (a TLS port: use the URL's TLS scheme)".into());
    }
    let line: String = first
        .split(|&b| b == b'\r' || b == b'\n')
        .next()
        .unwrap_or_default()
        .iter()
        .take(60)
        .map(|&b| if b.is_ascii_graphic() || b == b' ' { b as char } else { '.' })
        .collect();
    Some(format!("unexpected handshake reply {line:?} (not {a} {protocol} server?)"))
}

/// Whether `first` starts like a server of `protocol` answering its client's hello: Redis a
/// RESP type byte; ZooKeeper its connect response (a small length prefix, then protocol version
/// 0); etcd an HTTP/2 frame (the server's `SETTINGS`, type 4, on stream 0).
fn speaks(protocol: &str, first: &[u8]) -> bool {
    match protocol {
        "Redis" => matches!(first.first(), Some(b'+' | b'-' | b':' | b'$' | b'*' | b'%' | b'_' | b'>' | b'|' | b'#' | b',' | b'(' | b'=' | b'~' | b'!')),
        "ZooKeeper" => {
            first.len() >= 8 && (16..=1024).contains(&u32::from_be_bytes([first[0], first[1], first[2], first[3]])) && first[4..8] == [0; 4]
        }
        "etcd" => first.len() >= 9 && first[3] == 0x04 && first[5..9] == [0; 4],
        _ => false,
    }
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
        let e = connect_failed(ErrorKind::Connection, &"etcd://h:1", "connecting to etcd://h:1: no answer");
        assert_eq!(e.message(), "could not connect to etcd://h:1: no answer");
    }

    #[test]
    fn describes_foreign_servers() {
        assert_eq!(foreign_reply("Redis", b"+PONG\r\n"), None);
        let http = foreign_reply("Redis", b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n").unwrap();
        assert!(http.contains("\"HTTP/1.1 400 Bad Request\""), "{http}");
        assert!(foreign_reply("Redis", b"").unwrap().contains("closed the connection"));
        // A ZooKeeper connect response, an HTTP/2 SETTINGS frame: their own servers.
        assert_eq!(foreign_reply("ZooKeeper", &[0, 0, 0, 36, 0, 0, 0, 0, 0, 0, 0x27, 0x10]), None);
        assert_eq!(foreign_reply("etcd", &[0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 5]), None);
        let redis = foreign_reply("etcd", b"-ERR unknown command 'PRI'\r\n").unwrap();
        assert!(redis.contains("-ERR unknown command") && redis.contains("not an etcd server"), "{redis}");
        assert!(foreign_reply("ZooKeeper", b"+PONG\r\n").unwrap().contains("not a ZooKeeper server"));
        assert!(foreign_reply("ZooKeeper", &[0x15, 0x03, 0x03, 0, 2, 2, 40]).unwrap().contains("TLS"));
    }
}
