//! [`WiredEngine`]: the Redis engine with the RESP wire of one command connection that a binding
//! owns (the Node binding's lean socket, `lib/transport/redis-wire.js`): its pipelines leave as
//! bytes and the server's bytes come back as replies, so the binding only moves bytes between
//! one socket and the engine. (Through a client library, each call costs a command object, a
//! reply object graph and a conversion of it, which made the uncontended acquire+release
//! CPU-bound in Node.) Everything else is the data engine's ([`super::data`]): a subscription
//! travels as data, and a transport that uses a client library instead polls data.
//!
//! Replies arrive in the order the requests were written, so a FIFO of in-flight requests
//! matches them up. When the connection goes (closed, timed out, or a reply stream the codec
//! refuses), every request still in flight fails — the engine then treats each command as
//! unanswered, as for a failed pipeline — and the next connection starts with an empty FIFO.

use std::collections::VecDeque;

use crate::data::{Data, DataBackend, DynEngine};
use crate::engine::{Done, Event, LeaseId, OpId, Primitive, RequestId, Wait};
use crate::error::{Error, ErrorKind, Result};
use crate::options::LockOptions;
use crate::time::{Duration, Instant};

use super::reply::request_level;
use super::reply::Reply;
use super::{resp, Command, Engine, RedisBackend, Request, RequestKind};

/// A request written to the connection whose replies have not all arrived.
struct InFlight {
    id: RequestId,
    /// Replies still expected.
    left: usize,
    replies: Vec<Reply>,
}

/// The Redis engine and the wire of its command connection.
pub struct WiredEngine {
    engine: Engine,
    wire: RespWire,
    /// A request `poll_wire` took from the engine after writing others: handed out next.
    stash: Option<Request>,
}

impl WiredEngine {
    /// `engine` with an empty wire.
    pub fn new(engine: Engine) -> WiredEngine {
        WiredEngine { engine, wire: RespWire::default(), stash: None }
    }
}

/// The in-flight FIFO of one connection, with the core's RESP decoder.
#[derive(Default)]
pub struct RespWire {
    in_flight: VecDeque<InFlight>,
    decoder: resp::Decoder,
}

/// What [`RespWire`] delivers: a request's replies (server errors in place, except those that
/// fail the whole request, see [`request_level`]).
pub type Delivery = (RequestId, Result<Vec<Reply>>);

impl RespWire {
    /// Appends the RESP of pipeline `id` to `out` and records it as in flight. An empty
    /// pipeline has nothing to wait for: it is returned at once, as delivered.
    pub fn encode(&mut self, id: RequestId, commands: &[Command], out: &mut Vec<u8>) -> Option<Delivery> {
        if commands.is_empty() {
            return Some((id, Ok(Vec::new())));
        }
        resp::encode(commands, out);
        self.in_flight.push_back(InFlight { id, left: commands.len(), replies: Vec::with_capacity(commands.len()) });
        None
    }

    /// How many requests wait for replies.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Decodes `data` (any slice of the byte stream: partial replies are kept for the next call)
    /// and calls `deliver` for every request whose replies are all in. An `Err` means the stream
    /// cannot be trusted any more (a malformed or unexpected reply): the caller must drop the
    /// connection and [`RespWire::fail_all`].
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
/// an unavailable server fail the whole request (as in the data form, [`super::data`]).
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

impl DynEngine for WiredEngine {
    fn acquire(&mut self, now: Instant, name: &str, primitive: &Primitive, options: &LockOptions, wait: Wait) -> Result<OpId> {
        self.engine.acquire_primitive(now, name, primitive, options, wait)
    }

    fn reacquire(&mut self, now: Instant, lease: LeaseId) -> OpId {
        self.engine.reacquire(now, lease)
    }

    fn observe_leader(&mut self, now: Instant, name: &str) -> Result<OpId> {
        self.engine.observe_leader(now, name)
    }

    fn inspect_as(&mut self, now: Instant, name: &str, primitive: &crate::primitive::Primitive) -> Result<OpId> {
        self.engine.inspect_as(now, name, primitive)
    }

    fn break_lock(&mut self, now: Instant, name: &str, kind: crate::inspect::Kind, fencing_token: Option<u64>) -> Result<OpId> {
        self.engine.break_lock(now, name, kind, fencing_token)
    }

    fn adopt(&mut self, now: Instant, identity: &str, options: &LockOptions) -> Result<OpId> {
        self.engine.adopt(now, identity, options)
    }

