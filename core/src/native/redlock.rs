//! The public Rust API for Redlock over N independent masters: `Redlock` → `RedlockLock` →
//! `RedlockLease`, driven by one task that owns the [`RedlockEngine`] and one connection per
//! master.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};

use super::convert;
use super::driver::{sleep_until, LeaseState, LeaseWatch, SHUTDOWN_GRACE};
use super::holder::Holder;
use super::link::Link;
use crate::connect::{RedisUrl, RedlockOptions};
use crate::engine::{Event, LeaseId, OpId, RequestId, Wait};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{self, LockOptions};
use crate::random::OsRandom;
use crate::redis::reply::Reply;
use crate::redlock::{NodeRequest, RedlockConfig, RedlockEngine, RedlockOutcome};
use crate::time::{Duration, Instant};

// `RedlockOptions` (the data, its defaults and rules) lives in `crate::connect`, shared with
// the Node binding; connecting is the native driver's part.
impl RedlockOptions {
    /// Connects to every master it can reach; masters that are down are retried in the
    /// background (they count as failed votes meanwhile). Fails if none is reachable or a
    /// master refuses the credentials.
    pub async fn connect(self) -> Result<Redlock> {
        self.validate()?;
        let urls: Vec<RedisUrl> = self.urls.iter().map(|u| RedisUrl::parse(u)).collect::<Result<_>>()?;
        let config = self.config();
        let links: Vec<Link> = urls
            .iter()
            .map(|u| Link::new(u, self.tls_ca_pem.as_deref(), self.connect_timeout, self.response_timeout, None))
            .collect::<Result<_>>()?;
        let results = futures_util::future::join_all(links.iter().map(Link::first_connect)).await;
        if let Some(Err(e)) = results.iter().find(|r| matches!(r, Err(e) if e.kind() == ErrorKind::Authentication)) {
            return Err(e.clone());
        }
        if results.iter().all(Result::is_err) {
            let first = results.into_iter().find_map(Result::err).expect("all failed");
            return Err(Error::new(ErrorKind::Connection, format!("no master is reachable: {}", first.message())));
        }
        let engine = RedlockEngine::new(config.clone(), Box::new(OsRandom))?;
        let (tx, rx) = mpsc::unbounded_channel();
        let driver = RedlockDriver::new(engine, links, urls.clone());
        tokio::spawn(driver.run(rx));
        Ok(Redlock { inner: Arc::new(Inner { tx, urls, config, tickets: AtomicU64::new(1) }) })
    }
}

struct Inner {
    tx: mpsc::UnboundedSender<Msg>,
    urls: Vec<RedisUrl>,
    /// The deployment's settings, for checks made before anything reaches the driver.
    config: RedlockConfig,
    tickets: AtomicU64,
}

/// A Redlock deployment: N independent masters, a lock held when a majority grants it.
/// Cheap to clone; must be used inside a tokio runtime. Grants carry no fencing token
/// (PROTOCOL.md §8 explains why); use [`Client`](super::Client) where the resource needs one.
#[derive(Clone)]
pub struct Redlock {
    inner: Arc<Inner>,
}

impl Redlock {
    /// Connects to the masters at `urls` with the default settings.
    pub async fn connect<S: Into<String>>(urls: impl IntoIterator<Item = S>) -> Result<Redlock> {
        RedlockOptions::new(urls).connect().await
    }

    /// A lock named `name`; `options.lease` must not exceed the deployment's `max_lease`.
    pub fn lock(&self, name: &str, options: LockOptions) -> Result<RedlockLock> {
        options::validate_name(name)?;
        options.validate()?;
        self.inner.config.check_lease(options.lease)?;
        Ok(RedlockLock { redlock: self.clone(), name: name.into(), options, holder: Holder::default() })
    }

    /// `options` for a lock of this deployment by the rule of every binding
    /// ([`crate::connect::redlock_lock_options`]): a lease the caller did not give
    /// (`lease_given` false) becomes 30 s or `max_lease` if shorter; one that does not fit is
    /// `INVALID_ARGUMENT`.
    pub fn lock_options(&self, options: LockOptions, lease_given: bool) -> Result<LockOptions> {
        crate::connect::redlock_lock_options(&self.inner.config, options, lease_given)
    }

