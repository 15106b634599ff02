//! The JVM binding's native half: uniffi exports over [`lockgate_core::native`] for the Java API.
//! Thin by rule: convert arguments, call the core, map errors through [`failure`]. It knows no
//! backend (the URL's scheme picks it in the core; client options go to the core's setter by
//! their Java names), so a new backend adds no line here. FFI details:
//! - `connect` and `shutdown` run on this library's tokio runtime ([`on_runtime`]); lock and
//!   lease calls only message the client's driver, so the JVM polls their futures directly.
//!   Dropping a future (a cancelled coroutine, an interrupted thread) cancels the wait.
//! - Async exports never return an object handle (one lowered but never lifted would leak a
//!   lease): the caller passes an empty [`NativeLease`] / [`ClientSlot`] that the call fills.
//! - An FFI call costs microseconds, so an acquisition answers with one integer ([`NO_TOKEN`]).
//!
//! Panics are caught by uniffi (`InternalException` on the JVM); one inside a runtime task is
//! re-raised at the await, the same path. Nothing here may abort the process.

uniffi::setup_scaffolding!();

mod telemetry;

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use lockgate_core::connect::{ClientOptions, OptionValue, Spelling};
use lockgate_core::native::{foreign_runtime, Client, Election, InPlace, Lease, Lock, OpenClients, Owner};
use lockgate_core::options::{duration_from_f64, entry_ttl_from_f64, lease_from_f64, Unit, MAX_PERMITS};
use lockgate_core::time::Duration;
use lockgate_core::inspect::{Mode, Snapshot};
use lockgate_core::{Error, ErrorKind, LeaderInfo, Primitive};

/// A core error as plain data: the stable code (`"TIMEOUT"`, ...), the message (free of
/// credentials) and whether retrying may help.
#[derive(Clone, Debug, uniffi::Record)]
pub struct Failure {
    pub code: String,
    pub message: String,
    pub retryable: bool,
}

/// Every error that crosses the boundary; the JVM maps `code` to its exception class.
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
    Failure { code: e.code().to_string(), message: e.message().to_string(), retryable: e.retryable() }
}

impl From<Error> for NativeError {
    fn from(e: Error) -> Self {
        NativeError::Failed { failure: failure(&e) }
    }
}

type NativeResult<T> = Result<T, NativeError>;

/// A duration's checker in the core: `(name, seconds, unit)`, messages in Java's names and seconds.
type Check = fn(&str, f64, Unit) -> Result<Duration, Error>;

/// Seconds (a Java `Duration` converted by the JVM side) checked by `check` as `what`.
fn secs(check: Check, what: &str, value: f64) -> NativeResult<Duration> {
    Ok(check(what, value, Unit::Seconds)?)
}

fn opt_secs(check: Check, what: &str, value: Option<f64>) -> NativeResult<Option<Duration>> {
    value.map(|v| secs(check, what, v)).transpose()
}

/// The process's runtime (the core's [`foreign_runtime`]: one worker, `lockgate-io`).
static RUNTIME: LazyLock<tokio::runtime::Runtime> =
    LazyLock::new(|| foreign_runtime("lockgate-io").expect("lockgate: cannot start its tokio runtime"));

/// Runs `fut` on the calling JVM thread, which blocks meanwhile, until it ends or `until`
/// passes (`None`): one FFI call, with no continuation crossing back into Java (a release, which
/// obeys no interrupt and takes one round trip, or one slice of a [`NativeWait`]). The thread
/// polls the future itself ([`InPlace`]); from a thread of the runtime (a lease listener that
/// releases) the runtime is told first, so its other tasks keep running.
fn blocking_until<F: Future + ?Sized>(fut: Pin<&mut F>, until: Option<Instant>) -> Option<F::Output> {
    let wait = move || InPlace::new().wait(RUNTIME.handle(), fut, until);
    if tokio::runtime::Handle::try_current().is_ok() {
        tokio::task::block_in_place(wait)
    } else {
        wait()
    }
}

/// [`blocking_until`] the call ends.
fn blocking<T>(fut: impl Future<Output = NativeResult<T>>) -> NativeResult<T> {
    let fut = std::pin::pin!(fut);
    blocking_until(fut, None).expect("a wait without an end returns only the answer")
}

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

/// A client option's value as the JVM gives it (the core's `OptionValue`; a duration is `Real` seconds).
#[derive(Clone, Debug, uniffi::Enum)]
pub enum NativeOptionValue {
    Flag { v: bool },
    Whole { v: i64 },
    Real { v: f64 },
    Text { v: String },
    Bytes { v: Vec<u8> },
    /// `null`: the option's default.
    Unset,
}

