//! Argument conversion and lease bookkeeping shared by the sync and asyncio classes.
//!
//! [`Text`], [`Secs`] and [`Count`] are how every method receives strings, seconds and counts:
//! a value of the right type that the core cannot take (a lone surrogate, an integer too large
//! for any machine type) raises `InvalidArgumentError` at the call, like every other bad value,
//! instead of Python's `UnicodeEncodeError` / `OverflowError`. A value of the wrong type still
//! raises `TypeError`.

use std::ops::Deref;
use std::path::PathBuf;

use lockgate_core::connect::{Spelling, DEFAULT_REPLICA_ACK_TIMEOUT};
use lockgate_core::native::ClientOptions;
use lockgate_core::options::{
    duration_from_secs_f64, LockOptions, MAX_PERMITS, MIN_ENTRY_TTL, MIN_LEASE,
};
use lockgate_core::time::Duration;
use lockgate_core::{Error, LeaderInfo as CoreLeaderInfo, Primitive, ReplicaAcks};
use pyo3::exceptions::PyOverflowError;
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::{to_py, IntoPyResult};

/// A `str` argument as UTF-8. A lone surrogate (`"\\ud800"`) cannot be sent to the server as
/// UTF-8: `InvalidArgumentError`, not `UnicodeEncodeError`.
pub(crate) struct Text(pub String);

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Text {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let s = obj.cast::<PyString>()?;
        match s.to_cow() {
            Ok(text) => Ok(Text(text.into_owned())),
            Err(_) => Err(to_py(
                obj.py(),
                Error::invalid(format!(
                    "{} contains a lone surrogate, which has no UTF-8 encoding",
                    truncated_repr(&obj)
                )),
            )),
        }
    }
}

/// Seconds as a Python `float` or `int`. An `int` too large for a float is out of range like
/// `inf` (the core's range check then names the option), not an `OverflowError`.
#[derive(Clone, Copy)]
pub(crate) struct Secs(pub f64);

impl<'a, 'py> FromPyObject<'a, 'py> for Secs {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<f64>() {
            Ok(v) => Ok(Secs(v)),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                let negative = obj.lt(0).unwrap_or(false);
                Ok(Secs(if negative {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }))
            }
            Err(e) => Err(e),
        }
    }
}

/// A count (`permits`, `replica_acks`) as a Python `int`: one that no 64-bit integer holds is
/// kept as its text, for the range error to quote.
pub(crate) enum Count {
    Fits(i64),
    Huge(String),
}

impl<'a, 'py> FromPyObject<'a, 'py> for Count {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<i64>() {
            Ok(v) => Ok(Count::Fits(v)),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                Ok(Count::Huge(truncated_repr(&obj)))
            }
            Err(e) => Err(e),
        }
    }
}

