//! The ZooKeeper transport: one session per client on the `zookeeper-client` crate, performing
//! the backend's [`ZkOp`]s and handing over what the ensemble pushes ([`ZkNotice`]s: fired
//! watches, session state changes). It decides nothing about recipes: which node to create or
//! watch, and what a reply means, are the backend's (`crate::backend::zookeeper`).
//!
//! What the crate already does and this file relies on: it moves to another member when its
//! server goes silent or drops the connection (a connection with nothing received for the
//! connection timeout, here `response_timeout`, is given up), re-registers watches on the new
//! connection, and gives the session up itself (as expired) when no member takes it back
//! within 7/5 of the negotiated timeout. What is added here: the chroot node and lock parents
//! made as containers, `response_timeout` on every request, the state changes as notices, a
//! new session (a new crate client) when the backend opens one after an expiry, and a
//! disconnected session taken back within a capped pause of the ensemble's return, where the
//! crate's own pause grows up to the session's deadline ([`reconnect`]).
//!
//! `zookeeper+tls://` connects every member over TLS with the crate's rustls client; what it
//! trusts and shows, and how a refused certificate is told apart from an unreachable member,
//! is [`tls`]'s.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use futures_util::future::{self, BoxFuture, FutureExt};
use tokio::sync::mpsc;
use zookeeper_client as zk;

use crate::native::transport::{ReplyFuture, Transport};
use crate::connect::{ClientOptions, Target};
use crate::engine::LockEngine;
use crate::error::{Error, ErrorKind, Result};
use crate::native::driver;
use crate::native::message::Msg;
use crate::random::OsRandom;
use crate::time::{Duration, Instant};
use crate::backend::zookeeper::{
    CreateMode, SessionEvent, Stat, WatchEvent, ZkAddress, ZkFailure, ZkNotice, ZkOp, ZkReply, ZkRequest, ZkResult,
    ZooKeeperBackend, ZooKeeperEngine,
};

/// How many times a create whose parent vanished (a container the server reaped between
/// making it and creating in it) makes the parents again before it reports `NoNode`.
const PARENT_ATTEMPTS: usize = 3;

/// Connects to the ensemble of `target` (one session, shared by every lock of the client) and
/// starts a ZooKeeper client's driver. Fails with `CONNECTION` if no member answers within
/// `connect_timeout` or (`zookeeper+tls://`) a server's certificate is not trusted,
/// `PROTOCOL` if the members are servers of another kind or answer without the URL's TLS,
/// `AUTHENTICATION` if the ensemble refuses the login or the client's certificate,
/// `INVALID_ARGUMENT` if a TLS file cannot be read or used; said as
/// [`connect_failed`](crate::connect::failure::connect_failed) says every failed connect.
pub(crate) async fn start(options: &ClientOptions, target: &Target) -> Result<mpsc::UnboundedSender<Msg>> {
    let address = target.zookeeper().ok_or_else(|| Error::invalid("not a zookeeper:// URL"))?;
    let engine_config = options.zookeeper_config()?;
    let config = Config::new(options, address, engine_config.session_timeout)?;
    let engine = ZooKeeperEngine::with_backend(ZooKeeperBackend::new(engine_config)?, Box::new(OsRandom));
    let (notices, pushes) = mpsc::unbounded_channel();
    let transport = match ZkTransport::connect(config.clone(), notices).await {
        Ok(t) => t,
        Err(failure) => return Err(connect_error(failure, &config).await),
    };
    Ok(driver::spawn(engine, transport, Some(pushes)))
}

/// A failed first connect through the one formatter ([`crate::connect::failure`]): the
/// redacted URL and what its members did. The crate tries every member until the connect
/// timeout whatever goes wrong, so a connection failure is probed once (a ZooKeeper connect
/// request to each member, see [`probe`](crate::native::transport::probe)): nothing listening
/// or nothing answering (`CONNECTION`), a server of another kind (`PROTOCOL`), or, for
/// `zookeeper+tls://`, a member answering plain ZooKeeper (`PROTOCOL`: the URL's scheme is
/// wrong; any other TLS failure keeps its own words). Login and setting failures keep their
/// own kind.
async fn connect_error(failure: ZkFailure, config: &Config) -> Error {
    use crate::connect::failure::connect_failed;
    let own = into_error(failure);
    if own.kind() != ErrorKind::Connection {
        return connect_failed(own.kind(), &config.shown, own.message());
    }
    let answered = crate::native::transport::probe::probe(&config.members, "ZooKeeper", &[&hello(), b"PING\r\n"]).await;
    match (answered, config.tls.is_some()) {
        (None, true) => connect_failed(
            ErrorKind::Protocol,
            &config.shown,
            "the server answers plain ZooKeeper, without TLS (use zookeeper:// for a plain port, or the ensemble's TLS port)",
        ),
        (Some((kind, answered)), false) => connect_failed(kind, &config.shown, &answered),
        // A member that speaks ZooKeeper, or (TLS) one that does not answer a plain hello as
        // ZooKeeper: the crate's words (and the TLS probe's, a certificate refused) say more.
        _ => connect_failed(own.kind(), &config.shown, own.message()),
    }
}

