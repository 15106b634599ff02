//! The lean transport of URL-connected clients (`lib/wire.js`): the engine's pipelines are
//! encoded as RESP here and the server's reply bytes parsed here, so that JavaScript only moves
//! bytes between one socket and the engine. Going through ioredis instead costs a `Command`
//! object, a reply object graph and a JS→wasm conversion of it per call, which made the
//! uncontended acquire+release CPU-bound on the Node side.
//!
//! One [`Wire`] serves one connection at a time; replies arrive in the order the requests were
//! written, so a FIFO of in-flight requests is all the bookkeeping there is. When the connection
//! goes (closed, timed out, or a reply that does not parse), every request still in flight fails
//! with a retryable `CONNECTION` error — the engine then treats each command as unanswered, as it
//! does for a failed ioredis pipeline — and the next connection starts with an empty FIFO.
//! Nothing here decides anything about locks.

use std::collections::VecDeque;

use lockgate_core::engine::RequestId;
use lockgate_core::redis::Command;
use lockgate_core::redis::reply::Reply;
use lockgate_core::{Error, ErrorKind, Result};

use crate::convert::request_level;

/// Arrays nested deeper than this are refused (lockgate's replies nest at most two levels).
const MAX_DEPTH: usize = 32;
/// The largest bulk string or array length accepted (Redis' own `proto-max-bulk-len` default).
const MAX_LEN: usize = 512 * 1024 * 1024;

/// A request written to the connection whose replies have not all arrived.
struct InFlight {
    id: RequestId,
    /// Replies still expected.
    left: usize,
    replies: Vec<Reply>,
}

/// The RESP codec and the in-flight FIFO of one connection.
#[derive(Default)]
pub struct Wire {
    in_flight: VecDeque<InFlight>,
    /// Received bytes that do not yet make a whole reply.
    partial: Vec<u8>,
    /// Encoding buffer, reused between requests.
    out: Vec<u8>,
}

/// What one call to [`Wire::feed`] delivers: a request's replies (server errors in place,
/// except those that fail the whole request, see [`request_level`]).
pub type Delivery = (RequestId, Result<Vec<Reply>>);

impl Wire {
    /// Starts a batch of encoded requests (see [`Wire::encode`] and [`Wire::take`]).
    pub fn begin(&mut self) {
        self.out.clear();
    }

    /// Appends the RESP encoding of pipeline `id` to the current batch and records it as in
    /// flight. An empty pipeline has nothing to wait for: it is returned at once, as delivered.
    pub fn encode(&mut self, id: RequestId, commands: &[Command]) -> Option<Delivery> {
        if commands.is_empty() {
            return Some((id, Ok(Vec::new())));
        }
        for c in commands {
            self.out.push(b'*');
            push_decimal(&mut self.out, c.0.len());
            self.out.extend_from_slice(b"\r\n");
            for arg in &c.0 {
                self.out.push(b'$');
                push_decimal(&mut self.out, arg.len());
                self.out.extend_from_slice(b"\r\n");
                self.out.extend_from_slice(arg);
                self.out.extend_from_slice(b"\r\n");
            }
        }
        self.in_flight.push_back(InFlight { id, left: commands.len(), replies: Vec::with_capacity(commands.len()) });
        None
    }

    /// The bytes of the current batch (empty if nothing was encoded since [`Wire::begin`]).
    pub fn batch(&self) -> &[u8] {
        &self.out
    }

    /// How many requests wait for replies.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Parses `data` (any slice of the byte stream: partial replies are kept for the next call)
    /// and calls `deliver` for every request whose replies are all in. An `Err` means the stream
    /// cannot be trusted any more (a malformed or unexpected reply): the caller must drop the
    /// connection and [`Wire::fail_all`].
    pub fn feed(&mut self, data: &[u8], mut deliver: impl FnMut(Delivery)) -> Result<()> {
        if self.partial.is_empty() {
            let used = self.parse_all(data, &mut deliver)?;
            self.partial.extend_from_slice(&data[used..]);
        } else {
            self.partial.extend_from_slice(data);
            let buf = std::mem::take(&mut self.partial);
            let used = self.parse_all(&buf, &mut deliver);
            // Keep the allocation for the next partial reply.
            self.partial = buf;
            let used = used?;
            self.partial.drain(..used);
        }
        Ok(())
    }

