//! A connection to one Redis server that replaces itself when it breaks or goes silent.
//!
//! `redis::aio::ConnectionManager` reconnects when the socket reports an error, but not when
//! the server stops answering on a socket that stays open (a hung proxy, a frozen host, a
//! half-open TCP connection after a failover): every later call then times out for ever.
//! A [`Link`] treats a response timeout like a broken socket:
//!
//! - Any request that times out (`response_timeout`) or finds the connection broken drops that
//!   connection and starts a new one at once; requests in flight on the old one fail with
//!   `CONNECTION` (retryable), later ones wait for the new connection. A connection that goes
//!   silent is replaced after one response timeout, as the Node driver does.
//! - Each replacement is reported once on the push channel as a `Disconnection`, so the engine
//!   subscribes again and rechecks its waiters (the notifications shared the old connection).
//! - A failed attempt is followed by the next one with exponential backoff (100 ms doubling up
//!   to 2 s), started by the next request that needs a connection; that request waits for it.
//!   An `AUTHENTICATION` failure on a reconnect reaches the requests as such.
//! - Sockets use TCP keepalive (probes after 10 s idle), so a peer that vanished is noticed
//!   even on an idle connection.
//! - [`Link::connect`] bounds the whole first connect (every attempt, DNS, TLS, AUTH) by
//!   `connect_timeout`.
//!
//! Leases stay safe meanwhile: their validity is local time, so a renewal that cannot get
//! through in time marks the lease lost by validity, whatever the connection does.

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures_util::future::{BoxFuture, FutureExt, Shared};
use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind};
use tokio::sync::mpsc;

use super::convert;
use crate::connect::RedisUrl;
use crate::error::{Error, ErrorKind, Result};

/// The most attempts [`Link::connect`] makes before giving up (within `connect_timeout`).
pub(crate) const FIRST_CONNECT_ATTEMPTS: u32 = 3;
/// Pause before the second attempt after a failure; doubles per failure up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// Longest pause between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// TCP keepalive for every connection lockgate opens: the kernel probes an idle connection
/// after 10 s and gives up after 3 unanswered probes 5 s apart.
pub(crate) fn tcp_settings() -> redis::io::tcp::TcpSettings {
    use redis::io::tcp::socket2::TcpKeepalive;
    let keepalive = TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5));
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "fuchsia"))]
    let keepalive = keepalive.with_retries(3);
    redis::io::tcp::TcpSettings::default().set_nodelay(true).set_keepalive(keepalive)
}

type Attempt = Shared<BoxFuture<'static, Result<MultiplexedConnection>>>;

/// A self-replacing connection to one server. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub(crate) struct Link {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    url: RedisUrl,
    connect_timeout: Duration,
    response_timeout: Duration,
    /// Where server pushes (notifications) and the `Disconnection` of a replacement go.
    pushes: Option<mpsc::UnboundedSender<PushInfo>>,
    state: Mutex<State>,
}

struct State {
    /// Bumped by every replacement; a failure replaces only the connection it happened on.
    generation: u64,
    /// The connection of this generation, established or being established.
    current: Attempt,
    /// Consecutive failed attempts (sets the backoff of the next one).
    failures: u32,
    /// Whether a connection was ever established: the address spoke Redis.
    ever_connected: bool,
}

/// Whether `e` means the connection itself is unusable (broken, or silent past the timeout).
fn breaks_connection(e: &redis::RedisError) -> bool {
    e.is_timeout() || e.is_connection_dropped() || e.is_io_error() || e.is_unrecoverable_error()
}

/// The pause before an attempt that follows `failures` consecutive failed ones.
pub(crate) fn backoff(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => MIN_BACKOFF.saturating_mul(1 << (n - 1).min(5)).min(MAX_BACKOFF),
    }
}

impl Link {
    /// Connects to `url` (TCP keepalive on), retrying a failed attempt with backoff, all
    /// within `connect_timeout`: an `AUTHENTICATION` or `INVALID_ARGUMENT` failure ends it at
    /// once, running out of time is a `CONNECTION` error. `pushes` receives the server's pushes
    /// (RESP3) and a `Disconnection` for every replacement of the connection.
    pub(crate) async fn connect(
        url: &RedisUrl,
        tls_ca_pem: Option<&[u8]>,
        connect_timeout: Duration,
        response_timeout: Duration,
        pushes: Option<mpsc::UnboundedSender<PushInfo>>,
    ) -> Result<Link> {
        let link = Link::new(url, tls_ca_pem, connect_timeout, response_timeout, pushes)?;
        link.first_connect().await?;
        Ok(link)
    }

    /// A link that has not connected yet; its first request (or [`kick`](Self::kick)) connects.
    pub(crate) fn new(
        url: &RedisUrl,
        tls_ca_pem: Option<&[u8]>,
        connect_timeout: Duration,
        response_timeout: Duration,
        pushes: Option<mpsc::UnboundedSender<PushInfo>>,
    ) -> Result<Link> {
        let scrub = |m: &str| url.scrub(m);
        let info = redis::IntoConnectionInfo::into_connection_info(url.for_connection())
            .map_err(|e| convert::error(&e, scrub))?
            .set_tcp_settings(tcp_settings());
        let client = match tls_ca_pem {
            Some(ca) => redis::Client::build_with_tls(
                info,
                redis::TlsCertificates { client_tls: None, root_cert: Some(ca.to_vec()) },
            ),
            None => redis::Client::open(info),
        }
        .map_err(|e| convert::error(&e, scrub))?;
        let inner = Arc::new_cyclic(|weak: &Weak<Inner>| Inner {
            client,
            url: url.clone(),
            connect_timeout,
            response_timeout,
            pushes,
            state: Mutex::new(State { generation: 0, current: attempt(weak.clone(), 0, Duration::ZERO), failures: 0, ever_connected: false }),
        });
        Ok(Link { inner })
    }