/// A ZooKeeper connect request for a new session of 1 ms (the server makes it its shortest,
/// so the probe's session soon expires). A line-based server (Redis) never answers it (it
/// starts with a NUL): the probe then says `PING` on a connection of its own.
fn hello() -> Vec<u8> {
    let mut body = Vec::with_capacity(45);
    body.extend_from_slice(&0i32.to_be_bytes()); // protocol version
    body.extend_from_slice(&0i64.to_be_bytes()); // last zxid seen
    body.extend_from_slice(&1i32.to_be_bytes()); // session timeout, ms
    body.extend_from_slice(&0i64.to_be_bytes()); // session id: a new session
    body.extend_from_slice(&16i32.to_be_bytes()); // password: 16 zero bytes
    body.extend_from_slice(&[0u8; 16]);
    body.push(0); // not read-only
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame
}

/// What a session needs to connect: the members, chroot and login of the URL and the client's
/// timeouts. Never shown: it holds the password.
#[derive(Clone)]
pub(crate) struct Config {
    /// `host:port,host:port` (without the chroot: the chroot node is made through a client
    /// rooted at `/`).
    hosts: String,
    chroot: Option<String>,
    digest: Option<(String, String)>,
    /// The URL with its password redacted, for messages.
    shown: String,
    /// Every member, in URL order (what the TLS probe tries).
    members: Vec<(String, u16)>,
    /// `zookeeper+tls://`: trust and identity.
    tls: Option<tls::Tls>,
    session_timeout: Duration,
    connect_timeout: Duration,
    response_timeout: Duration,
}

impl Config {
    /// The settings of `options` for the ensemble `address`, asking for `session_timeout`.
    pub(crate) fn new(options: &ClientOptions, address: &ZkAddress, session_timeout: Duration) -> Result<Config> {
        let tls = match address.tls {
            true => Some(tls::Tls::new(&address.tls_files, options.tls_ca_pem.as_deref())?),
            false => None,
        };
        let hosts: Vec<String> = address
            .hosts
            .iter()
            .map(|(h, p)| if h.contains(':') { format!("[{h}]:{p}") } else { format!("{h}:{p}") })
            .collect();
        Ok(Config {
            hosts: hosts.join(","),
            chroot: address.chroot.clone(),
            digest: address.digest.clone(),
            shown: address.shown(),
            members: address.hosts.clone(),
            tls,
            session_timeout,
            connect_timeout: options.connect_timeout,
            response_timeout: options.response_timeout,
        })
    }
}

/// One session of the client, shared by the requests on it.
type Session = Arc<reconnect::Slot>;

/// What every request of the transport shares.
struct Shared {
    config: Arc<Config>,
    /// The current session (replaced only after it ended, by an `OpenSession`).
    current: Mutex<Session>,
    /// The client's extra sessions, by the timeout asked (opened and closed by the backend's
    /// `OpenSession` / `CloseSession` requests, `backend/zookeeper/sessions.rs`).
    extras: Mutex<HashMap<Duration, Session>>,
    /// One `OpenSession` at a time, so two never open two sessions.
    opening: tokio::sync::Mutex<()>,
    /// Where watch events and state changes go (the driver's push channel).
    notices: mpsc::UnboundedSender<ZkNotice>,
}

/// The ZooKeeper transport of one client. Clones share the session.
#[derive(Clone)]
pub(crate) struct ZkTransport {
    shared: Arc<Shared>,
}

impl ZkTransport {
    /// Opens the first session (so a wrong address or login fails `connect`, not the first
    /// lock) and forwards its state changes and fired watches to `notices`.
    pub(crate) async fn connect(config: Config, notices: mpsc::UnboundedSender<ZkNotice>) -> std::result::Result<ZkTransport, ZkFailure> {
        let config = Arc::new(config);
        let session = open(&config, &notices, None).await?;
        let shared = Shared {
            config,
            current: Mutex::new(session),
            extras: Mutex::new(HashMap::new()),
            opening: tokio::sync::Mutex::new(()),
            notices,
        };
        Ok(ZkTransport { shared: Arc::new(shared) })
    }

