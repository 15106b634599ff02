//! The public Rust API: `Client` → `Lock` → `Lease`.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{mpsc, oneshot, watch};

use super::cluster_link::ClusterLink;
use super::driver::{Acquired, Conn, Driver, LeaseState, LeaseWatch, Msg};
use super::holder::Holder;
use super::link::Link;
use crate::connect::{ClientOptions, RedisUrl};
use crate::engine::{Engine, EngineConfig, LeaderInfo, LeaseId, Primitive, Wait};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{self, LockOptions};
use crate::random::OsRandom;
use crate::time::Duration;

// `ClientOptions` (the data, its defaults and rules) lives in `crate::connect`, shared with
// the Node binding; connecting is the native driver's part.
impl ClientOptions {
    /// Connects and authenticates; a failed AUTH is an `AUTHENTICATION` error, never a fallback.
    pub async fn connect(self) -> Result<Client> {
        self.validate()?;
        let url = RedisUrl::parse(&self.url)?;
        let (push_tx, push_rx) = mpsc::unbounded_channel();
        let conn = if self.cluster {
            let link = ClusterLink::connect(
                &url,
                self.tls_ca_pem.as_deref(),
                self.connect_timeout,
                self.response_timeout,
                push_tx,
            )
            .await?;
            Conn::Cluster(link)
        } else {
            Conn::Single(self.connect_single(&url, push_tx).await?)
        };
        let config = EngineConfig {
            key_prefix: self.key_prefix.clone(),
            replica_acks: self.replica_acks,
            split_pipelines: self.cluster,
            ..EngineConfig::default()
        };
        let engine = Engine::new(config, Box::new(OsRandom))?;
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(Driver::new(engine, conn).run(rx, push_rx));
        Ok(Client {
            inner: Arc::new(Inner {
                tx,
                url,
                tickets: AtomicU64::new(1),
            }),
        })
    }

    async fn connect_single(
        &self,
        url: &RedisUrl,
        push_tx: mpsc::UnboundedSender<redis::PushInfo>,
    ) -> Result<Link> {
        Link::connect(url, self.tls_ca_pem.as_deref(), self.connect_timeout, self.response_timeout, Some(push_tx)).await
    }
}

struct Inner {
    tx: mpsc::UnboundedSender<Msg>,
    url: RedisUrl,
    tickets: AtomicU64,
}

/// A connection to one Redis server, shared by every lock made from it. Cheap to clone.
///
/// Must be created and used inside a tokio runtime. Dropping the last handle (client, locks and
/// leases) releases every lease it still holds.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl Client {
    /// Connects to `redis://[user:password@]host[:port][/db]` or `rediss://...` (TLS, verified
    /// against the system roots; see [`ClientOptions::tls_ca_pem`]).
    pub async fn connect(url: &str) -> Result<Client> {
        ClientOptions::new(url).connect().await
    }

    /// A mutex named `name` with `options`; both are validated here.
    pub fn lock(&self, name: &str, options: LockOptions) -> Result<Lock> {
        self.primitive(name, Primitive::Mutex, options, false)
    }

    /// A reentrant mutex: acquiring it again through the same handle (or a clone of it) while it
    /// holds the lock succeeds at once and adds a hold; only the last release frees it.
    pub fn reentrant_lock(&self, name: &str, options: LockOptions) -> Result<Lock> {
        self.primitive(name, Primitive::Mutex, options, true)
    }

    /// A counting semaphore named `name` with `permits` permits: each acquisition takes one
    /// permit as a [`Lease`] that returns by itself if its holder dies. Waiters are served FIFO.
    pub fn semaphore(&self, name: &str, permits: u32, options: LockOptions) -> Result<Lock> {
        self.primitive(name, Primitive::Semaphore { permits }, options, false)
    }

    /// A read-write lock named `name`: many readers or one writer. A queued writer blocks
    /// readers that arrive after it (see [`ReadWriteLock::with_writers_first`]).
    pub fn read_write_lock(&self, name: &str, options: LockOptions) -> Result<ReadWriteLock> {
        let write = self.primitive(name, Primitive::Write, options.clone(), false)?;
        let read = self.primitive(name, Primitive::Read { writers_first: true }, options, false)?;
        Ok(ReadWriteLock { read, write })
    }

    /// A leader election named `name`. `options.lease` bounds how long a crashed leader keeps
    /// leadership; the watchdog renews it while the leader lives.
    pub fn election(&self, name: &str, options: LockOptions) -> Result<Election> {
        options::validate_name(name)?;
        options.validate()?;
        Ok(Election { client: self.clone(), name: name.into(), options, holder: Holder::default() })
    }

    /// A handle on `primitive` named `name` (the general form behind [`lock`](Self::lock),
    /// [`semaphore`](Self::semaphore) and the others). `reentrant` is allowed for the mutex and
    /// both halves of a read-write lock.
    pub fn primitive(
        &self,
        name: &str,
        primitive: Primitive,
        options: LockOptions,
        reentrant: bool,
    ) -> Result<Lock> {
        options::validate_name(name)?;
        options.validate()?;
        options::validate_primitive(&primitive)?;
        if reentrant && matches!(primitive, Primitive::Semaphore { .. } | Primitive::Leader { .. }) {
            return Err(Error::invalid("only mutexes and read-write locks can be reentrant"));
        }
        Ok(Lock {
            client: self.clone(),
            name: name.into(),
            primitive,
            options,
            reentrant,
            current: Arc::new(Mutex::new(None)),
            holder: Holder::default(),
        })
    }

    /// Releases every lease and cancels every wait of this client, then stops its driver.
    /// Further calls on any handle fail with `CLOSED`.
    pub async fn close(&self) {
        let (reply, done) = oneshot::channel();
        if self.inner.tx.send(Msg::Shutdown { reply }).is_ok() {
            let _ = done.await;
        }
    }

    /// The server URL with the password redacted.
    pub fn url(&self) -> String {
        self.inner.url.to_string()
    }

    fn send(&self, msg: Msg) -> Result<()> {
        self.inner.tx.send(msg).map_err(|_| closed())
    }
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.inner.url.to_string())
            .finish()
    }
}