    /// Connects a link made by [`new`](Self::new), as [`connect`](Self::connect) does.
    pub(crate) async fn first_connect(&self) -> Result<()> {
        let deadline = tokio::time::Instant::now() + self.inner.connect_timeout;
        let mut last: Option<Error> = None;
        for _ in 0..FIRST_CONNECT_ATTEMPTS {
            let (generation, current) = self.current();
            match tokio::time::timeout_at(deadline, current).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(e)) if matches!(e.kind(), ErrorKind::Authentication | ErrorKind::InvalidArgument | ErrorKind::Protocol) => {
                    return Err(e)
                }
                Ok(Err(e)) => {
                    last = Some(e);
                    self.inner.replace(generation, false);
                }
                Err(_) => break,
            }
        }
        Err(match last {
            Some(e) if tokio::time::Instant::now() < deadline => e,
            // Every attempt's error already names the server and what it answered.
            Some(e) => Error::new(ErrorKind::Connection, format!("{} (gave up after {:?})", e.message(), self.inner.connect_timeout)),
            None => crate::connect::failure::connect_failed(
                ErrorKind::Connection,
                &self.inner.url,
                &format!("no answer within {:?}", self.inner.connect_timeout),
            ),
        })
    }

    fn current(&self) -> (u64, Attempt) {
        let st = self.inner.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.generation, st.current.clone())
    }

    /// The established connection, waiting for one being established. A failed attempt found
    /// here starts the next one (after its backoff) and is waited for once.
    async fn connection(&self) -> Result<(u64, MultiplexedConnection)> {
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

    /// Whether a connection is established now (for callers that must not wait for one).
    pub(crate) fn is_connected(&self) -> bool {
        matches!(self.current().1.peek(), Some(Ok(_)))
    }

    /// Starts connecting if no connection is established or being established.
    pub(crate) fn kick(&self) {
        let (generation, current) = self.current();
        match current.peek() {
            Some(Err(_)) => self.inner.replace(generation, false),
            Some(Ok(_)) => {}
            None => {
                tokio::spawn(current.map(drop));
            }
        }
    }

    /// Sends `count` commands as one pipeline; replaces the connection if it broke or stayed
    /// silent for `response_timeout`.
    pub(crate) async fn pipeline(&self, pipe: &redis::Pipeline, count: usize) -> Result<Vec<redis::Value>> {
        let (generation, mut conn) = self.connection().await?;
        let r = conn.send_packed_commands(pipe, 0, count).await;
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
            if breaks_connection(&e) {
                self.inner.replace(generation, true);
            }
            convert::error(&e, |m| self.inner.url.scrub(m))
        })
    }
}

impl Inner {
    /// Replaces the connection of `generation` (if it is still the current one) by a new
    /// attempt, started at once after its backoff. `announce`: tell the push channel (the
    /// connection was established, so subscriptions on it are gone).
    fn replace(self: &Arc<Self>, generation: u64, announce: bool) {
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if st.generation != generation {
                return;
            }
            st.generation += 1;
            st.current = attempt(Arc::downgrade(self), st.generation, backoff(st.failures));
            tokio::spawn(st.current.clone().map(drop));
        }
        if announce {
            if let Some(p) = &self.pushes {
                let _ = p.send(PushInfo { kind: PushKind::Disconnection, data: Vec::new() });
            }
        }
    }

    /// The connection settings of one attempt of `generation`: its pushes go to the link's
    /// channel, except the crate's own `Disconnection`, which replaces the connection instead
    /// (and is announced once by [`replace`](Self::replace)).
    fn connection_config(self: &Arc<Self>, generation: u64) -> redis::AsyncConnectionConfig {
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_response_timeout(Some(self.response_timeout));
        let Some(pushes) = self.pushes.clone() else { return config };
        let link = Arc::downgrade(self);
        config.set_push_sender(move |info: PushInfo| -> std::result::Result<(), ()> {
            if info.kind == PushKind::Disconnection {
                if let Some(inner) = link.upgrade() {
                    inner.replace(generation, true);
                }
                return Ok(());
            }
            pushes.send(info).map_err(drop)
        })
    }
}

/// One connection attempt for `generation`, after `delay`; shared by every request waiting.
fn attempt(link: Weak<Inner>, generation: u64, delay: Duration) -> Attempt {
    async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let closed = || Error::new(ErrorKind::Closed, "the client is closed");
        let inner = link.upgrade().ok_or_else(closed)?;
        let config = inner.connection_config(generation);
        let r = inner.client.get_multiplexed_async_connection_with_config(&config).await;
        let r = match r {
            Ok(c) => Ok(c),
            Err(e) => Err(convert::connect_error(&e, &inner.url).await),
        };
        let mut st = inner.state.lock().unwrap_or_else(|e| e.into_inner());
        match r {
            Ok(c) => {
                st.failures = 0;
                st.ever_connected = true;
                Ok(c)
            }
            // An address that spoke Redis before and now closes without a reply is a server
            // gone behind a TCP proxy or load balancer (HAProxy, Envoy, stunnel), not a server
            // of another kind: an outage (retryable), so waits end with CONNECTION.
            Err(e) if st.ever_connected && e.kind() == ErrorKind::Protocol => {
                st.failures = st.failures.saturating_add(1);
                Err(Error::new(ErrorKind::Connection, format!("{} (it answered as Redis before: the server behind it is taken as unreachable)", e.message())))
            }
            Err(e) => {
                st.failures = st.failures.saturating_add(1);
                Err(e)
            }
        }
    }
    .boxed()
    .shared()
}
