//! The one place where a core [`Error`] becomes a Python exception.
//!
//! The classes are built once at import from the core's taxonomy ([`ErrorKind::ALL`]):
//! `LockError` is the base; each core code has one subclass, and the classes whose meaning a
//! builtin already names also subclass that builtin (`TimeoutError`, `ValueError`,
//! `RuntimeError`), as
//! pydantic-core does. Every raised instance carries the core's `.code` and `.retryable`.

use lockgate_core::{Error, ErrorKind};
use pyo3::exceptions::{PyException, PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// Every exception class, base first; filled by [`register`] when the module is imported.
static CLASSES: PyOnceLock<Vec<(Option<ErrorKind>, Py<PyType>)>> = PyOnceLock::new();

/// The Python name, docstring and extra builtin base of the class for `kind`.
/// `None` for a kind this binding does not know yet (it maps to the base class).
fn describe(kind: ErrorKind) -> Option<(&'static str, &'static str, Option<Builtin>)> {
    Some(match kind {
        ErrorKind::InvalidArgument => (
            "InvalidArgumentError",
            "An argument was rejected before any network call (empty name, zero lease, bad URL, \
             NaN or negative seconds...). Also a ValueError.",
            Some(Builtin::Value),
        ),
        ErrorKind::Timeout => (
            "LockTimeoutError",
            "The wait for the lock ran out while someone else held it. Also a TimeoutError; \
             retryable.",
            Some(Builtin::Timeout),
        ),
        ErrorKind::NotHeld => (
            "NotHeldError",
            "The lease is not (or no longer) held: it expired, was taken over, deleted or \
             released.",
            None,
        ),
        ErrorKind::Connection => (
            "LockConnectionError",
            "The server could not be reached or the connection broke; retryable.",
            None,
        ),
        ErrorKind::Authentication => (
            "AuthenticationError",
            "The server refused the credentials (never retried, never a silent fallback).",
            None,
        ),
        ErrorKind::Protocol => (
            "ProtocolError",
            "The server replied with something the lock protocol does not allow (for example \
             a key of the wrong type under the lock's name).",
            None,
        ),
        ErrorKind::Cancelled => (
            "LockCancelledError",
            "The operation was cancelled (for example a wait abandoned by client shutdown).",
            None,
        ),
        ErrorKind::Closed => (
            "ClientClosedError",
            "The client was closed (or belongs to another process); no further operation is \
             possible on it.",
            None,
        ),
        ErrorKind::AlreadyHeld => (
            "AlreadyHeldError",
            "This lock handle already holds the lock and is not reentrant: acquiring again \
             through it would wait for itself forever, so it fails at once (python-redis-lock's \
             AlreadyAcquired, also a RuntimeError). Release first, use another handle, or make \
             the lock reentrant. Also a RuntimeError.",
            Some(Builtin::Runtime),
        ),
        _ => return None,
    })
}

#[derive(Clone, Copy)]
enum Builtin {
    Value,
    Timeout,
    Runtime,
}

const BASE_DOC: &str = "Base class of every lockgate error.\n\n\
    Attributes:\n    code: the stable, language-neutral error code (\"TIMEOUT\", \"NOT_HELD\", ...).\n    \
    retryable: whether the same call may succeed if tried again later.";

/// Builds the exception classes and adds them to `m` (called once per import).
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let classes = CLASSES.get_or_try_init(py, || build(py))?;
    for (_, cls) in classes {
        let cls = cls.bind(py);
        m.add(cls.name()?, cls)?;
    }
    Ok(())
}

fn make_class<'py>(
    py: Python<'py>,
    name: &str,
    bases: Bound<'py, PyTuple>,
    doc: &str,
    code: &str,
    retryable: bool,
) -> PyResult<Py<PyType>> {
    let ns = PyDict::new(py);
    ns.set_item("__doc__", doc)?;
    ns.set_item("__module__", "lockgate")?;
    ns.set_item("code", code)?;
    ns.set_item("retryable", retryable)?;
    let cls = py
        .get_type::<PyType>()
        .call1((name, bases, ns))?
        .cast_into::<PyType>()?;
    Ok(cls.unbind())
}

fn build(py: Python<'_>) -> PyResult<Vec<(Option<ErrorKind>, Py<PyType>)>> {
    let exception = py.get_type::<PyException>();
    let base = make_class(
        py,
        "LockError",
        PyTuple::new(py, [exception])?,
        BASE_DOC,
        "UNKNOWN",
        false,
    )?;
    let mut out = vec![(None, base.clone_ref(py))];
    for kind in ErrorKind::ALL {
        let Some((name, doc, builtin)) = describe(kind) else {
            continue;
        };
        let mut bases = vec![base.bind(py).clone()];
        match builtin {
            Some(Builtin::Value) => bases.push(py.get_type::<PyValueError>()),
            Some(Builtin::Timeout) => bases.push(py.get_type::<PyTimeoutError>()),
            Some(Builtin::Runtime) => bases.push(py.get_type::<PyRuntimeError>()),
            None => {}
        }
        let cls = make_class(
            py,
            name,
            PyTuple::new(py, bases)?,
            doc,
            kind.code(),
            kind.retryable(),
        )?;
        out.push((Some(kind), cls));
    }
    Ok(out)
}

/// The exception instance for `e`: the class of its kind (the base for a kind added to the core
/// after this binding), with `.code` and `.retryable` from the core error itself.
pub(crate) fn to_exception<'py>(py: Python<'py>, e: &Error) -> PyResult<Bound<'py, PyAny>> {
    let classes = CLASSES
        .get(py)
        .expect("exception classes are built when the module is imported");
    let cls = classes
        .iter()
        .find(|(k, _)| *k == Some(e.kind()))
        .unwrap_or(&classes[0])
        .1
        .bind(py);
    let exc = cls.call1((e.message(),))?;
    exc.setattr("code", e.code())?;
    exc.setattr("retryable", e.retryable())?;
    Ok(exc)
}

/// THE mapping from a core error to a raisable Python error.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match to_exception(py, &e) {
        Ok(exc) => PyErr::from_value(exc),
        Err(err) => err,
    }
}

/// Extension for `core::Result`: `.py(py)?` raises through [`to_py`].
pub(crate) trait IntoPyResult<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for Result<T, Error> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

/// A core error handed to Python as a value (the reason of a loss), not raised.
pub(crate) struct ErrorValue(pub Error);

impl<'py> IntoPyObject<'py> for ErrorValue {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_exception(py, &self.0)
    }
}

/// The result of a Rust future on its way to asyncio: converted (and an error raised through
/// [`to_py`]) only when the awaiting Python future is resolved, with the GIL held there, so no
/// tokio worker ever waits for the GIL.
pub(crate) struct Outcome<T>(pub Result<T, Error>);

impl<'py, T: IntoPyObject<'py>> IntoPyObject<'py> for Outcome<T> {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        use pyo3::IntoPyObjectExt;
        match self.0 {
            Ok(v) => v.into_bound_py_any(py),
            Err(e) => Err(to_py(py, e)),
        }
    }
}

/// `None` as the result of an awaitable (Rust's `()` would become an empty tuple).
pub(crate) struct PyNone;

impl<'py> IntoPyObject<'py> for PyNone {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        Ok(py.None().into_bound(py))
    }
}