    /// The deployment's maximum lease (see [`RedlockConfig::max_lease`]).
    pub fn max_lease(&self) -> Duration {
        self.inner.config.max_lease
    }

    /// How many masters, and how many must agree.
    pub fn masters(&self) -> (usize, usize) {
        let n = self.inner.urls.len();
        (n, n / 2 + 1)
    }

    /// The masters' URLs with passwords redacted.
    pub fn urls(&self) -> Vec<String> {
        self.inner.urls.iter().map(|u| u.to_string()).collect()
    }

    /// Releases every lease and cancels every wait, then stops the driver.
    pub async fn close(&self) {
        let (reply, done) = oneshot::channel();
        if self.inner.tx.send(Msg::Shutdown { reply }).is_ok() {
            let _ = done.await;
        }
    }

    fn send(&self, msg: Msg) -> Result<()> {
        self.inner.tx.send(msg).map_err(|_| closed())
    }
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Redlock").field("masters", &self.urls()).finish()
    }
}

/// A handle on one named Redlock. Holding it is a [`RedlockLease`].
///
/// Not reentrant, and it never waits for itself: while it (or a clone) holds a live lease,
/// `acquire`, `acquire_default` and `try_acquire` fail at once with `ALREADY_HELD` and send
/// nothing; an acquire still retrying when another acquire through the same handle wins ends
/// with `ALREADY_HELD` too. A released, dropped, lost or expired lease frees the handle.
#[derive(Clone, Debug)]
pub struct RedlockLock {
    redlock: Redlock,
    name: Arc<str>,
    options: LockOptions,
    holder: Holder,
}

impl RedlockLock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock's options.
    pub fn options(&self) -> &LockOptions {
        &self.options
    }

    /// Retries (with jittered pauses) for up to `timeout`; a `TIMEOUT` error saying why the last
    /// attempt failed if no majority could be had. Dropping the future cancels the wait.
    pub async fn acquire(&self, timeout: Duration) -> Result<RedlockLease> {
        options::validate_wait(timeout)?;
        self.run(Wait::For(timeout)).await?.ok_or_else(|| Error::new(ErrorKind::Timeout, "the lock is held (timeout was zero)"))
    }

    /// Waits with the lock's default timeout (`LockOptions::wait_timeout`; `None` waits forever).
    pub async fn acquire_default(&self) -> Result<RedlockLease> {
        let wait = self.options.wait_timeout.map_or(Wait::Forever, Wait::For);
        self.run(wait).await?.ok_or_else(|| Error::new(ErrorKind::Timeout, "the lock is held"))
    }

    /// One attempt: `Some(lease)` if a majority granted, `None` if the lock is held; a
    /// `CONNECTION` error if too few masters could vote.
    pub async fn try_acquire(&self) -> Result<Option<RedlockLease>> {
        self.run(Wait::Try).await
    }

    async fn run(&self, wait: Wait) -> Result<Option<RedlockLease>> {
        self.holder.check(&self.name)?;
        let lease = self.holder.race(&self.name, self.run_fresh(wait)).await?;
        match lease {
            Some(mut l) => {
                // On a lost race the new lease is dropped here, which gives it back.
                self.holder.hold(&self.name, l.id, l.state.clone())?;
                l.holder = Some(self.holder.clone());
                Ok(Some(l))
            }
            None => Ok(None),
        }
    }

    async fn run_fresh(&self, wait: Wait) -> Result<Option<RedlockLease>> {
        let ticket = self.redlock.inner.tickets.fetch_add(1, Ordering::Relaxed);
        let (reply, result) = oneshot::channel();
        self.redlock.send(Msg::Acquire { ticket, name: self.name.to_string(), options: self.options.clone(), wait, reply })?;
        let mut guard = CancelOnDrop { redlock: &self.redlock, ticket, result: Some(result) };
        let rx = guard.result.as_mut().expect("set until the wait ends");
        let outcome = rx.await.map_err(|_| closed());
        guard.result = None;
        Ok(outcome??.map(|a| RedlockLease {
            redlock: self.redlock.clone(),
            name: self.name.clone(),
            id: a.lease,
            state: a.state,
            released: AtomicBool::new(false),
            holder: None,
        }))
    }
}

