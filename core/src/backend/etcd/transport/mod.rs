//! The etcd transport: one `etcd-client` client (one gRPC channel over the URL's members) per
//! lockgate client, performing the backend's [`EtcdOp`]s and handing over what the cluster
//! pushes (watch events and watch ends, [`EtcdNotice`]s). It decides nothing about recipes:
//! which key to write, whom to watch, when to keep a lease alive and what a reply means are the
//! backend's (`crate::backend::etcd`).
//!
//! - Unary requests (lease grant and revoke, linearizable ranges, transactions) go out on the
//!   channel, each bounded by the response timeout.
//! - Keepalives share one `LeaseKeepAlive` stream per client ([`keepalive`]): each request is
//!   one keepalive, answered by the server's answer to it.
//! - Watches share one `Watch` stream per client ([`watch`]), created and canceled in the order
//!   the backend asked; events and ends are pushed.
//! - A silent connection is replaced: a request left unanswered for the response timeout makes
//!   the transport open a new client (new connections to every member) for every later
//!   request, and ends the keepalive and watch streams of the old one (their keepalives fail,
//!   their watches end: the backend reads again). HTTP/2 pings (every
//!   [`PING_INTERVAL`] while a stream is open) find a dead connection that carries no request.
//! - Transport failures are replies ([`EtcdFailure::ConnectionLost`] / `Unavailable`): the
//!   transport never retries on its own.

mod keepalive;
mod watch;

use std::sync::{Arc, Mutex};

use etcd_client as ec;
use futures_util::future::{BoxFuture, FutureExt};
use tokio::sync::mpsc;

use crate::native::transport::{ReplyFuture, Transport};
use crate::connect::{ClientOptions, Target};
use crate::engine::LockEngine;
use crate::error::{Error, ErrorKind, Result};
use crate::backend::etcd::{
    CompareOp, CompareTarget, EtcdAddress, EtcdBackend, EtcdEngine, EtcdFailure, EtcdNotice, EtcdOp, EtcdReply, EtcdRequest,
    EtcdResult, KeyValue, Order, Range, Txn, TxnOp, TxnReply,
};
use crate::native::driver;
use crate::native::message::Msg;
use crate::random::OsRandom;
use crate::time::{Duration, Instant};

/// How often HTTP/2 pings check a connection that carries a stream. etcd's servers refuse pings
/// more often than every 5 s (`--grpc-keepalive-min-time`) by closing the connection, and a
/// ping with no stream open at all counts against the client too (so none are sent then).
const PING_INTERVAL: Duration = Duration::from_secs(10);

/// Connects to the cluster of `target` and starts an etcd client's driver. Fails with
/// `CONNECTION` if no member answers within `connect_timeout`, `PROTOCOL` if the members are
/// servers of another kind or answer without the URL's TLS, `AUTHENTICATION` if the cluster
/// refuses the URL's login, `INVALID_ARGUMENT` for a TLS CA that is not PEM; said as
/// [`connect_failed`](crate::connect::failure::connect_failed) says every failed connect.
pub(crate) async fn start(options: &ClientOptions, target: &Target) -> Result<mpsc::UnboundedSender<Msg>> {
    let address = target.etcd().ok_or_else(|| Error::invalid("not an etcd:// URL"))?;
    let engine = EtcdEngine::with_backend(EtcdBackend::new(options.etcd_config()?)?, Box::new(OsRandom));
    let config = Config::new(options, address)?;
    let (notices, pushes) = mpsc::unbounded_channel();
    let transport = match EtcdTransport::connect(config.clone(), notices).await {
        Ok(t) => t,
        Err(e) => return Err(connect_error(e, &config.address).await),
    };
    Ok(driver::spawn(engine, transport, Some(pushes)))
}

/// HTTP/2's client preface and an empty `SETTINGS` frame: what a gRPC client says first. An
/// HTTP/2 server (etcd) answers with its own `SETTINGS`; Redis answers the preface's first line.
const HELLO: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00";

