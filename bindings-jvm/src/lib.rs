//! The JVM binding's native half: uniffi exports over [`lockgate_core::native`].
//!
//! Thin by rule: every export converts its arguments, calls the core, and maps errors through
//! one function ([`failure`]). No lock logic lives here. uniffi generates Kotlin (JNA) from this
//! crate; the Java-facing API (`io.lockgate.*`) sits on top of it in the Maven module.
//!
//! Three FFI details shape the exports:
//! - The client's driver (and `connect`, which starts it) runs on this library's own tokio
//!   runtime ([`on_runtime`]). Lock and lease operations only exchange messages with that driver
//!   over channels, so their core futures are polled directly by the JVM side, without a thread
//!   hop. Either way, dropping the future (a cancelled coroutine, an interrupted Java thread)
//!   drops the core future, which cancels the wait on the server.
//! - Async exports never return an object handle. A handle lowered by uniffi but never lifted
//!   (the caller was cancelled in between) would leak, and a leaked lease is a lock nobody can
//!   release. The caller therefore creates an empty [`NativeLease`] first and the acquisition
//!   fills it; freeing it releases whatever landed there (likewise [`ClientSlot`]).
//! - Every FFI call costs the JVM several microseconds (JNA structures, handle clones), so an
//!   acquisition returns its fencing token directly and the JVM side keeps what it already knows
//!   (the name) instead of asking.
//!
//! Panics are caught by uniffi (`InternalException` on the JVM); a panic inside a runtime task is
//! re-raised at the await so it takes the same path. Nothing here may abort the process.

uniffi::setup_scaffolding!();

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex};
use std::task::{Context, Poll, Waker};

use tokio::sync::watch;

use lockgate_core::native::{
    Client, ClientOptions, Election, Lease, Lock, ReadWriteLock, Redlock, RedlockLease,
    RedlockLock, RedlockOptions,
};
use lockgate_core::options::{duration_from_secs_f64, MAX_PERMITS};
use lockgate_core::time::Duration;
use lockgate_core::{Error, ErrorKind, LeaderInfo, LockOptions, Primitive, ReplicaAcks};

// ---------------------------------------------------------------------------------------------
// Errors: one mapping, carrying the core's stable code and retryable flag.

/// A core error as plain data: the stable code (`"TIMEOUT"`, ...), the message (free of
/// credentials) and whether retrying may help.
#[derive(Clone, Debug, uniffi::Record)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

/// Every error that crosses the boundary. One variant: the JVM side maps `code` to its
/// exception class, so a kind added to the core needs no change here.
#[derive(Debug, uniffi::Error)]
pub enum NativeError {
    Failed { failure: Failure },
}

impl std::fmt::Display for NativeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let NativeError::Failed { failure } = self;
        write!(f, "{}: {}", failure.code, failure.message)
    }
}

impl std::error::Error for NativeError {}

/// The one error mapping of this binding.
fn failure(e: &Error) -> Failure {
    Failure {
        code: e.code().to_string(),
        message: e.message().to_string(),
        retryable: e.retryable(),
    }
}

impl From<Error> for NativeError {
    fn from(e: Error) -> Self {
        NativeError::Failed {
            failure: failure(&e),
        }
    }
}

type NativeResult<T> = Result<T, NativeError>;

/// Seconds as a float (what the JVM side passes) into a core duration, validated by the core.
fn secs(what: &str, value: f64) -> NativeResult<Duration> {
    Ok(duration_from_secs_f64(what, value)?)
}

fn opt_secs(what: &str, value: Option<f64>) -> NativeResult<Option<Duration>> {
    value.map(|v| secs(what, v)).transpose()
}

// ---------------------------------------------------------------------------------------------
// The runtime and the one async helper.

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("lockgate-io")
        .enable_all()
        .build()
        .expect("lockgate: cannot start its tokio runtime")
});