    fn export(&self, now: Instant, lease: LeaseId) -> Result<String> {
        self.engine.export(now, lease)
    }

    fn list(&mut self, now: Instant, prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<OpId> {
        self.engine.list(now, prefix, limit, cursor)
    }

    fn release(&mut self, now: Instant, lease: LeaseId) -> OpId {
        self.engine.release(now, lease)
    }

    fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId> {
        self.engine.extend(now, lease, duration)
    }

    fn cancel(&mut self, now: Instant, op: OpId) {
        self.engine.cancel(now, op)
    }

    fn enable_telemetry(&mut self, config: crate::engine::TelemetryConfig) {
        self.engine.enable_telemetry(config)
    }

    fn shutdown(&mut self, now: Instant) {
        self.engine.shutdown(now)
    }

    fn lease_valid_until(&self, lease: LeaseId) -> Option<Instant> {
        self.engine.lease_valid_until(lease)
    }

    fn is_held(&self, now: Instant, lease: LeaseId) -> bool {
        self.engine.is_held(now, lease)
    }

    fn is_idle(&self) -> bool {
        self.engine.is_idle()
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.engine.handle_timeout(now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.engine.poll_timeout()
    }

    fn handle_disconnect(&mut self, now: Instant) {
        self.engine.handle_disconnect(now)
    }

    fn poll_request(&mut self) -> Option<Data> {
        let r = self.stash.take().or_else(|| self.engine.poll_request())?;
        Some(RedisBackend::request_data(&r))
    }

    fn poll_event(&mut self) -> Option<Event<Done>> {
        self.engine.poll_event().map(crate::data::neutral)
    }

    fn handle_reply(&mut self, now: Instant, id: RequestId, reply: &Data) {
        self.engine.handle_reply(now, id, RedisBackend::reply_from_data(reply))
    }

    fn handle_failure(&mut self, now: Instant, id: RequestId, error: Error) {
        self.engine.handle_reply(now, id, Err(error))
    }

    fn handle_notice(&mut self, now: Instant, notice: &Data) {
        if let Some((channel, payload)) = RedisBackend::notice_from_data(notice) {
            self.engine.handle_notification(now, channel, payload);
        }
    }

    fn transport_error(&self, message: &str, server_reply: bool) -> Error {
        RedisBackend::transport_error(message, server_reply)
    }

    fn poll_wire(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<Data> {
        while let Some(r) = self.stash.take().or_else(|| self.engine.poll_request()) {
            match &r.kind {
                RequestKind::Pipeline(commands) => {
                    if let Some((id, replies)) = self.wire.encode(r.id, commands, out) {
                        self.engine.handle_reply(now, id, replies);
                    }
                }
                // A subscription (or a Cluster's listing step) travels as data, alone.
                _ if out.is_empty() => return Some(RedisBackend::request_data(&r)),
                _ => {
                    self.stash = Some(r);
                    break;
                }
            }
        }
        None
    }

    fn handle_wire(&mut self, now: Instant, bytes: &[u8]) -> Result<usize> {
        let engine = &mut self.engine;
        match self.wire.feed(bytes, |(id, r)| engine.handle_reply(now, id, r)) {
            Ok(()) => Ok(self.wire.in_flight()),
            Err(e) => {
                self.wire.fail_all(&e, |(id, r)| engine.handle_reply(now, id, r));
                Err(e)
            }
        }
    }

    fn wire_closed(&mut self, now: Instant, error: Error) {
        let engine = &mut self.engine;
        self.wire.fail_all(&error, |(id, r)| engine.handle_reply(now, id, r));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> Command {
        Command(args.iter().map(|a| a.as_bytes().to_vec()).collect())
    }

    #[test]
    fn encodes_pipelines_as_resp_arrays() {
        let (mut w, mut out) = (RespWire::default(), Vec::new());
        assert!(w.encode(RequestId(1), &[cmd(&["GET", "k"]), cmd(&["EVALSHA", "", "0"])], &mut out).is_none());
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$7\r\nEVALSHA\r\n$0\r\n\r\n$1\r\n0\r\n");
        assert_eq!(w.in_flight(), 1);
        let empty = w.encode(RequestId(2), &[], &mut out).expect("delivered at once");
        assert_eq!(empty.0, RequestId(2));
        assert_eq!(w.in_flight(), 1);
    }

    /// Every split of the stream into two reads delivers the same replies.
    #[test]
    fn partial_reads_deliver_whole_requests_in_order() {
        let stream: &[u8] = b":1\r\n$-1\r\n*3\r\n:0\r\n$2\r\nab\r\n*1\r\n+OK\r\n-NOSCRIPT x\r\n$0\r\n\r\n";
        for split in 0..=stream.len() {
            let (mut w, mut out) = (RespWire::default(), Vec::new());
            let _ = w.encode(RequestId(1), &[cmd(&["A"]), cmd(&["B"])], &mut out);
            let _ = w.encode(RequestId(2), &[cmd(&["C"])], &mut out);
            let _ = w.encode(RequestId(3), &[cmd(&["D"]), cmd(&["E"])], &mut out);
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
        let (mut w, mut out) = (RespWire::default(), Vec::new());
        let _ = w.encode(RequestId(1), &[cmd(&["A"]), cmd(&["B"])], &mut out);
        let mut got = Vec::new();
        w.feed(b":1\r\n-NOAUTH Authentication required.\r\n", |d| got.push(d)).unwrap();
        assert_eq!(got.pop().unwrap().1.unwrap_err().kind(), ErrorKind::Authentication);
        let _ = w.encode(RequestId(2), &[cmd(&["A"])], &mut out);
        w.feed(b"-LOADING Redis is loading\r\n", |d| got.push(d)).unwrap();
        assert_eq!(got.pop().unwrap().1.unwrap_err().kind(), ErrorKind::Connection);
    }

    #[test]
    fn garbage_and_unexpected_replies_break_the_stream() {
        let mut w = RespWire::default();
        assert!(w.feed(b":1\r\n", |_| {}).is_err(), "no request waits");
        let (mut w, mut out) = (RespWire::default(), Vec::new());
        let _ = w.encode(RequestId(1), &[cmd(&["A"])], &mut out);
        let err = w.feed(b"%1\r\n", |_| {}).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Connection);
        let mut failed = Vec::new();
        w.fail_all(&err, |d| failed.push(d));
        assert_eq!((failed.len(), w.in_flight()), (1, 0));
        for bad in [&b"$3\r\nabcd\r\n"[..], b":x\r\n", b"*-2\r\n", b"$99999999999\r\n"] {
            let (mut w, mut out) = (RespWire::default(), Vec::new());
            let _ = w.encode(RequestId(1), &[cmd(&["A"])], &mut out);
            assert!(w.feed(bad, |_| {}).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    /// Pipelines leave as bytes, a subscription as data (the waiter's first, confirmed before
    /// its acquire is written); a lost connection fails what was in flight, which the engine sends again (after its backoff).
    #[test]
    fn the_engine_writes_pipelines_and_hands_out_subscriptions() {
        let config = super::super::EngineConfig::default();
        let mut e = WiredEngine::new(Engine::new(config, Box::new(crate::random::OsRandom)).unwrap());
        let now = Instant::from_millis_f64(0.0);
        e.acquire(now, "a", &Primitive::Mutex, &LockOptions::default(), Wait::Forever).unwrap();
        let (mut out, mut subscriptions) = (Vec::new(), Vec::new());
        for _ in 0..3 {
            let before = out.len();
            if let Some(d) = e.poll_wire(now, &mut out) {
                assert_eq!(out.len(), before, "data comes alone");
                subscriptions.push(d);
            }
        }
        assert_eq!(subscriptions.len(), 1);
        assert!(subscriptions[0].get("subscribe").is_some(), "{subscriptions:?}");
        let id = RequestId(subscriptions[0].get("id").and_then(Data::as_int).unwrap() as u64);
        e.handle_reply(now, id, &Data::List(Vec::new()));
        assert_eq!(e.poll_wire(now, &mut out), None);
        assert!(out.windows(7).any(|w| w == b"EVALSHA"), "{}", String::from_utf8_lossy(&out));
        assert_eq!(e.wire.in_flight(), 1);
        e.wire_closed(now, Error::new(ErrorKind::Connection, "gone"));
        assert_eq!(e.wire.in_flight(), 0);
        let (mut again, retry) = (Vec::new(), e.poll_timeout().expect("a retry is due"));
        e.handle_timeout(retry);
        assert_eq!(e.poll_wire(retry, &mut again), None);
        assert!(again.windows(7).any(|w| w == b"EVALSHA") && e.wire.in_flight() == 1);
    }
}
