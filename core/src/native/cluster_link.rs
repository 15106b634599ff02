//! A Redis Cluster connection that replaces itself when a node goes silent.
//!
//! The `redis` crate's cluster connection reconnects a node whose socket closes, but a node
//! that stops answering on a socket that stays open (a hung proxy, a frozen host, a half-open
//! TCP connection) only produces timeouts: the crate retries them on the same node connection
//! (`RetryMethod::RetryImmediately`), so every later call on that node's slots times out for
//! ever, and no setting of the crate changes that. A [`ClusterLink`] does for a cluster what
//! [`Link`](super::link::Link) does for one server:
//!
//! - A request that times out (`response_timeout`) drops the whole cluster connection (its node
//!   connections, silent one included, close with it) and starts a new one from the same
//!   `ClusterClient` (seed node, slot discovery, node connections) at once, bounded by
//!   `connect_timeout`; requests in flight on the old one fail with `CONNECTION` (retryable),
//!   later ones wait for the new one. A silent node is thus left after one response timeout.
//! - Each replacement is reported once on the push channel as a `Disconnection`, so the engine
//!   subscribes again and rechecks its waiters (the subscription lived on the old connection).
//! - A failed attempt is followed by the next one with the same backoff as a `Link` (100 ms
//!   doubling up to 2 s), started by the next request that needs a connection.
//! - A broken socket (not a silent one) is left to the crate, which reconnects that node and
//!   resubscribes it itself; replacing everything for it would only add churn while a node is
//!   down.
//!
//! Leases stay safe meanwhile: their validity is local time, so a renewal that cannot get
//! through in time marks the lease lost by validity, whatever the connection does.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind};
use tokio::sync::mpsc;

use super::convert;
use super::link::{backoff, tcp_settings, FIRST_CONNECT_ATTEMPTS};
use super::url::RedisUrl;
use crate::error::{Error, ErrorKind, Result};

type Attempt = Shared<BoxFuture<'static, Result<ClusterConnection>>>;

/// A self-replacing connection to a Redis Cluster. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub(crate) struct ClusterLink {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::cluster::ClusterClient,
    url: RedisUrl,
    connect_timeout: Duration,
    /// Where a replacement's `Disconnection` goes (the crate sends the server's pushes there too).
    pushes: mpsc::UnboundedSender<PushInfo>,
    state: Mutex<State>,
}

struct State {
    /// Bumped by every replacement; a failure replaces only the connection it happened on.
    generation: u64,
    /// The connection of this generation, established or being established.
    current: Attempt,
    /// Consecutive failed attempts (sets the backoff of the next one).
    failures: u32,
}

/// Whether `e` means a node of the connection stayed silent past the response timeout (the
/// crate's own per-request timeout, or its overall one; both are `TimedOut` I/O errors).
fn silent(e: &redis::RedisError) -> bool {
    e.is_timeout()
}

