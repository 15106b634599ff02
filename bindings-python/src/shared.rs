//! Argument conversion and lease bookkeeping shared by the sync and asyncio classes.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use lockgate_core::native::{ClientOptions, Lease as CoreLease};
use lockgate_core::options::{duration_from_secs_f64, LockOptions, MAX_PERMITS};
use lockgate_core::time::Duration;
use lockgate_core::{Error, ErrorKind, LeaderInfo as CoreLeaderInfo, Primitive, ReplicaAcks};
use pyo3::prelude::*;

use std::sync::Arc;

use crate::handle::ClientHandle;

/// Seconds (Python float) → core duration; the core validates (NaN, negative, too large).
pub(crate) fn secs(what: &str, value: f64) -> Result<Duration, Error> {
    duration_from_secs_f64(what, value)
}

/// Core duration → seconds.
pub(crate) fn to_secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// Default `WAIT` timeout of the replica-acknowledged mode when only `replica_acks` is given
/// (Redisson's `syncSlavesTimeout` default); below the default 5 s response timeout.
const DEFAULT_REPLICA_ACK_TIMEOUT: f64 = 1.0;

/// The keyword arguments of `Client(url, *, ...)` (sync and asyncio alike).
pub(crate) struct ClientArgs {
    pub key_prefix: Option<String>,
    pub tls_ca_file: Option<PathBuf>,
    pub connect_timeout: Option<f64>,
    pub response_timeout: Option<f64>,
    pub cluster: bool,
    pub replica_acks: Option<i64>,
    pub replica_ack_timeout: Option<f64>,
}

/// `Client(url, *, key_prefix, tls_ca_file, connect_timeout, response_timeout, cluster,
/// replica_acks, replica_ack_timeout)` → core options, validated by the core.
/// Reading the CA file is the only I/O here; a missing file raises the usual `OSError`.
pub(crate) fn client_options(
    py: Python<'_>,
    url: &str,
    args: ClientArgs,
) -> PyResult<ClientOptions> {
    use crate::errors::IntoPyResult;
    let ClientArgs {
        key_prefix,
        tls_ca_file,
        connect_timeout,
        response_timeout,
        cluster,
        replica_acks,
        replica_ack_timeout,
    } = args;
    let mut opts = ClientOptions::new(url);
    opts.cluster = cluster;
    opts.replica_acks = replica_acks_option(replica_acks, replica_ack_timeout).py(py)?;
    if let Some(p) = key_prefix {
        opts.key_prefix = p;
    }
    if let Some(t) = connect_timeout {
        opts.connect_timeout = secs("connect_timeout", t).py(py)?;
    }
    if let Some(t) = response_timeout {
        opts.response_timeout = secs("response_timeout", t).py(py)?;
    }
    if let Some(path) = tls_ca_file {
        opts.tls_ca_pem = Some(std::fs::read(path)?);
    }
    opts.validate().py(py)?;
    Ok(opts)
}

/// `replica_acks=None` is the plain mode (a `replica_ack_timeout` alone is rejected);
/// a count enables the replica-acknowledged mode with `replica_ack_timeout` seconds of `WAIT`.
/// The range checks are the core's (`ClientOptions::validate`), except counts a `u32` cannot
/// hold and sub-millisecond waits: the core's engine rejects those only when it connects, which
/// for the asyncio client would be its first use instead of its constructor.
fn replica_acks_option(
    replicas: Option<i64>,
    timeout: Option<f64>,
) -> Result<Option<ReplicaAcks>, Error> {
    let Some(replicas) = replicas else {
        return match timeout {
            None => Ok(None),
            Some(_) => Err(Error::invalid(
                "replica_ack_timeout needs replica_acks (the number of replicas WAIT must reach)",
            )),
        };
    };
    let replicas = u32::try_from(replicas).map_err(|_| {
        Error::invalid(format!(
            "replica_acks must be a positive number of replicas, got {replicas}"
        ))
    })?;
    let timeout = secs(
        "replica_ack_timeout",
        timeout.unwrap_or(DEFAULT_REPLICA_ACK_TIMEOUT),
    )?;
    if !timeout.is_zero() && timeout < Duration::from_millis(1) {
        return Err(Error::invalid(
            "replica_ack_timeout must be at least 0.001 s (WAIT counts milliseconds)",
        ));
    }
    Ok(Some(ReplicaAcks { replicas, timeout }))
}