/// Runs `fut` on the library's runtime; dropping the returned future aborts it.
async fn on_runtime<T, F>(fut: F) -> NativeResult<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T, Error>> + Send + 'static,
{
    struct AbortOnDrop(tokio::task::AbortHandle);
    impl Drop for AbortOnDrop {
        fn drop(&mut self) {
            self.0.abort();
        }
    }
    let task = RUNTIME.spawn(fut);
    let _abort = AbortOnDrop(task.abort_handle());
    match task.await {
        Ok(r) => Ok(r?),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => Err(Error::new(ErrorKind::Cancelled, "the operation was cancelled").into()),
    }
}

// ---------------------------------------------------------------------------------------------
// Options as records; a `None` field takes the core's default.

/// Connection options; `None` fields take the core's defaults.
#[derive(Clone, Debug, Default, uniffi::Record)]
pub struct NativeClientOptions {
    pub key_prefix: Option<String>,
    pub tls_ca_pem: Option<Vec<u8>>,
    pub connect_timeout_secs: Option<f64>,
    pub response_timeout_secs: Option<f64>,
    /// The URL is one seed node of a Redis Cluster (`None`: false).
    pub cluster: Option<bool>,
    /// Replica-acknowledged mode: grants count once `WAIT` confirms this many replicas
    /// (`None`: off). Signed because the JVM has no unsigned integers; the core checks the range.
    pub replica_acks: Option<i64>,
    /// How long that `WAIT` may block (`None`: [`DEFAULT_REPLICA_ACK_TIMEOUT_SECS`]).
    pub replica_ack_timeout_secs: Option<f64>,
}

/// The `WAIT` timeout when only a replica count is given (Redisson's `syncSlavesTimeout`
/// default), below the default 5 s response timeout.
const DEFAULT_REPLICA_ACK_TIMEOUT_SECS: f64 = 1.0;

/// Lock options; `None` fields take the core's defaults (`wait_timeout_secs: None` = forever,
/// `reentrant: None` = not reentrant). `reentrant` selects the core's reentrant handle where
/// the core offers one (mutex, read-write lock) and is rejected by the core elsewhere.
#[derive(Clone, Debug, Default, uniffi::Record)]
pub struct NativeLockOptions {
    pub lease_secs: Option<f64>,
    pub auto_renew: Option<bool>,
    pub wait_timeout_secs: Option<f64>,
    pub entry_ttl_secs: Option<f64>,
    pub reentrant: Option<bool>,
}

fn client_options(url: String, o: NativeClientOptions) -> NativeResult<ClientOptions> {
    let mut opts = ClientOptions::new(url);
    if let Some(p) = o.key_prefix {
        opts.key_prefix = p;
    }
    opts.tls_ca_pem = o.tls_ca_pem;
    if let Some(t) = opt_secs("connect_timeout", o.connect_timeout_secs)? {
        opts.connect_timeout = t;
    }
    if let Some(t) = opt_secs("response_timeout", o.response_timeout_secs)? {
        opts.response_timeout = t;
    }
    opts.cluster = o.cluster.unwrap_or(false);
    opts.replica_acks = replica_acks(o.replica_acks, o.replica_ack_timeout_secs)?;
    Ok(opts)
}

/// The replica-acknowledged mode's settings; the core validates them at connect. Only what the
/// core's `ClientOptions::validate` leaves out is checked here (counts a `u32` cannot hold,
/// sub-millisecond waits, which the core's engine rejects later), as `INVALID_ARGUMENT` too.
fn replica_acks(
    replicas: Option<i64>,
    timeout_secs: Option<f64>,
) -> NativeResult<Option<ReplicaAcks>> {
    let Some(replicas) = replicas else {
        return match timeout_secs {
            None => Ok(None),
            Some(_) => Err(Error::invalid("a replica ack timeout needs a replica count").into()),
        };
    };
    let replicas = u32::try_from(replicas).map_err(|_| {
        NativeError::from(Error::invalid(format!(
            "replica_acks must be a positive number of replicas, got {replicas}"
        )))
    })?;
    let timeout = secs(
        "replica_ack_timeout",
        timeout_secs.unwrap_or(DEFAULT_REPLICA_ACK_TIMEOUT_SECS),
    )?;
    if !timeout.is_zero() && timeout < Duration::from_millis(1) {
        return Err(Error::invalid(
            "replica_ack_timeout must be at least 1 ms (WAIT counts milliseconds)",
        )
        .into());
    }
    Ok(Some(ReplicaAcks { replicas, timeout }))
}