impl From<NativeOptionValue> for OptionValue {
    fn from(v: NativeOptionValue) -> Self {
        match v {
            NativeOptionValue::Flag { v } => OptionValue::Bool(v),
            NativeOptionValue::Whole { v } => OptionValue::Int(v),
            NativeOptionValue::Real { v } => OptionValue::Number(v),
            NativeOptionValue::Text { v } => OptionValue::Str(v),
            NativeOptionValue::Bytes { v } => OptionValue::Bytes(v),
            NativeOptionValue::Unset => OptionValue::None,
        }
    }
}

/// Lock options; `None` takes the core's default for the client's backend.
#[derive(Clone, Debug, Default, uniffi::Record)]
pub struct NativeLockOptions {
    pub lease_secs: Option<f64>,
    pub auto_renew: Option<bool>,
    pub wait_timeout_secs: Option<f64>,
    pub entry_ttl_secs: Option<f64>,
    pub reentrant: Option<bool>,
    pub min_hold_secs: Option<f64>,
    pub max_hold_secs: Option<f64>,
}

/// A permit count from the JVM (signed there) as the core's `u32`, else the core's range message.
fn permits(value: i64) -> NativeResult<u32> {
    u32::try_from(value).map_err(|_| {
        Error::invalid(format!("permits must be between 1 and {MAX_PERMITS}, got {value}")).into()
    })
}

/// Seconds or nanoseconds for the JVM, which has no unsigned integers.
fn saturating_i64(value: u128) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Receives the client of [`connect`]; freeing the slot drops a client nobody took.
#[derive(uniffi::Object, Default)]
pub struct ClientSlot(Mutex<Option<NativeClient>>);

#[uniffi::export]
impl ClientSlot {
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// The connected client, once (`None` afterwards or if nothing landed).
    pub fn take(&self) -> Option<Arc<NativeClient>> {
        take(&self.0).map(Arc::new)
    }
}

fn take<T>(m: &Mutex<Option<T>>) -> Option<T> {
    m.lock().unwrap_or_else(|p| p.into_inner()).take()
}

fn put<T>(m: &Mutex<Option<T>>, v: T) {
    *m.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
}

/// Connects to `url` (any scheme the core knows) with `options` by their Java names, into `slot`.
#[uniffi::export]
pub async fn connect(
    url: String,
    options: HashMap<String, NativeOptionValue>,
    slot: Arc<ClientSlot>,
) -> NativeResult<()> {
    let mut opts = ClientOptions::new(url);
    for (key, value) in options {
        opts.set(&key, value.into(), &Spelling::JAVA)?;
    }
    opts.validate_as(&Spelling::JAVA)?;
    on_runtime(async move {
        let inner = opts.connect().await?;
        put(&slot.0, NativeClient { open: OPEN.add(inner.clone()), inner });
        Ok(())
    })
    .await
}

/// What a client's backend can do: its name, URL scheme and every capability by its core name.
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativeCapabilities {
    pub backend: String,
    pub scheme: String,
    pub pairs: Vec<NativeCapability>,
}

/// One capability and whether the backend offers it.
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativeCapability {
    pub name: String,
    pub supported: bool,
}

/// A connected client of any backend (the core's `Client`), in [`OPEN`] under the key `open`.
#[derive(uniffi::Object)]
pub struct NativeClient {
    inner: Client,
    open: u64,
}

/// The clients not closed yet, which [`close_open_clients`] closes when the JVM exits.
static OPEN: OpenClients = OpenClients::new();

impl NativeClient {
    /// The core's lock options for this client's backend, and the reentrant flag.
    fn lock_options(&self, o: NativeLockOptions) -> NativeResult<(lockgate_core::LockOptions, bool)> {
        let opts = self.inner.lock_options(
            opt_secs(lease_from_f64, "lease", o.lease_secs)?,
            o.auto_renew,
            opt_secs(duration_from_f64, "waitTimeout", o.wait_timeout_secs)?,
            opt_secs(entry_ttl_from_f64, "entryTtl", o.entry_ttl_secs)?,
            &Spelling::JAVA,
        )?;
        let opts = self.inner.lock_holds(
            opts,
            opt_secs(duration_from_f64, "minHold", o.min_hold_secs)?,
            opt_secs(duration_from_f64, "maxHold", o.max_hold_secs)?,
            &Spelling::JAVA,
        )?;
        Ok((opts, o.reentrant.unwrap_or(false)))
    }

