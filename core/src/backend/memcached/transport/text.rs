//! memcached's text protocol for the backend's four commands: the bytes of a command and the
//! parse of its answer from a read buffer (incremental: `None` until the answer is whole).

use super::super::request::{McAnswer, McCommand};
use crate::error::{Error, ErrorKind, Result};

/// Longest answer line accepted (a `VALUE` line of a 250-byte key and its numbers).
const MAX_LINE: usize = 1024;
/// Longest value accepted (lockgate's values are owner tokens; another client's value in a
/// lock's item may be longer, and is read and found not to be ours).
const MAX_VALUE: usize = 1 << 20;

/// What kind of answer a command gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// One status line (a store).
    Status,
    /// `VALUE ... END` or `END` (a `gets`).
    Value,
    /// `STAT ...` lines up to `END` (a `stats`): only `uptime` is kept.
    Stats,
    /// `VERSION ...` (the connect's hello), answered as `Stored`: the hello only learns that a
    /// memcached answered.
    Version,
}

/// The bytes of `command` and the kind of answer it gets.
pub(crate) fn encode(command: &McCommand, out: &mut Vec<u8>) -> Expect {
    match command {
        McCommand::Add { key, value, exptime } => {
            out.extend_from_slice(format!("add {key} 0 {exptime} {}\r\n{value}\r\n", value.len()).as_bytes());
            Expect::Status
        }
        McCommand::Gets { key } => {
            out.extend_from_slice(format!("gets {key}\r\n").as_bytes());
            Expect::Value
        }
        McCommand::Cas { key, value, exptime, cas } => {
            out.extend_from_slice(format!("cas {key} 0 {exptime} {} {cas}\r\n{value}\r\n", value.len()).as_bytes());
            Expect::Status
        }
        McCommand::Stats => {
            out.extend_from_slice(b"stats\r\n");
            Expect::Stats
        }
    }
}

/// A whole `stats` answer at the start of `buf` (its first line already read as `first`,
/// ending at `next`): the uptime and the bytes it took; `None` while it is incomplete.
fn parse_stats<'a>(buf: &'a [u8], mut first: &'a [u8], mut next: usize) -> Result<Option<(Result<McAnswer>, usize)>> {
    let mut uptime = None;
    loop {
        if first == b"END" {
            return match uptime {
                Some(u) => Ok(Some((Ok(McAnswer::Uptime(u)), next))),
                None => Err(Error::protocol("a stats answer without uptime")),
            };
        }
        if !first.starts_with(b"STAT ") {
            return Err(Error::protocol(format!("not a stats line: {:?}", String::from_utf8_lossy(&first[..first.len().min(80)]))));
        }
        if let Some(v) = first.strip_prefix(b"STAT uptime ") {
            let v = std::str::from_utf8(v).ok().and_then(|v| v.trim().parse::<u64>().ok());
            uptime = Some(v.ok_or_else(|| Error::protocol("a stats uptime that is not a number"))?);
        }
        match line(buf, next)? {
            Some((l, n)) => (first, next) = (l, n),
            None => return Ok(None),
        }
    }
}

/// One line of `buf` from `at` (without its `\r\n`) and where the next starts.
fn line(buf: &[u8], at: usize) -> Result<Option<(&[u8], usize)>> {
    let rest = &buf[at..];
    match rest.windows(2).position(|w| w == b"\r\n") {
        Some(i) => Ok(Some((&rest[..i], at + i + 2))),
        None if rest.len() > MAX_LINE => Err(Error::protocol("memcached sent a line longer than any answer")),
        None => Ok(None),
    }
}

/// A server's error line, as the error it means.
fn error_line(l: &[u8]) -> Option<Error> {
    let text = String::from_utf8_lossy(l);
    if let Some(why) = text.strip_prefix("SERVER_ERROR") {
        // Out of memory, busy: the server's state, not the request's fault.
        return Some(Error::new(ErrorKind::Connection, format!("memcached answered SERVER_ERROR{why}")));
    }
    if text == "ERROR" || text.starts_with("CLIENT_ERROR") {
        return Some(Error::protocol(format!("memcached answered {text}")));
    }
    None
}