/// `lock(name, lease=None, *, renew=None, timeout=None, entry_ttl=None)` → core options.
///
/// `lease=None` is the core default (30 s, renewed by a watchdog: Redisson's behaviour);
/// a number is a fixed lease, not renewed unless `renew=True`.
pub(crate) fn lock_options(
    lease: Option<f64>,
    renew: Option<bool>,
    timeout: Option<f64>,
    entry_ttl: Option<f64>,
) -> Result<LockOptions, Error> {
    let mut options = match lease {
        None => LockOptions::default(),
        Some(s) => LockOptions::fixed_lease(secs("lease", s)?),
    };
    if let Some(r) = renew {
        options.auto_renew = r;
    }
    options.wait_timeout = timeout.map(|t| secs("timeout", t)).transpose()?;
    if let Some(t) = entry_ttl {
        options.entry_ttl = secs("entry_ttl", t)?;
    }
    options.validate()?;
    Ok(options)
}

/// A held lease as both APIs keep it: the core lease plus whether the user released it
/// explicitly (so leaving a `with` block after `release()` does not report a loss).
pub(crate) struct LeaseCell {
    pub lease: CoreLease,
    /// Keeps the client registered for the exit hook while the lease lives.
    client: Arc<ClientHandle>,
    released_by_user: AtomicBool,
}

impl LeaseCell {
    pub(crate) fn new(lease: CoreLease, client: Arc<ClientHandle>) -> Arc<Self> {
        Arc::new(LeaseCell {
            lease,
            client,
            released_by_user: AtomicBool::new(false),
        })
    }

    /// `lease.release()`: `True` if it was still held.
    pub(crate) async fn release(&self) -> Result<bool, Error> {
        self.client.owner.check()?;
        self.released_by_user.store(true, Ordering::Release);
        self.lease.release().await
    }

    pub(crate) async fn extend(&self, duration: Duration) -> Result<(), Error> {
        self.client.owner.check()?;
        self.lease.extend(duration).await
    }

    /// Leaving a `with` block. With no exception in flight, a lease that was no longer held
    /// (lost, expired, taken over) raises `NotHeldError`: the protected work may have overlapped
    /// another holder, and the caller must hear it. With an exception in flight nothing is
    /// raised on top of it (the lock is still released, or freed by its lease).
    pub(crate) async fn exit(&self, exception_in_flight: bool) -> Result<(), Error> {
        if self.released_by_user.load(Ordering::Acquire) {
            return Ok(());
        }
        let released = self.release().await;
        exit_result(released, exception_in_flight, || self.lease.lost_reason())
    }

    pub(crate) fn repr(&self, py: Python<'_>, class: &str) -> PyResult<String> {
        Ok(format!(
            "<{class} name={} fencing_token={} held={}>",
            py_repr(py, self.lease.name())?,
            self.lease.fencing_token(),
            if self.lease.is_held() {
                "True"
            } else {
                "False"
            }
        ))
    }
}

/// What leaving a `with` block reports once the lease was released (`released`): nothing with an
/// exception in flight (it propagates alone), nothing if the lease was still held, otherwise the
/// loss (`lost_reason`, or a generic `NOT_HELD`) or the release's own error. Shared by both
/// lease kinds.
pub(crate) fn exit_result(
    released: Result<bool, Error>,
    exception_in_flight: bool,
    lost_reason: impl FnOnce() -> Option<Error>,
) -> Result<(), Error> {
    if exception_in_flight {
        return Ok(());
    }
    if released? {
        return Ok(());
    }
    Err(lost_reason().unwrap_or_else(|| {
        Error::new(
            ErrorKind::NotHeld,
            "the lease had expired or been taken over before the block ended",
        )
    }))
}

