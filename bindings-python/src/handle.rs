//! What a Python lock or election object stands for, in either API: [`LockSpec`] and
//! [`ElectionSpec`], each validated when the object is made, with the core's handle (made once
//! the client is connected, see `Connection::handle`).

use std::future::Future;
use std::sync::Arc;

use lockgate_core::options::{validate_name, validate_primitive, LockOptions};
use lockgate_core::time::Duration;
use lockgate_core::{Error, ErrorKind, LeaderInfo, Primitive};
use pyo3::prelude::*;
use tokio::sync::OnceCell;

use crate::connection::Connection;
use crate::errors::IntoPyResult;
use crate::lease::{Deliver, LeaseCell};
use lockgate_core::native::{self, Client, Holds, Owner};

/// A lock handle: what it acquires, the core's handle (kept, so a reentrant handle's holds are
/// counted across acquisitions) and the leases it holds for its own `release()`.
pub(crate) struct LockSpec {
    pub(crate) conn: Arc<Connection>,
    pub(crate) name: String,
    pub(crate) primitive: Primitive,
    pub(crate) reentrant: bool,
    pub(crate) options: LockOptions,
    core: OnceCell<native::Lock>,
    pub(crate) holds: Arc<Holds>,
}

impl LockSpec {
    /// Validated now, before any network call (also for a client not connected yet).
    pub(crate) fn new(
        py: Python<'_>,
        conn: &Arc<Connection>,
        name: &str,
        primitive: Primitive,
        reentrant: bool,
        options: LockOptions,
    ) -> PyResult<Arc<Self>> {
        validate_name(name).and_then(|()| validate_primitive(&primitive)).py(py)?;
        let (conn, name, core, holds) = (conn.clone(), name.into(), OnceCell::new(), Arc::default());
        let mut spec = LockSpec { conn, name, primitive, reentrant, options, core, holds };
        spec.core = spec.conn.handle_now(|c| spec.make(c)).py(py)?;
        Ok(Arc::new(spec))
    }

    fn make(&self, client: &Client) -> Result<native::Lock, Error> {
        client.primitive(&self.name, self.primitive.clone(), self.options.clone(), self.reentrant)
    }

    /// The core's handle acting for `owner` (connecting first on a client's first use).
    pub(crate) async fn core(&self, owner: Owner) -> Result<native::Lock, Error> {
        Ok(self.conn.handle(&self.core, |c| self.make(c)).await?.as_owner(owner))
    }

    /// `owner`'s acquire (`None`: the lock's default wait), ended by `cancel` through the core's
    /// explicit cancel: `CANCELLED` once what the wait left on the server is removed.
    pub(crate) async fn acquire(
        &self,
        owner: Owner,
        timeout: Option<Duration>,
        cancel: impl Future<Output = ()>,
    ) -> Result<Arc<LeaseCell>, Error> {
        let mut cancel = std::pin::pin!(cancel);
        // Connecting is not a wait on the server: a cancel then ends it at once.
        let core = tokio::select! {
            biased;
            core = self.core(owner) => core?,
            () = &mut cancel => return Err(Error::new(ErrorKind::Cancelled, "the wait was cancelled by lock.cancel()")),
        };
        Ok(LeaseCell::new(core.acquire_unless(timeout, cancel).await?, &self.conn))
    }

    /// `cell` on its way to Python, kept by this handle as `owner`'s once handed over.
    pub(crate) fn deliver(&self, owner: Owner, cell: Arc<LeaseCell>) -> Deliver {
        Deliver(cell, Some((owner, self.holds.clone())))
    }
}

/// An election: its name and options, and the core's handle.
pub(crate) struct ElectionSpec {
    pub(crate) conn: Arc<Connection>,
    pub(crate) name: String,
    pub(crate) options: LockOptions,
    core: OnceCell<native::Election>,
}

impl ElectionSpec {
    pub(crate) fn new(py: Python<'_>, conn: &Arc<Connection>, name: &str, options: LockOptions) -> PyResult<Arc<Self>> {
        validate_name(name).py(py)?;
        let core = conn.handle_now(|c| c.election(name, options.clone())).py(py)?;
        Ok(Arc::new(ElectionSpec { conn: conn.clone(), name: name.into(), options, core }))
    }

    async fn core(&self) -> Result<&native::Election, Error> {
        self.conn.handle(&self.core, |c| c.election(&self.name, self.options.clone())).await
    }

    /// The election's snapshot (see `Election::inspect`).
    pub(crate) async fn inspect(&self) -> Result<lockgate_core::inspect::Snapshot, Error> {
        self.core().await?.inspect().await
    }

    /// `None`: wait until elected.
    pub(crate) async fn campaign(&self, value: &str, timeout: Option<Duration>) -> Result<Arc<LeaseCell>, Error> {
        let lease = self.core().await?.campaign(value, timeout).await?;
        Ok(LeaseCell::new(lease, &self.conn))
    }

    pub(crate) async fn try_campaign(&self, value: &str) -> Result<Option<Arc<LeaseCell>>, Error> {
        let lease = self.core().await?.try_campaign(value).await?;
        Ok(lease.map(|l| LeaseCell::new(l, &self.conn)))
    }

    pub(crate) async fn observe(&self) -> Result<Option<LeaderInfo>, Error> {
        self.core().await?.observe().await
    }
}
