//! How Python values become the core's: strings, seconds, counts, client options and lock
//! options. A value of the right type that the core cannot take (a lone surrogate, an integer
//! too large for any machine type) raises `InvalidArgumentError` at the call like every other
//! bad value, instead of `UnicodeEncodeError` / `OverflowError`; a wrong type raises
//! `TypeError`. The rules and defaults themselves are the core's.

use std::path::PathBuf;

use lockgate_core::options::{
    duration_from_secs_f64, entry_ttl_from_f64, lease_from_f64, LockOptions, Unit, MAX_PERMITS,
};
use lockgate_core::time::Duration;
use lockgate_core::Error;
use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString};

use crate::connection::Connection;
use crate::errors::{to_py, IntoPyResult};
use lockgate_core::connect::{ClientOptions, OptionValue, Spelling};

/// A `str` argument as UTF-8 (a lone surrogate has none: `InvalidArgumentError`).
pub(crate) struct Text(pub String);

impl<'a, 'py> FromPyObject<'a, 'py> for Text {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.cast::<PyString>()?.to_cow() {
            Ok(text) => Ok(Text(text.into_owned())),
            Err(_) => Err(invalid(
                obj.py(),
                format!("{} contains a lone surrogate, which has no UTF-8 encoding", short_repr(&obj)),
            )),
        }
    }
}

/// Seconds as a Python `float` or `int`; an `int` too large for a float is out of range like
/// `inf` (the core's range check then names the argument).
#[derive(Clone, Copy)]
pub(crate) struct Secs(pub f64);

impl<'a, 'py> FromPyObject<'a, 'py> for Secs {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<f64>() {
            Ok(v) => Ok(Secs(v)),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                Ok(Secs(if obj.lt(0).unwrap_or(false) { f64::NEG_INFINITY } else { f64::INFINITY }))
            }
            Err(e) => Err(e),
        }
    }
}

/// A semaphore's `permits` (the core checks the range of every count that fits a `u32`).
pub(crate) struct Permits(pub u32);

impl<'a, 'py> FromPyObject<'a, 'py> for Permits {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let n = obj.extract::<i64>().or_else(|e| {
            if e.is_instance_of::<PyOverflowError>(obj.py()) {
                Ok(i64::MAX)
            } else {
                Err(e)
            }
        })?;
        u32::try_from(n).map(Permits).map_err(|_| {
            invalid(obj.py(), format!("permits must be between 1 and {MAX_PERMITS}, got {}", short_repr(&obj)))
        })
    }
}

fn invalid(py: Python<'_>, message: String) -> PyErr {
    to_py(py, Error::invalid(message))
}

/// `repr(obj)`, cut to a length fit for an error message.
fn short_repr(obj: &Borrowed<'_, '_, PyAny>) -> String {
    let text = obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "the value".into());
    match text.char_indices().nth(40) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text,
    }
}

/// Seconds → a duration from zero to the core's maximum, named `what` in errors.
pub(crate) fn secs(py: Python<'_>, what: &str, value: Secs) -> PyResult<Duration> {
    duration_from_secs_f64(what, value.0).py(py)
}

/// Seconds → a lease (the core's minimum and maximum), named `what` in errors.
pub(crate) fn lease_secs(py: Python<'_>, what: &str, value: Secs) -> PyResult<Duration> {
    lease_from_f64(what, value.0, Unit::Seconds).py(py)
}

/// An `acquire(timeout=...)` argument: `None` is the lock's default wait.
pub(crate) fn timeout(py: Python<'_>, value: Option<Secs>) -> PyResult<Option<Duration>> {
    value.map(|t| secs(py, "timeout", t)).transpose()
}

/// A handle factory's `timeout=` keyword, refused whatever its value: redis-py's
/// `r.lock(name, timeout=10)` is a 10 s *lease*, and silently taking it as the wait would give a
/// migrating user other semantics (issue 23, item 9).
pub(crate) fn refuse_timeout(factory: &str, timeout: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
    match timeout {
        None => Ok(()),
        Some(_) => Err(PyTypeError::new_err(format!(
            "{factory}() takes no timeout= keyword: in redis-py timeout= is the lease, here that is \
             lease=<seconds>; how long to wait is acquire(timeout=<seconds>), or wait=<seconds> for the \
             handle's default wait"
        ))),
    }
}

