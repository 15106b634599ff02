//! [`Lease`]: proof of holding a lock, the same type for every backend.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::sync::{oneshot, watch};

use super::client::{closed, Client};
use super::holder::Holder;
use super::lease_state::{AtRiskSpells, LeaseState, LeaseWatch};
use super::message::{Acquired, Msg};
use crate::engine::LeaseId;
use crate::error::{Error, ErrorKind, Result};
use crate::options;
use crate::time::Duration;

/// Proof of holding a lock: carries the fencing token (where the backend gives one), extends,
/// releases and reports loss. Dropping it releases the lock (in the background).
pub struct Lease {
    client: Client,
    name: Arc<str>,
    pub(crate) id: LeaseId,
    fencing_token: Option<u64>,
    pub(crate) state: watch::Receiver<LeaseState>,
    released: AtomicBool,
    /// The non-reentrant handle this lease occupies, freed on release or drop.
    pub(crate) holder: Option<Holder>,
}

impl Lease {
    pub(crate) fn new(client: Client, name: Arc<str>, a: Acquired, holder: Option<Holder>) -> Self {
        Lease {
            client,
            name,
            id: a.lease,
            fencing_token: a.fencing_token,
            state: a.state,
            released: AtomicBool::new(false),
            holder,
        }
    }

    /// The name of the lock this lease holds.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Strictly greater than every fencing token issued before for this lock name. Pass it to the
    /// resource you protect and have it reject writes with a smaller token. `None` where the
    /// backend gives none (a Redlock: see its `fencing` capability).
    pub fn fencing_token(&self) -> Option<u64> {
        self.fencing_token
    }

    /// Whether the lease is certainly still held now (local view: renewed, not expired, not lost).
    pub fn is_held(&self) -> bool {
        self.watch().is_held()
    }

    /// Whether the lease is held but cannot be confirmed now (its server unreachable, its
    /// session disconnected, its renewals failing): it stays valid only for [`remaining`]
    /// unless contact returns first (then it is safe again) — finish or pause the protected
    /// work. A loss is still told as a loss.
    ///
    /// [`remaining`]: Self::remaining
    pub fn is_at_risk(&self) -> bool {
        self.watch().is_at_risk()
    }

    /// How long the lease is certainly still valid, if held.
    pub fn remaining(&self) -> Option<Duration> {
        self.watch().remaining()
    }

    /// The reason the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<Error> {
        self.watch().lost_reason()
    }

    /// Sets the remaining lease to `duration` if still held; `NOT_HELD` (and the lease is marked
    /// lost) if it expired or was taken over. Never re-acquires.
    pub async fn extend(&self, duration: Duration) -> Result<()> {
        options::validate_lease(duration)?;
        if self.released.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::NotHeld, "the lease was released"));
        }
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Extend {
            lease: self.id,
            duration,
            reply,
        })?;
        result.await.map_err(|_| closed())?
    }

    /// This lease's identity (its lock's name and kind, owner token and fencing token) as one
    /// opaque string, for another process to [`adopt`](Client::adopt): it then renews,
    /// extends and releases the same hold (PROTOCOL.md §17). Whoever has the string can release
    /// the lock: pass it only to a process you trust, never log it. `NOT_HELD` if the lease is
    /// no longer held; `UNSUPPORTED` for leadership and on backends whose entries live in the
    /// holder's session (ZooKeeper, etcd).
    pub async fn identity(&self) -> Result<String> {
        if self.released.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::NotHeld, "the lease was released"));
        }
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Export { lease: self.id, reply })?;
        result.await.map_err(|_| closed())?
    }

    /// Releases the lock (owner-only). `Ok(true)` if it was still held, `Ok(false)` if it had
    /// already expired or been taken over. A second call returns `Ok(false)`. A `CONNECTION`
    /// error means the release was not confirmed: the lease is no longer renewed and the release
    /// is retried in the background until it lands or the lease runs out.
    pub async fn release(&self) -> Result<bool> {
        if self.released.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        if let Some(h) = &self.holder {
            h.free(self.id);
        }
        let (reply, result) = oneshot::channel();
        self.client.send(Msg::Release {
            lease: self.id,
            reply: Some(reply),
        })?;
        result.await.map_err(|_| closed())?
    }

    /// Whether [`release`](Self::release) was called (whatever it answered).
    pub fn is_released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }

    /// Leaving a scope that held the lease (Python's `with`, Java's try-with-resources, Node's
    /// `withLock`): releases it. With no exception leaving the scope, a lease that was no longer
    /// held is `NOT_HELD` (its loss reason, if known): the protected work may have overlapped
    /// another holder. With one, nothing is raised on top of it (the lock is still released). A
    /// lease released inside the scope ends it quietly.
    pub async fn end_scope(&self, exception_in_flight: bool) -> Result<()> {
        if self.is_released() {
            return Ok(());
        }
        let released = self.release().await;
        if exception_in_flight {
            return Ok(()); // the exception leaving the scope is the caller's to see, not a release failure
        }
        let was_held = released?;
        let lost = self.lost_reason().map(|e| e.message().to_owned());
        crate::scope::leave(self.name(), self.fencing_token(), was_held, exception_in_flight, lost.as_deref())
    }

    /// Resolves with the reason when the lease is lost (renewal refused, deleted behind our
    /// back, expired). Stays pending forever if the lease is released normally.
    pub async fn lost(&self) -> Error {
        self.watch().lost().await
    }

    /// The loss signal as a `'static` future that does not keep the lease alive (for bindings
    /// that hand it to a callback or another task): `Some(reason)` when the lease is lost,
    /// `None` once it is released normally or its client is gone.
    pub fn lost_signal(&self) -> impl std::future::Future<Output = Option<Error>> + Send + 'static {
        self.watch().lost_signal()
    }

    /// The at-risk signal as a `'static` future that does not keep the lease alive: `true`
    /// once the lease is at risk (at once if it is now), `false` if it ends first (lost,
    /// released, its client gone).
    pub fn at_risk_signal(&self) -> impl std::future::Future<Output = bool> + Send + 'static {
        let mut spells = self.at_risk_spells();
        async move { spells.next().await }
    }

    /// Every spell at risk of this lease, one after another (the one under way first, if
    /// any), until it ends: for a listener told once per spell. Does not keep the lease alive.
    pub fn at_risk_spells(&self) -> AtRiskSpells {
        self.watch().at_risk_spells()
    }

    fn watch(&self) -> LeaseWatch {
        LeaseWatch(self.state.clone())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(h) = &self.holder {
            h.free(self.id);
        }
        if !self.released.load(Ordering::Acquire) {
            let _ = self.client.send(Msg::Release {
                lease: self.id,
                reply: None,
            });
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("name", &self.name)
            .field("fencing_token", &self.fencing_token)
            .field("held", &self.is_held())
            .finish()
    }
}