    /// Parses every whole reply at the start of `buf`; returns how many bytes they took.
    fn parse_all(&mut self, buf: &[u8], deliver: &mut impl FnMut(Delivery)) -> Result<usize> {
        let mut pos = 0;
        while pos < buf.len() {
            let Some((reply, used)) = parse(&buf[pos..], 0)? else {
                break;
            };
            pos += used;
            let Some(head) = self.in_flight.front_mut() else {
                return Err(broken("a reply arrived with no request waiting for it"));
            };
            head.replies.push(reply);
            head.left -= 1;
            if head.left == 0 {
                let done = self.in_flight.pop_front().expect("front exists");
                deliver((done.id, settle(done.replies)));
            }
        }
        Ok(pos)
    }

    /// The connection is gone: every request in flight fails with `error` (whatever of it the
    /// server ran is the engine's to clean up), and unparsed bytes are dropped.
    pub fn fail_all(&mut self, error: &Error, mut deliver: impl FnMut(Delivery)) {
        self.partial.clear();
        while let Some(f) = self.in_flight.pop_front() {
            deliver((f.id, Err(error.clone())));
        }
    }
}

/// A request's replies as the engine takes them: in place, except that refused credentials or
/// an unavailable server fail the whole request (as for the ioredis path, `convert::single_error`).
fn settle(replies: Vec<Reply>) -> Result<Vec<Reply>> {
    for r in &replies {
        if let Reply::Error(message) = r {
            if let Some(kind) = request_level(message) {
                return Err(Error::new(kind, message.clone()));
            }
        }
    }
    Ok(replies)
}

/// The error of a stream that went wrong: retryable, like any lost connection.
fn broken(why: impl std::fmt::Display) -> Error {
    Error::new(ErrorKind::Connection, format!("unusable reply stream from the server: {why}"))
}

fn push_decimal(out: &mut Vec<u8>, mut n: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The line at the start of `buf` (without its CRLF) and the bytes it took with the CRLF, or
/// `None` if its end has not arrived.
fn line(buf: &[u8]) -> Option<(&[u8], usize)> {
    let end = buf.windows(2).position(|w| w == b"\r\n")?;
    Some((&buf[..end], end + 2))
}

fn integer(text: &[u8]) -> Result<i64> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| broken(format!("bad integer {:?}", String::from_utf8_lossy(text))))
}

/// A length header (`$` or `*`): `None` for the RESP2 null (-1).
fn length(text: &[u8]) -> Result<Option<usize>> {
    match integer(text)? {
        -1 => Ok(None),
        n if (0..=MAX_LEN as i64).contains(&n) => Ok(Some(n as usize)),
        n => Err(broken(format!("bad length {n}"))),
    }
}