    /// A handle of `primitive`; the core checks what the backend and the primitive allow.
    fn primitive(&self, name: String, primitive: Primitive, o: NativeLockOptions) -> NativeResult<Arc<NativeLock>> {
        let (opts, reentrant) = self.lock_options(o)?;
        Ok(Arc::new(NativeLock { inner: self.inner.primitive(&name, primitive, opts, reentrant)? }))
    }
}

#[uniffi::export]
impl NativeClient {
    /// Reads lock `name` as `kind` (`mutex`, `rw`, `semaphore`, `election`), changing nothing.
    pub async fn inspect(&self, name: String, kind: String) -> NativeResult<NativeSnapshot> {
        let kind = lockgate_core::inspect::Kind::parse(&kind)?;
        Ok(self.inner.inspect(&name, kind).await?.into())
    }

    /// Breaks lock `name` read as `kind`: removes its holder's entry (only the one whose fencing
    /// token is `token` when given) and wakes the next waiter; what it removed, or `None`.
    pub async fn break_lock(&self, name: String, kind: String, token: Option<i64>) -> NativeResult<Option<NativeBroken>> {
        let kind = lockgate_core::inspect::Kind::parse(&kind)?;
        let token = match token {
            Some(t) => Some(u64::try_from(t).map_err(|_| Error::invalid("token must be a non-negative fencing token"))?),
            None => None,
        };
        Ok(self.inner.break_lock(&name, kind, token).await?.map(|b| NativeBroken {
            label: b.label,
            fencing_token: b.fencing_token.map(|t| saturating_i64(t.into())),
        }))
    }

    /// One page of the locks under `prefix` (`limit` and `cursor` optional; the core checks and
    /// caps them), changing nothing.
    pub async fn list_locks(&self, prefix: String, limit: Option<i64>, cursor: Option<String>) -> NativeResult<NativePage> {
        // A negative limit is refused by the core as any limit below 1.
        let limit = limit.map(|n| u64::try_from(n).unwrap_or(0));
        Ok(self.inner.list(&prefix, limit, cursor.as_deref()).await?.into())
    }

    /// Adopts the lease `identity` names (another client's `Lease::identity`) with `options`'
    /// lease and renewal; the lease fills `into` and its fencing token (or [`NO_TOKEN`]) is
    /// the answer. `NOT_HELD` if it is no longer current, `INVALID_ARGUMENT` if malformed.
    pub async fn adopt(&self, identity: String, options: NativeLockOptions, into: Arc<NativeLease>) -> NativeResult<i64> {
        let (opts, _) = self.lock_options(options)?;
        Ok(into.fill(self.inner.adopt(&identity, opts).await?))
    }

    /// A mutex handle (reentrant if the options say so); name and options are validated by the core.
    pub fn lock(&self, name: String, options: NativeLockOptions) -> NativeResult<Arc<NativeLock>> {
        self.primitive(name, Primitive::Mutex, options)
    }

    /// A counting semaphore's handle: each acquisition takes one of `permits` permits.
    pub fn semaphore(&self, name: String, permits: i64, options: NativeLockOptions) -> NativeResult<Arc<NativeLock>> {
        self.primitive(name, Primitive::Semaphore { permits: self::permits(permits)? }, options)
    }

    /// A read-write lock's two halves, `[read, write]` (both reentrant if the options say so),
    /// whose readers do or do not wait behind queued writers.
    pub fn read_write_lock(
        &self,
        name: String,
        options: NativeLockOptions,
        writers_first: bool,
    ) -> NativeResult<Vec<Arc<NativeLock>>> {
        let (opts, reentrant) = self.lock_options(options)?;
        let mut rw = self.inner.read_write_lock(&name, opts)?.with_writers_first(writers_first);
        if reentrant {
            rw = rw.reentrant();
        }
        Ok([rw.read(), rw.write()].map(|half| Arc::new(NativeLock { inner: half.clone() })).into())
    }

    /// A leader election. Leadership is never reentrant: the core's own check rejects the flag.
    pub fn election(&self, name: String, options: NativeLockOptions) -> NativeResult<Arc<NativeElection>> {
        let (opts, reentrant) = self.lock_options(options.clone())?;
        if reentrant {
            self.primitive(name.clone(), Primitive::Leader { value: String::new() }, options)?;
        }
        Ok(Arc::new(NativeElection { inner: self.inner.election(&name, opts)? }))
    }