/// A failed first connect through the one formatter ([`crate::connect::failure`]): the
/// redacted URL and what its members did. The crate reports a member it cannot use as a
/// transport error or a timeout whatever happened, so a connection failure is probed once (an
/// HTTP/2 preface to each member, see [`probe`](crate::native::transport::probe)): nothing
/// listening or nothing answering (`CONNECTION`), a server of another kind (`PROTOCOL`), or,
/// for `etcds://`, a member answering plain HTTP/2 (`PROTOCOL`: the URL's scheme is wrong;
/// any other TLS failure keeps its own words). Login and setting failures keep their own kind.
async fn connect_error(own: Error, address: &EtcdAddress) -> Error {
    use crate::connect::failure::connect_failed;
    let shown = address.shown();
    if own.kind() != ErrorKind::Connection {
        return connect_failed(own.kind(), &shown, own.message());
    }
    match (crate::native::transport::probe::probe(&address.hosts, "etcd", &[HELLO]).await, address.tls) {
        (None, true) => connect_failed(
            ErrorKind::Protocol,
            &shown,
            "the server answers plain etcd, without TLS (use etcd:// for a plain port, or the cluster's TLS port)",
        ),
        (Some((kind, answered)), false) => connect_failed(kind, &shown, &answered),
        // A member that speaks etcd, or (TLS) one that does not answer a plain preface as
        // etcd: the crate's words (a certificate refused, ...) say more.
        _ => connect_failed(own.kind(), &shown, own.message()),
    }
}

/// What a client needs to connect: the members, login and TLS trust of the URL and the
/// client's timeouts. Never shown: it holds the password.
#[derive(Clone)]
pub(crate) struct Config {
    address: EtcdAddress,
    tls_ca_pem: Option<Vec<u8>>,
    connect_timeout: Duration,
    response_timeout: Duration,
}

impl Config {
    /// The settings of `options` for the cluster `address`.
    pub(crate) fn new(options: &ClientOptions, address: &EtcdAddress) -> Result<Config> {
        if options.tls_ca_pem.is_some() && !address.tls {
            return Err(Error::invalid("a TLS CA was given for a plain etcd:// URL: use etcds://"));
        }
        Ok(Config {
            address: address.clone(),
            tls_ca_pem: options.tls_ca_pem.clone(),
            connect_timeout: options.connect_timeout,
            response_timeout: options.response_timeout,
        })
    }

    /// The crate's options: login, TLS trust (the client's TLS CA option, else the system's
    /// roots), connect timeout, pings, and `require_leader` (a member cut off from the leader
    /// refuses requests at once, and ends its watch streams, instead of serving stale ones).
    fn connect_options(&self) -> Result<ec::ConnectOptions> {
        let mut o = ec::ConnectOptions::new()
            .with_connect_timeout(self.connect_timeout)
            .with_keep_alive(PING_INTERVAL, self.response_timeout)
            .with_keep_alive_while_idle(false)
            .with_require_leader(true);
        if let Some((user, password)) = &self.address.login {
            o = o.with_user(user.clone(), password.clone()).with_auto_token_refresh(true);
        }
        if self.address.tls {
            let tls = match &self.tls_ca_pem {
                Some(pem) => {
                    if !String::from_utf8_lossy(pem).contains("-----BEGIN CERTIFICATE-----") {
                        return Err(Error::invalid("the client's TLS CA option holds no PEM certificate"));
                    }
                    ec::TlsOptions::new().ca_certificate(ec::Certificate::from_pem(pem))
                }
                None => ec::TlsOptions::new().with_native_roots(),
            };
            o = o.with_tls(tls);
        }
        Ok(o)
    }

    /// A new crate client (no connection is made before the first request, except the login's
    /// `Authenticate`).
    async fn client(&self) -> std::result::Result<ec::Client, EtcdFailure> {
        let options = self.connect_options().map_err(EtcdFailure::Other)?;
        let what = format!("connecting to {}", self.address.shown());
        match tokio::time::timeout(self.connect_timeout, ec::Client::connect(self.address.endpoints(), Some(options))).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => Err(failure(e, &what, &self.address)),
            Err(_) => Err(EtcdFailure::ConnectionLost(format!("{what}: no answer within the connect timeout ({:?})", self.connect_timeout))),
        }
    }
}

/// The current crate client and how many times it was replaced.
#[derive(Clone)]
pub(super) struct Conn {
    pub(super) client: ec::Client,
    pub(super) generation: u64,
}

/// What every request of the transport shares.
pub(super) struct Shared {
    config: Config,
    conn: Mutex<Conn>,
    /// When the client was last replaced (at most one replacement per response timeout).
    replaced_at: Mutex<Option<tokio::time::Instant>>,
    /// One replacement at a time.
    replacing: tokio::sync::Mutex<()>,
    keepalive: keepalive::KeepAlives,
    watches: watch::Watches,
}

