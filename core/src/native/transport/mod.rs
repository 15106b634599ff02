//! How each backend's requests reach its servers: the one per-backend part of the native
//! driver. The [driver](super::driver) runs the engine's driving contract for every backend; a
//! [`Transport`] performs the requests of one backend and hands over what its servers push.
//!
//! - [`redis`]: one Redis server or a Redis Cluster, over self-replacing connections
//!   ([`link`], [`cluster_link`]; `redis` crate values through [`convert`]);
//! - [`redlock`]: one self-replacing connection per Redlock master;
//! - [`zookeeper`]: one ZooKeeper session on the `zookeeper-client` crate;
//! - [`etcd`]: one `etcd-client` channel per client, with one keepalive and one watch stream;
//! - [`sql`]: PostgreSQL (`tokio-postgres`) or MySQL/MariaDB (`sqlx`): one statement connection
//!   per client plus a listening one (PostgreSQL) or up to four wait connections (MySQL).
//!
//! A new backend adds one file here (its `Transport` and a `start` that connects and spawns
//! the driver) and one arm in [`ClientOptions::connect`](crate::connect::ClientOptions::connect).

pub(crate) use crate::backend::etcd::transport as etcd;
pub(crate) use crate::backend::redis::transport as redis;
pub(crate) use crate::backend::redlock::transport as redlock;
pub(crate) use crate::backend::sql::transport as sql;
pub(crate) use crate::backend::zookeeper::transport as zookeeper;

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