fn closed() -> Error {
    Error::new(ErrorKind::Closed, "the client is closed")
}

/// A handle on a named lock (a mutex, a semaphore, one half of a read-write lock, or an
/// election's leadership). Holding it is represented by a [`Lease`], never by a thread. Clones
/// are the same handle (they share reentrant holds).
///
/// A non-reentrant handle holds at most one lease at a time and never waits for itself: while
/// it (or a clone) holds a live lease, `acquire`, `acquire_default` and `try_acquire` fail at
/// once with `ALREADY_HELD` and send nothing; an acquire still waiting when another acquire
/// through the same handle wins ends with `ALREADY_HELD` too (its wait is withdrawn). Once the
/// lease is released, dropped, lost or past its validity, the handle acquires again. A second
/// permit of a semaphore (or a second read hold) takes a second handle.
#[derive(Clone, Debug)]
pub struct Lock {
    client: Client,
    name: Arc<str>,
    primitive: Primitive,
    options: LockOptions,
    reentrant: bool,
    /// The lease this reentrant handle holds, if any.
    current: Arc<Mutex<Option<LeaseId>>>,
    /// The lease this non-reentrant handle holds, if any (shared by its clones and leases).
    holder: Holder,
}

/// The two halves of a read-write lock; each is a [`Lock`] whose grants are [`Lease`]s.
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    /// The shared half: many readers hold it at once, never beside a writer.
    pub fn read(&self) -> &Lock {
        &self.read
    }

    /// The exclusive half; its grants carry fencing tokens larger than every earlier grant's.
    pub fn write(&self) -> &Lock {
        &self.write
    }

    /// With `false`, readers join current readers even past queued writers (more read
    /// throughput, but a steady stream of readers can starve writers).
    pub fn with_writers_first(mut self, writers_first: bool) -> Self {
        self.read.primitive = Primitive::Read { writers_first };
        self
    }

    /// Makes both halves reentrant (see [`Client::reentrant_lock`]).
    pub fn reentrant(mut self) -> Self {
        self.read.reentrant = true;
        self.write.reentrant = true;
        self
    }
}

/// A leader election: candidates campaign (wait to lead), the leader resigns by releasing its
/// [`Lease`], and anyone can observe the current leader and its term.
///
/// An `Election` (and its clones) campaigns as one candidate: while it leads (holds a live
/// leadership lease), `campaign` and `try_campaign` fail at once with `ALREADY_HELD` instead of
/// queueing behind its own leadership; a campaign still waiting when another campaign through
/// the same `Election` wins ends with `ALREADY_HELD`. After resigning (or losing leadership) it
/// campaigns again. Separate candidates in one process take separate `Election`s
/// ([`Client::election`] again).
#[derive(Clone, Debug)]
pub struct Election {
    client: Client,
    name: Arc<str>,
    options: LockOptions,
    holder: Holder,
}

