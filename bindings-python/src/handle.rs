//! The connections behind every Python handle (a `Client`'s or a `Redlock`'s), and the registry
//! that closes the live ones at exit.
//!
//! A lease still held when the interpreter exits, or a wait abandoned by the Ctrl-C that ends
//! the program, must reach the server before the process is gone: otherwise the lock stays
//! held until its lease runs out (30 s by default) or a dead waiter's queue entry is granted.
//! `lockgate/__init__.py` registers [`close_all`] with `atexit`; it closes every client still
//! referenced by any handle (client, lock or lease), which releases leases and cancels waits.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use lockgate_core::native::{Client as CoreClient, ClientOptions, Redlock, RedlockOptions};
use lockgate_core::{Error, ErrorKind};
use pyo3::prelude::*;

use crate::runtime::{block_on, runtime, Owner};

/// Longest time the exit hook waits for every client to close (each gives itself 2 s).
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// A handle the exit hook closes.
trait Live: Send + Sync {
    fn owner(&self) -> Owner;
    fn close_live(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

static LIVE: Mutex<Vec<Weak<dyn Live>>> = Mutex::new(Vec::new());

/// What a [`Handle`] connects: the core's `Client` (one server or cluster) or its `Redlock`
/// (N independent masters).
pub(crate) trait Backend: Clone + Send + Sync + 'static {
    type Options: Clone + Send + Sync + 'static;
    fn connect(options: Self::Options) -> impl Future<Output = Result<Self, Error>> + Send;
    fn close(&self) -> impl Future<Output = ()> + Send + '_;
    fn key_prefix(options: &Self::Options) -> &str;
}

impl Backend for CoreClient {
    type Options = ClientOptions;
    fn connect(options: ClientOptions) -> impl Future<Output = Result<Self, Error>> + Send {
        options.connect()
    }
    fn close(&self) -> impl Future<Output = ()> + Send + '_ {
        CoreClient::close(self)
    }
    fn key_prefix(options: &ClientOptions) -> &str {
        &options.key_prefix
    }
}

impl Backend for Redlock {
    type Options = RedlockOptions;
    fn connect(options: RedlockOptions) -> impl Future<Output = Result<Self, Error>> + Send {
        options.connect()
    }
    fn close(&self) -> impl Future<Output = ()> + Send + '_ {
        Redlock::close(self)
    }
    fn key_prefix(options: &RedlockOptions) -> &str {
        &options.config.key_prefix
    }
}

/// One core connection, made at once (sync API) or on first use (asyncio API).
pub(crate) struct Handle<B: Backend> {
    options: B::Options,
    pub owner: Owner,
    conn: tokio::sync::OnceCell<B>,
    closed: AtomicBool,
}

/// The handle of a `Client` (one server or one cluster).
pub(crate) type ClientHandle = Handle<CoreClient>;
/// The handle of a `Redlock` (N independent masters).
pub(crate) type RedlockHandle = Handle<Redlock>;

impl<B: Backend> Live for Handle<B> {
    fn owner(&self) -> Owner {
        self.owner
    }

    fn close_live(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>> {
        Box::pin(self.close())
    }
}

impl<B: Backend> Handle<B> {
    fn register(options: B::Options, conn: Option<B>) -> Arc<Self> {
        let handle = Arc::new(Handle {
            options,
            owner: Owner::current(),
            conn: tokio::sync::OnceCell::new_with(conn),
            closed: AtomicBool::new(false),
        });
        let weak: Weak<dyn Live> = Arc::downgrade(&handle) as Weak<dyn Live>;
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(weak);
        handle
    }

    /// A handle that connects on first use (`options` already validated).
    pub(crate) fn lazy(options: B::Options) -> Arc<Self> {
        Self::register(options, None)
    }

    /// A handle over a connection that is already made.
    pub(crate) fn connected(options: B::Options, conn: B) -> Arc<Self> {
        Self::register(options, Some(conn))
    }

    pub(crate) fn key_prefix(&self) -> &str {
        B::key_prefix(&self.options)
    }

    /// The connected core handle (connecting now if this is the first use).
    pub(crate) async fn client(&self) -> Result<B, Error> {
        self.owner.check()?;
        let closed = || Error::new(ErrorKind::Closed, "the client is closed");
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        let client = self
            .conn
            .get_or_try_init(|| B::connect(self.options.clone()))
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
    let handles: Vec<Arc<dyn Live>> = {
        let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        live.iter().filter_map(Weak::upgrade).collect()
    };
    let me = Owner::current();
    let handles: Vec<_> = handles.into_iter().filter(|h| h.owner().same(me)).collect();
    if handles.is_empty() {
        return Ok(());
    }
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|h| runtime().spawn(async move { h.close_live().await }))
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
