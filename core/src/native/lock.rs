//! Lock handles: [`Lock`] (a mutex, a semaphore, one half of a [`ReadWriteLock`], an
//! [`Election`]'s leadership), the same type for every backend. A handle validates nothing at
//! acquire time that [`Client`] did not already check when it made it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use super::client::{closed, Client};
use super::holder::Holder;
use crate::holding::Owner;
use super::lease::Lease;
use super::message::{Acquired, Msg};
use crate::capabilities::Capability;
use crate::engine::{LeaderInfo, LeaseId, Primitive, Wait};
use crate::error::{Error, ErrorKind, Result};
use crate::inspect::{Kind, Snapshot};
use crate::options::{self, LockOptions};
use crate::time::Duration;

/// Making handles: each checks the name, the options and the backend's capabilities once, here.
impl Client {
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
    /// permit as a [`Lease`](super::Lease) that returns by itself if its holder dies. Waiters
    /// are served FIFO.
    pub fn semaphore(&self, name: &str, permits: u32, options: LockOptions) -> Result<Lock> {
        self.primitive(name, Primitive::Semaphore { permits }, options, false)
    }

    /// A read-write lock named `name`: many readers or one writer. A queued writer blocks
    /// readers that arrive after it (see [`ReadWriteLock::with_writers_first`]).
    pub fn read_write_lock(&self, name: &str, options: LockOptions) -> Result<ReadWriteLock> {
        let write = self.primitive(name, Primitive::Write, options.clone(), false)?;
        let read = self.primitive(name, Primitive::Read { writers_first: true }, options, false)?;
        Ok(ReadWriteLock::new(read, write))
    }

    /// A leader election named `name`. `options.lease` bounds how long a crashed leader keeps
    /// leadership; the watchdog renews it while the leader lives.
    pub fn election(&self, name: &str, options: LockOptions) -> Result<Election> {
        self.capabilities().require(Capability::Election)?;
        self.check(name, &options)?;
        Ok(Election::new(self.clone(), name.into(), options, Holder::default()))
    }

    /// A handle on `primitive` named `name` (the general form behind [`lock`](Self::lock),
    /// [`semaphore`](Self::semaphore) and the others). `reentrant` is allowed for the mutex and
    /// both halves of a read-write lock. `UNSUPPORTED` if the backend lacks the primitive.
    pub fn primitive(&self, name: &str, primitive: Primitive, options: LockOptions, reentrant: bool) -> Result<Lock> {
        let caps = self.capabilities();
        match primitive {
            Primitive::Mutex => {}
            Primitive::Semaphore { .. } => caps.require(Capability::Semaphore)?,
            Primitive::Read { .. } | Primitive::Write => caps.require(Capability::ReadWrite)?,
            Primitive::Leader { .. } => caps.require(Capability::Election)?,
        }
        if reentrant {
            caps.require(Capability::Reentrant)?;
        }
        if options.min_hold.is_some() {
            caps.require(Capability::MinHold)?;
        }
        self.check(name, &options)?;
        options::validate_primitive(&primitive)?;
        if reentrant && matches!(primitive, Primitive::Semaphore { .. } | Primitive::Leader { .. }) {
            return Err(Error::invalid("only mutexes and read-write locks can be reentrant"));
        }
        Ok(Lock::new(self.clone(), name.into(), primitive, options, reentrant))
    }

    /// The name and options of a new handle, by the rules of this client's backend.
    fn check(&self, name: &str, options: &LockOptions) -> Result<()> {
        options::validate_name(name)?;
        options.validate()?;
        if let Some(bound) = self.lease_bound() {
            bound.check_lease(options.lease)?;
        }
        Ok(())
    }
}

