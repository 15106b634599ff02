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

use lockgate_core::native::{
    Client, ClientOptions, Election, Lease, Lock, ReadWriteLock, Redlock, RedlockLease,
    RedlockLock, RedlockOptions,
};
use lockgate_core::options::{
    duration_from_f64, duration_in_range, entry_ttl_from_f64, lease_from_f64,
    positive_duration_from_f64, Unit, MAX_DURATION, MAX_PERMITS,
};
use lockgate_core::time::Duration;
use lockgate_core::connect::{self, Spelling};
use lockgate_core::{Error, ErrorKind, LeaderInfo, LockOptions, Primitive};

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

// Durations arrive as seconds (a Java `Duration` converted on the JVM side) and are range-checked
// by the core under `what`, the option as Java spells it (the builder method: `entryTtl`,
// `maxLease`, ...), in seconds, the unit a `Duration` prints in. So no later check in the core has
// to speak in its own names (`entry_ttl`) or print Rust durations (`5ms`).

/// The checker of one kind of duration: `(what, seconds, unit)` into a checked duration.
type Check = fn(&str, f64, Unit) -> Result<Duration, Error>;

/// A wait (`timeout`, `waitTimeout`, `retryJitter`): zero up to 30 days.
const WAIT: Check = duration_from_f64;
/// A lease (`lease`, `maxLease`, extend's duration): 10 ms up to 30 days.
const LEASE: Check = lease_from_f64;
/// A waiter's queue-entry lease (`entryTtl`).
const ENTRY_TTL: Check = entry_ttl_from_f64;
/// A timeout that must be positive (`connectTimeout`, `responseTimeout`).
const POSITIVE: Check = positive_duration_from_f64;

/// At least 1 ms (`nodeTimeout`, `retryDelay`, the replica-ack timeout: Redis counts milliseconds).
fn millisecond_or_more(what: &str, secs: f64, unit: Unit) -> Result<Duration, Error> {
    duration_in_range(what, secs, unit, Duration::from_millis(1), MAX_DURATION)
}

/// Redlock's fixed clock-drift allowance: the core accepts at most 10 s.
fn drift_fixed(what: &str, secs: f64, unit: Unit) -> Result<Duration, Error> {
    duration_in_range(what, secs, unit, Duration::ZERO, Duration::from_secs(10))
}

/// Seconds as a float into a core duration, checked by `check` under the name `what`.
fn secs(check: Check, what: &str, value: f64) -> NativeResult<Duration> {
    Ok(check(what, value, Unit::Seconds)?)
}

fn opt_secs(check: Check, what: &str, value: Option<f64>) -> NativeResult<Option<Duration>> {
    value.map(|v| secs(check, what, v)).transpose()
}

/// Overrides `field` (a core default) with `value` seconds if the JVM side set it.
fn set_secs(field: &mut Duration, check: Check, what: &str, value: Option<f64>) -> NativeResult<()> {
    if let Some(d) = opt_secs(check, what, value)? {
        *field = d;
    }
    Ok(())
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
    /// How long that `WAIT` may block (`None`: the core's default, 1 s, as in every binding).
    pub replica_ack_timeout_secs: Option<f64>,
}

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
    set_secs(&mut opts.connect_timeout, POSITIVE, "connectTimeout", o.connect_timeout_secs)?;
    set_secs(&mut opts.response_timeout, POSITIVE, "responseTimeout", o.response_timeout_secs)?;
    opts.cluster = o.cluster.unwrap_or(false);
    // The core's rules and default, worded in Java's names and seconds.
    opts.replica_acks = connect::replica_acks(o.replica_acks, o.replica_ack_timeout_secs, &Spelling::JAVA)?;
    opts.validate_as(&Spelling::JAVA)?;
    Ok(opts)
}

/// The core's options and the reentrant flag.
fn lock_options(o: NativeLockOptions) -> NativeResult<(LockOptions, bool)> {
    let reentrant = o.reentrant.unwrap_or(false);
    let mut opts = LockOptions::default();
    set_secs(&mut opts.lease, LEASE, "lease", o.lease_secs)?;
    if let Some(r) = o.auto_renew {
        opts.auto_renew = r;
    }
    opts.wait_timeout = opt_secs(WAIT, "waitTimeout", o.wait_timeout_secs)?;
    set_secs(&mut opts.entry_ttl, ENTRY_TTL, "entryTtl", o.entry_ttl_secs)?;
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
        let timeout = secs(WAIT, "timeout", timeout_secs)?;
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
        let timeout = opt_secs(WAIT, "timeout", timeout_secs)?;
        Ok(into.fill(self.inner.campaign(&value, timeout).await?))
    }

    /// The current leader, if any.
    pub async fn observe(&self) -> NativeResult<Option<NativeLeader>> {
        Ok(self.inner.observe().await?.map(NativeLeader::from))
    }
}