/// The core's options and the reentrant flag.
fn lock_options(o: NativeLockOptions) -> NativeResult<(LockOptions, bool)> {
    let reentrant = o.reentrant.unwrap_or(false);
    let mut opts = LockOptions::default();
    if let Some(l) = opt_secs("lease", o.lease_secs)? {
        opts.lease = l;
    }
    if let Some(r) = o.auto_renew {
        opts.auto_renew = r;
    }
    opts.wait_timeout = opt_secs("wait_timeout", o.wait_timeout_secs)?;
    if let Some(t) = opt_secs("entry_ttl", o.entry_ttl_secs)? {
        opts.entry_ttl = t;
    }
    Ok((opts, reentrant))
}

/// A permit count from the JVM (a signed integer there) as the core's `u32`; values a `u32`
/// cannot hold get the core's range message, the rest is validated by the core.
fn permits(value: i64) -> NativeResult<u32> {
    u32::try_from(value).map_err(|_| {
        Error::invalid(format!("permits must be between 1 and {MAX_PERMITS}, got {value}")).into()
    })
}

/// Seconds or nanoseconds for the JVM, which has no unsigned integers.
fn saturating_i64(value: u128) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

// ---------------------------------------------------------------------------------------------
// Slots: where async results that own resources land (see the module docs).

/// Receives the client of [`connect`]; the caller takes it out, and freeing the slot drops a
/// client nobody took.
#[derive(uniffi::Object, Default)]
pub struct ClientSlot(Mutex<Option<Client>>);

#[uniffi::export]
impl ClientSlot {
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// The connected client, once (`None` afterwards or if nothing landed).
    pub fn take(&self) -> Option<Arc<NativeClient>> {
        take(&self.0).map(|inner| Arc::new(NativeClient { inner }))
    }
}

fn take<T>(m: &Mutex<Option<T>>) -> Option<T> {
    m.lock().unwrap_or_else(|p| p.into_inner()).take()
}

fn put<T>(m: &Mutex<Option<T>>, v: T) {
    *m.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
}

// ---------------------------------------------------------------------------------------------
// Client

/// Connects to `url` (`redis://` or `rediss://`) and puts the client into `slot`.
#[uniffi::export]
pub async fn connect(
    url: String,
    options: NativeClientOptions,
    slot: Arc<ClientSlot>,
) -> NativeResult<()> {
    let opts = client_options(url, options)?;
    on_runtime(async move {
        let client = opts.connect().await?;
        put(&slot.0, client);
        Ok(())
    })
    .await
}

/// A connection to one Redis server (the core's `Client`).
#[derive(uniffi::Object)]
pub struct NativeClient {
    inner: Client,
}

#[uniffi::export]
impl NativeClient {
    /// A mutex handle (reentrant if the options say so); name and options are validated by the core.
    pub fn lock(&self, name: String, options: NativeLockOptions) -> NativeResult<Arc<NativeLock>> {
        let (opts, reentrant) = lock_options(options)?;
        let inner = if reentrant {
            self.inner.reentrant_lock(&name, opts)?
        } else {
            self.inner.lock(&name, opts)?
        };
        Ok(Arc::new(NativeLock { inner }))
    }

    /// A counting semaphore's handle: each acquisition takes one of `permits` permits.
    pub fn semaphore(
        &self,
        name: String,
        permits: i64,
        options: NativeLockOptions,
    ) -> NativeResult<Arc<NativeLock>> {
        let (opts, reentrant) = lock_options(options)?;
        let permits = self::permits(permits)?;
        // The general form, so that the core itself rejects a reentrant semaphore.
        let inner = self.inner.primitive(&name, Primitive::Semaphore { permits }, opts, reentrant)?;
        Ok(Arc::new(NativeLock { inner }))
    }

