//! `lockgate._lockgate`: the Python binding of lockgate-core, one client family for every
//! backend in two APIs, blocking (`lockgate`) and asyncio (`lockgate.aio`).
//!
//! A thin layer: each method converts its arguments ([`convert`]), calls the core and maps
//! errors through [`errors::to_py`]. A call runs on the process's one tokio runtime ([`api`]):
//! blocking ([`runtime`]), or as a coroutine through [`loop_bridge`]. Each concept has its
//! module — [`client`], [`lock`] (mutex, semaphore), [`read_write_lock`], [`election`],
//! [`lease`], [`acquire_context`] — with a private base class holding what its two API classes
//! share; [`handle`] is what a lock or election object stands for, [`connection`] the core
//! client behind a Python client (and the exit hook). No lock logic, rule or default is here.

mod acquire_context;
mod api;
mod client;
mod connection;
mod convert;
mod election;
mod errors;
mod handle;
mod lease;
mod lock;
mod loop_bridge;
mod read_write_lock;
mod runtime;
mod snapshot;
mod process;
mod telemetry;

use pyo3::prelude::*;

#[pymodule]
fn _lockgate(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    m.add_class::<client::Client>()?;
    m.add_class::<lock::Lock>()?;
    m.add_class::<lock::Semaphore>()?;
    m.add_class::<read_write_lock::ReadWriteLock>()?;
    m.add_class::<election::Election>()?;
    m.add_class::<election::LeaderInfo>()?;
    m.add_class::<lease::Lease>()?;
    let py = m.py();
    // The asyncio classes, named as `lockgate.aio` shows them, kept here as `Async*`.
    m.add("AsyncClient", py.get_type::<client::AsyncClient>())?;
    m.add("AsyncLock", py.get_type::<lock::AsyncLock>())?;
    m.add("AsyncSemaphore", py.get_type::<lock::AsyncSemaphore>())?;
    m.add("AsyncReadWriteLock", py.get_type::<read_write_lock::AsyncReadWriteLock>())?;
    m.add("AsyncElection", py.get_type::<election::AsyncElection>())?;
    m.add("AsyncLease", py.get_type::<lease::AsyncLease>())?;
    m.add("AcquireContext", py.get_type::<acquire_context::AcquireContext>())?;
    m.add_function(wrap_pyfunction!(connection::_close_all, m)?)?;
    m.add_function(wrap_pyfunction!(telemetry::_set_telemetry_sink, m)?)?;
    m.add_function(wrap_pyfunction!(telemetry::_flush_telemetry, m)?)?;
    m.add_function(wrap_pyfunction!(telemetry::_metric_totals, m)?)?;
    m.add_function(wrap_pyfunction!(telemetry::_metric_instruments, m)?)?;
    Ok(())
}
