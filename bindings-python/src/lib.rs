//! `lockgate._lockgate`: the Python binding of lockgate-core.
//!
//! A thin layer: each method converts its arguments, calls the core and maps errors through
//! [`errors::to_py`]. The blocking API lives in [`sync_api`], the asyncio API in [`aio`]; both
//! run on the process's one tokio runtime ([`runtime`], which also holds the blocking bridge;
//! [`loop_bridge`] is the asyncio one). [`handle`] closes live clients at exit. [`redlock`]
//! holds both APIs of Redlock over independent masters; [`lease`] and [`methods`] are what the
//! `Client` and `Redlock` classes share. No lock protocol logic lives here.

mod aio;
mod errors;
mod handle;
mod lease;
mod loop_bridge;
mod methods;
mod redlock;
mod runtime;
mod shared;
mod sync_api;

use pyo3::prelude::*;

#[pymodule]
fn _lockgate(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<sync_api::Client>()?;
    m.add_class::<sync_api::Lock>()?;
    m.add_class::<sync_api::Semaphore>()?;
    m.add_class::<sync_api::ReadWriteLock>()?;
    m.add_class::<sync_api::Election>()?;
    m.add_class::<sync_api::Lease>()?;
    m.add_class::<shared::LeaderInfo>()?;
    m.add_class::<redlock::sync_api::Redlock>()?;
    m.add_class::<redlock::sync_api::RedlockLock>()?;
    m.add_class::<redlock::sync_api::RedlockLease>()?;
    let py = m.py();
    m.add("AsyncClient", py.get_type::<aio::AsyncClient>())?;
    m.add("AsyncLock", py.get_type::<aio::AsyncLock>())?;
    m.add("AsyncSemaphore", py.get_type::<aio::AsyncSemaphore>())?;
    m.add(
        "AsyncReadWriteLock",
        py.get_type::<aio::AsyncReadWriteLock>(),
    )?;
    m.add("AsyncElection", py.get_type::<aio::AsyncElection>())?;
    m.add("AsyncLease", py.get_type::<aio::AsyncLease>())?;
    m.add("AcquireContext", py.get_type::<aio::AcquireContext>())?;
    m.add("AsyncRedlock", py.get_type::<redlock::aio::AsyncRedlock>())?;
    m.add(
        "AsyncRedlockLock",
        py.get_type::<redlock::aio::AsyncRedlockLock>(),
    )?;
    m.add(
        "AsyncRedlockLease",
        py.get_type::<redlock::aio::AsyncRedlockLease>(),
    )?;
    m.add(
        "RedlockAcquireContext",
        py.get_type::<redlock::aio::RedlockAcquireContext>(),
    )?;
    m.add_function(wrap_pyfunction!(handle::_close_all, m)?)?;
    Ok(())
}
