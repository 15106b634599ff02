//! What a non-reentrant handle holds: at most one live lease per [`Owner`], so that no caller
//! ever waits for itself while other callers sharing the handle queue their turn.
//!
//! An owner is the caller's identity as its binding knows it: a thread (Python's sync API, a
//! Java thread), an asyncio task, or the handle itself (the Rust API by default, and Node,
//! where async flows have no identity). Acquiring through a non-reentrant handle (or a clone
//! of it) whose live lease belongs to the *same* owner would queue behind that owner's own
//! lease and wait until its timeout (for ever without one). Instead the acquire fails at once
//! with `ALREADY_HELD` and sends nothing. An acquire that is still waiting when another acquire
//! of the same owner through the same handle wins ends the same way (its wait is withdrawn), so
//! an owner never holds two leases through one handle either. Other owners are not refused:
//! they wait their turn like any other contender (as with `threading.Lock`, kazoo's `Lock` or
//! redis-py's thread-local token). A lease that is released, dropped, lost or past its validity
//! frees its owner's place.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use super::lease_state::{LeaseState, LeaseWatch};
use crate::engine::LeaseId;
use crate::error::{Error, ErrorKind, Result};

/// Who acquires through a shared lock handle: the unit that must never wait for its own lease.
/// Bindings pass the caller's identity; the id only needs to be unique among live callers of
/// the same kind (a thread id, a task's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Owner {
    kind: OwnerKind,
    id: u64,
}

/// What kind of caller an [`Owner`] is (the error message names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum OwnerKind {
    Handle,
    Thread,
    Task,
}

impl Owner {
    /// The handle itself: every caller of the handle (and of its clones) is one owner. The
    /// default of the Rust API, and of bindings whose callers have no identity (Node).
    pub const HANDLE: Owner = Owner { kind: OwnerKind::Handle, id: 0 };

    /// A thread, by an id unique among the process's live threads.
    pub fn thread(id: u64) -> Owner {
        Owner { kind: OwnerKind::Thread, id }
    }

    /// A task (an asyncio task, a tokio task), by an id unique among live tasks.
    pub fn task(id: u64) -> Owner {
        Owner { kind: OwnerKind::Task, id }
    }

    /// The calling thread, by an id this process never hands out twice (a thread's own id or
    /// address may be reused, and a dead thread's live lease must not pass for a new thread's).
    pub fn current_thread() -> Owner {
        thread_local! {
            static ID: u64 = next_id();
        }
        Owner::thread(ID.with(|id| *id))
    }

    /// A new task, by an id this process never hands out twice ([`Owner::id`] to find it again).
    pub fn new_task() -> Owner {
        Owner::task(next_id())
    }

    /// The id this owner was made with.
    pub fn id(self) -> u64 {
        self.id
    }
}

/// Ids for [`Owner::current_thread`] and [`Owner::new_task`], from one counter.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// The leases a handle holds, one per owner, shared by the handle's clones and its leases.
#[derive(Clone, Default)]
pub(crate) struct Holder(Arc<watch::Sender<Vec<Held>>>);

struct Held {
    id: LeaseId,
    owner: Owner,
    state: watch::Receiver<LeaseState>,
}

impl Held {
    fn is_live_for(&self, owner: Owner) -> bool {
        self.owner == owner && LeaseWatch(self.state.clone()).is_held()
    }
}

fn already_held(name: &str, owner: Owner) -> Error {
    let message = match owner.kind {
        OwnerKind::Handle => format!(
            "this handle already holds {name:?}; it is not reentrant, so acquiring it again would wait for itself \
             (release the lease first, use a reentrant lock, or take another handle for a second hold)"
        ),
        OwnerKind::Thread => format!(
            "this thread already holds {name:?} through this handle; it is not reentrant, so acquiring it again \
             from the same thread would wait for itself (other threads sharing the handle wait their turn; \
             release the lease first, or use a reentrant lock)"
        ),
        OwnerKind::Task => format!(
            "this task already holds {name:?} through this handle; it is not reentrant, so acquiring it again \
             from the same task would wait for itself (other tasks sharing the handle wait their turn; \
             release the lease first, or use a reentrant lock)"
        ),
    };
    Error::new(ErrorKind::AlreadyHeld, message)
}

impl Holder {
    /// `ALREADY_HELD` if `owner` holds a live lease through the handle now.
    pub(crate) fn check(&self, name: &str, owner: Owner) -> Result<()> {
        if self.0.borrow().iter().any(|h| h.is_live_for(owner)) {
            return Err(already_held(name, owner));
        }
        Ok(())
    }

    /// Runs `acquire` (a wait of `owner` through this handle), ending it with `ALREADY_HELD`
    /// if another acquire of the same owner wins meanwhile. Dropping `acquire` withdraws its
    /// wait.
    pub(crate) async fn race<T>(&self, name: &str, owner: Owner, acquire: impl Future<Output = Result<T>>) -> Result<T> {
        let mut changes = self.0.subscribe();
        tokio::select! {
            biased;
            r = acquire => r,
            _ = changes.wait_for(|held| held.iter().any(|h| h.is_live_for(owner))) => Err(already_held(name, owner)),
        }
    }

    /// Records `id` as `owner`'s lease; `ALREADY_HELD` (nothing recorded) if another live
    /// lease of the same owner got there first: the caller gives its new lease back.
    pub(crate) fn hold(&self, name: &str, owner: Owner, id: LeaseId, state: watch::Receiver<LeaseState>) -> Result<()> {
        let mut taken = false;
        self.0.send_if_modified(|held| {
            if held.iter().any(|h| h.is_live_for(owner)) {
                taken = true;
                return false;
            }
            // Leases no longer live free their owners' places here too (a lost lease is never
            // released through the handle).
            held.retain(|h| LeaseWatch(h.state.clone()).is_held());
            held.push(Held { id, owner, state });
            true
        });
        if taken {
            Err(already_held(name, owner))
        } else {
            Ok(())
        }
    }

    /// Frees `id`'s place (the lease is being released or dropped).
    pub(crate) fn free(&self, id: LeaseId) {
        self.0.send_if_modified(|held| {
            let before = held.len();
            held.retain(|h| h.id != id);
            held.len() != before
        });
    }
}

impl fmt::Debug for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held = self.0.borrow().iter().filter(|h| LeaseWatch(h.state.clone()).is_held()).count();
        f.debug_struct("Holder").field("held", &held).finish()
    }
}
