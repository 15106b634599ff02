//! [`RespWire`]: the Redis engine's pipelines as the RESP bytes of one command connection that a
//! binding owns (the Node binding's lean socket, `lib/transport/redis-wire.js`), and the server's
//! bytes back as the replies of [`super::data`], so the binding's side only moves bytes between
//! one socket and the engine. (Through a client library, each call costs a command object, a
//! reply object graph and a conversion of it, which made the uncontended acquire+release
//! CPU-bound in Node.)
//!
//! Replies arrive in the order the requests were written, so a FIFO of in-flight requests
//! matches them up. When the connection goes (closed, timed out, or a reply stream the codec
//! refuses), every request still in flight fails — the engine then treats each command as
//! unanswered — and the next connection starts with an empty FIFO.

use std::collections::VecDeque;

use crate::data::{Data, Encoded, Wire};
use crate::engine::RequestId;
use crate::error::{Error, ErrorKind, Result};

use super::reply::Reply;
use super::resp;

/// A request written to the connection whose replies have not all arrived.
struct InFlight {
    id: RequestId,
    /// Replies still expected.
    left: usize,
    replies: Vec<Data>,
}

/// The in-flight FIFO of one connection, with the core's RESP decoder.
#[derive(Default)]
pub struct RespWire {
    in_flight: VecDeque<InFlight>,
    decoder: resp::Decoder,
}

impl Wire for RespWire {
    fn encode(&mut self, request: &Data, out: &mut Vec<u8>) -> Encoded {
        let (Some(id), Some(commands)) = (request.get("id").and_then(Data::as_int), request.get("commands")) else {
            return Encoded::Elsewhere;
        };
        let id = RequestId(u64::try_from(id).unwrap_or(0));
        let commands = commands.as_list().unwrap_or_default();
        if commands.is_empty() {
            // Nothing to wait for.
            return Encoded::Answered(id, Data::List(Vec::new()));
        }
        for c in commands {
            resp::encode_command(c.as_list().unwrap_or_default().iter().filter_map(Data::as_bytes), out);
        }
        self.in_flight.push_back(InFlight { id, left: commands.len(), replies: Vec::with_capacity(commands.len()) });
        Encoded::Written
    }

    fn feed(&mut self, bytes: &[u8], deliver: &mut dyn FnMut(RequestId, Data)) -> Result<()> {
        let in_flight = &mut self.in_flight;
        self.decoder
            .feed(bytes, |reply| {
                let Some(head) = in_flight.front_mut() else {
                    return Err(Error::protocol("a reply arrived with no request waiting for it"));
                };
                head.replies.push(data(reply));
                head.left -= 1;
                if head.left == 0 {
                    let done = in_flight.pop_front().expect("front exists");
                    deliver(done.id, Data::List(done.replies));
                }
                Ok(())
            })
            // Retryable, like any lost connection: the request may go again on a new one.
            .map_err(|e| Error::new(ErrorKind::Connection, format!("unusable reply stream from the server: {}", e.message())))
    }

    fn close(&mut self) -> Vec<RequestId> {
        self.decoder.clear();
        self.in_flight.drain(..).map(|f| f.id).collect()
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }
}

