//! The engine face every data backend shares: [`DataBackend`] (a backend's requests, replies and
//! notices as plain [`Data`]), [`DynEngine`] (an object-safe [`LockEngine`] that speaks it) and
//! [`Connected`] (such an engine with its transport plan).

use super::value::Data;
use crate::engine::{Backend, Done, Event, LeaseId, LockEngine, OpId, Primitive, RequestId, TelemetryConfig, Wait};
use crate::error::{Error, ErrorKind, Result};
use crate::options::LockOptions;
use crate::time::{Duration, Instant};

/// A client's engine whose wire speaks [`Data`], and what its transport opens.
pub struct Connected {
    /// The engine.
    pub engine: Box<dyn DynEngine>,
    /// What the transport opens, as data (the backend's data module documents the form; its
    /// `transport` names the transport, e.g. the Node binding's `lib/transport/<transport>.js`).
    pub plan: Data,
}

/// An event with its outcome in the backend-neutral [`Done`], for drivers written once for every
/// backend (a data engine's events; the Node binding's typed Redis engine's too).
pub fn neutral<O: Into<Done>>(ev: Event<O>) -> Event<Done> {
    match ev {
        Event::Completed { op, outcome } => Event::Completed { op, outcome: outcome.into() },
        Event::Renewed { lease, valid_until } => Event::Renewed { lease, valid_until },
        Event::AtRisk { lease, valid_until } => Event::AtRisk { lease, valid_until },
        Event::Lost { lease, error } => Event::Lost { lease, error },
        Event::Telemetry(t) => Event::Telemetry(t),
    }
}

/// A backend whose requests, replies and notices have a plain-data form.
pub trait DataBackend: Backend {
    /// A request as data: a map with `id` (the request id, an integer) and whatever the
    /// backend's transports read.
    fn request_data(request: &Self::Request) -> Data;

    /// A transport's reply as the backend's reply; data that makes no sense becomes the
    /// backend's protocol-error reply (never a panic).
    fn reply_from_data(reply: &Data) -> Self::Reply;

    /// The reply for a request whose transport failed before any answer (`error` says why).
    fn reply_from_error(error: Error) -> Self::Reply;

    /// A pushed notice as the backend's notice; `None` for data that is none.
    fn notice_from_data(notice: &Data) -> Option<Self::Notice<'_>>;

    /// What a failure the transport's client library reported means (`server_reply`: it is the
    /// server's own error reply): by default `PROTOCOL` for a server's reply, else `CONNECTION`.
    fn transport_error(message: &str, server_reply: bool) -> Error {
        failure(message, server_reply)
    }
}

/// The default reading of a transport's failure (see [`DataBackend::transport_error`]).
fn failure(message: &str, server_reply: bool) -> Error {
    Error::new(if server_reply { ErrorKind::Protocol } else { ErrorKind::Connection }, message)
}

