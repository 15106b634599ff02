//! The Python methods that the `Client` classes and the `Redlock` classes share, written once.
//!
//! pyo3 classes cannot be generic, so each macro below writes the `#[pymethods]` block of one
//! class from the shared pieces in [`crate::lease`], [`crate::sync_api`] and [`crate::aio`]: a
//! lock class (`Lock`, `RedlockLock` and their asyncio twins), a lease class (`Lease`,
//! `RedlockLease`, ...) or an acquisition context (`AcquireContext`, `RedlockAcquireContext`).
//! The docstrings of methods whose wording differs between the kinds are given by the caller,
//! each before the method's name; whatever is particular to a class (a fencing token, reentrancy,
//! `repr`) follows as ordinary methods.
//!
//! Field names the macros rely on: a lock class has `inner` (a [`LockKind`]), `client` and
//! `entered` (sync) or `spec` and `entered` (asyncio); a lease class has `cell`; an acquisition
//! context has `state`.
//!
//! [`LockKind`]: crate::lease::LockKind

/// The `#[pymethods]` of a blocking lock class: `acquire`, `try_acquire`, the option getters
/// and `with lock as lease:`, returning `$lease` objects.
macro_rules! sync_lock_methods {
    (
        $class:ident -> $lease:ident;
        $(#$acquire:tt)* acquire;
        $(#$try_acquire:tt)* try_acquire;
        $($extra:tt)*
    ) => {
        #[::pyo3::pymethods]
        impl $class {
            $(#$acquire)*
            #[pyo3(signature = (timeout=None))]
            fn acquire(
                &self,
                py: ::pyo3::Python<'_>,
                timeout: Option<f64>,
            ) -> ::pyo3::PyResult<$lease> {
                let cell = $crate::sync_api::acquire(py, &self.inner, &self.client, timeout)?;
                Ok($lease { cell })
            }

            $(#$try_acquire)*
            fn try_acquire(&self, py: ::pyo3::Python<'_>) -> ::pyo3::PyResult<Option<$lease>> {
                let cell = $crate::sync_api::try_acquire(py, &self.inner, &self.client)?;
                Ok(cell.map(|cell| $lease { cell }))
            }

            /// The lock's name.
            #[getter]
            fn name(&self) -> &str {
                $crate::lease::LockKind::name(&self.inner)
            }

            /// The lease length in seconds.
            #[getter]
            fn lease(&self) -> f64 {
                $crate::shared::to_secs($crate::lease::LockKind::options(&self.inner).lease)
            }

            /// Whether a watchdog renews the lease until it is released.
            #[getter]
            fn renew(&self) -> bool {
                $crate::lease::LockKind::options(&self.inner).auto_renew
            }

            /// The default wait of :meth:`acquire` and ``with lock:``, in seconds (``None``: forever).
            #[getter]
            fn timeout(&self) -> Option<f64> {
                $crate::lease::LockKind::options(&self.inner)
                    .wait_timeout
                    .map($crate::shared::to_secs)
            }

            fn __enter__(&self, py: ::pyo3::Python<'_>) -> ::pyo3::PyResult<$lease> {
                let cell = $crate::sync_api::acquire(py, &self.inner, &self.client, None)?;
                self.entered.push(::std::thread::current().id(), cell.clone());
                Ok($lease { cell })
            }

            #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
            fn __exit__(
                &self,
                py: ::pyo3::Python<'_>,
                exc_type: Option<&::pyo3::Bound<'_, ::pyo3::PyAny>>,
                _exc: Option<&::pyo3::Bound<'_, ::pyo3::PyAny>>,
                _tb: Option<&::pyo3::Bound<'_, ::pyo3::PyAny>>,
            ) -> ::pyo3::PyResult<()> {
                match self.entered.pop(&::std::thread::current().id()) {
                    Some(cell) => $crate::sync_api::exit(py, &cell, exc_type),
                    None => Ok(()),
                }
            }

            $($extra)*
        }
    };
}

/// The `#[pymethods]` of an asyncio lock class: `acquire` (a `$ctx` made from
/// `$source(spec)`), `try_acquire`, the option getters and `async with lock as lease:`.
macro_rules! aio_lock_methods {
    (
        $class:ident -> $ctx:ident($source:expr), $lease:ident;
        $(#$acquire:tt)* acquire;
        $(#$try_acquire:tt)* try_acquire;
        $($extra:tt)*
    ) => {
        #[::pyo3::pymethods]
        impl $class {
            $(#$acquire)*
            #[pyo3(signature = (timeout=None))]
            fn acquire(
                &self,
                py: ::pyo3::Python<'_>,
                timeout: Option<f64>,
            ) -> ::pyo3::PyResult<$ctx> {
                let timeout = $crate::shared::parse_timeout(py, timeout)?;
                let source = ($source)(self.spec.clone());
                Ok($ctx {
                    state: $crate::aio::AcquireState::new(source, timeout),
                })
            }

            $(#$try_acquire)*
            fn try_acquire<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let spec = self.spec.clone();
                $crate::loop_bridge::into_asyncio(py, async move {
                    let cell = $crate::aio::try_acquire(&*spec).await?;
                    Ok(cell.map(|cell| $lease { cell }))
                })
            }

            /// The lock's name.
            #[getter]
            fn name(&self) -> &str {
                $crate::aio::LockSpec::name(&*self.spec)
            }

            /// The lease length in seconds.
            #[getter]
            fn lease(&self) -> f64 {
                $crate::shared::to_secs($crate::aio::LockSpec::options(&*self.spec).lease)
            }

            /// Whether a watchdog renews the lease until it is released.
            #[getter]
            fn renew(&self) -> bool {
                $crate::aio::LockSpec::options(&*self.spec).auto_renew
            }

            /// The default wait of :meth:`acquire` and ``async with lock:``, in seconds (``None``:
            /// forever).
            #[getter]
            fn timeout(&self) -> Option<f64> {
                $crate::aio::LockSpec::options(&*self.spec)
                    .wait_timeout
                    .map($crate::shared::to_secs)
            }

            fn __aenter__<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let key = $crate::aio::current_task_key(py)?;
                let spec = self.spec.clone();
                let entered = self.entered.clone();
                $crate::loop_bridge::into_asyncio(py, async move {
                    let cell = $crate::aio::acquire(&*spec, None).await?;
                    entered.push(key, cell.clone());
                    Ok($lease { cell })
                })
            }

            #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
            fn __aexit__<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                exc_type: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
                _exc: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
                _tb: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let key = $crate::aio::current_task_key(py)?;
                let cell = self.entered.pop(&key);
                $crate::lease::exit_async(py, cell, exc_type)
            }

            $($extra)*
        }
    };
}

/// The `#[pymethods]` of an asyncio acquisition context: await it for a `$lease`, or use it
/// with `async with` to release the lease on exit.
macro_rules! acquire_context_methods {
    ($ctx:ident -> $lease:ident) => {
        #[::pyo3::pymethods]
        impl $ctx {
            fn __await__<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                self.state
                    .start(py, false, |cell| $lease { cell })?
                    .call_method0(::pyo3::intern!(py, "__await__"))
            }

            fn __aenter__<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                self.state.start(py, true, |cell| $lease { cell })
            }

            #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
            fn __aexit__<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                exc_type: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
                _exc: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
                _tb: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                self.state.exit(py, exc_type)
            }
        }
    };
}

/// The `#[pymethods]` of a lease class: `lease_methods!(sync ...)` for the blocking API,
/// `lease_methods!(aio ...)` for asyncio; `repr()` shows `$repr` as the class.
macro_rules! lease_methods {
    (sync $($input:tt)*) => {
        $crate::methods::lease_methods! { @common sync [
            /// Why the lease was lost (a :class:`LockError`), or ``None`` if it was not.
        ] $($input)* }
    };
    (aio $($input:tt)*) => {
        $crate::methods::lease_methods! { @common aio [
            /// Why the lease was lost (a :class:`lockgate.LockError`), or ``None`` if it was not.
        ] $($input)* }
    };
    // What both APIs share; the rest of the input goes to the API's own rule below.
    (
        @common $api:ident [$(#$lost_reason:tt)*] $class:ident, $repr:literal;
        $(#$is_held:tt)* is_held;
        $(#$remaining:tt)* remaining;
        $($rest:tt)*
    ) => {
        $crate::methods::lease_methods! { @$api $class {
            /// The lock's name.
            #[getter]
            fn name(&self) -> &str {
                $crate::lease::LeaseKind::name(self.cell.lease())
            }

            $(#$is_held)*
            #[getter]
            fn is_held(&self) -> bool {
                $crate::lease::LeaseKind::is_held(self.cell.lease())
            }

            $(#$remaining)*
            #[getter]
            fn remaining(&self) -> Option<f64> {
                $crate::lease::LeaseKind::remaining(self.cell.lease()).map($crate::shared::to_secs)
            }

            $(#$lost_reason)*
            #[getter]
            fn lost_reason<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<Option<::pyo3::Bound<'py, ::pyo3::PyAny>>> {
                self.cell.lost_reason(py)
            }

            fn __repr__(&self, py: ::pyo3::Python<'_>) -> ::pyo3::PyResult<String> {
                self.cell.repr(py, $repr)
            }
        } $($rest)* }
    };
    (
        @sync $class:ident { $($common:tt)* }
        $(#$extend:tt)* extend;
        $(#$release:tt)* release;
        $(#$on_lost:tt)* on_lost;
        $($extra:tt)*
    ) => {
        #[::pyo3::pymethods]
        impl $class {
            $($common)*

            $(#$extend)*
            fn extend(&self, py: ::pyo3::Python<'_>, seconds: f64) -> ::pyo3::PyResult<()> {
                use $crate::errors::IntoPyResult;
                let d = $crate::shared::secs("seconds", seconds).py(py)?;
                $crate::runtime::block_on(py, self.cell.extend(d))
            }

            $(#$release)*
            fn release(&self, py: ::pyo3::Python<'_>) -> ::pyo3::PyResult<bool> {
                $crate::runtime::block_on(py, self.cell.release())
            }

            $(#$on_lost)*
            fn on_lost(&self, callback: ::pyo3::Py<::pyo3::PyAny>) {
                self.cell.on_lost_in_thread(callback)
            }

            fn __enter__(slf: ::pyo3::Py<Self>) -> ::pyo3::Py<Self> {
                slf
            }

            #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
            fn __exit__(
                &self,
                py: ::pyo3::Python<'_>,
                exc_type: Option<&::pyo3::Bound<'_, ::pyo3::PyAny>>,
                _exc: Option<&::pyo3::Bound<'_, ::pyo3::PyAny>>,
                _tb: Option<&::pyo3::Bound<'_, ::pyo3::PyAny>>,
            ) -> ::pyo3::PyResult<()> {
                $crate::sync_api::exit(py, &self.cell, exc_type)
            }

            $($extra)*
        }
    };
    (
        @aio $class:ident { $($common:tt)* }
        $(#$extend:tt)* extend;
        $(#$release:tt)* release;
        $(#$lost:tt)* lost;
        $($extra:tt)*
    ) => {
        #[::pyo3::pymethods]
        impl $class {
            $($common)*

            $(#$extend)*
            fn extend<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                seconds: f64,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                use $crate::errors::IntoPyResult;
                // Validated now, so a bad value raises at the call rather than at the await.
                let d = $crate::shared::secs("seconds", seconds)
                    .and_then(|d| ::lockgate_core::options::validate_lease(d).map(|()| d))
                    .py(py)?;
                let cell = self.cell.clone();
                $crate::loop_bridge::into_asyncio(py, async move {
                    cell.extend(d).await.map(|()| $crate::errors::PyNone)
                })
            }

            $(#$release)*
            fn release<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let cell = self.cell.clone();
                $crate::loop_bridge::into_asyncio(py, async move { cell.release().await })
            }

            $(#$lost)*
            fn lost<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                self.cell.lost(py)
            }

            /// Schedules ``callback(reason)`` on the running event loop, once, if the lease is lost.
            /// Never called after a normal release. Must be called with a running loop.
            fn on_lost(
                &self,
                py: ::pyo3::Python<'_>,
                callback: ::pyo3::Py<::pyo3::PyAny>,
            ) -> ::pyo3::PyResult<()> {
                self.cell.on_lost_in_loop(py, callback)
            }

            fn __aenter__<'py>(
                slf: ::pyo3::Bound<'py, Self>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                $crate::loop_bridge::ready(slf.py(), slf.clone())
            }

            #[pyo3(signature = (exc_type, _exc=None, _tb=None))]
            fn __aexit__<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                exc_type: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
                _exc: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
                _tb: Option<&::pyo3::Bound<'py, ::pyo3::PyAny>>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                $crate::lease::exit_async(py, Some(self.cell.clone()), exc_type)
            }

            $($extra)*
        }
    };
}

pub(crate) use {acquire_context_methods, aio_lock_methods, lease_methods, sync_lock_methods};