    /// Performs `op`. The crate puts a request on its session when the operation is called,
    /// so the operation is called here, before this returns: requests reach the ensemble in
    /// the order the backend emitted them (ZooKeeper answers one session's requests in order).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn perform_op(&self, op: ZkOp) -> BoxFuture<'static, ZkResult> {
        self.perform_in(op, None)
    }

    /// Performs `op` in the client's own session (`extra` `None`) or in its extra session
    /// asked for `extra`'s timeout (opened by `OpenSession`, closed by `CloseSession`).
    pub(crate) fn perform_in(&self, op: ZkOp, extra: Option<Duration>) -> BoxFuture<'static, ZkResult> {
        let shared = self.shared.clone();
        let limit = shared.config.response_timeout;
        match (op, extra) {
            (ZkOp::OpenSession, None) => open_session(shared).boxed(),
            (ZkOp::OpenSession, Some(timeout)) => open_extra(shared, timeout).boxed(),
            (ZkOp::CloseSession, Some(timeout)) => {
                // Dropping the last clone of its client closes the session (its nodes go).
                shared.extras.lock().unwrap_or_else(|p| p.into_inner()).remove(&timeout);
                future::ready(Ok(ZkReply::Closed)).boxed()
            }
            (ZkOp::CloseSession, None) => future::ready(Err(ZkFailure::Other(Error::protocol(
                "the client's own ZooKeeper session is closed with the client",
            ))))
            .boxed(),
            (op, None) => sent(bounded(limit, describe(&op), perform(self.session(), shared.notices.clone(), op))),
            (op, Some(timeout)) => {
                let session = shared.extras.lock().unwrap_or_else(|p| p.into_inner()).get(&timeout).cloned();
                match session {
                    Some(session) => sent(bounded(limit, describe(&op), perform(session, shared.notices.clone(), op))),
                    // Gone (it expired and was not opened again): its nodes are gone too.
                    None => future::ready(Err(ZkFailure::SessionExpired)).boxed(),
                }
            }
        }
    }

    fn session(&self) -> Session {
        self.shared.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Transport for ZkTransport {
    type Backend = ZooKeeperBackend;
    type Push = ZkNotice;

    fn perform(&self, ZkRequest { id, op, session }: ZkRequest) -> ReplyFuture<ZooKeeperBackend> {
        self.perform_in(op, session).map(move |r| (id, r)).boxed()
    }

    fn push(engine: &mut LockEngine<ZooKeeperBackend>, now: Instant, push: ZkNotice) {
        engine.handle_notice(now, push);
    }
}

/// Answers `OpenSession`: the current session while it lives (once connected again, if it is
/// reconnecting), else a new one. A session that ended is replaced only after its last state
/// change (the `Expired` notice) was pushed, so no notice of the old session follows the reply.
async fn open_session(shared: Arc<Shared>) -> ZkResult {
    let _one = shared.opening.lock().await;
    let config = &shared.config;
    let current = shared.current.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(reply) = live_or_ended(&current, config).await? {
        return Ok(reply);
    }
    let session = open(config, &shared.notices, None).await?;
    let reply = session_reply(&session.clients().client);
    *shared.current.lock().unwrap_or_else(|p| p.into_inner()) = session;
    Ok(reply)
}

/// `session`'s reply while it lives (once connected again, if it is reconnecting within the
/// connect timeout), or `None` once it ended and its last state change was pushed (so no
/// notice of it follows a new session's reply).
async fn live_or_ended(session: &Session, config: &Config) -> Result<Option<ZkReply>, ZkFailure> {
    let mut states = session.state();
    let deadline = tokio::time::Instant::now() + config.connect_timeout;
    loop {
        let state = *states.borrow_and_update();
        match state {
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                return Ok(Some(session_reply(&session.clients().client)))
            }
            zk::SessionState::Disconnected => {
                if !matches!(tokio::time::timeout_at(deadline, states.changed()).await, Ok(Ok(()))) {
                    return Err(ZkFailure::ConnectionLoss(format!(
                        "the session did not reconnect to any member of {} within the connect timeout ({:?})",
                        config.shown, config.connect_timeout
                    )));
                }
            }
            zk::SessionState::Expired | zk::SessionState::AuthFailed | zk::SessionState::Closed => break,
        }
    }
    let mut forwarded = session.forwarded();
    while forwarded.changed().await.is_ok() {}
    Ok(None)
}