    /// What this client's backend can do.
    pub fn capabilities(&self) -> NativeCapabilities {
        let c = self.inner.capabilities();
        NativeCapabilities {
            backend: c.backend.to_string(),
            scheme: c.scheme.to_string(),
            pairs: c.pairs().into_iter().map(|(name, supported)| NativeCapability { name: name.to_string(), supported }).collect(),
        }
    }

    /// Releases every lease and cancels every wait, then stops the client (`close` frees the handle).
    pub async fn shutdown(&self) -> NativeResult<()> {
        OPEN.remove(self.open);
        let client = self.inner.clone();
        on_runtime(async move {
            client.close().await;
            // Its last events (the releases at close) are logged before `close()` returns.
            telemetry::relayed().await;
            Ok(())
        })
        .await
    }

    /// The URL with the password redacted.
    pub fn url(&self) -> String {
        self.inner.url()
    }
}

/// An acquisition answers the JVM with one integer: the fencing token (at least 1), `NO_TOKEN`
/// for a grant without one (a backend without fencing, e.g. Redlock), or `NOT_GRANTED`.
const NO_TOKEN: i64 = 0;
const NOT_GRANTED: i64 = -1;

/// A named lock of any primitive (the core's `Lock`): mutex, read or write half, semaphore permit.
#[derive(uniffi::Object)]
pub struct NativeLock {
    inner: Lock,
}

#[uniffi::export]
impl NativeLock {
    /// An acquisition as the Java thread `owner`, waiting up to `timeout_secs` (else `TIMEOUT`),
    /// as a [`NativeWait`] (in place, or asynchronously); the lease fills `into`.
    pub fn start_acquire(&self, timeout_secs: f64, owner: u64, into: Arc<NativeLease>) -> NativeResult<Arc<NativeWait>> {
        let timeout = secs(duration_from_f64, "timeout", timeout_secs)?;
        let lock = self.inner.as_owner(Owner::thread(owner));
        Ok(NativeWait::new(async move { Ok(into.fill(lock.acquire(timeout).await?)) }))
    }

    /// [`Self::start_acquire`] with the lock's default timeout (forever unless the options set one).
    pub fn start_acquire_default(&self, owner: u64, into: Arc<NativeLease>) -> Arc<NativeWait> {
        let lock = self.inner.as_owner(Owner::thread(owner));
        NativeWait::new(async move { Ok(into.fill(lock.acquire_default().await?)) })
    }

    /// Reads this lock on the server (a semaphore handle the semaphore, a half the whole
    /// read-write lock).
    pub async fn inspect(&self) -> NativeResult<NativeSnapshot> {
        Ok(self.inner.inspect().await?.into())
    }

    /// One attempt as `owner`: `NOT_GRANTED` if the lock is held or waiters are queued.
    pub async fn try_acquire(&self, owner: u64, into: Arc<NativeLease>) -> NativeResult<i64> {
        let lock = self.inner.as_owner(Owner::thread(owner));
        Ok(lock.try_acquire().await?.map_or(NOT_GRANTED, |lease| into.fill(lease)))
    }
}

/// [`NativeWait::wait`]'s answer while the acquisition still waits (Bridge.kt's `STILL_WAITING`).
const STILL_WAITING: i64 = -2;

/// An acquisition not polled yet, or part way.
type Waiting = Pin<Box<dyn Future<Output = NativeResult<i64>> + Send>>;

/// An acquisition the calling JVM thread waits for in place, in one native call at a time
/// ([`Self::wait`]), so an uncontended grant ends there with no continuation crossing back into
/// Java; a wait that goes on is finished asynchronously ([`Self::finish`]). Dropping it, or
/// [`Self::cancel`], withdraws the wait.
#[derive(uniffi::Object)]
pub struct NativeWait(Mutex<Option<Waiting>>);

impl NativeWait {
    fn new(acquisition: impl Future<Output = NativeResult<i64>> + Send + 'static) -> Arc<Self> {
        Arc::new(NativeWait(Mutex::new(Some(Box::pin(acquisition)))))
    }

    fn take(&self) -> NativeResult<Waiting> {
        let waiting = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        waiting.ok_or_else(|| Error::new(ErrorKind::Cancelled, "the operation was cancelled").into())
    }
}