/// A decoded reply in the data form of [`super::data`].
fn data(reply: Reply) -> Data {
    match reply {
        Reply::Nil => Data::Null,
        Reply::Int(n) => Data::Int(n),
        Reply::Data(b) => match String::from_utf8(b) {
            Ok(s) => Data::Str(s),
            Err(e) => Data::Bytes(e.into_bytes()),
        },
        Reply::Status(s) => Data::Str(s),
        Reply::Array(items) => Data::List(items.into_iter().map(data).collect()),
        Reply::Error(message) => Data::map([("error", message.into())]),
        Reply::Other(what) => Data::map([("other", what.into())]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::data::reply_from_data;

    fn request(id: u64, commands: &[&[&str]]) -> Data {
        let command = |c: &&[&str]| Data::List(c.iter().map(|a| Data::from(*a)).collect());
        Data::map([("id", id.into()), ("commands", Data::List(commands.iter().map(command).collect()))])
    }

    #[test]
    fn encodes_pipelines_as_resp_arrays() {
        let (mut w, mut out) = (RespWire::default(), Vec::new());
        assert_eq!(w.encode(&request(1, &[&["GET", "k"], &["EVALSHA", "", "0"]]), &mut out), Encoded::Written);
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$7\r\nEVALSHA\r\n$0\r\n\r\n$1\r\n0\r\n");
        assert_eq!(w.in_flight(), 1);
        assert_eq!(w.encode(&request(2, &[]), &mut out), Encoded::Answered(RequestId(2), Data::List(Vec::new())));
        let subscribe = Data::map([("id", 3i64.into()), ("subscribe", "ch".into())]);
        assert_eq!(w.encode(&subscribe, &mut out), Encoded::Elsewhere);
        assert_eq!(w.in_flight(), 1);
    }

    /// Every split of the stream into two reads delivers the same replies.
    #[test]
    fn partial_reads_deliver_whole_requests_in_order() {
        let stream: &[u8] = b":1\r\n$-1\r\n*3\r\n:0\r\n$2\r\nab\r\n*1\r\n+OK\r\n-NOSCRIPT x\r\n$0\r\n\r\n";
        for split in 0..=stream.len() {
            let (mut w, mut out) = (RespWire::default(), Vec::new());
            w.encode(&request(1, &[&["A"], &["B"]]), &mut out);
            w.encode(&request(2, &[&["C"]]), &mut out);
            w.encode(&request(3, &[&["D"], &["E"]]), &mut out);
            let mut got = Vec::new();
            w.feed(&stream[..split], &mut |id, d| got.push((id.0, reply_from_data(&d).unwrap()))).unwrap();
            w.feed(&stream[split..], &mut |id, d| got.push((id.0, reply_from_data(&d).unwrap()))).unwrap();
            assert_eq!(w.in_flight(), 0, "split at {split}");
            assert_eq!(
                got,
                vec![
                    (1, vec![Reply::Int(1), Reply::Nil]),
                    (
                        2,
                        vec![Reply::Array(vec![
                            Reply::Int(0),
                            Reply::Data(b"ab".to_vec()),
                            Reply::Array(vec![Reply::Data(b"OK".to_vec())]),
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
        let (mut w, mut out) = (RespWire::default(), Vec::new());
        w.encode(&request(1, &[&["A"], &["B"]]), &mut out);
        let mut got = Vec::new();
        w.feed(b":1\r\n-NOAUTH Authentication required.\r\n", &mut |_, d| got.push(reply_from_data(&d))).unwrap();
        assert_eq!(got.pop().unwrap().unwrap_err().kind(), ErrorKind::Authentication);
        w.encode(&request(2, &[&["A"]]), &mut out);
        w.feed(b"-LOADING Redis is loading\r\n", &mut |_, d| got.push(reply_from_data(&d))).unwrap();
        assert_eq!(got.pop().unwrap().unwrap_err().kind(), ErrorKind::Connection);
    }

    #[test]
    fn garbage_and_unexpected_replies_break_the_stream() {
        let mut w = RespWire::default();
        assert!(w.feed(b":1\r\n", &mut |_, _| {}).is_err(), "no request waits");
        let (mut w, mut out) = (RespWire::default(), Vec::new());
        w.encode(&request(1, &[&["A"]]), &mut out);
        let err = w.feed(b"%1\r\n", &mut |_, _| {}).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connection);
        assert_eq!(w.close(), vec![RequestId(1)]);
        assert_eq!(w.in_flight(), 0);
        for bad in [&b"$3\r\nabcd\r\n"[..], b":x\r\n", b"*-2\r\n", b"$99999999999\r\n"] {
            let (mut w, mut out) = (RespWire::default(), Vec::new());
            w.encode(&request(1, &[&["A"]]), &mut out);
            assert!(w.feed(bad, &mut |_, _| {}).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