    /// A read-write lock (both halves reentrant if the options say so).
    pub fn read_write_lock(
        &self,
        name: String,
        options: NativeLockOptions,
    ) -> NativeResult<Arc<NativeReadWriteLock>> {
        let (opts, reentrant) = lock_options(options)?;
        let mut inner = self.inner.read_write_lock(&name, opts)?;
        if reentrant {
            inner = inner.reentrant();
        }
        Ok(Arc::new(NativeReadWriteLock { inner }))
    }

    /// A leader election. Leadership is never reentrant: the core's own check rejects the flag.
    pub fn election(
        &self,
        name: String,
        options: NativeLockOptions,
    ) -> NativeResult<Arc<NativeElection>> {
        let (opts, reentrant) = lock_options(options)?;
        if reentrant {
            let leader = Primitive::Leader { value: String::new() };
            self.inner.primitive(&name, leader, opts.clone(), true)?;
        }
        let inner = self.inner.election(&name, opts)?;
        Ok(Arc::new(NativeElection { inner }))
    }

    /// Releases every lease and cancels every wait of this client, then stops it. (Not `close`:
    /// uniffi's Kotlin objects already have a `close()` that frees the handle.)
    pub async fn shutdown(&self) -> NativeResult<()> {
        let client = self.inner.clone();
        on_runtime(async move {
            client.close().await;
            Ok(())
        })
        .await
    }

    /// The server URL with the password redacted.
    pub fn url(&self) -> String {
        self.inner.url()
    }
}

// ---------------------------------------------------------------------------------------------
// Lock

/// A named distributed mutex (the core's `Lock`).
#[derive(uniffi::Object)]
pub struct NativeLock {
    inner: Lock,
}

#[uniffi::export]
impl NativeLock {
    pub fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// Waits up to `timeout_secs`; the lease fills `into` and its fencing token is returned.
    /// A `TIMEOUT` error if the lock stays held.
    pub async fn acquire(&self, timeout_secs: f64, into: Arc<NativeLease>) -> NativeResult<i64> {
        let timeout = secs("timeout", timeout_secs)?;
        Ok(into.fill(self.inner.acquire(timeout).await?))
    }

    /// Waits with the lock's default timeout (forever unless the options set one).
    pub async fn acquire_default(&self, into: Arc<NativeLease>) -> NativeResult<i64> {
        Ok(into.fill(self.inner.acquire_default().await?))
    }

