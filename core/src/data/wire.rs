//! [`Wire`]: a data engine's requests and replies as the bytes of one connection that a binding
//! owns (its socket only moves bytes), for a backend whose protocol is cheaper to speak in the
//! core than through a client library in the binding's language. A backend offers one through
//! [`DataBackend::wire`](super::DataBackend::wire); the binding asks [`DynEngine::wire`](super::DynEngine::wire)
//! and so never names the backend.

use crate::engine::RequestId;
use crate::error::Result;

use super::Data;

/// What [`Wire::encode`] did with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Encoded {
    /// Its bytes were appended; its reply comes through [`Wire::feed`].
    Written,
    /// It needs no round trip: this is its reply, at once.
    Answered(RequestId, Data),
    /// It does not travel on this connection (e.g. a subscription): the binding performs it.
    Elsewhere,
}

/// The codec and in-flight bookkeeping of one connection: replies arrive in the order the
/// requests were written.
pub trait Wire {
    /// Appends `request` (in its backend's data form, with its `id`) to `out` when it travels
    /// on the connection, recording it as in flight.
    fn encode(&mut self, request: &Data, out: &mut Vec<u8>) -> Encoded;

    /// Decodes `bytes` (any slice of the stream: a partial reply is kept for the next call) and
    /// calls `deliver` with the reply of every request now answered in full. An `Err` means the
    /// stream cannot be trusted any more: the binding drops the connection and calls
    /// [`Wire::close`].
    fn feed(&mut self, bytes: &[u8], deliver: &mut dyn FnMut(RequestId, Data)) -> Result<()>;

    /// The connection is gone: drops undecoded bytes and returns the requests that were in
    /// flight (each failed by the caller), leaving the wire empty for the next connection.
    fn close(&mut self) -> Vec<RequestId>;

    /// How many requests wait for their reply.
    fn in_flight(&self) -> usize;
}
