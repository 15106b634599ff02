//! lockgate's own reconnect: a session whose crate client lost its connection is taken back
//! within a capped pause of the ensemble's return.
//!
//! Why: the `zookeeper-client` crate doubles its pause between rounds over the members up to
//! the session's deadline, with no setting, so after a 30 s outage in a 60 s session a client
//! came back 21 s after the ensemble did (issue 23, item 5). Curator's and kazoo's retry
//! policies cap their pause; so does this: once a session has been disconnected for
//! [`TAKE_BACK_AFTER`] (short losses are the crate's, whose first rounds come quickly), every
//! [`PAUSE_FIRST`] doubling up to [`PAUSE_MAX`], a second crate client tries each member once
//! to re-attach the same session (its id and password). The first that gets through serves
//! the session from then on; the engine is told `Reconnected` and re-checks every lease and
//! waiter, which registers their watches again on the new client.
//!
//! What makes the hand-over safe with the crate as it is:
//! - every crate client is **detached**: dropping it never closes its session (a replaced
//!   client would otherwise close the session, and every node with it, once it reconnects).
//!   A replaced client that reconnects later takes the connection over once (the server
//!   keeps one connection per session), sees it has no user left and leaves; the new client
//!   then reconnects at once (a short disconnection, told as such).
//! - so a session is closed explicitly when its last handle goes ([`close_when_dropped`]): a
//!   client that is not detached attaches to it and is dropped, which closes it, as dropping
//!   the crate's own client did before.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use futures_util::future::{BoxFuture, FutureExt};
use tokio::sync::{mpsc, watch};
use zookeeper_client as zk;

use super::{connect_timed_out, reach, Config, SessionEvent, ZkFailure, ZkNotice};
use crate::time::Duration;

/// How long a session stays disconnected before lockgate tries to take it back. Until then the
/// crate's own rounds (after 0, 0.1, 0.3, 0.7 and 1.5 s for one member) are as quick, and a
/// second client would only make the replaced one take the connection back over later (a
/// short disconnection that fails the requests on the wire, a release among them).
const TAKE_BACK_AFTER: Duration = Duration::from_secs(2);

/// The pause before the next try after one that found no member.
const PAUSE_FIRST: Duration = Duration::from_millis(100);

/// The longest pause between two tries: what bounds how late a client comes back after the
/// ensemble does (PROTOCOL.md §9, "Reconnect backoff").
const PAUSE_MAX: Duration = Duration::from_millis(500);

/// One session of the client: the crate client serving it now (replaced when a try of
/// [`supervise`] takes the session back first), its state as the engine was told it, and when
/// the task telling it ended. Closes the session when dropped ([`close_when_dropped`]).
pub(super) struct Slot {
    clients: Mutex<Clients>,
    /// Requests made while the session is disconnected take turns here, in arrival order
    /// ([`Slot::serving`]); `waiting` counts them, so a later request queues behind them.
    turns: tokio::sync::Mutex<()>,
    waiting: AtomicUsize,
    /// The session's state as forwarded: connected, disconnected, or ended (expired, refused,
    /// closed).
    state: watch::Receiver<zk::SessionState>,
    /// Closed (its sender dropped) once the task forwarding the state changes has pushed the
    /// session's end and stopped.
    forwarded: watch::Receiver<()>,
    config: Arc<Config>,
}

/// The crate clients serving one session: rooted at the URL's chroot, and at `/` (to make the
/// chroot node itself).
#[derive(Clone)]
pub(super) struct Clients {
    pub(super) client: zk::Client,
    pub(super) root: zk::Client,
}

impl Clients {
    /// The clients of the session `root` (a crate client rooted at `/`) serves.
    fn new(root: zk::Client, config: &Config) -> Result<Clients, ZkFailure> {
        let client = match &config.chroot {
            None => root.clone(),
            Some(chroot) => root.clone().chroot(chroot.as_str()).map_err(|_| {
                ZkFailure::Other(crate::error::Error::invalid(format!(
                    "the chroot {chroot:?} is not a valid ZooKeeper path"
                )))
            })?,
        };
        Ok(Clients { client, root })
    }
}