/// Answers `OpenSession` of the extra session asked for `timeout`: the one open while it
/// lives (once connected again, if it is reconnecting), else a new one.
async fn open_extra(shared: Arc<Shared>, timeout: Duration) -> ZkResult {
    let _one = shared.opening.lock().await;
    let config = &shared.config;
    let current = shared.extras.lock().unwrap_or_else(|p| p.into_inner()).get(&timeout).cloned();
    if let Some(current) = current {
        if let Some(reply) = live_or_ended(&current, config).await? {
            return Ok(reply);
        }
    }
    let session = open(config, &shared.notices, Some(timeout)).await?;
    let reply = session_reply(&session.clients().client);
    shared.extras.lock().unwrap_or_else(|p| p.into_inner()).insert(timeout, session);
    Ok(reply)
}

fn session_reply(client: &zk::Client) -> ZkReply {
    ZkReply::Session { id: client.session_id().0, timeout: client.session_timeout() }
}

/// Connects a new session (within `connect_timeout`) and starts forwarding its state changes:
/// the client's own (`extra` `None`, asking for `session_timeout`) or the extra one asking for
/// `extra`'s timeout.
async fn open(config: &Arc<Config>, notices: &mpsc::UnboundedSender<ZkNotice>, extra: Option<Duration>) -> std::result::Result<Session, ZkFailure> {
    // Detached: a client replaced by lockgate's own reconnect must never close the session
    // (`reconnect`); the session is closed when its last handle goes.
    let connector = connector(config, extra.unwrap_or(config.session_timeout)).with_detached();
    let root = reconnect::reach_soon(config, connector).await?;
    reconnect::Slot::start(root, Arc::clone(config), notices.clone(), extra)
}

/// The crate's connector for the URL's login and the client's timeouts, asking for a session
/// of `session_timeout`.
fn connector(config: &Config, session_timeout: Duration) -> zk::Connector {
    // The crate's connection timeout is how long a connection may stay silent before the
    // client leaves it for another member: what `response_timeout` means for every backend.
    let mut connector = zk::Client::connector().with_session_timeout(session_timeout).with_connection_timeout(config.response_timeout);
    if let Some((user, password)) = &config.digest {
        connector = connector.with_auth("digest", format!("{user}:{password}").as_bytes());
    }
    connector
}

/// Connects `connector` to the members (over TLS for `zookeeper+tls://`) within the connect
/// timeout: a crate client rooted at `/`.
async fn reach(config: &Config, connector: zk::Connector) -> std::result::Result<zk::Client, ZkFailure> {
    let what = format!("connecting to {}", config.shown);
    let attempt = async {
        match &config.tls {
            None => connector.connect(&config.hosts).await.map_err(|e| failure(e, &what)),
            Some(tls) => {
                let connector = connector.with_tls(tls.options());
                tokio::select! {
                    r = connector.secure_connect(&config.hosts) => r.map_err(|e| failure(e, &what)),
                    refused = tls.probe(&config.members, &config.shown) => Err(refused),
                }
            }
        }
    };
    match tokio::time::timeout(config.connect_timeout, attempt).await {
        Err(_) => Err(connect_timed_out(config)),
        Ok(r) => r,
    }
}

/// What a connect that no member answered within the connect timeout fails with.
fn connect_timed_out(config: &Config) -> ZkFailure {
    ZkFailure::ConnectionLoss(format!("no member of {} answered within the connect timeout ({:?})", config.shown, config.connect_timeout))
}

/// Pushes the event of one watch once it fires (a session event instead means the session
/// ended, which `forward_states` says).
fn forward_watch(watcher: zk::OneshotWatcher, notices: mpsc::UnboundedSender<ZkNotice>) {
    tokio::spawn(async move {
        let event = tokio::select! {
            e = watcher.changed() => e,
            _ = notices.closed() => return,
        };
        let kind = match event.event_type {
            zk::EventType::NodeCreated => WatchEvent::Created,
            zk::EventType::NodeDeleted => WatchEvent::Deleted,
            zk::EventType::NodeDataChanged => WatchEvent::DataChanged,
            zk::EventType::NodeChildrenChanged => WatchEvent::ChildrenChanged,
            zk::EventType::Session => return,
        };
        // The crate gives paths relative to the chroot; the chroot node itself is "/".
        let path = if event.path.is_empty() { "/".to_string() } else { event.path };
        let _ = notices.send(ZkNotice::Watch { path, event: kind });
    });
}