// ---------------------------------------------------------------------------------------------
// Lease

/// What an acquisition put into a [`NativeLease`]: a lock's lease or a Redlock's. Both kinds
/// answer the same questions; only the acquisition differs (a Redlock grant has no fencing token).
enum Held {
    Lock(Lease),
    Redlock(RedlockLease),
}

/// Runs `$body` with `$lease` bound to whichever core lease `$held` is.
macro_rules! with_lease {
    ($held:expr, $lease:ident => $body:expr) => {
        match $held {
            Held::Lock($lease) => $body,
            Held::Redlock($lease) => $body,
        }
    };
}

/// Proof of holding a lock, a semaphore permit, leadership or a Redlock (the core's `Lease` or
/// `RedlockLease`), created empty and filled by an acquisition. Freeing it releases the lock if
/// still held.
#[derive(uniffi::Object, Default)]
pub struct NativeLease {
    inner: Mutex<Option<Arc<Held>>>,
}

impl NativeLease {
    /// Keeps a lock's lease; its fencing token is the acquisition's answer.
    fn fill(&self, lease: Lease) -> i64 {
        let token = i64::try_from(lease.fencing_token()).unwrap_or(i64::MAX);
        put(&self.inner, Arc::new(Held::Lock(lease)));
        token
    }

    /// Keeps a Redlock lease (no fencing token: the acquisition answers `true`).
    fn fill_redlock(&self, lease: RedlockLease) -> bool {
        put(&self.inner, Arc::new(Held::Redlock(lease)));
        true
    }

    fn get(&self) -> Option<Arc<Held>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn acquired(&self) -> NativeResult<Arc<Held>> {
        self.get().ok_or_else(|| Error::new(ErrorKind::NotHeld, "this lease was never acquired").into())
    }
}

#[uniffi::export]
impl NativeLease {
    /// An empty lease for an acquisition to fill.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Whether the lease is certainly still held (renewed, not expired, not lost; for a Redlock
    /// also with the drift allowance deducted).
    pub fn is_held(&self) -> bool {
        self.get().is_some_and(|h| with_lease!(&*h, l => l.is_held()))
    }

    /// Nanoseconds the lease is certainly still valid, if held.
    pub fn remaining_nanos(&self) -> Option<i64> {
        let remaining = with_lease!(&*self.get()?, l => l.remaining());
        remaining.map(|d| saturating_i64(d.as_nanos()))
    }

    pub fn lost_reason(&self) -> Option<Failure> {
        with_lease!(&*self.get()?, l => l.lost_reason()).as_ref().map(failure)
    }

    /// Sets the remaining lease to `duration_secs` if still held (a Redlock: on every master
    /// still holding it, needing a majority); `NOT_HELD`, and the lease is lost, otherwise.
    pub async fn extend(&self, duration_secs: f64) -> NativeResult<()> {
        let duration = secs(LEASE, "extend's duration", duration_secs)?;
        let held = self.acquired()?;
        Ok(with_lease!(&*held, l => l.extend(duration).await)?)
    }

    /// Owner-only release: `true` if it was still held (a Redlock: by a majority), `false` if it
    /// had expired or been lost; a Redlock release that too few masters confirmed is a
    /// `CONNECTION` error (the rest expire).
    pub async fn release(&self) -> NativeResult<bool> {
        let held = self.acquired()?;
        Ok(with_lease!(&*held, l => l.release().await)?)
    }

