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
//! Field names the macros rely on: a lock class has `inner` (a [`LockKind`]), `client`,
//! `entered`, `holds` and `cancel` (sync) or `spec`, `entered` and `holds` (asyncio); a lease
//! class has `cell`; an acquisition context has `state`.
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
                timeout: Option<$crate::shared::Secs>,
            ) -> ::pyo3::PyResult<$lease> {
                let cell = $crate::sync_api::acquire(
                    py, &self.inner, &self.client, timeout, &self.cancel,
                )?;
                self.holds.push(cell.clone());
                Ok($lease { cell })
            }

            $(#$try_acquire)*
            fn try_acquire(&self, py: ::pyo3::Python<'_>) -> ::pyo3::PyResult<Option<$lease>> {
                let cell = $crate::sync_api::try_acquire(py, &self.inner, &self.client)?;
                if let Some(cell) = &cell {
                    self.holds.push(cell.clone());
                }
                Ok(cell.map(|cell| $lease { cell }))
            }

            /// Releases the most recent lease acquired through this handle and not released yet
            /// (redis-py's ``lock.release()``): ``True`` if it was still held, ``False`` if it
            /// had been lost meanwhile. Raises :class:`NotHeldError` if this handle holds none.
            fn release(&self, py: ::pyo3::Python<'_>) -> ::pyo3::PyResult<bool> {
                $crate::runtime::block_on(py, $crate::lease::release_top(&self.holds))
            }

            /// Sets the remaining time of the most recent lease this handle holds to
            /// ``seconds`` (see :meth:`Lease.extend`). Raises :class:`NotHeldError` if this
            /// handle holds none, or if that lease was lost.
            fn extend(&self, py: ::pyo3::Python<'_>, seconds: $crate::shared::Secs) -> ::pyo3::PyResult<()> {
                use $crate::errors::IntoPyResult;
                let d = $crate::shared::lease_secs("seconds", seconds.0).py(py)?;
                $crate::runtime::block_on(py, $crate::lease::extend_top(&self.holds, d))
            }

            /// Whether this handle holds the lock now: a lease acquired through it is not
            /// released and certainly still valid (redis-py's ``owned()``).
            fn owned(&self) -> bool {
                self.holds.owned()
            }

            /// Whether this handle holds the lock now; the same as :meth:`owned`. Unlike
            /// redis-py's ``locked()``, it does not ask the server about other clients' holds
            /// (use :meth:`try_acquire` for that).
            fn locked(&self) -> bool {
                self.holds.owned()
            }

            /// Cancels every :meth:`acquire` (and ``with lock:``) waiting on this handle right
            /// now, from any thread: each raises :class:`LockCancelledError` at once and its
            /// queue entry is removed from the server. Later acquisitions are not affected.
            fn cancel(&self) {
                self.cancel.notify_waiters();
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
                let cell = $crate::sync_api::acquire(
                    py, &self.inner, &self.client, None, &self.cancel,
                )?;
                self.holds.push(cell.clone());
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
                timeout: Option<$crate::shared::Secs>,
            ) -> ::pyo3::PyResult<$ctx> {
                let timeout = $crate::shared::parse_timeout(py, timeout)?;
                let source = ($source)(self.spec.clone());
                Ok($ctx {
                    state: $crate::aio::AcquireState::new(
                        source,
                        timeout,
                        Some(self.holds.clone()),
                    ),
                })
            }

            $(#$try_acquire)*
            fn try_acquire<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let spec = self.spec.clone();
                let holds = self.holds.clone();
                $crate::loop_bridge::into_asyncio(py, async move {
                    let cell = $crate::aio::try_acquire(&*spec).await?;
                    Ok(cell.map(|cell| {
                        $crate::aio::Deliver::new(cell, Some(holds), |cell| $lease { cell })
                    }))
                })
            }

            /// ``await lock.release()`` releases the most recent lease acquired through this
            /// handle and not released yet (redis-py's ``lock.release()``): ``True`` if it was
            /// still held, ``False`` if it had been lost meanwhile. Raises
            /// :class:`lockgate.NotHeldError` if this handle holds none.
            fn release<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                let holds = self.holds.clone();
                $crate::loop_bridge::into_asyncio(py, async move {
                    $crate::lease::release_top(&holds).await
                })
            }

            /// ``await lock.extend(seconds)`` sets the remaining time of the most recent lease
            /// this handle holds (see :meth:`Lease.extend`). Raises
            /// :class:`lockgate.NotHeldError` if this handle holds none, or if it was lost.
            fn extend<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                seconds: $crate::shared::Secs,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                use $crate::errors::IntoPyResult;
                // Validated now, so a bad value raises at the call rather than at the await.
                let d = $crate::shared::lease_secs("seconds", seconds.0)
                    .and_then(|d| ::lockgate_core::options::validate_lease(d).map(|()| d))
                    .py(py)?;
                let holds = self.holds.clone();
                $crate::loop_bridge::into_asyncio(py, async move {
                    $crate::lease::extend_top(&holds, d).await.map(|()| $crate::errors::PyNone)
                })
            }

            /// Whether this handle holds the lock now: a lease acquired through it is not
            /// released and certainly still valid (redis-py's ``owned()``).
            fn owned(&self) -> bool {
                self.holds.owned()
            }

            /// Whether this handle holds the lock now; the same as :meth:`owned`. Unlike
            /// redis-py's ``locked()``, it does not ask the server about other clients' holds
            /// (use :meth:`try_acquire` for that).
            fn locked(&self) -> bool {
                self.holds.owned()
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
                let holds = self.holds.clone();
                $crate::loop_bridge::into_asyncio(py, async move {
                    let cell = $crate::aio::acquire(&*spec, None).await?;
                    entered.push(key, cell.clone());
                    Ok($crate::aio::Deliver::new(cell, Some(holds), |cell| $lease { cell }))
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
            // A coroutine (`send`, `throw`, `close`, `__await__`), so that
            // `asyncio.create_task(lock.acquire())` and `TaskGroup.create_task` take it; the
            // acquisition starts when it is first awaited (`send`).
            fn __await__(slf: ::pyo3::Bound<'_, Self>) -> ::pyo3::Bound<'_, Self> {
                slf
            }

            fn __next__<'py>(
                &self,
                py: ::pyo3::Python<'py>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                self.send(py, py.None().into_bound(py))
            }

            /// Starts the acquisition on the first call, then resumes it (``coroutine.send``).
            #[pyo3(signature = (value, /))]
            fn send<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                value: ::pyo3::Bound<'py, ::pyo3::PyAny>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                self.state
                    .awaited(py, |cell| $lease { cell })?
                    .call_method1(::pyo3::intern!(py, "send"), (value,))
            }

            /// ``coroutine.throw``: abandons the acquisition (a wait is withdrawn from the
            /// server) and raises the exception.
            #[pyo3(signature = (typ, val=None, tb=None, /))]
            fn throw<'py>(
                &self,
                py: ::pyo3::Python<'py>,
                typ: ::pyo3::Bound<'py, ::pyo3::PyAny>,
                val: Option<::pyo3::Bound<'py, ::pyo3::PyAny>>,
                tb: Option<::pyo3::Bound<'py, ::pyo3::PyAny>>,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                match self.state.stop_or_started(py) {
                    Some(call) => call.bind(py).call_method1(
                        ::pyo3::intern!(py, "throw"),
                        (typ, val, tb),
                    ),
                    None => Err($crate::loop_bridge::exception_of(typ, val)),
                }
            }

            /// ``coroutine.close``: abandons the acquisition, or makes sure it never starts.
            fn close(&self, py: ::pyo3::Python<'_>) -> ::pyo3::PyResult<()> {
                if let Some(call) = self.state.stop_or_started(py) {
                    call.bind(py).call_method0(::pyo3::intern!(py, "close"))?;
                }
                Ok(())
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
            fn extend(&self, py: ::pyo3::Python<'_>, seconds: $crate::shared::Secs) -> ::pyo3::PyResult<()> {
                use $crate::errors::IntoPyResult;
                let d = $crate::shared::lease_secs("seconds", seconds.0).py(py)?;
                $crate::runtime::block_on(py, self.cell.extend(d))
            }

            $(#$release)*
            fn release(&self, py: ::pyo3::Python<'_>) -> ::pyo3::PyResult<bool> {
                $crate::runtime::block_on(py, self.cell.release())
            }

            $(#$on_lost)*
            fn on_lost(
                &self,
                py: ::pyo3::Python<'_>,
                callback: ::pyo3::Py<::pyo3::PyAny>,
            ) -> ::pyo3::PyResult<()> {
                $crate::lease::check_callable(py, &callback)?;
                self.cell.on_lost_in_thread(callback);
                Ok(())
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
                seconds: $crate::shared::Secs,
            ) -> ::pyo3::PyResult<::pyo3::Bound<'py, ::pyo3::PyAny>> {
                use $crate::errors::IntoPyResult;
                // Validated now, so a bad value raises at the call rather than at the await.
                let d = $crate::shared::lease_secs("seconds", seconds.0)
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
                $crate::lease::check_callable(py, &callback)?;
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
