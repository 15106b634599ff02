//! What `inspect()` returns: the core's snapshot as plain Python values (a `dict` of `str`,
//! `int`, `bool`, `None`, `list` and `dict`), converted generically from the core's `Data`
//! (`Snapshot::to_data`), so no field is spelled here.

use lockgate_core::data::Data;
use lockgate_core::inspect::Snapshot;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use pyo3::IntoPyObjectExt;

/// A snapshot on its way to Python (built without the GIL, converted with it).
pub(crate) struct Inspected(pub(crate) Snapshot);

fn to_py<'py>(py: Python<'py>, d: &Data) -> PyResult<Bound<'py, PyAny>> {
    Ok(match d {
        Data::Null => py.None().into_bound(py),
        Data::Bool(b) => b.into_bound_py_any(py)?,
        Data::Int(n) => n.into_bound_py_any(py)?,
        Data::Float(n) => n.into_bound_py_any(py)?,
        Data::Str(s) => s.into_bound_py_any(py)?,
        Data::Bytes(b) => PyBytes::new(py, b).into_any(),
        Data::List(items) => PyList::new(py, items.iter().map(|x| to_py(py, x)).collect::<PyResult<Vec<_>>>()?)?.into_any(),
        Data::Map(entries) => {
            let dict = PyDict::new(py);
            for (k, v) in entries {
                dict.set_item(k, to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

impl<'py> IntoPyObject<'py> for Inspected {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.to_data(false))
    }
}

/// What `break_lock()` returns on its way to Python: `None`, or the removed holder's `dict`
/// (`label`, `fencing_token`).
pub(crate) struct BrokenOut(pub(crate) Option<lockgate_core::break_lock::Broken>);

impl<'py> IntoPyObject<'py> for BrokenOut {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.0 {
            None => Ok(py.None().into_bound(py)),
            Some(b) => to_py(py, &b.to_data(false)),
        }
    }
}

/// A break's fencing token: a non-negative `int` (not a `bool`); anything else is
/// `INVALID_ARGUMENT`.
pub(crate) fn fencing_token(t: &Bound<'_, PyAny>) -> lockgate_core::error::Result<u64> {
    let bad = || lockgate_core::error::Error::invalid("token must be a non-negative int (a fencing token)");
    if t.is_instance_of::<pyo3::types::PyBool>() {
        return Err(bad());
    }
    t.extract::<u64>().map_err(|_| bad())
}

/// A listing page on its way to Python: a ``dict`` with ``entries`` (each ``name``, ``kind``,
/// ``holders``, ``waiters``, ``label``) and ``cursor`` (``None`` on the last page), converted
/// generically from `Page::to_data`.
pub(crate) struct Listed(pub(crate) lockgate_core::listing::Page);

impl<'py> IntoPyObject<'py> for Listed {
    type Target = PyAny;
    type Output = Bound<'py, PyAny>;
    type Error = PyErr;

    fn into_pyobject(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.0.to_data())
    }
}
