//! The client behind every Python handle, and the registry that closes the live ones at exit.
//!
//! A lease still held when the interpreter exits, or a wait abandoned by the Ctrl-C that ends
//! the program, must reach the server before the process is gone: otherwise the lock stays
//! held until its lease runs out (30 s by default) or a dead waiter's queue entry is granted.
//! `lockgate/__init__.py` registers [`close_all`] with `atexit`; it closes every client still
//! referenced by any handle (client, lock or lease), which releases leases and cancels waits.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use lockgate_core::native::{Client as CoreClient, ClientOptions};
use lockgate_core::{Error, ErrorKind};
use pyo3::prelude::*;

use crate::runtime::{block_on, runtime, Owner};

/// Longest time the exit hook waits for every client to close (each gives itself 2 s).
const EXIT_GRACE: Duration = Duration::from_secs(3);

static LIVE: Mutex<Vec<Weak<ClientHandle>>> = Mutex::new(Vec::new());

/// One core client, connected at once (sync API) or on first use (asyncio API).
pub(crate) struct ClientHandle {
    options: ClientOptions,
    /// The URL with the password redacted.
    pub url: String,
    pub owner: Owner,
    conn: tokio::sync::OnceCell<CoreClient>,
    closed: AtomicBool,
}

impl ClientHandle {
    fn register(handle: ClientHandle) -> Arc<Self> {
        let handle = Arc::new(handle);
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&handle));
        handle
    }

    /// A handle that connects on first use (`options` already validated).
    pub(crate) fn lazy(options: ClientOptions, url: String) -> Arc<Self> {
        Self::register(ClientHandle {
            options,
            url,
            owner: Owner::current(),
            conn: tokio::sync::OnceCell::new(),
            closed: AtomicBool::new(false),
        })
    }

    /// A handle over a client that is already connected.
    pub(crate) fn connected(options: ClientOptions, client: CoreClient) -> Arc<Self> {
        Self::register(ClientHandle {
            options,
            url: client.url(),
            owner: Owner::current(),
            conn: tokio::sync::OnceCell::new_with(Some(client)),
            closed: AtomicBool::new(false),
        })
    }

    pub(crate) fn key_prefix(&self) -> &str {
        &self.options.key_prefix
    }

    /// The connected core client (connecting now if this is the first use).
    pub(crate) async fn client(&self) -> Result<CoreClient, Error> {
        self.owner.check()?;
        let closed = || Error::new(ErrorKind::Closed, "the client is closed");
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let client = self
            .conn
            .get_or_try_init(|| self.options.clone().connect())
            .await?
            .clone();
        if self.closed.load(Ordering::Acquire) {
            // Closed while this call was connecting.
            client.close().await;
            return Err(closed());
        }
        Ok(client)
    }

    /// Releases every lease and cancels every wait; later calls fail with `CLOSED`.
    pub(crate) async fn close(&self) {
        self.closed.store(true, Ordering::Release);
        if self.owner.check().is_ok() {
            if let Some(c) = self.conn.get() {
                c.close().await;
            }
        }
    }
}

/// Closes every client of this process that some handle still references (the exit hook).
#[pyfunction]
pub(crate) fn _close_all(py: Python<'_>) -> PyResult<()> {
    let handles: Vec<Arc<ClientHandle>> = {
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.iter().filter_map(Weak::upgrade).collect()
    };
    let me = Owner::current();
    let handles: Vec<_> = handles.into_iter().filter(|h| h.owner.same(me)).collect();
    if handles.is_empty() {
        return Ok(());
    }
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|h| runtime().spawn(async move { h.close().await }))
        .collect();
    block_on(py, async move {
        let _ = tokio::time::timeout(EXIT_GRACE, async {
            for t in tasks {
                let _ = t.await;
            }
        })
        .await;
        Ok(())
    })
}