struct CancelOnDrop<'a> {
    redlock: &'a Redlock,
    ticket: u64,
    result: Option<oneshot::Receiver<Result<Option<Acquired>>>>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(mut result) = self.result.take() {
            let _ = self.redlock.send(Msg::Cancel { ticket: self.ticket });
            result.close();
            if let Ok(Ok(Some(a))) = result.try_recv() {
                let _ = self.redlock.send(Msg::Release { lease: a.lease, reply: None });
            }
        }
    }
}

/// Proof that a majority of masters holds the lock for us: extends, releases and reports loss.
/// No fencing token (PROTOCOL.md §8). Dropping it releases the lock in the background.
pub struct RedlockLease {
    redlock: Redlock,
    name: Arc<str>,
    id: LeaseId,
    state: watch::Receiver<LeaseState>,
    released: AtomicBool,
    /// The handle this lease occupies, freed on release or drop.
    holder: Option<Holder>,
}

impl RedlockLease {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the lease is certainly still valid now (drift deducted, renewed, not lost).
    pub fn is_held(&self) -> bool {
        self.watch().is_held()
    }

    /// How long the lease is certainly still valid, if held. Finish protected work within it.
    pub fn remaining(&self) -> Option<Duration> {
        self.watch().remaining()
    }

    /// Sets the remaining lease to `duration` on every master still holding it; needs a
    /// majority, never re-acquires (`NOT_HELD`, and the lease is lost, if a majority lost it).
    pub async fn extend(&self, duration: Duration) -> Result<()> {
        options::validate_lease(duration)?;
        if self.released.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::NotHeld, "the lease was released"));
        }
        let (reply, result) = oneshot::channel();
        self.redlock.send(Msg::Extend { lease: self.id, duration, reply })?;
        result.await.map_err(|_| closed())?
    }

    /// Releases on every master. `Ok(true)` if a majority still held it, `Ok(false)` if not (or
    /// on a second call); a `CONNECTION` error if too few masters confirmed (the rest expire).
    pub async fn release(&self) -> Result<bool> {
        if self.released.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        if let Some(h) = &self.holder {
            h.free(self.id);
        }
        let (reply, result) = oneshot::channel();
        self.redlock.send(Msg::Release { lease: self.id, reply: Some(reply) })?;
        result.await.map_err(|_| closed())?
    }

    /// The reason the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<Error> {
        self.watch().lost_reason()
    }

    /// The loss signal as a `'static` future that does not keep the lease alive (for bindings
    /// that hand it to a callback or another task): `Some(reason)` when the lease is lost,
    /// `None` once it is released normally or its client is gone.
    pub fn lost_signal(&self) -> impl Future<Output = Option<Error>> + Send + 'static {
        self.watch().lost_signal()
    }

    /// Resolves with the reason when the lease is lost (a majority refused a renewal, or its
    /// validity ran out). Stays pending if it is released normally.
    pub async fn lost(&self) -> Error {
        self.watch().lost().await
    }

    fn watch(&self) -> LeaseWatch {
        LeaseWatch(self.state.clone())
    }
}

impl Drop for RedlockLease {
    fn drop(&mut self) {
        if let Some(h) = &self.holder {
            h.free(self.id);
        }
        if !self.released.load(Ordering::Acquire) {
            let _ = self.redlock.send(Msg::Release { lease: self.id, reply: None });
        }
    }
}

impl fmt::Debug for RedlockLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedlockLease").field("name", &self.name).field("held", &self.is_held()).finish()
    }
}

fn closed() -> Error {
    Error::new(ErrorKind::Closed, "the Redlock client is closed")
}

struct Acquired {
    lease: LeaseId,
    state: watch::Receiver<LeaseState>,
}

