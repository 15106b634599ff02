//! The lean transport of URL-connected clients (`lib/transport/redis-wire.js`): the engine's
//! pipelines leave as RESP bytes and the server's bytes come back as replies through the core's
//! codec (`lockgate_core::redis::resp`), so JavaScript only moves bytes between one socket and
//! the engine. (Through ioredis, each call costs a `Command` object, a reply object graph and a
//! JS→wasm conversion of it, which made the uncontended acquire+release CPU-bound in Node.)
//!
//! What is left here is the connection's bookkeeping: replies arrive in the order the requests
//! were written, so a FIFO of in-flight requests matches them up. When the connection goes
//! (closed, timed out, or a reply stream the codec refuses), every request still in flight fails
//! with a retryable `CONNECTION` error — the engine then treats each command as unanswered, as it
//! does for a failed ioredis pipeline — and the next connection starts with an empty FIFO.

use std::collections::VecDeque;

use lockgate_core::engine::RequestId;
use lockgate_core::redis::reply::Reply;
use lockgate_core::redis::{resp, Command};
use lockgate_core::{Error, ErrorKind, Result};

use crate::convert::request_level;

/// A request written to the connection whose replies have not all arrived.
struct InFlight {
    id: RequestId,
    /// Replies still expected.
    left: usize,
    replies: Vec<Reply>,
}

/// The in-flight FIFO of one connection, with the core's decoder and an encoding buffer.
#[derive(Default)]
pub struct Wire {
    in_flight: VecDeque<InFlight>,
    decoder: resp::Decoder,
    /// Encoding buffer, reused between requests.
    out: Vec<u8>,
}

/// What one call to [`Wire::feed`] delivers: a request's replies (server errors in place,
/// except those that fail the whole request, see [`request_level`]).
pub type Delivery = (RequestId, Result<Vec<Reply>>);

impl Wire {
    /// Starts a batch of encoded requests (see [`Wire::encode`] and [`Wire::batch`]).
    pub fn begin(&mut self) {
        self.out.clear();
    }

    /// Appends the RESP encoding of pipeline `id` to the current batch and records it as in
    /// flight. An empty pipeline has nothing to wait for: it is returned at once, as delivered.
    pub fn encode(&mut self, id: RequestId, commands: &[Command]) -> Option<Delivery> {
        if commands.is_empty() {
            return Some((id, Ok(Vec::new())));
        }
        resp::encode(commands, &mut self.out);
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

    /// Decodes `data` (any slice of the byte stream: partial replies are kept for the next call)
    /// and calls `deliver` for every request whose replies are all in. An `Err` means the stream
    /// cannot be trusted any more (a malformed or unexpected reply): the caller must drop the
    /// connection and [`Wire::fail_all`].
    pub fn feed(&mut self, data: &[u8], mut deliver: impl FnMut(Delivery)) -> Result<()> {
        let in_flight = &mut self.in_flight;
        self.decoder
            .feed(data, |reply| {
                let Some(head) = in_flight.front_mut() else {
                    return Err(Error::protocol("a reply arrived with no request waiting for it"));
                };
                head.replies.push(reply);
                head.left -= 1;
                if head.left == 0 {
                    let done = in_flight.pop_front().expect("front exists");
                    deliver((done.id, settle(done.replies)));
                }
                Ok(())
            })
            // Retryable, like any lost connection: the request may go again on a new one.
            .map_err(|e| Error::new(ErrorKind::Connection, format!("unusable reply stream from the server: {}", e.message())))
    }

    /// The connection is gone: every request in flight fails with `error` (whatever of it the
    /// server ran is the engine's to clean up), and undecoded bytes are dropped.
    pub fn fail_all(&mut self, error: &Error, mut deliver: impl FnMut(Delivery)) {
        self.decoder.clear();
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
}