/// `repr(obj)`, cut to a length fit for an error message.
fn truncated_repr(obj: &Borrowed<'_, '_, PyAny>) -> String {
    let text = obj
        .repr()
        .and_then(|r| r.to_cow().map(|c| c.into_owned()))
        .unwrap_or_else(|_| "the value".into());
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

/// Seconds (Python float) → core duration; the core validates (NaN, negative, too large).
pub(crate) fn secs(what: &str, value: f64) -> Result<Duration, Error> {
    duration_from_secs_f64(what, value)
}

/// Seconds → a duration of at least `min` (a lease, an entry TTL): the error names the
/// argument as the Python user spelled it and speaks in seconds, as the user does (the core's
/// own range check, which still runs, is worded for every binding).
pub(crate) fn secs_at_least(what: &str, value: f64, min: Duration) -> Result<Duration, Error> {
    let d = secs(what, value)?;
    if d < min {
        return Err(Error::invalid(format!(
            "{what} must be at least {} s, got {value} s",
            min.as_secs_f64()
        )));
    }
    Ok(d)
}

/// Seconds → a lease (at least the core's `MIN_LEASE`), named `what`.
pub(crate) fn lease_secs(what: &str, value: f64) -> Result<Duration, Error> {
    secs_at_least(what, value, MIN_LEASE)
}

/// Core duration → seconds.
pub(crate) fn to_secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// An `acquire(timeout=...)` argument: `None` is the lock's default wait.
pub(crate) fn parse_timeout(py: Python<'_>, timeout: Option<Secs>) -> PyResult<Option<Duration>> {
    timeout.map(|t| secs("timeout", t.0)).transpose().py(py)
}


/// The keyword arguments of `Client(url, *, ...)` (sync and asyncio alike).
pub(crate) struct ClientArgs {
    pub key_prefix: Option<Text>,
    pub tls_ca_file: Option<PathBuf>,
    pub connect_timeout: Option<Secs>,
    pub response_timeout: Option<Secs>,
    pub cluster: bool,
    pub replica_acks: Option<Count>,
    pub replica_ack_timeout: Option<Secs>,
}

/// `Client(url, *, key_prefix, tls_ca_file, connect_timeout, response_timeout, cluster,
/// replica_acks, replica_ack_timeout)` → core options, validated by the core.
/// Reading the CA file is the only I/O here; a missing file raises the usual `OSError`.
pub(crate) fn client_options(
    py: Python<'_>,
    url: &str,
    args: ClientArgs,
) -> PyResult<ClientOptions> {
    let mut opts = ClientOptions::new(url);
    opts.cluster = args.cluster;
    opts.replica_acks = replica_acks_option(args.replica_acks, args.replica_ack_timeout).py(py)?;
    if let Some(p) = args.key_prefix {
        opts.key_prefix = p.0;
    }
    if let Some(t) = args.connect_timeout {
        opts.connect_timeout = secs("connect_timeout", t.0).py(py)?;
    }
    if let Some(t) = args.response_timeout {
        opts.response_timeout = secs("response_timeout", t.0).py(py)?;
    }
    if let Some(path) = args.tls_ca_file {
        opts.tls_ca_pem = Some(std::fs::read(path)?);
    }
    // The core's rules, worded in Python's keyword names.
    opts.validate_as(&Spelling::PYTHON).py(py)?;
    Ok(opts)
}

/// `replica_acks=None` is the plain mode (a `replica_ack_timeout` alone is rejected);
/// a count enables the replica-acknowledged mode with `replica_ack_timeout` seconds of `WAIT`.
/// The range checks are the core's (`ClientOptions::validate`), except counts a `u32` cannot
/// hold and sub-millisecond waits: the core's engine rejects those only when it connects, which
/// for the asyncio client would be its first use instead of its constructor.
fn replica_acks_option(
    replicas: Option<Count>,
    timeout: Option<Secs>,
) -> Result<Option<ReplicaAcks>, Error> {
    let Some(replicas) = replicas else {
        return match timeout {
            None => Ok(None),
            Some(_) => Err(Error::invalid(
                "replica_ack_timeout needs replica_acks (the number of replicas WAIT must reach)",
            )),
        };
    };
    let bad = |got: &dyn std::fmt::Display| {
        Error::invalid(format!(
            "replica_acks must be a positive number of replicas, got {got}"
        ))
    };
    let replicas = match replicas {
        Count::Fits(n) => u32::try_from(n).map_err(|_| bad(&n))?,
        Count::Huge(text) => return Err(bad(&text)),
    };
    let timeout = secs(
        "replica_ack_timeout",
        // The core's default (1 s), the same in every binding.
        timeout.map_or(DEFAULT_REPLICA_ACK_TIMEOUT.as_secs_f64(), |t| t.0),
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
    lease: Option<Secs>,
    renew: Option<bool>,
    timeout: Option<Secs>,
    entry_ttl: Option<Secs>,
) -> Result<LockOptions, Error> {
    let mut options = match lease {
        None => LockOptions::default(),
        Some(s) => LockOptions::fixed_lease(lease_secs("lease", s.0)?),
    };
    if let Some(r) = renew {
        options.auto_renew = r;
    }
    options.wait_timeout = timeout.map(|t| secs("timeout", t.0)).transpose()?;
    if let Some(t) = entry_ttl {
        options.entry_ttl = secs_at_least("entry_ttl", t.0, MIN_ENTRY_TTL)?;
    }
    options.validate()?;
    Ok(options)
}

/// A Python int → the core's permit count. Out-of-range values (negative, huge) keep the
/// core's `INVALID_ARGUMENT` wording instead of becoming an `OverflowError`; the core itself
/// checks the range of everything that fits.
pub(crate) fn permits(permits: Count) -> Result<u32, Error> {
    let bad = |got: &dyn std::fmt::Display| {
        Error::invalid(format!(
            "permits must be between 1 and {MAX_PERMITS}, got {got}"
        ))
    };
    match permits {
        Count::Fits(n) => u32::try_from(n).map_err(|_| bad(&n)),
        Count::Huge(text) => Err(bad(&text)),
    }
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
        "<{module}.{} name={}{kind}{reentrant} {}>",
        class_of(primitive),
        py_repr(py, name)?,
        options_repr(py, options)?,
    ))
}

/// The `lease=... renew=... timeout=...` part of a lock handle's `repr()` (either kind).
pub(crate) fn options_repr(py: Python<'_>, options: &LockOptions) -> PyResult<String> {
    let float = |d: Duration| -> PyResult<String> {
        Ok(pyo3::types::PyFloat::new(py, to_secs(d))
            .repr()?
            .to_string())
    };
    let timeout = match options.wait_timeout {
        Some(t) => float(t)?,
        None => "None".into(),
    };
    Ok(format!(
        "lease={} renew={} timeout={timeout}",
        float(options.lease)?,
        py_bool(options.auto_renew),
    ))
}

/// Python's spelling of a bool.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
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
