//! Redlock over N independent masters (PROTOCOL.md §8): argument conversion and the lease
//! bookkeeping shared by the blocking classes ([`sync_api`]: `lockgate.Redlock`,
//! `.RedlockLock`, `.RedlockLease`) and the asyncio ones ([`aio`]: `lockgate.aio.Redlock`, ...).
//!
//! As for `Client`, every method converts its arguments, calls the core's
//! `lockgate_core::native::Redlock` and maps errors through `errors::to_py`; the quorum, the
//! validity, retries, renewal and undo all happen in the core.

pub(crate) mod aio;
pub(crate) mod sync_api;

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use lockgate_core::native::{RedisUrl, RedlockLease as CoreRedlockLease, RedlockOptions};
use lockgate_core::options::{LockOptions, DEFAULT_LEASE};
use lockgate_core::random::OsRandom;
use lockgate_core::redlock::RedlockEngine;
use lockgate_core::time::Duration;
use lockgate_core::Error;
use pyo3::prelude::*;
use tokio::sync::watch;

use crate::errors::IntoPyResult;
use crate::handle::RedlockHandle;
use crate::runtime::spawn;
use crate::shared::{self, secs, to_secs};

/// The keyword arguments of `Redlock(urls, *, ...)` (sync and asyncio alike).
pub(crate) struct RedlockArgs {
    pub key_prefix: Option<String>,
    pub max_lease: Option<f64>,
    pub node_timeout: Option<f64>,
    pub retry_delay: Option<f64>,
    pub retry_jitter: Option<f64>,
    pub drift_factor: Option<f64>,
    pub drift_fixed: Option<f64>,
    pub tls_ca_file: Option<PathBuf>,
    pub connect_timeout: Option<f64>,
    pub response_timeout: Option<f64>,
}

/// `Redlock(urls, *, ...)` → core options, validated by the core (empty or duplicate URLs, bad
/// durations, `drift_factor` out of range). Reading the CA file is the only I/O here.
pub(crate) fn redlock_options(
    py: Python<'_>,
    urls: Vec<String>,
    args: RedlockArgs,
) -> PyResult<RedlockOptions> {
    let RedlockArgs {
        key_prefix,
        max_lease,
        node_timeout,
        retry_delay,
        retry_jitter,
        drift_factor,
        drift_fixed,
        tls_ca_file,
        connect_timeout,
        response_timeout,
    } = args;
    let mut opts = RedlockOptions::new(urls);
    let config = &mut opts.config;
    if let Some(p) = key_prefix {
        config.key_prefix = p;
    }
    let set = |slot: &mut Duration, what: &str, value: Option<f64>| -> PyResult<()> {
        if let Some(v) = value {
            *slot = secs(what, v).py(py)?;
        }
        Ok(())
    };
    set(&mut config.max_lease, "max_lease", max_lease)?;
    set(&mut config.node_timeout, "node_timeout", node_timeout)?;
    set(&mut config.retry_delay, "retry_delay", retry_delay)?;
    set(&mut config.retry_jitter, "retry_jitter", retry_jitter)?;
    set(&mut config.drift_fixed, "drift_fixed", drift_fixed)?;
    if let Some(f) = drift_factor {
        config.drift_factor = f;
    }
    set(
        &mut opts.connect_timeout,
        "connect_timeout",
        connect_timeout,
    )?;
    set(
        &mut opts.response_timeout,
        "response_timeout",
        response_timeout,
    )?;
    if let Some(path) = tls_ca_file {
        opts.tls_ca_pem = Some(std::fs::read(path)?);
    }
    opts.validate().py(py)?;
    Ok(opts)
}

/// What `Redlock` reports about its deployment without a round trip: the masters' URLs
/// (passwords redacted), the quorum and `max_lease`.
pub(crate) struct Deployment {
    pub urls: Vec<String>,
    pub quorum: usize,
    pub max_lease: Duration,
}

impl Deployment {
    /// From validated options (the quorum as the core's engine counts it).
    pub(crate) fn of(py: Python<'_>, urls: &[String], options: &RedlockOptions) -> PyResult<Self> {
        let urls = urls
            .iter()
            .map(|u| RedisUrl::parse(u).map(|u| u.to_string()))
            .collect::<Result<Vec<_>, Error>>()
            .py(py)?;
        let mut config = options.config.clone();
        config.masters = urls.len();
        let max_lease = config.max_lease;
        let quorum = RedlockEngine::new(config, Box::new(OsRandom))
            .py(py)?
            .quorum();
        Ok(Deployment {
            urls,
            quorum,
            max_lease,
        })
    }

    pub(crate) fn repr(&self, py: Python<'_>, class: &str, key_prefix: &str) -> PyResult<String> {
        let urls = self
            .urls
            .iter()
            .map(|u| shared::py_repr(py, u))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(format!(
            "<{class} urls=[{}] quorum={} key_prefix={} max_lease={}>",
            urls.join(", "),
            self.quorum,
            shared::py_repr(py, key_prefix)?,
            pyo3::types::PyFloat::new(py, to_secs(self.max_lease)).repr()?,
        ))
    }
}

