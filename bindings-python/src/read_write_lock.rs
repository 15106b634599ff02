//! Read-write locks in both APIs: two lock handles of one name, the shared half and the
//! exclusive one.

use crate::convert::{class_repr, py_bool, py_repr};
use pyo3::prelude::*;

/// What both APIs' read-write locks offer: the two halves and their settings.
#[pyclass(frozen, subclass, module = "lockgate._lockgate", name = "_ReadWriteLockBase")]
pub struct ReadWriteLockBase {
    pub(crate) read: Py<PyAny>,
    pub(crate) write: Py<PyAny>,
    pub(crate) name: String,
    pub(crate) writers_first: bool,
    pub(crate) reentrant: bool,
}

#[pymethods]
impl ReadWriteLockBase {
    /// The shared half: a lock handle that many readers hold at once.
    #[getter]
    fn read_lock(&self, py: Python<'_>) -> Py<PyAny> {
        self.read.clone_ref(py)
    }

    /// The exclusive half: a lock handle held by one writer, beside no reader.
    #[getter]
    fn write_lock(&self, py: Python<'_>) -> Py<PyAny> {
        self.write.clone_ref(py)
    }

    /// The lock's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// Whether a queued writer blocks readers that arrive after it.
    #[getter]
    fn writers_first(&self) -> bool {
        self.writers_first
    }

    /// Whether both halves are reentrant.
    #[getter]
    fn reentrant(&self) -> bool {
        self.reentrant
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let me = slf.get();
        let (name, w, r) = (py_repr(slf.py(), &me.name)?, py_bool(me.writers_first), py_bool(me.reentrant));
        class_repr(slf, &format!("name={name} writers_first={w} reentrant={r}"))
    }
}

/// A distributed read-write lock, made by :meth:`Client.read_write_lock`: many readers hold
/// :attr:`read_lock` at once, never beside a holder of :attr:`write_lock`, which is exclusive.
/// ``with rw.read_lock:`` / ``with rw.write_lock.acquire(timeout=5) as lease:``.
#[pyclass(frozen, extends = ReadWriteLockBase, module = "lockgate")]
pub struct ReadWriteLock {}

/// A distributed read-write lock for asyncio, made by :meth:`Client.read_write_lock`:
/// ``async with rw.read_lock:`` / ``async with rw.write_lock.acquire(timeout=5) as lease:``.
#[pyclass(frozen, extends = ReadWriteLockBase, module = "lockgate.aio", name = "ReadWriteLock")]
pub struct AsyncReadWriteLock {}