enum Msg {
    Acquire { ticket: u64, name: String, options: LockOptions, wait: Wait, reply: oneshot::Sender<Result<Option<Acquired>>> },
    Cancel { ticket: u64 },
    Release { lease: LeaseId, reply: Option<oneshot::Sender<Result<bool>>> },
    Extend { lease: LeaseId, duration: Duration, reply: oneshot::Sender<Result<()>> },
    Shutdown { reply: oneshot::Sender<()> },
}

enum Pending {
    Acquire { ticket: u64, reply: oneshot::Sender<Result<Option<Acquired>>> },
    Release { reply: Option<oneshot::Sender<Result<bool>>> },
    Extend { lease: LeaseId, reply: oneshot::Sender<Result<()>> },
}

type ReplyFuture = Pin<Box<dyn Future<Output = (RequestId, Result<Reply>)> + Send>>;

struct RedlockDriver {
    engine: RedlockEngine,
    /// One self-replacing connection per master (see [`Link`]).
    conns: Vec<Link>,
    urls: Vec<RedisUrl>,
    origin: tokio::time::Instant,
    pending: HashMap<OpId, Pending>,
    tickets: HashMap<u64, OpId>,
    leases: HashMap<LeaseId, watch::Sender<LeaseState>>,
    in_flight: FuturesUnordered<ReplyFuture>,
}

impl RedlockDriver {
    fn new(engine: RedlockEngine, conns: Vec<Link>, urls: Vec<RedisUrl>) -> Self {
        RedlockDriver {
            engine,
            conns,
            urls,
            origin: tokio::time::Instant::now(),
            pending: HashMap::new(),
            tickets: HashMap::new(),
            leases: HashMap::new(),
            in_flight: FuturesUnordered::new(),
        }
    }

    fn now(&self) -> Instant {
        Instant::from_origin(self.origin.elapsed())
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        let mut closing: Option<(tokio::time::Instant, Option<oneshot::Sender<()>>)> = None;
        loop {
            self.drain();
            if let Some((deadline, _)) = &closing {
                if self.engine.is_idle() || tokio::time::Instant::now() >= *deadline {
                    break;
                }
            }
            let timer = self.engine.poll_timeout().map(|t| self.origin + t.since_origin());
            let close_at = closing.as_ref().map(|(d, _)| *d);
            tokio::select! {
                biased;
                Some((id, result)) = self.in_flight.next(), if !self.in_flight.is_empty() => {
                    let now = self.now();
                    self.engine.handle_reply(now, id, result);
                }
                msg = rx.recv(), if closing.is_none() => {
                    let now = self.now();
                    match msg {
                        Some(Msg::Shutdown { reply }) => {
                            self.engine.shutdown(now);
                            closing = Some((tokio::time::Instant::now() + SHUTDOWN_GRACE, Some(reply)));
                        }
                        Some(msg) => self.on_msg(now, msg),
                        None => {
                            self.engine.shutdown(now);
                            closing = Some((tokio::time::Instant::now() + SHUTDOWN_GRACE, None));
                        }
                    }
                }
                _ = sleep_until(timer) => {
                    let now = self.now();
                    self.engine.handle_timeout(now);
                }
                _ = sleep_until(close_at) => {}
            }
        }
        for (_, tx) in self.leases.drain() {
            tx.send_replace(LeaseState::Released);
        }
        if let Some((_, Some(reply))) = closing {
            let _ = reply.send(());
        }
    }