/// Performs one node operation on `session`.
async fn perform(session: Session, notices: mpsc::UnboundedSender<ZkNotice>, op: ZkOp) -> ZkResult {
    let what = describe(&op);
    // Never queued on a disconnected crate client: one replaced by lockgate's own reconnect
    // would send what it queued once it gets through, later than anything since (a create
    // then leaves a node nobody knows of). A request made while disconnected waits here, in
    // arrival order, for whichever client serves the session next (within the response
    // timeout of `bounded`); the turn is held until its reply, so those go out in order.
    let (clients, _turn) = session.serving().await;
    let client = &clients.client;
    let fail = |e: zk::Error| failure(e, &what);
    match op {
        ZkOp::OpenSession | ZkOp::CloseSession => unreachable!("answered by open_session, open_extra and perform_op"),
        ZkOp::Create { path, data, mode } => create(&clients, &path, &data, mode).await.map_err(fail),
        ZkOp::Delete { path, version } => client.delete(&path, version).await.map(|()| ZkReply::Deleted).map_err(fail),
        ZkOp::Children { path, watch: false } => client.list_children(&path).await.map(ZkReply::Children).map_err(fail),
        ZkOp::Children { path, watch: true } => {
            let (children, watcher) = client.list_and_watch_children(&path).await.map_err(fail)?;
            forward_watch(watcher, notices);
            Ok(ZkReply::Children(children))
        }
        ZkOp::Exists { path, watch: false } => {
            client.check_stat(&path).await.map(|s| ZkReply::Exists(s.as_ref().map(stat))).map_err(fail)
        }
        ZkOp::Exists { path, watch: true } => {
            let (found, watcher) = client.check_and_watch_stat(&path).await.map_err(fail)?;
            forward_watch(watcher, notices);
            Ok(ZkReply::Exists(found.as_ref().map(stat)))
        }
        ZkOp::GetData { path, watch: false } => {
            client.get_data(&path).await.map(|(data, s)| ZkReply::Data(data, stat(&s))).map_err(fail)
        }
        ZkOp::GetData { path, watch: true } => {
            let (data, s, watcher) = client.get_and_watch_data(&path).await.map_err(fail)?;
            forward_watch(watcher, notices);
            Ok(ZkReply::Data(data, stat(&s)))
        }
        ZkOp::Check { path, version } => {
            let mut multi = client.new_multi_writer();
            multi.add_check_version(&path, version.unwrap_or(-1)).map_err(fail)?;
            match multi.commit().await {
                Ok(_) => Ok(ZkReply::Checked),
                Err(zk::MultiWriteError::RequestFailed { source } | zk::MultiWriteError::OperationFailed { source, .. }) => {
                    Err(fail(source))
                }
            }
        }
    }
}

/// Creates `path`; if its parent is missing, makes the parents (and the chroot) as containers
/// and tries again.
async fn create(session: &reconnect::Clients, path: &str, data: &[u8], mode: CreateMode) -> std::result::Result<ZkReply, zk::Error> {
    let acls = zk::Acls::anyone_all();
    let options = match mode {
        CreateMode::Persistent => zk::CreateMode::Persistent,
        CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
        CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
        CreateMode::Container => zk::CreateMode::Container,
    }
    .with_acls(acls);
    let mut result = session.client.create(path, data, &options).await;
    for _ in 0..PARENT_ATTEMPTS {
        if !matches!(result, Err(zk::Error::NoNode)) {
            break;
        }
        make_parents(session, path).await?;
        result = session.client.create(path, data, &options).await;
    }
    let (s, sequence) = result?;
    let created = match mode {
        CreateMode::EphemeralSequential => format!("{path}{sequence}"),
        _ => path.to_string(),
    };
    Ok(ZkReply::Created { path: created, stat: stat(&s) })
}

/// Makes every missing ancestor of `path` a container, the chroot node included.
async fn make_parents(session: &reconnect::Clients, path: &str) -> std::result::Result<(), zk::Error> {
    let containers = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    let parent = &path[..path.rfind('/').unwrap_or(0)];
    let chroot = session.client.path();
    let made = if parent.is_empty() { Err(zk::Error::NoNode) } else { session.client.mkdir(parent, &containers).await };
    match made {
        // The chroot node itself is missing: make it through the client rooted at `/`.
        Err(zk::Error::NoNode) if chroot != "/" => {
            session.root.mkdir(chroot, &containers).await?;
            if parent.is_empty() {
                Ok(())
            } else {
                session.client.mkdir(parent, &containers).await
            }
        }
        other => other,
    }
}