    /// One attempt: the fencing token (lease in `into`) if acquired, `0` if the lock is held or
    /// waiters are queued (fencing tokens are always at least 1).
    pub async fn try_acquire(&self, into: Arc<NativeLease>) -> NativeResult<i64> {
        Ok(match self.inner.try_acquire().await? {
            Some(lease) => into.fill(lease),
            None => 0,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Read-write lock and election

/// A read-write lock (the core's `ReadWriteLock`): two [`NativeLock`] halves.
#[derive(uniffi::Object)]
pub struct NativeReadWriteLock {
    inner: ReadWriteLock,
}

#[uniffi::export]
impl NativeReadWriteLock {
    /// The shared half (a handle sharing the core's reentrant state with every other call).
    pub fn read(&self) -> Arc<NativeLock> {
        Arc::new(NativeLock { inner: self.inner.read().clone() })
    }

    /// The exclusive half.
    pub fn write(&self) -> Arc<NativeLock> {
        Arc::new(NativeLock { inner: self.inner.write().clone() })
    }

    /// The same lock whose readers do (`true`, the default) or do not wait behind queued writers.
    pub fn with_writers_first(&self, writers_first: bool) -> Arc<NativeReadWriteLock> {
        let inner = self.inner.clone().with_writers_first(writers_first);
        Arc::new(NativeReadWriteLock { inner })
    }
}

/// The current leader as observed on the server: published value, term (fencing token of its
/// grant) and remaining lease in nanoseconds.
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativeLeader {
    pub value: String,
    pub term: i64,
    pub remaining_nanos: i64,
}

impl From<LeaderInfo> for NativeLeader {
    fn from(l: LeaderInfo) -> Self {
        NativeLeader {
            value: l.value,
            term: saturating_i64(l.term.into()),
            remaining_nanos: saturating_i64(l.remaining.as_nanos()),
        }
    }
}

/// A leader election (the core's `Election`).
#[derive(uniffi::Object)]
pub struct NativeElection {
    inner: Election,
}

#[uniffi::export]
impl NativeElection {
    pub fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// Campaigns with `value`, waiting up to `timeout_secs` (`None`: until elected); the
    /// leadership lease fills `into` and its term (fencing token) is returned. A `TIMEOUT` error
    /// if another candidate stays leader.
    pub async fn campaign(
        &self,
        value: String,
        timeout_secs: Option<f64>,
        into: Arc<NativeLease>,
    ) -> NativeResult<i64> {
        let timeout = opt_secs("timeout", timeout_secs)?;
        Ok(into.fill(self.inner.campaign(&value, timeout).await?))
    }

    /// The current leader, if any.
    pub async fn observe(&self) -> NativeResult<Option<NativeLeader>> {
        Ok(self.inner.observe().await?.map(NativeLeader::from))
    }
}

// ---------------------------------------------------------------------------------------------
// Lease

/// Proof of holding a lock (the core's `Lease`), created empty and filled by an acquisition.
/// Freeing it releases the lock if still held.
#[derive(uniffi::Object, Default)]
pub struct NativeLease {
    inner: Mutex<Option<Arc<Lease>>>,
}

impl NativeLease {
    fn fill(&self, lease: Lease) -> i64 {
        let token = i64::try_from(lease.fencing_token()).unwrap_or(i64::MAX);
        put(&self.inner, Arc::new(lease));
        token
    }

    fn get(&self) -> Option<Arc<Lease>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

fn never_acquired() -> NativeError {
    Error::new(ErrorKind::NotHeld, "this lease was never acquired").into()
}

#[uniffi::export]
impl NativeLease {
    /// An empty lease for an acquisition to fill.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    pub fn is_held(&self) -> bool {
        self.get().is_some_and(|l| l.is_held())
    }

    /// Nanoseconds the lease is certainly still valid, if held.
    pub fn remaining_nanos(&self) -> Option<i64> {
        self.get()?
            .remaining()
            .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    }

    pub fn lost_reason(&self) -> Option<Failure> {
        self.get()?.lost_reason().as_ref().map(failure)
    }

    /// Sets the remaining lease to `duration_secs` if still held; `NOT_HELD` otherwise.
    pub async fn extend(&self, duration_secs: f64) -> NativeResult<()> {
        let duration = secs("lease", duration_secs)?;
        let lease = self.get().ok_or_else(never_acquired)?;
        Ok(lease.extend(duration).await?)
    }

    /// Owner-only release: `true` if it was still held, `false` if it had expired or been lost.
    pub async fn release(&self) -> NativeResult<bool> {
        let lease = self.get().ok_or_else(never_acquired)?;
        Ok(lease.release().await?)
    }

    /// A watch on this lease's loss that does not keep the lease alive.
    pub fn loss_watch(&self) -> Arc<LossWatch> {
        let signal: Option<LostSignal> =
            self.get().map(|l| Box::pin(l.lost_signal()) as LostSignal);
        Arc::new(LossWatch(Mutex::new(signal)))
    }
}

type LostSignal = Pin<Box<dyn Future<Output = Option<Error>> + Send>>;

/// Resolves once: the loss reason, or `None` when the lease ended normally (released, client
/// closed). Separate from the lease so that awaiting it never keeps a forgotten lease alive.
#[derive(uniffi::Object)]
pub struct LossWatch(Mutex<Option<LostSignal>>);

#[uniffi::export]
impl LossWatch {
    /// Waits for the outcome; a second call resolves `None` at once.
    pub async fn outcome(&self) -> NativeResult<Option<Failure>> {
        Ok(match take(&self.0) {
            Some(signal) => signal.await.as_ref().map(failure),
            None => None,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Redlock over N independent masters (the core's `Redlock`, PROTOCOL.md §8). Same shape as the
// client above (slot for connect, lease filled by the acquisition), but grants carry no fencing
// token, so the acquisitions answer `true`/`false` instead of a token.

/// A Redlock deployment's settings; `None` fields take the core's defaults (`RedlockConfig`
/// and `RedlockOptions::new`). Every value is validated by the core at connect.
#[derive(Clone, Debug, Default, uniffi::Record)]
pub struct NativeRedlockOptions {
    pub key_prefix: Option<String>,
    pub max_lease_secs: Option<f64>,
    pub node_timeout_secs: Option<f64>,
    pub retry_delay_secs: Option<f64>,
    pub retry_jitter_secs: Option<f64>,
    pub drift_factor: Option<f64>,
    pub drift_fixed_secs: Option<f64>,
    pub tls_ca_pem: Option<Vec<u8>>,
    pub connect_timeout_secs: Option<f64>,
    pub response_timeout_secs: Option<f64>,
}

fn redlock_options(urls: Vec<String>, o: NativeRedlockOptions) -> NativeResult<RedlockOptions> {
    let mut opts = RedlockOptions::new(urls);
    let c = &mut opts.config;
    if let Some(p) = o.key_prefix {
        c.key_prefix = p;
    }
    if let Some(d) = opt_secs("max_lease", o.max_lease_secs)? {
        c.max_lease = d;
    }
    if let Some(d) = opt_secs("node_timeout", o.node_timeout_secs)? {
        c.node_timeout = d;
    }
    if let Some(d) = opt_secs("retry_delay", o.retry_delay_secs)? {
        c.retry_delay = d;
    }
    if let Some(d) = opt_secs("retry_jitter", o.retry_jitter_secs)? {
        c.retry_jitter = d;
    }
    if let Some(f) = o.drift_factor {
        c.drift_factor = f;
    }
    if let Some(d) = opt_secs("drift_fixed", o.drift_fixed_secs)? {
        c.drift_fixed = d;
    }
    opts.tls_ca_pem = o.tls_ca_pem;
    if let Some(t) = opt_secs("connect_timeout", o.connect_timeout_secs)? {
        opts.connect_timeout = t;
    }
    if let Some(t) = opt_secs("response_timeout", o.response_timeout_secs)? {
        opts.response_timeout = t;
    }
    Ok(opts)
}

/// Receives the Redlock of [`redlock_connect`] (see [`ClientSlot`]).
#[derive(uniffi::Object, Default)]
pub struct RedlockSlot(Mutex<Option<(Redlock, Duration)>>);

#[uniffi::export]
impl RedlockSlot {
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// The connected Redlock, once (`None` afterwards or if nothing landed).
    pub fn take(&self) -> Option<Arc<NativeRedlock>> {
        take(&self.0).map(|(inner, max_lease)| {
            let (closed, _) = watch::channel(false);
            Arc::new(NativeRedlock {
                inner,
                max_lease,
                closed: Arc::new(closed),
            })
        })
    }
}

/// Connects to the independent masters at `urls` and puts the Redlock into `slot`. Masters that
/// are down are retried in the background; fails if none is reachable.
#[uniffi::export]
pub async fn redlock_connect(
    urls: Vec<String>,
    options: NativeRedlockOptions,
    slot: Arc<RedlockSlot>,
) -> NativeResult<()> {
    let opts = redlock_options(urls, options)?;
    let max_lease = opts.config.max_lease;
    on_runtime(async move {
        let redlock = opts.connect().await?;
        put(&slot.0, (redlock, max_lease));
        Ok(())
    })
    .await
}

/// N independent masters (the core's `Redlock`).
#[derive(uniffi::Object)]
pub struct NativeRedlock {
    inner: Redlock,
    /// The deployment's `max_lease`, so that `lock` rejects longer leases without a network call.
    max_lease: Duration,
    /// Set once closed: ends every loss watch of this Redlock's leases.
    closed: Arc<watch::Sender<bool>>,
}

#[uniffi::export]
impl NativeRedlock {
    /// A Redlock handle; name and options are validated by the core, and a lease longer than
    /// the deployment's `max_lease` is rejected here already (the core's engine rejects it at
    /// acquire). Redlock handles are never reentrant.
    pub fn lock(
        &self,
        name: String,
        options: NativeLockOptions,
    ) -> NativeResult<Arc<NativeRedlockLock>> {
        let (opts, reentrant) = lock_options(options)?;
        if reentrant {
            return Err(Error::invalid("a Redlock lock cannot be reentrant").into());
        }
        let lease = opts.lease;
        let inner = self.inner.lock(&name, opts)?;
        if lease > self.max_lease {
            return Err(Error::invalid(format!(
                "the lease exceeds this Redlock's max_lease of {} ms (every client must agree on it)",
                self.max_lease.as_millis()
            ))
            .into());
        }
        Ok(Arc::new(NativeRedlockLock {
            inner,
            closed: self.closed.subscribe(),
        }))
    }

    /// How many masters there are.
    pub fn master_count(&self) -> i32 {
        i32::try_from(self.inner.masters().0).unwrap_or(i32::MAX)
    }

    /// How many masters must agree (`masters / 2 + 1`).
    pub fn quorum(&self) -> i32 {
        i32::try_from(self.inner.masters().1).unwrap_or(i32::MAX)
    }

    /// The masters' URLs with passwords redacted.
    pub fn urls(&self) -> Vec<String> {
        self.inner.urls()
    }

    /// Releases every lease and cancels every wait, then stops the Redlock's driver.
    pub async fn shutdown(&self) -> NativeResult<()> {
        let redlock = self.inner.clone();
        let closed = self.closed.clone();
        on_runtime(async move {
            redlock.close().await;
            closed.send_replace(true);
            Ok(())
        })
        .await
    }
}

/// One named Redlock (the core's `RedlockLock`).
#[derive(uniffi::Object)]
pub struct NativeRedlockLock {
    inner: RedlockLock,
    closed: watch::Receiver<bool>,
}

#[uniffi::export]
impl NativeRedlockLock {
    pub fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// Retries for up to `timeout_secs`; the lease fills `into` (always `true` on success).
    /// A `TIMEOUT` error saying why the last attempt failed if no majority could be had.
    pub async fn acquire(
        &self,
        timeout_secs: f64,
        into: Arc<NativeRedlockLease>,
    ) -> NativeResult<bool> {
        let timeout = secs("timeout", timeout_secs)?;
        into.fill(self.inner.acquire(timeout).await?, self.closed.clone());
        Ok(true)
    }

    /// Waits with the lock's default timeout (forever unless the options set one).
    pub async fn acquire_default(&self, into: Arc<NativeRedlockLease>) -> NativeResult<bool> {
        into.fill(self.inner.acquire_default().await?, self.closed.clone());
        Ok(true)
    }

    /// One attempt: `true` (lease in `into`) if a majority granted, `false` if the lock is held;
    /// a `CONNECTION` error if too few masters could vote.
    pub async fn try_acquire(&self, into: Arc<NativeRedlockLease>) -> NativeResult<bool> {
        Ok(match self.inner.try_acquire().await? {
            Some(lease) => {
                into.fill(lease, self.closed.clone());
                true
            }
            None => false,
        })
    }
}

struct HeldRedlock {
    lease: Arc<RedlockLease>,
    closed: watch::Receiver<bool>,
}

/// A Redlock lease (the core's `RedlockLease`), created empty and filled by an acquisition.
/// Freeing it releases the lock if still held.
#[derive(uniffi::Object)]
pub struct NativeRedlockLease {
    inner: Mutex<Option<HeldRedlock>>,
    /// Set on release and dropped with this object: ends the loss watch, which holds the core
    /// lease only until then (the core's `lost()` never resolves on a normal end).
    ended: watch::Sender<bool>,
}

impl NativeRedlockLease {
    fn fill(&self, lease: RedlockLease, closed: watch::Receiver<bool>) {
        put(
            &self.inner,
            HeldRedlock {
                lease: Arc::new(lease),
                closed,
            },
        );
    }

    fn get(&self) -> Option<Arc<RedlockLease>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|h| h.lease.clone())
    }
}

/// The loss reason if the lease is lost by now: `lost()` checks the current state on its first
/// poll and resolves at once if it is a loss.
fn redlock_lost_now(lease: &RedlockLease) -> Option<Error> {
    let mut lost = std::pin::pin!(lease.lost());
    match lost.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(e) => Some(e),
        Poll::Pending => None,
    }
}

#[uniffi::export]
impl NativeRedlockLease {
    /// An empty lease for an acquisition to fill.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        let (ended, _) = watch::channel(false);
        Arc::new(NativeRedlockLease {
            inner: Mutex::new(None),
            ended,
        })
    }

    /// Whether the lease is certainly still valid (drift deducted, renewed, not lost).
    pub fn is_held(&self) -> bool {
        self.get().is_some_and(|l| l.is_held())
    }

    /// Nanoseconds the lease is certainly still valid, if held.
    pub fn remaining_nanos(&self) -> Option<i64> {
        self.get()?
            .remaining()
            .map(|d| saturating_i64(d.as_nanos()))
    }

    pub fn lost_reason(&self) -> Option<Failure> {
        let lease = self.get()?;
        redlock_lost_now(&lease).as_ref().map(failure)
    }

    /// Sets the remaining lease to `duration_secs` on every master still holding it (needs a
    /// majority; `NOT_HELD`, and the lease is lost, if a majority lost it).
    pub async fn extend(&self, duration_secs: f64) -> NativeResult<()> {
        let duration = secs("lease", duration_secs)?;
        let lease = self.get().ok_or_else(never_acquired)?;
        Ok(lease.extend(duration).await?)
    }

    /// Releases on every master: `true` if a majority still held it, `false` if not (or on a
    /// second call); a `CONNECTION` error if too few masters confirmed (the rest expire).
    pub async fn release(&self) -> NativeResult<bool> {
        let lease = self.get().ok_or_else(never_acquired)?;
        let result = lease.release().await;
        self.ended.send_replace(true);
        Ok(result?)
    }

    /// A watch on this lease's loss, resolving `None` once it is released, freed or its
    /// Redlock closed. It holds the core lease only until then.
    pub fn loss_watch(&self) -> Arc<LossWatch> {
        let held = self
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|h| (h.lease.clone(), h.closed.clone()));
        let signal = held.map(|(lease, mut closed)| {
            let mut ended = self.ended.subscribe();
            Box::pin(async move {
                tokio::select! {
                    reason = lease.lost() => Some(reason),
                    _ = ended.wait_for(|e| *e) => None,
                    _ = closed.wait_for(|c| *c) => None,
                }
            }) as LostSignal
        });
        Arc::new(LossWatch(Mutex::new(signal)))
    }
}

// ---------------------------------------------------------------------------------------------
// Diagnostics

/// Panics inside the library (used by the JVM tests to prove a panic never crashes the JVM).
#[uniffi::export]
pub fn debug_panic(message: String) {
    panic!("{message}");
}

/// Panics inside a runtime task (the async path of the same proof).
#[uniffi::export]
pub async fn debug_panic_async(message: String) -> NativeResult<()> {
    on_runtime(async move {
        if !message.is_empty() {
            panic!("{message}");
        }
        Ok(())
    })
    .await
}