/// `redlock.lock(name, lease=None, *, renew=None, timeout=None)` → core options.
///
/// `lease=None` is a lease renewed by a watchdog, as for `Client.lock`: 30 s, or the
/// deployment's `max_lease` if that is shorter (longer leases are refused). A number is a
/// fixed lease, renewed only with `renew=True`.
pub(crate) fn lock_options(
    lease: Option<f64>,
    renew: Option<bool>,
    timeout: Option<f64>,
    max_lease: Duration,
) -> Result<LockOptions, Error> {
    let mut options = shared::lock_options(lease, renew, timeout, None)?;
    if lease.is_none() {
        options.lease = DEFAULT_LEASE.min(max_lease);
        options.validate()?;
    }
    Ok(options)
}

/// `repr()` of a Redlock lock handle.
pub(crate) fn lock_repr(
    py: Python<'_>,
    class: &str,
    name: &str,
    options: &LockOptions,
) -> PyResult<String> {
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
        "<{class} name={} lease={} renew={} timeout={timeout}>",
        shared::py_repr(py, name)?,
        float(options.lease)?,
        if options.auto_renew { "True" } else { "False" },
    ))
}

/// Where a lease stands, as its loss signal reports it.
#[derive(Clone)]
enum Status {
    Held,
    /// Lost: a majority refused a renewal or extension, or the validity ran out.
    Lost(Error),
    /// Released (by the user, the client's close, or garbage collection).
    Ended,
}

/// A held Redlock lease as both APIs keep it: the core lease, whether the user released it
/// (so leaving a `with` block after `release()` reports nothing), and its loss signal in the
/// shape the binding gives every lease (`lost_reason`, `on_lost`, `await lease.lost()`).
///
/// The core's `RedlockLease::lost()` borrows the lease and stays pending after a release; one
/// small task per lease waits on it (or on the release, or the client's close) and publishes
/// the outcome on `status`, which the callbacks and awaiters watch without holding the lease.
pub(crate) struct RedlockCell {
    pub lease: CoreRedlockLease,
    client: Arc<RedlockHandle>,
    released_by_user: AtomicBool,
    status: watch::Receiver<Status>,
    /// Ends the watching task once the lease is released or no longer referenced.
    stop: watch::Sender<bool>,
}

/// What Python objects (and `with` bookkeeping) hold: dropping the last one ends the watching
/// task, which drops the lease, which the core then releases in the background.
pub(crate) struct RedlockHold(Arc<RedlockCell>);

impl std::ops::Deref for RedlockHold {
    type Target = RedlockCell;
    fn deref(&self) -> &RedlockCell {
        &self.0
    }
}

impl RedlockHold {
    /// Keeps `lease` (just granted) and starts watching it for loss.
    pub(crate) fn new(lease: CoreRedlockLease, client: Arc<RedlockHandle>) -> Arc<Self> {
        let (status_tx, status) = watch::channel(Status::Held);
        let (stop, mut stopped) = watch::channel(false);
        let closed = client.closed();
        let cell = Arc::new(RedlockCell {
            lease,
            client,
            released_by_user: AtomicBool::new(false),
            status,
            stop,
        });
        let watched = cell.clone();
        spawn(async move {
            let outcome = tokio::select! {
                biased;
                reason = watched.lease.lost() => Status::Lost(reason),
                _ = stopped.wait_for(|s| *s) => Status::Ended,
                () = closed => Status::Ended,
            };
            status_tx.send_replace(outcome);
        });
        Arc::new(RedlockHold(cell))
    }
}

impl Drop for RedlockHold {
    fn drop(&mut self) {
        self.0.stop.send_replace(true);
    }
}

impl RedlockCell {
    /// `lease.release()`: `True` if a majority still held it.
    pub(crate) async fn release(&self) -> Result<bool, Error> {
        self.client.owner.check()?;
        self.released_by_user.store(true, Ordering::Release);
        let released = self.lease.release().await;
        self.stop.send_replace(true);
        released
    }

    pub(crate) async fn extend(&self, duration: Duration) -> Result<(), Error> {
        self.client.owner.check()?;
        self.lease.extend(duration).await
    }

    /// Leaving a `with` block: as for every lease (`shared::exit_result`).
    pub(crate) async fn exit(&self, exception_in_flight: bool) -> Result<(), Error> {
        if self.released_by_user.load(Ordering::Acquire) {
            return Ok(());
        }
        let released = self.release().await;
        shared::exit_result(released, exception_in_flight, || self.lost_reason())
    }

    /// Why the lease was lost, if it was: the core's loss signal, polled once without waiting.
    pub(crate) fn lost_reason(&self) -> Option<Error> {
        let lost = std::pin::pin!(self.lease.lost());
        match lost.poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(reason) => Some(reason),
            Poll::Pending => None,
        }
    }

    /// Resolves with the reason once the lease is lost, or `None` once it ended otherwise.
    /// Does not keep the lease alive.
    pub(crate) fn lost_signal(&self) -> impl Future<Output = Option<Error>> + Send + 'static {
        let mut status = self.status.clone();
        async move {
            let s = status.wait_for(|s| !matches!(s, Status::Held)).await.ok()?;
            match &*s {
                Status::Lost(e) => Some(e.clone()),
                _ => None,
            }
        }
    }

    pub(crate) fn repr(&self, py: Python<'_>, class: &str) -> PyResult<String> {
        Ok(format!(
            "<{class} name={} held={}>",
            shared::py_repr(py, self.lease.name())?,
            if self.lease.is_held() {
                "True"
            } else {
                "False"
            }
        ))
    }
}
