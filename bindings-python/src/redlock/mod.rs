//! Redlock over N independent masters (PROTOCOL.md §8): the argument conversion shared by the
//! blocking classes ([`sync_api`]: `lockgate.Redlock`,
//! `.RedlockLock`, `.RedlockLease`) and the asyncio ones ([`aio`]: `lockgate.aio.Redlock`, ...).
//!
//! As for `Client`, every method converts its arguments, calls the core's
//! `lockgate_core::native::Redlock` and maps errors through `errors::to_py`; the quorum, the
//! validity, retries, renewal and undo all happen in the core.

pub(crate) mod aio;
pub(crate) mod sync_api;

use std::path::PathBuf;

use lockgate_core::native::{RedisUrl, RedlockOptions};
use lockgate_core::options::{LockOptions, DEFAULT_LEASE};
use lockgate_core::random::OsRandom;
use lockgate_core::redlock::RedlockEngine;
use lockgate_core::time::Duration;
use lockgate_core::Error;
use pyo3::prelude::*;

use crate::errors::IntoPyResult;
use crate::shared::{self, secs, to_secs, Secs, Text};

/// The keyword arguments of `Redlock(urls, *, ...)` (sync and asyncio alike).
pub(crate) struct RedlockArgs {
    pub key_prefix: Option<Text>,
    pub max_lease: Option<Secs>,
    pub node_timeout: Option<Secs>,
    pub retry_delay: Option<Secs>,
    pub retry_jitter: Option<Secs>,
    pub drift_factor: Option<Secs>,
    pub drift_fixed: Option<Secs>,
    pub tls_ca_file: Option<PathBuf>,
    pub connect_timeout: Option<Secs>,
    pub response_timeout: Option<Secs>,
}

/// `Redlock(urls, *, ...)` → core options, validated by the core (empty or duplicate URLs, bad
/// durations, `drift_factor` out of range). Reading the CA file is the only I/O here.
pub(crate) fn redlock_options(
    py: Python<'_>,
    urls: Vec<String>,
    args: RedlockArgs,
) -> PyResult<RedlockOptions> {
    let mut opts = RedlockOptions::new(urls);
    let config = &mut opts.config;
    if let Some(p) = args.key_prefix {
        config.key_prefix = p.0;
    }
    let set = |slot: &mut Duration, what: &str, value: Option<Secs>| -> PyResult<()> {
        if let Some(v) = value {
            *slot = secs(what, v.0).py(py)?;
        }
        Ok(())
    };
    if let Some(v) = args.max_lease {
        config.max_lease = shared::lease_secs("max_lease", v.0).py(py)?;
    }
    set(&mut config.node_timeout, "node_timeout", args.node_timeout)?;
    set(&mut config.retry_delay, "retry_delay", args.retry_delay)?;
    set(&mut config.retry_jitter, "retry_jitter", args.retry_jitter)?;
    set(&mut config.drift_fixed, "drift_fixed", args.drift_fixed)?;
    if let Some(f) = args.drift_factor {
        config.drift_factor = f.0; // a ratio, read as a float like the seconds
    }
    set(
        &mut opts.connect_timeout,
        "connect_timeout",
        args.connect_timeout,
    )?;
    set(
        &mut opts.response_timeout,
        "response_timeout",
        args.response_timeout,
    )?;
    if let Some(path) = args.tls_ca_file {
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
    lease: Option<Secs>,
    renew: Option<bool>,
    timeout: Option<Secs>,
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
    Ok(format!(
        "<{class} name={} {}>",
        shared::py_repr(py, name)?,
        shared::options_repr(py, options)?,
    ))
}
