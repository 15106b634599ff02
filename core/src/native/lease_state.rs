//! A lease as its handles see it: held until an instant, lost with a reason, or released.
//! The driver task owns the sending half; every lease handle (and the holder of a
//! non-reentrant lock) watches it.

use std::future::Future;

use tokio::sync::watch;

use crate::error::Error;
use crate::time::Duration;

/// What a lease handle can observe about its lease.
#[derive(Clone, Debug)]
pub(crate) enum LeaseState {
    /// Held until at least this local instant.
    Held(tokio::time::Instant),
    /// Lost, with the reason.
    Lost(Error),
    /// Released by its owner.
    Released,
}

/// A lease handle's view of its lease.
pub(crate) struct LeaseWatch(pub watch::Receiver<LeaseState>);

impl LeaseWatch {
    /// Held now by the local view (renewed, not expired, not lost).
    pub fn is_held(&self) -> bool {
        matches!(&*self.0.borrow(), LeaseState::Held(until) if tokio::time::Instant::now() < *until)
    }

    /// How long the lease is certainly still valid, if held.
    pub fn remaining(&self) -> Option<Duration> {
        match &*self.0.borrow() {
            LeaseState::Held(until) => until.checked_duration_since(tokio::time::Instant::now()).filter(|d| !d.is_zero()),
            _ => None,
        }
    }

    /// The reason the lease was lost, if it was.
    pub fn lost_reason(&self) -> Option<Error> {
        match &*self.0.borrow() {
            LeaseState::Lost(e) => Some(e.clone()),
            _ => None,
        }
    }

    /// `Some(reason)` when the lease is lost, `None` once it ends otherwise (released, client
    /// gone); a `'static` future that does not keep the lease handle alive.
    pub fn lost_signal(&self) -> impl Future<Output = Option<Error>> + Send + 'static {
        let mut rx = self.0.clone();
        async move {
            let state = rx.wait_for(|s| !matches!(s, LeaseState::Held(_))).await.ok()?;
            match &*state {
                LeaseState::Lost(e) => Some(e.clone()),
                _ => None,
            }
        }
    }

    /// The reason when the lease is lost; pending forever if it ends otherwise.
    pub async fn lost(&self) -> Error {
        let mut rx = self.0.clone();
        let lost = rx.wait_for(|s| matches!(s, LeaseState::Lost(_))).await.ok().and_then(|s| match &*s {
            LeaseState::Lost(e) => Some(e.clone()),
            _ => None,
        });
        match lost {
            Some(e) => e,
            None => std::future::pending().await,
        }
    }
}