/// One RESP2 reply at the start of `buf` and the bytes it took, or `None` if it has not fully
/// arrived. (The connection never sends `HELLO 3`, so RESP3 types are refused.)
fn parse(buf: &[u8], depth: usize) -> Result<Option<(Reply, usize)>> {
    let Some(&kind) = buf.first() else {
        return Ok(None);
    };
    let Some((text, head)) = line(&buf[1..]) else {
        return Ok(None);
    };
    let head = head + 1;
    let lossy = |t: &[u8]| String::from_utf8_lossy(t).into_owned();
    Ok(Some(match kind {
        b'+' => (Reply::Status(lossy(text)), head),
        b'-' => (Reply::Error(lossy(text)), head),
        b':' => (Reply::Int(integer(text)?), head),
        b'$' => match length(text)? {
            None => (Reply::Nil, head),
            Some(n) => {
                let end = head + n;
                if buf.len() < end + 2 {
                    return Ok(None);
                }
                if &buf[end..end + 2] != b"\r\n" {
                    return Err(broken("a bulk string does not end with CRLF"));
                }
                (Reply::Data(buf[head..end].to_vec()), end + 2)
            }
        },
        b'*' => match length(text)? {
            None => (Reply::Nil, head),
            Some(n) => {
                if depth >= MAX_DEPTH {
                    return Err(broken("arrays nested too deeply"));
                }
                let mut items = Vec::with_capacity(n.min(64));
                let mut pos = head;
                for _ in 0..n {
                    let Some((item, used)) = parse(&buf[pos..], depth + 1)? else {
                        return Ok(None);
                    };
                    items.push(item);
                    pos += used;
                }
                (Reply::Array(items), pos)
            }
        },
        other => return Err(broken(format!("unknown reply type byte 0x{other:02x}"))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Command {
        Command(args.iter().map(|a| a.as_bytes().to_vec()).collect())
    }

    #[test]
    fn encodes_pipelines_as_resp_arrays() {
        let mut w = Wire::default();
        w.begin();
        assert!(w.encode(RequestId(1), &[cmd(&["GET", "k"]), cmd(&["EVALSHA", "", "0"])]).is_none());
        assert_eq!(w.batch(), b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$7\r\nEVALSHA\r\n$0\r\n\r\n$1\r\n0\r\n");
        assert_eq!(w.in_flight(), 1);
        let empty = w.encode(RequestId(2), &[]).expect("delivered at once");
        assert_eq!(empty.0, RequestId(2));
        assert_eq!(w.in_flight(), 1);
    }

    /// Every split of the stream into two reads delivers the same replies.
    #[test]
    fn partial_reads_deliver_whole_requests_in_order() {
        let stream: &[u8] = b":1\r\n$-1\r\n*3\r\n:0\r\n$2\r\nab\r\n*1\r\n+OK\r\n-NOSCRIPT x\r\n$0\r\n\r\n";
        for split in 0..=stream.len() {
            let mut w = Wire::default();
            w.begin();
            let _ = w.encode(RequestId(1), &[cmd(&["A"]), cmd(&["B"])]);
            let _ = w.encode(RequestId(2), &[cmd(&["C"])]);
            let _ = w.encode(RequestId(3), &[cmd(&["D"]), cmd(&["E"])]);
            let mut got = Vec::new();
            w.feed(&stream[..split], |d| got.push(d)).unwrap();
            w.feed(&stream[split..], |d| got.push(d)).unwrap();
            assert_eq!(w.in_flight(), 0, "split at {split}");
            let got: Vec<_> = got.into_iter().map(|(id, r)| (id.0, r.unwrap())).collect();
            assert_eq!(
                got,
                vec![
                    (1, vec![Reply::Int(1), Reply::Nil]),
                    (
                        2,
                        vec![Reply::Array(vec![
                            Reply::Int(0),
                            Reply::Data(b"ab".to_vec()),
                            Reply::Array(vec![Reply::Status("OK".into())]),
                        ])]
                    ),
                    (3, vec![Reply::Error("NOSCRIPT x".into()), Reply::Data(Vec::new())]),
                ],
                "split at {split}"
            );
        }
    }

    #[test]
    fn byte_by_byte() {
        let stream = b"*2\r\n$5\r\nhello\r\n:-42\r\n";
        let mut w = Wire::default();
        w.begin();
        let _ = w.encode(RequestId(7), &[cmd(&["X"])]);
        let mut got = Vec::new();
        for b in stream.iter() {
            w.feed(std::slice::from_ref(b), |d| got.push(d)).unwrap();
        }
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].1.as_ref().unwrap(),
            &vec![Reply::Array(vec![Reply::Data(b"hello".to_vec()), Reply::Int(-42)])]
        );
    }

    #[test]
    fn refused_credentials_fail_the_whole_request() {
        let mut w = Wire::default();
        w.begin();
        let _ = w.encode(RequestId(1), &[cmd(&["A"]), cmd(&["B"])]);
        let mut got = Vec::new();
        w.feed(b":1\r\n-NOAUTH Authentication required.\r\n", |d| got.push(d)).unwrap();
        let err = got.pop().unwrap().1.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Authentication);
        let _ = w.encode(RequestId(2), &[cmd(&["A"])]);
        w.feed(b"-LOADING Redis is loading\r\n", |d| got.push(d)).unwrap();
        assert_eq!(got.pop().unwrap().1.unwrap_err().kind(), ErrorKind::Connection);
    }

    #[test]
    fn garbage_and_unexpected_replies_break_the_stream() {
        let mut w = Wire::default();
        assert!(w.feed(b":1\r\n", |_| {}).is_err(), "no request waits");
        let mut w = Wire::default();
        w.begin();
        let _ = w.encode(RequestId(1), &[cmd(&["A"])]);
        let err = w.feed(b"%1\r\n", |_| {}).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connection);
        let mut failed = Vec::new();
        w.fail_all(&err, |d| failed.push(d));
        assert_eq!(failed.len(), 1);
        assert_eq!(w.in_flight(), 0);
        for bad in [&b"$3\r\nabcd\r\n"[..], b":x\r\n", b"*-2\r\n", b"$99999999999\r\n"] {
            let mut w = Wire::default();
            w.begin();
            let _ = w.encode(RequestId(1), &[cmd(&["A"])]);
            assert!(w.feed(bad, |_| {}).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn decimal() {
        for n in [0usize, 7, 10, 99, 12345, usize::MAX] {
            let mut v = Vec::new();
            push_decimal(&mut v, n);
            assert_eq!(v, n.to_string().into_bytes());
        }
    }
}