/// Bounds `op` by the response timeout: no reply in time is a connection loss (the request
/// may still be applied, which is what `ConnectionLoss` says).
async fn bounded(limit: Duration, what: String, op: impl Future<Output = ZkResult>) -> ZkResult {
    match tokio::time::timeout(limit, op).await {
        Ok(r) => r,
        Err(_) => Err(ZkFailure::ConnectionLoss(format!("no reply to {what} within the response timeout ({limit:?})"))),
    }
}

/// Polls `op` once now, which puts its request on the session (see
/// [`ZkTransport::perform_op`]), and returns what is left of it.
fn sent(op: impl Future<Output = ZkResult> + Send + 'static) -> BoxFuture<'static, ZkResult> {
    let mut op: Pin<Box<dyn Future<Output = ZkResult> + Send>> = Box::pin(op);
    // The driver polls the returned future again with its own waker; this poll only starts it.
    match op.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(r) => future::ready(r).boxed(),
        Poll::Pending => op,
    }
}

/// The operation in words, for messages (paths are not secret).
fn describe(op: &ZkOp) -> String {
    match op {
        ZkOp::OpenSession => "opening the session".into(),
        ZkOp::CloseSession => "closing the session".into(),
        ZkOp::Create { path, .. } => format!("create {path}"),
        ZkOp::Delete { path, .. } => format!("delete {path}"),
        ZkOp::Children { path, .. } => format!("children of {path}"),
        ZkOp::Exists { path, .. } => format!("exists {path}"),
        ZkOp::Check { path, .. } => format!("check {path}"),
        ZkOp::GetData { path, .. } => format!("get data of {path}"),
    }
}

fn stat(s: &zk::Stat) -> Stat {
    Stat {
        czxid: s.czxid,
        mzxid: s.mzxid,
        version: s.version,
        cversion: s.cversion,
        ephemeral_owner: s.ephemeral_owner,
        num_children: s.num_children,
    }
}

/// The crate's error as the backend decides on it: `ConnectionLoss` for whatever may or may
/// not have been applied (or reached no member), `SessionExpired` once the session is gone.
fn failure(e: zk::Error, what: &str) -> ZkFailure {
    use zk::Error as E;
    match e {
        E::NoNode => ZkFailure::NoNode,
        E::NodeExists => ZkFailure::NodeExists,
        E::BadVersion => ZkFailure::BadVersion,
        E::NotEmpty => ZkFailure::NotEmpty,
        // Closed: the crate ended the session (dropped without expiry being seen): gone too.
        E::SessionExpired | E::ClientClosed => ZkFailure::SessionExpired,
        // Custom: a silent or broken connection (I/O errors, "no response from connection").
        // SessionMoved, Throttled, NotReadOnly: not applied, and worth another try.
        E::ConnectionLoss | E::Timeout | E::NoHosts | E::SessionMoved | E::Throttled | E::NotReadOnly | E::Custom(_) => {
            ZkFailure::ConnectionLoss(format!("{what}: {e}"))
        }
        E::NoAuth => ZkFailure::Other(Error::new(
            ErrorKind::Authentication,
            format!("{what}: not authorized (NoAuth): the URL's digest login, or its absence, lacks the node's ACL permission"),
        )),
        E::AuthFailed => ZkFailure::Other(Error::new(
            ErrorKind::Authentication,
            format!("{what}: the ensemble refused the URL's login (AuthFailed)"),
        )),
        E::BadArguments(why) => ZkFailure::Other(Error::invalid(format!("{what}: {why}"))),
        other => ZkFailure::Other(Error::protocol(format!("{what}: {other}"))),
    }
}

/// The failure of connecting, as the error `connect` returns.
pub(crate) fn into_error(failure: ZkFailure) -> Error {
    match failure {
        ZkFailure::ConnectionLoss(why) => Error::new(ErrorKind::Connection, why),
        ZkFailure::SessionExpired => Error::new(ErrorKind::Connection, "the session expired while connecting"),
        ZkFailure::Other(e) => e,
        other => Error::protocol(format!("unexpected failure while connecting: {other}")),
    }
}

mod reconnect;
mod tls;

#[cfg(test)]
mod tests;