#[uniffi::export]
impl NativeWait {
    /// Waits in place up to `slice_secs`: the acquisition's answer, or `STILL_WAITING` (-2).
    pub fn wait(&self, slice_secs: f64) -> NativeResult<i64> {
        let slice = std::time::Duration::try_from_secs_f64(slice_secs)
            .map_err(|_| Error::invalid(format!("a wait's slice must be a number of seconds, got {slice_secs}")))?;
        let mut waiting = self.take()?;
        match blocking_until(waiting.as_mut(), Some(Instant::now() + slice)) {
            Some(answer) => answer,
            None => {
                *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(waiting);
                Ok(STILL_WAITING)
            }
        }
    }

    /// Waits for the rest of the acquisition without blocking a thread.
    pub async fn finish(&self) -> NativeResult<i64> {
        self.take()?.await
    }

    /// Withdraws the wait.
    pub fn cancel(&self) {
        drop(self.0.lock().unwrap_or_else(|p| p.into_inner()).take());
    }
}

/// One page of a listing (the core's `listing::Page`).
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativePage {
    pub entries: Vec<NativeEntry>,
    pub cursor: Option<String>,
}

/// One listed lock (the core's `listing::Entry`).
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativeEntry {
    pub name: String,
    pub kind: String,
    pub holders: i64,
    pub waiters: i64,
    pub label: Option<String>,
}

impl From<lockgate_core::listing::Page> for NativePage {
    fn from(p: lockgate_core::listing::Page) -> Self {
        NativePage {
            entries: p
                .entries
                .into_iter()
                .map(|e| NativeEntry { name: e.name, kind: e.kind.as_str().into(), holders: e.holders.into(), waiters: e.waiters.into(), label: e.label })
                .collect(),
            cursor: p.cursor,
        }
    }
}

/// One lock as read from its server (the core's `Snapshot`): durations in nanoseconds, absent
/// values `None`.
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativeSnapshot {
    pub kind: String,
    pub holders: Vec<NativeHolder>,
    pub waiters: Vec<NativeWaiter>,
    pub permits: Option<i64>,
}

/// What a break removed (the core's `Broken`).
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativeBroken {
    pub label: Option<String>,
    pub fencing_token: Option<i64>,
}

/// One holder of a [`NativeSnapshot`].
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativeHolder {
    pub label: Option<String>,
    pub fencing_token: Option<i64>,
    pub held_for_nanos: Option<i64>,
    pub remaining_nanos: Option<i64>,
    pub shared: bool,
    pub value: Option<String>,
    pub holds: Option<i64>,
}

/// One waiter of a [`NativeSnapshot`], in queue order.
#[derive(Clone, Debug, uniffi::Record)]
pub struct NativeWaiter {
    pub label: Option<String>,
    pub waiting_for_nanos: Option<i64>,
    pub shared: bool,
}