impl Election {
    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Waits up to `timeout` to become leader, publishing `value` to observers; `None` uses the
    /// election's `LockOptions::wait_timeout` (itself `None`: until elected). Leadership is the
    /// returned lease: its fencing token is the term, its loss signal fires when leadership is
    /// lost, and releasing it resigns.
    pub async fn campaign(&self, value: &str, timeout: Option<Duration>) -> Result<Lease> {
        let lock = self.leadership(value)?;
        match timeout.or(self.options.wait_timeout) {
            Some(t) => lock.acquire(t).await,
            None => lock.run(Wait::Forever).await?.ok_or_else(|| Error::protocol("wait ended without a lease")),
        }
    }

    /// One attempt to lead, without waiting: `Some(leadership)` if nobody leads (and nobody
    /// queues ahead), `None` otherwise.
    pub async fn try_campaign(&self, value: &str) -> Result<Option<Lease>> {
        self.leadership(value)?.try_acquire().await
    }

    /// A leadership handle for `value`; every one of them shares this election's holder, so
    /// the election as a whole leads at most once.
    fn leadership(&self, value: &str) -> Result<Lock> {
        let mut lock =
            self.client.primitive(&self.name, Primitive::Leader { value: value.into() }, self.options.clone(), false)?;
        lock.holder = self.holder.clone();
        Ok(lock)
    }

    /// The current leader (its published value, term and remaining lease), or `None`.
    pub async fn observe(&self) -> Result<Option<LeaderInfo>> {
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Observe { name: self.name.to_string(), reply })?;
        result.await.map_err(|_| closed())?
    }
}

impl Lock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lock's options.
    pub fn options(&self) -> &LockOptions {
        &self.options
    }

    /// Which primitive this handle acquires.
    pub fn primitive(&self) -> &Primitive {
        &self.primitive
    }

    /// Whether acquiring again while this handle holds it adds a hold instead of waiting.
    pub fn is_reentrant(&self) -> bool {
        self.reentrant
    }

    /// Waits up to `timeout` for the lock; a `TIMEOUT` error if it stays held. Waiters are served
    /// in arrival order and woken by the release itself (no polling). Dropping the future
    /// cancels the wait and removes it from the server.
    pub async fn acquire(&self, timeout: Duration) -> Result<Lease> {
        options::validate_wait(timeout)?;
        match self.run(Wait::For(timeout)).await? {
            Some(lease) => Ok(lease),
            None => Err(Error::new(
                ErrorKind::Timeout,
                "the lock is held (timeout was zero)",
            )),
        }
    }

    /// Waits with the lock's default timeout (`LockOptions::wait_timeout`; `None` waits forever).
    pub async fn acquire_default(&self) -> Result<Lease> {
        match self.options.wait_timeout {
            Some(t) => self.acquire(t).await,
            None => self
                .run(Wait::Forever)
                .await?
                .ok_or_else(|| Error::protocol("wait ended without a lease")),
        }
    }

    /// One attempt: `Some(lease)` if acquired, `None` if someone holds it or waiters are queued.
    pub async fn try_acquire(&self) -> Result<Option<Lease>> {
        self.run(Wait::Try).await
    }

    async fn run(&self, wait: Wait) -> Result<Option<Lease>> {
        if self.reentrant {
            let held = *self.current.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(lease) = held {
                let (reply, result) = oneshot::channel();
                self.client.send(Msg::Reacquire { lease, reply })?;
                match result.await.map_err(|_| closed())? {
                    Ok(Some(a)) => {
                        return Ok(Some(Lease::new(self.client.clone(), self.name.clone(), a, None)))
                    }
                    // No longer held (released, lost): acquire afresh below.
                    _ => *self.current.lock().unwrap_or_else(|e| e.into_inner()) = None,
                }
            }
        }
        if self.reentrant {
            let lease = self.run_fresh(wait).await?;
            if let Some(l) = &lease {
                *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(l.id);
            }
            return Ok(lease);
        }
        // Non-reentrant: refuse before sending anything, and stop waiting if a clone wins.
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

    async fn run_fresh(&self, wait: Wait) -> Result<Option<Lease>> {
        let ticket = self.client.inner.tickets.fetch_add(1, Ordering::Relaxed);
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Acquire {
            ticket,
            name: self.name.to_string(),
            primitive: self.primitive.clone(),
            options: self.options.clone(),
            wait,
            reply,
        })?;
        let mut guard = CancelOnDrop {
            client: &self.client,
            ticket,
            result: Some(result),
        };
        let rx = guard.result.as_mut().expect("set until the wait ends");
        let outcome = rx.await.map_err(|_| closed());
        guard.result = None;
        Ok(outcome??.map(|a| Lease::new(self.client.clone(), self.name.clone(), a, None)))
    }
}