impl Shared {
    fn conn(&self) -> Conn {
        self.conn.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn response_timeout(&self) -> Duration {
        self.config.response_timeout
    }

    fn address(&self) -> &EtcdAddress {
        &self.config.address
    }
}

/// The etcd transport of one client. Clones share the client and its streams.
#[derive(Clone)]
pub(crate) struct EtcdTransport {
    shared: Arc<Shared>,
}

impl EtcdTransport {
    /// Makes the client and checks that a member answers (a `Status`, within the connect
    /// timeout), so a wrong address or login fails `connect`, not the first lock. Watch events
    /// and ends go to `notices`.
    pub(crate) async fn connect(config: Config, notices: mpsc::UnboundedSender<EtcdNotice>) -> Result<EtcdTransport> {
        let client = config.client().await.map_err(into_error)?;
        let what = format!("connecting to {}", config.address.shown());
        let mut maintenance = client.maintenance_client();
        match tokio::time::timeout(config.connect_timeout, maintenance.status()).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(into_error(failure(e, &what, &config.address))),
            Err(_) => {
                return Err(Error::new(
                    ErrorKind::Connection,
                    format!("no member of {} answered within the connect timeout ({:?})", config.address.shown(), config.connect_timeout),
                ))
            }
        }
        let conn = Conn { client, generation: 0 };
        let shared = Arc::new_cyclic(|weak| Shared {
            watches: watch::Watches::start(weak.clone(), notices),
            keepalive: keepalive::KeepAlives::default(),
            conn: Mutex::new(conn),
            replaced_at: Mutex::new(None),
            replacing: tokio::sync::Mutex::new(()),
            config,
        });
        Ok(EtcdTransport { shared })
    }

    /// Performs `op`. Watch creates and cancels are queued on the watch stream now, so they
    /// reach the server in the order the backend emitted them.
    pub(crate) fn perform_op(&self, op: EtcdOp) -> BoxFuture<'static, EtcdResult> {
        let shared = self.shared.clone();
        match op {
            EtcdOp::LeaseKeepAlive { lease } => keepalive::keep_alive(shared, lease).boxed(),
            EtcdOp::Watch { watch, key, prefix, start_revision } => shared.watches.watch(watch, key, prefix, start_revision).boxed(),
            EtcdOp::CancelWatch { watch } => shared.watches.cancel(watch).boxed(),
            op => unary(shared, op).boxed(),
        }
    }
}

impl Transport for EtcdTransport {
    type Backend = EtcdBackend;
    type Push = EtcdNotice;

    fn perform(&self, EtcdRequest { id, op }: EtcdRequest) -> ReplyFuture<EtcdBackend> {
        self.perform_op(op).map(move |r| (id, r)).boxed()
    }

    fn push(engine: &mut LockEngine<EtcdBackend>, now: Instant, push: EtcdNotice) {
        engine.handle_notice(now, push);
    }
}

