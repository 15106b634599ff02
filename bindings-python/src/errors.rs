//! The one place where a core [`Error`] becomes a Python exception.
//!
//! The classes are built at import from the core's taxonomy ([`ErrorKind::ALL`]): `LockError`
//! is the base, each core code has one subclass, and a class whose meaning a builtin already
//! names also subclasses it (`TimeoutError`, `ValueError`, `RuntimeError`), as pydantic-core
//! does. Every raised instance carries the core's `.code` and `.retryable`.

use lockgate_core::{Error, ErrorKind};
use pyo3::exceptions::{PyException, PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::IntoPyObjectExt;

/// Every exception class, base first; built when the module is imported.
static CLASSES: PyOnceLock<Vec<(Option<ErrorKind>, Py<PyType>)>> = PyOnceLock::new();

/// The Python name and docstring of the class for `kind` (`None`: a kind newer than this
/// binding, raised as the base class).
fn describe(kind: ErrorKind) -> Option<(&'static str, &'static str)> {
    Some(match kind {
        ErrorKind::InvalidArgument => ("InvalidArgumentError", "An argument was rejected before any network call (empty name, bad URL, NaN or negative seconds...). Also a ValueError."),
        ErrorKind::Timeout => ("LockTimeoutError", "The wait for the lock ran out while someone else held it. Also a TimeoutError; retryable."),
        ErrorKind::NotHeld => ("NotHeldError", "The lease is not (or no longer) held: it expired, was taken over, deleted or released."),
        ErrorKind::Connection => ("LockConnectionError", "The server could not be reached or the connection broke; retryable."),
        ErrorKind::Authentication => ("AuthenticationError", "The server refused the credentials (never retried, never a silent fallback)."),
        ErrorKind::Protocol => ("ProtocolError", "The server replied with something the lock protocol does not allow (e.g. a key of the wrong type)."),
        ErrorKind::Cancelled => ("LockCancelledError", "The operation was cancelled (lock.cancel(), or a wait abandoned by client shutdown)."),
        ErrorKind::Closed => ("ClientClosedError", "The client was closed (or belongs to another process); no further operation is possible on it."),
        ErrorKind::AlreadyHeld => ("AlreadyHeldError", "This non-reentrant lock handle already holds the lock: acquiring again through it fails at once instead of waiting for itself (python-redis-lock's AlreadyAcquired). Also a RuntimeError."),
        ErrorKind::Unsupported => ("UnsupportedError", "The client's backend cannot do this (a semaphore on a Redlock, ...): see Client.capabilities. Raised when the handle is made, before any network call."),
        _ => return None,
    })
}

/// The builtin a class also derives from.
fn builtin(py: Python<'_>, kind: ErrorKind) -> Option<Bound<'_, PyType>> {
    match kind {
        ErrorKind::InvalidArgument => Some(py.get_type::<PyValueError>()),
        ErrorKind::Timeout => Some(py.get_type::<PyTimeoutError>()),
        ErrorKind::AlreadyHeld => Some(py.get_type::<PyRuntimeError>()),
        _ => None,
    }
}

/// Builds the exception classes and adds them to `m` (once per import).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    for (_, cls) in CLASSES.get_or_try_init(py, || build(py))? {
        m.add(cls.bind(py).name()?, cls)?;
    }
    Ok(())
}

fn class(
    py: Python<'_>,
    name: &str,
    bases: Vec<Bound<'_, PyType>>,
    doc: &str,
    code: &str,
    retryable: bool,
) -> PyResult<Py<PyType>> {
    let ns = PyDict::new(py);
    ns.set_item("__doc__", doc)?;
    ns.set_item("__module__", "lockgate")?;
    ns.set_item("code", code)?;
    ns.set_item("retryable", retryable)?;
    let cls = py.get_type::<PyType>().call1((name, PyTuple::new(py, bases)?, ns))?;
    Ok(cls.cast_into::<PyType>()?.unbind())
}

fn build(py: Python<'_>) -> PyResult<Vec<(Option<ErrorKind>, Py<PyType>)>> {
    let doc = "Base class of every lockgate error: `code` is the stable, language-neutral error \
               code (\"TIMEOUT\", \"NOT_HELD\", ...), `retryable` whether the same call may \
               succeed if tried again later.";
    let base = class(py, "LockError", vec![py.get_type::<PyException>()], doc, "UNKNOWN", false)?;
    let mut out = vec![(None, base.clone_ref(py))];
    for kind in ErrorKind::ALL {
        if let Some((name, doc)) = describe(kind) {
            let bases = [Some(base.bind(py).clone()), builtin(py, kind)].into_iter().flatten().collect();
            out.push((Some(kind), class(py, name, bases, doc, kind.code(), kind.retryable())?));
        }
    }
    Ok(out)
}

/// The exception instance for `e` (its kind's class, or the base for a kind newer than this
/// binding), with `.code` and `.retryable` from `e` itself.
pub(crate) fn to_exception<'py>(py: Python<'py>, e: &Error) -> PyResult<Bound<'py, PyAny>> {
    let classes = CLASSES.get(py).expect("built at import");
    let cls = classes.iter().find(|(k, _)| *k == Some(e.kind())).unwrap_or(&classes[0]).1.bind(py);
    let exc = cls.call1((e.message(),))?;
    exc.setattr("code", e.code())?;
    exc.setattr("retryable", e.retryable())?;
    Ok(exc)
}

/// THE mapping from a core error to a raisable Python error.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    to_exception(py, &e).map_or_else(|err| err, PyErr::from_value)
}

/// `.py(py)?` raises a core error through [`to_py`].
pub(crate) trait IntoPyResult<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// A core result on its way to asyncio: converted (an error raised through [`to_py`]) only once
/// the loop thread holds the GIL, so no tokio thread ever waits for it.
pub(crate) struct Outcome<T>(pub Result<T, Error>);

impl<'py, T: IntoPyObject<'py>> IntoPyObject<'py> for Outcome<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.0.map_err(|e| to_py(py, e))?.into_bound_py_any(py)
    }
}

/// A loss reason handed to Python as a value (returned, not raised), or `None`.
pub(crate) struct Reason(pub Option<Error>);

impl<'py> IntoPyObject<'py> for Reason {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            Some(e) => to_exception(py, &e),
            None => Ok(py.None().into_bound(py)),
        }
    }
}