    fn on_msg(&mut self, now: Instant, msg: Msg) {
        match msg {
            Msg::Acquire { ticket, name, options, wait, reply } => match self.engine.acquire(now, &name, &options, wait) {
                Ok(op) => {
                    self.tickets.insert(ticket, op);
                    self.pending.insert(op, Pending::Acquire { ticket, reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Cancel { ticket } => {
                if let Some(op) = self.tickets.remove(&ticket) {
                    self.pending.remove(&op);
                    self.engine.cancel(now, op);
                }
            }
            Msg::Release { lease, reply } => {
                if let Some(tx) = self.leases.remove(&lease) {
                    tx.send_replace(LeaseState::Released);
                }
                let op = self.engine.release(now, lease);
                self.pending.insert(op, Pending::Release { reply });
            }
            Msg::Extend { lease, duration, reply } => match self.engine.extend(now, lease, duration) {
                Ok(op) => {
                    self.pending.insert(op, Pending::Extend { lease, reply });
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            },
            Msg::Shutdown { .. } => unreachable!("handled by run"),
        }
    }

    fn drain(&mut self) {
        loop {
            while let Some(req) = self.engine.poll_request() {
                self.perform(req);
            }
            let Some(ev) = self.engine.poll_event() else { break };
            self.deliver(ev);
        }
    }

    fn perform(&mut self, req: NodeRequest) {
        let NodeRequest { id, master, command } = req;
        let link = self.conns[master].clone();
        if !link.is_connected() {
            // Down (since connect, or being replaced): a vote cannot wait for a connection, so
            // answer at once and let the link connect in the background.
            link.kick();
            let e = Error::new(ErrorKind::Connection, format!("master {} is not connected", self.urls[master]));
            self.in_flight.push(Box::pin(async move { (id, Err(e)) }));
            return;
        }
        let mut pipe = redis::pipe();
        let mut cmd = redis::Cmd::new();
        for a in &command.0 {
            cmd.arg(a.as_slice());
        }
        pipe.add_command(cmd);
        self.in_flight.push(Box::pin(async move {
            let r = link
                .pipeline(&pipe, 1)
                .await
                .and_then(|mut v| v.pop().map(convert::reply).ok_or_else(|| Error::protocol("no reply")));
            (id, r)
        }));
    }

    fn deliver(&mut self, ev: Event<RedlockOutcome>) {
        match ev {
            Event::Completed { op, outcome } => self.complete(op, outcome),
            Event::Renewed { lease, valid_until } => {
                if let Some(tx) = self.leases.get(&lease) {
                    tx.send_replace(LeaseState::Held(self.origin + valid_until.since_origin()));
                }
            }
            Event::Lost { lease, error } => {
                if let Some(tx) = self.leases.remove(&lease) {
                    tx.send_replace(LeaseState::Lost(error));
                }
            }
        }
    }

    fn complete(&mut self, op: OpId, outcome: RedlockOutcome) {
        let now = self.now();
        let Some(pending) = self.pending.remove(&op) else {
            if let RedlockOutcome::Acquired { lease, .. } = outcome {
                let _ = self.engine.release(now, lease);
            }
            return;
        };
        let unexpected = |what: &str, o: RedlockOutcome| Error::protocol(format!("unexpected outcome for {what}: {o:?}"));
        match pending {
            Pending::Acquire { ticket, reply } => {
                self.tickets.remove(&ticket);
                let result = match outcome {
                    RedlockOutcome::Acquired { lease, valid_until } => {
                        let (tx, rx) = watch::channel(LeaseState::Held(self.origin + valid_until.since_origin()));
                        self.leases.insert(lease, tx);
                        Ok(Some(Acquired { lease, state: rx }))
                    }
                    RedlockOutcome::NotAcquired => Ok(None),
                    RedlockOutcome::Failed(e) => Err(e),
                    o => Err(unexpected("acquire", o)),
                };
                if let Err(Ok(Some(a))) = reply.send(result) {
                    self.leases.remove(&a.lease);
                    let _ = self.engine.release(now, a.lease);
                }
            }
            Pending::Release { reply } => {
                let result = match outcome {
                    RedlockOutcome::Released { was_held } => Ok(was_held),
                    RedlockOutcome::Failed(e) => Err(e),
                    o => Err(unexpected("release", o)),
                };
                if let Some(reply) = reply {
                    let _ = reply.send(result);
                }
            }
            Pending::Extend { lease, reply } => {
                let result = match outcome {
                    RedlockOutcome::Extended { valid_until } => {
                        if let Some(tx) = self.leases.get(&lease) {
                            tx.send_replace(LeaseState::Held(self.origin + valid_until.since_origin()));
                        }
                        Ok(())
                    }
                    RedlockOutcome::Failed(e) => Err(e),
                    o => Err(unexpected("extend", o)),
                };
                let _ = reply.send(result);
            }
        }
    }
}

