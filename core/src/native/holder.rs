//! What a non-reentrant handle holds: at most one live lease, so that it never waits for itself.
//!
//! Acquiring through a non-reentrant handle (or a clone of it) that already holds a live lease
//! would queue behind its own lease and wait until its timeout (for ever without one). Instead
//! the acquire fails at once with `ALREADY_HELD` and sends nothing. An acquire that is still
//! waiting when another acquire through the same handle wins ends the same way (its wait is
//! withdrawn), so a handle never holds two leases either: a second permit of a semaphore takes a
//! second handle. A lease that is released, dropped, lost or past its validity frees the handle.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

use super::lease_state::{LeaseState, LeaseWatch};
use crate::engine::LeaseId;
use crate::error::{Error, ErrorKind, Result};

/// The lease a handle holds, shared by the handle's clones and its leases.
#[derive(Clone, Default)]
pub(crate) struct Holder(Arc<watch::Sender<Option<Held>>>);

struct Held {
    id: LeaseId,
    state: watch::Receiver<LeaseState>,
}

impl Held {
    fn is_live(&self) -> bool {
        LeaseWatch(self.state.clone()).is_held()
    }
}

fn already_held(name: &str) -> Error {
    Error::new(
        ErrorKind::AlreadyHeld,
        format!(
            "this handle already holds {name:?}; it is not reentrant, so acquiring it again would wait for itself \
             (release the lease first, use a reentrant lock, or take another handle for a second hold)"
        ),
    )
}

impl Holder {
    /// `ALREADY_HELD` if the handle holds a live lease now.
    pub(crate) fn check(&self, name: &str) -> Result<()> {
        if self.0.borrow().as_ref().is_some_and(Held::is_live) {
            return Err(already_held(name));
        }
        Ok(())
    }

    /// Runs `acquire` (a wait through this handle), ending it with `ALREADY_HELD` if another
    /// acquire through the same handle wins meanwhile. Dropping `acquire` withdraws its wait.
    pub(crate) async fn race<T>(&self, name: &str, acquire: impl Future<Output = Result<T>>) -> Result<T> {
        let mut changes = self.0.subscribe();
        tokio::select! {
            biased;
            r = acquire => r,
            _ = changes.wait_for(|h| h.as_ref().is_some_and(Held::is_live)) => Err(already_held(name)),
        }
    }

    /// Records `id` as the handle's lease; `ALREADY_HELD` (nothing recorded) if another live
    /// lease got there first: the caller gives its new lease back.
    pub(crate) fn hold(&self, name: &str, id: LeaseId, state: watch::Receiver<LeaseState>) -> Result<()> {
        let mut taken = false;
        self.0.send_if_modified(|h| {
            if h.as_ref().is_some_and(Held::is_live) {
                taken = true;
                return false;
            }
            *h = Some(Held { id, state });
            true
        });
        if taken {
            Err(already_held(name))
        } else {
            Ok(())
        }
    }

    /// Frees the handle if it holds `id` (the lease is being released or dropped).
    pub(crate) fn free(&self, id: LeaseId) {
        self.0.send_if_modified(|h| {
            if h.as_ref().is_some_and(|held| held.id == id) {
                *h = None;
                return true;
            }
            false
        });
    }
}

impl fmt::Debug for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = self.0.borrow().as_ref().is_some_and(Held::is_live);
        f.debug_struct("Holder").field("held", &held).finish()
    }
}
