//! A Redis Cluster connection that replaces itself when a node goes silent.
//!
//! The `redis` crate's cluster connection reconnects a node whose socket closes, but a node
//! that stops answering on a socket that stays open (a hung proxy, a frozen host, a half-open
//! TCP connection) only produces timeouts: the crate retries them on the same node connection
//! (`RetryMethod::RetryImmediately`), so every later call on that node's slots times out for
//! ever, and no setting of the crate changes that. A [`ClusterLink`] does for a cluster what
//! [`Link`](super::link::Link) does for one server:
//!
//! - A request that times out (`response_timeout`) starts a new cluster connection from the
//!   same `ClusterClient` (seed node, slot discovery, node connections) at once, bounded by
//!   `connect_timeout`. Requests keep using the old connection meanwhile; once the new one is
//!   established it takes every later request, and the old one (its silent node connection
//!   included) closes when the last request on it ends. A silent node is thus left after one
//!   response timeout plus a reconnect.
//! - A replacement that cannot connect (the seed node is the frozen one, say) changes nothing:
//!   the old connection keeps serving the healthy nodes, and the next timeout tries again,
//!   after a backoff like a `Link`'s (100 ms doubling up to 2 s).
//! - Each replacement is reported once on the push channel as a `Disconnection`, so the engine
//!   subscribes again and rechecks its waiters (the subscription lived on the old connection).
//! - A broken socket (not a silent one) is left to the crate, which reconnects that node and
//!   resubscribes it itself; replacing everything for it would only add churn while a node is
//!   down.
//!
//! Leases stay safe meanwhile: their validity is local time, so a renewal that cannot get
//! through in time marks the lease lost by validity, whatever the connection does.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind};
use tokio::sync::mpsc;

use super::convert;
use super::link::{backoff, tcp_settings, FIRST_CONNECT_ATTEMPTS};
use crate::connect::RedisUrl;
use crate::error::{Error, ErrorKind, Result};

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
    /// Bumped by every replacement; a timeout replaces only the connection it happened on.
    generation: u64,
    /// The connection requests use.
    current: ClusterConnection,
    /// Whether a replacement is being established.
    replacing: bool,
    /// Consecutive failed replacements (sets the backoff of the next one).
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
        let current = first_connect(&client, url, connect_timeout).await?;
        Ok(ClusterLink {
            inner: Arc::new(Inner {
                client,
                url: url.clone(),
                connect_timeout,
                pushes,
                state: Mutex::new(State { generation: 0, current, replacing: false, failures: 0 }),
            }),
        })
    }

    fn current(&self) -> (u64, ClusterConnection) {
        let st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.generation, st.current.clone())
    }

    /// Sends each command of `pipe` on its own, routed by its first key, in order of sending
    /// (a cluster pipeline must stay in one slot; the engine sends one call per request on a
    /// cluster). Replaces the connection if a node stayed silent for `response_timeout`.
    pub(crate) async fn pipeline(&self, pipe: &redis::Pipeline) -> Result<Vec<redis::Value>> {
        let (generation, conn) = self.current();
        let sends = pipe.cmd_iter().map(|cmd| {
            let mut c = conn.clone();
            async move { redis::aio::ConnectionLike::req_packed_command(&mut c, cmd).await }
        });
        let r: redis::RedisResult<Vec<redis::Value>> =
            futures_util::future::join_all(sends).await.into_iter().collect();
        self.settle(generation, r)
    }

    /// The address of every master, as the connection routes to them: a `PING` to all masters,
    /// answered per address.
    pub(crate) async fn masters(&self) -> Result<Vec<String>> {
        use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
        let (generation, mut conn) = self.current();
        let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
        let r = conn.route_command(redis::cmd("PING"), routing).await;
        let answered = self.settle(generation, r)?;
        let redis::Value::Map(per_master) = answered else {
            return Err(Error::protocol("the masters' PING was not answered per master"));
        };
        per_master
            .into_iter()
            .map(|(address, _)| match address {
                redis::Value::BulkString(a) => String::from_utf8(a).map_err(|_| Error::protocol("a master's address is not UTF-8")),
                _ => Err(Error::protocol("a master's address is not a string")),
            })
            .collect()
    }

    /// Sends each command of `pipe` to the node at `address` (`host:port`, as [`masters`](Self::masters)
    /// names it), in order.
    pub(crate) async fn on_node(&self, address: &str, pipe: &redis::Pipeline) -> Result<Vec<redis::Value>> {
        use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};
        let (host, port) = address
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h.to_string(), p.parse::<u16>().ok()?)))
            .ok_or_else(|| Error::protocol(format!("{address:?} is not a node address")))?;
        let (generation, conn) = self.current();
        let mut replies = Vec::new();
        for cmd in pipe.cmd_iter() {
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host: host.clone(), port });
            let r = conn.clone().route_command(cmd.clone(), routing).await;
            replies.push(self.settle(generation, r)?);
        }
        Ok(replies)
    }

    /// Subscribes the connection to `channel` (its messages arrive as pushes).
    pub(crate) async fn subscribe(&self, channel: &[u8]) -> Result<()> {
        let (generation, mut conn) = self.current();
        let r = conn.subscribe(channel).await;
        self.settle(generation, r)
    }

    fn settle<T>(&self, generation: u64, r: redis::RedisResult<T>) -> Result<T> {
        r.map_err(|e| {
            if silent(&e) {
                Inner::replace(&self.inner, generation);
            }
            convert::error(&e, |m| self.inner.url.scrub(m))
        })
    }
}