impl Slot {
    /// Starts serving the session `root` has just opened: its state changes and fired watches
    /// go to `notices` (as the client's own session, or the extra one asked for `extra`'s
    /// timeout), and a lost connection is taken back by lockgate too ([`supervise`]).
    pub(super) fn start(
        root: zk::Client,
        config: Arc<Config>,
        notices: mpsc::UnboundedSender<ZkNotice>,
        extra: Option<Duration>,
    ) -> Result<Arc<Slot>, ZkFailure> {
        let clients = Clients::new(root, &config)?;
        let (state_tx, state) = watch::channel(zk::SessionState::SyncConnected);
        let (done, forwarded) = watch::channel(());
        let states = clients.client.state_watcher();
        let session = Attached::of(&clients.client);
        let slot = Arc::new(Slot {
            clients: Mutex::new(clients),
            turns: tokio::sync::Mutex::new(()),
            waiting: AtomicUsize::new(0),
            state,
            forwarded,
            config: Arc::clone(&config),
        });
        tokio::spawn(supervise(
            Arc::downgrade(&slot),
            states,
            session,
            config,
            notices,
            state_tx,
            done,
            extra,
        ));
        Ok(slot)
    }

    /// The crate clients serving the session now.
    pub(super) fn clients(&self) -> Clients {
        self.clients
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The clients to put a request on: at once while the crate client is not disconnected
    /// (connected, or ended: the crate then answers at once that the session is gone) and no
    /// earlier request waits; else, after the earlier ones, once a client serves the session
    /// again (the caller bounds the wait), with the turn, held until the request is answered.
    /// The turn also keeps the request counted, so a request made after the session is back
    /// cannot slip ahead of one that waited before the turned one has gone out.
    pub(super) async fn serving(&self) -> (Clients, Option<Turn<'_>>) {
        let clients = self.clients();
        if self.waiting.load(Ordering::Acquire) == 0 && clients.client.state() != zk::SessionState::Disconnected {
            return (clients, None);
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let counted = Uncount(&self.waiting);
        let turn = self.turns.lock().await;
        let mut state = self.state();
        loop {
            let clients = self.clients();
            if clients.client.state() != zk::SessionState::Disconnected {
                return (clients, Some(Turn { _turn: turn, _counted: counted }));
            }
            // The forwarded state changes when the crate client reconnects or is replaced;
            // the poll covers a change the forwarding has not caught up with yet.
            let _ = tokio::time::timeout(RECHECK, state.changed()).await;
        }
    }

    /// The session's state as forwarded to the engine.
    pub(super) fn state(&self) -> watch::Receiver<zk::SessionState> {
        self.state.clone()
    }

    /// Closed once the session's end was pushed and nothing more of it follows.
    pub(super) fn forwarded(&self) -> watch::Receiver<()> {
        self.forwarded.clone()
    }
}

/// How often a request waiting for the session looks at the serving client again.
const RECHECK: Duration = Duration::from_millis(20);

/// A request's place in the line of those made while the session was disconnected: held until
/// its reply, it keeps later requests behind it.
pub(super) struct Turn<'a> {
    _turn: tokio::sync::MutexGuard<'a, ()>,
    _counted: Uncount<'a>,
}

/// Takes a waiting request off the count however its wait ends (answered, or dropped by the
/// response timeout).
struct Uncount<'a>(&'a AtomicUsize);

impl Drop for Uncount<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.state.borrow().is_terminated() {
            return;
        }
        let Clients { client, .. } = self.clients();
        // Outside a runtime (a process ending) nothing can close it: it expires on the ensemble.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let info = client.session().clone();
            let (timeout, leaving) = (client.session_timeout(), client.state_watcher());
            runtime.spawn(close_when_dropped(
                Arc::clone(&self.config),
                info,
                timeout,
                leaving,
            ));
        }
    }
}