/// The driving contract of [`LockEngine`] (see there) with backend-neutral types: requests as
/// [`Data`], events as [`Event<Done>`], replies and notices as `Data`.
pub trait DynEngine {
    /// See [`LockEngine::acquire_primitive`].
    fn acquire(&mut self, now: Instant, name: &str, primitive: &Primitive, options: &LockOptions, wait: Wait) -> Result<OpId>;
    /// See [`LockEngine::reacquire`].
    fn reacquire(&mut self, now: Instant, lease: LeaseId) -> OpId;
    /// See [`LockEngine::observe_leader`].
    fn observe_leader(&mut self, now: Instant, name: &str) -> Result<OpId>;
    /// See [`LockEngine::inspect_as`].
    fn inspect_as(&mut self, now: Instant, name: &str, primitive: &Primitive) -> Result<OpId>;
    /// See [`LockEngine::break_lock`].
    fn break_lock(&mut self, now: Instant, name: &str, kind: crate::inspect::Kind, fencing_token: Option<u64>) -> Result<OpId>;
    /// See [`LockEngine::list`].
    fn list(&mut self, now: Instant, prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<OpId>;
    /// See [`LockEngine::adopt`].
    fn adopt(&mut self, now: Instant, identity: &str, options: &LockOptions) -> Result<OpId>;
    /// See [`LockEngine::export`].
    fn export(&self, now: Instant, lease: LeaseId) -> Result<String>;
    /// See [`LockEngine::release`].
    fn release(&mut self, now: Instant, lease: LeaseId) -> OpId;
    /// See [`LockEngine::extend`].
    fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId>;
    /// See [`LockEngine::cancel`].
    fn cancel(&mut self, now: Instant, op: OpId);
    /// See [`LockEngine::enable_telemetry`].
    fn enable_telemetry(&mut self, config: TelemetryConfig);
    /// See [`LockEngine::shutdown`].
    fn shutdown(&mut self, now: Instant);
    /// See [`LockEngine::lease_valid_until`].
    fn lease_valid_until(&self, lease: LeaseId) -> Option<Instant>;
    /// See [`LockEngine::is_held`].
    fn is_held(&self, now: Instant, lease: LeaseId) -> bool;
    /// See [`LockEngine::is_idle`].
    fn is_idle(&self) -> bool;
    /// See [`LockEngine::handle_timeout`].
    fn handle_timeout(&mut self, now: Instant);
    /// See [`LockEngine::poll_timeout`].
    fn poll_timeout(&self) -> Option<Instant>;
    /// See [`LockEngine::handle_disconnect`].
    fn handle_disconnect(&mut self, now: Instant);
    /// The next request, as data (see [`DataBackend::request_data`]).
    fn poll_request(&mut self) -> Option<Data>;
    /// The next event, in the engine's backend-neutral outcome.
    fn poll_event(&mut self) -> Option<Event<Done>>;
    /// The reply to request `id`, as data.
    fn handle_reply(&mut self, now: Instant, id: RequestId, reply: &Data);
    /// Request `id` failed in the transport before any answer.
    fn handle_failure(&mut self, now: Instant, id: RequestId, error: Error);
    /// A notice the server pushed, as data; data that is no notice is ignored.
    fn handle_notice(&mut self, now: Instant, notice: &Data);
    /// Appends to `out` the bytes of the queued requests that travel on the command connection
    /// the binding owns, in order, up to the first that travels elsewhere (a subscription),
    /// which is returned as data (see [`DynEngine::poll_request`]). Without a wire (the
    /// default), every request travels elsewhere.
    fn poll_wire(&mut self, _now: Instant, _out: &mut Vec<u8>) -> Option<Data> {
        self.poll_request()
    }
    /// Bytes the command connection read: every reply now whole goes to the engine. Returns how
    /// many requests still wait; an `Err` (a stream that cannot be trusted, or no wire) failed
    /// them, and the connection must go.
    fn handle_wire(&mut self, _now: Instant, _bytes: &[u8]) -> Result<usize> {
        Err(Error::protocol("this engine has no byte wire"))
    }
    /// The command connection is gone: every request written to it and not answered fails with
    /// `error`, and undecoded bytes are dropped.
    fn wire_closed(&mut self, _now: Instant, _error: Error) {}
    /// See [`DataBackend::transport_error`].
    fn transport_error(&self, message: &str, server_reply: bool) -> Error {
        failure(message, server_reply)
    }
}

impl<B> DynEngine for LockEngine<B>
where
    B: DataBackend,
    B::Outcome: Into<Done>,
{
    fn acquire(&mut self, now: Instant, name: &str, primitive: &Primitive, options: &LockOptions, wait: Wait) -> Result<OpId> {
        self.acquire_primitive(now, name, primitive, options, wait)
    }

    fn reacquire(&mut self, now: Instant, lease: LeaseId) -> OpId {
        LockEngine::reacquire(self, now, lease)
    }

    fn observe_leader(&mut self, now: Instant, name: &str) -> Result<OpId> {
        LockEngine::observe_leader(self, now, name)
    }

    fn inspect_as(&mut self, now: Instant, name: &str, primitive: &Primitive) -> Result<OpId> {
        LockEngine::inspect_as(self, now, name, primitive)
    }

    fn break_lock(&mut self, now: Instant, name: &str, kind: crate::inspect::Kind, fencing_token: Option<u64>) -> Result<OpId> {
        LockEngine::break_lock(self, now, name, kind, fencing_token)
    }

    fn list(&mut self, now: Instant, prefix: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<OpId> {
        LockEngine::list(self, now, prefix, limit, cursor)
    }

    fn adopt(&mut self, now: Instant, identity: &str, options: &LockOptions) -> Result<OpId> {
        LockEngine::adopt(self, now, identity, options)
    }

    fn export(&self, now: Instant, lease: LeaseId) -> Result<String> {
        LockEngine::export(self, now, lease)
    }

    fn release(&mut self, now: Instant, lease: LeaseId) -> OpId {
        LockEngine::release(self, now, lease)
    }

    fn extend(&mut self, now: Instant, lease: LeaseId, duration: Duration) -> Result<OpId> {
        LockEngine::extend(self, now, lease, duration)
    }

    fn cancel(&mut self, now: Instant, op: OpId) {
        LockEngine::cancel(self, now, op)
    }

    fn enable_telemetry(&mut self, config: TelemetryConfig) {
        LockEngine::enable_telemetry(self, config)
    }

    fn shutdown(&mut self, now: Instant) {
        LockEngine::shutdown(self, now)
    }

    fn lease_valid_until(&self, lease: LeaseId) -> Option<Instant> {
        LockEngine::lease_valid_until(self, lease)
    }

    fn is_held(&self, now: Instant, lease: LeaseId) -> bool {
        LockEngine::is_held(self, now, lease)
    }

    fn is_idle(&self) -> bool {
        LockEngine::is_idle(self)
    }

    fn handle_timeout(&mut self, now: Instant) {
        LockEngine::handle_timeout(self, now)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        LockEngine::poll_timeout(self)
    }

    fn handle_disconnect(&mut self, now: Instant) {
        LockEngine::handle_disconnect(self, now)
    }

    fn poll_request(&mut self) -> Option<Data> {
        LockEngine::poll_request(self).map(|r| B::request_data(&r))
    }

    fn poll_event(&mut self) -> Option<Event<Done>> {
        LockEngine::poll_event(self).map(neutral)
    }

    fn handle_reply(&mut self, now: Instant, id: RequestId, reply: &Data) {
        LockEngine::handle_reply(self, now, id, B::reply_from_data(reply))
    }

    fn handle_failure(&mut self, now: Instant, id: RequestId, error: Error) {
        LockEngine::handle_reply(self, now, id, B::reply_from_error(error))
    }

    fn handle_notice(&mut self, now: Instant, notice: &Data) {
        if let Some(n) = B::notice_from_data(notice) {
            LockEngine::handle_notice(self, now, n);
        }
    }

    fn transport_error(&self, message: &str, server_reply: bool) -> Error {
        B::transport_error(message, server_reply)
    }
}