/// Performs one unary request on the current client, bounded by the response timeout (no
/// answer in time: `ConnectionLost`, as the request may still be applied, and the client is
/// replaced).
async fn unary(shared: Arc<Shared>, op: EtcdOp) -> EtcdResult {
    let what = describe(&op);
    let conn = shared.conn();
    let limit = shared.response_timeout();
    let address = shared.address().clone();
    let fail = |e: ec::Error| failure(e, &what, &address);
    let request = async {
        match op {
            EtcdOp::LeaseGrant { ttl_secs } => {
                let r = conn.client.lease_client().grant(ttl_secs, None).await.map_err(fail)?;
                if !r.error().is_empty() {
                    return Err(EtcdFailure::Other(Error::protocol(format!("{what}: {}", r.error()))));
                }
                Ok(EtcdReply::LeaseGranted { lease: r.id(), ttl_secs: r.ttl() })
            }
            EtcdOp::LeaseRevoke { lease } => {
                conn.client.lease_client().revoke(lease).await.map_err(fail)?;
                Ok(EtcdReply::LeaseRevoked)
            }
            EtcdOp::Range(range) => {
                let key = range.from.clone().unwrap_or_else(|| range.key.clone());
                let r = conn.client.kv_client().get(key, Some(get_options(&range))).await.map_err(fail)?;
                Ok(EtcdReply::Range { revision: revision(r.header()), kvs: r.kvs().iter().map(key_value).collect(), count: r.count() })
            }
            EtcdOp::Txn(txn) => {
                let r = conn.client.kv_client().txn(to_txn(txn)).await.map_err(fail)?;
                let replies = r
                    .op_responses()
                    .into_iter()
                    .map(|o| match o {
                        ec::TxnOpResponse::Put(_) => Ok(TxnReply::Put),
                        ec::TxnOpResponse::Delete(d) => Ok(TxnReply::Delete { deleted: d.deleted() }),
                        ec::TxnOpResponse::Get(g) => Ok(TxnReply::Range { kvs: g.kvs().iter().map(key_value).collect(), count: g.count() }),
                        ec::TxnOpResponse::Txn(_) => Err(EtcdFailure::Other(Error::protocol(format!("{what}: a nested transaction in the reply")))),
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                Ok(EtcdReply::Txn { revision: revision(r.header()), succeeded: r.succeeded(), replies })
            }
            EtcdOp::LeaseKeepAlive { .. } | EtcdOp::Watch { .. } | EtcdOp::CancelWatch { .. } => {
                unreachable!("performed on their streams")
            }
        }
    };
    match tokio::time::timeout(limit, request).await {
        Ok(r) => r,
        Err(_) => {
            replace_client(&shared, conn.generation);
            Err(EtcdFailure::ConnectionLost(format!("no reply to {what} within the response timeout ({limit:?})")))
        }
    }
}

/// Replaces the client of `generation` (if it is still the current one, and none was replaced
/// within the last response timeout) by a new one, in the background: a request went
/// unanswered on it, so its connection may be silent. The old client's keepalive and watch
/// streams end (the backend hears of it through their failures and watch ends).
pub(super) fn replace_client(shared: &Arc<Shared>, generation: u64) {
    let shared = shared.clone();
    tokio::spawn(async move {
        let _one = shared.replacing.lock().await;
        if shared.conn().generation != generation {
            return;
        }
        let now = tokio::time::Instant::now();
        if let Some(at) = *shared.replaced_at.lock().unwrap_or_else(|p| p.into_inner()) {
            if now.duration_since(at) < shared.response_timeout() {
                return;
            }
        }
        // If no member can be reached now, the old client stays: its own reconnects may do.
        let Ok(client) = shared.config.client().await else { return };
        *shared.replaced_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(now);
        let generation = {
            let mut conn = shared.conn.lock().unwrap_or_else(|p| p.into_inner());
            *conn = Conn { client, generation: conn.generation + 1 };
            conn.generation
        };
        let why = "the connection went silent and was replaced";
        shared.keepalive.close_older(generation, why);
        shared.watches.replaced(generation);
    });
}

/// The crate's range options for `range` (linearizable: the crate's default).
fn get_options(range: &Range) -> ec::GetOptions {
    let mut o = ec::GetOptions::new();
    match (&range.from, range.prefix) {
        // A page of a prefix: from `from` to the prefix's end.
        (Some(_), true) => o = o.with_range(crate::backend::etcd::list::prefix_end(&range.key)),
        (None, true) => o = o.with_prefix(),
        _ => {}
    }
    match range.order {
        Order::Key => {}
        Order::CreateAscending => o = o.with_sort(ec::SortTarget::Create, ec::SortOrder::Ascend),
        Order::CreateDescending => o = o.with_sort(ec::SortTarget::Create, ec::SortOrder::Descend),
    }
    if range.limit > 0 {
        o = o.with_limit(range.limit);
    }
    if range.max_create_revision > 0 {
        o = o.with_max_create_revision(range.max_create_revision);
    }
    if range.count_only {
        o = o.with_count_only();
    }
    o
}

/// The crate's transaction for `txn`.
fn to_txn(txn: Txn) -> ec::Txn {
    let compares: Vec<ec::Compare> = txn
        .compares
        .into_iter()
        .map(|c| {
            let op = match c.op {
                CompareOp::Equal => ec::CompareOp::Equal,
                CompareOp::NotEqual => ec::CompareOp::NotEqual,
                CompareOp::Less => ec::CompareOp::Less,
                CompareOp::Greater => ec::CompareOp::Greater,
            };
            match c.target {
                CompareTarget::CreateRevision(r) => ec::Compare::create_revision(c.key, op, r),
                CompareTarget::ModRevision(r) => ec::Compare::mod_revision(c.key, op, r),
                CompareTarget::Version(v) => ec::Compare::version(c.key, op, v),
                CompareTarget::Value(v) => ec::Compare::value(c.key, op, v),
                CompareTarget::Lease(l) => ec::Compare::lease(c.key, op, l),
            }
        })
        .collect();
    let ops = |ops: Vec<TxnOp>| -> Vec<ec::TxnOp> {
        ops.into_iter()
            .map(|op| match op {
                TxnOp::Put { key, value, lease } => {
                    ec::TxnOp::put(key, value, (lease != 0).then(|| ec::PutOptions::new().with_lease(lease)))
                }
                TxnOp::Delete { key, prefix } => ec::TxnOp::delete(key, prefix.then(|| ec::DeleteOptions::new().with_prefix())),
                TxnOp::Range(range) => {
                    let options = get_options(&range);
                    ec::TxnOp::get(range.from.unwrap_or(range.key), Some(options))
                }
            })
            .collect()
    };
    ec::Txn::new().when(compares).and_then(ops(txn.success)).or_else(ops(txn.failure))
}

/// The store's revision a response header carries (0 if it has none).
fn revision(header: Option<&ec::ResponseHeader>) -> i64 {
    header.map_or(0, |h| h.revision())
}

pub(super) fn key_value(kv: &ec::KeyValue) -> KeyValue {
    KeyValue {
        key: kv.key().to_vec(),
        value: kv.value().to_vec(),
        create_revision: kv.create_revision(),
        mod_revision: kv.mod_revision(),
        version: kv.version(),
        lease: kv.lease(),
    }
}

/// The operation in words, for messages (keys are lock names, not secret).
fn describe(op: &EtcdOp) -> String {
    let key = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    match op {
        EtcdOp::LeaseGrant { ttl_secs } => format!("a lease grant ({ttl_secs} s)"),
        EtcdOp::LeaseKeepAlive { lease } => format!("a keepalive of lease {lease:x}"),
        EtcdOp::LeaseRevoke { lease } => format!("the revoke of lease {lease:x}"),
        EtcdOp::Range(r) => format!("a read of {}{}", key(&r.key), if r.prefix { "*" } else { "" }),
        EtcdOp::Txn(t) => match t.compares.first() {
            Some(c) => format!("a transaction on {}", key(&c.key)),
            None => "a transaction".into(),
        },
        EtcdOp::Watch { key: k, .. } => format!("a watch of {}", key(k)),
        EtcdOp::CancelWatch { .. } => "a watch cancel".into(),
    }
}

/// The crate's error as the backend decides on it: `ConnectionLost` for whatever may or may not
/// have been applied (a broken connection, a timeout inside the cluster), `Unavailable` for what
/// the cluster refused before applying it (no leader, too many requests), `LeaseNotFound`, and
/// `Other` for what retrying cannot fix. Messages never carry the password.
pub(super) fn failure(e: ec::Error, what: &str, address: &EtcdAddress) -> EtcdFailure {
    let text = |m: &dyn std::fmt::Display| address.scrub(&format!("{what}: {m}"));
    match e {
        ec::Error::GRpcStatus(s) => {
            let message = s.message().to_string();
            match s.code() as i32 {
                code::NOT_FOUND if message.contains("lease not found") => EtcdFailure::LeaseNotFound,
                code::OUT_OF_RANGE if message.contains("compacted") => EtcdFailure::Compacted { compact_revision: 0 },
                code::RESOURCE_EXHAUSTED => EtcdFailure::Unavailable(text(&message)),
                code::UNAVAILABLE if message.contains("no leader") => EtcdFailure::Unavailable(text(&message)),
                code::UNAVAILABLE | code::DEADLINE_EXCEEDED | code::CANCELLED | code::UNKNOWN | code::ABORTED | code::INTERNAL => {
                    EtcdFailure::ConnectionLost(text(&message))
                }
                code::UNAUTHENTICATED | code::PERMISSION_DENIED => EtcdFailure::Other(Error::new(
                    ErrorKind::Authentication,
                    text(&format!("not authorized ({message}): the URL's login, or its absence, lacks the permission")),
                )),
                code::INVALID_ARGUMENT if message.contains("authentication failed") || message.contains("user name") => {
                    EtcdFailure::Other(Error::new(ErrorKind::Authentication, text(&format!("the cluster refused the URL's login ({message})"))))
                }
                _ => EtcdFailure::Other(Error::protocol(text(&format!("{:?}: {message}", s.code())))),
            }
        }
        ec::Error::LeaseKeepAliveError(m) if m.contains("lease not found") => EtcdFailure::LeaseNotFound,
        ec::Error::TransportError(_) | ec::Error::IoError(_) | ec::Error::LeaseKeepAliveError(_) | ec::Error::WatchError(_) => {
            EtcdFailure::ConnectionLost(text(&e))
        }
        ec::Error::InvalidArgs(_) | ec::Error::InvalidUri(_) | ec::Error::EndpointError(_) => EtcdFailure::Other(Error::invalid(text(&e))),
        other => EtcdFailure::Other(Error::protocol(text(&other))),
    }
}

/// gRPC's status codes (the same numbers in every gRPC implementation), for matching the
/// crate's `tonic::Status` without depending on tonic's types.
mod code {
    pub const CANCELLED: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const INVALID_ARGUMENT: i32 = 3;
    pub const DEADLINE_EXCEEDED: i32 = 4;
    pub const NOT_FOUND: i32 = 5;
    pub const PERMISSION_DENIED: i32 = 7;
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    pub const ABORTED: i32 = 10;
    pub const OUT_OF_RANGE: i32 = 11;
    pub const INTERNAL: i32 = 13;
    pub const UNAVAILABLE: i32 = 14;
    pub const UNAUTHENTICATED: i32 = 16;
}

/// The failure of connecting, as the error `connect` returns.
pub(crate) fn into_error(failure: EtcdFailure) -> Error {
    match failure {
        EtcdFailure::ConnectionLost(why) | EtcdFailure::Unavailable(why) => Error::new(ErrorKind::Connection, why),
        EtcdFailure::Other(e) => e,
        other => Error::protocol(format!("unexpected failure while connecting: {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn address(url: &str) -> EtcdAddress {
        let (scheme, rest) = url.split_once("://").unwrap();
        EtcdAddress::parse(rest, scheme == "etcds").unwrap()
    }

    #[test]
    fn crate_errors_become_the_backends_failures_without_the_password() {
        let a = address("etcd://app:pw-secret@h1:2379");
        let lost = failure(ec::Error::LeaseKeepAliveError("lease not found".into()), "a keepalive", &a);
        assert_eq!(lost, EtcdFailure::LeaseNotFound);
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset talking as app:pw-secret");
        match failure(ec::Error::IoError(io), "a read of k", &a) {
            EtcdFailure::ConnectionLost(why) => assert!(why.starts_with("a read of k") && !why.contains("pw-secret"), "{why}"),
            other => panic!("{other:?}"),
        }
        match failure(ec::Error::WatchError("stream closed".into()), "a watch", &a) {
            EtcdFailure::ConnectionLost(_) => {}
            other => panic!("{other:?}"),
        }
        match failure(ec::Error::InvalidArgs("empty endpoints".into()), "connecting", &a) {
            EtcdFailure::Other(e) => assert_eq!(e.kind(), ErrorKind::InvalidArgument),
            other => panic!("{other:?}"),
        }
        assert_eq!(into_error(EtcdFailure::Unavailable("no leader".into())).kind(), ErrorKind::Connection);
        assert_eq!(into_error(EtcdFailure::ConnectionLost("gone".into())).kind(), ErrorKind::Connection);
    }

    #[test]
    fn a_tls_ca_needs_etcds_and_pem() {
        let mut options = ClientOptions::new("etcd://h1");
        options.tls_ca_pem = Some(b"-----BEGIN CERTIFICATE-----\n".to_vec());
        let e = Config::new(&options, &address("etcd://h1")).err().expect("a CA for a plain URL is refused");
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        options.tls_ca_pem = Some(b"not pem".to_vec());
        let config = Config::new(&options, &address("etcds://h1")).unwrap();
        assert_eq!(config.connect_options().expect_err("no PEM").kind(), ErrorKind::InvalidArgument);
        options.tls_ca_pem = None;
        assert!(Config::new(&options, &address("etcds://h1")).unwrap().connect_options().is_ok());
    }

    #[test]
    fn operations_are_described_by_their_keys() {
        assert_eq!(describe(&EtcdOp::LeaseKeepAlive { lease: 255 }), "a keepalive of lease ff");
        assert_eq!(describe(&EtcdOp::Range(Range::prefix("/lockgate/mutex/m/", Order::CreateAscending, 1))), "a read of /lockgate/mutex/m/*");
    }
}