/// Closes a session whose last handle went: once its (detached) client has left its
/// connection, a client that is not detached attaches to it and is dropped, which closes it
/// (its ephemeral nodes go at once, not a session later).
async fn close_when_dropped(
    config: Arc<Config>,
    info: zk::SessionInfo,
    timeout: Duration,
    leaving: zk::StateWatcher,
) {
    // A connected client leaves at once; one still reconnecting is not waited for (it leaves
    // as soon as it gets through, or finds the session closed).
    ended(leaving, config.response_timeout).await;
    let connector = super::connector(&config, timeout)
        .with_session(info)
        .with_fail_eagerly();
    if let Ok(client) = reach(&config, connector).await {
        let closing = client.state_watcher();
        drop(client);
        ended(closing, config.response_timeout).await;
    }
}

/// Waits up to `limit` for `states` to end.
async fn ended(mut states: zk::StateWatcher, limit: Duration) {
    let _ = tokio::time::timeout(limit, async {
        while !states.peek_state().is_terminated() {
            states.changed().await;
        }
    })
    .await;
}

/// What one try to take a session back came to.
enum Retaken {
    /// A new crate client serves the session.
    Back(zk::Client),
    /// The ensemble says the session is gone.
    Expired,
    /// No member took it: try again after a pause.
    NotYet,
}

/// What re-attaching a session takes: its id and password, and its negotiated timeout. Kept
/// instead of a crate client, which would keep a replaced client from ever leaving.
struct Attached {
    info: zk::SessionInfo,
    timeout: Duration,
}

impl Attached {
    fn of(client: &zk::Client) -> Attached {
        Attached {
            info: client.session().clone(),
            timeout: client.session_timeout(),
        }
    }
}

/// One try: a new detached client asks each member once to re-attach `session`.
fn retake(config: Arc<Config>, session: &Attached) -> BoxFuture<'static, Retaken> {
    let connector = super::connector(&config, session.timeout)
        .with_session(session.info.clone())
        .with_detached()
        .with_fail_eagerly();
    async move {
        match reach(&config, connector).await {
            Ok(client) => Retaken::Back(client),
            Err(ZkFailure::SessionExpired) => Retaken::Expired,
            Err(_) => Retaken::NotYet,
        }
    }
    .boxed()
}