/// A handle on a named lock (a mutex, a semaphore, one half of a read-write lock, or an
/// election's leadership). Holding it is represented by a [`Lease`], never by a thread. Clones
/// are the same handle (they share reentrant holds).
///
/// Every acquire is made by an [`Owner`]: the handle itself unless [`Lock::as_owner`] names the
/// caller (bindings pass their thread or task). A non-reentrant handle holds at most one lease
/// per owner and an owner never waits for itself: while the owner holds a live lease through
/// the handle (or a clone), its `acquire`, `acquire_default` and `try_acquire` fail at once
/// with `ALREADY_HELD` and send nothing; an acquire of that owner still waiting when another
/// acquire of the same owner wins ends with `ALREADY_HELD` too (its wait is withdrawn). Other
/// owners wait their turn. Once the lease is released, dropped, lost or past its validity, the
/// owner acquires again. A second permit of a semaphore (or a second read hold) for one owner
/// takes a second handle. A reentrant handle counts holds per owner the same way.
#[derive(Clone, Debug)]
pub struct Lock {
    client: Client,
    name: Arc<str>,
    primitive: Primitive,
    options: LockOptions,
    reentrant: bool,
    /// Who acquires through this value of the handle (its clones may name other owners).
    owner: Owner,
    /// The lease each owner holds through this reentrant handle.
    current: Arc<Mutex<HashMap<Owner, LeaseId>>>,
    /// The leases this non-reentrant handle holds, one per owner (shared by its clones and leases).
    holder: Holder,
}

/// The two halves of a read-write lock; each is a [`Lock`] whose grants are [`Lease`]s.
#[derive(Clone, Debug)]
pub struct ReadWriteLock {
    read: Lock,
    write: Lock,
}

impl ReadWriteLock {
    pub(crate) fn new(read: Lock, write: Lock) -> Self {
        ReadWriteLock { read, write }
    }

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

    /// Reads the read-write lock: its readers and writer, and its waiters in queue order
    /// (see [`Client::inspect`]).
    pub async fn inspect(&self) -> Result<Snapshot> {
        self.write.inspect().await
    }

    /// Makes both halves reentrant (see [`Client::reentrant_lock`]); `UNSUPPORTED` where the
    /// backend has no reentrant locks (every backend with read-write locks has them today).
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
    pub(crate) fn new(client: Client, name: Arc<str>, options: LockOptions, holder: Holder) -> Self {
        Election { client, name, options, holder }
    }

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
            None => lock.run(Wait::Forever, std::future::pending()).await?.ok_or_else(|| Error::protocol("wait ended without a lease")),
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

    /// Reads the election: its leader (a holder with the value it published) and the other
    /// candidates in queue order (see [`Client::inspect`]).
    pub async fn inspect(&self) -> Result<Snapshot> {
        self.client.inspect(&self.name, Kind::Election).await
    }

    /// The current leader (its published value, term and remaining lease), or `None`.
    pub async fn observe(&self) -> Result<Option<LeaderInfo>> {
        self.client.capabilities().require(Capability::Observe)?;
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Observe { name: self.name.to_string(), reply })?;
        result.await.map_err(|_| closed())?
    }
}

impl Lock {
    pub(crate) fn new(client: Client, name: Arc<str>, primitive: Primitive, options: LockOptions, reentrant: bool) -> Self {
        Lock {
            client,
            name,
            primitive,
            options,
            reentrant,
            owner: Owner::HANDLE,
            current: Arc::default(),
            holder: Holder::default(),
        }
    }

    /// The same handle (sharing its holds) acquiring as `owner`: an owner never waits for its
    /// own lease (`ALREADY_HELD`), other owners wait their turn.
    pub fn as_owner(&self, owner: Owner) -> Lock {
        Lock { owner, ..self.clone() }
    }

    /// Who acquires through this value of the handle ([`Owner::HANDLE`] unless set).
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The client this handle belongs to.
    pub fn client(&self) -> &Client {
        &self.client
    }

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

    /// Reads this lock's holders and waiters (see [`Client::inspect`]): a semaphore handle
    /// reads the semaphore, a read or write handle the whole read-write lock. Racy by nature:
    /// for humans and dashboards; to decide whether to write, use the fencing token.
    pub async fn inspect(&self) -> Result<Snapshot> {
        self.client.inspect_as(&self.name, self.primitive.clone()).await
    }

    /// Whether anyone holds this lock now (Redisson's `isLocked`, redis-py's `locked`): one
    /// [`inspect`](Self::inspect). Racy by nature: for humans and dashboards; to decide whether
    /// to write, use the fencing token.
    pub async fn is_locked(&self) -> Result<bool> {
        Ok(self.inspect().await?.is_locked())
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
        match self.run(Wait::For(timeout), std::future::pending()).await? {
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
                .run(Wait::Forever, std::future::pending())
                .await?
                .ok_or_else(|| Error::protocol("wait ended without a lease")),
        }
    }

    /// One attempt: `Some(lease)` if acquired, `None` if someone holds it or waiters are queued.
    pub async fn try_acquire(&self) -> Result<Option<Lease>> {
        self.run(Wait::Try, std::future::pending()).await
    }

