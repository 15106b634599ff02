//! A non-reentrant handle's [`Holding`] (one live lease per [`Owner`], the rule written once in
//! `crate::holding`) shared by the handle's clones and its leases, behind a tokio watch so that
//! an acquire still waiting ends as soon as another acquire of the same owner wins.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use tokio::sync::watch;

use super::lease_state::{LeaseState, LeaseWatch};
use crate::engine::LeaseId;
use crate::error::Result;
use crate::holding::{already_held, Holding, Owner};
use crate::primitive::Primitive;

/// The leases a handle holds, one per owner, shared by the handle's clones and its leases.
#[derive(Clone, Default)]
pub(crate) struct Holder(Arc<watch::Sender<Holding<watch::Receiver<LeaseState>>>>);

/// Whether a recorded lease is live: its watch says it is held.
fn live(_: LeaseId, state: &watch::Receiver<LeaseState>) -> bool {
    LeaseWatch(state.clone()).is_held()
}

impl Holder {
    /// `ALREADY_HELD` if `owner` holds a live lease through the handle now.
    pub(crate) fn check(&self, name: &str, primitive: &Primitive, owner: Owner) -> Result<()> {
        self.0.borrow().check(name, primitive, owner, live)
    }

    /// Runs `acquire` (a wait of `owner` through this handle), ending it with `ALREADY_HELD`
    /// if another acquire of the same owner wins meanwhile. Dropping `acquire` withdraws its
    /// wait.
    pub(crate) async fn race<T>(
        &self,
        name: &str,
        primitive: &Primitive,
        owner: Owner,
        acquire: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let mut changes = self.0.subscribe();
        tokio::select! {
            biased;
            r = acquire => r,
            _ = changes.wait_for(|held| held.holds(owner, live)) => Err(already_held(name, primitive, owner)),
        }
    }

    /// Records `id` as `owner`'s lease; `ALREADY_HELD` (nothing recorded) if another live
    /// lease of the same owner got there first: the caller gives its new lease back.
    pub(crate) fn hold(
        &self,
        name: &str,
        primitive: &Primitive,
        owner: Owner,
        id: LeaseId,
        state: watch::Receiver<LeaseState>,
    ) -> Result<()> {
        let mut result = Ok(());
        self.0.send_if_modified(|held| {
            result = held.hold(name, primitive, owner, id, state, live);
            result.is_ok()
        });
        result
    }

    /// Frees `id`'s place (the lease is being released or dropped).
    pub(crate) fn free(&self, id: LeaseId) {
        self.0.send_if_modified(|held| held.free(id));
    }
}

impl fmt::Debug for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Holder").field("held", &self.0.borrow().live(live)).finish()
    }
}