/// The first whole answer in `buf` to a command expecting `expect`: the answer and the bytes
/// it took; `None` while it is incomplete. A server's error line is its `Err` answer
/// (`Ok(Some((Err, n)))`); bytes that are no answer at all are the outer `Err`.
pub(crate) fn parse(buf: &[u8], expect: Expect) -> Result<Option<(Result<McAnswer>, usize)>> {
    let Some((first, next)) = line(buf, 0)? else {
        return Ok(None);
    };
    if let Some(e) = error_line(first) {
        return Ok(Some((Err(e), next)));
    }
    let answer = match (expect, first) {
        (Expect::Status, b"STORED") => McAnswer::Stored,
        (Expect::Status, b"NOT_STORED") => McAnswer::NotStored,
        (Expect::Status, b"EXISTS") => McAnswer::Exists,
        (Expect::Status, b"NOT_FOUND") => McAnswer::NotFound,
        (Expect::Value, b"END") => McAnswer::Miss,
        (Expect::Version, l) if l.starts_with(b"VERSION ") => McAnswer::Stored,
        (Expect::Stats, l) => return parse_stats(buf, l, next),
        (Expect::Value, l) if l.starts_with(b"VALUE ") => {
            let text = std::str::from_utf8(l).map_err(|_| Error::protocol("a VALUE line that is not text"))?;
            let parts: Vec<&str> = text.split(' ').collect();
            let (Some(len), Some(cas)) = (parts.get(3).and_then(|n| n.parse::<usize>().ok()), parts.get(4).and_then(|c| c.parse::<u64>().ok())) else {
                return Err(Error::protocol(format!("a VALUE line without length and cas unique: {text:?}")));
            };
            if len > MAX_VALUE {
                return Err(Error::protocol("a lock's item holds a value larger than 1 MiB"));
            }
            // The value, its \r\n, then END\r\n.
            let end = next + len + 2;
            if buf.len() < end + 5 {
                return Ok(None);
            }
            if &buf[next + len..end] != b"\r\n" || &buf[end..end + 5] != b"END\r\n" {
                return Err(Error::protocol("a VALUE not followed by END"));
            }
            return Ok(Some((Ok(McAnswer::Value { value: buf[next..next + len].to_vec(), cas }), end + 5)));
        }
        (_, other) => {
            return Err(Error::protocol(format!(
                "not a memcached answer: {:?}",
                String::from_utf8_lossy(&other[..other.len().min(80)])
            )))
        }
    };
    Ok(Some((Ok(answer), next)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_written_as_the_text_protocol() {
        let mut out = Vec::new();
        assert_eq!(encode(&McCommand::Add { key: "k".into(), value: "tok".into(), exptime: 3 }, &mut out), Expect::Status);
        assert_eq!(encode(&McCommand::Gets { key: "k".into() }, &mut out), Expect::Value);
        encode(&McCommand::Cas { key: "k".into(), value: "tok".into(), exptime: -1, cas: 9 }, &mut out);
        assert_eq!(out, b"add k 0 3 3\r\ntok\r\ngets k\r\ncas k 0 -1 3 9\r\ntok\r\n");
    }

    #[test]
    fn answers_are_parsed_whole_or_not_at_all() {
        assert_eq!(parse(b"STOR", Expect::Status).unwrap(), None);
        assert_eq!(parse(b"STORED\r\nEND\r\n", Expect::Status).unwrap(), Some((Ok(McAnswer::Stored), 8)));
        assert_eq!(parse(b"END\r\n", Expect::Value).unwrap(), Some((Ok(McAnswer::Miss), 5)));
        let v = b"VALUE k 0 3 77\r\ntok\r\nEND\r\n";
        for cut in 0..v.len() {
            assert_eq!(parse(&v[..cut], Expect::Value).unwrap(), None, "{cut}");
        }
        assert_eq!(parse(v, Expect::Value).unwrap(), Some((Ok(McAnswer::Value { value: b"tok".to_vec(), cas: 77 }), v.len())));
        let (e, n) = parse(b"SERVER_ERROR out of memory storing object\r\n", Expect::Status).unwrap().unwrap();
        assert_eq!((e.unwrap_err().kind(), n), (ErrorKind::Connection, 43));
        assert_eq!(parse(b"CLIENT_ERROR bad\r\n", Expect::Value).unwrap().unwrap().0.unwrap_err().kind(), ErrorKind::Protocol);
        assert!(parse(b"-ERR unknown command\r\n", Expect::Status).is_err());
        assert!(parse(b"VALUE k 0 3 1\r\ntokXXEND\r\n", Expect::Value).is_err());
        assert!(parse(&[b'x'; 2000], Expect::Status).is_err());
        assert_eq!(parse(b"VERSION 1.6.18\r\n", Expect::Version).unwrap(), Some((Ok(McAnswer::Stored), 16)));
        let stats = b"STAT pid 7\r\nSTAT uptime 42\r\nSTAT time 1\r\nEND\r\n";
        for cut in 0..stats.len() {
            assert_eq!(parse(&stats[..cut], Expect::Stats).unwrap(), None, "{cut}");
        }
        assert_eq!(parse(stats, Expect::Stats).unwrap(), Some((Ok(McAnswer::Uptime(42)), stats.len())));
        assert!(parse(b"STAT pid 7\r\nEND\r\n", Expect::Stats).is_err());
    }
}