/// `Client(url, **options)` → validated core options and the URL to show (passwords
/// redacted). Each keyword goes to the core's one setter as it is spelled, so a backend's
/// options need no code here; a value for an option named `*_file` (a path) is the file's
/// contents (the core does no I/O): the usual `OSError` if it cannot be read.
pub(crate) fn client_options(
    py: Python<'_>,
    url: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<(ClientOptions, String)> {
    let mut opts = ClientOptions::new(url);
    for (key, value) in options.into_iter().flatten() {
        let key: String = key.extract()?;
        let value = if value.is_none() {
            OptionValue::None
        } else if key.ends_with("_file") {
            OptionValue::Bytes(std::fs::read(value.extract::<PathBuf>()?)?)
        } else if value.is_instance_of::<PyBool>() {
            OptionValue::Bool(value.extract()?)
        } else if value.is_instance_of::<PyInt>() {
            // Beyond 64 bits: out of every option's range, as the core's check then says.
            OptionValue::Int(value.extract::<i64>().unwrap_or(if value.lt(0)? { i64::MIN } else { i64::MAX }))
        } else if value.is_instance_of::<PyFloat>() {
            OptionValue::Number(value.extract()?)
        } else if value.is_instance_of::<PyString>() {
            OptionValue::Str(value.extract::<Text>()?.0)
        } else if value.is_instance_of::<PyBytes>() {
            OptionValue::Bytes(value.extract()?)
        } else {
            return Err(PyTypeError::new_err(format!("{key} cannot be a {}", value.get_type().name()?)));
        };
        opts.set(&key, value, &Spelling::PYTHON).py(py)?;
    }
    opts.validate_as(&Spelling::PYTHON).py(py)?;
    let shown = opts.target().py(py)?.to_string();
    Ok((opts, shown))
}

/// `lock(name, lease=None, *, renew=None, wait=None, entry_ttl=None, min_hold=None,
/// max_hold=None)` → the lock's options, with the defaults and rules of `conn`'s backend
/// (`lease=None`: its renewed lease; `holds`: the shortest and longest hold).
pub(crate) fn lock_options(
    py: Python<'_>,
    conn: &Connection,
    lease: Option<Secs>,
    renew: Option<bool>,
    wait: Option<Secs>,
    entry_ttl: Option<Secs>,
    holds: (Option<Secs>, Option<Secs>),
) -> PyResult<LockOptions> {
    let lease = lease.map(|s| lease_secs(py, "lease", s)).transpose()?;
    let entry_ttl = entry_ttl.map(|t| entry_ttl_from_f64("entry_ttl", t.0, Unit::Seconds).py(py)).transpose()?;
    let timeout = wait.map(|t| secs(py, "wait", t)).transpose()?;
    // A lease given is fixed unless `renew=True` (as the actor protocol has it too); the core's
    // `lock_options` would renew it by default.
    let renew = renew.or(Some(lease.is_none()));
    let min_hold = holds.0.map(|t| secs(py, "min_hold", t)).transpose()?;
    let max_hold = holds.1.map(|t| secs(py, "max_hold", t)).transpose()?;
    let lock = conn.options.lock_options(lease, renew, timeout, entry_ttl, &Spelling::PYTHON).py(py)?;
    conn.options.lock_holds(lock, min_hold, max_hold, &Spelling::PYTHON).py(py)
}

/// `<module.Class fields>`, the `repr()` of a lockgate object.
pub(crate) fn class_repr<T>(obj: &Bound<'_, T>, fields: &str) -> PyResult<String> {
    let cls = obj.as_any().get_type();
    Ok(format!("<{}.{} {fields}>", cls.module()?, cls.qualname()?))
}

/// Python's `repr()` of a string.
pub(crate) fn py_repr(py: Python<'_>, s: &str) -> PyResult<String> {
    Ok(PyString::new(py, s).repr()?.to_string())
}

/// Python's `repr()` of seconds.
pub(crate) fn secs_repr(py: Python<'_>, d: Duration) -> PyResult<String> {
    Ok(PyFloat::new(py, d.as_secs_f64()).repr()?.to_string())
}

/// Python's spelling of a bool.
pub(crate) fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}