/// Forwards the session's state changes to `notices` until it ends (then `Expired`, and the
/// task stops, dropping `done`) or the driver is gone; while it is disconnected, takes it back
/// itself every pause (capped) and, once through, serves the session with the new client.
// Its arguments are the one task's state, each moved in by the one caller.
#[allow(clippy::too_many_arguments)]
async fn supervise(
    slot: Weak<Slot>,
    mut states: zk::StateWatcher,
    mut session: Attached,
    config: Arc<Config>,
    notices: mpsc::UnboundedSender<ZkNotice>,
    state_tx: watch::Sender<zk::SessionState>,
    done: watch::Sender<()>,
    extra: Option<Duration>,
) {
    let _done = done;
    let mut connected = true;
    let mut pause = PAUSE_FIRST;
    let mut next_try: Option<tokio::time::Instant> = None;
    let mut trying: Option<BoxFuture<'static, Retaken>> = None;
    loop {
        let state = tokio::select! {
            s = states.changed() => s,
            _ = notices.closed() => return,
            retaken = async {
                match trying.as_mut() {
                    Some(t) => t.await,
                    None => std::future::pending().await,
                }
            }, if trying.is_some() => {
                trying = None;
                match retaken {
                    Retaken::Back(root) => {
                        let Some(slot) = slot.upgrade() else { return };
                        let Ok(clients) = Clients::new(root, &config) else { return };
                        states = clients.client.state_watcher();
                        session = Attached::of(&clients.client);
                        // The replaced client is dropped here (and by the requests still on it).
                        *slot.clients.lock().unwrap_or_else(|p| p.into_inner()) = clients;
                        zk::SessionState::SyncConnected
                    }
                    Retaken::Expired => zk::SessionState::Expired,
                    Retaken::NotYet => {
                        next_try = Some(tokio::time::Instant::now() + jittered(pause));
                        pause = (pause * 2).min(PAUSE_MAX);
                        continue;
                    }
                }
            }
            _ = sleep_until(next_try), if next_try.is_some() && trying.is_none() => {
                next_try = None;
                if slot.strong_count() == 0 {
                    return;
                }
                trying = Some(retake(Arc::clone(&config), &session));
                continue;
            }
        };
        let events: &[SessionEvent] = match state {
            zk::SessionState::Disconnected if !connected => continue,
            zk::SessionState::Disconnected => &[SessionEvent::Disconnected],
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly if !connected => {
                &[SessionEvent::Reconnected]
            }
            // Connected again after connected: a disconnection came and went between two
            // looks at the state.
            zk::SessionState::SyncConnected | zk::SessionState::ConnectedReadOnly => {
                &[SessionEvent::Disconnected, SessionEvent::Reconnected]
            }
            // An authentication refused on reconnect ends the session for this client too.
            zk::SessionState::Expired | zk::SessionState::AuthFailed => &[SessionEvent::Expired],
            // Closed by this client (the transport was dropped): nobody listens.
            zk::SessionState::Closed => {
                state_tx.send_replace(state);
                return;
            }
        };
        state_tx.send_replace(state);
        for event in events {
            let notice = match extra {
                None => ZkNotice::Session(*event),
                Some(timeout) => ZkNotice::Extra {
                    timeout,
                    event: *event,
                },
            };
            if notices.send(notice).is_err() {
                return;
            }
        }
        if state.is_terminated() {
            return;
        }
        connected = state != zk::SessionState::Disconnected;
        if connected {
            (next_try, trying) = (None, None);
        } else {
            pause = PAUSE_FIRST;
            next_try = Some(tokio::time::Instant::now() + jittered(TAKE_BACK_AFTER));
        }
    }
}

/// Connects a new session as soon as a member answers, within the connect timeout: each member
/// once, then again after a pause doubling from [`PAUSE_FIRST`] to [`PAUSE_MAX`]. The crate's
/// own connect pauses between rounds without a cap (1.6 s and more after a few rounds), so a
/// session opened while the ensemble was down (a client's first, or the next after one expired)
/// came up to that long after the ensemble was back.
pub(super) async fn reach_soon(config: &Config, connector: zk::Connector) -> Result<zk::Client, ZkFailure> {
    let connector = connector.with_fail_eagerly();
    let deadline = tokio::time::Instant::now() + config.connect_timeout;
    let mut pause = PAUSE_FIRST;
    let tries = async {
        loop {
            match reach(config, connector.clone()).await {
                // No member took it this round (or the round's own wait ran out): again after
                // the pause, until the connect timeout ends the tries with its own message.
                Err(ZkFailure::ConnectionLoss(_)) => {
                    tokio::time::sleep(jittered(pause)).await;
                    pause = (pause * 2).min(PAUSE_MAX);
                }
                reached => return reached,
            }
        }
    };
    match tokio::time::timeout_at(deadline, tries).await {
        Ok(reached) => reached,
        Err(_) => Err(connect_timed_out(config)),
    }
}

/// `pause` and up to a fifth more, so clients that lost the same ensemble do not all come back
/// in the same instant.
fn jittered(pause: Duration) -> Duration {
    use crate::random::RandomSource;
    let fifth = (pause.as_millis() as u64 / 5).max(1);
    pause + Duration::from_millis(crate::random::OsRandom.next_u64() % fifth)
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