    /// Waits as [`acquire`](Self::acquire) (`Some(timeout)`) or
    /// [`acquire_default`](Self::acquire_default) (`None`) until `cancel` resolves: then the wait
    /// is cancelled through the engine, and this returns `CANCELLED` only once what it left on
    /// the server is removed (or `UNDO_WAIT` passed), a grant that raced the cancel released
    /// first. Unlike dropping the future, whose caller moves on before the server is told.
    pub async fn acquire_unless(&self, timeout: Option<Duration>, cancel: impl Future<Output = ()>) -> Result<Lease> {
        let wait = match timeout.or(self.options.wait_timeout) {
            Some(t) => {
                options::validate_wait(t)?;
                Wait::For(t)
            }
            None => Wait::Forever,
        };
        let forever = matches!(wait, Wait::Forever);
        match self.run(wait, cancel).await? {
            Some(lease) => Ok(lease),
            None if forever => Err(Error::protocol("wait ended without a lease")),
            None => Err(Error::new(ErrorKind::Timeout, "the lock is held (timeout was zero)")),
        }
    }

    async fn run(&self, wait: Wait, cancel: impl Future<Output = ()>) -> Result<Option<Lease>> {
        if self.reentrant {
            let held = self.current.lock().unwrap_or_else(|e| e.into_inner()).get(&self.owner).copied();
            if let Some(lease) = held {
                let (reply, result) = oneshot::channel();
                self.client.send(Msg::Reacquire { lease, reply })?;
                match result.await.map_err(|_| closed())? {
                    Ok(Some(a)) => {
                        return Ok(Some(Lease::new(self.client.clone(), self.name.clone(), a, None)))
                    }
                    // No longer held (released, lost): acquire afresh below.
                    _ => {
                        self.current.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.owner);
                    }
                }
            }
        }
        if self.reentrant {
            let lease = self.run_fresh(wait, cancel).await?;
            if let Some(l) = &lease {
                self.current.lock().unwrap_or_else(|e| e.into_inner()).insert(self.owner, l.id);
            }
            return Ok(lease);
        }
        // Non-reentrant: refuse before sending anything, and stop waiting if the same owner
        // wins through a clone.
        self.holder.check(&self.name, &self.primitive, self.owner)?;
        let lease = self.holder.race(&self.name, &self.primitive, self.owner, self.run_fresh(wait, cancel)).await?;
        match lease {
            Some(mut l) => {
                // On a lost race the new lease is dropped here, which gives it back.
                self.holder.hold(&self.name, &self.primitive, self.owner, l.id, l.state.clone())?;
                l.holder = Some(self.holder.clone());
                Ok(Some(l))
            }
            None => Ok(None),
        }
    }

    async fn run_fresh(&self, wait: Wait, cancel: impl Future<Output = ()>) -> Result<Option<Lease>> {
        let ticket = self.client.ticket();
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Acquire {
            ticket,
            name: self.name.to_string(),
            primitive: self.primitive.clone(),
            options: self.options.clone(),
            wait,
            span: tracing::Span::current(),
            reply,
        })?;
        let mut guard = CancelOnDrop {
            client: &self.client,
            ticket,
            result: Some(result),
        };
        let rx = guard.result.as_mut().expect("set until the wait ends");
        let early = tokio::select! {
            biased;
            r = &mut *rx => Some(r),
            () = cancel => None,
        };
        let outcome = match early {
            Some(r) => r,
            None => {
                // The engine ends the wait once what it left is removed (see `LockEngine::cancel`).
                self.client.send(Msg::Cancel { ticket })?;
                let r = rx.await;
                guard.result = None;
                let cancelled = || Error::new(ErrorKind::Cancelled, "the wait was cancelled");
                return match r.map_err(|_| closed())? {
                    // A grant that beat the cancel: given back before the caller is told.
                    Ok(Some(a)) => {
                        let (reply, released) = oneshot::channel();
                        self.client.send(Msg::Release { lease: a.lease, reply: Some(reply) })?;
                        let _ = released.await;
                        Err(cancelled())
                    }
                    Ok(None) => Err(cancelled()),
                    Err(e) => Err(e),
                };
            }
        };
        guard.result = None;
        Ok(outcome.map_err(|_| closed())??.map(|a| Lease::new(self.client.clone(), self.name.clone(), a, None)))
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