impl ClusterLink {
    /// Connects to the cluster whose seed node is `url` (RESP3, TCP keepalive, `retries` retries
    /// of a redirected or failed command), retrying a failed attempt with backoff, all within
    /// `connect_timeout`: an `AUTHENTICATION` or `INVALID_ARGUMENT` failure ends it at once,
    /// running out of time is a `CONNECTION` error. `pushes` receives the nodes' pushes and a
    /// `Disconnection` for every replacement of the connection.
    pub(crate) async fn connect(
        url: &RedisUrl,
        tls_ca_pem: Option<&[u8]>,
        connect_timeout: Duration,
        response_timeout: Duration,
        pushes: mpsc::UnboundedSender<PushInfo>,
    ) -> Result<ClusterLink> {
        let scrub = |m: &str| url.scrub(m);
        let mut builder = redis::cluster::ClusterClientBuilder::new(vec![url.for_connection()])
            .use_protocol(redis::ProtocolVersion::RESP3)
            .push_sender(pushes.clone())
            .connection_timeout(connect_timeout)
            .response_timeout(response_timeout)
            .tcp_settings(tcp_settings())
            .retries(2);
        if let Some(ca) = tls_ca_pem {
            builder = builder.certs(redis::TlsCertificates { client_tls: None, root_cert: Some(ca.to_vec()) });
        }
        let client = builder.build().map_err(|e| convert::error(&e, scrub))?;
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| Inner {
            client,
            url: url.clone(),
            connect_timeout,
            pushes,
            state: Mutex::new(State { generation: 0, current: attempt(weak.clone(), Duration::ZERO), failures: 0 }),
        });
        let link = ClusterLink { inner };
        link.first_connect().await?;
        Ok(link)
    }

    /// The first connect: attempts with backoff until one succeeds or `connect_timeout` ends.
    async fn first_connect(&self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + self.inner.connect_timeout;
        let mut last: Option<Error> = None;
        for _ in 0..FIRST_CONNECT_ATTEMPTS {
            let (generation, current) = self.current();
            match tokio::time::timeout_at(deadline, current).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) if matches!(e.kind(), ErrorKind::Authentication | ErrorKind::InvalidArgument) => {
                    return Err(e)
                }
                Ok(Err(e)) => {
                    last = Some(e);
                    self.inner.replace(generation, false);
                }
                Err(_) => break,
            }
        }
        let why = match last {
            Some(e) if tokio::time::Instant::now() < deadline => return Err(e),
            Some(e) => format!("; last error: {}", e.message()),
            None => String::new(),
        };
        Err(Error::new(
            ErrorKind::Connection,
            format!("could not connect to the cluster at {} within {:?}{why}", self.inner.url, self.inner.connect_timeout),
        ))
    }

    fn current(&self) -> (u64, Attempt) {
        let st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.generation, st.current.clone())
    }

    /// The established connection, waiting for one being established. A failed attempt found
    /// here starts the next one (after its backoff) and is waited for once.
    async fn connection(&self) -> Result<(u64, ClusterConnection)> {
        let (mut generation, mut current) = self.current();
        if matches!(current.peek(), Some(Err(_))) {
            self.inner.replace(generation, false);
            (generation, current) = self.current();
        }
        match current.await {
            Ok(c) => Ok((generation, c)),
            Err(e) => {
                self.inner.replace(generation, false);
                Err(e)
            }
        }
    }

    /// Sends each command of `pipe` on its own, routed by its first key, in order of sending
    /// (a cluster pipeline must stay in one slot; the engine sends one call per request on a
    /// cluster). Replaces the connection if a node stayed silent for `response_timeout`.
    pub(crate) async fn pipeline(&self, pipe: &redis::Pipeline) -> Result<Vec<redis::Value>> {
        let (generation, conn) = self.connection().await?;
        let sends = pipe.cmd_iter().map(|cmd| {
            let mut c = conn.clone();
            async move { redis::aio::ConnectionLike::req_packed_command(&mut c, cmd).await }
        });
        let r: redis::RedisResult<Vec<redis::Value>> =
            futures_util::future::join_all(sends).await.into_iter().collect();
        self.settle(generation, r)
    }

    /// Subscribes the connection to `channel` (its messages arrive as pushes).
    pub(crate) async fn subscribe(&self, channel: &[u8]) -> Result<()> {
        let (generation, mut conn) = self.connection().await?;
        let r = conn.subscribe(channel).await;
        self.settle(generation, r)
    }

    fn settle<T>(&self, generation: u64, r: redis::RedisResult<T>) -> Result<T> {
        r.map_err(|e| {
            if silent(&e) {
                self.inner.replace(generation, true);
            }
            convert::error(&e, |m| self.inner.url.scrub(m))
        })
    }
}

impl Inner {
    /// Replaces the connection of `generation` (if it is still the current one) by a new
    /// attempt, started at once after its backoff. `announce`: tell the push channel (the
    /// connection was established, so the subscriptions on it are gone).
    fn replace(self: &Arc<Self>, generation: u64, announce: bool) {
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.generation != generation {
                return;
            }
            st.generation += 1;
            st.current = attempt(Arc::downgrade(self), backoff(st.failures));
            tokio::spawn(st.current.clone().map(drop));
        }
        if announce {
            let _ = self.pushes.send(PushInfo { kind: PushKind::Disconnection, data: Vec::new() });
        }
    }
}

/// One connection attempt, after `delay`, bounded by `connect_timeout`; shared by every request
/// waiting for it.
fn attempt(link: Weak<Inner>, delay: Duration) -> Attempt {
    async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let closed = || Error::new(ErrorKind::Closed, "the client is closed");
        let inner = link.upgrade().ok_or_else(closed)?;
        let r = tokio::time::timeout(inner.connect_timeout, inner.client.get_async_connection()).await;
        let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        match r {
            Ok(Ok(c)) => {
                st.failures = 0;
                Ok(c)
            }
            Ok(Err(e)) => {
                st.failures = st.failures.saturating_add(1);
                Err(convert::error(&e, |m| inner.url.scrub(m)))
            }
            Err(_) => {
                st.failures = st.failures.saturating_add(1);
                Err(Error::new(
                    ErrorKind::Connection,
                    format!("could not connect to the cluster at {} within {:?}", inner.url, inner.connect_timeout),
                ))
            }
        }
    }
    .boxed()
    .shared()
}