/// A Python int → the core's permit count. Out-of-range values (negative, huge) keep the
/// core's `INVALID_ARGUMENT` wording instead of becoming an `OverflowError`; the core itself
/// checks the range of everything that fits.
pub(crate) fn permits(permits: i64) -> Result<u32, Error> {
    u32::try_from(permits).map_err(|_| {
        Error::invalid(format!(
            "permits must be between 1 and {MAX_PERMITS}, got {permits}"
        ))
    })
}

/// The Python class name of a handle on `primitive` (`"Semaphore"` or `"Lock"`).
pub(crate) fn class_of(primitive: &Primitive) -> &'static str {
    match primitive {
        Primitive::Semaphore { .. } => "Semaphore",
        _ => "Lock",
    }
}

/// `repr(lock)` for every kind of handle: `module` is `"lockgate"` or `"lockgate.aio"`.
pub(crate) fn lock_repr(
    py: Python<'_>,
    module: &str,
    name: &str,
    primitive: &Primitive,
    reentrant: bool,
    options: &LockOptions,
) -> PyResult<String> {
    let float = |d: Duration| -> PyResult<String> {
        Ok(pyo3::types::PyFloat::new(py, to_secs(d))
            .repr()?
            .to_string())
    };
    let py_bool = |b: bool| if b { "True" } else { "False" };
    let timeout = match options.wait_timeout {
        Some(t) => float(t)?,
        None => "None".into(),
    };
    let kind = match primitive {
        Primitive::Mutex => String::new(),
        Primitive::Semaphore { permits } => format!(" permits={permits}"),
        Primitive::Read { writers_first } => {
            format!(" mode='read' writers_first={}", py_bool(*writers_first))
        }
        Primitive::Write => " mode='write'".into(),
        Primitive::Leader { .. } => " mode='leader'".into(),
    };
    let reentrant = if reentrant { " reentrant=True" } else { "" };
    Ok(format!(
        "<{module}.{} name={}{kind}{reentrant} lease={} renew={} timeout={timeout}>",
        class_of(primitive),
        py_repr(py, name)?,
        float(options.lease)?,
        py_bool(options.auto_renew),
    ))
}

/// The current leader of an election, as :meth:`Election.observe` sees it: ``value`` (what it
/// published), ``term`` (its fencing token) and ``remaining`` (seconds). Immutable; compares by
/// value.
#[pyclass(frozen, eq, module = "lockgate")]
#[derive(PartialEq)]
pub struct LeaderInfo {
    /// The value the leader published when it campaigned (e.g. its address).
    #[pyo3(get)]
    value: String,
    /// The leader's term: its lease's fencing token, larger for every later leader.
    #[pyo3(get)]
    term: u64,
    /// Seconds left on the leader's lease on the server when observed (renewed while it lives).
    #[pyo3(get)]
    remaining: f64,
}

impl From<CoreLeaderInfo> for LeaderInfo {
    fn from(info: CoreLeaderInfo) -> Self {
        LeaderInfo {
            value: info.value,
            term: info.term,
            remaining: to_secs(info.remaining),
        }
    }
}

#[pymethods]
impl LeaderInfo {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "LeaderInfo(value={}, term={}, remaining={})",
            py_repr(py, &self.value)?,
            self.term,
            pyo3::types::PyFloat::new(py, self.remaining).repr()?
        ))
    }
}

/// Python's `repr()` of a string.
pub(crate) fn py_repr(py: Python<'_>, s: &str) -> PyResult<String> {
    Ok(pyo3::types::PyString::new(py, s).repr()?.to_string())
}