/// The first connect: attempts with backoff until one succeeds or `connect_timeout` ends.
async fn first_connect(
    client: &redis::cluster::ClusterClient,
    url: &RedisUrl,
    connect_timeout: Duration,
) -> Result<ClusterConnection> {
    let deadline = tokio::time::Instant::now() + connect_timeout;
    let mut last: Option<Error> = None;
    for failures in 0..FIRST_CONNECT_ATTEMPTS {
        let attempt = async {
            tokio::time::sleep(backoff(failures)).await;
            client.get_async_connection().await
        };
        match tokio::time::timeout_at(deadline, attempt).await {
            Ok(Ok(c)) => return Ok(c),
            Ok(Err(e)) => {
                let e = convert::connect_error(&e, url).await;
                if matches!(e.kind(), ErrorKind::Authentication | ErrorKind::InvalidArgument | ErrorKind::Protocol) {
                    return Err(e);
                }
                last = Some(e);
            }
            Err(_) => break,
        }
    }
    let why = match last {
        Some(e) if tokio::time::Instant::now() < deadline => return Err(e),
        Some(e) => format!(" (last error: {})", e.message()),
        None => String::new(),
    };
    Err(Error::new(
        ErrorKind::Connection,
        format!("could not connect to the cluster at {url} within {connect_timeout:?}{why}"),
    ))
}

impl Inner {
    /// Starts replacing the connection of `generation`, unless it is no longer the current one
    /// or a replacement is under way. The new connection (after the backoff of earlier failed
    /// replacements, within `connect_timeout`) becomes the current one and is announced on the
    /// push channel; a failed one leaves the current connection in place.
    fn replace(self: &Arc<Self>, generation: u64) {
        let delay = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.generation != generation || st.replacing {
                return;
            }
            st.replacing = true;
            backoff(st.failures)
        };
        let link: Weak<Inner> = Arc::downgrade(self);
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let Some(inner) = link.upgrade() else { return };
            let r = tokio::time::timeout(inner.connect_timeout, inner.client.get_async_connection()).await;
            let old = {
                let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
                st.replacing = false;
                match r {
                    Ok(Ok(conn)) => {
                        st.failures = 0;
                        st.generation += 1;
                        Some(std::mem::replace(&mut st.current, conn))
                    }
                    _ => {
                        st.failures = st.failures.saturating_add(1);
                        None
                    }
                }
            };
            if old.is_some() {
                let _ = inner.pushes.send(PushInfo { kind: PushKind::Disconnection, data: Vec::new() });
            }
        });
    }
}
