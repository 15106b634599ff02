//! How each backend's requests reach its servers: the one per-backend part of the native
//! driver. The [driver](super::driver) runs the engine's driving contract for every backend; a
//! [`Transport`] performs the requests of one backend and hands over what its servers push.
//!
//! Each backend's transport lives in its folder (`backend/<name>/transport/`): a `Transport`
//! and a `start` that connects and spawns the driver, which its registry spec names
//! (`connect_native`, see [`crate::connect::Spec`]).

// A connect's probe for backends whose client crates retry every failure alike; a build without
// such a backend leaves it unused.
#[allow(dead_code)]
pub(crate) mod probe;

use futures_util::future::BoxFuture;

use crate::engine::{Backend, Done, LockEngine, RequestId};
use crate::time::Instant;

/// A request's reply, with its id, once the transport has it.
pub(crate) type ReplyFuture<B> = BoxFuture<'static, (RequestId, <B as Backend>::Reply)>;

/// Performs one backend's requests and delivers what its servers push.
pub(crate) trait Transport: Send + 'static {
    /// The engine's backend.
    type Backend: Backend<Request: Send, Reply: Send + 'static, Outcome: Send + Into<Done>, Target: Send + Sync>
        + Send
        + 'static;
    /// What the servers push, as the transport receives it (a notification, a replaced
    /// connection); `Infallible` for a backend whose servers push nothing.
    type Push: Send + 'static;

    /// The future that performs `request` and resolves to its id and reply (a transport
    /// failure as the error reply). The driver polls these futures in the order it made them,
    /// so requests on one connection go out in emission order.
    fn perform(&self, request: <Self::Backend as Backend>::Request) -> ReplyFuture<Self::Backend>;

    /// Hands one push to the engine.
    fn push(engine: &mut LockEngine<Self::Backend>, now: Instant, push: Self::Push);
}