impl From<Snapshot> for NativeSnapshot {
    fn from(s: Snapshot) -> Self {
        let nanos = |d: Option<lockgate_core::time::Duration>| d.map(|d| saturating_i64(d.as_nanos()));
        NativeSnapshot {
            kind: s.kind.as_str().into(),
            holders: s
                .holders
                .into_iter()
                .map(|h| NativeHolder {
                    label: h.label,
                    fencing_token: h.fencing_token.map(|t| saturating_i64(t.into())),
                    held_for_nanos: nanos(h.held_for),
                    remaining_nanos: nanos(h.remaining),
                    shared: h.mode == Mode::Shared,
                    value: h.value,
                    holds: h.holds.map(i64::from),
                })
                .collect(),
            waiters: s
                .waiters
                .into_iter()
                .map(|w| NativeWaiter { label: w.label, waiting_for_nanos: nanos(w.waiting_for), shared: w.mode == Mode::Shared })
                .collect(),
            permits: s.permits.map(i64::from),
        }
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

/// A leader election (the core's `Election`).
#[derive(uniffi::Object)]
pub struct NativeElection {
    inner: Election,
}

#[uniffi::export]
impl NativeElection {
    /// Campaigns with `value` for up to `timeout_secs` (`None`: the options' wait), else `TIMEOUT`;
    /// the leadership fills `into`, its term (fencing token) is the answer.
    pub async fn campaign(&self, value: String, timeout_secs: Option<f64>, into: Arc<NativeLease>) -> NativeResult<i64> {
        let timeout = opt_secs(duration_from_f64, "timeout", timeout_secs)?;
        Ok(into.fill(self.inner.campaign(&value, timeout).await?))
    }

    /// The leader and the other candidates.
    pub async fn inspect(&self) -> NativeResult<NativeSnapshot> {
        Ok(self.inner.inspect().await?.into())
    }

    /// The current leader, if any.
    pub async fn observe(&self) -> NativeResult<Option<NativeLeader>> {
        Ok(self.inner.observe().await?.map(|l: LeaderInfo| NativeLeader {
            value: l.value,
            term: saturating_i64(l.term.into()),
            remaining_nanos: saturating_i64(l.remaining.as_nanos()),
        }))
    }
}

/// The core's `Lease` (a hold, permit or leadership), created empty and filled by an
/// acquisition. Freeing it releases the lock if still held.
#[derive(uniffi::Object, Default)]
pub struct NativeLease {
    inner: Mutex<Option<Arc<Lease>>>,
}

impl NativeLease {
    /// Keeps `lease`; its fencing token (or [`NO_TOKEN`]) is the acquisition's answer.
    fn fill(&self, lease: Lease) -> i64 {
        let token = lease.fencing_token().map_or(NO_TOKEN, |t| i64::try_from(t).unwrap_or(i64::MAX));
        put(&self.inner, Arc::new(lease));
        token
    }

    fn get(&self) -> Option<Arc<Lease>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn acquired(&self) -> NativeResult<Arc<Lease>> {
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

    /// Whether the lease is certainly still held (renewed, not expired, not lost).
    pub fn is_held(&self) -> bool {
        self.get().is_some_and(|l| l.is_held())
    }

    /// Nanoseconds the lease is certainly still valid, if held.
    pub fn remaining_nanos(&self) -> Option<i64> {
        self.get()?.remaining().map(|d| saturating_i64(d.as_nanos()))
    }

    pub fn lost_reason(&self) -> Option<Failure> {
        self.get()?.lost_reason().as_ref().map(failure)
    }

    /// Sets the remaining lease to `duration_secs` if still held, else `NOT_HELD` (and it is lost).
    pub async fn extend(&self, duration_secs: f64) -> NativeResult<()> {
        let duration = secs(lease_from_f64, "extend's duration", duration_secs)?;
        Ok(self.acquired()?.extend(duration).await?)
    }

    /// The name of the lock the lease holds (`None` before it is filled).
    pub fn name(&self) -> Option<String> {
        self.get().map(|l| l.name().to_string())
    }

    /// The lease's identity, for another client to adopt (PROTOCOL.md §17).
    pub async fn identity(&self) -> NativeResult<String> {
        Ok(self.acquired()?.identity().await?)
    }

    /// Owner-only release: `true` if it was still held, `false` if it had expired or been lost.
    pub async fn release(&self) -> NativeResult<bool> {
        Ok(self.acquired()?.release().await?)
    }

    /// [`Self::release`], blocking the calling thread.
    pub fn release_blocking(&self) -> NativeResult<bool> {
        blocking(self.release())
    }

    /// Releases on leaving a scope (try-with-resources, `unlock()`), blocking the calling
    /// thread: `NOT_HELD` if the lease had been lost meanwhile (the core's scope rule), nothing
    /// if already released.
    pub fn end_scope_blocking(&self) -> NativeResult<()> {
        let lease = self.acquired()?;
        blocking(async move { Ok(lease.end_scope(false).await?) })
    }

    /// Whether the lease is held but cannot be confirmed now (its session disconnected, its renewals failing).
    pub fn is_at_risk(&self) -> bool {
        self.get().is_some_and(|l| l.is_at_risk())
    }

    /// Tells `listener` of every spell at risk (the one under way first), then of the lease's
    /// end, each on a blocking thread of the runtime; keeps only watches, never the lease.
    pub fn listen(&self, listener: Arc<dyn LeaseListener>) {
        let Some(lease) = self.get() else { return listener.ended(None) };
        let (mut spells, lost) = (lease.at_risk_spells(), lease.lost_signal());
        RUNTIME.spawn(async move {
            while spells.next().await {
                let l = listener.clone();
                let _ = tokio::task::spawn_blocking(move || l.at_risk()).await;
            }
            let lost = lost.await.as_ref().map(failure);
            let _ = tokio::task::spawn_blocking(move || listener.ended(lost)).await;
        });
    }
}

/// What the JVM hears of a lease after its grant (implemented there).
#[uniffi::export(with_foreign)]
pub trait LeaseListener: Send + Sync {
    /// A spell at risk began.
    fn at_risk(&self);
    /// The lease ended: lost with `lost`, or `None` (released, its client gone).
    fn ended(&self, lost: Option<Failure>);
}

/// The JVM's exit hook: closes every client not closed yet, waiting at most the core's exit grace.
#[uniffi::export]
pub fn close_open_clients() {
    RUNTIME.block_on(OPEN.close_all());
}

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
