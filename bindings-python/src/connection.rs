//! The core client behind every Python client, connected at once (sync) or on first use
//! (asyncio), and the registry that closes the live ones at exit.
//!
//! A lease still held when the interpreter exits, or a wait abandoned by the Ctrl-C that ends
//! the program, must reach the server before the process is gone: otherwise the lock stays
//! held until its lease runs out. `lockgate/__init__.py` registers [`_close_all`] with
//! `atexit`; it closes every connection some handle (client, lock or lease) still references.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use lockgate_core::exit::EXIT_GRACE;
use lockgate_core::{Error, ErrorKind};
use pyo3::prelude::*;
use tokio::sync::OnceCell;

use crate::api::Api;
use crate::runtime::{block_on, lock_mutex, runtime, Process};
use lockgate_core::native::{Client, ClientOptions};

static LIVE: Mutex<Vec<Weak<Connection>>> = Mutex::new(Vec::new());

/// Connects a core client whose telemetry goes to Python's `logging` and the OpenTelemetry sink
/// (see `telemetry.rs`).
async fn connect(options: ClientOptions) -> Result<Client, Error> {
    let client = options.connect().await?;
    client.on_telemetry(crate::telemetry::to_logging())?;
    client.on_telemetry_when_idle(crate::telemetry::to_sink())?;
    Ok(client)
}

/// One core client of one Python client, shared by its locks and leases.
pub(crate) struct Connection {
    /// Validated; what the client shows before it is connected (URL, prefix, capabilities).
    pub(crate) options: ClientOptions,
    /// The URL with passwords redacted.
    pub(crate) url: String,
    /// The Python API of the client and of everything made from it.
    pub(crate) api: Api,
    pub(crate) process: Process,
    client: OnceCell<Client>,
    closed: AtomicBool,
}

impl Connection {
    /// A connection made on first use (`options` validated), registered for the exit hook.
    pub(crate) fn new(options: ClientOptions, url: String, api: Api) -> Arc<Self> {
        let conn = Arc::new(Connection {
            options,
            url,
            api,
            process: Process::current(),
            client: OnceCell::new(),
            closed: AtomicBool::new(false),
        });
        let mut live = lock_mutex(&LIVE);
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&conn));
        conn
    }

    /// Whether this client's backend prefixes its keys (the Redis family).
    pub(crate) fn has_key_prefix(&self) -> bool {
        self.options.backend().is_ok_and(|b| b.has_key_prefix())
    }

    /// The connected core client (connecting now on first use); `CLOSED` once closed or in
    /// another process than the one that made it.
    pub(crate) async fn client(&self) -> Result<Client, Error> {
        self.check()?;
        let client = self.client.get_or_try_init(|| connect(self.options.clone())).await?.clone();
        if self.closed.load(Ordering::Acquire) {
            client.close().await; // closed while this call was connecting
            return Err(closed());
        }
        Ok(client)
    }

    /// `CLOSED` once closed or in another process than the one that made it.
    pub(crate) fn check(&self) -> Result<(), Error> {
        self.process.check()?;
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        Ok(())
    }

    /// A cell for a core handle made by `make`: at once if the client is connected already (so
    /// what its backend cannot do, `UNSUPPORTED`, raises at the call making the Python handle),
    /// else on first use ([`handle`](Self::handle)).
    pub(crate) fn handle_now<T>(&self, make: impl FnOnce(&Client) -> Result<T, Error>) -> Result<OnceCell<T>, Error> {
        Ok(match self.client.get() {
            Some(c) => OnceCell::new_with(Some(make(c)?)),
            None => OnceCell::new(),
        })
    }

    /// The core handle in `cell`, made by `make` (connecting first) on first use.
    pub(crate) async fn handle<'a, T>(
        &self,
        cell: &'a OnceCell<T>,
        make: impl FnOnce(&Client) -> Result<T, Error>,
    ) -> Result<&'a T, Error> {
        self.check()?;
        if let Some(handle) = cell.get() {
            return Ok(handle); // the common case: no clone, no await
        }
        let client = self.client().await?;
        cell.get_or_try_init(|| async { make(&client) }).await
    }

    /// Releases every lease and cancels every wait; later calls fail with `CLOSED`.
    pub(crate) async fn close(&self) -> Result<(), Error> {
        self.closed.store(true, Ordering::Release);
        if let (Ok(()), Some(c)) = (self.process.check(), self.client.get()) {
            c.close().await;
        }
        Ok(())
    }
}

fn closed() -> Error {
    Error::new(ErrorKind::Closed, "the client is closed")
}

/// Closes every client of this process that some handle still references (the exit hook).
#[pyfunction]
pub(crate) fn _close_all(py: Python<'_>) -> PyResult<()> {
    let tasks: Vec<_> = lock_mutex(&LIVE)
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|c| c.process.check().is_ok())
        .map(|c| runtime().spawn(async move { c.close().await }))
        .collect();
    if tasks.is_empty() {
        return Ok(());
    }
    let all = async move {
        for t in tasks {
            let _ = t.await;
        }
    };
    block_on(py, async move {
        let _ = tokio::time::timeout(EXIT_GRACE, all).await;
        Ok(())
    })
}