/// Cancels a wait whose future was dropped before it finished, and releases a grant that was
/// already delivered but never picked up (the future was dropped between reply and poll).
struct CancelOnDrop<'a> {
    client: &'a Client,
    ticket: u64,
    result: Option<oneshot::Receiver<Result<Option<Acquired>>>>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(mut result) = self.result.take() {
            let _ = self.client.send(Msg::Cancel {
                ticket: self.ticket,
            });
            // After `close`, a later reply fails to send and the driver releases it itself.
            result.close();
            if let Ok(Ok(Some(a))) = result.try_recv() {
                let _ = self.client.send(Msg::Release {
                    lease: a.lease,
                    reply: None,
                });
            }
        }
    }
}

/// Proof of holding a lock: carries the fencing token, extends, releases and reports loss.
/// Dropping it releases the lock (in the background).
pub struct Lease {
    client: Client,
    name: Arc<str>,
    id: LeaseId,
    fencing_token: u64,
    state: watch::Receiver<LeaseState>,
    released: AtomicBool,
    /// The non-reentrant handle this lease occupies, freed on release or drop.
    holder: Option<Holder>,
}

impl Lease {
    fn new(client: Client, name: Arc<str>, a: Acquired, holder: Option<Holder>) -> Self {
        Lease {
            client,
            name,
            id: a.lease,
            fencing_token: a.fencing_token,
            state: a.state,
            released: AtomicBool::new(false),
            holder,
        }
    }

    /// The name of the lock this lease holds.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Strictly greater than every fencing token issued before for this lock name. Pass it to the
    /// resource you protect and have it reject writes with a smaller token.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// Whether the lease is certainly still held now (local view: renewed, not expired, not lost).
    pub fn is_held(&self) -> bool {
        self.watch().is_held()
    }

    /// How long the lease is certainly still valid, if held.
    pub fn remaining(&self) -> Option<Duration> {
        self.watch().remaining()
    }

    /// The reason the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<Error> {
        self.watch().lost_reason()
    }

    /// Sets the remaining lease to `duration` if still held; `NOT_HELD` (and the lease is marked
    /// lost) if it expired or was taken over. Never re-acquires.
    pub async fn extend(&self, duration: Duration) -> Result<()> {
        options::validate_lease(duration)?;
        if self.released.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::NotHeld, "the lease was released"));
        }
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Extend {
            lease: self.id,
            duration,
            reply,
        })?;
        result.await.map_err(|_| closed())?
    }

    /// Releases the lock (owner-only). `Ok(true)` if it was still held, `Ok(false)` if it had
    /// already expired or been taken over. A second call returns `Ok(false)`. A `CONNECTION`
    /// error means the release was not confirmed: the lease is no longer renewed and the release
    /// is retried in the background until it lands or the lease runs out.
    pub async fn release(&self) -> Result<bool> {
        if self.released.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        if let Some(h) = &self.holder {
            h.free(self.id);
        }
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Release {
            lease: self.id,
            reply: Some(reply),
        })?;
        result.await.map_err(|_| closed())?
    }

    /// Resolves with the reason when the lease is lost (renewal refused, deleted behind our
    /// back, expired). Stays pending forever if the lease is released normally.
    pub async fn lost(&self) -> Error {
        self.watch().lost().await
    }

    /// The loss signal as a `'static` future that does not keep the lease alive (for bindings
    /// that hand it to a callback or another task): `Some(reason)` when the lease is lost,
    /// `None` once it is released normally or its client is gone.
    pub fn lost_signal(&self) -> impl std::future::Future<Output = Option<Error>> + Send + 'static {
        self.watch().lost_signal()
    }

    fn watch(&self) -> LeaseWatch {
        LeaseWatch(self.state.clone())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(h) = &self.holder {
            h.free(self.id);
        }
        if !self.released.load(Ordering::Acquire) {
            let _ = self.client.send(Msg::Release {
                lease: self.id,
                reply: None,
            });
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("fencing_token", &self.fencing_token)
            .field("held", &self.is_held())
            .finish()
    }
}