    /// A watch on this lease's loss that does not keep the lease alive.
    pub fn loss_watch(&self) -> Arc<LossWatch> {
        let signal: Option<LostSignal> = self
            .get()
            .map(|h| with_lease!(&*h, l => Box::pin(l.lost_signal()) as LostSignal));
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
// client above (slot for connect, a `NativeLease` filled by the acquisition), but grants carry no
// fencing token, so the acquisitions answer `true`/`false` instead of a token.

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
    set_secs(&mut c.max_lease, LEASE, "maxLease", o.max_lease_secs)?;
    set_secs(&mut c.node_timeout, millisecond_or_more, "nodeTimeout", o.node_timeout_secs)?;
    set_secs(&mut c.retry_delay, millisecond_or_more, "retryDelay", o.retry_delay_secs)?;
    set_secs(&mut c.retry_jitter, WAIT, "retryJitter", o.retry_jitter_secs)?;
    if let Some(f) = o.drift_factor {
        if !(0.0..0.5).contains(&f) {
            return Err(Error::invalid(format!(
                "driftFactor must be at least 0 and below 0.5, got {f}"
            ))
            .into());
        }
        c.drift_factor = f;
    }
    set_secs(&mut c.drift_fixed, drift_fixed, "driftFixed", o.drift_fixed_secs)?;
    opts.tls_ca_pem = o.tls_ca_pem;
    set_secs(&mut opts.connect_timeout, POSITIVE, "connectTimeout", o.connect_timeout_secs)?;
    set_secs(&mut opts.response_timeout, POSITIVE, "responseTimeout", o.response_timeout_secs)?;
    Ok(opts)
}

/// Receives the Redlock of [`redlock_connect`] (see [`ClientSlot`]).
#[derive(uniffi::Object, Default)]
pub struct RedlockSlot(Mutex<Option<Redlock>>);

#[uniffi::export]
impl RedlockSlot {
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// The connected Redlock, once (`None` afterwards or if nothing landed).
    pub fn take(&self) -> Option<Arc<NativeRedlock>> {
        take(&self.0).map(|inner| Arc::new(NativeRedlock { inner }))
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
    on_runtime(async move {
        let redlock = opts.connect().await?;
        put(&slot.0, redlock);
        Ok(())
    })
    .await
}

/// N independent masters (the core's `Redlock`).
#[derive(uniffi::Object)]
pub struct NativeRedlock {
    inner: Redlock,
}

#[uniffi::export]
impl NativeRedlock {
    /// A Redlock handle; name and options are validated by the core, which also rejects a lease
    /// longer than the deployment's `max_lease` here already (no lease: 30 s or `max_lease`). Redlock handles are never reentrant.
    pub fn lock(
        &self,
        name: String,
        options: NativeLockOptions,
    ) -> NativeResult<Arc<NativeRedlockLock>> {
        let lease_given = options.lease_secs.is_some();
        let (opts, reentrant) = lock_options(options)?;
        if reentrant {
            return Err(Error::invalid("a Redlock lock cannot be reentrant").into());
        }
        // The core's rule for every binding: no lease given is 30 s or max_lease if shorter.
        let opts = self.inner.lock_options(opts, lease_given)?;
        let inner = self.inner.lock(&name, opts)?;
        Ok(Arc::new(NativeRedlockLock { inner }))
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
        on_runtime(async move {
            redlock.close().await;
            Ok(())
        })
        .await
    }
}

/// One named Redlock (the core's `RedlockLock`).
#[derive(uniffi::Object)]
pub struct NativeRedlockLock {
    inner: RedlockLock,
}

#[uniffi::export]
impl NativeRedlockLock {
    pub fn name(&self) -> String {
        self.inner.name().to_string()
    }

    /// Retries for up to `timeout_secs`; the lease fills `into` (always `true` on success).
    /// A `TIMEOUT` error saying why the last attempt failed if no majority could be had.
    pub async fn acquire(&self, timeout_secs: f64, into: Arc<NativeLease>) -> NativeResult<bool> {
        let timeout = secs(WAIT, "timeout", timeout_secs)?;
        Ok(into.fill_redlock(self.inner.acquire(timeout).await?))
    }

    /// Waits with the lock's default timeout (forever unless the options set one).
    pub async fn acquire_default(&self, into: Arc<NativeLease>) -> NativeResult<bool> {
        Ok(into.fill_redlock(self.inner.acquire_default().await?))
    }

    /// One attempt: `true` (lease in `into`) if a majority granted, `false` if the lock is held;
    /// a `CONNECTION` error if too few masters could vote.
    pub async fn try_acquire(&self, into: Arc<NativeLease>) -> NativeResult<bool> {
        Ok(match self.inner.try_acquire().await? {
            Some(lease) => into.fill_redlock(lease),
            None => false,
        })
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
